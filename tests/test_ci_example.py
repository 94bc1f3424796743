"""The shipped CI example: its workload validates, every scalebench command in it parses, and its
jobs' steps run as scripts against a local bare repository standing in for the project's
remote (no network): two "main" jobs on two runners (separate caches) that add, detect, plot
and export, then a "PR" job whose sweep regressed and whose gate fails with a PR comment."""

from __future__ import annotations

import json
import os
import random
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from scalebench import cli
from scalebench.hardware.devices import DeviceInfo
from scalebench.spec import config
from scalebench.tracking import gate
from tests.conftest import REPO, fake_record, write_records
from tests.plans import flat_runs

CI = REPO / "examples" / "ci"
yaml = pytest.importorskip("yaml", reason="PyYAML not installed")


def flow() -> dict:
    return yaml.safe_load((CI / "scaling-regression.yml").read_text())


def test_ci_workload_validates_and_expands_on_a_gpu_node():
    spec = config.build_spec(config.load_workload(CI / "gpu-sweep.toml"))
    assert spec.device == "cuda" and spec.trials >= 4  # enough trials for Mann-Whitney U
    runs = flat_runs(spec, DeviceInfo("cuda", "nccl", accelerators=4, cores=32))
    assert sorted({r.world_size for r in runs}) == [1, 2, 4]
    assert {r.model for r in runs} == {"resnet101", "inception_v3", "vgg16"}


def workflow_commands() -> list[list[str]]:
    text = (CI / "scaling-regression.yml").read_text().replace("\\\n", " ")
    commands = []
    for line in text.splitlines():
        match = re.search(r"-m scalebench (.*)$", line)
        if match:
            args = shlex.split(match.group(1))
            commands.append([re.sub(r"\$\{?(\w+)\}?", r"/x/\1", a) for a in args])
    return commands


def test_every_scalebench_command_in_the_workflow_parses():
    commands = workflow_commands()
    assert {c[0] for c in commands} == {"sweep", "gate", "history"}
    parser = cli.build_parser()
    for argv in commands:
        assert parser.parse_args(argv).command in cli.COMMANDS
    (gate_cmd,) = [c for c in commands if c[0] == "gate"]
    assert gate_cmd[gate_cmd.index("--branch") + 1] == "main" and "--comment" in gate_cmd
    assert {tuple(c[:2]) for c in commands if c[0] == "history"} == {
        ("history", "add"), ("history", "detect"), ("history", "plot"), ("history", "export")}
    detect = next(c for c in commands if c[:2] == ["history", "detect"])
    assert "--markdown" in detect and "--last" in detect


def test_jobs_a_concurrency_group_per_runner_class_and_the_store_on_a_data_branch():
    f = flow()
    assert f["env"]["HISTORY_STORE"].startswith("git:") and \
        f["env"]["HISTORY_STORE"].endswith("#scalebench-history")
    assert set(f["jobs"]) == {"pr", "main"}
    for job in f["jobs"].values():
        assert "${{ matrix.runner }}" in job["runs-on"] and job["strategy"]["matrix"]["runner"]
        assert job["concurrency"] == {"group": "scaling-${{ matrix.runner }}",
                                      "cancel-in-progress": False}
        assert job["env"]["SCALEBENCH_RUNNER_CLASS"] == "${{ matrix.runner }}"
        names = [s.get("name") for s in job["steps"]]
        # the token reaches git only after the sweep, which runs the code under test
        assert names.index("Sweep") < names.index("Let git reach the history branch")
    comment = next(s for s in f["jobs"]["pr"]["steps"] if s.get("name") == "Comment on the pull "
                   "request")
    assert f"'{gate.MARKER}'" in comment["with"]["script"]  # finds the gate's comment by it


# ---------------------------------------------------------------- the jobs, run as scripts

EXPRESSIONS = {"github.token": "test-token", "github.server_url": "https://github.com",
               "github.repository": "example/scaling", "matrix.runner": "gpu-test"}


def expand(value: object) -> str:
    """`${{ expr }}` as Actions would fill it in; an expression the test does not know fails."""
    return re.sub(r"\$\{\{\s*(.+?)\s*\}\}", lambda m: EXPRESSIONS[m.group(1)], str(value))


def runs_step(condition: str | None, failed: bool) -> bool:
    if condition in (None, "success()"):
        return not failed
    if condition == "always()":
        return True
    if condition.startswith("failure()"):
        return failed
    raise AssertionError(f"a step condition this test cannot evaluate: {condition}")


def sweep_results(out: Path, k: int, slower: float = 1.0) -> None:
    """What the GPU sweep would leave: ddp at 1 and 2 workers, 5 trials each; the 2-worker run
    `slower` times its usual speed."""
    rng = random.Random(k)
    records = [fake_record(tuple(base * (slower if w == 2 else 1.0) * (1 + rng.gauss(0, 0.004))
                                 for _ in range(5)), world_size=w, sweep_id=f"sweep-{k}",
                           env={"git_commit": f"{k:040x}"},
                           timestamp=f"2026-03-{k + 1:02d}T00:00:00+0000")
               for w, base in ((1, 10.0), (2, 19.0))]
    write_records(out / "results.jsonl", records)


def run_job(name: str, root: Path, remote: Path, k: int, slower: float = 1.0) -> dict[str, int]:
    """Job `name`'s steps in a fresh checkout folder and runner cache, as Actions would run them
    (bash -e, GITHUB_ENV carried to later steps); `uses:` steps and `make setup` are left to
    Actions and the runner, the sweep is replaced by its results. Step name -> exit code."""
    f = flow()
    job = f["jobs"][name]
    work = root / f"{name}-{k}"
    work.mkdir()
    github_env = work / "github_env"
    env = {**os.environ, **{key: expand(v) for key, v in {**f["env"], **job["env"]}.items()},
           "HISTORY_STORE": f"git:{remote}#scalebench-history", "SCALEBENCH_VENV": sys.prefix,
           "SCALEBENCH_CACHE": str(work / "runner-cache"), "GITHUB_SHA": f"{k:040x}",
           "GITHUB_ENV": str(github_env), "GITHUB_STEP_SUMMARY": str(work / "summary.md")}
    codes: dict[str, int] = {}
    for step in job["steps"]:
        if "uses" in step or not runs_step(step.get("if"), any(codes.values())):
            continue
        if step["name"] == "Set up the environment":
            assert step["run"] == "make setup"
            continue
        if step["name"] == "Sweep":
            assert "-m scalebench sweep examples/ci/gpu-sweep.toml" in step["run"]
            sweep_results(work / env["OUT"], k, slower)
            codes[step["name"]] = 0
            continue
        github_env.write_text("")
        proc = subprocess.run(["bash", "-e", "-c", step["run"]], cwd=work, capture_output=True,
                              text=True, timeout=120, env={**env, **{key: expand(v) for key, v in
                                                                     step.get("env", {}).items()}})
        codes[step["name"]] = proc.returncode
        assert proc.returncode in (0, 1), f"{step['name']}: {proc.stdout}{proc.stderr}"
        env.update(line.split("=", 1) for line in github_env.read_text().splitlines() if line)
    return codes


def history_commits(remote: Path) -> list[str]:
    return subprocess.run(["git", "-C", str(remote), "log", "--format=%s", "scalebench-history"],
                          check=True, capture_output=True, text=True).stdout.splitlines()


@pytest.mark.slow  # the workflow's steps end to end: dozens of CLI runs
def test_two_main_jobs_and_a_pr_job_against_a_bare_repository(tmp_path):
    remote = tmp_path / "project.git"
    subprocess.run(["git", "init", "--quiet", "--bare", str(remote)], check=True)
    for k in (1, 2):
        codes = run_job("main", tmp_path, remote, k)
        assert codes == {"Sweep": 0, "Let git reach the history branch": 0,
                         "Record the history": 0, "Change points in the history": 0,
                         "Trend figures and history.html": 0, "Export the history": 0}, codes
    commits = history_commits(remote)
    assert len(commits) == 2 and "sweep-2" in commits[0] and f"{2:040x}" in commits[0]
    main2 = tmp_path / "main-2" / "results" / "ci"
    assert (main2 / "history" / "history.html").is_file()
    data = json.loads((main2 / "export" / "gab" / "data.js").read_text()
                      .split("=", 1)[1])
    (suite,) = data["entries"].values()
    assert [e["commit"]["id"] for e in suite] == [f"{1:040x}", f"{2:040x}"]

    codes = run_job("pr", tmp_path, remote, 3, slower=0.8)
    assert codes == {"Sweep": 0, "Let git reach the history branch": 0,
                     "Gate against main's last sweeps": 1}, codes
    out = tmp_path / "pr-3" / "results" / "ci"
    comment = (out / "comment.md").read_text()
    assert comment.splitlines()[0] == gate.MARKER
    gate_md = (out / "gate.md").read_text()
    assert f"{1:040x}"[:7] in gate_md and f"{2:040x}"[:7] in gate_md  # the commits pooled
    assert history_commits(remote) == commits  # a PR job never writes the history
