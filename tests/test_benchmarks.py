"""Every script in benchmarks/ runs its --smoke mode (smallest sizes, fewest rounds) as a real
subprocess, as a user would start it, and prints its figures: what nothing else runs cannot rot
unseen. minimal_horovod_loop.py has no mode of its own: horovod_overhead.py's smoke launches it.

Each test checks a line the script prints only after it measured something (a figure with a
number in it), and, where the script writes a results folder, the records in it. The scripts
that start launchers (torchrun, horovodrun, Ray, Slurm) are slow; Horovod, Ray and Slurm are
skipped, saying why, where they are missing.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO, cli_env, needs_horovod, read_records

needs_ray = pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                               reason="Ray unavailable: not installed")
SLURM_TOOLS = ("munged", "slurmctld", "slurmd", "salloc")


def start(script: str, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """`python benchmarks/SCRIPT --smoke ARGS` from the repository root, this checkout first on
    the path (an installed scalebench elsewhere must not answer its imports)."""
    env = cli_env()
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    return subprocess.run([sys.executable, str(REPO / "benchmarks" / script), "--smoke", *args],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)


def smoke(script: str, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """start(), which must exit 0."""
    proc = start(script, *args, timeout=timeout)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def figure(pattern: str, text: str) -> list[float]:
    """The numbers of the one line matching pattern (its groups), which must be there."""
    match = re.search(pattern, text, re.MULTILINE)
    assert match, f"no line matching {pattern!r} in:\n{text}"
    return [float(g) for g in match.groups()]


ROUND = r"^round 1: scalebench (\d+\.\d+) images/s, minimal (\d+\.\d+) images/s, ratio (\d+\.\d+)$"
RATIO = r"^ratio scalebench/minimal: median (\d+\.\d+), of means (\d+\.\d+) \(goal >= 0\.98\)$"
HOROVOD_ROUND = (r"^round 1 \(scalebench first\): scalebench (\d+\.\d+) images/s, minimal "
                 r"(\d+\.\d+) images/s, ratio (\d+\.\d+)$")
HOROVOD_RATIO = (r"^ratio scalebench/minimal: geometric mean (\d+\.\d+), median (\d+\.\d+) "
                 r"\(goal >= 0\.98\)$")


def test_change_points_smoke():
    out = smoke("change_points.py").stdout
    ok, launches = figure(r"^measured noise \(results\.jsonl: (\d+) ok train records, (\d+) "
                          r"one-worker launches\)", out)
    assert ok > 0 and launches >= 2
    assert "histories: 28 points, 1 launch(es) x 2 trials a point; 2 with a change and 3 " \
           "without" in out
    # each family scored by the three detectors: a recall in [0, 1] for each
    rows = re.findall(r"^(iid:10|ar0\.5|slide3x8)\s+\|\s+(\d\.\d\d)\s.*\|\s+(\d\.\d\d)\s.*"
                      r"\|\s+(\d\.\d\d)\s", out, re.MULTILINE)
    assert [r[0] for r in rows] == ["iid:10", "ar0.5", "slide3x8"], out
    assert all(0.0 <= float(x) <= 1.0 for r in rows for x in r[1:])

@pytest.mark.slow  # processes racing on a git store
def test_ci_history_smoke():
    out = smoke("ci_history.py", timeout=300).stdout
    present, expected = figure(r"^\| sweeps present exactly once \| (\d+) of (\d+) \|", out)
    assert present == expected == 4
    assert figure(r"^\| rows lost / doubled \| (\d+) / (\d+) \|", out) == [0, 0]
    (ratio,) = figure(r"^\| crowd wall / adds \| \d+\.\d+ s \((\d+\.\d+)x lone\)", out)
    assert ratio > 0
    checks = re.findall(r"^\| (file|git) \(\d+ MB before\) \| PASS: (\d+) of (\d+) rows of the "
                        r"last 30 days kept, 0 older rows kept;", out, re.MULTILINE)
    assert [c[0] for c in checks] == ["file", "git"], out
    assert all(c[1] == c[2] and int(c[1]) > 0 for c in checks)


@pytest.mark.slow  # the benchmark's histories and a CLI run
def test_ci_gate_smoke():
    out = smoke("ci_gate.py").stdout
    assert "histories: 3 per phi, 12 sweeps of 6 configurations" in out
    rows = re.findall(r"^(0\.5|0\.8)\s+(pooled|single)\s+(\d+\.\d\d)%", out, re.MULTILINE)
    assert [(r[0], r[1]) for r in rows] == [("0.5", "pooled"), ("0.5", "single"),
                                           ("0.8", "pooled"), ("0.8", "single")], out
    assert all(0.0 <= float(r[2]) <= 100.0 for r in rows)
    exits = [int(x) for x in re.findall(r"exits (\d)", out)]
    assert exits == [1, 0, 0, 1], out  # step; accept; detect after it; a second step


@pytest.mark.slow  # real training steps
def test_harness_overhead_smoke():
    out = smoke("harness_overhead.py").stdout
    assert ("resnet101 32px batch 2 on cpu, 1 threads, 2 timed steps per measurement, "
            "1 rounds") in out
    ours, theirs, ratio = figure(ROUND, out)
    assert ours > 0 and theirs > 0 and ratio > 0
    median, of_means = figure(RATIO, out)
    assert median == pytest.approx(ratio, abs=1e-4) and of_means > 0


@pytest.mark.slow
@needs_horovod
def test_horovod_overhead_smoke():
    """Both loops under horovodrun at 1 worker of 1 thread: scalebench's and
    minimal_horovod_loop.py."""
    out = smoke("horovod_overhead.py").stdout
    assert "resnet101 32px batch 2/worker, 1 workers x 1 threads, 2 timed steps, 1 rounds" in out
    ours, theirs, ratio = figure(HOROVOD_ROUND, out)
    assert ours > 0 and theirs > 0 and ratio > 0
    mean, median = figure(HOROVOD_RATIO, out)
    assert mean == pytest.approx(ratio, abs=1e-4)  # one round: its own ratio, no interval
    assert median == pytest.approx(ratio, abs=1e-4)


@pytest.mark.slow
@needs_ray
def test_ray_vs_ddp_smoke(tmp_path):
    out = smoke("ray_vs_ddp.py", "--out", str(tmp_path)).stdout
    ddp, ray = figure(r"^round 1 \(ddp then ray\): ddp (\d+\.\d+) images/s, startup [\d.]+ s; "
                      r"ray (\d+\.\d+) images/s, startup [\d.]+ s$", out)
    assert ddp > 0 and ray > 0
    [ratio] = figure(r"^  Ray / DDP       (\d+\.\d+)", out)
    assert ratio == pytest.approx(ray / ddp, rel=5e-2)
    assert "Ray Train vs DDP: resnet101 32 px, 1 workers x 1 thread, batch 2/worker" in out
    records = read_records(tmp_path / "round-1" / "results.jsonl")
    assert sorted((r["framework"], r["status"], r["world_size"], r["image_size"], r["trials"])
                  for r in records if r["kind"] == "train") == [
        ("ddp", "ok", 1, 32, 2), ("ray", "ok", 1, 32, 2)]


@pytest.mark.slow
def test_sweep_walltime_smoke(tmp_path):
    out = smoke("sweep_walltime.py", "--out", str(tmp_path)).stdout
    for mode in ("grouped", "isolated"):
        [wall, timed] = figure(rf"^round 1 {mode}\s*: 1 of 1 runs ok, wall\s+(\d+\.\d) s, "
                               r"warm-up \+ timed\s+(\d+\.\d) s", out)
        assert 0 < timed < wall
        [r] = [r for r in read_records(tmp_path / f"{mode}-1" / "results.jsonl")
               if r["kind"] == "train"]
        # one configuration: a group of one is launched as an isolated run
        assert (r["framework"], r["model"], r["status"], r["image_size"], r["trials"]) == (
            "ddp", "resnet101", "ok", 32, 2)
    [ratio] = figure(r"^default: wall time grouped / isolated (\d+\.\d+) \(goal <= 0\.65\)", out)
    assert ratio > 0
    assert "  grouping saved" in out
    [measured] = figure(r"^  grouped vs isolated images/s over 1 configuration: geometric-mean "
                        r"ratio (\d+\.\d+); too few configurations", out)
    assert measured > 0 and "    ddp resnet101 1 fp32: grouped " in out


@pytest.mark.slow
def test_vet_accuracy_smoke():
    """A private 3-node Slurm cluster, one vetting without a fault and one with sb1 slowed;
    what it detects is not asserted (the smallest probes on shared cores), only that both
    vettings ran and were scored."""
    missing = [t for t in SLURM_TOOLS if shutil.which(t) is None]
    if missing:
        pytest.skip(f"Slurm is not installed ({', '.join(missing)} missing)")
    if os.geteuid() != 0:
        pytest.skip("slurmd needs root to start tasks; run the Slurm tests as root")
    proc = start("vet_accuracy.py", timeout=900)
    if proc.returncode != 0 and "Slurm cluster" in proc.stderr:
        pytest.skip(proc.stderr.strip().splitlines()[-1])
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    out = proc.stdout
    [verdicts] = figure(r"^no fault #1: cordoned .*; (\d+) verdicts; \d+ s$", out)
    figure(r"^sb1 slowed 50%: cordoned .* -> (?:detected|missed); (\d+) s$", out)
    [hits] = figure(r"^detection rate at a 50% slowdown: (\d)/1 = \d+%$", out)
    assert hits in (0, 1)
    figure(r"^false-alarm rate: (\d)/1 = \d+%", out)
    [wall] = figure(r"^vetting wall time \(3 nodes, median of 2\): (\d+) s$", out)
    assert wall > 0
    assert "default sweep" not in out  # --smoke never runs the sweep


def test_horovod_autotune_reads_the_best_params_line_as_horovodrun_prints_it():
    """horovod_autotune.py's full run takes tens of minutes (the autotuner needs ~1,200 steps),
    too long for the suite; what it reads from Horovod's log is checked on Horovod 0.28's own
    format: horovodrun's rank prefix, microseconds padded with spaces."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import horovod_autotune
    finally:
        sys.path.pop(0)
    line = ("[0]<stdout>:[2026-12-06 15:40:01.  1234: I horovod/common/parameter_manager.cc:293] "
            "Autotuner: Best params [0, 0, 0, 1, 12.5 ms, 32.75 mb] 1.3e+06")
    m = horovod_autotune.BEST_LINE.match(line)
    assert m and m.group(1) == "2026-12-06 15:40:01" and int(m.group(2)) == 1234
    assert horovod_autotune.best_settings(m.group(3)) == (12.5, 32.75)
    assert horovod_autotune.BEST_LINE.match(line.removeprefix("[0]<stdout>:"))
    assert not horovod_autotune.BEST_LINE.match(line.replace("Best params", "Warming up"))


@pytest.mark.slow
def test_tune_quality_smoke():
    """A grid of two candidates (DDP's gradient view off and on) in one launch, then one tune
    at half the grid's time (at least the 24 s tune accepts for a DDP cell), judged against the
    grid; windows of one timed step (tune's own 9 tripled the smoke's steps)."""
    out = smoke("tune_quality.py").stdout
    assert "2 workers, 1 thread each, batch 2, 32 px, 1 steps per window" in out
    [seconds] = figure(r"^ddp/resnet101/w2: grid of 2 candidates, 1 launches, (\d+) s; best ", out)
    assert seconds > 0
    assert re.search(r"^  gradient_as_bucket_view=off\s+\+0\.0% \[\+0\.0, \+0\.0\]  \(default\)$",
                     out, re.MULTILINE), out
    assert re.search(r"^  gradient_as_bucket_view=on\s+[+-]\d+\.\d% \[", out, re.MULTILINE), out
    [behind, used, budget] = figure(
        r"^  tune seed 1: winner gradient_as_bucket_view=o(?:n|ff) \([+-]\d+\.\d% vs default in "
        r"the grid, (\d+\.\d)% behind the grid's best[^)]*\); (\d+) s of a (\d+) s budget", out)
    assert behind >= 0 and 0 < used and budget == pytest.approx(max(seconds / 2, 24), abs=1)
    [good, runs] = figure(r"^(\d) of (\d) tune runs within 2% of the grid's best", out)
    assert runs == 1 and good in (0, 1)


def test_interval_coverage_smoke():
    """The log-scale intervals never reach below zero, in any family, where the linear ones
    did; on Gaussian trials both cover about 95%."""
    out = smoke("interval_coverage.py", "--smoke").stdout
    for metric in ("images/s", "efficiency"):
        [old, below, new, new_below, noisy, either] = figure(
            rf"^all cells, {metric}: old cover (\d+\.\d)% \((\d+\.\d)% below zero\); new cover "
            r"(\d+\.\d)% of those bounded \((\d+\.\d)% below zero\), (\d+\.\d)% too noisy to "
            r"bound, (\d+\.\d)% bounded and covering or too noisy$", out)
        assert new_below == 0 and below > 0 and noisy > 0 and 0 < old <= 100 and 0 < new <= 100
        assert either >= new * (100 - noisy) / 100
    [old, _, new] = figure(r"^gaussian 3%\s+3\s+images/s\s+(\d+\.\d)%\s+(\d+\.\d)%\s+(\d+\.\d)%", out)
    assert 90 <= old <= 99 and 90 <= new <= 99


@pytest.mark.slow
def test_disturbance_smoke():
    """One real sweep (ddp, one worker, resnet101 at 32 px) beside the script's hog, spinning
    a quarter of a core in the smoke (a whole core took about 25 CPU-seconds of the suite's),
    no quiet sweep: the record is read, judged and the figures printed. Whether the hog is
    flagged is not asserted: on a machine other work shares, it may not be the top process."""
    out = smoke("disturbance.py", "--quiet-sweeps", "0").stdout
    [named, records, listed, records_again] = figure(
        r"^\(a\) beside a 25%-of-a-core CPU hog \(sbench-cpuhog, \d+ s\): (\d+) of (\d+) records "
        r"flagged with the hog named as the top other process \(goal: all\); (\d+) of (\d+) "
        r"with it among the top 5$", out)
    assert records == records_again == 1 and named <= listed
    assert "(b) 0 sweeps on this machine without the hog: 0 of 0 records flagged" in out
    [mean, peak] = figure(r"^edge readings: (\d+\.\d+) ms per window on average, at most "
                          r"(\d+\.\d+) ms", out)
    assert 0 < mean <= peak


@pytest.mark.slow
def test_history_real_smoke(tmp_path):
    """Two clean one-worker DDP sweeps, then two beside one busy process, into histories A
    (2 points: too short) and B (4 points: detected); every figure printed and sane, the
    records and both stores written. The verdicts are not judged: two sweeps a side on a
    machine the rest of the suite shares cannot show the slowdown."""
    out = smoke("history_real.py", "--out", str(tmp_path)).stdout
    assert ("history_real: 2 clean then 2 slowed one-worker ddp sweeps (inception_v3, 75 px, "
            "batch 2, 1 thread, 2 trials of 1 step), 1 busy process beside the slowed ones; "
            "history detect --metric throughput --min-magnitude 30") in out
    [busy] = figure(r"^before the clean sweeps: cores (\d+\.\d)% busy over the last second "
                    r"\(waited \d+ s of at most 0; quiet is below 15%\)$", out)
    assert 0 <= busy <= 100
    means = {}
    for kind, note in (("clean", ""), ("slowed", r" \(1 busy process\)")):
        for i in (1, 2):
            [mean, first, second, seconds] = figure(
                rf"^{kind} {i} of 2{note}: (\d+\.\d+) images/s \(mean of 2 trials: (\d+\.\d+), "
                r"(\d+\.\d+)\), sweep (\d+\.\d) s$", out)
            assert first > 0 and second > 0 and seconds > 0
            assert mean == pytest.approx((first + second) / 2, abs=0.01)
            means.setdefault(kind, []).append(mean)
        assert figure(rf"^{kind} images/s in time order: (\d+\.\d+) (\d+\.\d+)$", out) == \
            means[kind]
    [after, before, ratio] = figure(r"^slowdown: median slowed (\d+\.\d+) / median clean "
                                    r"(\d+\.\d+) images/s = (\d+\.\d+) \(goal < 0\.65\)$", out)
    assert after == pytest.approx(sum(means["slowed"]) / 2, abs=0.01)
    assert before == pytest.approx(sum(means["clean"]) / 2, abs=0.01)
    assert ratio == pytest.approx(after / before, rel=0.01)
    series = r"throughput of inception_v3 fp32 b2 75px cpu weak ddp x1"
    [code_a] = figure(rf"^history A \(commit0\.\.commit1, the 2 clean sweeps\): exit (\d+); "
                      rf"{series}: 2 points: too short", out)
    assert code_a == 0
    [code_b, changes] = figure(rf"^history B \(commit0\.\.commit3, the last 2 clean then the 2 "
                               rf"slowed sweeps\): exit (\d+); {series}: 4 points, (\d+) "
                               r"changes? \(", out)
    assert code_b in (0, 1) and changes >= 0
    assert len(re.findall(r"^    (?:passed|FAILED): ", out, re.MULTILINE)) == 2, out
    assert re.findall(r"^(?:PASS|FAIL) (slowdown|history A|history B): ", out, re.MULTILINE) == [
        "slowdown", "history A", "history B"]
    for name in ("clean0", "clean1", "slowed0", "slowed1"):
        [r] = read_records(tmp_path / name / "results.jsonl")
        assert (r["framework"], r["model"], r["status"], r["image_size"], r["trials"]) == (
            "ddp", "inception_v3", "ok", 75, 2)
    for store, names in (("a.jsonl", ["clean0", "clean1"]),
                         ("b.jsonl", ["clean0", "clean1", "slowed0", "slowed1"])):
        rows = read_records(tmp_path / store)
        assert [row["commit"] for row in rows] == [f"commit{i}" for i in range(len(names))]
        assert [os.path.basename(os.path.dirname(row["source"])) for row in rows] == names
