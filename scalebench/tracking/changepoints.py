"""Changes in a series of measurements over time: series in, changes out.

A series is a list of points in time order; a point is the per-launch values of one sweep. A
change is a step (the level moves between two neighbouring points) or a gradual change (it moves
over several points, a slide), between two flat stretches.

Benchmark histories are not independent draws: load on shared machines comes and goes over
hours, clocks and neighbours drift, so neighbouring points are correlated. The noise of a series
is therefore modelled as AR(1) (a point's deviation carries a fraction phi of the previous one),
fitted around the changes (estimate_noise: the lag-one autocorrelation of the residuals,
corrected for the stretch means, or a variogram fit that sees a wander, whichever is higher).
Every test uses the exact variance that this noise gives a difference of two stretches' levels
(at phi 0.8 a stretch of 20 points is worth about 2 independent ones), so a change holds only
when it stands out from the series' own correlated noise, and a level that wanders within its
noise gives none.

1. Outliers: a point further than CLIP noise deviations from the running median of 5 is pulled
   back to that distance (one bad sweep is neither a change nor noise).
2. Proposal: ruptures' PELT search ("l2" cost) on the point means in units of their long-run
   noise deviation, penalty PENALTY x log(n).
3. Shape: each proposed change is refitted between its neighbours as a step or a ramp (flat, a
   straight slide, flat); a staircase of proposals in one direction becomes one ramp where that
   fits better than the staircase and its penalties.
4. Confirmation: the difference between the flat levels on either side (least squares over the
   window, slide included) against its standard error under the AR(1) noise, Student t, its p
   multiplied by the places the change could have been put; it holds at alpha and when it moves
   the level by at least the minimum magnitude. The weakest failing change is dropped and the
   rest refitted until every one holds.
5. Rounds: first under independent noise, then under the noise (and a straight drift of the
   baseline, where one stands out) fitted around the changes found, until they repeat; the
   answer that explains the series best (AR(1) innovations, PELT's penalty a change) is judged
   once more under its own noise, and each slide's ends are moved out as far as the data allow.

Percentages are against the magnitude of the level before (|before|), so that a series of
negative values that falls is a decrease; against |after| where the level before is 0. The
reasoning, the alternatives and the evaluation are in docs/change-points.md.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from scalebench.analysis import stats

MIN_SEGMENT = 2  # points in each flat stretch beside a change
MIN_POINTS = 2 * MIN_SEGMENT
SHIFT = 4  # points a change's start or end may move when it is refitted
JOIN = 8  # proposals in one direction at most this far apart may be one gradual change
MAX_LAG = 8  # lags of the variogram the noise is fitted to (n / 8 where that is more)
PHI_MAX = 0.98
ROUNDS = 4  # noise re-estimated from the changes found, at most this often
CLIP = 3.0  # noise deviations from the running median beyond which a point is pulled in
# In units of the long-run noise variance, times log(n): chosen by benchmarks/change_points.py
# (docs/change-points.md has the figures).
PENALTY = 3.0
RAMP_PENALTY = 0.5
# A reported slide reaches as far as its fit stays within this many times the points' variance
# of its best (a profile interval of about 98% for each end: the range should hold the slide)
WIDEN = 6.0
DRIFT_T = 3.0  # a drift shared by the flat stretches is taken out where |t| reaches this
ALPHA = 0.05
MIN_MAGNITUDE = 2.0  # percent
TEST = "t on AR(1) noise"


class BadValue(ValueError):
    """A value that is missing or not finite; `point` is its index in the series."""

    def __init__(self, point: int, value: object):
        self.point, self.value = point, value
        super().__init__(f"point {point}: value {value!r} is not a finite number")


@dataclass(frozen=True)
class Noise:
    """AR(1) noise of the point means: marginal variance `variance`, lag-one correlation
    `phi`; `floor`: the variance was raised to the spread of launches within points."""

    variance: float
    phi: float = 0.0
    floor: bool = False

    @property
    def sd(self) -> float:
        return math.sqrt(self.variance)

    @property
    def long_run_sd(self) -> float:
        """The noise of a long stretch's mean is long_run_sd / sqrt(points)."""
        return math.sqrt(self.variance * (1 + self.phi) / (1 - self.phi))

    @property
    def effective_fraction(self) -> float:
        """What one point is worth against an independent one in a long stretch's mean."""
        return (1 - self.phi) / (1 + self.phi)

    def variance_of(self, g) -> float:
        """The variance of sum(g[i] x point[i]) over consecutive points: variance x (sum g_i^2
        + 2 sum_i g_i sum_{j<i} phi^(i-j) g_j), the inner sums by a first-order filter."""
        import numpy as np
        from scipy.signal import lfilter

        g = np.asarray(g, dtype=float)
        h = lfilter([0.0, self.phi], [1.0, -self.phi], g) if self.phi else np.zeros_like(g)
        return self.variance * float(g @ g + 2 * g @ h)


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
    """A step (end == index) or a gradual change (the level moves from point `index` to point
    `end`, which is the first at the new level). before and after: the flat stretches."""

    index: int  # the first point that moved
    before: Segment
    after: Segment
    change_pct: float  # after's mean against before's, in % of |before| (of |after| at 0)
    difference: stats.Difference
    end: int = -1  # the first point at the new level; -1: index (a step)
    ci_pct: tuple[float, float] = (math.nan, math.nan)  # interval of change_pct at 1 - alpha
    basis: str = ""  # "" (the level before), or how the percentage was taken otherwise

    @property
    def stop(self) -> int:
        return self.index if self.end < 0 else self.end

    @property
    def gradual(self) -> bool:
        return self.stop > self.index

    @property
    def direction(self) -> str:
        """"decrease" or "increase": whether that is a regression is the metric's to say."""
        return "decrease" if self.change_pct < 0 else "increase"


@dataclass(frozen=True)
class Detection:
    points: int
    change_points: tuple[ChangePoint, ...]
    segments: tuple[Segment, ...]  # the flat stretches; () when too short
    too_short: str = ""  # why nothing was judged, when the series is too short
    noise: Noise | None = None
    drift: float = 0.0  # a straight drift of the baseline a point, taken out before judging


# ---------------------------------------------------------------- noise

def white_noise(means: Sequence[float]) -> Noise:
    """Independent noise of the point means, from the median absolute difference of
    neighbours (a step moves one difference, not the median); the first guess, before any
    change is known."""
    import numpy as np

    d = np.abs(np.diff(np.asarray(means, dtype=float)))
    if not len(d):
        return Noise(0.0)
    variance = (1.4826 * float(np.median(d))) ** 2 / 2
    return Noise(variance if variance > 0 else float(np.var(d)) / 2)


def _stretches(n: int, changes: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    bounds = [(0, 0), *changes, (n, n)]
    return [(bounds[k][1], bounds[k + 1][0]) for k in range(len(bounds) - 1)]


def _variogram_phi(y, stretches: list[tuple[int, int]]) -> float:
    """phi of an AR(1) fitted to the variogram within the stretches (mean square of the
    differences k apart, k = 1..MAX_LAG): a wander or a slope that the neighbours hide shows
    as differences that keep growing with k."""
    import numpy as np

    ks, vs = [], []
    for k in range(1, max(MAX_LAG, len(y) // 8) + 1):
        d = np.concatenate([y[a + k:b] - y[a:b - k] for a, b in stretches if b - a > k] or
                           [np.empty(0)])
        if len(d) >= 8:
            ks.append(k)
            vs.append(float(np.mean(d * d)) / 2)
    if len(ks) < 3:
        return 0.0
    k, v = np.array(ks, dtype=float), np.array(vs)
    best = (math.inf, 0.0)
    for phi in np.linspace(0.0, PHI_MAX, 50):
        f = 1 - phi ** k
        err = float(((v - (v @ f / (f @ f)) * f) ** 2).sum())
        if err < best[0] * (1 - 1e-9):
            best = (err, float(phi))
    return best[1]


def estimate_noise(y, changes: Sequence[tuple[int, int]], within: float = 0.0) -> Noise:
    """AR(1) noise of a series of point means around its flat stretches between the given
    changes ((first moved point, first point at the new level) each): phi from the lag-one
    autocorrelation of the residuals, corrected for the bias that removing each stretch's
    mean leaves (about (1 + 3 phi) / points, Marriott and Pope 1954), or from the variogram
    where that is higher; the variance from the residuals, likewise corrected. `within`: the
    variance of a point mean that the spread of launches inside points gives, a floor."""
    import numpy as np

    y = np.asarray(y, dtype=float)
    stretches = [(a, b) for a, b in _stretches(len(y), changes) if b - a >= 2]
    res = [y[a:b] - y[a:b].mean() for a, b in stretches]
    if not res:
        return Noise(max(within, 0.0), floor=within > 0)
    m = len(res)
    total = sum(len(r) for r in res)
    ss = float(sum(r @ r for r in res))
    if ss <= 0:
        return Noise(max(within, 0.0), floor=within > 0)
    r1 = float(sum(r[1:] @ r[:-1] for r in res)) / ss
    phi = (total * r1 + m) / (total - 3 * m) if total > 3 * m else r1
    phi = min(max(phi, _variogram_phi(y, stretches), 0.0), PHI_MAX)
    # half the mean square of neighbours' differences is variance x (1 - phi), whatever the
    # stretches' means
    d = np.concatenate([np.diff(y[a:b]) for a, b in stretches])
    variance = float(d @ d) / len(d) / 2 / (1 - phi)
    if within > variance:
        return Noise(within, phi, True)
    return Noise(variance, phi)


def _within(series: Sequence[Sequence[float]]) -> float:
    """The variance of a point mean from the spread of launches inside points (0 with one
    launch a point)."""
    parts = [(statistics.variance(p), len(p)) for p in series if len(p) >= 2]
    if not parts:
        return 0.0
    return statistics.fmean(var / k for var, k in parts)


def _clip(x, noise: Noise):
    """Points further than CLIP noise deviations from the running median of 5, pulled in."""
    import numpy as np

    n = len(x)
    med = np.array([np.median(x[max(0, i - 2):i + 3]) for i in range(n)])
    limit = CLIP * noise.sd
    return med + np.clip(x - med, -limit, limit)


# ---------------------------------------------------------------- proposals and shapes

def _l2_cost():
    """ruptures' "l2" cost (the squared deviations from a segment's mean) from prefix sums: the
    same numbers as its CostL2, without a numpy reduction for every segment PELT tries."""
    import numpy as np
    from ruptures.base import BaseCost

    class PrefixL2(BaseCost):
        model = "l2 (prefix sums)"
        min_size = MIN_SEGMENT

        def fit(self, signal):
            y = np.asarray(signal, dtype=float).reshape(-1)
            self.signal = y.reshape(-1, 1)
            self.s1 = np.concatenate([[0.0], np.cumsum(y)]).tolist()
            self.s2 = np.concatenate([[0.0], np.cumsum(y * y)]).tolist()
            return self

        def error(self, start, end):
            total = self.s1[end] - self.s1[start]
            return self.s2[end] - self.s2[start] - total * total / (end - start)

    return PrefixL2()


def propose(signal: Sequence[float], penalty: float = PENALTY) -> list[int]:
    """Indices where PELT puts the start of a new segment (0 < i < n), on a series in units of
    its long-run noise deviation."""
    import numpy as np
    import ruptures

    n = len(signal)
    if n < MIN_POINTS:
        return []
    y = np.asarray(signal, dtype=float)
    y = y - float(np.median(y))
    search = ruptures.Pelt(custom_cost=_l2_cost(), min_size=MIN_SEGMENT, jump=1).fit(y)
    return [int(b) for b in search.predict(pen=penalty * math.log(n))[:-1]]


def _ramp(lo: int, hi: int, a: int, b: int):
    """The share of the change reached at each point of [lo, hi): 0 before a, 1 from b on,
    a straight line between."""
    import numpy as np

    t = np.arange(lo, hi, dtype=float)
    return np.clip((t - a + 1) / (b - a + 1), 0.0, 1.0)


def _shapes(y, lo: int, hi: int, a0: int, b0: int):
    """Least-squares fits within [lo, hi) of the steps and ramps that start within SHIFT points
    of a0 and end within SHIFT points of b0 (a step: anywhere between): (sse, a, b) of the
    best step and of the best ramp (None where none fits)."""
    import numpy as np

    first, last = lo + MIN_SEGMENT, hi - MIN_SEGMENT
    pairs = [(a, a) for a in range(max(first, a0 - SHIFT), min(last, b0 + SHIFT) + 1)]
    pairs += [(a, b) for a in range(max(first, a0 - SHIFT), min(last, a0 + SHIFT) + 1)
              for b in range(max(a + 1, b0 - SHIFT), min(last, b0 + SHIFT) + 1)]
    if not pairs:
        return None, None
    sse = _pair_sse(y, lo, hi, pairs)
    steps = np.array([p[0] == p[1] for p in pairs])
    out = []
    for mask in (steps, ~steps):
        if not mask.any() or hi - lo < 2 * MIN_SEGMENT:
            out.append(None)
            continue
        i = int(np.flatnonzero(mask)[np.argmin(sse[mask])])
        out.append((float(sse[i]), pairs[i][0], pairs[i][1]))
    return out[0], out[1]


def _pair_sse(y, lo: int, hi: int, pairs: list[tuple[int, int]]):
    """The least-squares residual over [lo, hi) of each shape (flat, ramp from a to b, flat)
    of `pairs`, all at once."""
    import numpy as np

    seg = y[lo:hi]
    t = np.arange(lo, hi, dtype=float)[None, :]
    a = np.array([p[0] for p in pairs], dtype=float)[:, None]
    b = np.array([p[1] for p in pairs], dtype=float)[:, None]
    r = np.clip((t - a + 1) / (b - a + 1), 0.0, 1.0)
    u = 1 - r
    suu, suv, svv = (u * u).sum(1), (u * r).sum(1), (r * r).sum(1)
    suy, svy = u @ seg, r @ seg
    det = suu * svv - suv * suv
    m1 = (svv * suy - suv * svy) / det
    m2 = (suu * svy - suv * suy) / det
    return np.maximum(float(seg @ seg) - (m1 * suy + m2 * svy), 0.0)


def _sse_flat(y, bounds: list[int]) -> float:
    return float(sum(((y[a:b] - y[a:b].mean()) ** 2).sum() for a, b in zip(bounds, bounds[1:],
                                                                             strict=False)))


def _initial(y, cuts: list[int], n: int, penalty: float, ramp_cost: float
             ) -> list[tuple[int, int]]:
    """Changes (a, b) from PELT's cuts: a run of cuts in one direction, each within JOIN of
    the next, becomes one ramp where that fits better than the staircase and its penalties."""
    bounds = [0, *cuts, n]
    means = [float(y[a:b].mean()) for a, b in zip(bounds, bounds[1:], strict=False)]
    sign = [math.copysign(1.0, means[k + 1] - means[k]) for k in range(len(cuts))]
    runs: list[list[int]] = []
    for k in range(len(cuts)):
        if runs and sign[k] == sign[runs[-1][-1]] and cuts[k] - cuts[runs[-1][-1]] <= JOIN:
            runs[-1].append(k)
        else:
            runs.append([k])
    out: list[tuple[int, int]] = []
    log_n = math.log(n)
    for run in runs:
        if len(run) == 1:
            out.append((cuts[run[0]], cuts[run[0]]))
            continue
        lo, hi = bounds[run[0]], bounds[run[-1] + 2]
        _, ramp = _shapes(y, lo, hi, cuts[run[0]], cuts[run[-1]])
        stairs = _sse_flat(y, bounds[run[0]:run[-1] + 3])
        if ramp is not None and ramp[0] + ramp_cost < stairs + (len(run) - 1) * penalty * log_n:
            out.append((ramp[1], ramp[2]))
        else:
            out += [(cuts[k], cuts[k]) for k in run]
    return out


def _refit(y, changes: list[tuple[int, int]], n: int, ramp_cost: float
           ) -> list[tuple[int, int]]:
    """Each change refitted as a step or a ramp between its neighbours, left to right, until
    none moves (a ramp grows by up to SHIFT points a pass)."""
    for _ in range(n):
        moved = _refit_pass(y, changes, n, ramp_cost)
        if moved == changes:
            return moved
        changes = moved
    return changes


def _refit_pass(y, changes: list[tuple[int, int]], n: int, ramp_cost: float
                ) -> list[tuple[int, int]]:
    changes = list(changes)
    for k in range(len(changes)):
        lo = changes[k - 1][1] if k else 0
        hi = changes[k + 1][0] if k + 1 < len(changes) else n
        step, ramp = _shapes(y, lo, hi, *changes[k])
        if step is None:
            continue
        best = step
        if ramp is not None and ramp[0] + ramp_cost < step[0]:
            best = ramp
        changes[k] = (best[1], best[2])
    return changes


# ---------------------------------------------------------------- confirmation

def _segment(series: Sequence[Sequence[float]], start: int, stop: int) -> Segment:
    return Segment(start, stop, stats.summarize_positive([v for point in series[start:stop]
                                                         for v in point]))


def relative(before: float, after: float) -> tuple[float, str]:
    """after against before in %, of |before| (of |after| where before is 0), and how it was
    taken when not simply against a positive level before."""
    if before > 0:
        return 100.0 * (after - before) / before, ""
    if before < 0:
        return 100.0 * (after - before) / abs(before), "of |before|: the level is negative"
    if after == 0:
        return 0.0, ""
    return 100.0 * after / abs(after), "of |after|: the level before is 0"


def _judge(series, y, noise: Noise, lo: int, a: int, b: int, hi: int, alpha: float,
           drift: float = 0.0) -> ChangePoint:
    """The change from [lo, a) to [b, hi), the ramp between: least squares over the window,
    its standard error under the AR(1) noise. With a drift (y has it taken out), the change
    is the one on top of it, in % of the level before at its end."""
    import numpy as np
    from scipy.special import stdtr, stdtrit

    r = _ramp(lo, hi, a, b)
    X = np.stack([1 - r, r], axis=1)
    seg = y[lo:hi]
    xtx_inv = np.linalg.inv(X.T @ X)
    beta = xtx_inv @ X.T @ seg
    g = np.array([-1.0, 1.0]) @ xtx_inv @ X.T  # the change's estimate is g . y
    se = math.sqrt(max(noise.variance_of(g), 0.0))
    est = float(beta[1] - beta[0])
    df = max(1, len(y) - 2)
    before, after = _segment(series, lo, a), _segment(series, b, hi)
    if drift:
        level = float(beta[0]) + drift * (a - 1)  # where the drift had taken it
        change, basis = relative(level, level + est)
        basis = "; ".join(x for x in (basis, f"on top of a drift of {drift:+.3g} a point")
                          if x)
        scale = abs(level) or abs(level + est)
    else:
        change, basis = relative(before.summary.mean, after.summary.mean)
        scale = abs(before.summary.mean) or abs(after.summary.mean)
    # the search put the change where it stands out most: the chance that noise alone
    # stands out as much somewhere in the window is up to `places` times larger (Bonferroni)
    places = max(1, (hi - lo) - (b - a) - 2 * MIN_SEGMENT + 1)
    if se > 0:
        t = est / se
        p = min(1.0, places * float(2 * stdtr(df, -abs(t))))
        half = float(stdtrit(df, 1 - alpha / 2)) * se
        diff = stats.Difference(TEST, p < alpha, p, f"t = {t:.3g}, p = {p:.3g} vs alpha "
                                f"{alpha:g} (x {places} places it could have been; phi "
                                f"{noise.phi:.2f})")
    else:
        diff = stats.Difference(TEST, est != 0, 0.0 if est != 0 else 1.0, "no noise")
        half = 0.0
    ci = ((change - 100 * half / scale, change + 100 * half / scale) if scale
          else (math.nan, math.nan))
    return ChangePoint(a, before, after, change, diff, b, ci, basis)


def _holds(c: ChangePoint, min_magnitude: float) -> bool:
    return c.difference.significant and abs(c.change_pct) >= min_magnitude


def _weakness(c: ChangePoint, min_magnitude: float) -> tuple:
    p = c.difference.p_value if c.difference.p_value is not None else 1.0
    return (not _holds(c, min_magnitude), p, -abs(c.change_pct))


def point_means(series: Sequence[Sequence[float]]) -> list[float]:
    """The mean of each point, after checking that every value is a finite number (BadValue
    names the first point that is not)."""
    out = []
    for i, point in enumerate(series):
        if not point:
            raise ValueError(f"point {i}: no value; every point needs at least one")
        for v in point:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise BadValue(i, v)
        out.append(statistics.fmean(float(v) for v in point))
    return out


def detect(series: Sequence[Sequence[float]], alpha: float = ALPHA,
           min_magnitude: float = MIN_MAGNITUDE, penalty: float = PENALTY) -> Detection:
    """The changes of a series (each point: its per-launch values, in time order)."""
    import numpy as np

    means = point_means(series)
    series = [tuple(float(v) for v in point) for point in series]
    n = len(series)
    if n < MIN_POINTS:
        return Detection(n, (), (), f"{n} point{'s' if n != 1 else ''}: too short to find a "
                         f"change (needs {MIN_POINTS}, {MIN_SEGMENT} on each side)")
    x = np.asarray(means, dtype=float)
    within = _within(series)
    first = white_noise(means)
    if within > first.variance:
        first = Noise(within, floor=True)
    if first.variance <= 0:  # every point the same
        return Detection(n, (), (_segment(series, 0, n),), noise=first)
    y = _clip(x, first)
    # Rounds: changes under the noise so far, then the noise (and a drift) around them, until
    # the changes repeat. Of all the rounds' answers (and none), the one that explains the
    # series best, each with the noise fitted around it; its changes then judged again.
    t = np.arange(n, dtype=float)
    noise, drift, rounds = first, 0.0, []
    for _ in range(ROUNDS):
        spans = [(c.index, c.stop) for c in _find(series, x - drift * t, noise, alpha,
                                                   min_magnitude, penalty, drift=drift)[0]]
        if any(spans == r[0] and drift == r[2] for r in rounds):
            break
        drift = _drift(y, spans, estimate_noise(y, spans, within))
        nxt = estimate_noise(y - drift * t, spans, within)
        rounds.append((spans, nxt, drift, _criterion(y - drift * t, spans, nxt, penalty)
                       + (math.log(n) if drift else 0.0)))
        if nxt.variance <= 0:
            break
        noise = nxt
    if not any(not r[0] for r in rounds):
        drift = _drift(y, [], estimate_noise(y, [], within))
        none = estimate_noise(y - drift * t, [], within)
        rounds.append(([], none, drift, _criterion(y - drift * t, [], none, penalty)
                       + (math.log(n) if drift else 0.0)))
    spans, noise, drift, _ = min(rounds, key=lambda r: (r[3], len(r[0])))
    if noise.variance <= 0:
        noise = first
    found, flats = _find(series, x - drift * t, noise, alpha, min_magnitude, penalty, spans,
                         widen=True, drift=drift)
    segments = tuple(_segment(series, a, b) for a, b in flats)
    return Detection(n, tuple(found), segments, noise=noise, drift=drift)


def _drift(y, spans: list[tuple[int, int]], noise: Noise) -> float:
    """A straight drift of the baseline: the slope shared by the flat stretches (each its own
    level), where it stands out from the noise (|t| >= DRIFT_T); else 0."""
    import numpy as np

    n = len(y)
    g = np.zeros(n)
    for a, b in _stretches(n, spans):
        if b - a >= 3:
            g[a:b] = np.arange(a, b) - (a + b - 1) / 2
    ss = float(g @ g)
    if ss <= 0 or noise.variance <= 0:
        return 0.0
    g /= ss
    slope = float(g @ y)
    se = math.sqrt(max(noise.variance_of(g), 0.0))
    return slope if se > 0 and abs(slope) >= DRIFT_T * se else 0.0


def _criterion(y, spans: list[tuple[int, int]], noise: Noise, penalty: float) -> float:
    """How well changes and AR(1) noise explain the series, penalised like PELT: n log of the
    innovations' variance around the fitted levels (flat stretches, straight ramps), plus
    penalty x log(n) a change."""
    import numpy as np

    n = len(y)
    fitted = np.empty(n)
    stretches = _stretches(n, spans)
    levels = [float(y[a:b].mean()) if b > a else math.nan for a, b in stretches]
    for (a, b), level in zip(stretches, levels, strict=True):
        fitted[a:b] = level
    for k, (a, b) in enumerate(spans):
        if b > a:
            fitted[a:b] = levels[k] + (levels[k + 1] - levels[k]) * _ramp(a, b, a, b)
    e = y - fitted
    u = e[1:] - noise.phi * e[:-1]
    var = float(u @ u) / len(u)
    if var <= 0:
        return -math.inf if not spans else -1e300 + len(spans)
    return n * math.log(var) + len(spans) * penalty * math.log(n)


def _find(series, x, noise: Noise, alpha: float, min_magnitude: float, penalty: float,
          changes: list[tuple[int, int]] | None = None, widen: bool = False, drift: float = 0.0
          ) -> tuple[list[ChangePoint], list[tuple[int, int]]]:
    """The changes that hold under this noise (proposed by PELT, or starting from the given
    ones), and the flat stretches between them; `widen`: each gradual change's ends moved out
    as far as the data allow (_widen)."""
    n = len(x)
    y = _clip(x, noise)
    signal = y / noise.long_run_sd
    # a ramp's extra parameter costs RAMP_PENALTY x log(n) of the points' own variance, not
    # of the long-run one: the ramp explains points, not stretches
    ramp_cost = RAMP_PENALTY * math.log(n) * noise.effective_fraction
    if changes is None:
        changes = _initial(signal, propose(signal, penalty), n, penalty, ramp_cost)
    changes = list(changes)
    while True:
        changes = _merge(signal, _refit(signal, changes, n, ramp_cost), n, penalty, ramp_cost)
        bounds = [(0, 0), *changes, (n, n)]
        found = [_judge(series, y, noise, bounds[k - 1][1], a, b, bounds[k + 1][0], alpha,
                        drift) for k, (a, b) in enumerate(changes, start=1)]
        failing = [c for c in found if not _holds(c, min_magnitude)]
        if not failing:
            break
        weakest = max(failing, key=lambda c: _weakness(c, min_magnitude))
        changes.remove((weakest.index, weakest.stop))
    if widen and any(b > a for a, b in changes):
        wide = _widen(signal, changes, n, WIDEN * noise.effective_fraction)
        bounds = [(0, 0), *wide, (n, n)]
        again = [_judge(series, y, noise, bounds[k - 1][1], a, b, bounds[k + 1][0], alpha,
                        drift) for k, (a, b) in enumerate(wide, start=1)]
        if all(_holds(c, min_magnitude) for c in again):
            found = again
        else:
            bounds = [(0, 0), *changes, (n, n)]
    return found, [(bounds[k][1], bounds[k + 1][0]) for k in range(len(bounds) - 1)]


def _sse_of(y, lo: int, hi: int, changes: list[tuple[int, int]]) -> float:
    """The least-squares residual over [lo, hi) of flat stretches joined by these changes."""
    import numpy as np

    X = np.stack([np.ones(hi - lo)] + [_ramp(lo, hi, a, b) for a, b in changes], axis=1)
    seg = y[lo:hi]
    e = seg - X @ np.linalg.lstsq(X, seg, rcond=None)[0]
    return float(e @ e)


def _merge(y, changes: list[tuple[int, int]], n: int, penalty: float, ramp_cost: float
           ) -> list[tuple[int, int]]:
    """Two neighbouring changes in one direction, at most JOIN points apart, become one ramp
    from the first's start to the second's end where that fits better than the two and the
    penalty of the second (the staircase of a slide that refitting left)."""
    changes = list(changes)
    k = 0
    while k + 1 < len(changes):
        (a1, b1), (a2, b2) = changes[k], changes[k + 1]
        lo = changes[k - 1][1] if k else 0
        hi = changes[k + 2][0] if k + 2 < len(changes) else n
        before, middle, after = (float(y[lo:a1].mean()), float(y[b1:a2].mean()),
                                 float(y[b2:hi].mean()))
        if a2 - b1 <= JOIN and (middle - before) * (after - middle) > 0 and \
                _sse_of(y, lo, hi, [(a1, b2)]) + ramp_cost < \
                _sse_of(y, lo, hi, [(a1, b1), (a2, b2)]) + penalty * math.log(n):
            changes[k:k + 2] = [(a1, b2)]
            continue
        k += 1
    return changes


def _widen(y, changes: list[tuple[int, int]], n: int, tolerance: float
           ) -> list[tuple[int, int]]:
    """Each ramp widened to hold every (start, end) whose fit stays within `tolerance` of its
    best: the commits where the data cannot rule out that the level was already (or still)
    moving, so that the reported range covers the slide. The ends are judged together, not
    one at a time with the other held at its best: a slide that started earlier may also have
    ended earlier, and the region of such pairs is what the data leave open."""
    changes = list(changes)
    for k, (a, b) in enumerate(changes):
        if b == a:
            continue
        lo = changes[k - 1][1] if k else 0
        hi = changes[k + 1][0] if k + 1 < len(changes) else n
        first, last = lo + MIN_SEGMENT, hi - MIN_SEGMENT
        pairs = [(s, e) for s in range(first, a + 1) for e in range(max(b, s + 1), last + 1)]
        sse = _pair_sse(y, lo, hi, pairs)
        limit = float(_pair_sse(y, lo, hi, [(a, b)])[0]) + tolerance
        held = [p for p, v in zip(pairs, sse, strict=True) if v <= limit]
        changes[k] = (min(s for s, _ in held), max(e for _, e in held))
    return changes
