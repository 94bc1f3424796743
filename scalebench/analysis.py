"""From ok records to the summary table: throughput stats and scaling efficiency.

Efficiency(N) = throughput(N) / (N x throughput(1)) against
  - the same framework's one-worker run with the same step options (efficiency),
  - the best one-worker run of any framework (efficiency_vs_best),
  - one full node, per node, for multi-node runs (efficiency_per_node).
Which runs are the same configuration, and which run is a run's baseline (weak scaling: the
same per-worker batch; strong scaling: the same global batch), is identity's answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from scalebench import frameworks, identity, stats

SUMMARY_COLUMNS = [
    "model", "framework", "step_options", "world_size", "nodes", "batch_size", "global_batch",
    "image_size", "precision", "device", "scaling", "data", "trials",
    "images_per_sec", "ci95_low", "ci95_high", "median", "std", "rel_std", "noisy",
    "per_worker_images_per_sec", "startup_seconds",
    "efficiency", "efficiency_ci95_low", "efficiency_ci95_high",
    "efficiency_vs_best", "best_one_worker_framework", "efficiency_per_node",
]


def latest_ok(records: Iterable[dict]) -> list[dict]:
    """One train record per configuration (identity.config_key): the newest ok one."""
    chosen: dict[tuple, dict] = {}
    for r in records:
        if r.get("kind") == "train" and r.get("status") == "ok":
            chosen[identity.config_key(r)] = r
    return list(chosen.values())


def latest_allreduce_points(records: Iterable[dict]) -> list[dict]:
    """The newest ok allreduce record per measurement point (identity.allreduce_point_key),
    sorted by framework, device, dtype, nodes, workers and size."""
    chosen: dict[tuple, dict] = {}
    for r in records:
        if r.get("kind") == "allreduce" and r.get("status") == "ok":
            chosen[identity.allreduce_point_key(r)] = r
    return sorted(chosen.values(), key=lambda r: (r["framework"], r["device"], r["dtype"],
                                                  r["nodes"], r["world_size"], r["size_bytes"]))


def _row(r: dict, s: stats.Summary) -> dict:
    return {
        **{f: r[f] for f in ("model", "framework", "world_size", "nodes", "batch_size",
                             "global_batch", "image_size", "precision", "device", "scaling",
                             "data", "trials")},
        "device_kind": identity.device_kind(r),
        "options": frameworks.step_options(r["framework"], r.get("options")),
        "step_label": identity.step_label(r),
        "step_options": identity.step_label(r),
        "images_per_sec": s.mean, "ci95_low": s.ci_low, "ci95_high": s.ci_high,
        "median": s.median, "std": s.std, "rel_std": s.rel_std, "noisy": s.noisy,
        "per_worker_images_per_sec": s.mean / r["world_size"],
        "startup_seconds": r.get("startup_seconds"),
        "efficiency": None, "efficiency_ci95_low": None, "efficiency_ci95_high": None,
        "efficiency_vs_best": None, "best_one_worker_framework": None,
        "efficiency_per_node": None,
    }


def summary_rows(records: Sequence[dict]) -> list[dict]:
    """One row per configuration: throughput summary, efficiencies and the step options
    (`options`: as recorded; `step_label` and the `step_options` column: those that differ
    from the framework's defaults, in words, "" when none)."""
    runs = latest_ok(records)
    summaries = {id(r): stats.summarize(r["trial_images_per_sec"]) for r in runs}
    by_key = {identity.config_key(r): r for r in runs}
    best_one: dict[tuple, dict] = {}
    for r in runs:
        if r["world_size"] == 1 and r["nodes"] == 1:
            key = identity.best_baseline_key(r)
            best = best_one.get(key)
            if not best or summaries[id(r)].mean > summaries[id(best)].mean:
                best_one[key] = r
    rows = []
    for r in runs:
        s = summaries[id(r)]
        row = _row(r, s)
        base = by_key.get(identity.baseline_key(r))
        if base is r:  # a run against itself is exactly 1, with no uncertainty
            row.update(efficiency=1.0)
        elif base is not None:
            e = stats.efficiency(s, r["world_size"], summaries[id(base)])
            row.update(efficiency=e.value, efficiency_ci95_low=e.ci_low,
                       efficiency_ci95_high=e.ci_high)
        best = best_one.get(identity.best_baseline_key(r))
        if best:
            row["efficiency_vs_best"] = s.mean / (r["world_size"] * summaries[id(best)].mean)
            row["best_one_worker_framework"] = best["framework"]
        if r["nodes"] > 1:
            per_node = r["world_size"] // r["nodes"]
            node_base = by_key.get(identity.baseline_key(r, per_node))
            if node_base is not None:
                row["efficiency_per_node"] = s.mean / (r["nodes"] * summaries[id(node_base)].mean)
        rows.append(row)
    rows.sort(key=lambda x: (x["model"], x["precision"], x["framework"], x["step_label"],
                             x["world_size"], x["nodes"]))
    return rows


def summary_frame(records: Sequence[dict]):
    import pandas as pd

    return pd.DataFrame(summary_rows(records), columns=SUMMARY_COLUMNS)
