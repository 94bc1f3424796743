"""The tuner's race and knobs as pure logic: a simulated response surface with a known best,
heavy-tailed noise (Student t, df 2.5), outliers (a window 30% slow) and machine drift shared by
the candidates of a slot (a random walk), as interleaved windows see it."""

import math
import random

import pytest

from scalebench.frameworks import ddp, horovod
from scalebench.spec import units
from scalebench.spec.errors import UserError
from scalebench.tuning import knobs
from scalebench.tuning.race import (
    Candidate,
    ConfirmPlan,
    Race,
    confirm,
    launches_to_confirm,
    plan_confirmation,
    signed_rank_p_less,
)


def simulate(rng, means, slots=30, per_check=3, cv=0.02, df=2.5, drift=0.03, outlier=0.02):
    """A race over candidates c0 (the default) .. cN with these true speeds."""
    cands = [Candidate(f"c{i}", {"i": i}, default=i == 0) for i in range(len(means))]
    race = Race(cands)
    level = 0.0
    for s in range(slots):
        level += rng.gauss(0, drift)
        alive = {c.name for c in race.survivors()}
        slot = {}
        for c, mu in zip(cands, means, strict=True):
            if c.name not in alive:
                continue
            t = rng.gauss(0, 1) / math.sqrt(rng.gammavariate(df / 2, 2 / df))
            noise = cv * t * math.sqrt((df - 2) / df)
            if rng.random() < outlier:
                noise -= 0.3
            slot[c.name] = 100 * mu * math.exp(level + noise)
        race.add_slot(slot)
        if (s + 1) % per_check == 0:
            race.step()
    return race


SURFACE = [1.0, 0.95, 0.9, 1.02, 1.08, 0.97, 1.0, 0.85]  # c4 is 8% faster than the default


def test_the_best_is_kept_and_found_under_drift_heavy_tails_and_outliers():
    rng = random.Random(7)
    runs = [simulate(rng, SURFACE) for _ in range(60)]
    assert not any(d.candidate == "c4" for r in runs for d in r.dropped)
    assert sum(r.best() == "c4" for r in runs) >= 57
    # and the race does save work: the clearly slow ones go
    assert sum(any(d.candidate == "c7" for d in r.dropped) for r in runs) >= 55


def test_a_flat_surface_rarely_loses_anyone_and_each_drop_is_significant():
    """All equal: a drop would be a wrong one. The alpha spent over every look and candidate
    keeps the runs with any drop at the 5% level, even with 5% noise, df 2.2 tails, 5%
    outliers and 10% drift per slot."""
    rng = random.Random(11)
    runs = [simulate(rng, [1.0] * 8, cv=0.05, df=2.2, drift=0.1, outlier=0.05)
            for _ in range(100)]
    assert sum(bool(r.dropped) for r in runs) <= 5
    for r in runs:
        for d in r.dropped:
            assert d.p_value < d.threshold and d.ratio < 1


def test_the_signed_rank_p_value_is_scipys_with_and_without_zeros_or_ties():
    """The race's own exact signed-rank p-value (no zeros or ties, n <= 50) equals scipy's;
    zeros, ties and larger samples go to scipy itself."""
    from scipy import stats

    rng = random.Random(5)
    cases = [[rng.gauss(-0.2 * rng.random(), 1) for _ in range(n)] for n in (2, 3, 5, 9, 20, 50)
             for _ in range(20)]
    cases += [[0.0, -0.1, 0.2, -0.3], [0.1, -0.1, -0.2, -0.3, 0.4], [-0.5] * 8,
              [rng.gauss(0, 1) for _ in range(60)]]
    for diffs in cases:
        want = float(stats.wilcoxon(diffs, alternative="less", zero_method="zsplit").pvalue)
        assert signed_rank_p_less(diffs) == pytest.approx(want, rel=1e-9, abs=1e-15), diffs
    assert signed_rank_p_less([-1.0, -2.0, -3.0]) == pytest.approx(1 / 8)
    assert signed_rank_p_less([0.0, 0.0]) == 1.0


def factorial_race(rng, slots=3, cv=0.03, df=2.5, drift=0.1):
    """A 4 x 2 grid as DDP's (bucket cap x gradient view), additive truth: the view +4%, a
    1 MiB bucket -4%, 5 MiB -1%; `slots` rounds of one race launch."""
    buckets = {1.0: -0.04, 5.0: -0.01, 25.0: 0.0, 100.0: 0.0}
    cands = [Candidate(f"b{b:g},v{int(v)}", {"bucket": b, "view": v}, default=(b, v) == (25.0, False))
             for b in buckets for v in (False, True)]
    truth = {c.name: buckets[c.settings["bucket"]] + 0.04 * c.settings["view"] for c in cands}
    race = Race(cands)
    for _ in range(slots):
        level = rng.gauss(0, drift)
        race.add_slot({c.name: 14 * math.exp(truth[c.name] + level + cv * rng.gauss(0, 1)
                                             / math.sqrt(rng.gammavariate(df / 2, 2 / df)))
                       for c in cands})
    return race, truth


def test_the_pick_after_one_launch_rests_on_the_knobs_main_effects_not_on_one_noisy_score():
    """After one race launch (3 slots) the highest own score of 8 candidates is mostly noise;
    the additive fit of the knobs' main effects picks a candidate within 1% of the best more
    often (measured here: 0.65 against 0.74 over 400 races)."""
    rng = random.Random(3)
    own = additive = 0
    for _ in range(300):
        race, truth = factorial_race(rng)
        best = max(truth.values())
        own += best - truth[race.leader()] <= 0.01
        additive += best - truth[race.best()] <= 0.01
    assert additive >= own + 15, (own, additive)
    # one knob: the fit is saturated and the pick is the highest own score
    one = simulate(random.Random(5), SURFACE, slots=3)
    assert one.best() == one.leader()


def test_launches_to_confirm_a_lead_follow_the_t_interval():
    # 3 rounds a launch, a slot spreading by 6.4%: +4.7% needs 5 launches (t(4) 2.78 x 6.4% /
    # sqrt(15) = 4.6%), 4 would leave +-5.9%
    assert launches_to_confirm(math.log(1.047), 0.064, 3) == 5
    assert launches_to_confirm(math.log(1.10), 0.064, 3) == 3
    assert launches_to_confirm(math.log(1.047), 0.064, 8) < 5
    assert launches_to_confirm(0.0, 0.064, 3) is None
    assert launches_to_confirm(0.001, 0.5, 3) is None  # not within 100 launches


def test_an_unconfirmed_pick_says_what_confirming_it_would_take():
    from scalebench.tuning.run import confirm_advice, pooled_spread

    race, _ = factorial_race(random.Random(2), slots=6)
    spread = pooled_spread(race)
    assert 0.01 < spread < 0.1  # the simulated 3% windows, heavy-tailed
    pick = race.best()
    advice = confirm_advice(race, pick, 95.0, 35.0)
    assert pick in advice and "confirmation launches: a cell budget of about" in advice
    assert confirm_advice(race, race.default, 95.0, 35.0) is None


def test_the_default_is_never_dropped_and_measured_in_every_slot():
    rng = random.Random(3)
    race = simulate(rng, [0.8, 1.0, 1.05, 1.1])
    assert all("c0" in slot for slot in race.slots)
    assert "c0" not in {d.candidate for d in race.dropped}
    assert race.default in {c.name for c in race.survivors()}
    assert race.best() == "c3"


def test_a_failed_candidate_leaves_the_race_with_its_reason():
    race = Race([Candidate("a", {}, default=True), Candidate("b", {"x": 1})])
    race.fail("b", "RuntimeError: bucket too small")
    assert [c.name for c in race.survivors()] == ["a"]
    assert race.failed == {"b": "RuntimeError: bucket too small"}
    with pytest.raises(ValueError, match="not a positive number"):
        race.add_slot({"a": float("nan")})


def test_confirmation_needs_the_whole_interval_above_one():
    clear = confirm("w", "d", [1.10, 1.12, 1.09])
    assert clear.significant and clear.low > 1 and "beats the default by +10" in clear.words()
    noisy = confirm("w", "d", [1.10, 0.95, 1.02])
    assert not noisy.significant and "not beyond noise, the default is kept" in noisy.words()
    kept = confirm("d", "d", [1.0])
    assert not kept.significant and "default is kept" in kept.words()


def test_knobs_grid_contains_the_default_and_maps_it_to_the_framework_default():
    ddp_knobs = knobs.default_knobs("ddp")
    grid = knobs.candidates(ddp_knobs)
    assert len(grid) == 8 and sum(c.default for c in grid) == 1
    default = next(c for c in grid if c.default)
    assert default.settings == {"bucket_cap_mb": 25.0, "gradient_as_bucket_view": False}
    # the default setting keeps the option unset: the tuned default IS the default config
    assert knobs.options_with("ddp", ddp.Options(), default.settings) == ddp.Options()
    assert knobs.options_with("ddp", ddp.Options(), {"bucket_cap_mb": 5.0}).bucket_cap_mb == 5.0
    hvd = knobs.default_knobs("horovod")
    assert 128.0 in hvd[0].values and 0.0 in hvd[0].values
    assert [k.option for k in knobs.for_cell(hvd, nodes=1)] == ["fusion_threshold_mb",
                                                                "cycle_time_ms"]
    assert "hierarchical_allreduce" in [k.option for k in knobs.for_cell(hvd, nodes=2)]
    assert horovod.Options().fusion_threshold_mb is None


def test_knobs_text_adds_the_default_and_names_bad_input():
    parsed = knobs.parse("bucket_cap_mb=2:50", ("ddp",))
    assert parsed["ddp"][0].values == (25.0, 2.0, 50.0)
    both = knobs.parse("bucket_cap_mb,fusion_threshold_mb=16", ("ddp", "horovod"))
    assert both["horovod"][0].values == (128.0, 16.0)
    cases = {
        "colour": "knobs: unknown knob 'colour'; known:",
        "fusion_threshold_mb": "knobs: fusion_threshold_mb is a knob of horovod, which is not "
                               "among the frameworks tuned (ddp)",
        "bucket_cap_mb=-1": "knobs.bucket_cap_mb: '-1' refused; allowed: numbers > 0",
        "bucket_cap_mb=big": "knobs.bucket_cap_mb: 'big' is not a value of this knob",
    }
    for text, message in cases.items():
        with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)")):
            knobs.parse(text, ("ddp",))
    with pytest.raises(UserError, match="knobs: none of horovod's knobs given"):
        knobs.parse("bucket_cap_mb", ("ddp", "horovod"))


def test_budget_reads_wall_times():
    assert units.parse_wall_time("10m") == 600 and units.parse_wall_time("90") == 90
    assert units.parse_wall_time("1.5h") == 5400
    for bad in ("0", "-5m", "ten minutes", "5d"):
        with pytest.raises(UserError, match="budget: cannot read"):
            units.parse_wall_time(bad)


def test_the_confirmation_plan_takes_more_launches_before_more_rounds_and_fits_its_room():
    fixed, pair = 13.0, 14.4  # seconds: a launch's start-up, one paired round of windows
    minimum = plan_confirmation(10.0, fixed, pair)
    assert (minimum.launches, minimum.rounds) == (3, 1)  # the least, whatever the room
    widths = []
    for room in (90.0, 115.0, 150.0, 250.0, 500.0, 1000.0):
        plan = plan_confirmation(room, fixed, pair)
        assert plan.seconds <= room and 3 <= plan.launches <= 8
        assert plan.seconds == pytest.approx(plan.launches * (fixed + plan.rounds * pair))
        widths.append(plan.relative_half_width())
        # no plan that fits is narrower
        for n in range(3, 9):
            for k in range(1, 9):
                if n * (fixed + k * pair) <= room:
                    assert plan.relative_half_width() <= ConfirmPlan(n, k, 0).relative_half_width()
    assert widths == sorted(widths, reverse=True) and widths[-1] < widths[0] / 5
    # rounds grow only once the launches are at their most
    assert plan_confirmation(250.0, fixed, pair).rounds == 1
    assert plan_confirmation(1000.0, fixed, pair).launches == 8
    # one paired slot per launch pair (across launches): launches only
    across = plan_confirmation(200.0, 0.0, 40.0, most_rounds=1)
    assert (across.launches, across.rounds) == (5, 1)


def test_an_unconfirmed_confirmation_without_race_spread_says_what_its_own_launches_need():
    from scalebench.tuning.run import confirmation_advice

    # a Horovod race of one slot has no spread; the confirmation's three launches do
    advice = confirmation_advice("fusion=32", [1.023, 1.019, 1.148], 199.0, 44.0)
    # +6.2% against a launch spread of 6.8%: t(7) 2.36 x 6.8% / sqrt(8) = 5.7% < 6.0%
    assert "fusion=32's measured gain (+6.2%)" in advice and "at least 8 confirmation" in advice
    assert "a cell budget of about 9m11s" in advice  # the race's 199 s and 8 launches of 44 s
    assert confirmation_advice("fusion=32", [0.97, 0.99], 100.0, 40.0) is None  # no gain
    assert confirmation_advice("fusion=32", [1.05], 100.0, 40.0) is None  # no spread


def test_across_launches_every_text_counts_pairs_of_launches():
    """A Horovod confirmation sample is a launch of each candidate: its 8 are 16 launches, and
    no text may call them 8 launches."""
    from scalebench.tuning.run import confirmation_advice

    pairs = confirm("fusion=32", "default", [1.08, 1.10, 1.09], "pairs of launches")
    assert "over 3 fresh pairs of launches" in pairs.words()
    assert "over 3 fresh paired launches" in confirm("b", "a", [1.08, 1.10, 1.09]).words()
    advice = confirmation_advice("fusion=32", [1.023, 1.019, 1.148], 199.0, 44.0,
                                 "pairs of launches")
    assert "at least 8 confirmation pairs of launches" in advice
    assert "(a confirmation pair spreads by" in advice
