"""The report's tables as plain cells, shared by both renderers: markdown and HTML differ only
in how a cell is written (and HTML escapes every string here)."""

from __future__ import annotations

from dataclasses import dataclass

from scalebench.analysis.breakdown import label
from scalebench.hardware import topology
from scalebench.report.format import (
    DASH,
    gb_per_s,
    interval,
    ms,
    num,
    pct,
    pct_interval,
    pct_with_interval,
    points,
)
from scalebench.report.losses import SeriesLosses
from scalebench.report.model import (
    Comparison,
    Group,
    ReportModel,
    flags,
    framework_label,
    run_label,
    series_label,
    workers_label,
)
from scalebench.spec import units


@dataclass(frozen=True)
class Mark:
    """Text to set apart: HTML gives it a CSS class (and a tooltip), markdown makes it bold."""

    text: str
    css: str
    title: str = ""


@dataclass(frozen=True)
class Gauge:
    """0..100%: a range (the scaling model's bounds) and the measured point."""

    low: float
    value: float
    high: float


@dataclass(frozen=True)
class Details:
    """A short text with a longer one behind it (HTML folds it away; markdown leaves it out)."""

    text: str
    summary: str
    more: str


# A tuple of cells is written side by side in one table cell.
Cell = str | Mark | Gauge | Details | tuple


@dataclass(frozen=True)
class Table:
    header: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]
    num_cols: frozenset[int] = frozenset()  # right-aligned columns


def flag_marks(row: dict) -> tuple[Mark, ...]:
    css = {"noisy": "badge noisy", "superlinear": "badge bad", "warning": "badge bad",
           "launches": "badge bad", "disturbed": "badge bad"}
    return tuple(Mark(text, css[kind], why) for kind, text, why in flags(row))


def samples_cell(row: dict) -> str:
    """The samples behind a row, e.g. "3 processes (5 trials each)"."""
    return row["samples_text"]


def warning_lines(group: Group) -> list[str]:
    """Every warning of the group's runs, each with its run (shown under the group's table)."""
    return [f"{run_label(r)}: {w}" for r in group.rows for w in r.get("warnings") or ()]


def summary_table(group: Group) -> Table:
    """One line per run of a scaling series (the markdown headline; HTML pivots the same rows)."""
    rows = []
    for r in group.rows:
        best = pct(r["efficiency_vs_best"])
        if r["efficiency_vs_best"] is not None:
            best += f" ({r['best_one_worker_framework']})"
        rows.append((r["model"], framework_label(r), r["precision_label"], str(r["world_size"]),
                     str(r["nodes"]), num(r["images_per_sec"]),
                     interval(r["ci95_low"], r["ci95_high"], too_noisy=r.get("ci95_too_noisy", "")),
                     samples_cell(r),
                     num(r["per_worker_images_per_sec"]), pct(r["efficiency"]),
                     pct_interval(r["efficiency_ci95_low"], r["efficiency_ci95_high"],
                                  too_noisy=r.get("efficiency_ci95_too_noisy", "")), best,
                     pct(r["efficiency_per_node"]), flag_marks(r)))
    return Table(("model", "framework", "precision", "workers", "nodes", "images/s", "95% CI",
                  "samples", "per worker", "efficiency", "95% CI", "vs best 1-worker",
                  "per node", "flags"),
                 tuple(rows), frozenset({3, 4, 5, 8, 9, 11, 12}))


def published_table(model: ReportModel) -> Table:
    rows = []
    for p in model.published:
        if p.measured_workers is None:
            here: Cell = Mark("not measured here", "muted")
        else:
            here = f"at {p.measured_workers} workers: " + "; ".join(
                f"{label}: {pct(e)}" for label, e in p.measured)
        rows.append((p.name, pct(p.efficiency), str(p.workers), here))
    return Table(("model", "published efficiency", "GPUs", "this report"), tuple(rows),
                 frozenset({1, 2}))


def comparison_table(comparison: Comparison) -> Table:
    rows = []
    for c in comparison.entries:
        r = c.row
        verdict: Cell = Mark("fastest", "badge good") if c.fastest else c.verdict
        rows.append((workers_label(r), series_label(r), num(r["images_per_sec"]),
                     interval(r["ci95_low"], r["ci95_high"], too_noisy=r.get("ci95_too_noisy", "")),
                     num(c.vs_fastest, ".2f", suffix="×"),
                     pct(r["efficiency"]), verdict))
    return Table(("workers", "framework", "images/s", "95% CI", "vs fastest", "efficiency",
                  "difference to the fastest"), tuple(rows), frozenset({2, 4, 5}))


def wrapper_table(model: ReportModel) -> Table:
    """One-worker runs that timed the plain step and the DDP-wrapped step."""
    rows = []
    for r in model.wrapper:
        rows.append((r["model"], framework_label(r), r["precision_label"],
                     num(r["images_per_sec"]),
                     interval(r["ci95_low"], r["ci95_high"], too_noisy=r.get("ci95_too_noisy", "")),
                     num(r["wrapped_images_per_sec"]),
                     interval(r["wrapped_ci95_low"], r["wrapped_ci95_high"],
                              too_noisy=r.get("wrapped_ci95_too_noisy", "")),
                     pct(r["wrapper_overhead"]), samples_cell(r)))
    return Table(("model", "framework", "precision", "unwrapped images/s", "95% CI",
                  "DDP-wrapped images/s", "95% CI", "wrapper overhead", "samples"), tuple(rows),
                 frozenset({3, 5, 7}))


def scaling_model_table(model: ReportModel) -> Table:
    rows = []
    for m in model.modelled:
        if not m.modelled:
            continue
        e, r = m.entry, m.row
        rows.append((r["model"], series_label(r), workers_label(r), pct(e["efficiency"]),
                     pct_interval(e["efficiency_ci95_low"], e["efficiency_ci95_high"],
                                  too_noisy=e.get("efficiency_ci95_too_noisy", "")),
                     pct(e["efficiency_no_overlap"]), pct(e["efficiency_full_overlap"]),
                     Gauge(e["efficiency_no_overlap"], e["efficiency"],
                           e["efficiency_full_overlap"]),
                     ms(e["compute_seconds"]), ms(e["backward_seconds"]),
                     ms(e["allreduce_seconds"]), e["verdict"]))
    return Table(("model", "framework", "workers", "efficiency", "95% CI", "no overlap",
                  "full overlap", "0-100%", "compute (ms)", "backward (ms)", "allreduce (ms)",
                  "verdict"), tuple(rows), frozenset({3, 5, 6, 8, 9, 10}))


def scaling_model_notes(model: ReportModel) -> list[str]:
    """Each multi-worker run's verdict in words, with the link it was modelled on."""
    out = []
    for m in model.modelled:
        r = m.row
        link = f" Link: {m.link}." if m.link else ""
        out.append(f"{r['model']} {series_label(r)} x{r['world_size']}: "
                   f"{m.entry['verdict_text']}.{link}")
    return out


def allreduce_table(model: ReportModel) -> Table:
    rows = []
    for r in model.allreduce:
        lo, hi = r["seconds_ci95"]
        blo, bhi = r["busbw_bytes_per_sec_ci95"]
        rows.append((r["framework"], str(r["world_size"]), str(r["nodes"]), str(r["device"]),
                     str(r["dtype"]), units.format_size(r["size_bytes"]), ms(r["seconds"]),
                     interval(lo, hi, scale=1e3), gb_per_s(r["algbw_bytes_per_sec"]),
                     gb_per_s(r["busbw_bytes_per_sec"]), interval(blo, bhi, scale=1e-9),
                     Mark("noisy", "badge noisy") if r.get("noisy") else ""))
    return Table(("framework", "workers", "nodes", "device", "dtype", "size", "time (ms)",
                  "95% CI", "algbw (GB/s)", "busbw (GB/s)", "95% CI", "noisy"), tuple(rows),
                 frozenset({1, 2, 5, 6, 8, 9}))


def failures_table(model: ReportModel) -> Table:
    rows = []
    for f in model.failures:
        css = "badge noisy" if f.status == "skipped" else "badge bad"
        reason: Cell = Details(f.reason, "stderr (last lines)", f.stderr_tail) \
            if f.stderr_tail else f.reason
        rows.append((f.run, f.framework, f.what, f.workers, Mark(f.status, css), reason))
    return Table(("run", "framework", "model", "workers", "status", "reason"), tuple(rows))


def environment_table(model: ReportModel) -> Table:
    """One column per distinct environment, with the runs that used it; differing fields marked."""
    envs = model.environments
    rows: list[tuple[Cell, ...]] = [("runs", *(", ".join(e.runs) for e in envs.envs))]
    for k in envs.fields:
        name: Cell = Mark(k, "diff") if k in envs.differing else k
        rows.append((name, *(env_value(k, e.values.get(k)) for e in envs.envs)))
    header = ("field", *(("value",) if len(envs.envs) == 1
                         else (f"environment {i}" for i in range(1, len(envs.envs) + 1))))
    return Table(header, tuple(rows))


def env_value(name: str, value: object) -> str:
    """One environment field in words: the topology as topology.describe's lines."""
    if value is None:
        return DASH
    if name == "topology":
        return "; ".join(topology.describe(value))  # type: ignore[arg-type]
    return str(value)


SHORT = {"batch_effect": "per-worker batch", "contention": "contention", "communication": "exposed comm.",
         "straggler": "straggler", "input_wait": "input wait"}
PER_STEP = ("communication", "straggler", "input_wait")  # the parts measured in seconds


def launches_cell(row: dict) -> str:
    """The launches a breakdown row used: "2", or "1 of 2" when some had no no-sync windows."""
    used, total = row["launches"], row["launches_total"]
    return str(used) if used >= total else f"{used} of {total}"


def breakdown_table(series: SeriesLosses) -> Table:
    """Each run's efficiency and where the rest of ideal went, in the waterfall's order."""
    names = series.components
    rows = []
    for r in series.rows:
        rows.append((series_label(r), workers_label(r), launches_cell(r),
                     num(r["ideal_images_per_sec"]), num(r["measured_images_per_sec"]),
                     *(pct_with_interval(r[name], r[f"{name}_ci95"]) if r[name] is not None
                       else Mark("not separable", "muted", r["batch_effect_note"])
                       for name in names),
                     pct_with_interval(r["efficiency"], r["efficiency_ci95"],
                                       r.get("efficiency_ci95_too_noisy", "")),
                     label(r, r["largest_loss"]),
                     *(ms(r[f"{name}_seconds_per_step"]) for name in PER_STEP)))
    first = 5 + len(names)  # the efficiency column
    return Table(("framework", "workers", "launches", "ideal images/s", "measured images/s",
                  *(f"{SHORT[name]} (% of ideal)" for name in names), "efficiency",
                  "largest loss", *(f"{SHORT[name]} (ms/step)" for name in PER_STEP)),
                 tuple(rows),
                 frozenset({1, 2, *range(3, first + 1), first + 2, first + 3, first + 4}))


def checks_table(series: SeriesLosses) -> Table:
    """The extrapolation check of each line that could be modelled."""
    rows = []
    for c in series.checks:
        if not c.checked:
            continue
        r = c.row
        rows.append((series_label(r), workers_label(r), num(c.one_worker_images_per_sec),
                     pct(c.low), pct(c.high), pct(c.predicted), pct(c.measured),
                     pct_interval(r["efficiency_ci95_low"], r["efficiency_ci95_high"],
                                  too_noisy=r.get("efficiency_ci95_too_noisy", "")),
                     points(c.error_points), c.where, c.link))
    return Table(("framework", "largest workers", "1-worker images/s", "no overlap",
                  "full overlap", "predicted (midpoint)", "measured", "95% CI", "model error",
                  "measured point", "link"), tuple(rows), frozenset({1, 2, 3, 4, 5, 6, 8}))


ABOVE_PEAK = ("more FLOP/s than the measured peak: the peak probe ran slower than the device "
              "can (another load on the machine while it ran?); re-run on a quiet machine")


def mfu_table(group: Group) -> Table:
    """Each run's achieved FLOP/s per worker and MFU, with its efficiency beside it; an MFU
    above 100% is marked (the probe, not the run, was slowed)."""
    def amount(value: float | None, unit: str) -> str:
        return DASH if not value else units.format_flops(value, unit)

    rows = []
    for r in group.rows:
        value: Cell = pct(r.get("mfu"))
        if (r.get("mfu") or 0) > 1:
            value = (value, Mark("above the peak", "badge bad", ABOVE_PEAK))
        rows.append((series_label(r), workers_label(r), num(r["per_worker_images_per_sec"]),
                     amount(r.get("flops_per_image"), "FLOP"),
                     amount(r.get("achieved_flops_per_worker"), "FLOP/s"),
                     amount(r.get("peak_flops_per_worker"), "FLOP/s"), value,
                     pct_interval(r.get("mfu_ci95_low"), r.get("mfu_ci95_high"),
                                  too_noisy=r.get("ci95_too_noisy", "")),
                     pct(r.get("mfu_datasheet")), pct(r["efficiency"])))
    return Table(("framework", "workers", "images/s per worker", "FLOPs per image",
                  "achieved per worker", "peak per worker (measured)", "MFU", "95% CI",
                  "MFU vs datasheet", "efficiency"), tuple(rows),
                 frozenset({1, 2, 3, 4, 5, 6, 7, 8, 9}))


def energy_table(group: Group) -> Table:
    """Images per joule by worker count, next to efficiency (report/energy.py)."""
    rows = [(series_label(r), workers_label(r), num(r.get("images_per_joule")),
             num(r.get("joules_per_image")), num(r.get("mean_watts_per_worker")),
             pct(r["efficiency"]), str(r.get("energy_measured") or ""))
            for r in group.rows]
    return Table(("framework", "workers", "images per joule", "joules per image",
                  "watts per worker", "efficiency", "measured"), tuple(rows),
                 frozenset({1, 2, 3, 4, 5}))
