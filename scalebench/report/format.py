"""Number formatting for both renderers: one place for numbers, percentages and intervals.

An interval of images/s or an efficiency either has bounds (stats.positive_interval: log scale,
never below zero) or a reason it is too noisy to bound (`too_noisy`): every report, compare,
gate and history line shows the latter as "too noisy to bound (1 of 3 trials 17x slower)"
through `interval`, the one formatter of intervals.
"""

from __future__ import annotations

from scalebench.analysis.stats import noisy_text

DASH = "–"


def num(value: float | None, spec: str = ".3g", scale: float = 1.0, suffix: str = "") -> str:
    if value is None or value != value:  # None or NaN
        return DASH
    return format(value * scale, spec) + suffix


def pct(value: float | None) -> str:
    return num(value, ".1f", 100.0, "%")


def interval(low: float | None, high: float | None, spec: str = ".3g", scale: float = 1.0,
             suffix: str = "", missing: str = DASH, too_noisy: str = "") -> str:
    """e.g. "9.75–10.3"; noisy_text(too_noisy) when the interval is too noisy to bound;
    `missing` when there is none (one sample)."""
    if too_noisy:
        return noisy_text(too_noisy)
    if low is None or high is None:
        return missing
    return f"{num(low, spec, scale)}–{num(high, spec, scale)}{suffix}"


def pct_interval(low: float | None, high: float | None, missing: str = DASH,
                 too_noisy: str = "") -> str:
    return interval(low, high, ".1f", 100.0, "%", missing, too_noisy)


def pct_with_interval(value: float | None, ci: tuple[float | None, float | None] | list,
                      too_noisy: str = "") -> str:
    """e.g. "12.3% (10.1–14.5%)"; the value alone when there is no interval."""
    low, high = ci
    if not too_noisy and (low is None or high is None):
        return pct(value)
    return f"{pct(value)} ({pct_interval(low, high, too_noisy=too_noisy)})"


def with_interval(value: float | None, low: float | None, high: float | None, percent: bool,
                  too_noisy: str = "", spec: str = ".4g") -> str:
    """A value and its interval in brackets, as compare, gate and history print them:
    "546.8% [191.8–964.4%]", "9.96 [9.75–10.17]", "6.961 [too noisy to bound (...)]", or the
    value alone when there is no interval."""
    text = pct(value) if percent else num(value, spec)
    if not too_noisy and (low is None or high is None):
        return text
    span = pct_interval(low, high, too_noisy=too_noisy) if percent else \
        interval(low, high, spec, too_noisy=too_noisy)
    return f"{text} [{span}]"


def points(value: float | None) -> str:
    """A difference of percentages in percentage points, signed: "+3.2 points"."""
    return num(value, "+.1f", suffix=" points")


def ms(seconds: float | None) -> str:
    return num(seconds, ".3g", 1e3)


def gb_per_s(bytes_per_sec: float | None) -> str:
    return num(bytes_per_sec, ".3g", 1e-9)


def plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"
