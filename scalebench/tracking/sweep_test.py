"""The gate's sweep-level test: is the current sweep's value where the pooled sweeps predict it?

A sweep's launches share that sweep's noise (the machine's state, the neighbours, the clocks of
that hour), and neighbouring sweeps share some of it too (AR(1)). So the launches of one sweep
are not independent samples of the branch's level: per configuration and metric each sweep is
one value, the mean of its launches, and the test is a prediction test of the current sweep's
value x against the m pooled sweeps' values y_1..y_m (oldest first):

    y_j = mu + b_j + w_j,  x = mu + b_(m+1) + w_x  (+ the change, if any)

b: the sweep-to-sweep noise, AR(1) with lag-one correlation phi and variance s_b^2, the current
sweep taken as the next point after the last pooled one; w: the within-sweep noise of a sweep's
mean, independent between sweeps, variance s_w^2 / k for a sweep of k launches.

- s_w^2, the per-launch variance within a sweep, is pooled over every sweep with two or more
  launches, the current one included (its own two or three launches alone would give a variance
  of one or two degrees of freedom);
- phi is changepoints.estimate_noise's fit of the pooled sweep values (lag-one autocorrelation
  corrected for the mean's bias, or the variogram's, whichever is higher), clamped to
  [0, PHI_MAX]: a negative estimate is taken as 0 (nothing in a benchmark history makes
  neighbouring sweeps anti-correlated, and it would shrink the variance), and one above PHI_MAX
  as PHI_MAX (beyond it ten sweeps hold barely one independent value and the bias correction
  below divides by nearly zero);
- s_b^2 from the sample variance of the y, corrected for its bias under AR(1) (the y's spread
  around their own mean misses the part of the noise their mean shares: E[SS] = s_b^2 x
  (m - sum_ij phi^|i-j| / m) + (1 - 1/m) x sum_j s_w^2 / k_j), at least 0;
- the variance of x - mean(y) is then s_b^2 x Var of that contrast under AR(1) (with the
  current sweep's correlation with the most recent pooled sweeps, which makes it smaller) plus
  s_w^2 / k_x plus sum_j s_w^2 / k_j / m^2;
- t = (x - mean(y)) / its standard deviation against Student t with m - 1 degrees of freedom
  (the pool's), one-sided in each direction.

Fewer than MIN_SWEEPS pooled sweeps give no variance: the gate falls back to compare's
launch-level rule and says so. Holm's step-down (`holm`) keeps the chance that any row of a PR
fails at alpha. Pure: no I/O.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from scalebench.tracking import changepoints

MIN_SWEEPS = 3  # pooled sweeps needed for a sweep-to-sweep variance (m - 1 >= 2 degrees of freedom)
PHI_MAX = 0.9
TEST = "sweep prediction t"


@dataclass(frozen=True)
class Prediction:
    """The current sweep's value against the pooled sweeps' (see the module's docstring)."""

    sweeps: int  # m, the pooled sweeps with a value
    pool_mean: float  # mean(y)
    current: float  # x, the mean of the current sweep's launches
    launches: int  # the current sweep's launches
    phi: float  # the AR(1) correlation used (clamped)
    phi_estimate: float  # changepoints' fit before clamping
    between_var: float  # s_b^2
    within_var: float  # s_w^2, per launch
    sd: float  # the standard deviation of x - mean(y)

    @property
    def df(self) -> int:
        return self.sweeps - 1

    @property
    def t(self) -> float:
        diff = self.current - self.pool_mean
        if self.sd > 0:
            return diff / self.sd
        return 0.0 if diff == 0 else math.copysign(math.inf, diff)

    @property
    def p_lower(self) -> float:
        """One-sided p of a value this low or lower (a regression of a higher-is-better metric)."""
        from scipy.special import stdtr

        return float(stdtr(self.df, self.t))

    @property
    def p_upper(self) -> float:
        from scipy.special import stdtr

        return float(stdtr(self.df, -self.t))

    def interval(self, tail: float) -> tuple[float, float]:
        """The prediction interval of x with `tail` in each tail."""
        from scipy.special import stdtrit

        half = float(stdtrit(self.df, 1 - tail)) * self.sd
        return self.pool_mean - half, self.pool_mean + half

    @property
    def phi_text(self) -> str:
        """e.g. "phi 0.42", "phi 0.90 (fit 0.97, clamped to [0, 0.9])"."""
        if abs(self.phi - self.phi_estimate) < 5e-3:
            return f"phi {self.phi:.2f}"
        return f"phi {self.phi:.2f} (fit {self.phi_estimate:.2f}, clamped to [0, {PHI_MAX:g}])"


def within_variance(sweeps: Sequence[Sequence[float]]) -> float:
    """The per-launch variance within a sweep, pooled over the sweeps with two or more launches
    (weighted by their degrees of freedom); 0 when none has two."""
    parts = [(statistics.variance(s), len(s) - 1) for s in sweeps if len(s) >= 2]
    df = sum(d for _, d in parts)
    return sum(v * d for v, d in parts) / df if df else 0.0


def predict(pool: Sequence[Sequence[float]], current: Sequence[float]) -> Prediction:
    """The prediction test's figures: pool, the pooled sweeps' per-launch values (oldest first);
    current, the current sweep's. ValueError with fewer than MIN_SWEEPS sweeps or an empty
    current sweep."""
    import numpy as np

    pool = [[float(v) for v in s] for s in pool if len(s)]
    current = [float(v) for v in current]
    m = len(pool)
    if m < MIN_SWEEPS or not current:
        raise ValueError(f"needs {MIN_SWEEPS} pooled sweeps and a current value, got {m} and "
                         f"{len(current)}")
    y = np.array([statistics.fmean(s) for s in pool])
    x = statistics.fmean(current)
    within = within_variance([*pool, current])
    w = within / np.array([len(s) for s in pool], dtype=float)  # each pooled sweep mean's
    fit = changepoints.estimate_noise(y, []).phi
    phi = min(max(fit, 0.0), PHI_MAX)
    unit = changepoints.Noise(1.0, phi)
    kept = m - unit.variance_of(np.ones(m)) / m  # E[SS] / s_b^2 under AR(1)
    ss = float(((y - y.mean()) ** 2).sum())
    between = max(ss - (1 - 1 / m) * float(w.sum()), 0.0) / kept
    contrast = np.append(np.full(m, -1.0 / m), 1.0)  # x - mean(y), x the next point
    var = (between * unit.variance_of(contrast) + within / len(current)
           + float(w.sum()) / (m * m))
    return Prediction(m, float(y.mean()), x, len(current), phi, float(fit), between, within,
                      math.sqrt(max(var, 0.0)))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (in the given order): a row is significant at a
    family-wise alpha when its adjusted p is below alpha, under any dependence between rows."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    out = [1.0] * len(p_values)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[i]))
        out[i] = running
    return out
