"""Repeats (separate launches of one configuration) in the statistics: summary rows, compare,
efficiency samples, the fallback test at --alpha, and the words that say what decided."""

from __future__ import annotations

import math
import statistics

import pytest

from scalebench import cli
from scalebench.analysis import aggregate, compare, stats
from tests.conftest import fake_record, launches, write_records

T2 = 4.302652729911275  # Student t, 0.975 quantile, 2 degrees of freedom
TIGHT = (-0.1, 0.0, 0.1)  # trial offsets around a launch's mean


def around(*means: float) -> list[tuple[float, ...]]:
    """Trials of one launch per mean, tight around it."""
    return [tuple(m + d for d in TIGHT) for m in means]


def only(rows: list[dict], **match) -> dict:
    [row] = [r for r in rows if all(r[k] == v for k, v in match.items())]
    return row


# ---------------------------------------------------------------- summary rows

def test_a_row_summarises_every_ok_launch_by_its_per_process_means():
    rows = aggregate.summary_rows(launches(around(10.0, 11.0, 12.0)))
    row = only(rows, world_size=1)
    assert (row["processes"], row["processes_planned"], row["trials_total"]) == (3, 3, 9)
    assert row["samples_basis"] == "processes"
    assert row["samples_text"] == "3 processes (3 trials each)"
    # one sample per process: means 10, 11, 12 -> std 1, interval on the log scale
    # 11 x exp(+-t(2) x sd(log means) / sqrt(3))
    assert row["images_per_sec"] == pytest.approx(11.0)
    assert row["std"] == pytest.approx(1.0)
    half = T2 * statistics.stdev(math.log(m) for m in (10.0, 11.0, 12.0)) / math.sqrt(3)
    assert row["ci95_high"] == pytest.approx(11.0 * math.exp(half))
    assert row["ci95_low"] == pytest.approx(11.0 * math.exp(-half))
    assert row["noisy"]  # 9% from launch to launch, though every launch is tight inside


def test_one_launch_falls_back_to_its_trials():
    row = only(aggregate.summary_rows([fake_record((10.0, 12.0, 14.0))]), world_size=1)
    assert (row["processes"], row["samples_basis"]) == (1, "trials")
    assert row["samples_text"] == "3 trials (1 process)"
    assert row["std"] == pytest.approx(2.0)


def test_failed_launches_are_counted_and_named():
    records = launches(around(10.0, 11.0, 12.0))
    records[1] = {**fake_record(status="failed", error="NCCL timeout"), "repeat": 2,
                  "repeats": 3}
    row = only(aggregate.summary_rows(records), world_size=1)
    assert (row["processes"], row["processes_planned"]) == (2, 3)
    assert row["launches_text"] == "2 of 3 launches ok"
    assert row["warnings"] == ["launch 2 failed: NCCL timeout"]
    assert row["images_per_sec"] == pytest.approx(11.0)  # launches 1 and 3


def test_a_relaunched_repeat_replaces_the_earlier_record():
    # the same launch recorded twice (e.g. --resume after a failure): the newest ok one counts
    first = fake_record((5.0, 5.0, 5.0))
    again = fake_record((10.0, 10.1, 9.9), timestamp="2026-01-01T01:00:00+0000")
    row = only(aggregate.summary_rows([first, again]), world_size=1)
    assert row["processes"] == 1 and row["images_per_sec"] == pytest.approx(10.0)


def test_efficiency_of_repeated_runs_from_per_process_means():
    records = launches(around(10.0, 10.0, 10.0)) + launches(around(18.0, 18.0, 18.0),
                                                            world_size=2)
    row = only(aggregate.summary_rows(records), world_size=2)
    assert row["efficiency"] == pytest.approx(0.9)
    assert row["efficiency_ci95_low"] == pytest.approx(0.9)  # no spread between launches


# ---------------------------------------------------------------- compare

def test_compare_judges_per_process_means_not_the_newest_launch():
    # each launch is tight inside, but launches differ: the newest launches alone (110 vs 88)
    # look like a clear 20% drop; over all three launches it is -7% and not significant
    base = launches(around(100.0, 100.0, 110.0))
    cur = launches(around(100.0, 100.0, 88.0))
    (v,) = compare.compare(base, cur, metrics="throughput").verdicts
    assert v.verdict == "unchanged" and v.basis == "processes"
    assert v.change_pct == pytest.approx(100 * (96.0 - 310 / 3) / (310 / 3))
    assert "on per-process means: 3 processes (3 trials each) vs 3 processes (3 trials each)" \
        in v.reason


def test_compare_uses_trials_unless_both_sides_have_two_processes():
    base = [fake_record((10.0, 10.2, 9.8, 10.1, 9.9))]
    cur = launches([(8.0, 8.2, 7.8), (8.1, 7.9)])
    (v,) = compare.compare(base, cur, metrics="throughput").verdicts
    assert v.basis == "trials" and v.test == stats.MANN_WHITNEY and v.verdict == "regression"
    assert "on trials: 5 trials (1 process) vs 5 trials (2 processes)" in v.reason
    assert "processes 1 -> 2" in v.notes


def test_compare_names_launches_that_failed():
    base = launches(around(10.0, 10.0, 10.0))
    cur = launches(around(10.0, 10.0, 10.0))
    cur[2] = {**fake_record(status="failed", error="killed"), "repeat": 3, "repeats": 3}
    (v,) = compare.compare(base, cur, metrics="throughput").verdicts
    assert "current: 2 of 3 launches ok" in v.notes


# ---------------------------------------------------------------- efficiency samples

def test_efficiency_samples_carry_the_baseline_uncertainty():
    # the current one-worker run spread its trials from 7 to 13 (mean 10). Against its mean as
    # if exact, the 2-worker trials (16) would make a tight, significant drop from 95% to 80%;
    # paired trial by trial the efficiency samples spread as widely as the baseline does.
    base = [fake_record((10.0, 10.1, 9.9)), fake_record((19.0, 19.2, 18.8), world_size=2)]
    cur = [fake_record((7.0, 10.0, 13.0)), fake_record((16.0, 16.1, 15.9), world_size=2)]
    c = compare.compare(base, cur)
    [eff] = [v for v in c.verdicts if v.metric == "efficiency"]
    assert eff.verdict == "unchanged" and "not significant" in eff.reason
    # the one estimate the report shows, the ratio of the means (16 / (2 x 10)); not the mean
    # of the trials' ratios (0.853), which the slowest baseline trial pulls up; the interval
    # comes from the three paired trials
    assert eff.current.mean == pytest.approx(16.0 / 20.0)
    assert eff.current.mean != pytest.approx(statistics.fmean([16 / 14, 16.1 / 20, 15.9 / 26]))
    assert eff.current.n == 3 and eff.current.ci_low < 0.8 < eff.current.ci_high


def test_efficiency_pairs_launch_r_with_launch_r():
    one = launches(around(10.0, 8.0))
    two = launches(around(18.0, 16.0), world_size=2)
    runs = aggregate.group_runs(one + two)
    keys = {r.newest_ok["world_size"]: k for k, r in runs.items()}
    samples = aggregate.efficiency_samples(runs[keys[2]], runs[keys[1]], 2)
    assert samples.process_values == pytest.approx((18 / 20, 16 / 16))
    assert samples.trials[0] == pytest.approx(17.9 / (2 * 9.9))  # trial 1 of launch 1 each
    assert len(samples.trials) == 6 and samples.basis == "processes"


def test_efficiency_verdict_says_when_the_baseline_moved():
    one, two = (10.0, 10.05, 9.95, 10.02, 9.98), (18.0, 18.09, 17.91, 18.04, 17.96)
    base = [fake_record(one), fake_record(two, world_size=2)]
    cur = [fake_record(tuple(v / 0.7 for v in one)), fake_record(two, world_size=2)]
    [eff] = [v for v in compare.compare(base, cur).verdicts if v.metric == "efficiency"]
    assert eff.verdict == "regression"
    assert eff.notes[0].startswith("the one-worker baseline's throughput moved (+42.9%, "
                                   "significant) while the 2-worker throughput did not (+0.0%)")
    text = compare.render_text(compare.compare(base, cur))
    assert "the efficiency changed because its baseline did" in text
    # a real 2-worker slowdown is not blamed on the baseline
    slower = [fake_record(one), fake_record(tuple(0.7 * v for v in two), world_size=2)]
    [eff] = [v for v in compare.compare(base, slower).verdicts if v.metric == "efficiency"]
    assert eff.verdict == "regression" and not any("baseline" in n for n in eff.notes)


# ---------------------------------------------------------------- the fallback test honours alpha

def test_fallback_intervals_follow_alpha():
    # means 11 and 15, std 1 each, intervals on the log scale: 95% [8.77, 13.80] vs
    # [12.71, 17.70] (overlap), 90% [9.44, 12.82] vs [13.40, 16.79] (apart)
    strict = stats.difference([10, 11, 12], [14, 15, 16], alpha=0.05)
    assert strict.test == "95% intervals" and not strict.significant
    loose = stats.difference([10, 11, 12], [14, 15, 16], alpha=0.1)
    assert loose.test == "90% intervals" and loose.significant
    assert "90% intervals do not overlap" in loose.reason
    assert stats.intervals_test(0.01) == "99% intervals"


def test_compare_alpha_reaches_the_fallback(tmp_path, capsys):
    base = write_records(tmp_path / "a.jsonl", [fake_record((10.0, 11.0, 12.0))])
    cur = write_records(tmp_path / "b.jsonl", [fake_record((14.0, 15.0, 16.0))])
    # faster, not slower: exit 0 either way; the test that decided is what matters here
    assert cli.main(["compare", str(base), str(cur), "--alpha", "0.1"]) == 0
    out = capsys.readouterr().out
    assert "improvement" in out and "90% intervals" in out
    assert "95% intervals" not in out


# ---------------------------------------------------------------- the words behind a verdict

def test_verdicts_name_processes_and_trials():
    c = compare.compare([fake_record()], [fake_record()], metrics="throughput")
    assert "on trials: 3 trials (1 process) vs 3 trials (1 process)" in c.verdicts[0].reason
    assert "on trials: 3 trials (1 process)" in compare.render_markdown(c)


def test_a_changed_step_rule_is_noted():
    # a baseline recorded before the one-worker step was unwrapped is not silently the same
    step = {"broadcast_buffers": False, "one_worker_unwrapped": True}
    (v,) = compare.compare([fake_record()], [fake_record(step=step)], metrics="throughput").verdicts
    assert f"step differs: None -> {step!r}" in v.notes
    # an empty one (as on records without step rules) is no difference
    (v,) = compare.compare([fake_record()], [fake_record(step={})], metrics="throughput").verdicts
    assert not any(n.startswith("step differs") for n in v.notes)
