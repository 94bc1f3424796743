"""From ok train records to the summary table: throughput stats and scaling efficiency.

Efficiency(N) = throughput(N) / (N x throughput(1)) against
  - the same framework's one-worker run (efficiency),
  - the best one-worker run of any framework (efficiency_vs_best),
  - one full node, per node, for multi-node runs (efficiency_per_node).
Runs are compared only within the same configuration (model, batch, image size, precision,
device kind, scaling, data).
"""

from __future__ import annotations

from scalebench import stats

CONFIG_FIELDS = ("model", "batch_size", "image_size", "precision", "device", "scaling", "data")
SUMMARY_COLUMNS = [
    "model", "framework", "world_size", "nodes", "batch_size", "global_batch", "image_size",
    "precision", "device", "scaling", "data", "trials",
    "images_per_sec", "ci95_low", "ci95_high", "median", "std", "rel_std", "noisy",
    "per_worker_images_per_sec", "startup_seconds",
    "efficiency", "efficiency_ci95_low", "efficiency_ci95_high",
    "efficiency_vs_best", "best_one_worker_framework", "efficiency_per_node",
]


def config_key(record: dict) -> tuple:
    """Runs that may be compared across worker counts. Weak scaling keeps the per-worker batch,
    strong scaling the global batch, so that is the batch that must match."""
    device_kind = record.get("env", {}).get("device_kind", record.get("device"))
    batch = record.get("global_batch") if record.get("scaling") == "strong" else \
        record.get("batch_size")
    return tuple(batch if f == "batch_size" else record.get(f) for f in CONFIG_FIELDS) + \
        (device_kind,)


def latest_ok(records: list[dict]) -> list[dict]:
    """One record per configuration x framework x world size x nodes: the newest ok one."""
    chosen: dict[tuple, dict] = {}
    for r in records:
        if r.get("kind") == "train" and r.get("status") == "ok":
            chosen[config_key(r) + (r["framework"], r["world_size"], r["nodes"])] = r
    return list(chosen.values())


def summary_rows(records: list[dict]) -> list[dict]:
    runs = latest_ok(records)
    summaries = {id(r): stats.summarize(r["trial_images_per_sec"]) for r in runs}
    one_worker: dict[tuple, dict] = {}
    best_one: dict[tuple, dict] = {}
    full_node: dict[tuple, dict] = {}
    for r in runs:
        if r["world_size"] == 1:
            one_worker[config_key(r) + (r["framework"],)] = r
            best = best_one.get(config_key(r))
            if not best or r["images_per_sec"] > best["images_per_sec"]:
                best_one[config_key(r)] = r
        if r["nodes"] == 1:
            full_node[config_key(r) + (r["framework"], r["world_size"])] = r
    rows = []
    for r in runs:
        s = summaries[id(r)]
        row = {
            **{f: r[f] for f in ("model", "framework", "world_size", "nodes", "batch_size",
                                 "global_batch", "image_size", "precision", "device", "scaling",
                                 "data", "trials")},
            "images_per_sec": s.mean, "ci95_low": s.ci_low, "ci95_high": s.ci_high,
            "median": s.median, "std": s.std, "rel_std": s.rel_std, "noisy": s.noisy,
            "per_worker_images_per_sec": s.mean / r["world_size"],
            "startup_seconds": r.get("startup_seconds"),
            "efficiency": None, "efficiency_ci95_low": None, "efficiency_ci95_high": None,
            "efficiency_vs_best": None, "best_one_worker_framework": None,
            "efficiency_per_node": None,
        }
        base = one_worker.get(config_key(r) + (r["framework"],))
        if base is r:  # a run against itself is exactly 1, with no uncertainty
            row.update(efficiency=1.0)
        elif base is not None:
            e = stats.efficiency(s, r["world_size"], summaries[id(base)])
            row.update(efficiency=e.value, efficiency_ci95_low=e.ci_low,
                       efficiency_ci95_high=e.ci_high)
        best = best_one.get(config_key(r))
        if best:
            row["efficiency_vs_best"] = s.mean / (r["world_size"] * best["images_per_sec"])
            row["best_one_worker_framework"] = best["framework"]
        if r["nodes"] > 1:
            per_node = r["world_size"] // r["nodes"]
            node_base = full_node.get(config_key(r) + (r["framework"], per_node))
            if node_base is not None:
                row["efficiency_per_node"] = s.mean / (r["nodes"] * node_base["images_per_sec"])
        rows.append(row)
    rows.sort(key=lambda x: (x["model"], x["precision"], x["framework"], x["world_size"],
                             x["nodes"]))
    return rows


def summary_frame(records: list[dict]):
    import pandas as pd

    return pd.DataFrame(summary_rows(records), columns=SUMMARY_COLUMNS)
