"""Number formatting for both renderers: one place for numbers, percentages and intervals."""

from __future__ import annotations

DASH = "–"


def num(value: float | None, spec: str = ".3g", scale: float = 1.0, suffix: str = "") -> str:
    if value is None or value != value:  # None or NaN
        return DASH
    return format(value * scale, spec) + suffix


def pct(value: float | None) -> str:
    return num(value, ".1f", 100.0, "%")


def interval(low: float | None, high: float | None, spec: str = ".3g", scale: float = 1.0,
             suffix: str = "", missing: str = DASH) -> str:
    if low is None or high is None:
        return missing
    return f"{num(low, spec, scale)}–{num(high, spec, scale)}{suffix}"


def pct_interval(low: float | None, high: float | None, missing: str = DASH) -> str:
    return interval(low, high, ".1f", 100.0, "%", missing)


def pct_with_interval(value: float | None, ci: tuple[float | None, float | None] | list
                      ) -> str:
    """e.g. "12.3% (10.1–14.5%)"; the value alone when there is no interval."""
    low, high = ci
    return pct(value) if low is None or high is None else f"{pct(value)} ({pct_interval(low, high)})"


def points(value: float | None) -> str:
    """A difference of percentages in percentage points, signed: "+3.2 points"."""
    return num(value, "+.1f", suffix=" points")


def ms(seconds: float | None) -> str:
    return num(seconds, ".3g", 1e3)


def gb_per_s(bytes_per_sec: float | None) -> str:
    return num(bytes_per_sec, ".3g", 1e-9)


def plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"
