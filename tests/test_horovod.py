"""Horovod through real horovodrun (gloo, CPU); command lines; missing Horovod is skipped."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from scalebench.frameworks.horovod import install, launcher
from scalebench.hardware.devices import DeviceInfo
from scalebench.spec import config
from scalebench.tasks import train
from tests.conftest import TINY, cli_env, flags, needs_horovod, read_records
from tests.test_breakdown import check_real_breakdown


def horovod_spec(**values):
    sweep = config.build_spec({"frameworks": "horovod", "models": "vgg16", "image_size": 32,
                               "workers": "2", **values})
    return train.plan(sweep, DeviceInfo("cpu", "gloo", 0, 2))[0]


def test_command_line_defaults_to_local_gloo(tmp_path):
    cmd = launcher.horovodrun_command(horovod_spec(), tmp_path)
    assert cmd[1:7] == ["-np", "2", "--gloo", "-H", "localhost:2", sys.executable]
    assert cmd[-3:] == ["-m", "scalebench.frameworks.horovod.worker", str(tmp_path)]


def test_command_line_carries_knobs_and_hosts(tmp_path):
    spec = horovod_spec(horovod={"hosts": "h1:4,h2:4", "fusion_threshold_mb": 32,
                                 "cycle_time_ms": 2.5, "timeline": True, "fp16_allreduce": True})
    cmd = launcher.horovodrun_command(spec, tmp_path)
    joined = " ".join(cmd)
    assert "-H h1:4,h2:4" in joined
    assert "--fusion-threshold-mb 32 --cycle-time-ms 2.5" in joined
    assert f"--timeline-filename {tmp_path / 'timeline.json'}" in joined
    assert spec.launch.options.fp16_allreduce is True  # applied by the worker (hvd.Compression.fp16)


def test_the_knob_variables_the_launcher_sets_are_the_ones_the_worker_reads_back(
        tmp_path, monkeypatch):
    from scalebench.frameworks.horovod.worker import HorovodComm

    settings = {"fusion_threshold_mb": 32.0, "cycle_time_ms": 2.5, "cache_capacity": 0,
                "hierarchical_allreduce": True}
    env = launcher.knob_env(horovod_spec(horovod=settings).launch.options, tmp_path)
    assert env == {"HOROVOD_FUSION_THRESHOLD": str(32 * 2**20), "HOROVOD_CYCLE_TIME": "2.5",
                   "HOROVOD_CACHE_CAPACITY": "0", "HOROVOD_HIERARCHICAL_ALLREDUCE": "1"}
    assert launcher.knob_env(horovod_spec().launch.options, tmp_path) == {}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    seen = HorovodComm.read_back(None, None)  # reads the environment only, as hvd.init() did
    assert {k: seen[k] for k in settings} == settings


def test_hostfile_and_planned_nodes(tmp_path):
    hostfile = tmp_path / "hosts"
    hostfile.write_text("# cluster\nnode-a slots=4\nnode-b slots=4\n")
    spec = horovod_spec(workers="2,8", horovod={"hostfile": str(hostfile)})
    assert "--hostfile" in launcher.horovodrun_command(spec, tmp_path)
    assert launcher.slots({"hostfile": str(hostfile)}) == [("node-a", 4), ("node-b", 4)]
    assert launcher.hosts_used([("a", 4), ("b", 4)], 4) == 1
    assert launcher.hosts_used([("a", 4), ("b", 4)], 5) == 2


def sweep(out: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    # no breakdown windows and no report: these tests do not read them (the windows are a third
    # of a 2-worker run's steps; the shared sweep writes and reads a report)
    cmd = [sys.executable, "-m", "scalebench", "sweep", "--out", str(out), "--quiet",
           "--no-breakdown", "--no-report", *flags(TINY)]
    return subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=1200,
                          env=env or cli_env())


@pytest.mark.slow
@needs_horovod
def test_all_models_one_and_two_workers_with_identical_replicas(horovod_sweep):
    # grouped (the default): each model rebuilt and broadcast again inside one horovodrun
    # (the session's shared Horovod sweep, tests/conftest.py)
    assert horovod_sweep.returncode == 0, horovod_sweep.stderr
    records = horovod_sweep.records()
    assert [(r["model"], r["world_size"], r["status"]) for r in records] == [
        (m, w, "ok") for w in (1, 2) for m in ("resnet101", "inception_v3", "vgg16")]
    assert {r["launch"] for r in records} == {"grouped"}
    for r in records:
        assert r["framework"] == "horovod" and r["nodes"] == 1
        assert r["threads_measured"] == [r["threads_per_worker"]] * r["world_size"]
        # broadcast at start + averaged gradients: every rank ends with the same weights
        sums = r["param_checksums"]
        assert len(sums) == r["world_size"] and max(sums) - min(sums) <= 1e-6 * abs(sums[0])
        assert r["warnings"] == []
    check_real_breakdown(records)  # its structure (the timing: benchmarks/breakdown_accuracy.py)


@pytest.mark.slow
@needs_horovod
def test_two_local_hosts_fp16_compression_and_timeline(tmp_path):
    proc = sweep(tmp_path, "--frameworks", "horovod", "--models", "inception_v3", "--workers", "2",
                 "--hosts", "localhost:1,127.0.0.1:1", "--fp16-allreduce", "--timeline",
                 "--fusion-threshold-mb", "16")
    assert proc.returncode == 0, proc.stderr
    [r] = read_records(tmp_path / "results.jsonl")
    assert r["status"] == "ok", r.get("error")
    assert r["nodes"] == 2  # horovodrun treated the two addresses as two hosts
    assert [t["cross_size"] for t in r["topology"]] == [2, 2]
    assert r["options"]["fp16_allreduce"] is True and r["options"]["fusion_threshold_mb"] == 16
    timeline = Path(r["artifacts"]["timeline"])
    assert timeline.is_file() and timeline.stat().st_size > 0


@pytest.mark.slow
def test_missing_horovod_is_skipped_and_ddp_still_runs(tmp_path):
    stub = tmp_path / "stub" / "horovod"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text("raise ImportError('horovod removed for this test')\n")
    env = cli_env()
    env["PYTHONPATH"] = f"{stub.parent}:{env.get('PYTHONPATH', '')}"
    proc = sweep(tmp_path / "out", "--frameworks", "horovod,ddp", "--models", "inception_v3",
                 "--workers", "1", env=env)
    assert proc.returncode == 0, proc.stderr
    skipped, ok = read_records(tmp_path / "out" / "results.jsonl")
    assert skipped["framework"] == "horovod" and skipped["status"] == "skipped"
    assert "horovod removed for this test" in skipped["error"]
    assert "make horovod" in skipped["error"]
    assert ok["framework"] == "ddp" and ok["status"] == "ok"
    listing = subprocess.run([sys.executable, "-m", "scalebench", "list"], capture_output=True,
                             text=True, env=env, timeout=300)
    assert "horovod  unavailable: horovod.torch does not load" in listing.stdout


def test_horovod_on_cuda_needs_nccl(monkeypatch):
    monkeypatch.setattr(install, "probe", lambda: (True, "horovod 0.28.1",
                                                   {"nccl": False, "gloo": True}))
    assert "built without NCCL" in install.device_problem("cuda")
    assert "--device cpu" in install.device_problem("cuda")
    assert install.device_problem("cpu") is None
    monkeypatch.setattr(install, "probe", lambda: (True, "horovod 0.28.1",
                                                   {"nccl": True, "gloo": True}))
    assert install.device_problem("cuda") is None


@needs_horovod
def test_build_flags_are_recorded_in_the_environment():
    flags = launcher.Horovod().environment()["horovod_build"]
    assert flags["gloo"] is True and set(flags) == set(install.BUILD_FLAGS)
