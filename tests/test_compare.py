"""scalebench compare: verdicts, exit codes, warnings and renderings.

Most tests use fabricated records; the reference-set tests compare real records (the committed
reference set's DDP runs, tests/conftest.py tiny_sweep) with copies of them.
"""

from __future__ import annotations

import json
import math
import statistics

import pytest
from scipy.stats import t as student_t

from scalebench import cli
from scalebench.analysis import compare
from scalebench.spec import identity
from tests.conftest import fake_record, read_records, variant, write_records

TIGHT_1 = (10.0, 10.1, 9.9)
TIGHT_2 = (19.0, 19.2, 18.8)


def sweep(factor: float = 1.0, env: dict | None = None, world_sizes=(1, 2), **fields) -> list[dict]:
    trials = {1: TIGHT_1, 2: TIGHT_2}
    return [fake_record(tuple(v * factor for v in trials[w]), world_size=w, env=env, **fields)
            for w in world_sizes]


def run_compare(capsys, baseline, current, *extra) -> tuple[int, str, str]:
    code = cli.main(["compare", str(baseline), str(current), *extra])
    out = capsys.readouterr()
    return code, out.out, out.err


def verdicts(comparison) -> dict[tuple[str, int], str]:
    return {(v.metric, identity.key_dict(v.key)["world_size"]): v.verdict
            for v in comparison.verdicts}


# ---------------------------------------------------------------- fabricated records (fast)

def test_identical_sets_pass(tmp_path, capsys):
    base = write_records(tmp_path / "a.jsonl", sweep())
    code, out, err = run_compare(capsys, base, base)
    assert code == 0, out + err
    assert "passed: no regression" in out and "REGRESSION" not in out
    c = compare.compare(sweep(), sweep())
    assert verdicts(c) == {("throughput", 1): "unchanged", ("throughput", 2): "unchanged",
                           ("efficiency", 2): "unchanged"}


def test_twenty_percent_lower_fails_with_the_right_rows(tmp_path, capsys):
    base = write_records(tmp_path / "base" / "results.jsonl", sweep())
    cur = write_records(tmp_path / "cur" / "results.jsonl", sweep(factor=0.8))
    code, out, err = run_compare(capsys, base.parent, cur.parent)  # folders work as inputs
    assert code == 1, out + err
    c = compare.compare(sweep(), sweep(factor=0.8))
    # throughput fell 20% at both worker counts; efficiency, a ratio of the same side, did not
    assert verdicts(c) == {("throughput", 1): "regression", ("throughput", 2): "regression",
                           ("efficiency", 2): "unchanged"}
    for v in c.regressions:
        assert v.change_pct == pytest.approx(-20.0)
        assert v.test == "95% intervals"  # 3 vs 3 trials: Mann-Whitney cannot reach 0.05
    assert "FAILED: 2 regressions" in out
    assert out.count("REGRESSION") == 2


def test_two_percent_drop_is_unchanged():
    c = compare.compare(sweep(), sweep(factor=0.98))
    assert set(verdicts(c).values()) == {"unchanged"}
    assert c.exit_code == 0


def test_five_trials_use_mann_whitney():
    base = [fake_record((10.0, 10.2, 9.8, 10.1, 9.9))]
    cur = [fake_record((8.0, 8.2, 7.8, 8.1, 7.9))]
    (v,) = compare.compare(base, cur, metrics="throughput").verdicts
    assert v.verdict == "regression" and v.test == "Mann-Whitney U"
    assert v.p_value == pytest.approx(2 / 252)


def test_threshold_and_metric_options(tmp_path, capsys):
    base = write_records(tmp_path / "a.jsonl", sweep())
    cur = write_records(tmp_path / "b.jsonl", sweep(factor=0.8))
    code, out, _ = run_compare(capsys, base, cur, "--threshold", "25")
    assert code == 0 and "within 25%" in out
    code, out, _ = run_compare(capsys, base, cur, "--metric", "efficiency")
    assert code == 0 and "metrics efficiency;" in out
    assert [line.split()[1] for line in out.splitlines()[2:-1]] == ["efficiency"]


def test_new_missing_and_failed_runs():
    base = sweep() + [fake_record(TIGHT_1, framework="horovod")]
    cur = [sweep()[0], fake_record(world_size=2, status="failed", error="NCCL timeout"),
           fake_record(TIGHT_1, framework="ray")]
    c = compare.compare(base, cur, allow_missing=True)  # the behaviour before failed rows
    by = {(v.metric, v.config.split()[1], v.config.split()[2]): v for v in c.verdicts}
    assert by[("throughput", "ddp", "x2")].verdict == "missing"
    assert "NCCL timeout" in by[("throughput", "ddp", "x2")].reason
    assert by[("efficiency", "ddp", "x2")].verdict == "missing"
    assert by[("throughput", "horovod", "x1")].verdict == "missing"
    assert by[("throughput", "ray", "x1")].verdict == "new"
    assert c.exit_code == 0  # missing rows are reported, not failed on


def test_settings_outside_the_key_are_noted():
    c = compare.compare(sweep(), sweep(iters=5))
    assert all(any("iters differs: 1 -> 5" in n for n in v.notes) for v in c.verdicts)


def test_environment_mismatch_warns(tmp_path, capsys):
    base = write_records(tmp_path / "a.jsonl", sweep())
    cur = write_records(tmp_path / "b.jsonl",
                        sweep(env={"cpu_model": "Other CPU", "torch": "2.15.0"}))
    summary = tmp_path / "summary.md"
    code, out, _ = run_compare(capsys, base, cur, "--markdown", str(summary))
    assert code == 0
    assert "WARNING: the environments differ" in out
    assert "cpu_model differs: baseline Test CPU vs current Other CPU" in out
    assert "torch differs: baseline 2.14.1 vs current 2.15.0" in out
    md = summary.read_text()
    assert "environments differ" in md and "cpu_model differs" in md
    assert md.count("| unchanged |") == 3


def test_same_environment_does_not_warn():
    assert compare.compare(sweep(), sweep(env={"hostname": "node-b"})).env_warnings == ()


def test_markdown_appends_to_github_step_summary(tmp_path, capsys, monkeypatch):
    base = write_records(tmp_path / "a.jsonl", sweep())
    cur = write_records(tmp_path / "b.jsonl", sweep(factor=0.8))
    summary = tmp_path / "step-summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    code, _, _ = run_compare(capsys, base, cur)
    assert code == 1
    text = summary.read_text()
    assert text.startswith("earlier step\n")
    assert "## scalebench compare" in text and "**REGRESSION**" in text
    header, rule = [line for line in text.splitlines() if line.startswith("|")][:2]
    assert header.count("|") == rule.count("|")


def test_markdown_escapes_pipes():
    c = compare.compare(sweep(), [fake_record(world_size=2, status="failed", error="a|b"),
                                  sweep()[0]])
    assert "a\\|b" in compare.render_markdown(c)


@pytest.mark.parametrize("content, reason", [
    ("not json at all\n{\"half\": \n", "malformed JSON"),
    ("", "the file is empty"),
    (json.dumps({**fake_record(), "schema_version": 99}) + "\n", "schema_version 99"),
    (json.dumps({**fake_record(), "trial_images_per_sec": [1.0]}) + "\n", "one value per trial"),
])
def test_malformed_input_exits_2_with_the_reason(tmp_path, capsys, content, reason):
    good = write_records(tmp_path / "good.jsonl", sweep())
    bad = tmp_path / "bad.jsonl"
    bad.write_text(content)
    code, out, err = run_compare(capsys, good, bad)
    assert code == 2
    assert err.startswith("scalebench compare: error: current") and reason in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("argv, reason", [
    (["--threshold", "-1"], "--threshold"),
    (["--alpha", "1.5"], "--alpha"),
    (["--metric", "latency"], "unknown metric 'latency'"),
])
def test_bad_options_exit_2(tmp_path, capsys, argv, reason):
    good = write_records(tmp_path / "good.jsonl", sweep())
    code, _, err = run_compare(capsys, good, good, *argv)
    assert code == 2 and reason in err


def test_missing_path_and_disjoint_sets_exit_2(tmp_path, capsys):
    good = write_records(tmp_path / "good.jsonl", sweep())
    code, _, err = run_compare(capsys, good, tmp_path / "nowhere")
    assert code == 2 and "neither a results file nor a folder" in err
    other = write_records(tmp_path / "other.jsonl", sweep(model="vgg16"))
    code, _, err = run_compare(capsys, good, other)
    assert code == 2 and "no configuration appears in both" in err


def test_partly_malformed_file_compares_and_fails_on_the_broken_line(tmp_path, capsys):
    # issue 46: a line cut short is a broken measurement, not an absent one
    good = write_records(tmp_path / "good.jsonl", sweep())
    partial = tmp_path / "partial.jsonl"
    partial.write_text(good.read_text() + "{\"truncated\n")
    code, out, _ = run_compare(capsys, good, partial)
    assert code == 1
    assert "partial.jsonl:3: malformed JSON" in out and "INVALID" in out
    assert "unchanged" in out  # the valid rows are still judged


# ---------------------------------------------------------------- real records (reference set)

def t_interval(samples: list[float]) -> tuple[float, float]:
    """Student-t 95% interval of the mean, written out independently of scalebench.analysis.stats."""
    mean = statistics.fmean(samples)
    half = student_t.ppf(0.975, len(samples) - 1) * statistics.stdev(samples) / math.sqrt(len(samples))
    return mean - half, mean + half


def test_reference_against_itself_passes(tiny_sweep, capsys):
    code, out, err = run_compare(capsys, tiny_sweep, tiny_sweep.parent)
    assert code == 0, out + err
    assert "unchanged: 3" in out


def test_reference_twenty_percent_lower(tiny_sweep, tmp_path, capsys):
    records = read_records(tiny_sweep)
    lowered = write_records(tmp_path / "lowered.jsonl", variant(records, factor=0.8))
    code, out, err = run_compare(capsys, tiny_sweep, lowered)
    c = compare.compare(records, read_records(lowered))
    rows = {(v.metric, v.config.split()[2]): v for v in c.verdicts}
    assert set(rows) == {("throughput", "x1"), ("throughput", "x2"), ("efficiency", "x2")}
    # efficiency is a ratio within one side: lowering every run by 20% leaves it alone
    assert rows[("efficiency", "x2")].verdict == "unchanged"
    assert rows[("efficiency", "x2")].change_pct == pytest.approx(0.0, abs=1e-9)
    resolvable = 0
    for r in records:
        v = rows[("throughput", f"x{r['world_size']}")]
        assert v.change_pct == pytest.approx(-20.0)
        assert v.test == "95% intervals"  # 3 vs 3 trials
        low, high = t_interval(r["trial_images_per_sec"])
        significant = 0.8 * high < low  # the lowered copy's interval lies below the original's
        assert v.verdict == ("regression" if significant else "unchanged"), v.reason
        resolvable += significant
    assert code == (1 if resolvable else 0), out + err
    if not resolvable:
        pytest.skip("the reference runs vary too much for 3 trials to resolve a 20% drop; "
                    "compare rightly reported 'unchanged' (checked above)")
    assert out.count("REGRESSION") == resolvable


def test_reference_two_percent_drop_is_unchanged(tiny_sweep, tmp_path, capsys):
    dropped = write_records(tmp_path / "dropped.jsonl", variant(read_records(tiny_sweep), 0.98))
    code, out, err = run_compare(capsys, tiny_sweep, dropped)
    assert code == 0, out + err
    assert "unchanged: 3" in out and "REGRESSION" not in out


def test_reference_other_environment_warns(tiny_sweep, tmp_path, capsys):
    other = variant(read_records(tiny_sweep), env={"cpu_model": "Some Other CPU", "nccl": "2.99"})
    code, out, _ = run_compare(capsys, tiny_sweep, write_records(tmp_path / "o.jsonl", other))
    assert code == 0
    assert "WARNING: the environments differ" in out
    assert "cpu_model differs" in out and "nccl differs" in out
    assert "unchanged: 3" in out  # still matched: the warning does not hide the comparison


def test_reference_malformed_copy_exits_2(tiny_sweep, tmp_path, capsys):
    broken = tmp_path / "broken.jsonl"
    broken.write_text("".join(line[: len(line) // 2] + "\n"
                              for line in tiny_sweep.read_text().splitlines()))
    code, _, err = run_compare(capsys, broken, tiny_sweep)
    assert code == 2
    assert "baseline" in err and "malformed JSON" in err and "broken.jsonl:1" in err


def test_step_options_are_separate_configurations():
    plain = [fake_record(TIGHT_1, framework="horovod", world_size=1),
             fake_record(TIGHT_2, framework="horovod", world_size=2)]
    compressed = [fake_record(TIGHT_1, framework="horovod", world_size=1,
                              options={"fp16_allreduce": True}),
                  fake_record(tuple(0.7 * v for v in TIGHT_2), framework="horovod", world_size=2,
                              options={"fp16_allreduce": True})]
    c = compare.compare(plain + compressed, plain + compressed)
    assert len(c.verdicts) == 6 and c.count("unchanged") == 6
    configs = {v.config for v in c.verdicts if v.metric == "efficiency"}
    assert configs == {"inception_v3 horovod x2 fp32 b2 75px cpu weak",
                       "inception_v3 horovod x2 fp32 b2 75px cpu weak [fp16_allreduce]"}
    # only the compressed runs slowed down: only their rows regress, against their own baseline
    slower = plain + [compressed[0], fake_record(tuple(0.5 * v for v in TIGHT_2),
                                                 framework="horovod", world_size=2,
                                                 options={"fp16_allreduce": True})]
    c = compare.compare(plain + compressed, slower)
    assert {(v.metric, v.config.split()[2], v.config.endswith("[fp16_allreduce]"))
            for v in c.regressions} == {("throughput", "x2", True), ("efficiency", "x2", True)}


def test_reference_set_against_itself_keeps_every_configuration(capsys):
    from tests.conftest import REFERENCE

    code, out, err = run_compare(capsys, REFERENCE, REFERENCE.parent)
    assert code == 0, out + err
    # ddp, horovod and horovod [fp16_allreduce]: throughput at 1 and 2 workers, efficiency at 2
    assert "unchanged: 9" in out
    assert out.count("[fp16_allreduce]") == 3


# ---------------------------------------------------------------- one number, one answer

def failed_two_worker(status: str = "failed", error: str = "NCCL timeout") -> list[dict]:
    return [sweep()[0], fake_record(world_size=2, status=status, error=error)]


def test_a_run_ok_in_the_baseline_that_failed_now_fails_the_gate(tmp_path, capsys):
    # issue 22, case 6: a change that crashes multi-worker training must not pass the gate
    c = compare.compare(sweep(), failed_two_worker())
    assert verdicts(c) == {("throughput", 1): "unchanged", ("throughput", 2): "failed",
                           ("efficiency", 2): "failed"}
    assert c.exit_code == 1
    assert all("current: run failed: NCCL timeout" in v.reason for v in c.gating)
    base = write_records(tmp_path / "a.jsonl", sweep())
    for status, error in (("failed", "NCCL timeout"), ("timeout", "timed out after 900 s")):
        cur = write_records(tmp_path / f"{status}.jsonl", failed_two_worker(status, error))
        code, out, _ = run_compare(capsys, base, cur)
        assert code == 1, out
        assert "FAILED: 2 runs failed (ok in the baseline)" in out
        assert f"  failed: throughput of inception_v3 ddp x2 fp32 b2 75px cpu weak: current: run " \
               f"{status}: {error}" in out
        # --allow-missing: the behaviour before, reported but passing
        code, out, _ = run_compare(capsys, base, cur, "--allow-missing")
        assert code == 0 and "passed: no regression (unchanged: 1, missing: 2;" in out


def test_a_skipped_run_stays_a_note():
    skipped = [sweep()[0], fake_record(world_size=2, status="skipped",
                                       error="horovod is not installed")]
    c = compare.compare(sweep(), skipped)
    assert verdicts(c)[("throughput", 2)] == "missing" and c.exit_code == 0


def test_a_failed_one_worker_run_fails_the_efficiency_row_with_its_reason():
    cur = [fake_record(status="timeout", error="timed out after 900 s"), sweep()[1]]
    c = compare.compare(sweep(), cur, metrics="efficiency")
    [v] = c.verdicts
    assert v.verdict == "failed" and c.exit_code == 1
    assert "its one-worker run timeout: timed out after 900 s" in v.reason


def test_injected_faults_never_pool_with_clean_runs_and_are_labelled():
    # issue 22, case 8: a record with faults.step_delay is another configuration
    faults = {"step_delay": {"rank": 1, "seconds": 0.3}}
    faulted = [fake_record(tuple(0.7 * v for v in TIGHT_2), world_size=2, faults=faults)]
    c = compare.compare(sweep(), sweep() + faulted)
    assert c.exit_code == 0 and not c.regressions
    [new] = [v for v in c.verdicts if v.verdict == "new"]
    assert new.config == ("inception_v3 ddp x2 fp32 b2 75px cpu weak "
                          "[faults: step delay 0.3 s on rank 1]")
    # both sides faulted: judged against each other, the faults said in the row
    both = sweep(faults=faults)
    c = compare.compare(both, both)
    assert {v.config.endswith("[faults: step delay 0.3 s on rank 1]") for v in c.verdicts} == {True}
    assert all("baseline and current: injected faults: step delay 0.3 s on rank 1" in n
               for v in c.verdicts for n in v.notes[:1])


def test_skipped_fp16_steps_travel_into_the_verdict():
    # issue 22, case 8: 30% faster because steps were skipped is not a clean improvement
    warning = ("3 fp16 steps in the timed windows were skipped by the gradient scaler (inf/NaN "
               "gradients): skipped steps do no update and inflate throughput")
    base = sweep(precision="fp16", world_sizes=(1,))
    cur = [fake_record(tuple(1.3 * v for v in TIGHT_1), precision="fp16", warnings=[warning],
                       scaler_skipped_steps=3)]
    [v] = compare.compare(base, cur, metrics="throughput").verdicts
    assert v.verdict == "improvement"
    assert f"current: {warning}" in v.notes
    assert warning in compare.render_text(compare.compare(base, cur, metrics="throughput"))


def test_one_launch_per_side_says_it_holds_within_those_processes():
    # issue 22, case 10
    c = compare.compare(sweep(), sweep(factor=0.8), metrics="throughput")
    assert len(c.regressions) == 2
    for v in c.regressions:
        assert v.notes[0] == ("1 launch vs 1 launch: this holds within these processes only; run "
                              "--repeats 2 or more for a verdict about the code")
    from tests.conftest import launches

    three = launches([(9.9, 10.0, 10.1), (10.0, 10.1, 10.2), (9.8, 9.9, 10.0)])
    slower = launches([(7.9, 8.0, 8.1), (8.0, 8.1, 8.2), (7.8, 7.9, 8.0)])
    [v] = compare.compare(three, slower, metrics="throughput").verdicts
    assert v.verdict == "regression" and not any("within these processes" in n for n in v.notes)


def test_min_launches_refuses_rows_with_fewer_launches(tmp_path, capsys):
    # issue 22, case 10: --min-launches K for gates that insist on launches
    from tests.conftest import launches

    c = compare.compare(sweep(), sweep(), min_launches=2)
    assert set(verdicts(c).values()) == {"refused"} and c.exit_code == 1
    assert all(v.reason == "not judged: 1 vs 1 launches, fewer than --min-launches 2"
               for v in c.verdicts)
    two = launches([(9.9, 10.0, 10.1), (10.4, 10.5, 10.6)])
    c = compare.compare(two, two, min_launches=2)
    assert set(verdicts(c).values()) == {"unchanged"} and c.exit_code == 0
    base = write_records(tmp_path / "a.jsonl", sweep())
    code, out, _ = run_compare(capsys, base, base, "--min-launches", "2")
    assert code == 1 and "FAILED: 3 rows with too few launches" in out
    assert "min launches 2" in out
    for bad in ("0", "two", "1.5"):
        code, _, err = run_compare(capsys, base, base, "--min-launches", bad)
        assert code == 2 and len(err.strip().splitlines()) == 1
        assert "--min-launches: expected an integer >= 1" in err


def test_a_slow_own_baseline_is_said_to_flatter_efficiency():
    # issue 22, case 11: a real run's numbers (ResNet-101 64 px, 2 launches each)
    from tests.conftest import launches

    def side(framework, one, two):
        return (launches([(m - 0.1, m, m + 0.1) for m in one], framework=framework)
                + launches([(m - 0.1, m, m + 0.1) for m in two], framework=framework,
                           world_size=2))

    records = side("ray", (10.85, 11.35), (10.75, 11.06)) + \
        side("ddp", (13.72, 14.03), (11.00, 12.04))
    c = compare.compare(records, records, metrics="efficiency")
    by = {v.config.split()[1]: v for v in c.verdicts}
    [note] = [n for n in by["ray"].notes if "flatters" in n]
    assert note == ("baseline and current: ray's own one-worker run (11.1 images/s) is 20% slower "
                    "than the best one (ddp, 13.88 images/s), which flatters its efficiency; "
                    "against the best one-worker run it is 39.3%")
    assert not any("flatters" in n for n in by["ddp"].notes)


def test_a_side_that_mixes_sweeps_is_warned_about():
    one = sweep(sweep_id="20260101T000000-aaaa")
    other = sweep(sweep_id="20260102T000000-bbbb")
    c = compare.compare(one, one[:1] + other[1:])
    assert c.input_warnings == ("current holds the runs of 2 sweeps (20260101T000000-aaaa, "
                                "20260102T000000-bbbb); launches of one configuration from "
                                "different sweeps are pooled",)


def test_launches_of_one_side_with_different_settings_are_noted():
    from tests.conftest import launches

    base = launches([(9.9, 10.0, 10.1), (9.9, 10.0, 10.1)])
    mixed = launches([(9.9, 10.0, 10.1), (9.9, 10.0, 10.1)])
    mixed[1]["iters"] = 5
    [v] = compare.compare(base, mixed, metrics="throughput").verdicts
    assert "current launches differ in iters: 1, 5" in v.notes
