"""Where the efficiency went: a measured scaling-loss breakdown of each N-worker run.

Each N-worker record carries its synced windows and extra windows of the same step without
gradient synchronisation (the plain step on every rank before the framework wraps the model,
measure.py), each with the time spent waiting for batches. With B images per window (all
ranks), every throughput below is one kind of mean, the one the headline uses: the mean over
trials of B / that trial's window (the mean of per-trial rates), so identical windows give
identical throughputs and a part of exactly 0:

    compute     B / (median rank's no-sync window - its input wait)
    input       B / median rank's no-sync window
    slowest     B / slowest rank's no-sync window
    measured    the run's throughput (slowest rank's synced window: its trial_images_per_sec)
    ideal       N x the paired one-worker launch's throughput (the efficiency baseline)
    same batch  N x the one-worker throughput at this run's per-worker batch

    per-worker batch effect  1 - same batch / ideal   strong scaling only (weak: 0): each
                                                       worker's smaller batch, not sharing
    contention      (same batch - compute) / ideal    host sharing: memory bandwidth, cores, PCIe
    input wait      (compute - input) / ideal         blocked on the input pipeline
    straggler       (input - slowest) / ideal         the slowest rank vs the median rank
    communication   (slowest - measured) / ideal      exposed gradient synchronisation
    efficiency      measured / ideal

Under strong scaling without a one-worker run at the per-worker batch, the batch effect cannot
be told apart from contention: it is None and contention holds both (`batch_effect_note` says
so). The parts are differences of measured throughputs, so they add up to 100% of ideal; noise
shows as a small negative part, never as a hidden residual. Seconds per step are differences
of mean window times. "Median rank" is the lower median (with two ranks, the faster one).

A row is computed from exactly the launches behind the summary's row (aggregate.Runs.ok, the
newest ok record of each repeat) that are paired with a launch of the baseline
(aggregate.paired_launches) and have no-sync windows; every figure of the row comes from those
launches, and the row says how many of all launches it used. Its efficiency and interval are
the paired ones (aggregate.efficiency_estimate), as in the summary; the parts' intervals are
95% over launches (none with one launch). Everything here is pure: records in, rows out.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from scalebench import frameworks
from scalebench.analysis import aggregate, stats
from scalebench.spec import identity

COMPONENTS = ("batch_effect", "contention", "input_wait", "straggler", "communication")
LABELS = {"batch_effect": "per-worker batch effect", "contention": "shared-host contention",
          "input_wait": "input pipeline wait", "straggler": "straggler / imbalance",
          "communication": "exposed communication"}
NOT_SEPARABLE = "shared-host contention and per-worker batch effect together"
BREAKDOWN_COLUMNS = [
    "model", "framework", "step_options", "precision", "device", "scaling", "batch_size",
    "global_batch", "world_size", "nodes", "launches", "launches_total", "records",
    "ideal_images_per_sec", "baseline_images_per_sec", "measured_images_per_sec",
    "compute_images_per_sec", "efficiency", "efficiency_ci95_low", "efficiency_ci95_high",
    "efficiency_ci95_too_noisy",
    "efficiency_vs_best", "best_one_worker_framework",
    *(f"{name}{suffix}" for name in COMPONENTS for suffix in ("", "_ci95_low", "_ci95_high")),
    "input_wait_seconds_per_step", "straggler_seconds_per_step",
    "communication_seconds_per_step", "largest_loss", "batch_effect_note", "accounted",
]


@dataclass(frozen=True)
class Parts:
    """One record's breakdown: fractions of ideal, and seconds per step."""

    ideal: float  # images/s
    efficiency: float
    batch_effect: float | None  # None: strong scaling, not separable from contention
    contention: float
    input_wait: float
    straggler: float
    communication: float
    measured_images_per_sec: float
    compute_images_per_sec: float
    nosync_images_per_sec: float  # slowest rank, no sync
    seconds_per_step: dict[str, float]  # straggler, input_wait, communication

    def fractions(self) -> dict[str, float]:
        """The parts that were measured (a batch effect that is not separable is left out)."""
        return {name: getattr(self, name) for name in COMPONENTS
                if getattr(self, name) is not None}


def parts(record: dict[str, Any], one_worker_images_per_sec: float,
          same_batch_images_per_sec: float | None = None) -> Parts | None:
    """The breakdown of one ok N-worker record against its one-worker baseline's throughput;
    None when it has no no-sync windows. same_batch_images_per_sec: the one-worker throughput
    at the record's per-worker batch (strong scaling; weak scaling's baseline is that already).
    """
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
    w_median = [nosync[median_rank[t]][t] for t in trials]
    wait_median = [waits[median_rank[t]][t] for t in trials]
    compute = statistics.fmean(images / max(w - wait, 1e-12)
                               for w, wait in zip(w_median, wait_median, strict=True))
    with_input = statistics.fmean(images / w for w in w_median)
    slowest = statistics.fmean(stats.trial_throughputs(nosync, images))
    measured = statistics.fmean(float(v) for v in record[aggregate.TRIALS_FIELD])
    workers = record["world_size"]
    ideal = workers * one_worker_images_per_sec
    if record.get("scaling") != "strong":
        same_batch_images_per_sec = one_worker_images_per_sec
    reference = ideal if same_batch_images_per_sec is None else \
        workers * same_batch_images_per_sec
    mean_window = statistics.fmean(w_median)
    slowest_window = statistics.fmean(max(rank[t] for rank in nosync) for t in trials)
    synced_window = statistics.fmean(max(rank[t] for rank in record["window_seconds"])
                                     for t in range(len(record["window_seconds"][0])))
    return Parts(
        ideal=ideal, efficiency=measured / ideal,
        batch_effect=None if same_batch_images_per_sec is None else 1.0 - reference / ideal,
        contention=(reference - compute) / ideal,
        input_wait=(compute - with_input) / ideal,
        straggler=(with_input - slowest) / ideal,
        communication=(slowest - measured) / ideal,
        measured_images_per_sec=measured, compute_images_per_sec=compute,
        nosync_images_per_sec=slowest,
        seconds_per_step={"input_wait": statistics.fmean(wait_median) / iters,
                          "straggler": (slowest_window - mean_window) / iters,
                          "communication": (synced_window - slowest_window) / iters})


def label(row: dict, name: str) -> str:
    """A component's name in words; contention says when it holds the batch effect too."""
    if name == "contention" and row.get("batch_effect_note"):
        return NOT_SEPARABLE
    return LABELS[name]


def _interval(values: Sequence[float]) -> tuple[float, list[float | None]]:
    summary = stats.summarize(values)
    return summary.mean, [summary.ci_low, summary.ci_high]


def _row(key: tuple, runs: aggregate.Runs, used: Sequence[tuple[dict, dict]],
         found: Sequence[Parts], best: tuple[tuple, aggregate.Runs] | None, note: str
         ) -> dict[str, Any]:
    newest = runs.newest_ok
    workers = newest["world_size"]
    records = [n for n, _ in used]
    efficiency = aggregate.efficiency_estimate(aggregate.efficiency_of_pairs(used, workers))
    measured = statistics.fmean(p.measured_images_per_sec for p in found)
    vs_best = None
    if best is not None:  # the used launches against the best one-worker run's, paired
        partner = {id(n): one for n, one in aggregate.paired_launches(runs, best[1])}
        pairs = [(n, partner[id(n)]) for n in records if id(n) in partner]
        samples = aggregate.efficiency_of_pairs(pairs, workers)
        vs_best = None if samples is None else statistics.fmean(samples.process_values)
    row: dict[str, Any] = {
        "key": key, "model": newest["model"], "framework": newest["framework"],
        "step_label": identity.step_label(newest), "precision": newest["precision"],
        "world_size": workers, "nodes": newest["nodes"], "device": newest["device"],
        "scaling": newest.get("scaling"), "batch_size": newest["batch_size"],
        "global_batch": newest["global_batch"], "params": newest.get("params"),
        "options": frameworks.step_options(newest["framework"], newest.get("options")),
        "series": identity.series_key(newest),
        "faults": identity.faults_text(newest),
        "runs": len(found),  # the same as launches (its earlier name)
        "launches": len(found), "launches_total": runs.processes,
        "records": [str(r.get("run_id", "")) for r in records],
        "ideal_images_per_sec": statistics.fmean(p.ideal for p in found),
        "baseline_images_per_sec": statistics.fmean(p.ideal for p in found) / workers,
        "measured_images_per_sec": measured,
        "compute_images_per_sec": statistics.fmean(p.compute_images_per_sec for p in found),
        "efficiency": efficiency.value,
        "efficiency_ci95": [efficiency.ci_low, efficiency.ci_high],
        "efficiency_ci95_too_noisy": efficiency.too_noisy,
        "efficiency_vs_best": vs_best,
        "best_one_worker_framework": None if best is None else
        identity.key_dict(best[0])["framework"],
        "best_one_worker_images_per_sec": None if best is None else
        aggregate.mean_throughput(best[1]),
        "batch_effect_note": note,
    }
    for name in COMPONENTS:
        values = [getattr(p, name) for p in found]
        if any(v is None for v in values):
            row[name], row[f"{name}_ci95"] = None, [None, None]
        else:
            row[name], row[f"{name}_ci95"] = _interval(values)
    for name in ("input_wait", "straggler", "communication"):
        row[f"{name}_seconds_per_step"] = statistics.fmean(p.seconds_per_step[name]
                                                           for p in found)
    present = [name for name in COMPONENTS if row[name] is not None]
    row["accounted"] = row["efficiency"] + sum(row[name] for name in present)
    row["largest_loss"] = max(present, key=lambda name: row[name])
    return row


def rows(records: Sequence[dict]) -> list[dict]:
    """One row per N-worker configuration with no-sync windows and a one-worker baseline
    (identity.baseline_key): each part's mean over the launches it used with a 95% interval
    when there are two or more, the paired efficiency, seconds per step, the launches and
    records behind it, efficiency against the best one-worker run, and what the link share
    needs (device, the record's parameter count, its step options)."""
    runs = {key: r for key, r in aggregate.group_runs(records).items() if r.ok}
    best_one = aggregate.best_one_worker(runs)
    out = []
    for key, r in runs.items():
        newest = r.newest_ok
        if newest["world_size"] < 2:
            continue
        base = runs.get(identity.baseline_key(newest))
        if base is None:
            continue
        same = None
        note = ""
        if newest.get("scaling") == "strong":
            same = runs.get(identity.with_changes(key, world_size=1, nodes=1))
            if same is None:
                note = (f"not separable: no one-worker run at the per-worker batch "
                        f"{newest['batch_size']}")
        partner = {id(n): one for n, one in aggregate.paired_launches(r, same)} if same else {}
        used, found = [], []
        for n, one in aggregate.paired_launches(r, base):
            if same is not None:
                ref = partner.get(id(n))
                same_batch = statistics.fmean(ref[aggregate.TRIALS_FIELD]) if ref else \
                    aggregate.mean_throughput(same)
            else:
                same_batch = None
            p = parts(n, statistics.fmean(one[aggregate.TRIALS_FIELD]), same_batch)
            if p is not None:
                used.append((n, one))
                found.append(p)
        if not found:
            continue
        best_key = best_one.get(identity.best_baseline_key(newest))
        best = None if best_key is None else (best_key, runs[best_key])
        out.append(_row(key, r, used, found, best, note))
    out.sort(key=lambda r: (r["model"], r["precision"], r["framework"], r["step_label"],
                            r["world_size"], r["nodes"]))
    return out


def csv_rows(breakdown_rows: Sequence[dict]) -> list[dict]:
    """Breakdown rows as breakdown.csv writes them (BREAKDOWN_COLUMNS): each component as a
    fraction of ideal with its interval, seconds per step, the records (run ids, "; ")."""
    out = []
    for row in breakdown_rows:
        flat = {**row, "step_options": row["step_label"], "records": "; ".join(row["records"])}
        for name in ("efficiency", *COMPONENTS):
            flat[f"{name}_ci95_low"], flat[f"{name}_ci95_high"] = row[f"{name}_ci95"]
        out.append({c: flat.get(c) for c in BREAKDOWN_COLUMNS})
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
    """Plain words for one scaling series: at the largest worker count measured here, the
    frameworks ranked by what a user gets (throughput at N; within a series that is the same
    order as efficiency against the best one-worker run), what limits each, and, for a framework
    whose own one-worker run is much slower than the best one, that this flatters its own
    efficiency (aggregate.slow_baseline_note)."""
    if not model_rows:
        return ""
    top = max(r["world_size"] for r in model_rows)
    at_top = sorted((r for r in model_rows if r["world_size"] == top),
                    key=lambda r: (-r["measured_images_per_sec"], aggregate.line_name(r)))

    def said(r: dict) -> str:
        text = f"{r['measured_images_per_sec']:.3g} images/s, {r['efficiency']:.0%} of its own ideal"
        if (r["best_one_worker_images_per_sec"] or 0) > r["baseline_images_per_sec"]:
            text += (f" ({r['efficiency_vs_best']:.0%} against the best one-worker run, "
                     f"{r['best_one_worker_framework']})")
        return text

    def loss(r: dict) -> str:
        return f"{label(r, r['largest_loss'])} ({r[r['largest_loss']]:.0%} of ideal)"

    if len(at_top) == 1:
        text = (f"At {top} workers {aggregate.line_name(at_top[0])} delivers {said(at_top[0])}; "
                f"its largest loss is {loss(at_top[0])}.")
    else:
        text = (f"At {top} workers, ranked by the throughput they deliver: "
                + "; ".join(f"{aggregate.line_name(r)} {said(r)}, largest loss {loss(r)}"
                            for r in at_top) + ".")
    notes = [n for n in (aggregate.slow_baseline_note(r) for r in at_top) if n]
    notes += [f"{aggregate.line_name(r)}: {r['batch_effect_note']}" for r in at_top
              if r.get("batch_effect_note")]
    return " ".join([text, *(n + "." for n in notes)])
