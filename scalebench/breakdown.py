"""Where the efficiency went: a measured scaling-loss breakdown of each N-worker run.

Each N-worker record carries its synced windows and extra windows of the same step without
gradient synchronisation (the plain step on every rank before the framework wraps the model,
measure.py), each with the time spent waiting for batches. With B images per window (all
ranks) and the ideal N x one-worker throughput of the same configuration:

    compute     B / (median rank's no-sync window - its input wait)
    input       B / median rank's no-sync window
    slowest     B / slowest rank's no-sync window
    measured    the run's throughput (slowest rank's synced window)

    contention      1 - compute / ideal         host sharing: memory bandwidth, cores, PCIe
    input wait      (compute - input) / ideal   blocked on the input pipeline
    straggler       (input - slowest) / ideal   the slowest rank vs the median rank
    communication   (slowest - measured) / ideal  exposed gradient synchronisation
    efficiency      measured / ideal

The parts are differences of measured throughputs, so they add up to 100% of ideal; noise
shows as a small negative part, never as a hidden residual. "Median rank" is the lower median
(with two ranks, the faster one). Everything here is pure: records in, rows out.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from scalebench import frameworks, identity, stats

COMPONENTS = ("contention", "input_wait", "straggler", "communication")
LABELS = {"contention": "shared-host contention", "input_wait": "input pipeline wait",
          "straggler": "straggler / imbalance", "communication": "exposed communication"}


@dataclass(frozen=True)
class Parts:
    """One record's breakdown: fractions of ideal, and seconds per step."""

    ideal: float  # images/s
    efficiency: float
    contention: float
    input_wait: float
    straggler: float
    communication: float
    compute_images_per_sec: float
    nosync_images_per_sec: float  # slowest rank, no sync
    seconds_per_step: dict[str, float]  # straggler, input_wait, communication

    def fractions(self) -> dict[str, float]:
        return {name: getattr(self, name) for name in COMPONENTS}


def _mean_over_trials(windows: Sequence[Sequence[float]], pick) -> float:
    trials = len(windows[0])
    return statistics.fmean(pick([rank[t] for rank in windows]) for t in range(trials))


def parts(record: dict[str, Any], one_worker_images_per_sec: float) -> Parts | None:
    """The breakdown of one ok N-worker record; None when it has no no-sync windows."""
    nosync = record.get("nosync_window_seconds")
    if record.get("status") != "ok" or not nosync or record["world_size"] < 2:
        return None
    waits = record.get("nosync_input_wait_seconds") or [[0.0] * len(nosync[0])] * len(nosync)
    iters = record["iters"]
    images = record["global_batch"] * iters
    trials = range(len(nosync[0]))
    # the lower-median rank of each trial, and that rank's own input wait
    median_rank = [sorted(range(len(nosync)), key=lambda r, t=t: nosync[r][t])[
        (len(nosync) - 1) // 2] for t in trials]
    w_median = statistics.fmean(nosync[median_rank[t]][t] for t in trials)
    wait_median = statistics.fmean(waits[median_rank[t]][t] for t in trials)
    w_slowest = _mean_over_trials(nosync, max)
    w_synced = _mean_over_trials(record["window_seconds"], max)
    compute = images / max(w_median - wait_median, 1e-12)
    with_input = images / w_median
    slowest = images / w_slowest
    measured = float(record["images_per_sec"])
    ideal = record["world_size"] * one_worker_images_per_sec
    return Parts(
        ideal=ideal, efficiency=measured / ideal,
        contention=1.0 - compute / ideal,
        input_wait=(compute - with_input) / ideal,
        straggler=(with_input - slowest) / ideal,
        communication=(slowest - measured) / ideal,
        compute_images_per_sec=compute, nosync_images_per_sec=slowest,
        seconds_per_step={"input_wait": wait_median / iters,
                          "straggler": (w_slowest - w_median) / iters,
                          "communication": (w_synced - w_slowest) / iters})


def _ok_by_config(records: Sequence[dict]) -> dict[tuple, list[dict]]:
    out: dict[tuple, list[dict]] = {}
    for r in records:
        if r.get("kind") == "train" and r.get("status") == "ok":
            out.setdefault(identity.config_key(r), []).append(r)
    return out


def rows(records: Sequence[dict]) -> list[dict]:
    """One row per N-worker configuration with no-sync windows: each part's mean over its
    records (repeats) with a 95% interval when there are two or more, plus seconds per step,
    and what the link share needs (device, the record's parameter count, its step options).
    The ideal uses the mean of the one-worker baseline's records (identity.baseline_key)."""
    by_config = _ok_by_config(records)
    out = []
    for key, runs in by_config.items():
        first = runs[0]
        if first["world_size"] < 2:
            continue
        base = by_config.get(identity.baseline_key(first))
        if not base:
            continue
        one = statistics.fmean(float(r["images_per_sec"]) for r in base)
        found = [p for p in (parts(r, one) for r in runs) if p is not None]
        if not found:
            continue
        row: dict[str, Any] = {
            "key": key, "model": first["model"], "framework": first["framework"],
            "step_label": identity.step_label(first), "precision": first["precision"],
            "world_size": first["world_size"], "nodes": first["nodes"],
            "device": first["device"], "params": first.get("params"),
            "options": frameworks.step_options(first["framework"], first.get("options")),
            "series": identity.series_key(first), "runs": len(found),
            "ideal_images_per_sec": statistics.fmean(p.ideal for p in found),
            "measured_images_per_sec": statistics.fmean(float(r["images_per_sec"])
                                                        for r in runs),
            "compute_images_per_sec": statistics.fmean(p.compute_images_per_sec
                                                       for p in found),
        }
        for name in ("efficiency", *COMPONENTS):
            summary = stats.summarize([getattr(p, name) for p in found])
            row[name] = summary.mean
            row[f"{name}_ci95"] = [summary.ci_low, summary.ci_high]
        for name in ("input_wait", "straggler", "communication"):
            row[f"{name}_seconds_per_step"] = statistics.fmean(p.seconds_per_step[name]
                                                               for p in found)
        row["accounted"] = row["efficiency"] + sum(row[name] for name in COMPONENTS)
        row["largest_loss"] = max(COMPONENTS, key=lambda name: row[name])
        out.append(row)
    out.sort(key=lambda r: (r["model"], r["precision"], r["framework"], r["step_label"],
                            r["world_size"], r["nodes"]))
    return out


def link_share(row: dict, link_busbw: float, grad_bytes: float) -> float | None:
    """How fast the exposed communication ran against the link's measured allreduce: the
    bus bandwidth a ring allreduce of the gradients would need to take exactly the exposed
    time, as a fraction of the measured busbw. Above 1: part of the allreduce was hidden
    behind the backward pass. None when no communication was exposed."""
    seconds = row["communication_seconds_per_step"]
    if seconds <= 0 or link_busbw <= 0:
        return None
    workers = row["world_size"]
    needed = 2 * (workers - 1) / workers * grad_bytes / seconds
    return needed / link_busbw


def verdict(model_rows: Sequence[dict]) -> str:
    """Plain words for one model: which framework scales best at the largest worker count
    measured here, and what limits it."""
    if not model_rows:
        return ""
    top = max(r["world_size"] for r in model_rows)
    at_top = sorted((r for r in model_rows if r["world_size"] == top),
                    key=lambda r: -r["efficiency"])
    best = at_top[0]
    name = best["framework"] + (f" ({best['step_label']})" if best["step_label"] else "")
    text = (f"At {top} workers {name} scales best here ({best['efficiency']:.0%} of ideal); "
            f"its largest loss is {LABELS[best['largest_loss']]} "
            f"({best[best['largest_loss']]:.0%} of ideal)")
    others = [f"{r['framework']}{' (' + r['step_label'] + ')' if r['step_label'] else ''} "
              f"{r['efficiency']:.0%}, mostly {LABELS[r['largest_loss']]}" for r in at_top[1:]]
    return text + (f"; {'; '.join(others)}." if others else ".")
