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
