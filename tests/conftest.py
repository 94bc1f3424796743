"""Shared test helpers. Tests that start real launchers are marked slow."""

from __future__ import annotations

import json
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# Smallest real runs: enough steps for two timed windows, inputs every model accepts. One
# thread per worker: these runs share the 2 cores with other tests, and a worker with two
# threads beside a busy process stalls at every parallel region (its spinning threads then
# take CPU from the other tests too: one-worker runs took 4-5 x their quiet time).
TINY = {"batch_size": 2, "image_size": 75, "warmup": 1, "iters": 1, "trials": 2, "timeout": 300,
        "threads_per_worker": 1}


def pytest_configure(config):
    """One cache folder for the whole test session (FLOPs counts: scalebench.models.flops), shared by
    the xdist workers and every process a test starts, never the user's ~/.cache: the first
    sweep counts, the rest read. The controller makes it before the workers start, and they
    inherit it."""
    # A suite started in the background of a non-interactive shell inherits SIGINT ignored,
    # and so would every sweep it starts: the Ctrl-C tests' sweeps would never see theirs.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    # A tenth of a second of GEMMs for each sweep's peak (the default, 0.8 s on 2 cores, cost
    # a minute over the suite's sweeps); tests of the probe pass their own budget.
    os.environ.setdefault("SCALEBENCH_PEAK_SECONDS", "0.1")
    if not os.environ.get("SCALEBENCH_TEST_CACHE"):
        import tempfile

        folder = tempfile.mkdtemp(prefix="scalebench-test-cache-")
        os.environ["SCALEBENCH_TEST_CACHE"] = os.environ["SCALEBENCH_CACHE"] = folder
        config._scalebench_cache = folder


def pytest_collection_modifyitems(session, config, items):
    """The longest files first (by their parallel budget, tests/budgets.toml), each file's tests
    in their own order: xdist hands out whole files (--dist loadfile) in this order, and a long
    file handed out last ran on alone while the other workers had nothing left."""
    import tomllib

    try:
        budgets = tomllib.loads((REPO / "tests" / "budgets.toml").read_text())["parallel"]
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return
    weight = {}
    for item in items:
        name = f"tests/{Path(str(item.fspath)).name}"
        weight.setdefault(name, -float(budgets.get(name, 0.0)))
    order = {name: rank for rank, name in enumerate(sorted(weight, key=weight.get))}
    items.sort(key=lambda item: order[f"tests/{Path(str(item.fspath)).name}"])


def _cpu_now() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    item._scalebench_cpu0 = _cpu_now()
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Each test's CPU seconds (set-up to tear-down: this process and every child it reaped,
    with theirs) as the JUnit property cpu_seconds, which scripts/suite_budget.py sums per file.
    Unlike a duration, it hardly moves with what else shares the cores. Daemons a test does not
    reap (Slurm's, a Ray cluster another process started) are not in it."""
    if call.when == "teardown" and hasattr(item, "_scalebench_cpu0"):
        item.user_properties.append(
            ("cpu_seconds", f"{_cpu_now() - item._scalebench_cpu0:.2f}"))
    yield


def pytest_unconfigure(config):
    folder = getattr(config, "_scalebench_cache", None)
    if folder:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)


def read_records(path: Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def flags(values: dict) -> list[str]:
    """Command-line flags for setting values: {"batch_size": 2} -> ["--batch-size", "2"]."""
    return [part for key, value in values.items()
            for part in (f"--{key.replace('_', '-')}", str(value))]


def cli_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def sweep_here(cmd: list[str]) -> int:
    """Run a `python -m scalebench sweep ...` command line in this process (its exit code):
    the test process has torch and the harness imported already, so a sweep costs its own
    launches (real torchrun, Ray, ... processes, as from the command line) and not a second
    start-up. For tests that run many sweeps and read only their files."""
    from scalebench import cli

    assert cmd[1:4] == ["-m", "scalebench", "sweep"], cmd
    return cli.main(cmd[3:])


@pytest.fixture(autouse=True)
def _environment_restored():
    """Tests that run worker code in this process (measure.run sets OMP_NUM_THREADS) must not
    leak into later tests: every child process inherits this environment."""
    saved = dict(os.environ)
    yield
    if dict(os.environ) != saved:
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture
def scalebench_cmd() -> list[str]:
    return [sys.executable, "-m", "scalebench"]


# ---------------------------------------------------------------- report / compare / history
# Real records from a committed reference sweep (results/reference/README.md says how they were
# made); tests read these instead of running a fresh sweep, and derive modified copies in Python.
REFERENCE = REPO / "results" / "reference" / "results.jsonl"


def reference_records(kind: str | None = None, **match) -> list[dict]:
    """The reference set's records (a fresh copy each call), optionally only those of one kind
    whose fields equal `match` (options matched on their step options)."""
    out = []
    for r in read_records(REFERENCE):
        if kind is not None and r["kind"] != kind:
            continue
        if all(r.get(k) == v for k, v in match.items()):
            out.append(r)
    return out


def first_trials(record: dict, n: int) -> dict:
    """A copy of a train record cut to its first n trials, every derived field recomputed as
    the sweep computes it (tasks.train); the result is validated."""
    import copy

    from scalebench.analysis import stats
    from scalebench.records import results

    r = copy.deepcopy(record)
    windows = [rank[:n] for rank in r["window_seconds"]]
    trial = stats.trial_throughputs(windows, r["global_batch"] * r["iters"])
    s = stats.summarize(trial)
    r.update(trials=n, window_seconds=windows, trial_images_per_sec=trial,
             images_per_sec=s.mean, images_per_sec_median=s.median, images_per_sec_std=s.std,
             images_per_sec_ci95=[s.ci_low, s.ci_high],
             per_worker_images_per_sec=s.mean / r["world_size"],
             per_rank_images_per_sec=stats.per_rank_throughputs(
                 windows, r["batch_size"] * r["iters"]))
    results.validate(r)
    return r


@pytest.fixture(scope="session")
def tiny_sweep(tmp_path_factory) -> Path:
    """results.jsonl with the reference set's 1- and 2-worker DDP runs (inception_v3, 75 px,
    batch 2), cut to their first 3 trials, and the report.html `scalebench report` writes for
    them; every run in it is ok."""
    import subprocess

    out = tmp_path_factory.mktemp("tiny-sweep")
    records = [first_trials(r, 3) for r in reference_records("train", framework="ddp")]
    assert [(r["world_size"], r["status"]) for r in records] == [(1, "ok"), (2, "ok")]
    path = write_records(out / "results.jsonl", records)
    # Only the HTML report test opens report.html; a failing report shows there (file missing,
    # report-error.txt says why), not in every test that reads the records.
    proc = subprocess.run([sys.executable, "-m", "scalebench", "report", str(out)], cwd=REPO,
                          env=cli_env(), capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        (out / "report-error.txt").write_text(proc.stdout + proc.stderr)
    return path


@dataclass(frozen=True)
class Sweep:
    """A finished real sweep: its output folder and what it printed."""

    out: Path
    stdout: str
    stderr: str
    returncode: int

    def records(self, kind: str | None = "train") -> list[dict]:
        return [r for r in read_records(self.out / "results.jsonl")
                if kind is None or r["kind"] == kind]


# The shared real sweeps: three models at 1 and 2 workers, the default grouped launch (one
# launcher per worker count), breakdown windows on, two trials (the breakdown's no-sync windows
# are the first trials, at most three: two show the same structure). One step per window:
# VGG-16 on its one synthetic batch diverges after about 5 steps at these sizes (loss 4e4 after
# 5, NaN after 7), and a diverged run has no weights to compare across ranks.
# They run beside the other tests, one thread per worker (TINY's reason); the breakdown's
# timing claims, which need the machine alone, are benchmarks/breakdown_accuracy.py's, and the
# default thread policy in a real run is checked by the GPU check's serial test.
SHARED = {**TINY, "trials": 2}
SHARED_MODELS = "resnet101,inception_v3,vgg16"


def shared_sweep_cmd(framework: str, out: Path, *extra: str) -> list[str]:
    """The command line of a framework's shared sweep; `extra` adds to it (or, with --models
    and --launch isolated, makes its isolated twin)."""
    cmd = [sys.executable, "-m", "scalebench", "sweep", "--frameworks", framework, "--out",
           str(out), "--quiet", "--models", SHARED_MODELS, "--workers", "1,2", *flags(SHARED)]
    return cmd + list(extra)


def _shared_sweep(tmp_path_factory, framework: str, *extra: str) -> Sweep:
    import subprocess

    out = tmp_path_factory.mktemp(f"{framework}-sweep") / "sweep"
    proc = subprocess.run(shared_sweep_cmd(framework, out, *extra), capture_output=True,
                          text=True, timeout=1200, env=cli_env())
    return Sweep(out, proc.stdout, proc.stderr, proc.returncode)


@pytest.fixture(scope="session")
def ddp_sweep(tmp_path_factory) -> Sweep:
    """One real DDP sweep shared by every test that only reads what it wrote (all models, the
    breakdown report), with --with-allreduce, so that its report also has the link share and
    the extrapolation check."""
    return _shared_sweep(tmp_path_factory, "ddp", "--with-allreduce")


@pytest.fixture(scope="session")
def horovod_installed() -> None:
    """Skips the test unless a usable Horovod is installed. A fixture, not a skipif: the check
    imports horovod.torch in a child (about 2 s of CPU), which a skipif condition would pay in
    every pytest process at collection, also where no Horovod test runs."""
    from scalebench.frameworks.horovod import install

    usable, reason = install.check_installation()
    if not usable:
        pytest.skip(f"Horovod unavailable: {reason}")


needs_horovod = pytest.mark.usefixtures("horovod_installed")


@pytest.fixture(scope="session")
def horovod_sweep(tmp_path_factory) -> Sweep:
    """One real Horovod sweep, the all-models test's (its breakdown's structure checked too)."""
    return _shared_sweep(tmp_path_factory, "horovod")


def variant(records: list[dict], factor: float = 1.0, env: dict | None = None,
            seconds_later: int = 0) -> list[dict]:
    """Copies of records with every trial's throughput x factor (and everything derived from it
    kept consistent), env fields replaced, timestamps moved; each copy is validated."""
    import copy
    from datetime import datetime, timedelta

    from scalebench.records import results

    out = []
    for record in records:
        r = copy.deepcopy(record)
        if r.get("status") == "ok" and factor != 1.0:
            for name in ("images_per_sec", "images_per_sec_median", "images_per_sec_std",
                         "per_worker_images_per_sec"):
                if r.get(name) is not None:
                    r[name] *= factor
            r["trial_images_per_sec"] = [v * factor for v in r["trial_images_per_sec"]]
            r["per_rank_images_per_sec"] = [v * factor for v in r["per_rank_images_per_sec"]]
            r["images_per_sec_ci95"] = [v * factor for v in r["images_per_sec_ci95"]]
            r["window_seconds"] = [[s / factor for s in rank] for rank in r["window_seconds"]]
        if env:
            r["env"] = {**r["env"], **env}
        if seconds_later:
            when = datetime.strptime(r["timestamp"], "%Y-%m-%dT%H:%M:%S%z")
            r["timestamp"] = (when + timedelta(seconds=seconds_later)).strftime("%Y-%m-%dT%H:%M:%S%z")
        results.validate(r)
        out.append(r)
    return out


def write_records(path: Path, records: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


FAKE_ENV = {"python": "3.11.7", "torch": "2.14.1", "torchvision": "0.29.1", "horovod": None,
            "ray": None, "git_commit": "abc123", "hostname": "node-a", "cpu_model": "Test CPU",
            "cpu_cores": 2, "cuda": None, "cudnn": None, "nccl": None, "accelerator_model": None,
            "device_kind": "cpu", "backend": "gloo"}


def fake_record(trials=(10.0, 10.1, 9.9), framework: str = "ddp", model: str = "inception_v3",
                world_size: int = 1, status: str = "ok", error: str | None = None,
                env: dict | None = None, timestamp: str = "2026-01-01T00:00:00+0000",
                **fields) -> dict:
    """A valid train record with the given per-trial throughputs (fast tests; no launch)."""
    from scalebench.records import results

    r = {"schema_version": results.SCHEMA_VERSION, "kind": "train", "status": status,
         "timestamp": timestamp, "env": {**FAKE_ENV, **(env or {})},
         "run_id": f"{framework}-{model}-w{world_size}", "framework": framework, "model": model,
         "world_size": world_size, "nodes": 1, "batch_size": 2, "global_batch": 2 * world_size,
         "image_size": 75, "aux_logits": False, "precision": "fp32", "device": "cpu",
         "backend": "gloo", "scaling": "weak", "data": "synthetic", "warmup": 1, "iters": 1,
         "trials": len(trials), "threads_per_worker": 1, "params": 23834568, "options": {},
         "error": error}
    if status == "ok":
        mean = sum(trials) / len(trials)
        r.update(images_per_sec=mean, trial_images_per_sec=list(trials),
                 per_worker_images_per_sec=mean / world_size,
                 per_rank_images_per_sec=[mean / world_size] * world_size,
                 window_seconds=[[2 * world_size / t for t in trials]] * world_size,
                 startup_seconds=1.0, hosts=[r["env"]["hostname"]])
    else:
        r["error"] = error or "it broke"
    r.update(fields)
    results.validate(r)
    return r


def launches(per_launch, order_seed: int = 7, hour: int = 0, **fields) -> list[dict]:
    """One fake_record per launch of one configuration (`--repeats K`): launch k gets the k-th
    trials, repeat k of K, the sweep's order seed, its own run id and a later timestamp."""
    count = len(per_launch)
    framework, model = fields.get("framework", "ddp"), fields.get("model", "inception_v3")
    return [fake_record(tuple(trials), repeat=k, repeats=count, order_seed=order_seed,
                        timestamp=f"2026-01-01T{hour:02d}:{k:02d}:00+0000",
                        run_id=f"{framework}-{model}-w{fields.get('world_size', 1)}-r{k}",
                        **fields)
            for k, trials in enumerate(per_launch, start=1)]
