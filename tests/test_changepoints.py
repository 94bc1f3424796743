"""Change points on fabricated histories with known answers: the detector alone, then through a
history store and the `history detect` command (exit codes, markdown, older rows)."""

from __future__ import annotations

import json
import math
import random
import statistics

import pytest

from scalebench import cli
from scalebench.tracking import changepoints, history, history_changes
from tests.conftest import fake_record, launches, read_records

NOISE = 0.02  # relative noise of a launch's mean


def noisy(levels, seed: int = 1, per_point: int = 1) -> list[tuple[float, ...]]:
    rng = random.Random(seed)
    return [tuple(level * (1 + rng.gauss(0, NOISE)) for _ in range(per_point)) for level in levels]


def step(n_before: int, n_after: int, factor: float, level: float = 100.0) -> list[float]:
    return [level] * n_before + [level * factor] * n_after


# ---------------------------------------------------------------- the detector alone

def test_one_step_is_found_where_it_is():
    d = changepoints.detect(noisy(step(8, 8, 0.9)))
    (c,) = d.change_points
    assert c.index == 8 and c.direction == "decrease"
    assert c.change_pct == pytest.approx(-10, abs=2.5)
    assert c.before.points == 8 and c.after.points == 8 and c.difference.significant
    assert [(s.start, s.stop) for s in d.segments] == [(0, 8), (8, 16)]


def test_two_steps_are_two_change_points():
    d = changepoints.detect(noisy(step(7, 0, 1) + [90.0] * 7 + [80.0] * 7, seed=2))
    assert [c.index for c in d.change_points] == [7, 14]
    assert all(c.direction == "decrease" for c in d.change_points)


def test_noise_only_has_no_change_point():
    d = changepoints.detect(noisy([100.0] * 30))
    assert d.change_points == () and len(d.segments) == 1 and not d.too_short
    # and rarely any: 2 in 600 noise-only points, either direction (benchmarks/change_points.py
    # measures the rate on 20,000)
    assert sum(len(changepoints.detect(noisy([100.0] * 30, seed=s)).change_points)
               for s in range(20)) <= 2


def test_three_points_are_too_short_to_judge():
    d = changepoints.detect([(100.0,), (100.0,), (50.0,)])
    assert d.change_points == () and d.segments == ()
    assert d.too_short == "3 points: too short to find a change (needs 4, 2 on each side)"


def test_the_spread_of_launches_inside_points_is_a_floor_on_the_noise():
    # point means that barely move (0.3%) and step by 3%, but launches that scatter by 10%
    # inside every point: the means alone show a change, the launches say it is within noise
    rng = random.Random(2)
    levels = [100.0 * (1 + rng.gauss(0, 0.003)) for _ in range(8)] + \
        [97.0 * (1 + rng.gauss(0, 0.003)) for _ in range(8)]
    points = [(m - 10.0, m, m + 10.0) for m in levels]
    (means,) = changepoints.detect([(statistics.fmean(p),) for p in points]).change_points
    assert means.index == 8 and not means.gradual
    d = changepoints.detect(points)
    assert d.change_points == () and d.noise.floor
    assert d.segments[0].summary.n == 48  # the launches are the samples of a stretch


def test_a_change_below_the_minimum_magnitude_is_not_one():
    levels = step(10, 10, 0.97)
    values = [(v,) for v in levels]  # no noise: any step is significant
    assert [c.index for c in changepoints.detect(values, min_magnitude=2).change_points] == [10]
    assert changepoints.detect(values, min_magnitude=5).change_points == ()


def test_a_constant_series_has_none():
    assert changepoints.detect([(5.0,)] * 10).change_points == ()


# ---------------------------------------------------------------- histories as they are
# Correlated neighbours, wander, seasons, slides, levels of any sign and bad values. The code
# before judged every point as independent (noise from neighbour differences, Mann-Whitney U on
# the segments): the counts in the comments are what it found.

def ar1(n: int, phi: float, sd: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    e, out = rng.gauss(0, sd), []
    for _ in range(n):
        out.append(e)
        e = phi * e + rng.gauss(0, sd * math.sqrt(1 - phi * phi))
    return out


def single(values) -> list[tuple[float]]:
    return [(v,) for v in values]


def test_correlated_noise_is_no_change():
    # AR(1) noise, phi 0.7, 5%, 96 points (found before: 7 and 4 change points)
    for seed in (1, 2):
        d = changepoints.detect(single(100 * (1 + e) for e in ar1(96, 0.7, 0.05, seed)))
        assert d.change_points == (), [(c.index, c.change_pct) for c in d.change_points]
        assert 0.4 <= d.noise.phi <= 0.95


def test_a_level_that_wanders_within_its_noise_is_no_change():
    # a random walk of 0.3 a point under 0.2 of independent noise, 200 points: neighbours
    # differ little, the level wanders (found before: 2 and 2)
    for seed in (1, 2):
        rng = random.Random(seed)
        walk, values = 0.0, []
        for _ in range(200):
            walk += rng.gauss(0, 0.3)
            values.append(100 + walk + rng.gauss(0, 0.2))
        d = changepoints.detect(single(values))
        assert d.change_points == () and d.noise.phi > 0.9


def test_a_daily_season_is_no_change():
    # hourly sweeps, a swing of 3% over the day, 0.5% noise, 4 days (found before: 8 and 10)
    for seed in (1, 2):
        rng = random.Random(seed)
        d = changepoints.detect(single(100 + 3 * math.sin(2 * math.pi * t / 24)
                                       + rng.gauss(0, 0.5) for t in range(96)))
        assert d.change_points == ()


def test_a_straight_line_is_a_drift_not_a_change():
    # 1, 2, ..., 40 (found before: 9 steps): a drifting baseline, taken out and reported
    d = changepoints.detect(single(range(1, 41)))
    assert d.change_points == () and d.drift == pytest.approx(1.0)


def test_a_slow_slide_is_one_gradual_regression():
    # -3% a sweep for 8 sweeps (-21.6% in all) from point 16, 2% noise
    rng = random.Random(4)
    levels = [100 * 0.97 ** min(8, max(0, t - 15)) for t in range(40)]
    d = changepoints.detect(single(v * (1 + rng.gauss(0, NOISE)) for v in levels))
    (c,) = d.change_points
    assert c.gradual and c.direction == "decrease"
    # the slide moved points 16..23; the range reported covers it, a few points wider at most
    assert 13 <= c.index <= 16 and 23 <= c.stop <= 26
    assert c.change_pct == pytest.approx(-21.6, abs=3)
    low, high = c.ci_pct
    assert low < c.change_pct < high < 0
    assert [(s.start, s.stop) for s in d.segments] == [(0, c.index), (c.stop, 40)]


def test_a_slides_range_holds_both_ends_the_data_leave_open():
    # -3% a sweep over points 16..23 under 3% noise. Each end of the range reaches as far as
    # some slide ending (or starting) there fits nearly as well as the best, its other end
    # free; before, the other end was held at its best and these ranges stopped at 22 or
    # started at 17 or 18
    for seed in (9, 28, 37):
        rng = random.Random(seed)
        levels = [100 * 0.97 ** min(8, max(0, t - 15)) for t in range(40)]
        d = changepoints.detect(single(v * (1 + rng.gauss(0, 0.03)) for v in levels))
        (c,) = d.change_points
        assert c.gradual and 11 <= c.index <= 16 and 23 <= c.stop <= 28, (seed, c.index, c.stop)


def test_a_level_of_zero_is_no_crash():
    # before: mean exactly 0 (ZeroDivisionError before); the change is taken against |after|
    d = changepoints.detect(single([-1.0, 1.0] * 5 + [4.0, 6.0] * 5))
    (c,) = d.change_points
    assert c.index == 10 and c.change_pct == 100.0 and "of |after|" in c.basis


def test_a_negative_series_that_falls_is_a_decrease():
    # -10 to -20 (before: a +100% increase)
    rng = random.Random(5)
    d = changepoints.detect(single([-10 + rng.gauss(0, 0.3) for _ in range(10)]
                                   + [-20 + rng.gauss(0, 0.3) for _ in range(10)]))
    (c,) = d.change_points
    assert c.index == 10 and c.direction == "decrease"
    assert c.change_pct == pytest.approx(-100, abs=8) and "of |before|" in c.basis


@pytest.mark.parametrize("bad", [None, math.nan, math.inf, -math.inf, "12"])
def test_a_value_that_is_not_a_number_is_named(bad):
    # before: TypeError from float(None), AttributeError from statistics on NaN
    with pytest.raises(changepoints.BadValue) as err:
        changepoints.detect([(1.0,), (2.0,), (1.5, bad), (3.0,), (2.0,)])
    assert err.value.point == 2 and f"point 2: value {bad!r} is not a finite number" in str(
        err.value)


# ---------------------------------------------------------------- through a history store

def add_series(store, factors, seed: int = 1, start_day: int = 1, commit_prefix: str = "",
               **fields):
    """One sweep (1 and 2 workers, 3 trials each) per factor, commit <prefix>c<i>, a day apart."""
    rng = random.Random(seed)
    for i, factor in enumerate(factors):
        records = []
        for w, base in ((1, 10.0), (2, 19.0)):
            mean = base * factor * (1 + rng.gauss(0, NOISE))
            records.append(fake_record(tuple(mean * (1 + rng.gauss(0, 0.005)) for _ in range(3)),
                                       world_size=w, env={"git_commit": f"{commit_prefix}c{i}"},
                                       timestamp=f"2026-01-{start_day + i:02d}T00:00:00+0000",
                                       **fields))
        history.add(store, records)
    return store


def main(capsys, *argv) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_step_in_the_history_names_its_commit_range(tmp_path):
    store = add_series(tmp_path / "h.jsonl", [1.0] * 7 + [0.9] * 7)
    rows, _ = history.load_store(store)
    found = history_changes.find(rows, "throughput", last=7)
    assert [(s.line, len(s.points)) for s in found.series] == [(("ddp", 1, 1), 14),
                                                              (("ddp", 2, 1), 14)]
    assert [(c.series.line, c.commit_range, c.verdict, c.new) for c in found.changes] == [
        (("ddp", 1, 1), "c6..c7", "regression", True), (("ddp", 2, 1), "c6..c7", "regression", True)]
    assert found.exit_code == 1
    # efficiency: both lines moved together, the ratio did not
    assert history_changes.find(rows, "efficiency").changes == []
    # once 8 points have come after it, the regression is old: the gate passes
    assert history_changes.find(rows, "throughput", last=6).exit_code == 0


def test_an_improvement_is_not_a_regression(tmp_path, capsys):
    store = add_series(tmp_path / "h.jsonl", [1.0] * 6 + [1.1] * 4)
    code, out, _ = main(capsys, "history", "detect", "--store", str(store))
    assert code == 0
    assert out.count("improvement  new") == 2 and "REGRESSION" not in out
    assert "passed: no regression among the last 5 points" in out


def test_detect_exit_1_names_the_range_and_writes_markdown(tmp_path, capsys, monkeypatch):
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    store = add_series(tmp_path / "h.jsonl", [1.0] * 6 + [0.85] * 4)
    md = tmp_path / "out" / "detect.md"
    code, out, _ = main(capsys, "history", "detect", "--store", str(store), "--markdown", str(md),
                        "--metric", "throughput")
    assert code == 1
    assert "FAILED: 2 new regressions among the last 5 points" in out
    assert out.count("  throughput of inception_v3 fp32 b2 75px cpu weak ddp x") >= 2
    assert out.count(": regression of -1") == 2
    assert out.count("at c5..c6 (first seen 2026-01-07T00:00:00+00:00") == 2
    text = md.read_text()
    assert text.startswith("## scalebench history detect")
    assert "| **REGRESSION** | new | throughput | inception_v3 fp32 b2 75px cpu weak ddp x1 | " \
        "c5..c6 | step |" in text
    assert summary.read_text() == text + "\n"
    # only the last 3 points are new: the change at the 7th of 10 is older
    assert main(capsys, "history", "detect", "--store", str(store), "--last", "3")[0] == 0


def test_detect_on_noise_and_on_a_short_history_exits_0(tmp_path, capsys):
    store = add_series(tmp_path / "noise.jsonl", [1.0] * 12, seed=5)
    code, out, _ = main(capsys, "history", "detect", "--store", str(store))
    assert code == 0 and "3 series, 0 changes" in out
    short = add_series(tmp_path / "short.jsonl", [1.0, 1.0, 0.5])
    code, out, _ = main(capsys, "history", "detect", "--store", str(short))
    assert code == 0
    assert out.count("3 points: too short to find a change (needs 4, 2 on each side)") == 3
    assert "3 too short" in out


@pytest.mark.parametrize("argv, words", [
    (["--metric", "latency"], "--metric: unknown metric 'latency'; allowed: throughput, "
                              "efficiency"),
    (["--alpha", "1.5"], "--alpha: must lie between 0 and 1"),
    (["--min-magnitude", "-1"], "--min-magnitude: must be a percentage >= 0"),
    (["--last", "0"], "--last: must be a number of points >= 1"),
])
def test_detect_bad_input_exits_2(tmp_path, capsys, argv, words):
    store = add_series(tmp_path / "h.jsonl", [1.0] * 4)
    code, _, err = main(capsys, "history", "detect", "--store", str(store), *argv)
    assert code == 2 and words in err and len(err.strip().splitlines()) == 1


def test_detect_on_a_missing_or_empty_store_exits_2(tmp_path, capsys):
    code, _, err = main(capsys, "history", "detect", "--store", str(tmp_path / "none.jsonl"))
    assert code == 2 and "does not exist" in err
    store = tmp_path / "failed.jsonl"
    history.add(store, [fake_record(status="failed", error="boom")])
    code, _, err = main(capsys, "history", "detect", "--store", str(store))
    assert code == 2 and "holds no successful run" in err


def test_rows_older_than_change_points_still_load(tmp_path, capsys):
    # rows as the first stores wrote them: no launch fields, step options, global batch or
    # efficiency samples
    store = add_series(tmp_path / "h.jsonl", [1.0] * 6 + [0.85] * 6)
    old = []
    for row in read_records(store):
        for name in ("step_options", "options", "global_batch", "repeat", "repeats",
                     "order_seed", "efficiency_samples", "efficiency"):
            row.pop(name)
        old.append(row)
    store.write_text("".join(json.dumps(r) + "\n" for r in old))
    code, out, _ = main(capsys, "history", "detect", "--store", str(store), "--last", "6")
    assert code == 1 and out.count("c5..c6") >= 2


def test_repeated_launches_are_one_point_with_their_samples(tmp_path):
    store = tmp_path / "h.jsonl"
    rng = random.Random(3)
    for i in range(8):
        factor = 1.0 if i < 4 else 0.9
        per_launch = [[10.0 * factor * (1 + rng.gauss(0, NOISE))] * 3 for _ in range(3)]
        history.add(store, launches(per_launch, order_seed=100 + i, hour=i,
                                    env={"git_commit": f"c{i}"}))
    rows, _ = history.load_store(store)
    (s,) = history_changes.find(rows, "throughput").series
    assert len(s.points) == 8
    (c,) = s.changes
    assert c.commit_range == "c3..c4" and c.point.before.summary.n == 12  # 4 points x 3 launches


def test_plot_draws_segments_and_writes_the_page(tmp_path, capsys):
    store = add_series(tmp_path / "h.jsonl", [1.0] * 6 + [0.85] * 6)
    out_dir = tmp_path / "plots"
    code, out, _ = main(capsys, "history", "plot", "--store", str(store), "--out", str(out_dir),
                        "--last", "6")
    assert code == 0 and f"wrote {out_dir / 'history.html'}" in out
    assert out.count("change: throughput") == 2 and "regression:" not in out
    text = (out_dir / "history.html").read_text()
    assert text.count('<img src="data:image/png;base64,') == 2
    assert "c5..c6" in text and "regression (new)" in text


def test_a_slide_in_the_history_is_one_gradual_regression(tmp_path, capsys):
    # -3% a sweep for 8 sweeps (c8..c15), 3 sweeps after: new, the gate fails
    factors = [1.0] * 8 + [0.97 ** k for k in range(1, 9)] + [0.97 ** 8] * 3
    store = add_series(tmp_path / "h.jsonl", factors, seed=3)
    md = tmp_path / "detect.md"
    code, out, _ = main(capsys, "history", "detect", "--store", str(store), "--metric",
                        "throughput", "--markdown", str(md))
    assert code == 1 and "FAILED: 2 new regressions" in out and "2 gradual" in out
    rows, _ = history.load_store(store)
    found = history_changes.find(rows, "throughput")
    assert len(found.changes) == 2
    for c in found.changes:
        assert c.point.gradual and c.verdict == "regression" and c.new
        assert 5 <= c.point.index <= 8 and 15 <= c.point.stop  # covers the slide, c8..c15
        assert f"gradual regression of {c.point.change_pct:+.1f}% [" in out
        assert f"over {c.commit_range} (first seen" in out
    assert "| gradual, " in md.read_text()
    out_dir = tmp_path / "plots"
    code, out, _ = main(capsys, "history", "plot", "--store", str(store), "--out", str(out_dir))
    assert code == 0 and out.count("change: throughput") == 2 and "gradual regression" in out
    page = (out_dir / "history.html").read_text()
    assert page.count("gradual, ") == 2 and "neighbour correlation" in page


@pytest.mark.parametrize("bad", [None, "NaN", "Infinity"])
def test_a_bad_value_in_the_store_is_one_line_naming_the_point(tmp_path, capsys, bad):
    store = add_series(tmp_path / "h.jsonl", [1.0] * 6)
    rows = read_records(store)
    rows[5]["trial_images_per_sec"][1] = bad
    rows[5]["sweep_id"] = "s5"
    text = "".join(json.dumps(r) + "\n" for r in rows)
    store.write_text(text.replace('"NaN"', "NaN").replace('"Infinity"', "Infinity"))
    for action in (["detect"], ["plot", "--out", str(tmp_path / "plots")]):
        code, _, err = main(capsys, "history", *action, "--store", str(store))
        assert code == 2 and len(err.strip().splitlines()) == 1, err
        assert ("throughput of inception_v3 fp32 b2 75px cpu weak ddp x2 at commit c2, sweep s5"
                in err and "not a finite number" in err), err


# ---------------------------------------------------------------- the benchmark's trend bound

def load_benchmark():
    import importlib.util
    import sys
    from pathlib import Path

    name = "change_points_benchmark"
    if name not in sys.modules:
        path = Path(__file__).resolve().parent.parent / "benchmarks" / "change_points.py"
        spec = importlib.util.spec_from_file_location(name, path)
        sys.modules[name] = importlib.util.module_from_spec(spec)  # its dataclasses look it up
        spec.loader.exec_module(sys.modules[name])
    return sys.modules[name]


def test_the_trend_bound_finds_clear_steps_and_not_all_of_the_trend_familys():
    # a detector told the truth of the `trend` family (a line, at most one step): every step at
    # 0.5% noise; at the family's 5%, well short of all of them at 1 false alarm per 1,000
    bound = load_benchmark().step_on_a_line_bound
    clear = bound(200, 48, 0.005, seed=1)
    assert all(recall == 1.0 for _, _, recall in clear)
    rows = bound(400, 48, 0.05, seed=1)
    assert [r[0] for r in rows] == pytest.approx([100 / 48, 50 / 48, 25 / 48])
    thresholds, recalls = [r[1] for r in rows], [r[2] for r in rows]
    assert thresholds == sorted(thresholds) and recalls == sorted(recalls, reverse=True)
    assert 0.5 < recalls[1] < 0.85
