"""Statistics and efficiency on hand-computed numbers."""

import json
import math
import statistics

import pytest

from scalebench.analysis import aggregate, stats


def test_summary_t_interval_by_hand():
    s = stats.summarize([10.0, 12.0, 14.0])
    assert s.mean == 12.0 and s.median == 12.0
    assert s.std == pytest.approx(2.0)
    # t(0.975, df=2) = 4.302653; half-width = 4.302653 * 2 / sqrt(3) = 4.968275
    assert s.ci_low == pytest.approx(12.0 - 4.968275, abs=1e-5)
    assert s.ci_high == pytest.approx(12.0 + 4.968275, abs=1e-5)
    assert s.rel_std == pytest.approx(1 / 6)
    assert s.noisy


def test_single_sample_has_no_interval():
    s = stats.summarize([5.0])
    assert (s.ci_low, s.ci_high) == (None, None)
    assert not s.noisy


def test_trial_throughput_uses_slowest_rank():
    # two ranks, two trials; 2 workers x batch 4 x 5 iters = 40 images per window
    windows = [[1.0, 2.0], [2.0, 1.0]]
    assert stats.trial_throughputs(windows, 40) == [20.0, 20.0]
    # per-rank rates: each rank's 20 images over its own 3 s, never added into a total
    assert stats.per_rank_throughputs(windows, 20) == pytest.approx([40 / 3, 40 / 3])


def test_trial_count_mismatch_is_an_error():
    with pytest.raises(ValueError):
        stats.trial_throughputs([[1.0], [1.0, 2.0]], 10)


def test_efficiency_and_delta_interval_by_hand():
    one = stats.summarize([100.0, 102.0, 98.0])  # mean 100, sem 2/sqrt(3)
    four = stats.summarize([360.0, 364.0, 356.0])  # mean 360, sem 4/sqrt(3)
    e = stats.efficiency(four, 4, one)
    assert e.value == pytest.approx(0.9)
    rel = math.hypot((4 / math.sqrt(3)) / 360, (2 / math.sqrt(3)) / 100)
    # relative errors are the standard error of log(ratio): the interval is taken on the log
    # scale, 0.9 x exp(-+t x rel), never below zero
    half = 4.302653 * rel
    assert e.ci_low == pytest.approx(0.9 * math.exp(-half), abs=1e-5)
    assert e.ci_high == pytest.approx(0.9 * math.exp(half), abs=1e-5)


def _record(framework, world, trials, nodes=1, model="resnet101"):
    return {"kind": "train", "status": "ok", "framework": framework, "model": model,
            "world_size": world, "nodes": nodes, "batch_size": 4, "global_batch": 4 * world,
            "image_size": 64, "precision": "fp32", "device": "cpu", "scaling": "weak",
            "data": "synthetic", "trials": len(trials), "trial_images_per_sec": trials,
            "images_per_sec": sum(trials) / len(trials), "env": {"device_kind": "cpu"}}


def test_summary_rows_efficiency_own_best_and_per_node():
    records = [
        _record("ddp", 1, [10.0, 10.0]),
        _record("ddp", 2, [18.0, 18.0]),
        _record("horovod", 1, [12.0, 12.0]),
        _record("horovod", 2, [20.0, 20.0]),
        _record("ddp", 4, [30.0, 30.0], nodes=2),
    ]
    rows = {(r["framework"], r["world_size"]): r for r in aggregate.summary_rows(records)}
    assert rows["ddp", 2]["efficiency"] == pytest.approx(0.9)
    assert rows["ddp", 2]["efficiency_vs_best"] == pytest.approx(18 / 24)
    assert rows["ddp", 2]["best_one_worker_framework"] == "horovod"
    assert rows["horovod", 2]["efficiency"] == pytest.approx(20 / 24)
    # 2 nodes of 2 workers against one full node (ddp x2 = 18 images/s)
    assert rows["ddp", 4]["efficiency_per_node"] == pytest.approx(30 / 36)
    assert rows["ddp", 1]["efficiency_per_node"] is None


def test_summary_rows_keep_configurations_apart():
    other = _record("ddp", 1, [50.0, 50.0], model="vgg16")
    rows = aggregate.summary_rows([_record("ddp", 1, [10.0, 10.0]), _record("ddp", 2, [18.0, 18.0]),
                                  other])
    vgg = [r for r in rows if r["model"] == "vgg16"][0]
    assert vgg["efficiency"] == pytest.approx(1.0)
    resnet2 = [r for r in rows if r["model"] == "resnet101" and r["world_size"] == 2][0]
    assert resnet2["efficiency_vs_best"] == pytest.approx(0.9)


def test_strong_scaling_baseline_matches_the_global_batch():
    one = {**_record("ddp", 1, [10.0, 10.0]), "scaling": "strong", "batch_size": 8, "global_batch": 8}
    two = {**_record("ddp", 2, [16.0, 16.0]), "scaling": "strong", "batch_size": 4, "global_batch": 8}
    rows = {r["world_size"]: r for r in aggregate.summary_rows([one, two])}
    assert rows[2]["efficiency"] == pytest.approx(0.8)


def test_a_tuned_row_takes_the_defaults_one_worker_baseline_unless_it_has_its_own():
    """One worker runs the plain step, so a knob (a communication setting) cannot change it; a
    step option that is not a knob (fp16 compression) keeps its own baseline."""
    def horovod(world, trials, **options):
        return {**_record("horovod", world, trials), "options": options}

    tuned = horovod(2, [22.0, 22.0], fusion_threshold_mb=8.0)
    fp16 = horovod(2, [21.0, 21.0], fp16_allreduce=True)
    rows = aggregate.summary_rows([horovod(1, [12.0, 12.0]), horovod(2, [20.0, 20.0]), tuned,
                                   fp16])
    by_options = {json.dumps(r["options"], sort_keys=True): r for r in rows
                  if r["world_size"] == 2}
    row = by_options['{"fusion_threshold_mb": 8.0}']
    assert row["efficiency"] == pytest.approx(22 / 24)
    assert row["baseline_note"].startswith("the default's one-worker run")
    assert by_options['{"fp16_allreduce": true}']["efficiency"] is None
    assert by_options["{}"]["baseline_note"] == ""
    # a tuned one-worker run of its own is preferred
    own = aggregate.summary_rows([horovod(1, [12.0, 12.0]), horovod(1, [11.0, 11.0],
                                                                    fusion_threshold_mb=8.0),
                                  tuned])
    row = next(r for r in own if r["world_size"] == 2)
    assert row["efficiency"] == pytest.approx(1.0) and row["baseline_note"] == ""


# ---------------------------------------------------------------- intervals of positive quantities

SLOW = [9.8, 10.5, 0.584]  # issue 44: one of three trials slowed 17x by another job


def test_one_slow_trial_is_too_noisy_to_bound_everywhere_it_appears():
    from scalebench.analysis import compare

    one, two = _record("ddp", 1, SLOW), _record("ddp", 2, [19.0, 19.4, 18.8])
    rows = {r["world_size"]: r for r in aggregate.summary_rows([one, two])}
    # the linear t-interval read -6.79-20.7 images/s and -1573-2772% efficiency
    assert (rows[1]["ci95_low"], rows[1]["ci95_high"]) == (None, None)
    assert rows[1]["ci95_too_noisy"] == "1 of 3 trials 17x slower"
    assert rows[2]["efficiency"] == pytest.approx(19.0667 / (2 * 6.9613), rel=1e-4)
    assert rows[2]["efficiency_ci95_low"] is None
    assert rows[2]["efficiency_ci95_too_noisy"] == "the one-worker run: 1 of 3 trials 17x slower"
    csv = {r["world_size"]: r for r in aggregate.csv_rows(list(rows.values()))}
    assert csv[2]["efficiency_ci95_too_noisy"].startswith("the one-worker run")
    # compare shows it the same way, and a too-noisy side cannot make a difference significant
    clean = [_record("ddp", 1, [9.8, 10.5, 10.1]), _record("ddp", 2, [19.0, 19.4, 18.8])]
    verdicts = compare.compare(clean, [one, two]).verdicts
    [eff] = [v for v in verdicts if v.metric == "efficiency"]
    assert eff.verdict == "unchanged" and "current too noisy to bound (the one-worker" in eff.reason
    assert eff.current.ci_low is None and eff.current.too_noisy.startswith("the one-worker run")


def test_a_slow_trial_that_can_be_bounded_gives_a_positive_interval_around_the_estimate():
    trials = [10.0, 10.4, 6.0]  # the linear interval: 8.8 +- 6.1
    s = stats.summarize_positive(trials)
    half = 4.302653 * statistics.stdev(math.log(t) for t in trials) / math.sqrt(3)
    assert s.ci_low == pytest.approx(s.mean * math.exp(-half), rel=1e-6)
    assert s.ci_high == pytest.approx(s.mean * math.exp(half), rel=1e-6)
    assert 0 < s.ci_low < s.mean < s.ci_high and not s.too_noisy
    # the paired efficiency: log ratios of trial i against trial i, centred on the ratio of means
    one, two = _record("ddp", 1, trials), _record("ddp", 2, [19.0, 19.4, 18.8])
    row = next(r for r in aggregate.summary_rows([one, two]) if r["world_size"] == 2)
    logs = [math.log(n / (2 * o)) for n, o in zip([19.0, 19.4, 18.8], trials, strict=True)]
    half = 4.302653 * statistics.stdev(logs) / math.sqrt(3)
    assert row["efficiency_ci95_low"] == pytest.approx(row["efficiency"] * math.exp(-half))
    assert 0 < row["efficiency_ci95_low"] < row["efficiency"] < row["efficiency_ci95_high"]


def test_no_bound_for_one_sample_or_a_sample_at_zero():
    assert stats.positive_interval(5.0, [5.0]) == (None, None, "")
    assert stats.positive_interval(5.0, [5.0, 0.0, 10.0], unit="trials") == \
        (None, None, "1 of 3 trials at or below zero")
    assert stats.outlier_text([10.0, 10.2, 9.9, 10.1]) == ""
    assert stats.outlier_text([10.0, 31.0, 9.9], "launches") == "1 of 3 launches 3.1x faster"


def test_positive_intervals_never_fall_below_zero_and_hold_their_estimate():
    import random

    rng = random.Random(44)
    for _ in range(300):
        n = rng.choice([2, 3, 5, 10])
        values = [rng.lognormvariate(2.3, rng.choice([0.01, 0.3, 1.5])) *
                  (rng.choice([1, 1, 1, 1 / 17])) for _ in range(n)]
        s = stats.summarize_positive(values)
        if s.ci_low is None:
            assert s.too_noisy
            continue
        assert 0 < s.ci_low <= s.mean <= s.ci_high <= stats.MAX_SPAN * s.ci_low
