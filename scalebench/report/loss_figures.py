"""The figures of "Where the efficiency went": a waterfall per scaling series (ideal ->
contention -> exposed communication -> straggler -> input wait -> measured, one bar group per
framework at each worker count) and the scaling model's bounds with the measured point."""

from __future__ import annotations

from pathlib import Path

from scalebench.analysis.breakdown import label
from scalebench.report import plotting
from scalebench.report.labels import series_label
from scalebench.report.losses import WATERFALL, Limit, SeriesLosses
from scalebench.report.model import ReportModel

CAPTIONS = {
    "waterfall": "Where the efficiency went, one panel per scaling series: for each framework at "
                 "each worker count, from the ideal (N × its one-worker throughput, 100%) down "
                 "through the per-worker batch effect (strong scaling only), shared-host "
                 "contention, exposed communication, straggler and input wait to the measured "
                 "efficiency (with its 95% interval over launches, when "
                 "launched more than once); a part below zero (noise) is drawn upward.",
    "bounds": "The scaling model's bounds for each run with a breakdown: the blue bar spans the "
              "no-overlap to the full-overlap bound, the diamond is the model's prediction (the "
              "bounds' midpoint), the black dot the measured efficiency, and the open circle the "
              "efficiency had no communication been exposed (the slowest rank's unsynced step).",
}
COLORS = {"ideal": "#9e9e9e", "batch_effect": "tab:brown", "contention": "tab:orange",
          "communication": "tab:red", "straggler": "tab:purple", "input_wait": "tab:olive",
          "measured": "tab:blue"}
BARS = len(WATERFALL) + 2  # ideal, the losses, measured (the widest series)


def _label(row: dict) -> str:
    return f"{series_label(row)}\nx{row['world_size']}" + \
        (f" ({row['nodes']} nodes)" if row["nodes"] > 1 else "")


def _waterfall(ax, series: SeriesLosses, slots: int) -> None:
    """slots: bar groups the widest panel has; every panel's bars get the same width."""
    names = series.components
    bars = len(names) + 2
    top = 100.0
    for g, r in enumerate(series.rows):
        x0 = g * (bars + 1)
        ax.bar(x0, 100.0, color=COLORS["ideal"], label="ideal" if g == 0 else None)
        level = 100.0
        for i, name in enumerate(names, start=1):
            part = 0.0 if r[name] is None else 100 * r[name]  # None: inside contention
            ax.bar(x0 + i, -part, bottom=level, color=COLORS[name],
                   label=label(r, name) if g == 0 else None)
            ax.annotate("n/s" if r[name] is None else f"{part:.0f}",
                        (x0 + i, max(level, level - part)), ha="center", va="bottom",
                        fontsize="x-small")
            top = max(top, level, level - part)
            level -= part
        measured = 100 * r["efficiency"]
        low, high = r["efficiency_ci95"]
        yerr = None if low is None else [[max(0.0, measured - 100 * low)],
                                         [max(0.0, 100 * high - measured)]]
        ax.bar(x0 + bars - 1, measured, yerr=yerr, capsize=3, color=COLORS["measured"],
               label="measured" if g == 0 else None)
        ax.annotate(f"{measured:.0f}", (x0 + bars - 1, measured), ha="center", va="bottom",
                    fontsize="x-small")
        top = max(top, measured)
    ax.set_xticks([g * (bars + 1) + (bars - 1) / 2 for g in range(len(series.rows))])
    ax.set_xticklabels([_label(r) for r in series.rows], fontsize="small")
    ax.set_xlim(-0.8, slots * (bars + 1) - 1.2)
    ax.set_ylim(min(0.0, ax.get_ylim()[0]), top * 1.12)
    ax.set_ylabel("% of ideal (N × one-worker throughput)")
    ax.set_title(plotting.title(series.title, 60), fontsize="medium")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize="x-small", loc="upper right")


def waterfall_figure(model: ReportModel, path: Path) -> Path | None:
    series = [s for s in model.losses.series if s.rows]
    if not series:
        return None
    groups = max(len(s.rows) for s in series)
    fig, axes = plotting.panels(len(series), max(6.0, 1.0 + 1.1 * groups * BARS / 2), 4.8,
                                per_row=1 if groups > 2 else 2)
    for ax, s in zip(axes, series, strict=True):
        _waterfall(ax, s, groups)
    return plotting.save(fig, path)


def _bounds(ax, title: str, limits: tuple[Limit, ...]) -> None:
    ys = list(range(len(limits)))[::-1]
    right = 100.0
    for y, x in zip(ys, limits, strict=True):
        low, high = 100 * x.no_overlap, 100 * x.full_overlap
        first = y == ys[0]
        ax.barh(y, high - low, left=low, height=0.5, color="#a8c7fa",
                label="no overlap – full overlap" if first else None)
        ax.plot((low + high) / 2, y, "D", color="white", markeredgecolor="#1a4fa3",
                label="prediction (midpoint)" if first else None)
        ax.plot(100 * x.measured, y, "o", color="#1d1d1f", label="measured" if first else None)
        ax.plot(100 * x.without_communication, y, "o", mfc="none", color="tab:red",
                label="without exposed communication" if first else None)
        right = max(right, high, 100 * x.measured, 100 * x.without_communication)
    ax.set_yticks(ys)
    ax.set_yticklabels([_label(x.row).replace("\n", " ") for x in limits], fontsize="small")
    ax.set_xlim(0, right * 1.05)
    ax.set_ylim(-0.8, len(limits) - 0.2 + 0.9)
    ax.set_xlabel("scaling efficiency (%)")
    ax.set_title(plotting.title(title, 60), fontsize="medium")
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(fontsize="x-small", loc="upper left", ncols=2)


def bounds_figure(model: ReportModel, path: Path) -> Path | None:
    series = [s for s in model.losses.series if s.limits]
    if not series:
        return None
    height = 1.6 + 0.45 * max(len(s.limits) for s in series)
    fig, axes = plotting.panels(len(series), 7, height, per_row=2)
    for ax, s in zip(axes, series, strict=True):
        _bounds(ax, s.title, s.limits)
    return plotting.save(fig, path)
