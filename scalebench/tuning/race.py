"""The race over candidate settings of one cell: a pure function of the measured figures.

Samples come in *slots*: one slot holds one value per candidate measured side by side (one
interleaved round of windows inside a launch, or one round of launches), so slow drift of the
machine cancels in every paired comparison. Every candidate is compared with the default on
the slots they share (its score: the mean log ratio to the default), and with the leader when
it may be dropped: a candidate is dropped only when a one-sided Wilcoxon signed-rank test on
its paired log ratios to the leader rejects "as fast" at the alpha this look may spend
(alpha * 6 / (pi^2 k^2) at the k-th look, which sums to alpha over all looks), divided by the
other candidates (Bonferroni), AND its mean shortfall exceeds `min_effect`. The default is never dropped: it
is the baseline every score is paired with and the candidate a confirmation is measured
against. Nothing here measures, sleeps or does I/O; unit tests feed it simulated surfaces.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

ALPHA = 0.05
MIN_SLOTS = 4  # paired slots before any candidate may be dropped
MIN_EFFECT = 0.01  # a drop also needs the leader at least 1% ahead on the shared slots


@dataclass(frozen=True)
class Candidate:
    name: str  # a short label, unique in the cell ("bucket_cap_mb=25,gradient_as_bucket_view=0")
    settings: Mapping[str, Any]
    default: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "settings": dict(self.settings), "default": self.default}


@dataclass
class Drop:
    candidate: str
    slot: int  # slots seen when it was dropped
    leader: str
    ratio: float  # candidate / leader, geometric mean over the shared slots
    p_value: float
    threshold: float

    def reason(self) -> str:
        return (f"{(1 - self.ratio) * 100:.1f}% behind {self.leader} over {self.slot} paired "
                f"slots (Wilcoxon p={self.p_value:.2g} < {self.threshold:.2g})")


@dataclass
class Race:
    candidates: Sequence[Candidate]
    alpha: float = ALPHA
    min_slots: int = MIN_SLOTS
    min_effect: float = MIN_EFFECT
    slots: list[dict[str, float]] = field(default_factory=list)
    dropped: list[Drop] = field(default_factory=list)
    checks: int = 0  # step() calls that could drop (the alpha spent is spread over them)
    failed: dict[str, str] = field(default_factory=dict)  # candidate -> why it failed

    def __post_init__(self) -> None:
        names = [c.name for c in self.candidates]
        if len(set(names)) != len(names):
            raise ValueError(f"candidate names repeat: {names}")
        defaults = [c for c in self.candidates if c.default]
        if len(defaults) != 1:
            raise ValueError("a race needs exactly one default candidate")
        self.default = defaults[0].name

    def survivors(self) -> list[Candidate]:
        out = {d.candidate for d in self.dropped} | set(self.failed)
        return [c for c in self.candidates if c.name not in out or c.name == self.default]

    def candidate(self, name: str) -> Candidate:
        return next(c for c in self.candidates if c.name == name)

    def add_slot(self, values: Mapping[str, float]) -> None:
        """One slot of side-by-side values (images/s; every value finite and > 0)."""
        for name, value in values.items():
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"candidate {name}: value {value!r} is not a positive number")
        self.slots.append(dict(values))

    def fail(self, name: str, reason: str) -> None:
        """A candidate that crashed or hung: out of the race with its reason (never the
        default: a default that fails leaves nothing to compare with, the caller stops)."""
        self.failed.setdefault(name, reason)

    def paired(self, a: str, b: str) -> list[float]:
        """log(a / b) over the slots where both were measured."""
        return [math.log(s[a] / s[b]) for s in self.slots if a in s and b in s]

    def score(self, name: str) -> float | None:
        """Mean log ratio to the default over shared slots (0 for the default)."""
        diffs = self.paired(name, self.default)
        return sum(diffs) / len(diffs) if diffs else None

    def leader(self) -> str:
        scored = [(self.score(c.name), c.name) for c in self.survivors()]
        scored = [(s, n) for s, n in scored if s is not None]
        if not scored:
            return self.default
        return max(scored)[1]

    def step(self) -> list[Drop]:
        """Drop every survivor significantly slower than the leader; returns the new drops."""
        leader = self.leader()
        alive = self.survivors()
        if len(alive) < 2:
            return []
        if len(self.slots) < self.min_slots:
            return []
        self.checks += 1
        threshold = spent_alpha(self.alpha, self.checks) / (len(self.candidates) - 1)
        new = []
        for c in alive:
            if c.name in (leader, self.default):
                continue
            diffs = self.paired(c.name, leader)
            if len(diffs) < self.min_slots:
                continue
            mean = sum(diffs) / len(diffs)
            if mean > -math.log1p(self.min_effect):
                continue
            p = signed_rank_p_less(diffs)
            if p < threshold:
                new.append(Drop(c.name, len(self.slots), leader, math.exp(mean), p, threshold))
        self.dropped += new
        return new

    def best(self) -> str:
        """The survivor the confirmation should measure: the highest score under the knobs'
        additive model (`predicted`), the default when no survivor has a score."""
        predicted = self.predicted()
        scored = [(predicted[c.name], c.name) for c in self.survivors() if c.name in predicted]
        return max(scored)[1] if scored else self.default

    def predicted(self) -> dict[str, float]:
        """Each candidate's score as the sum of its knobs' main effects, fitted by weighted
        least squares (weights: the slots behind each score) over every candidate with a
        score, then evaluated for every combination of the knob values seen.

        A candidate's own score rests on its own slots only; a main effect rests on every
        candidate sharing that value (in a 4 x 2 grid, 4 and 12 times the slots). After the
        first few slots the own scores of 8 candidates spread by more than the effects
        searched for, and their maximum is mostly noise; the additive fit is not. Where the
        grid is one knob, or the fit has as many parameters as scores, it returns the own
        scores. An interaction between knobs is what it cannot see; the confirmation, measured
        on the winner itself, still guards the verdict."""
        import numpy as np

        scores = {c.name: self.score(c.name) for c in self.candidates}
        scores[self.default] = 0.0
        have = [c for c in self.candidates if scores[c.name] is not None]
        knobs = sorted({k for c in self.candidates for k in c.settings})
        base = dict(self.candidate(self.default).settings)
        columns = [(k, v) for k in knobs
                   for v in sorted({repr(c.settings.get(k)) for c in have})
                   if v != repr(base.get(k))]
        if len(columns) + 1 >= len(have):
            return {c.name: scores[c.name] for c in have}

        def row(c: Candidate) -> list[float]:
            return [1.0] + [float(repr(c.settings.get(k)) == v) for k, v in columns]

        weights = np.sqrt([max(1, len(self.paired(c.name, self.default))) for c in have])
        x = np.array([row(c) for c in have]) * weights[:, None]
        y = np.array([scores[c.name] for c in have]) * weights
        coef = np.linalg.lstsq(x, y, rcond=None)[0]
        return {c.name: float(np.dot(row(c), coef)) for c in self.candidates}


def spent_alpha(alpha: float, check: int) -> float:
    """The share of alpha the check-th look may spend: alpha * 6 / (pi^2 check^2), which sums
    to alpha over any number of looks (repeated looks at growing data would otherwise inflate
    the chance of a wrong drop)."""
    return alpha * 6.0 / (math.pi ** 2 * check ** 2)


def signed_rank_p_less(diffs: Sequence[float]) -> float:
    """One-sided p-value of the Wilcoxon signed-rank test for 'the differences are centred
    below zero' (exact for small samples, scipy's choice); 1.0 when every difference is 0.

    Without zeros or ties and at most EXACT_MAX differences (scipy's exact case) it is
    computed here, from the exact null distribution of W+ (the same value scipy gives, at a
    hundredth of its cost: a race looks after every few slots); otherwise by scipy."""
    if all(d == 0 for d in diffs):
        return 1.0
    n = len(diffs)
    magnitudes = sorted(abs(d) for d in diffs)
    exact = (0 < n <= EXACT_MAX and magnitudes[0] > 0
             and all(a < b for a, b in zip(magnitudes[:-1], magnitudes[1:], strict=True)))
    if not exact:
        from scipy import stats

        return float(stats.wilcoxon(diffs, alternative="less", zero_method="zsplit").pvalue)
    rank = {m: i + 1 for i, m in enumerate(magnitudes)}
    w_plus = sum(rank[abs(d)] for d in diffs if d > 0)
    counts = _signed_rank_counts(n)
    return sum(counts[: w_plus + 1]) / 2 ** n


EXACT_MAX = 50  # scipy.stats.wilcoxon's method="auto" is exact up to here (no zeros or ties)


@functools.cache
def _signed_rank_counts(n: int) -> tuple[int, ...]:
    """How many of the 2^n sign patterns of ranks 1..n give each W+ (0 .. n(n+1)/2)."""
    counts = [1]
    for r in range(1, n + 1):
        grown = counts + [0] * r
        for w, c in enumerate(counts):
            grown[w + r] += c
        counts = grown
    return tuple(counts)


@dataclass(frozen=True)
class Confirmation:
    """The winner against the default over fresh launches, paired launch by launch."""

    winner: str
    default: str
    ratios: tuple[float, ...]  # winner / default, per launch (geometric mean of its slots)
    ratio: float
    low: float
    high: float
    significant: bool  # the whole interval above 1
    # what one ratio stands on: a launch timing both ("paired launches"), or a launch of each
    # ("pairs of launches", where a knob is read only as the framework starts)
    unit: str = "paired launches"

    def words(self) -> str:
        gain = (self.ratio - 1) * 100
        interval = f"[{(self.low - 1) * 100:+.1f}%, {(self.high - 1) * 100:+.1f}%]"
        n = len(self.ratios)
        if self.winner == self.default:
            return "no candidate beat the default beyond noise; the default is kept"
        if self.significant:
            return (f"{self.winner} beats the default by {gain:+.1f}% {interval} over {n} "
                    f"fresh {self.unit}")
        return (f"{self.winner} measured {gain:+.1f}% {interval} against the default over {n} "
                f"fresh {self.unit}: not beyond noise, the default is kept")


def ratio_interval(log_ratios: Sequence[float]) -> tuple[float, float | None, float | None]:
    """Geometric-mean ratio and the 95% Student-t interval of the mean log ratio, as ratios
    (stats.summarize on the logs; no interval from one value)."""
    from scalebench.analysis import stats

    s = stats.summarize(log_ratios)
    if s.ci_low is None:
        return math.exp(s.mean), None, None
    return math.exp(s.mean), math.exp(s.ci_low), math.exp(s.ci_high)


def confirm(winner: str, default: str, launch_ratios: Sequence[float],
            unit: str = "paired launches") -> Confirmation:
    """Student-t interval of the mean log ratio over launches (each launch, or pair of
    launches, one sample: `unit` names which)."""
    ratio, low, high = ratio_interval([math.log(r) for r in launch_ratios])
    if low is None:
        return Confirmation(winner, default, tuple(launch_ratios), ratio, math.nan, math.nan,
                            False, unit)
    return Confirmation(winner, default, tuple(launch_ratios), ratio, low, high,
                        winner != default and low > 1.0, unit)


@dataclass(frozen=True)
class ConfirmPlan:
    """How a confirmation is measured: `launches` fresh launches of `rounds` paired slots."""

    launches: int
    rounds: int
    seconds: float  # by the cost model it was planned with

    def relative_half_width(self) -> float:
        """The 95% Student-t half-width of the mean log ratio, in units of one slot's spread,
        with no launch-to-launch variation beyond the slots' own."""
        from scipy import stats

        return float(stats.t.ppf(0.975, self.launches - 1)) / math.sqrt(
            self.launches * self.rounds)


def launches_to_confirm(effect: float, slot_spread: float, rounds: int,
                        most: int = 100) -> int | None:
    """How many confirmation launches of `rounds` paired slots each would put a lead of
    `effect` (a log ratio) beyond the 95% Student-t interval, given the spread (standard
    deviation) of one slot's log ratio; None when there is no lead or `most` would not do.
    Launch-to-launch variation beyond the slots' own is not in it: a lower bound."""
    if effect <= 0 or not slot_spread > 0:
        return None
    for n in range(2, most + 1):
        if ConfirmPlan(n, rounds, 0.0).relative_half_width() * slot_spread < effect:
            return n
    return None


def plan_confirmation(room: float, fixed: float, pair_round: float, least: int = 3,
                      most: int = 8, most_rounds: int = 8) -> ConfirmPlan:
    """The launches x rounds that fit `room` seconds (a launch costs `fixed` + rounds x
    `pair_round`) with the narrowest interval: the t quantile of launches - 1 degrees of
    freedom over sqrt(launches x rounds). More launches beat more rounds in a launch until
    `most` (the quantile falls: 4.30 at 3 launches, 2.36 at 8), and they also average over
    whatever varies from launch to launch. At least `least` launches of one round, whatever
    `room` says (the caller decides beforehand whether that minimum is affordable)."""
    best = ConfirmPlan(least, 1, least * (fixed + pair_round))
    for launches in range(least, most + 1):
        for rounds in range(1, most_rounds + 1):
            seconds = launches * (fixed + rounds * pair_round)
            if seconds > room:
                break
            plan = ConfirmPlan(launches, rounds, seconds)
            if (plan.relative_half_width(), plan.seconds) < (best.relative_half_width(),
                                                              best.seconds):
                best = plan
    return best
