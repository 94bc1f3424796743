"""The report's "At their best" section: per model and worker count, each framework at its
defaults and with the settings `scalebench tune` chose (a sweep run with --tuned has both rows:
they differ in step options, so they are separate configurations), the ranking under both, and
the verdict in words. A row is "tuned" when one of its framework's knobs is not at its default.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from scalebench import frameworks
from scalebench.analysis import stats

KEY = "best"
TITLE = "At their best"
TEXT = ("Each framework at its defaults and tuned (the settings `scalebench tune` confirmed, run "
        "beside the defaults with `scalebench sweep --tuned`), at the same model and worker "
        "count. Gaps are decided as in the framework comparison above; a gap that is not "
        "significant is called within noise. A tuned row's efficiency is against the default's "
        "one-worker run unless it has its own: one worker runs the plain step, so the tuned "
        "knobs (communication settings) cannot change it.",)
EMPTY = ("No tuned runs in these results: `scalebench tune` finds each framework's best "
         "settings, and `scalebench sweep --tuned DIR` runs them beside the defaults.")


def is_tuned(row: dict) -> bool:
    if row["framework"] not in frameworks.names():
        return False
    options = row.get("options") or {}
    for knob in frameworks.get(row["framework"]).knobs:
        value = options.get(knob.option)
        if value is not None and value != knob.default:
            return True
    return False


def settings_text(row: dict) -> str:
    """The knobs of a row that are not at their defaults, e.g. "bucket_cap_mb=1.0"."""
    defaults = {k.option: k.default for k in frameworks.get(row["framework"]).knobs}
    return ", ".join(f"{k}={v}" for k, v in (row.get("options") or {}).items()
                     if k in defaults and v is not None and v != defaults[k])


@dataclass(frozen=True)
class Entry:
    framework: str
    default: dict | None
    tuned: dict | None  # the fastest tuned row, if any

    @property
    def best(self) -> dict:
        if self.tuned is None:
            return self.default
        if self.default is None or self.tuned["images_per_sec"] >= self.default["images_per_sec"]:
            return self.tuned
        return self.default

    @property
    def gain(self) -> float | None:
        if self.tuned is None or self.default is None:
            return None
        return self.tuned["images_per_sec"] / self.default["images_per_sec"] - 1


@dataclass(frozen=True)
class Cell:
    title: str
    workers: int
    entries: tuple[Entry, ...]
    verdict: str


def gap_words(leader: dict, other: dict, alpha: float) -> str:
    gap = 1 - other["images_per_sec"] / leader["images_per_sec"]
    d = stats.difference_of(leader["samples"], other["samples"], alpha)
    return f"{gap:.0%} behind {leader['framework']}" + ("" if d.significant else ", within noise")


def verdict(entries: Sequence[Entry], workers: int, alpha: float) -> str:
    defaults = sorted((e.default for e in entries if e.default), key=lambda r: -r["images_per_sec"])
    bests = sorted((e.best for e in entries if e.best), key=lambda r: -r["images_per_sec"])
    parts = []
    for e in entries:
        if e.default is None or e.best is None:
            continue
        at_default = ("leads" if e.default is defaults[0] else
                      gap_words(defaults[0], e.default, alpha))
        at_best = ("leads" if e.best is bests[0] else gap_words(bests[0], e.best, alpha))
        if len(entries) > 1:
            parts.append(f"at defaults {e.framework} {at_default} at {workers} workers; at "
                         f"their best, {at_best}")
        if e.tuned is not None:
            d = stats.difference_of(e.tuned["samples"], e.default["samples"], alpha)
            parts.append(f"{e.framework} tuned ({settings_text(e.tuned)}) "
                         f"{e.gain:+.0%} against its default"
                         + ("" if d.significant else " (within noise)"))
    return "; ".join(parts) + "." if parts else ""


def build(rows: Sequence[dict], alpha: float = 0.05) -> tuple[Cell, ...]:
    """One cell per model x workers x nodes x precision x device where some row is tuned."""
    cells: dict[tuple, list[dict]] = {}
    for r in rows:
        key = (r["model"], r["world_size"], r["nodes"], r["precision_label"],
               r["device_kind"], r["batch_size"], r["image_size"], r["scaling"])
        cells.setdefault(key, []).append(r)
    out = []
    for key, members in sorted(cells.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2])):
        if not any(is_tuned(r) for r in members):
            continue
        entries = []
        for framework in dict.fromkeys(r["framework"] for r in members):
            own = [r for r in members if r["framework"] == framework]
            defaults = [r for r in own if not is_tuned(r)]
            tuned = sorted((r for r in own if is_tuned(r)), key=lambda r: -r["images_per_sec"])
            entries.append(Entry(framework, defaults[0] if defaults else None,
                                 tuned[0] if tuned else None))
        model, workers = key[0], key[1]
        out.append(Cell(f"{model}, {workers} workers, {key[3]}", workers, tuple(entries),
                        verdict(entries, workers, alpha)))
    return tuple(out)


HEADER = ("framework", "default images/s (95% CI)", "tuned images/s (95% CI)", "tuned settings",
          "tuned vs default", "efficiency default / tuned", "rank at defaults",
          "rank at their best")


def rows_of(cell: Cell) -> list[list[str]]:
    def rate(r: dict | None) -> str:
        if r is None:
            return "-"
        ci = ("" if r["ci95_low"] is None else f" [{r['ci95_low']:.3g}, {r['ci95_high']:.3g}]")
        return f"{r['images_per_sec']:.3g}{ci}"

    def efficiency(r: dict | None) -> str:
        return "-" if r is None or r.get("efficiency") is None else f"{r['efficiency']:.0%}"

    by_default = sorted((e for e in cell.entries if e.default),
                        key=lambda e: -e.default["images_per_sec"])
    by_best = sorted(cell.entries, key=lambda e: -e.best["images_per_sec"])
    out = []
    for e in cell.entries:
        out.append([e.framework, rate(e.default), rate(e.tuned),
                    settings_text(e.tuned) if e.tuned else "default kept",
                    "-" if e.gain is None else f"{e.gain:+.1%}",
                    f"{efficiency(e.default)} / {efficiency(e.tuned)}",
                    str(by_default.index(e) + 1) if e in by_default else "-",
                    str(by_best.index(e) + 1)])
    return out
