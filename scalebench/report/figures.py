"""The report's figures (FIGURES: name -> the section that shows it and how it is drawn).

Efficiency and throughput: one panel per scaling series, one line per framework (with precision
and step options), x = workers on a log2 axis, 95% intervals as error bars, ideal lines and
Horovod's published efficiencies for reference. The breakdown's waterfall and bounds figures
are drawn in loss_figures."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

from scalebench.report import loss_figures, plotting
from scalebench.report import mfu as mfu_section
from scalebench.report.model import (
    BREAKDOWN,
    PUBLISHED_HOROVOD,
    PUBLISHED_SETUP,
    PUBLISHED_WORKERS,
    Group,
    ReportModel,
    series_label,
)
from scalebench.report.model import FIGURES as FIGURES_SECTION

T = TypeVar("T")

CAPTIONS = {
    "efficiency": "Scaling efficiency against each framework's own one-worker run, with 95% "
                  "intervals; the grey dashed line is perfect scaling, the dotted red lines are "
                  f"Horovod's published efficiencies at {PUBLISHED_WORKERS} GPUs "
                  f"({PUBLISHED_SETUP}).",
    "throughput": "Images per second of all workers together, with 95% intervals; the grey "
                  "dashed line is linear scaling of the best one-worker run.",
    "mfu": "Model FLOPs utilisation per framework and worker count: achieved FLOP/s per "
           "worker over the measured peak one worker holds, with the throughput's 95% "
           "intervals.",
    **loss_figures.CAPTIONS,
}

Value = Callable[[dict], float | None]
Interval = Callable[[dict], tuple[float | None, float | None]]
Ideal = Callable[[Group, list[int]], list[float] | None]


def _panel(ax, group: Group, value: Value, interval: Interval, ideal: Ideal, ylabel: str,
           published: bool) -> None:
    workers: set[int] = set()
    for label in group.labels:
        points = [r for r in group.rows if series_label(r) == label and value(r) is not None]
        if not points:
            continue
        xs = [p["world_size"] for p in points]
        ys = [value(p) for p in points]
        lows, highs = [], []
        for p, y in zip(points, ys, strict=True):
            lo, hi = interval(p)
            lows.append(max(0.0, y - (y if lo is None else lo)))
            highs.append(max(0.0, (y if hi is None else hi) - y))
        ax.errorbar(xs, ys, yerr=[lows, highs], marker="o", capsize=3, label=label)
        workers.update(xs)
    if workers:
        ys = ideal(group, sorted(workers))
        if ys is not None:
            ax.plot(sorted(workers), ys, linestyle="--", color="grey", label="ideal")
    model = group.rows[0]["model"]
    if published and model in PUBLISHED_HOROVOD:
        ax.axhline(PUBLISHED_HOROVOD[model] * 100, color="tab:red", linestyle=":",
                   label=f"Horovod published ({PUBLISHED_WORKERS} GPUs)")
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(workers) or [1])
    from matplotlib.ticker import ScalarFormatter

    ax.get_xaxis().set_major_formatter(ScalarFormatter())
    ax.set_title(plotting.title(group.title), fontsize="medium")
    ax.set_xlabel("workers")
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")


def _figure(model: ReportModel, path: Path, ylabel: str, value: Value, interval: Interval,
            ideal: Ideal, published: bool) -> Path | None:
    groups = [g for g in model.groups if any(value(r) is not None for r in g.rows)]
    if not groups:
        return None
    fig, axes = plotting.panels(len(groups), 5, 4.3)
    for ax, group in zip(axes, groups, strict=True):
        _panel(ax, group, value, interval, ideal, ylabel, published)
    return plotting.save(fig, path)


def _percent(value: float | None) -> float | None:
    return None if value is None else 100 * value


def efficiency_figure(model: ReportModel, path: Path) -> Path | None:
    return _figure(model, path, "scaling efficiency (%)",
                   lambda r: _percent(r["efficiency"]),
                   lambda r: (_percent(r["efficiency_ci95_low"]),
                              _percent(r["efficiency_ci95_high"])),
                   lambda group, xs: [100.0] * len(xs), published=True)


def throughput_figure(model: ReportModel, path: Path) -> Path | None:
    def ideal(group: Group, xs: list[int]) -> list[float] | None:
        ones = [r["images_per_sec"] for r in group.rows if r["world_size"] == 1]
        return [max(ones) * x for x in xs] if ones else None

    return _figure(model, path, "images / second (all workers)", lambda r: r["images_per_sec"],
                   lambda r: (r["ci95_low"], r["ci95_high"]), ideal, published=False)


def mfu_figure(model: ReportModel, path: Path) -> Path | None:
    return _figure(model, path, "MFU (% of measured peak)", lambda r: _percent(r.get("mfu")),
                   lambda r: (_percent(r.get("mfu_ci95_low")), _percent(r.get("mfu_ci95_high"))),
                   lambda group, xs: None, published=False)


Draw = Callable[[ReportModel, Path], Path | None]
# name -> (the report section that shows it, how it is drawn)
FIGURES: dict[str, tuple[str, Draw]] = {
    "efficiency": (FIGURES_SECTION, efficiency_figure),
    "throughput": (FIGURES_SECTION, throughput_figure),
    "mfu": (mfu_section.KEY, mfu_figure),
    "waterfall": (BREAKDOWN, loss_figures.waterfall_figure),
    "bounds": (BREAKDOWN, loss_figures.bounds_figure),
}


def of_section(figures: Mapping[str, T], section: str) -> dict[str, T]:
    """The drawn figures (name -> path or PNG) that one report section shows, in order."""
    return {name: f for name, f in figures.items() if FIGURES[name][0] == section}


def draw_all(model: ReportModel, out_dir: Path) -> dict[str, Path]:
    """NAME.png in out_dir for each figure that has something to draw."""
    drawn = {}
    for name, (_, draw) in FIGURES.items():
        path = draw(model, out_dir / f"{name}.png")
        if path is not None:
            drawn[name] = path
    return drawn
