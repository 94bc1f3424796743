"""Statistics, each defined once: summaries of trial samples, t-intervals, efficiency.

The 95% interval is a Student-t interval of the mean over trials, not +-1.96 std (a spread).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

CONFIDENCE = 0.95
NOISY_REL_STD = 0.05  # trial-to-trial variation above this flags a run as noisy


def t_quantile(df: int, confidence: float = CONFIDENCE) -> float:
    from scipy.stats import t

    return float(t.ppf(0.5 + confidence / 2, df))


@dataclass(frozen=True)
class Summary:
    n: int
    mean: float
    median: float
    std: float  # sample standard deviation (n-1); 0 for one sample
    ci_low: float | None  # None when n < 2: one sample has no interval
    ci_high: float | None

    @property
    def sem(self) -> float:
        return self.std / math.sqrt(self.n) if self.n > 1 else math.nan

    @property
    def rel_std(self) -> float:
        return self.std / self.mean if self.mean else math.nan

    @property
    def noisy(self) -> bool:
        return self.n > 1 and self.rel_std > NOISY_REL_STD


def summarize(samples: Sequence[float]) -> Summary:
    values = [float(v) for v in samples]
    if not values:
        raise ValueError("summarize needs at least one sample")
    n = len(values)
    mean = statistics.fmean(values)
    median = statistics.median(values)
    if n < 2:
        return Summary(n, mean, median, 0.0, None, None)
    std = statistics.stdev(values)
    half = t_quantile(n - 1) * std / math.sqrt(n)
    return Summary(n, mean, median, std, mean - half, mean + half)


def trial_throughputs(window_seconds: Sequence[Sequence[float]], images_per_window: int) -> list[float]:
    """Images/s of each trial for all workers together: the slowest rank's window sets the pace.

    window_seconds[rank][trial]; images_per_window = images processed by all ranks in one window.
    """
    trials = {len(w) for w in window_seconds}
    if len(trials) != 1:
        raise ValueError(f"ranks report different trial counts: {sorted(trials)}")
    return [images_per_window / max(rank[t] for rank in window_seconds)
            for t in range(trials.pop())]


def per_rank_throughputs(window_seconds: Sequence[Sequence[float]], images_per_rank_window: int
                         ) -> list[float]:
    """Each rank's own mean images/s (its own clock): shows stragglers; never summed into a total."""
    return [images_per_rank_window * len(w) / sum(w) for w in window_seconds]


@dataclass(frozen=True)
class Ratio:
    value: float
    ci_low: float | None
    ci_high: float | None


def efficiency(throughput_n: Summary, workers: int, throughput_1: Summary) -> Ratio:
    """throughput(N) / (N x throughput(1)), with a delta-method 95% interval.

    Relative standard errors add in quadrature; degrees of freedom are the smaller sample's.
    """
    value = throughput_n.mean / (workers * throughput_1.mean)
    if throughput_n.n < 2 or throughput_1.n < 2:
        return Ratio(value, None, None)
    rel_se = math.hypot(throughput_n.sem / throughput_n.mean, throughput_1.sem / throughput_1.mean)
    half = t_quantile(min(throughput_n.n, throughput_1.n) - 1) * rel_se * value
    return Ratio(value, value - half, value + half)


# ---------------------------------------------------------------- differences between two samples

MANN_WHITNEY = "Mann-Whitney U"
INTERVALS = "95% intervals"
NO_TEST = "none"


def efficiency_samples(trials_n: Sequence[float], workers: int, mean_1: float) -> list[float]:
    """Per-trial efficiency: each trial's throughput(N) / (N x mean throughput(1))."""
    return [float(v) / (workers * mean_1) for v in trials_n]


def mann_whitney_min_p(n1: int, n2: int) -> float:
    """The smallest two-sided p the exact Mann-Whitney U test can give for n1 vs n2 samples.

    Every ordering of the pooled samples is equally likely under the null; the two extreme ones
    (all of one sample below all of the other) give p = 2 / C(n1 + n2, n1). 3 vs 3 -> 0.1.
    """
    if n1 < 1 or n2 < 1:
        return 1.0
    return min(1.0, 2 / math.comb(n1 + n2, n1))


@dataclass(frozen=True)
class Difference:
    """Whether two samples differ: which test decided, its p-value (when it has one), and why."""

    test: str  # MANN_WHITNEY | INTERVALS | NO_TEST
    significant: bool
    p_value: float | None = None
    reason: str = ""


def intervals_overlap(a: Summary, b: Summary) -> bool:
    if None in (a.ci_low, a.ci_high, b.ci_low, b.ci_high):
        raise ValueError("intervals need at least two samples on each side")
    return not (a.ci_high < b.ci_low or b.ci_high < a.ci_low)


def difference(a: Sequence[float], b: Sequence[float], alpha: float = 0.05) -> Difference:
    """Two-sided test on raw samples: Mann-Whitney U where it can reach alpha, else intervals.

    With too few samples (3 vs 3 gives at best p = 0.1) the test cannot be significant at
    alpha = 0.05, so non-overlapping 95% Student-t intervals of the means decide instead. With a
    single sample on either side nothing can be said: not significant. A failed test is never
    reported as significant.
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie between 0 and 1, not {alpha}")
    a, b = [float(v) for v in a], [float(v) for v in b]
    if not a or not b:
        raise ValueError("difference needs at least one sample on each side")
    min_p = mann_whitney_min_p(len(a), len(b))
    if min_p < alpha:
        from scipy.stats import mannwhitneyu

        try:
            p = float(mannwhitneyu(a, b, alternative="two-sided").pvalue)
        except ValueError as exc:
            return Difference(MANN_WHITNEY, False, None, f"test failed: {exc}")
        if not math.isfinite(p):
            return Difference(MANN_WHITNEY, False, None, "test gave no p-value")
        return Difference(MANN_WHITNEY, p < alpha, p, f"p = {p:.3g} vs alpha {alpha:g}")
    if len(a) < 2 or len(b) < 2:
        return Difference(NO_TEST, False, None,
                          f"{len(a)} vs {len(b)} samples: one sample has no interval")
    sa, sb = summarize(a), summarize(b)
    overlap = intervals_overlap(sa, sb)
    return Difference(INTERVALS, not overlap, None,
                      f"{len(a)} vs {len(b)} samples (Mann-Whitney U at best p = {min_p:.2g}); "
                      f"95% intervals {'overlap' if overlap else 'do not overlap'}")
