"""The significance rule compare and the reports use, on hand-computed numbers."""

import math

import pytest

from scalebench.analysis import stats
from scalebench.analysis.compare import judge

T2 = 4.302652729911275  # Student t, 0.975 quantile, 2 degrees of freedom


def test_mann_whitney_min_p_by_hand():
    assert stats.mann_whitney_min_p(3, 3) == pytest.approx(2 / 20)  # C(6,3) = 20 orderings
    assert stats.mann_whitney_min_p(4, 4) == pytest.approx(2 / 70)
    assert stats.mann_whitney_min_p(5, 5) == pytest.approx(2 / 252)
    assert stats.mann_whitney_min_p(2, 2) == pytest.approx(2 / 6)
    assert stats.mann_whitney_min_p(1, 1) == 1.0
    assert stats.mann_whitney_min_p(0, 3) == 1.0


def test_three_vs_three_falls_back_to_intervals_overlapping():
    # on the log scale (what the reports show): 11 x exp(-+4.3027 x sd(log) / sqrt(3)) =
    # [8.77, 13.80] vs [9.63, 14.95]. ([1, 2, 3] would be too noisy to bound: see
    # test_positive_interval.py)
    d = stats.difference([10, 11, 12], [11, 12, 13])
    assert d.test == stats.INTERVALS and not d.significant and d.p_value is None
    assert "overlap" in d.reason and "0.1" in d.reason


def test_three_vs_three_disjoint_intervals_are_significant():
    # std 0.1: half-width 0.2484 -> [9.75, 10.25] vs [7.75, 8.25]
    d = stats.difference([10.0, 10.1, 9.9], [8.0, 8.1, 7.9])
    assert d.test == stats.INTERVALS and d.significant
    s = stats.summarize([10.0, 10.1, 9.9])
    assert s.ci_high - s.mean == pytest.approx(T2 * 0.1 / math.sqrt(3))


def test_five_vs_five_uses_mann_whitney_exact_p():
    d = stats.difference([1, 2, 3, 4, 5], [6, 7, 8, 9, 10])
    assert d.test == stats.MANN_WHITNEY and d.significant
    assert d.p_value == pytest.approx(2 / 252)  # U = 0: the most extreme ordering
    same = stats.difference([1, 2, 3, 4, 5], [1, 2, 3, 4, 5])
    assert same.test == stats.MANN_WHITNEY and not same.significant
    assert same.p_value == pytest.approx(1.0)


def test_mann_whitney_one_inversion_by_hand():
    # 5 vs 5 with one pair out of order: U = 1; two-sided exact p = 2 * 2/252 = 0.0317
    d = stats.difference([1, 2, 3, 4, 6.5], [6, 7, 8, 9, 10])
    assert d.p_value == pytest.approx(4 / 252)
    assert d.significant


def test_single_trial_cannot_be_significant():
    d = stats.difference([10.0], [1.0, 1.1, 0.9])
    assert d.test == stats.NO_TEST and not d.significant


def test_alpha_must_be_a_probability():
    with pytest.raises(ValueError):
        stats.difference([1, 2], [3, 4], alpha=0)


def test_efficiency_samples_by_hand():
    # trials at 2 workers 4 and 6 images/s, one-worker mean 2.5: 4 / (2 x 2.5), 6 / (2 x 2.5)
    assert stats.efficiency_samples([4.0, 6.0], 2, 2.5) == pytest.approx([0.8, 1.2])


def test_judge_regression_needs_threshold_and_significance():
    base = [100.0, 101.0, 99.0]
    worse = judge(base, [80.0, 80.8, 79.2], threshold=5, alpha=0.05)
    assert worse.verdict == "regression" and worse.change_pct == pytest.approx(-20.0)
    # significant but only -2%: within the threshold
    small = judge([100.0, 100.1, 99.9], [98.0, 98.1, 97.9], threshold=5, alpha=0.05)
    assert small.difference.significant and small.verdict == "unchanged"
    assert small.change_pct == pytest.approx(-2.0)
    # -10% but the trials spread far too much to tell
    noisy = judge([80.0, 100.0, 120.0], [70.0, 90.0, 110.0], threshold=5, alpha=0.05)
    assert noisy.change_pct == pytest.approx(-10.0)
    assert not noisy.difference.significant and noisy.verdict == "unchanged"
    better = judge(base, [120.0, 121.0, 119.0], threshold=5, alpha=0.05)
    assert better.verdict == "improvement" and better.change_pct == pytest.approx(20.0)
