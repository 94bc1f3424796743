"""Efficiency and throughput figures: one panel per model, one line per framework.

x = workers on a log2 axis; points carry their 95% interval; ideal lines for reference.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# Horovod's published efficiencies at 512 GPUs (128 servers x 4 Pascal GPUs, 25 Gbit/s RoCE,
# batch 64 per GPU, synthetic data, fp32).
PUBLISHED_HOROVOD = {"inception_v3": 0.90, "resnet101": 0.90, "vgg16": 0.68}
PUBLISHED_WORKERS = 512


def _series(rows: list[dict]) -> dict[str, dict[str, list[dict]]]:
    by_model: dict[str, dict[str, list[dict]]] = {}
    for row in rows:
        label = row["framework"] if row["precision"] == "fp32" else \
            f"{row['framework']} {row['precision']}"
        by_model.setdefault(row["model"], {}).setdefault(label, []).append(row)
    for lines in by_model.values():
        for points in lines.values():
            points.sort(key=lambda r: r["world_size"])
    return by_model


def _figure(rows: list[dict], path: Path, ylabel: str, value: Callable, interval: Callable,
            ideal: Callable | None, published: bool) -> Path | None:
    by_model = _series(rows)
    if not by_model:
        return None
    fig, axes = plt.subplots(1, len(by_model), figsize=(5 * len(by_model), 4), squeeze=False)
    for ax, (model, lines) in zip(axes[0], sorted(by_model.items()), strict=True):
        xs_all: set[int] = set()
        for label, points in sorted(lines.items()):
            points = [p for p in points if value(p) is not None]
            if not points:
                continue
            xs = [p["world_size"] for p in points]
            ys = [value(p) for p in points]
            lows = [max(0.0, y - (interval(p)[0] if interval(p)[0] is not None else y))
                    for p, y in zip(points, ys, strict=True)]
            highs = [max(0.0, (interval(p)[1] if interval(p)[1] is not None else y) - y)
                     for p, y in zip(points, ys, strict=True)]
            ax.errorbar(xs, ys, yerr=[lows, highs], marker="o", capsize=3, label=label)
            xs_all.update(xs)
        if ideal is not None and xs_all:
            xs = sorted(xs_all)
            ys = ideal(model, lines, xs)
            if ys is not None:
                ax.plot(xs, ys, linestyle="--", color="grey", label="ideal")
        if published and model in PUBLISHED_HOROVOD:
            ax.axhline(PUBLISHED_HOROVOD[model] * 100, color="tab:red", linestyle=":",
                       label=f"Horovod published ({PUBLISHED_WORKERS} GPUs)")
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(xs_all) or [1])
        ax.get_xaxis().set_major_formatter(matplotlib.ticker.ScalarFormatter())
        ax.set_title(model)
        ax.set_xlabel("workers")
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def efficiency_plot(rows: list[dict], path: Path, published: bool = False) -> Path | None:
    def pct(r):
        return None if r["efficiency"] is None else 100 * r["efficiency"]

    def interval(r):
        lo, hi = r["efficiency_ci95_low"], r["efficiency_ci95_high"]
        return (None if lo is None else 100 * lo, None if hi is None else 100 * hi)

    return _figure(rows, path, "scaling efficiency (%)", pct, interval,
                   lambda model, lines, xs: [100.0] * len(xs), published)


def throughput_plot(rows: list[dict], path: Path) -> Path | None:
    def ideal(model, lines, xs):
        ones = [p["images_per_sec"] for points in lines.values() for p in points
                if p["world_size"] == 1]
        return [max(ones) * x for x in xs] if ones else None

    return _figure(rows, path, "images / second (all workers)", lambda r: r["images_per_sec"],
                   lambda r: (r["ci95_low"], r["ci95_high"]), ideal, False)
