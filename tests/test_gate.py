"""scalebench gate: a results set against the pooled last sweeps of a branch in the history
(tracking/gate.py), its sweep-level test (tracking/sweep_test.py) on noise that looks real (AR(1)
drift between sweeps, heavy tails, launches of a sweep sharing its offset), the testbed it pools
by (hardware/testbed.py), and the command through real stores (a JSONL file, a git branch in a
bare repository)."""

from __future__ import annotations

import math
import random
import statistics
import subprocess

import pytest

from scalebench import cli
from scalebench.hardware import testbed
from scalebench.spec.errors import UserError
from scalebench.tracking import accepted, gate, history, sweep_test
from tests.conftest import launches, write_records

GPU_ENV = {"device_kind": "NVIDIA H100 80GB HBM3", "accelerator_model": "NVIDIA H100 80GB HBM3",
           "gpus": 8, "driver": "550.54.15", "cuda": "12.4", "nccl": "2.21.5",
           "cpu_model": "Intel Xeon", "cpu_cores": 96, "runner_class": "gpu-8x"}
OTHER_CPU = {"cpu_model": "Other CPU", "cpu_cores": 64}


def heavy(rng: random.Random) -> float:
    """A Student t draw with 3 degrees of freedom, scaled to variance 1 (heavy tails)."""
    return rng.gauss(0, 1) / math.sqrt(sum(rng.gauss(0, 1) ** 2 for _ in range(3)) / 3) \
        / math.sqrt(3.0)


def noise_series(n: int, rng: random.Random, phi: float = 0.7, sd: float = 0.03) -> list[float]:
    """Relative offsets that look like a real history's: AR(1) (neighbours correlated) with
    heavy-tailed innovations (Student t, 3 degrees of freedom), marginal deviation about sd."""
    scale = sd * math.sqrt(1 - phi * phi)
    e, out = 0.0, []
    for _ in range(n):
        e = phi * e + scale * heavy(rng)
        out.append(e)
    return out


def sweep(s: int, level_1: float, level_2: float, rng: random.Random, env: dict | None = None,
          commit: str | None = None, status_2: str = "ok", launch_sd: float = 0.0) -> list[dict]:
    """One sweep: 2 launches of ddp at 1 and 2 workers around the given levels (the sweep's
    offset, which its launches share), each launch off by its own part (deviation launch_sd,
    Student t with 3 degrees of freedom), each trial by 1%."""
    fields = {"env": {"git_commit": commit or f"c{s:02d}", **(env or {})}, "sweep_id": f"s{s}"}

    def own() -> float:
        return 1 + launch_sd * heavy(rng) if launch_sd else 1.0

    one = launches([[level_1 * own() * (1 + rng.gauss(0, 0.01)) for _ in range(3)]
                    for _ in range(2)], s, s % 24, **fields)
    if status_2 != "ok":
        from tests.conftest import fake_record

        two = [fake_record(world_size=2, status=status_2, error="worker 1 exited 1", repeat=1,
                           repeats=1, **fields)]
    else:
        two = launches([[level_2 * own() * (1 + rng.gauss(0, 0.01)) for _ in range(3)]
                        for _ in range(2)], s, s % 24, world_size=2, **fields)
    day = f"2026-01-{1 + s // 24:02d}T{s % 24:02d}"
    for r in one + two:
        r["timestamp"] = day + r["timestamp"][13:]
    return one + two


def history_rows(levels: list[float], seed: int = 1, env: dict | None = None,
                 branch: str | None = "main", first: int = 0, sd: float = 0.01) -> list[dict]:
    """Run rows of one sweep per level (x 10 images/s at 1 worker, x 19 at 2), with real-looking
    noise between sweeps (marginal deviation sd)."""
    rng = random.Random(seed)
    e = noise_series(len(levels), rng, sd=sd)
    rows = []
    for i, (level, off) in enumerate(zip(levels, e, strict=True)):
        records = sweep(first + i, 10 * level * (1 + off), 19 * level * (1 + off), rng, env)
        rows += history.rows_from_records(records, branch=branch)
    return rows


def current(level: float = 1.0, seed: int = 99, env: dict | None = None, **kw) -> list[dict]:
    return sweep(90, 10 * level, 19 * level, random.Random(seed), env, commit="pr", **kw)


def verdicts(g: gate.Gate) -> dict[tuple[str, int], str]:
    return {(r.verdict.metric, r.verdict.key[2]): r.verdict.verdict for r in g.rows}


# ---------------------------------------------------------------- the testbed

def test_testbed_of_a_gpu_run_names_every_field_and_ignores_the_host():
    bed = testbed.of({**GPU_ENV, "hostname": "runner-17"})
    assert bed.kind == "gpu"
    for word in ("NVIDIA H100 80GB HBM3 x8", "driver 550.54.15", "CUDA 12.4", "NCCL 2.21.5",
                 "host class gpu-8x"):
        assert word in bed.label
    assert bed.matches(testbed.of({**GPU_ENV, "hostname": "runner-18"}))
    for change in ({"driver": "535.1"}, {"gpus": 4}, {"nccl": "2.18.1"}, {"runner_class": "x"}):
        assert not bed.matches(testbed.of({**GPU_ENV, **change})), change


def test_testbed_of_a_cpu_run_is_its_cpu_model_and_cores():
    bed = testbed.of({"device_kind": "cpu", "cpu_model": "AMD EPYC", "cpu_cores": 2,
                      "accelerator_model": "NVIDIA H100"})  # a CPU run on a GPU machine
    assert bed.kind == "cpu" and bed.label == "AMD EPYC x2 cores"
    assert not bed.matches(testbed.of({"device_kind": "cpu", "cpu_model": "AMD EPYC",
                                       "cpu_cores": 4}))
    assert not bed.matches(testbed.of(GPU_ENV))


def test_a_field_not_recorded_cannot_tell_testbeds_apart():
    old = {k: v for k, v in GPU_ENV.items() if k not in ("driver", "runner_class")}
    assert testbed.of(old).matches(testbed.of(GPU_ENV))
    assert "driver" not in testbed.of(old).label


def test_interconnect_is_part_of_the_testbed():
    nic = {"nics": [{"name": "ib0", "kind": "InfiniBand", "rate": "200 Gb/sec"}],
           "numa_nodes": [{"node": 0, "cpus": "0-1"}]}
    a = testbed.of({**GPU_ENV, "topology": nic})
    b = testbed.of({**GPU_ENV, "topology": {**nic, "nics": [{"name": "eth0", "kind": "Ethernet",
                                                             "speed_mbps": 25000}]}})
    assert "ib0 InfiniBand 200 Gb/s" in a.label and not a.matches(b)


# ---------------------------------------------------------------- pooling and verdicts

def test_pooled_gate_judges_against_the_level_not_the_last_sweep():
    """The last sweep of main ran 8% high (a noisy point); an unchanged PR at the branch's level
    fails against that sweep alone (compare's rule at 0.05, as a job comparing with main's last
    green run) and passes against the ten pooled sweeps, each row showing the test's figures."""
    levels = [1.0] * 11 + [1.08]
    rows = history_rows(levels, seed=4)
    pr = current(1.0)
    single = gate.judge(pr, rows, points=1, alpha=0.05)
    pooled = gate.judge(pr, rows, points=10)
    assert verdicts(single)[("throughput", 2)] == verdicts(single)[("throughput", 1)] == "regression"
    assert "1 sweep pooled: too few for a sweep-to-sweep variance (needs 3)" in \
        gate.render_text(single)
    assert pooled.exit_code == 0, gate.render_text(pooled)
    row = next(r for r in pooled.rows if r.verdict.metric == "throughput")
    assert row.pool.commits == [f"c{s:02d}" for s in range(2, 12)]
    assert row.verdict.test == sweep_test.TEST and row.prediction.sweeps == 10
    low, high = row.prediction.interval(row.tail)
    assert low < row.prediction.current < high and row.tail == pytest.approx(0.01 / 3)
    text = gate.render_text(pooled)
    assert "10 sweeps: c02 c03" in text and "99.33% interval [" in text and "phi " in text
    assert "alpha 0.01 a PR (Holm over 3 sweep-level rows)" in text


def ar_sweeps(n: int, rng: random.Random, phi: float, sd: float, launches: int = 2,
              launch_sd: float = 0.02) -> list[list[float]]:
    """Per-launch values of n sweeps around 100: an AR(1) offset with heavy-tailed innovations
    (noise_series) that a sweep's launches share, and each launch's own heavy-tailed part."""
    return [[100 * (1 + e) * (1 + launch_sd * heavy(rng)) for _ in range(launches)]
            for e in noise_series(n, rng, phi, sd)]


def test_the_sweep_level_test_holds_its_alpha_where_launches_as_samples_do_not():
    """Stands on 800 histories of 11 sweeps (8,800 sweeps): AR(1) drift of 5% between sweeps
    (phi 0.8) with t(3) innovations, 2 launches a sweep sharing its offset, each 2% off on its
    own; the 11th sweep, unchanged, is the current one.
    - the predicted variance of (current - pool mean) is on average within 15% of the variance
      those differences really have; the pool's plain sample variance (independent sweeps) falls
      short by more than that: the AR(1) correction is what closes the gap;
    - the current sweep is significantly low (one-sided, 0.05) in at most 8% of histories (the
      heavy tails take it a little over 5%); its launches taken as independent samples against
      the 20 pooled ones (a Welch t-test) are in more than 20%;
    - the per-launch variance within a sweep is found: (2% of 100)^2 = 4, within 15%."""
    import statistics as st

    from scipy.stats import ttest_ind

    rng = random.Random(7)
    ours = naive = 0
    diffs, predicted, plain, within = [], [], [], []
    n = 800
    for _ in range(n):
        sweeps = ar_sweeps(11, rng, 0.8, 0.05)
        pool, now = sweeps[:-1], sweeps[-1]
        p = sweep_test.predict(pool, now)
        diffs.append((p.current - p.pool_mean) ** 2)
        predicted.append(p.sd ** 2)
        means = [st.fmean(s) for s in pool]
        plain.append(st.variance(means) * (1 + 1 / len(means)))
        within.append(p.within_var)
        ours += p.p_lower < 0.05
        naive += ttest_ind(now, [v for s in pool for v in s], equal_var=False,
                           alternative="less").pvalue < 0.05
    truth = st.fmean(diffs)
    assert 0.85 < st.fmean(predicted) / truth < 1.15 and st.fmean(plain) / truth < 0.85, \
        (st.fmean(predicted) / truth, st.fmean(plain) / truth)
    assert ours / n <= 0.08 and naive / n > 0.20, (ours / n, naive / n)
    assert st.fmean(within) == pytest.approx(4.0, rel=0.15)


def test_phi_is_clamped_and_said():
    trend = [[100.0 + 3 * i, 100.5 + 3 * i] for i in range(10)]  # a drift: phi fits near 1
    p = sweep_test.predict(trend, [130.0, 131.0])
    assert p.phi == sweep_test.PHI_MAX and p.phi_estimate > sweep_test.PHI_MAX
    assert "clamped to [0, 0.9]" in p.phi_text
    flat = sweep_test.predict([[100.0, 101.0], [99.0, 100.0], [100.5, 99.5]], [100.0])
    assert flat.df == 2 and flat.phi_text.startswith("phi ") and "clamped" not in flat.phi_text
    with pytest.raises(ValueError, match="needs 3 pooled sweeps"):
        sweep_test.predict([[100.0], [101.0]], [99.0])


def test_holm_adjusts_in_step_down_order():
    assert sweep_test.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert sweep_test.holm([0.5, 0.001]) == pytest.approx([0.5, 0.002])
    assert sweep_test.holm([]) == []


def test_a_sweep_sitting_low_within_the_branchs_noise_passes_and_says_why():
    """The bug this rule fixes: main's sweeps scatter by 5% (AR(1), heavy tails); an unchanged
    PR whose sweep sits 6% under the pool's mean, its two launches agreeing, was significant
    against the pooled launches; at the sweep level it is within the branch's own noise."""
    rng = random.Random(11)
    e = noise_series(12, rng, phi=0.5, sd=0.05)
    rows = [row for s in range(12) for row in history.rows_from_records(
        sweep(s, 10 * (1 + e[s]), 19 * (1 + e[s]), rng), branch="main")]
    pool = [statistics.fmean(r["images_per_sec"] for r in rows if r["commit"] == f"c{s:02d}"
                             and r["world_size"] == 2) for s in range(2, 12)]
    low = statistics.fmean(pool) * 0.94 / 19
    g = gate.judge(sweep(12, 10 * low, 19 * low, rng, commit="pr"), rows)
    row = next(r for r in g.rows if r.verdict.metric == "throughput" and r.verdict.key[2] == 2)
    assert row.verdict.change_pct == pytest.approx(-6.0, abs=1.5)  # and its trials' 1%
    assert row.verdict.verdict == "unchanged" and g.exit_code == 0, gate.render_text(g)
    assert "beyond 5% but not significant; sweep prediction t" in row.verdict.reason
    assert "10 sweeps against the current one of 2 launches" in row.verdict.reason


def test_holm_over_the_prs_rows_and_a_regression_beyond_the_noise_fails():
    """Sweeps 1% apart: a 2-worker run 15% slower is a regression of throughput and
    efficiency, each p adjusted over the PR's 3 rows (Holm), the smallest exactly 3 times."""
    rows = history_rows([1.0] * 12, sd=0.01)
    g = gate.judge(current(1.0, seed=5) [:2] + current(0.85, seed=5)[2:], rows)
    assert verdicts(g) == {("throughput", 1): "unchanged", ("throughput", 2): "regression",
                           ("efficiency", 2): "regression"}, gate.render_text(g)
    judged = [r for r in g.rows if r.prediction is not None]
    assert g.family == len(judged) == 3
    smallest = min(judged, key=lambda r: r.prediction.p_lower)
    assert smallest.verdict.p_value == pytest.approx(3 * smallest.prediction.p_lower)
    assert all(r.verdict.p_value >= min(r.prediction.p_lower, r.prediction.p_upper)
               for r in judged)


def test_on_real_looking_histories_the_pooled_gate_holds_and_catches():
    """Stands on 10 histories of 12 sweeps (AR(1) drift, phi 0.8, 3% between sweeps, t(3)
    innovations; 2 launches a sweep sharing its offset, each 1% off on its own): 10 unchanged PRs
    (30 rows) and 10 whose 2-worker run is 15% slower. Pooled (sweep-level, alpha 0.01 a PR):
    no unchanged PR fails, and at least 8 regressions are caught, no fewer than against the
    last sweep alone (compare's launch-level rule at 0.05)."""
    alarms = {1: 0, 10: 0}
    caught = {1: 0, 10: 0}
    for seed in range(10):
        rng = random.Random(100 + seed)
        e = noise_series(13, rng, phi=0.8, sd=0.03)
        rows = [row for s in range(12) for row in history.rows_from_records(
            sweep(s, 10 * (1 + e[s]), 19 * (1 + e[s]), rng, launch_sd=0.01), branch="main")]
        same = sweep(12, 10 * (1 + e[12]), 19 * (1 + e[12]), rng, commit="pr", launch_sd=0.01)
        slower = [dict(r, trial_images_per_sec=[t * 0.85 for t in r["trial_images_per_sec"]])
                  if r["world_size"] == 2 else r for r in same]
        for points, alpha in ((1, 0.05), (10, 0.01)):
            alarms[points] += gate.judge(same, rows, points=points, alpha=alpha).exit_code
            caught[points] += verdicts(gate.judge(slower, rows, points=points, alpha=alpha)
                                       ).get(("throughput", 2)) == "regression"
    assert alarms[10] == 0, alarms
    assert caught[10] >= max(caught[1], 8), caught


def test_a_regression_fails_and_names_the_commits_pooled():
    rows = history_rows([1.0] * 12)
    g = gate.judge(current(0.85), rows)
    assert g.exit_code == 1 and verdicts(g)[("throughput", 2)] == "regression"
    text = gate.render_text(g)
    assert "FAILED: 2 regressions" in text and "10 sweeps: c02 c03 c04" in text
    assert "Test CPU x2 cores" in text  # the testbed, in every row
    assert all(r.testbed == "Test CPU x2 cores" for r in g.rows)


def test_a_failed_run_fails_with_or_without_history():
    rows = history_rows([1.0] * 5)
    g = gate.judge(current(status_2="failed"), rows)
    assert verdicts(g)[("throughput", 2)] == "failed" and g.exit_code == 1
    assert "worker 1 exited 1" in gate.render_text(g)
    only_one = [r for r in rows if r["world_size"] == 1]
    g = gate.judge(current(status_2="timeout"), only_one)
    assert verdicts(g)[("throughput", 2)] == "failed" and g.exit_code == 1


def test_no_sweep_of_the_testbed_fails_unless_any_testbed():
    rows = history_rows([1.0] * 6, env=OTHER_CPU)
    g = gate.judge(current(), rows)
    assert set(verdicts(g).values()) == {"untested"} and g.exit_code == 1
    text = gate.render_text(g)
    assert "no sweep of this testbed" in text and "Other CPU x64 cores" in text
    assert "3 rows with no sweep of their testbed" in text
    pooled = gate.judge(current(), rows, any_testbed=True)
    assert pooled.exit_code == 0 and "pooled with sweeps of Other CPU x64 cores" in \
        gate.render_text(pooled)


def test_only_sweeps_of_the_same_testbed_are_pooled():
    rows = history_rows([1.0] * 4, seed=1) + history_rows([0.5] * 4, seed=2, env=OTHER_CPU,
                                                           first=4)
    g = gate.judge(current(), rows)
    assert g.exit_code == 0
    assert next(r for r in g.rows).pool.commits == ["c00", "c01", "c02", "c03"]


def test_a_change_point_in_the_window_limits_the_pool():
    """+15% at sweep 14 of 20: the pool is the 6 sweeps since; a PR 8% under the new level is a
    regression against them (against all ten pooled it would be within the threshold)."""
    rows = history_rows([1.0] * 14 + [1.15] * 6, seed=5)
    g = gate.judge(current(1.15 * 0.92), rows)
    row = next(r for r in g.rows if r.verdict.metric == "throughput" and r.verdict.key[2] == 2)
    assert row.verdict.verdict == "regression", gate.render_text(g)
    assert row.pool.commits == [f"c{s:02d}" for s in range(14, 20)]
    assert "pool limited to the 6 sweeps since the throughput improvement" in row.pool.note
    assert "c13..c14" in row.pool.note


def test_an_accepted_change_in_the_window_is_named_where_it_cuts_the_pool():
    rows = history_rows([1.0] * 14 + [0.85] * 6, seed=5)
    entry = accepted.entry("c13..c14", "new kernel", [], rows, "2026-02-01T00:00:00+0000")
    g = gate.judge(current(0.85), rows, accepts=accepted.from_entries([entry]))
    assert g.exit_code == 0, gate.render_text(g)
    assert "accepted c13..c14: new kernel" in gate.render_text(g)


def test_branches_other_than_the_baseline_are_left_out():
    rows = history_rows([1.0] * 4, branch="main") + history_rows([0.5] * 4, branch="feature",
                                                                 first=4)
    g = gate.judge(current(), rows)
    assert g.exit_code == 0
    unbranched = history_rows([1.0] * 3, branch=None)
    assert gate.judge(current(), unbranched, branch="release").exit_code == 0  # any branch
    with pytest.raises(UserError, match="--branch 'release': the history store holds no sweep "
                       "of it \\(its branches: feature, main\\)"):
        gate.judge(current(), rows, branch="release")


def test_bad_input_is_one_user_error():
    rows = history_rows([1.0] * 3)
    with pytest.raises(UserError, match="no run rows"):
        gate.judge(current(), [])
    with pytest.raises(UserError, match="--points"):
        gate.judge(current(), rows, points=0)
    other = [r for r in current() if r["world_size"] == 2]
    for r in other:
        r["model"] = "vgg16"
    with pytest.raises(UserError, match="no configuration of current has a sweep"):
        gate.judge(other, rows)


# ---------------------------------------------------------------- the command, real stores

def main(capsys, *argv) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def add_history(capsys, store: str, tmp_path, levels: list[float]) -> None:
    rng = random.Random(4)
    for s, level in enumerate(levels):
        path = write_records(tmp_path / f"sweep{s}.jsonl", sweep(s, 10 * level, 19 * level, rng))
        code, _, err = main(capsys, "history", "add", str(path), "--store", store,
                            "--branch", "main")
        assert code == 0, err


def test_gate_command_through_a_file_store(tmp_path, capsys, monkeypatch):
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    store = str(tmp_path / "history.jsonl")
    add_history(capsys, store, tmp_path, [1.0] * 4)
    same = write_records(tmp_path / "pr" / "results.jsonl", current())
    comment = tmp_path / "comment.md"
    code, out, _ = main(capsys, "gate", str(same.parent), "--store", store, "--comment",
                        str(comment), "--markdown", str(tmp_path / "gate.md"))
    assert code == 0 and "passed: no regression" in out and not comment.exists()
    assert "## scalebench gate" in summary.read_text()
    slow = write_records(tmp_path / "slow.jsonl", current(0.8))
    code, out, _ = main(capsys, "gate", str(slow), "--store", store, "--comment", str(comment))
    assert code == 1 and "FAILED" in out
    body = comment.read_text()
    assert body.splitlines()[0] == gate.MARKER and "**REGRESSION**" in body


@pytest.mark.parametrize("case", ["no runs", "empty store", "no branch", "bad points"])
def test_gate_command_bad_input_exits_2_with_one_line(tmp_path, capsys, case):
    store = tmp_path / "history.jsonl"
    add_history(capsys, str(store), tmp_path, [1.0, 1.0])
    pr = write_records(tmp_path / "pr.jsonl", current())
    argv = ["gate", str(pr), "--store", str(store)]
    if case == "no runs":
        (tmp_path / "empty").mkdir()
        (tmp_path / "empty" / "results.jsonl").write_text("")
        argv[1] = str(tmp_path / "empty")
    elif case == "empty store":
        store.write_text("")
    elif case == "no branch":
        argv += ["--branch", "release"]
    else:
        argv += ["--points", "zero"]
    code, out, err = main(capsys, *argv)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert err.startswith("scalebench gate: error:")


def test_gate_reads_a_git_store(tmp_path, capsys):
    bare = tmp_path / "history.git"
    subprocess.run(["git", "init", "--bare", "-q", str(bare)], check=True)
    store = f"git:{bare}#scalebench-history"
    add_history(capsys, store, tmp_path, [1.0] * 3)
    pr = write_records(tmp_path / "pr.jsonl", current(0.8))
    code, out, _ = main(capsys, "gate", str(pr), "--store", store, "--points", "3")
    assert code == 1 and "3 sweeps: c00 c01 c02" in out and sweep_test.TEST in out


def test_an_invalid_current_record_fails_the_gate(tmp_path, capsys):
    store = str(tmp_path / "history.jsonl")
    add_history(capsys, store, tmp_path, [1.0] * 3)
    pr = write_records(tmp_path / "pr.jsonl", current())
    with open(pr, "a") as fh:
        fh.write('{"kind": "train", "framework": "ddp", "world_si\n')  # a line cut short
    code, out, _ = main(capsys, "gate", str(pr), "--store", store)
    assert code == 1 and "INVALID" in out and "pr.jsonl:" in out
