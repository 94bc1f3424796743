"""From records to the summary table: the runs of each configuration, throughput statistics and
scaling efficiency.

A configuration (identity.config_key) may be launched several times (`--repeats K`): each launch
is its own record with its `repeat` index (absent on older records: 1). For each repeat the
newest ok record counts. With two or more ok launches the row's mean, interval, spread and noise
flag come from the per-process means (one sample per launch); with one, from its trials
(stats.Samples). The row says which (`samples_basis`) and how many launches succeeded.

Efficiency(N) = throughput(N) / (N x throughput(1)) against
  - the same framework's one-worker run with the same step options (efficiency),
  - the best one-worker run of any framework (efficiency_vs_best),
  - one full node, per node, for multi-node runs (efficiency_per_node).
The efficiency and its interval are the paired ones (efficiency_samples, as compare and history
take them): launch r of the N-worker run against launch r of its baseline; the value is the mean
of the per-launch ratios, the interval that of the paired samples (per launch with two or more
launches, else trial i against trial i). Compare, history, the report, its figures, the
breakdown and the scaling model's verdict all read this one interval.
Which runs are the same configuration, and which run is a run's baseline (weak scaling: the
same per-worker batch; strong scaling: the same global batch), is identity's answer.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from scalebench import frameworks
from scalebench.analysis import disturbance, mfu, stats
from scalebench.hardware import energy
from scalebench.spec import identity

SUMMARY_COLUMNS = [
    "model", "framework", "step_options", "world_size", "nodes", "batch_size", "global_batch",
    "image_size", "precision", "precision_label", "tf32", "device", "scaling", "data", "trials",
    "processes", "processes_planned", "trials_total", "samples_basis",
    "images_per_sec", "ci95_low", "ci95_high", "ci95_too_noisy", "median", "std", "rel_std", "noisy",
    "per_worker_images_per_sec", "startup_seconds",
    "efficiency", "efficiency_ci95_low", "efficiency_ci95_high", "efficiency_ci95_too_noisy",
    "efficiency_vs_best", "best_one_worker_framework", "efficiency_per_node",
    "wrapped_images_per_sec", "wrapped_ci95_low", "wrapped_ci95_high", "wrapped_ci95_too_noisy",
    "wrapper_overhead",
    "flops_per_image", "achieved_flops_per_worker", "peak_flops", "peak_flops_per_worker",
    "mfu", "mfu_ci95_low", "mfu_ci95_high", "datasheet_peak_flops", "mfu_datasheet",
    "joules_per_image", "images_per_joule", "mean_watts_per_worker", "energy_measured",
    "warnings", *disturbance.COLUMNS,
]
TRIALS_FIELD = "trial_images_per_sec"
WRAPPED_FIELD = "trial_wrapped_images_per_sec"  # DDP one-worker runs: the DDP-wrapped step
# torch.get_float32_matmul_precision(): "high" and "medium" let fp32 matmuls use TF32 (or less)
TF32_MATMUL = ("high", "medium")


def repeat_of(record: dict) -> int:
    """Which launch of its configuration a record is (older records: the first)."""
    return record.get("repeat") or 1


@dataclass(frozen=True)
class Runs:
    """The train records of one configuration."""

    ok: tuple[dict, ...]  # the newest ok record of each repeat, by repeat index
    failed: tuple[dict, ...]  # the newest record of each repeat with no ok record
    last: dict  # the newest record of any status
    newest_ok: dict | None  # the ok record written last: its settings stand for the runs'
    planned: int  # launches planned: the largest `repeats` recorded, or the repeats seen

    @property
    def processes(self) -> int:
        return len(self.ok)

    def by_repeat(self) -> dict[int, dict]:
        return {repeat_of(r): r for r in self.ok}

    def samples(self, field: str = TRIALS_FIELD) -> stats.Samples | None:
        """The field's samples over the ok launches; None unless every ok launch has it."""
        if not self.ok or not all(r.get(field) for r in self.ok):
            return None
        return stats.Samples.of_processes([r[field] for r in self.ok])

    @property
    def launches_text(self) -> str:
        """e.g. "2 of 3 launches ok"; "" when every planned launch succeeded."""
        if self.processes >= self.planned:
            return ""
        return f"{self.processes} of {self.planned} launches ok"


def group_runs(records: Iterable[dict]) -> dict[tuple, Runs]:
    """Train records by configuration key (file order decides which record is newer)."""
    ok: dict[tuple, dict[int, dict]] = {}
    other: dict[tuple, dict[int, dict]] = {}
    last: dict[tuple, dict] = {}
    newest_ok: dict[tuple, dict] = {}
    planned: dict[tuple, int] = {}
    for r in records:
        if r.get("kind") != "train":
            continue
        key = identity.config_key(r)
        last[key] = r
        planned[key] = max(planned.get(key, 1), r.get("repeats") or 1)
        if r.get("status") == "ok":
            newest_ok[key] = r
        (ok if r.get("status") == "ok" else other).setdefault(key, {})[repeat_of(r)] = r
    out = {}
    for key in last:
        good = ok.get(key, {})
        bad = {k: r for k, r in other.get(key, {}).items() if k not in good}
        out[key] = Runs(tuple(good[k] for k in sorted(good)), tuple(bad[k] for k in sorted(bad)),
                        last[key], newest_ok.get(key), max(planned[key], len(good) + len(bad)))
    return out


def paired_launches(runs_n: Runs, runs_1: Runs) -> list[tuple[dict, dict]]:
    """(N-worker launch, its baseline's launch): launch r with launch r (the same round of an
    interleaved sweep; without common repeat indices, in repeat order)."""
    n, one = runs_n.by_repeat(), runs_1.by_repeat()
    common = sorted(set(n) & set(one))
    return [(n[k], one[k]) for k in common] if common else \
        list(zip(runs_n.ok, runs_1.ok, strict=False))


def efficiency_of_pairs(pairs: Sequence[tuple[dict, dict]], workers: int) -> stats.Samples | None:
    """Paired efficiency samples of (N-worker record, one-worker record) pairs: per pair the
    ratio of the two means, within a pair trial i against trial i."""
    if not pairs:
        return None
    return stats.paired_efficiency([(a[TRIALS_FIELD], b[TRIALS_FIELD]) for a, b in pairs], workers)


def efficiency_samples(runs_n: Runs, runs_1: Runs, workers: int) -> stats.Samples | None:
    """Efficiency samples that carry the one-worker baseline's uncertainty (paired_launches;
    within a pair trial i with trial i)."""
    return efficiency_of_pairs(paired_launches(runs_n, runs_1), workers)


def efficiency_estimate(samples: stats.Samples) -> stats.Ratio:
    """The one efficiency and interval of paired samples: the mean of the per-launch ratios (with
    one launch: the ratio of the two means), and its 95% interval from the paired ratios of the
    samples' basis on the log scale (stats.positive_interval: never below zero; too noisy to
    bound, naming the run and trials behind it, where the bounds lie more than MAX_SPAN apart)."""
    s = samples.summary()  # compare and history take the same summary of the same samples
    return stats.Ratio(s.mean, s.ci_low, s.ci_high, s.too_noisy)


def paired_value(runs_n: Runs, runs_1: Runs, multiple: int) -> float | None:
    """throughput(N) / (multiple x throughput(baseline)) the paired way (efficiency_estimate's
    value), so that against its own baseline it is exactly the efficiency."""
    samples = efficiency_samples(runs_n, runs_1, multiple)
    return None if samples is None else statistics.fmean(samples.process_values)


def mean_throughput(runs: Runs) -> float:
    """A configuration's throughput: the mean over its ok launches' means (its trials' mean
    with one launch)."""
    return statistics.fmean(statistics.fmean(r[TRIALS_FIELD]) for r in runs.ok)


def best_one_worker(runs: dict[tuple, Runs]) -> dict[tuple, tuple]:
    """identity.best_baseline_key -> the configuration key of the fastest one-worker run
    (one node) among `runs` (all with an ok launch)."""
    best: dict[tuple, tuple] = {}
    for key, r in runs.items():
        k = identity.key_dict(key)
        if k["world_size"] == 1 and k["nodes"] == 1:
            best_key = identity.best_baseline_key(r.newest_ok)
            if best_key not in best or mean_throughput(r) > mean_throughput(runs[best[best_key]]):
                best[best_key] = key
    return best


# ---------------------------------------------------------------- a framework's baseline in words

SLOW_BASELINE = 0.10  # a framework's own one-worker run this much below the best is named


def line_name(row: dict) -> str:
    """A framework with its step options, e.g. "horovod (fp16_allreduce)"."""
    return row["framework"] + (f" ({row['step_label']})" if row.get("step_label") else "")


def slow_baseline_note(row: dict) -> str:
    """When a row's own one-worker run is more than SLOW_BASELINE slower than the best one-worker
    run, that in words, and why it flatters the row's own efficiency; "" otherwise. The row
    needs baseline_images_per_sec, best_one_worker_images_per_sec, best_one_worker_framework,
    efficiency and efficiency_vs_best (summary and breakdown rows have them)."""
    own, best = row.get("baseline_images_per_sec"), row.get("best_one_worker_images_per_sec")
    if not own or not best or own >= (1 - SLOW_BASELINE) * best or row.get("efficiency") is None:
        return ""
    return (f"{line_name(row)}'s own one-worker run ({own:.3g} images/s) is {1 - own / best:.0%} "
            f"slower than the best one-worker run ({row['best_one_worker_framework']}, "
            f"{best:.3g} images/s), which flatters its own efficiency: "
            f"{row['efficiency']:.0%} against its own run, {row['efficiency_vs_best']:.0%} against "
            "the best")


def latest_allreduce_points(records: Iterable[dict]) -> list[dict]:
    """The newest ok allreduce record per measurement point (identity.allreduce_point_key),
    sorted by framework, device, dtype, nodes, workers and size."""
    chosen: dict[tuple, dict] = {}
    for r in records:
        if r.get("kind") == "allreduce" and r.get("status") == "ok":
            chosen[identity.allreduce_point_key(r)] = r
    return sorted(chosen.values(), key=lambda r: (r["framework"], r["device"], r["dtype"],
                                                  r["nodes"], r["world_size"], r["size_bytes"]))


# ---------------------------------------------------------------- labels and notes of a run

def uses_tf32(record: dict) -> bool | None:
    """Whether fp32 math ran in TF32 (as measured in the worker, else as set); None when not
    known, and on CPUs, which have no TF32."""
    if record.get("device") != "cuda":
        return None
    math = record.get("math") or {}
    if math.get("cudnn_allow_tf32") is not None or math.get("matmul_precision") is not None:
        return bool(math.get("cudnn_allow_tf32")) or math.get("matmul_precision") in TF32_MATMUL
    setting = identity.tf32_setting(record)
    return None if setting is None else setting == "on"


def precision_label(records: Sequence[dict]) -> str:
    """The precision in words: "fp32 (TF32)" when CUDA fp32 math used TF32; said per launch
    when launches disagree."""
    labels = [r["precision"] + (" (TF32)" if r["precision"] == "fp32" and uses_tf32(r) else "")
              for r in records]
    return " / ".join(dict.fromkeys(labels))


def run_warnings(runs: Runs) -> list[str]:
    """The injected faults, warnings of the ok launches (e.g. skipped fp16 steps, a diverged
    loss) and launches that failed, each naming its launch when there are several."""
    several = runs.planned > 1
    faults = identity.faults_label(runs.newest_ok or runs.last)
    out = [f"injected {faults} (a fault test, not a measurement of the framework)"] \
        if faults else []
    for r in runs.ok:
        prefix = f"launch {repeat_of(r)}: " if several else ""
        out += [prefix + str(w) for w in r.get("warnings") or ()]
    for r in runs.failed:
        out.append(f"launch {repeat_of(r)} {r.get('status')}: "
                   f"{r.get('error') or 'no reason recorded'}")
    return out


# ---------------------------------------------------------------- the summary table

def _row(runs: Runs, samples: stats.Samples) -> dict:
    r = runs.newest_ok
    s = samples.summary()
    startups = [x["startup_seconds"] for x in runs.ok if x.get("startup_seconds") is not None]
    row = {
        **{f: r[f] for f in ("model", "framework", "world_size", "nodes", "batch_size",
                             "global_batch", "image_size", "precision", "device", "scaling",
                             "data", "trials")},
        "tf32": identity.tf32_setting(r) or "default",
        "precision_label": precision_label(runs.ok),
        "device_kind": identity.device_kind(r),
        "options": frameworks.step_options(r["framework"], r.get("options")),
        "step_label": identity.step_label(r),
        "step_options": identity.step_label(r),
        "faults": identity.faults_text(r),
        "processes": runs.processes, "processes_planned": runs.planned,
        "launches_text": runs.launches_text,
        "trials_total": len(samples.trials), "samples_basis": samples.basis,
        "samples_text": samples.describe(), "samples": samples, "records": runs.ok,
        "images_per_sec": s.mean, "ci95_low": s.ci_low, "ci95_high": s.ci_high,
        "ci95_too_noisy": s.too_noisy,
        "median": s.median, "std": s.std, "rel_std": s.rel_std, "noisy": s.noisy,
        "per_worker_images_per_sec": s.mean / r["world_size"],
        "startup_seconds": statistics.fmean(startups) if startups else None,
        "efficiency": None, "efficiency_ci95_low": None, "efficiency_ci95_high": None,
        "efficiency_ci95_too_noisy": "",
        "efficiency_vs_best": None, "best_one_worker_framework": None,
        "efficiency_per_node": None,
        "baseline_images_per_sec": None, "baseline_note": "",
        "best_one_worker_images_per_sec": None,
        "wrapped_images_per_sec": None, "wrapped_ci95_low": None, "wrapped_ci95_high": None,
        "wrapped_ci95_too_noisy": "",
        "wrapper_overhead": None,
        "warnings": run_warnings(runs),
        **mfu.row_fields(r, s.mean, s.ci_low, s.ci_high),
        **energy.row_fields(runs.ok),
    }
    wrapped = runs.samples(WRAPPED_FIELD)
    if wrapped is not None:
        w = wrapped.summary()
        row.update(wrapped_images_per_sec=w.mean, wrapped_ci95_low=w.ci_low,
                   wrapped_ci95_high=w.ci_high, wrapped_ci95_too_noisy=w.too_noisy,
                   wrapper_overhead=1 - w.mean / s.mean)
    return row


def summary_rows(records: Sequence[dict]) -> list[dict]:
    """One row per configuration with an ok launch: throughput summary, efficiencies, the step
    options (`options`: as recorded; `step_label` and the `step_options` column: those that
    differ from the framework's defaults, in words, "" when none), the launches and samples
    behind the numbers (`processes`, `processes_planned`, `trials_total`, `samples_basis`,
    `samples`, `records`: the ok launches themselves), `precision_label`, `warnings`, the
    one-worker throughputs efficiency is taken against (`baseline_images_per_sec`,
    `best_one_worker_images_per_sec`), for DDP's one-worker runs the DDP-wrapped step's
    throughput and `wrapper_overhead` (1 - wrapped / unwrapped), and the FLOPs, peak and MFU of
    scalebench/mfu.py (None for records without them)."""
    runs = {key: r for key, r in group_runs(records).items() if r.ok}
    samples = {key: r.samples() for key, r in runs.items()}
    summaries = {key: s.summary() for key, s in samples.items()}
    best_one = best_one_worker(runs)
    rows = []
    for key, r in runs.items():
        record, s = r.newest_ok, summaries[key]
        row = _row(r, samples[key])
        base, untuned = identity.baseline_key(record), identity.untuned_baseline_key(record)
        if base not in runs and untuned in runs:
            base = untuned
            row["baseline_note"] = ("the default's one-worker run (one worker runs the plain "
                                    "step: the tuned knobs change only communication)")
        # what disturbed this row's launches, and the one-worker run its efficiency holds
        row.update(disturbance.row_fields(r.ok), baseline_disturbance=(
            disturbance.launches_text(runs[base].ok) if base != key and base in runs else ""))
        if base == key:  # a run against itself is exactly 1, with no uncertainty
            row.update(efficiency=1.0, baseline_images_per_sec=s.mean)
        elif base in runs:
            paired = efficiency_samples(r, runs[base], record["world_size"])
            if paired is not None:
                e = efficiency_estimate(paired)
                row.update(efficiency=e.value, efficiency_ci95_low=e.ci_low,
                           efficiency_ci95_high=e.ci_high, efficiency_ci95_too_noisy=e.too_noisy,
                           baseline_images_per_sec=summaries[base].mean)
        best = best_one.get(identity.best_baseline_key(record))
        if best:
            row["efficiency_vs_best"] = paired_value(r, runs[best], record["world_size"])
            row["best_one_worker_framework"] = identity.key_dict(best)["framework"]
            row["best_one_worker_images_per_sec"] = summaries[best].mean
        if record["nodes"] > 1:
            node_base = identity.baseline_key(record, record["world_size"] // record["nodes"])
            if node_base in runs:
                row["efficiency_per_node"] = paired_value(r, runs[node_base], record["nodes"])
        rows.append(row)
    rows.sort(key=lambda x: (x["model"], x["precision"], x["framework"], x["step_label"],
                             x["tf32"], x["world_size"], x["nodes"]))
    return rows


def csv_rows(rows: Sequence[dict]) -> list[dict]:
    """Summary rows as summary.csv writes them: SUMMARY_COLUMNS, warnings joined by "; "."""
    return [{c: "; ".join(row[c]) if c == "warnings" else row.get(c) for c in SUMMARY_COLUMNS}
            for row in rows]


def summary_frame(records: Sequence[dict]):
    import pandas as pd

    return pd.DataFrame(csv_rows(summary_rows(records)), columns=SUMMARY_COLUMNS)
