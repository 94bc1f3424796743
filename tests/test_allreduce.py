"""Allreduce microbenchmark: sizes, spec, worker task, records, launch loop, real collectives."""

from __future__ import annotations

import io
import itertools
import subprocess
import sys
from pathlib import Path

import pytest

from scalebench import cli, frameworks, tasks
from scalebench.analysis import aggregate
from scalebench.analysis import scaling_model as sm
from scalebench.frameworks import ddp, worker_io
from scalebench.frameworks.base import Framework, LaunchOutcome
from scalebench.hardware import devices
from scalebench.records import results
from scalebench.running.sweep import run_allreduce
from scalebench.spec import config, units
from scalebench.spec.errors import UserError
from scalebench.spec.launch import Job, LaunchSpec
from scalebench.tasks import allreduce
from scalebench.worker.comm import SingleProcessComm
from tests.conftest import cli_env, read_records

CPU = devices.DeviceInfo("cpu", "gloo", 0, 4)
LAUNCH_FIELDS = ("framework", "world_size", "nodes", "device", "backend", "timeout",
                 "threads_per_worker")


def spec(**overrides) -> Job:
    values = dict(run_id="ar-1", kind="allreduce", framework="ddp", world_size=2, nodes=1,
                  device="cpu", backend="gloo", sizes=(65536, 2**20), dtype="float32", warmup=1,
                  iters=2, trials=2, timeout=60.0, threads_per_worker=1)
    values.update(overrides)
    launch = LaunchSpec(**{k: values.pop(k) for k in LAUNCH_FIELDS}, options=ddp.Options())
    run_id, kind = values.pop("run_id"), values.pop("kind")
    return Job(run_id, kind, launch, allreduce.AllreduceSpec(**values))


# ---------------------------------------------------------------- sizes

@pytest.mark.parametrize("text, expected", [
    ("1M", 2**20), ("64K", 65536), ("1m", 2**20), ("512M", 2**29), ("1G", 2**30),
    ("2MiB", 2**21), ("100MB", 10**8), ("4kB", 4000), ("4096", 4096), ("1.5K", 1536),
])
def test_sizes_are_nccl_tests_binary(text, expected):
    assert units.parse_size(text) == expected


@pytest.mark.parametrize("text", ["0", "1Q", "M", "0.1K", "-1M", "1.5"])
def test_bad_sizes(text):
    with pytest.raises(UserError, match="sizes"):
        units.parse_size(text)


def test_sizes_list_sorted_unique_and_whole_elements():
    assert allreduce.parse_sizes("16M, 1M,1M", "float32") == (2**20, 2**24)
    with pytest.raises(UserError, match="whole number of float32"):
        allreduce.parse_sizes("6", "float32")
    assert allreduce.parse_sizes("6", "float16") == (6,)
    assert units.format_size(2**20) == "1 MiB" and units.format_size(100) == "100 B"


def test_busbw_factor_is_nccl_tests():
    assert [allreduce.busbw_factor(n) for n in (2, 4, 8)] == [1.0, 1.5, 1.75]


# ---------------------------------------------------------------- spec and worker task

def test_spec_round_trips_through_the_worker_dispatch():
    s = spec()
    assert tasks.job_from_json(s.to_json()) == s
    assert worker_io.parse_job(s.to_json()) == s
    assert tasks.KINDS[s.kind] == "scalebench.tasks.allreduce"


@pytest.mark.parametrize("bad", [dict(kind="train"), dict(dtype="int8"), dict(sizes=(6,)),
                                 dict(sizes=()), dict(iters=0)])
def test_spec_rejects_bad_values(bad):
    with pytest.raises(ValueError):
        spec(**bad)


def test_worker_task_windows_with_a_fake_clock():
    ticks = itertools.count()
    out = allreduce.run(spec(world_size=1), SingleProcessComm(), clock=lambda: float(next(ticks)))
    assert [p["size_bytes"] for p in out["points"]] == [65536, 2**20]
    assert out["points"][0]["window_seconds"] == [[1.0, 1.0]]  # one rank, two trials
    assert len(out["hostnames"]) == 1


class NotSumming(SingleProcessComm):
    world_size = 2  # claims two ranks but its allreduce does nothing


def test_worker_task_checks_the_collective_really_sums():
    with pytest.raises(RuntimeError, match="did not sum"):
        allreduce.run(spec(), NotSumming())


# ---------------------------------------------------------------- records

def ok_outcome(s: Job) -> LaunchOutcome:
    # rank 1 is the slower one in trial 0, rank 0 in trial 1
    windows = {65536: [[0.002, 0.004], [0.003, 0.002]], 2**20: [[0.02, 0.04], [0.03, 0.02]]}
    return LaunchOutcome("ok", {
        "points": [{"size_bytes": size, "window_seconds": windows[size]} for size in s.task.sizes],
        "hostnames": ["h", "h"], "device_names": ["cpu", "cpu"], "threads": [1, 1]},
        launch_unix=0.0)


def test_ok_records_use_the_slowest_rank_and_nccl_tests_bandwidths():
    s = spec(world_size=4, sizes=(2**20,))
    outcome = ok_outcome(s)
    outcome.result["points"][0]["window_seconds"] += [[0.01, 0.01]] * 2
    [record] = allreduce.build_records(s, outcome, {"hostname": "h"})
    assert record["kind"] == "allreduce" and record["status"] == "ok"
    assert record["trial_seconds"] == pytest.approx([0.015, 0.02])  # max over ranks / iters
    assert record["trial_algbw_bytes_per_sec"] == pytest.approx([2**20 / 0.015, 2**20 / 0.02])
    assert record["algbw_bytes_per_sec"] == pytest.approx((2**20 / 0.015 + 2**20 / 0.02) / 2)
    assert record["busbw_bytes_per_sec"] == pytest.approx(record["algbw_bytes_per_sec"] * 1.5)
    lo, hi = record["seconds_ci95"]
    assert lo < record["seconds"] < hi


def test_failed_and_skipped_launches_give_one_record_per_size(tmp_path):
    s = spec()
    failed = allreduce.build_records(
        s, LaunchOutcome("failed", None, "rank 1: boom", "tail"), {})
    skipped = allreduce.build_records(s, None, {}, skipped_reason="horovod is not installed")
    assert [r["status"] for r in failed + skipped] == ["failed"] * 2 + ["skipped"] * 2
    assert [r["size_bytes"] for r in skipped] == list(s.task.sizes)
    path = tmp_path / "results.jsonl"
    for record in failed + skipped + allreduce.build_records(s, ok_outcome(s), {}):
        results.append(path, record)
    loaded, problems = results.load([path])
    assert len(loaded) == 6 and not problems
    assert [r["size_bytes"] for r in aggregate.latest_allreduce_points(loaded)] == list(s.task.sizes)


@pytest.mark.parametrize("change, message", [
    (lambda r: r.pop("size_bytes"), "size_bytes"),
    (lambda r: r.update(trial_seconds=[0.1]), "one value per trial"),
    (lambda r: r.update(trial_seconds=[0.1, -1.0]), "non-positive"),
    (lambda r: r.update(busbw_bytes_per_sec="fast"), "busbw_bytes_per_sec"),
])
def test_results_validate_checks_allreduce_records(change, message):
    s = spec(sizes=(65536,))
    [record] = allreduce.build_records(s, ok_outcome(s), {})
    change(record)
    with pytest.raises(results.RecordError, match=message):
        results.validate(record)


def test_measured_points_give_a_link_for_the_model():
    s = spec(sizes=(65536, 2**20))
    records = allreduce.build_records(s, ok_outcome(s), {})
    links = sm.links_from_allreduce(records)
    link = links[("ddp", "cpu", 2, 1)]
    assert link.bandwidth > 0 and link.step_latency >= 0 and "ddp allreduce" in link.source


# ---------------------------------------------------------------- planning and the launch loop

def sweep(**values) -> config.SweepSpec:
    return config.build_spec({"frameworks": "ddp", "workers": "2,4", "warmup": 1, "iters": 2,
                              "trials": 2, **values})


def test_plan_one_spec_per_framework_and_worker_count():
    specs = allreduce.plan(sweep(), (2**20,), "float32", CPU, stamp="t")
    assert [(s.launch.framework, s.launch.world_size, s.launch.threads_per_worker)
            for s in specs] == \
        [("ddp", 2, 2), ("ddp", 4, 1)]
    assert len({s.run_id for s in specs}) == 2
    assert allreduce.plan(sweep(workers=None), (2**20,), "float32", CPU)[0].launch.world_size == 2


def test_plan_rejects_one_worker():
    with pytest.raises(UserError, match="at least 2 workers"):
        allreduce.plan(sweep(workers="1,2"), (2**20,), "float32", CPU)


class FakeFramework(Framework):
    name = "ddp"
    options_type = ddp.Options

    def __init__(self, available=True):
        self.is_available = available
        self.calls: list[str] = []

    def available(self):
        return (True, "fake") if self.is_available else (False, "not installed: pip install it")

    def open_session(self, options, device, out_dir):
        self.calls.append("open")

    def close_session(self):
        self.calls.append("close")

    def launch(self, spec, run_dir):
        self.calls.append(f"launch {spec.launch.world_size}")
        return ok_outcome(spec)


@pytest.mark.parametrize("available", [True, False])
def test_launch_loop_appends_records_and_skips_unavailable(tmp_path, monkeypatch, available):
    fake = FakeFramework(available)
    monkeypatch.setattr(frameworks, "get", lambda name: fake)
    monkeypatch.setattr(devices, "resolve", lambda requested: CPU)
    stream = io.StringIO()
    outcome = run_allreduce(sweep(workers="2", out=str(tmp_path)), (65536, 2**20),
                                      stream=stream)
    records = read_records(tmp_path / "results.jsonl")
    assert len(records) == 2 and [r["size_bytes"] for r in records] == [65536, 2**20]
    if available:
        assert fake.calls == ["open", "launch 2", "close"]
        assert all(r["status"] == "ok" for r in outcome.records)
        assert "busbw" in stream.getvalue()
    else:
        assert fake.calls == []
        assert {r["status"] for r in records} == {"skipped"}
        assert "SKIPPED - not installed" in stream.getvalue()


@pytest.mark.parametrize("args, message", [
    (["--workers", "1"], "workers: an allreduce needs at least 2 workers"),
    (["--sizes", "1Q"], "sizes: cannot read '1Q'"),
    (["--sizes", "6"], "whole number of float32 elements"),
    (["--dtype", "int8"], "dtype: unknown value 'int8'"),
    (["--frameworks", "mpi"], "frameworks: unknown value 'mpi'"),
])
def test_cli_input_errors_exit_2_before_launching(tmp_path, capsys, args, message):
    assert cli.main(["allreduce", "--out", str(tmp_path), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "results.jsonl").exists()


# ---------------------------------------------------------------- real collectives

@pytest.mark.slow
@pytest.mark.parametrize("framework", ["ddp", "horovod", "ray"])
def test_real_allreduce_two_cpu_workers(tmp_path, framework):
    ok, reason = frameworks.get(framework).available()
    if not ok:
        pytest.skip(f"{framework} adapter not available: {reason}")
    out = tmp_path / "ar"
    proc = subprocess.run(
        [sys.executable, "-m", "scalebench", "allreduce", "--frameworks", framework,
         "--workers", "2", "--sizes", "64K,1M", "--warmup", "1", "--iters", "2", "--trials", "2",
         "--device", "cpu", "--timeout", "300", "--out", str(out)],
        capture_output=True, text=True, timeout=600, env=cli_env())
    assert proc.returncode == 0, proc.stderr
    records = read_records(Path(out) / "results.jsonl")
    assert [(r["framework"], r["size_bytes"], r["status"]) for r in records] == \
        [(framework, 65536, "ok"), (framework, 2**20, "ok")], records
    for r in records:
        results.validate(r)
        assert r["world_size"] == 2 and len(r["window_seconds"]) == 2
        assert r["busbw_bytes_per_sec"] == pytest.approx(r["algbw_bytes_per_sec"])  # N = 2
    assert "2 of 2 points ok" in proc.stdout


def test_a_malformed_worker_result_becomes_failed_records(tmp_path, monkeypatch):
    fake = FakeFramework()
    fake.launch = lambda spec, run_dir: LaunchOutcome("ok", {"points": []}, launch_unix=0.0)
    monkeypatch.setattr(frameworks, "get", lambda name: fake)
    monkeypatch.setattr(devices, "resolve", lambda requested: CPU)
    run_allreduce(sweep(workers="2", out=str(tmp_path)), (65536,), stream=io.StringIO())
    [record] = read_records(tmp_path / "results.jsonl")
    assert record["status"] == "failed" and "unreadable worker result" in record["error"]
