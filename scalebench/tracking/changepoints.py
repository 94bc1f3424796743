"""Change points in a series of measurements over time: series in, change points out.

A series is a list of points in time order; a point is the per-launch values of one sweep (a
point with 3 launches is 3 samples, not one number). ruptures' PELT search (model "l2") proposes
where the mean shifts, on the point means scaled by a robust estimate of their noise, so that
one penalty fits every series whatever its units. With equal launch counts per point that is the
same search as on the per-launch values with breaks allowed only between points. Each proposed
change is then kept only when the per-launch values of the segments on either side differ
significantly by Mann-Whitney U (stats.difference, compare's test; a split whose sample counts
cannot reach alpha, such as 2 vs 6, does not hold) by at least the minimum magnitude; the weakest
failing proposal is dropped and the segments recomputed until every remaining one holds (the
order Apache Otava and MongoDB's E-Divisive use). The reasoning and the evaluation behind the
choice and the defaults are in docs/change-points.md.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from scalebench.analysis import stats

MIN_SEGMENT = 2  # points on each side of a change point
MIN_POINTS = 2 * MIN_SEGMENT
# PELT's penalty per change point, in units of the point means' noise variance, times log(n):
# chosen by benchmarks/change_points.py (docs/change-points.md has the figures).
PENALTY = 3.0
ALPHA = 0.05
MIN_MAGNITUDE = 2.0  # percent


@dataclass(frozen=True)
class Segment:
    start: int  # points [start, stop)
    stop: int
    summary: stats.Summary  # over the per-launch values of its points

    @property
    def points(self) -> int:
        return self.stop - self.start


@dataclass(frozen=True)
class ChangePoint:
    index: int  # the first point after the change
    before: Segment
    after: Segment
    change_pct: float  # after's mean against before's
    difference: stats.Difference

    @property
    def direction(self) -> str:
        """"decrease" or "increase": whether that is a regression is the metric's to say."""
        return "decrease" if self.change_pct < 0 else "increase"


@dataclass(frozen=True)
class Detection:
    points: int
    change_points: tuple[ChangePoint, ...]
    segments: tuple[Segment, ...]  # one when there is no change point; () when too short
    too_short: str = ""  # why nothing was judged, when the series is too short


def noise_scale(means: Sequence[float]) -> float:
    """A robust standard deviation of the point means: from the median absolute difference of
    neighbours (a step moves one difference, not the median), else their spread; 0 when all
    are equal."""
    diffs = [abs(b - a) for a, b in zip(means, means[1:], strict=False)]
    mad = 1.4826 * statistics.median(diffs) / math.sqrt(2) if diffs else 0.0
    if mad > 0:
        return mad
    return statistics.pstdev(diffs) / math.sqrt(2) if len(diffs) > 1 else 0.0


def propose(means: Sequence[float], penalty: float = PENALTY) -> list[int]:
    """Indices where PELT puts the start of a new segment (0 < i < n)."""
    import numpy as np
    import ruptures

    n = len(means)
    scale = noise_scale(means)
    if n < MIN_POINTS or scale == 0:
        return []
    signal = (np.asarray(means, dtype=float) - statistics.median(means)) / scale
    search = ruptures.Pelt(model="l2", min_size=MIN_SEGMENT, jump=1).fit(signal.reshape(-1, 1))
    return [int(b) for b in search.predict(pen=penalty * math.log(n))[:-1]]


def _segment(series: Sequence[Sequence[float]], start: int, stop: int) -> Segment:
    return Segment(start, stop, stats.summarize([v for point in series[start:stop] for v in point]))


def _judge(series: Sequence[Sequence[float]], bounds: list[int], k: int, alpha: float
           ) -> ChangePoint:
    """The change at bounds[k] between the segments either side of it."""
    before = _segment(series, bounds[k - 1], bounds[k])
    after = _segment(series, bounds[k], bounds[k + 1])
    values = [[v for point in series[s.start:s.stop] for v in point] for s in (before, after)]
    diff = stats.difference(values[0], values[1], alpha)
    change = 100.0 * (after.summary.mean - before.summary.mean) / before.summary.mean
    return ChangePoint(bounds[k], before, after, change, diff)


def _holds(c: ChangePoint, min_magnitude: float) -> bool:
    # Only the rank test counts: where it cannot reach alpha (2 vs 6 samples), the interval
    # fallback would let two neighbours that happen to agree make a change.
    return (c.difference.test == stats.MANN_WHITNEY and c.difference.significant
            and abs(c.change_pct) >= min_magnitude)


def _weakness(c: ChangePoint, min_magnitude: float) -> tuple:
    p = c.difference.p_value if c.difference.p_value is not None else \
        (0.0 if c.difference.significant else 1.0)
    return (not _holds(c, min_magnitude), p, -abs(c.change_pct))


def detect(series: Sequence[Sequence[float]], alpha: float = ALPHA,
           min_magnitude: float = MIN_MAGNITUDE, penalty: float = PENALTY) -> Detection:
    """The change points of a series (each point: its per-launch values, in time order)."""
    series = [tuple(float(v) for v in point) for point in series]
    if any(not point for point in series):
        raise ValueError("every point needs at least one value")
    n = len(series)
    if n < MIN_POINTS:
        return Detection(n, (), (), f"{n} point{'s' if n != 1 else ''}: too short to find a "
                         f"change (needs {MIN_POINTS}, {MIN_SEGMENT} on each side)")
    means = [statistics.fmean(point) for point in series]
    cuts = propose(means, penalty)
    while True:
        bounds = [0, *cuts, n]
        found = [_judge(series, bounds, k, alpha) for k in range(1, len(bounds) - 1)]
        failing = [c for c in found if not _holds(c, min_magnitude)]
        if not failing:
            break
        weakest = max(failing, key=lambda c: _weakness(c, min_magnitude))
        cuts.remove(weakest.index)
    segments = tuple(_segment(series, a, b) for a, b in zip(bounds, bounds[1:], strict=False))
    return Detection(n, tuple(found), segments)
