"""Statistics, each defined once: summaries of samples, t-intervals, efficiency, and the test
that decides whether two sets of samples differ.

The 95% interval is a Student-t interval of the mean, not +-1.96 std (a spread). Images/s and
efficiency are positive, so their intervals are taken on the log scale (`positive_interval`):
never below zero, and where the bounds would lie more than MAX_SPAN apart, or a sample is not
above zero, no bounds but the reason the interval is too noisy to bound. A metric has
samples at two levels (`Samples`): one per process (a launch's mean over its trials) and one per
trial. With two or more processes, the processes are the independent samples and decide the
interval, the noise flag and the significance test; with one process its trials do.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace

CONFIDENCE = 0.95
NOISY_REL_STD = 0.05  # variation between samples above this flags a run as noisy
# An interval of a positive quantity whose upper bound is more than this many times its lower
# bound says no more than the order of magnitude: it is shown as too noisy to bound, with why.
MAX_SPAN = 10.0
# A sample this many times below or above the median of the others is named as the cause.
OUTLIER_FACTOR = 2.0
TOO_NOISY = "too noisy to bound"


def t_quantile(df: int, confidence: float = CONFIDENCE) -> float:
    # scipy.special's inverse of the t CDF: the value of scipy.stats.t.ppf without importing
    # scipy.stats (a second of start-up in every sweep and report process)
    from scipy.special import stdtrit

    return float(stdtrit(df, 0.5 + confidence / 2))


@dataclass(frozen=True)
class Summary:
    n: int
    mean: float
    median: float
    std: float  # sample standard deviation (n-1); 0 for one sample
    ci_low: float | None  # None when n < 2 (one sample has no interval) or too noisy
    ci_high: float | None
    too_noisy: str = ""  # why a positive quantity's interval is too noisy to bound; else ""

    @property
    def sem(self) -> float:
        return self.std / math.sqrt(self.n) if self.n > 1 else math.nan

    @property
    def rel_std(self) -> float:
        return self.std / self.mean if self.mean else math.nan

    @property
    def noisy(self) -> bool:
        return self.n > 1 and self.rel_std > NOISY_REL_STD


def summarize(samples: Sequence[float], confidence: float = CONFIDENCE) -> Summary:
    values = [float(v) for v in samples]
    if not values:
        raise ValueError("summarize needs at least one sample")
    n = len(values)
    mean = statistics.fmean(values)
    median = statistics.median(values)
    if n < 2:
        return Summary(n, mean, median, 0.0, None, None)
    std = statistics.stdev(values)
    half = t_quantile(n - 1, confidence) * std / math.sqrt(n)
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
    too_noisy: str = ""  # why the interval is too noisy to bound (positive_interval); else ""


def noisy_text(too_noisy: str) -> str:
    """An interval too noisy to bound, with why: "too noisy to bound (1 of 3 trials 17x
    slower)" (report.format.interval shows it so wherever an interval appears)."""
    return f"{TOO_NOISY} ({too_noisy})"


def _log_bounds(estimate: float, half: float) -> tuple[float | None, float | None]:
    """estimate x exp(-+half), or no bounds when they lie more than MAX_SPAN apart."""
    if 2 * half > math.log(MAX_SPAN):
        return None, None
    return estimate * math.exp(-half), estimate * math.exp(half)


def positive_interval(estimate: float, values: Sequence[float], confidence: float = CONFIDENCE,
                      cause: str = "", unit: str = "samples"
                      ) -> tuple[float | None, float | None, str]:
    """(low, high, too_noisy): the interval of a positive estimate (images/s, an efficiency)
    from the samples behind it, taken on the log scale so that it is never below zero.

    The half-width is the Student-t one of the samples' logarithms, t(n-1) x sd(log x) /
    sqrt(n), and the interval is estimate x exp(-+half): for a ratio (an efficiency), the log is
    a difference of logs, so paired samples keep their pairing. Centred on the estimate, the
    interval always contains the number it belongs to; for small spreads it is the linear
    t-interval (sd(log x) ~ sd(x) / mean). With one sample: no bounds and no reason (one sample
    has no interval). With a sample at or below zero, or bounds more than MAX_SPAN apart: no
    bounds, and too_noisy says why (`cause`, e.g. "1 of 3 trials 17x slower", else the samples'
    spread in words).
    """
    values = [float(v) for v in values]
    n = len(values)
    if n < 2:
        return None, None, ""
    bad = sum(1 for v in values if not v > 0)
    if bad or not estimate > 0:
        what = f"{bad} of {_count(n, unit[:-1], unit)} at or below zero" if bad else \
            f"an estimate of {estimate:.3g}"
        return None, None, what
    logs = [math.log(v) for v in values]
    half = t_quantile(n - 1, confidence) * statistics.stdev(logs) / math.sqrt(n)
    low, high = _log_bounds(estimate, half)
    if low is None:
        return None, None, cause or outlier_text(values, unit) or \
            f"{n} {unit} from {min(values):.3g} to {max(values):.3g}"
    return low, high, ""


def outlier_text(values: Sequence[float], unit: str = "samples", lower: str = "slower",
                 higher: str = "faster") -> str:
    """The samples more than OUTLIER_FACTOR from the median, in words: "1 of 3 trials 17x
    slower" (the most extreme one's factor), only while they are a minority; "" when none is."""
    values = [float(v) for v in values]
    n = len(values)
    if n < 2 or any(not v > 0 for v in values):
        return ""
    median = statistics.median(values)
    out = []
    for far, word in (([median / v for v in values if v * OUTLIER_FACTOR < median], lower),
                      ([v / median for v in values if v > OUTLIER_FACTOR * median], higher)):
        if far and 2 * len(far) < n + (n == 2):
            factor = max(far)
            out.append(f"{len(far)} of {n} {unit} {factor:.{0 if factor >= 10 else 1}f}x {word}")
    return ", ".join(out)


def summarize_positive(samples: Sequence[float], confidence: float = CONFIDENCE, cause: str = "",
                       unit: str = "samples") -> Summary:
    """`summarize` of a positive quantity: the same mean, median and spread, the interval
    positive_interval's (log scale; none, with the reason, when too noisy to bound)."""
    s = summarize(samples, confidence)
    low, high, why = positive_interval(s.mean, samples, confidence, cause, unit)
    return replace(s, ci_low=low, ci_high=high, too_noisy=why)


def efficiency(throughput_n: Summary, workers: int, throughput_1: Summary) -> Ratio:
    """throughput(N) / (N x throughput(1)) of two unpaired runs, with a delta-method 95%
    interval on the log scale: log of a ratio is a difference of logs, whose relative standard
    errors add in quadrature; degrees of freedom are the smaller sample's. Never below zero;
    bounds more than MAX_SPAN apart are too noisy to bound."""
    value = throughput_n.mean / (workers * throughput_1.mean)
    if throughput_n.n < 2 or throughput_1.n < 2:
        return Ratio(value, None, None)
    rel_se = math.hypot(throughput_n.sem / throughput_n.mean, throughput_1.sem / throughput_1.mean)
    low, high = _log_bounds(value, t_quantile(min(throughput_n.n, throughput_1.n) - 1) * rel_se)
    if low is None:
        return Ratio(value, None, None, f"relative std {throughput_n.rel_std:.0%} (N workers) "
                                        f"and {throughput_1.rel_std:.0%} (one worker)")
    return Ratio(value, low, high)


# ---------------------------------------------------------------- samples at two levels

PROCESSES, TRIALS = "processes", "trials"
UNITS = {PROCESSES: "launches", TRIALS: "trials"}  # the samples of each basis, in words


def _count(n: int, word: str, words: str) -> str:
    return f"{n} {word if n == 1 else words}"


@dataclass(frozen=True)
class Samples:
    """A metric's samples at two levels: every trial (pooled over the processes) and one value
    per process (a launch); trial_counts[k] trials stand behind process_values[k]. The metric is
    positive (images/s, an efficiency): `summary` takes its interval on the log scale. Paired
    ratios (efficiency) carry the two runs they pair (`sides`: label, throughput samples), so
    that an interval too noisy to bound names the run and the trial behind it."""

    trials: tuple[float, ...]
    process_values: tuple[float, ...]
    trial_counts: tuple[int, ...]
    sides: tuple[tuple[str, Samples], ...] = ()

    @classmethod
    def of_processes(cls, per_process: Sequence[Sequence[float]]) -> Samples:
        """From each process's trials; a process's value is the mean of its trials."""
        runs = [[float(v) for v in trials] for trials in per_process if len(trials)]
        if not runs:
            raise ValueError("samples need at least one trial")
        return cls(tuple(v for run in runs for v in run),
                   tuple(statistics.fmean(run) for run in runs), tuple(len(run) for run in runs))

    @classmethod
    def of_trials(cls, trials: Sequence[float]) -> Samples:
        """The trials of one process."""
        return cls.of_processes([trials])

    @property
    def processes(self) -> int:
        return len(self.process_values)

    @property
    def basis(self) -> str:
        """PROCESSES with two or more processes, else TRIALS."""
        return PROCESSES if self.processes >= 2 else TRIALS

    def values(self, basis: str | None = None) -> tuple[float, ...]:
        return self.process_values if (basis or self.basis) == PROCESSES else self.trials

    def summary(self, basis: str | None = None) -> Summary:
        """The one estimate, the mean of the per-process values (what the report shows: for a
        paired efficiency of one launch the ratio of the two means, not the mean of the trials'
        ratios, which one slow trial inflates), with the spread of the basis's values and
        their positive interval (positive_interval) about it."""
        basis = basis or self.basis
        values = self.values(basis)
        estimate = statistics.fmean(self.process_values)
        low, high, why = positive_interval(estimate, values, cause=self.cause(basis),
                                           unit=UNITS[basis])
        return replace(summarize(values), mean=estimate, ci_low=low, ci_high=high,
                       too_noisy=why)

    def cause(self, basis: str | None = None) -> str:
        """What spreads the values, in words: outlier_text of the values, or of each paired run
        (e.g. "the one-worker run: 1 of 3 trials 17x slower"); "" when no sample stands out."""
        basis = basis or self.basis
        if not self.sides:
            return outlier_text(self.values(basis), UNITS[basis])
        return "; ".join(f"{label}: {text}" for label, side in self.sides
                         if (text := outlier_text(side.values(basis), UNITS[basis])))

    def describe(self, basis: str | None = None) -> str:
        """The samples in words: "3 processes (5 trials each)" or "3 trials (1 process)"."""
        counts = set(self.trial_counts)
        each = f"{_count(counts.pop(), 'trial', 'trials')} each" if len(counts) == 1 else \
            f"{_count(len(self.trials), 'trial', 'trials')} in all"
        if (basis or self.basis) == PROCESSES:
            return f"{_count(self.processes, 'process', 'processes')} ({each})"
        return (f"{_count(len(self.trials), 'trial', 'trials')} "
                f"({_count(self.processes, 'process', 'processes')})")


def common_basis(a: Samples, b: Samples) -> str:
    """Per-process values when both sides have two or more processes, else trials."""
    return PROCESSES if a.basis == b.basis == PROCESSES else TRIALS


def basis_text(a: Samples, b: Samples, basis: str) -> str:
    """Which samples a comparison used, in words."""
    what = "per-process means" if basis == PROCESSES else "trials"
    return f"on {what}: {a.describe(basis)} vs {b.describe(basis)}"


def within_processes_text(a: Samples, b: Samples, about: str) -> str:
    """With one launch on either side, what a verdict on trials may claim, in words ("" with
    two or more launches on both sides): the trials of one process share its placement, clocks
    and allocator state, and re-launching a configuration can move it by more than they vary."""
    if a.processes >= 2 and b.processes >= 2:
        return ""
    return (f"{_count(a.processes, 'launch', 'launches')} vs "
            f"{_count(b.processes, 'launch', 'launches')}: this holds within these processes "
            f"only; run --repeats 2 or more for a verdict about {about}")


def efficiency_samples(throughput_n: Sequence[float], workers: int,
                       throughput_1: float | Sequence[float]) -> list[float]:
    """Efficiency samples throughput(N) / (N x throughput(1)): each against one fixed one-worker
    value, or, given the one-worker samples, sample i against sample i (as far as the shorter
    goes), so that every ratio carries the variation of both runs."""
    if isinstance(throughput_1, (int, float)):
        return [float(v) / (workers * throughput_1) for v in throughput_n]
    return [float(n) / (workers * float(one)) for n, one in zip(throughput_n, throughput_1,
                                                                  strict=False)]


def paired_efficiency(pairs: Sequence[tuple[Sequence[float], Sequence[float]]], workers: int
                      ) -> Samples:
    """Efficiency of paired launches, given (N-worker trials, one-worker trials) per pair: per
    pair, the ratio of the two means; per trial, trial i against trial i of the same pair."""
    trials: list[float] = []
    values, counts = [], []
    for n, one in pairs:
        paired = efficiency_samples(n, workers, one)
        trials += paired
        values.append(statistics.fmean(n) / (workers * statistics.fmean(one)))
        counts.append(len(paired))
    if not values:
        raise ValueError("paired_efficiency needs at least one pair")
    sides = ((f"the {workers}-worker run", Samples.of_processes([n for n, _ in pairs])),
             ("the one-worker run", Samples.of_processes([one for _, one in pairs])))
    return Samples(tuple(trials), tuple(values), tuple(counts), sides)


# ---------------------------------------------------------------- differences between two samples

MANN_WHITNEY = "Mann-Whitney U"
NO_TEST = "none"


def intervals_test(alpha: float) -> str:
    """The fallback test's name at alpha: non-overlapping (1 - alpha) intervals."""
    return f"{100 * (1 - alpha):g}% intervals"


INTERVALS = intervals_test(0.05)  # "95% intervals"


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
    """Whether two samples differ: which test decided, its p-value (when it has one), why, and
    (from `difference_of`) which samples it ran on."""

    test: str  # MANN_WHITNEY | intervals_test(alpha) | NO_TEST
    significant: bool
    p_value: float | None = None
    reason: str = ""
    basis: str = ""  # PROCESSES | TRIALS; "" when called on bare samples
    samples: str = ""  # basis_text


def intervals_overlap(a: Summary, b: Summary) -> bool:
    if None in (a.ci_low, a.ci_high, b.ci_low, b.ci_high):
        raise ValueError("intervals need at least two samples on each side")
    return not (a.ci_high < b.ci_low or b.ci_high < a.ci_low)


def difference(a: Sequence[float], b: Sequence[float], alpha: float = 0.05,
               labels: tuple[str, str] = ("first", "second"), causes: tuple[str, str] = ("", ""),
               unit: str = "samples") -> Difference:
    """Two-sided test on raw samples: Mann-Whitney U where it can reach alpha, else intervals.

    With too few samples (3 vs 3 gives at best p = 0.1) the test cannot be significant at
    alpha = 0.05, so non-overlapping (1 - alpha) intervals decide instead (95% at alpha 0.05,
    90% at 0.1), the positive ones the reports show (positive_interval: log scale): stricter
    than a test at alpha, it errs towards "not significant". With a single sample on either
    side, or an interval too noisy to bound, nothing can be said: not significant. A failed
    test is never reported as significant.
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
    test = intervals_test(alpha)
    sa, sb = (summarize_positive(x, 1 - alpha, cause, unit) for x, cause in zip((a, b), causes,
                                                                                strict=True))
    noisy = "; ".join(f"{label} too noisy to bound ({s.too_noisy})"
                      for label, s in zip(labels, (sa, sb), strict=True) if s.too_noisy)
    if noisy:
        return Difference(test, False, None,
                          f"{len(a)} vs {len(b)} samples (Mann-Whitney U at best p = "
                          f"{min_p:.2g}); {test}: {noisy}")
    overlap = intervals_overlap(sa, sb)
    return Difference(test, not overlap, None,
                      f"{len(a)} vs {len(b)} samples (Mann-Whitney U at best p = {min_p:.2g}); "
                      f"{test} {'overlap' if overlap else 'do not overlap'}")


def difference_of(a: Samples, b: Samples, alpha: float = 0.05,
                  labels: tuple[str, str] = ("first", "second")) -> Difference:
    """`difference` on the samples both sides can give (common_basis), saying which."""
    basis = common_basis(a, b)
    d = difference(a.values(basis), b.values(basis), alpha, labels=labels,
                   causes=(a.cause(basis), b.cause(basis)), unit=UNITS[basis])
    return replace(d, basis=basis, samples=basis_text(a, b, basis))
