"""The rows every export renders: the history's points (history.trends, the same points
`history detect` judges), regrouped by sweep. A sweep holds, per configuration and metric, the
point's mean and its 95% Student-t interval (stats: over the per-launch values with two or
more launches, else over the trials) in export units: images/s for throughput, percent for
efficiency."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from scalebench.analysis import compare
from scalebench.spec import identity
from scalebench.tracking import history

UNITS = {"throughput": "images/s", "efficiency": "%"}
SCALE = {"throughput": 1.0, "efficiency": 100.0}


@dataclass(frozen=True)
class Value:
    """One configuration's metric in one sweep."""

    config: str  # identity.describe: "resnet101 ddp x4 fp32 b64 224px H100 weak"
    metric: str
    point: history.Point

    @property
    def unit(self) -> str:
        return UNITS[self.metric]

    @property
    def value(self) -> float:
        return SCALE[self.metric] * self.point.summary.mean

    @property
    def interval(self) -> tuple[float, float] | None:
        """The 95% interval in export units; None where one sample has none."""
        s = self.point.summary
        if s.ci_low is None or s.ci_high is None:
            return None
        return SCALE[self.metric] * s.ci_low, SCALE[self.metric] * s.ci_high

    @property
    def launches(self) -> int:
        return self.point.samples.processes

    @property
    def trials(self) -> int:
        return len(self.point.samples.trials)


@dataclass(frozen=True)
class Sweep:
    key: str  # the sweep id, or for rows written before sweep ids "<commit>@<time>"
    when: datetime  # its earliest point
    commit: str | None
    sweep_id: str | None
    branch: str | None
    values: tuple[Value, ...]

    @property
    def utc(self) -> datetime:
        return self.when.astimezone(timezone.utc)

    def configs(self) -> list[str]:
        return sorted({v.config for v in self.values})


def runs(entries: list[dict]) -> list[dict]:
    """The store's run rows (an accepted change or other note kept in the store is not a run)."""
    return [e for e in entries if e.get("kind") in (None, "run") and "status" in e]


def config_name(row: dict) -> str:
    """A row's configuration in words (identity.describe), the id every export uses."""
    return identity.describe(identity.config_key(row))


def _key(point: history.Point) -> str:
    return point.sweep_id or f"{point.commit or 'unknown'}@{point.when.isoformat()}"


def sweeps(entries: list[dict]) -> list[Sweep]:
    """Every sweep of the store with at least one successful run, oldest first."""
    rows = runs(entries)
    names: dict[tuple, str] = {}
    branches: dict[str, str] = {}
    for row in rows:
        names.setdefault((history.panel_key(row), history.line_key(row)), config_name(row))
        if row.get("branch") and row.get("sweep_id"):
            branches.setdefault(row["sweep_id"], row["branch"])
    found: dict[str, list[Value]] = {}
    for metric in compare.METRICS:
        for panel, lines in history.trends(rows, metric).items():
            for line, points in lines.items():
                for point in points:
                    found.setdefault(_key(point), []).append(
                        Value(names[(panel, line)], metric, point))
    out = []
    for key, values in found.items():
        first = min(values, key=lambda v: v.point.when).point
        ordered = sorted(values, key=lambda v: (v.config, compare.METRICS.index(v.metric)))
        out.append(Sweep(key, first.when, first.commit, first.sweep_id,
                         branches.get(first.sweep_id or ""), tuple(ordered)))
    return sorted(out, key=lambda s: (s.when, s.key))
