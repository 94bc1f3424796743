"""Ray Train adapter: real Ray on CPU (gloo), embedded cluster and an existing two-node cluster.

Most real runs share one two-node cluster (ray.cluster_utils.Cluster, one CPU per node) that
the sweeps join with --ray-address; the embedded default is exercised end to end through the
CLI. Fast tests cover the resource check, availability and the skipped record.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from scalebench.frameworks.ray import resources as ray_resources
from scalebench.hardware.envinfo import cpu_cores
from scalebench.records import results
from scalebench.running.progress import Progress
from scalebench.running.sweep import run_sweep
from scalebench.spec import config
from tests.conftest import REPO, TINY, cli_env, read_records
from tests.test_breakdown import check_real_breakdown

ray = pytest.importorskip("ray")


def sweep_values(out: Path, **overrides) -> dict:
    """A tiny Ray sweep's values, without the breakdown's no-sync windows and the report unless
    asked (breakdown=True, report=True): the fault tests read neither."""
    values = {"frameworks": "ray", "models": "resnet101", "workers": "1", "device": "cpu",
              "out": str(out), "launch": "isolated", **TINY, "breakdown": False, "report": False}
    ray_options = overrides.pop("ray", {})
    values.update(overrides)
    values["ray"] = ray_options
    return values


def sweep(out: Path, **overrides) -> list[dict]:
    spec = config.build_spec(sweep_values(out, **overrides))
    run_sweep(spec, Progress(0, stream=io.StringIO(), live=False))
    return read_records(out / results.RESULTS_FILE)


def ray_train_workers(run_id: str | None = None, title: str = "ray::RayTrainWorker",
                      under: int | None = None) -> list[psutil.Process]:
    """Ray Train worker processes under this test process (the shared cluster's raylets), or
    under process `under` (an embedded head); with `title`, every Ray worker whose title
    starts with it."""
    found = []
    for proc in psutil.Process(under).children(recursive=True):
        try:
            if not proc.cmdline() or not proc.cmdline()[0].startswith(title):
                continue
            if run_id is None or proc.environ().get("SCALEBENCH_RUN_ID") == run_id:
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def gone_within(procs: list[psutil.Process], seconds: float) -> bool:
    _, alive = psutil.wait_procs(procs, timeout=seconds)
    return not alive


@pytest.fixture(scope="module")
def two_nodes():
    """A two-node Ray cluster on this machine, one CPU per node; yields its address."""
    from ray.cluster_utils import Cluster

    saved = {k: os.environ.get(k) for k in ("RAY_USAGE_STATS_ENABLED", "RAY_worker_niceness")}
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    # as the harness's own clusters run them (frameworks/ray/cluster.py): at Ray's default
    # niceness, 15, a job's workers beside the other test processes took over a minute to start
    os.environ["RAY_worker_niceness"] = "0"
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    try:
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        yield cluster.address
    finally:
        cluster.shutdown()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


# ---------------------------------------------------------------- fast: no Ray started

def test_resource_check_messages():
    one_cpu = {"CPU": 1.0}
    machine = [{"CPU": 2.0, "GPU": 0.0}]
    assert ray_resources.check_fits(machine, 2, one_cpu) is None
    assert ray_resources.check_fits(machine, 4, one_cpu) == \
        "4 workers x 1 CPU requested, cluster has 2 CPUs"
    assert ray_resources.check_fits(machine, 2, {"CPU": 1.0, "GPU": 1.0}) == \
        "2 workers x 1 CPU + 1 GPU requested, cluster has 0 GPUs"
    two_nodes = [{"CPU": 1.0}, {"CPU": 1.0}]
    assert ray_resources.check_fits(two_nodes, 2, one_cpu, "SPREAD") is None
    assert ray_resources.check_fits(two_nodes, 2, one_cpu, "STRICT_PACK") == \
        "2 workers x 1 CPU requested on one node (STRICT_PACK), the largest node holds 1"
    assert ray_resources.check_fits(machine, 2, one_cpu, "STRICT_SPREAD") == \
        "2 workers x 1 CPU requested on separate nodes (STRICT_SPREAD), cluster has 1 such nodes"
    halves = [{"CPU": 1.0, "GPU": 0.5}, {"CPU": 1.0, "GPU": 0.5}]
    assert ray_resources.check_fits(halves, 1, {"CPU": 1.0, "GPU": 1.0}).endswith(
        "the cluster's 2 nodes hold only 0 (no node has room for a whole worker)")
    assert ray_resources.check_fits(machine, 1, one_cpu) is None


def test_object_store_is_small_and_fits_shm():
    gib = ray_resources.GIB
    assert ray_resources.object_store_bytes(16 * gib, 8 * gib) == int(0.8 * gib)
    assert ray_resources.object_store_bytes(1024 * gib, None) == 2 * gib
    assert ray_resources.object_store_bytes(1 * gib, 64 * ray_resources.MIB) == 100 * ray_resources.MIB


def test_available_names_the_version():
    from scalebench.frameworks import ray as ray_adapter

    ok, reason = ray_adapter.probe()
    assert ok and reason.startswith(f"ray {ray.__version__}")


def test_impossible_request_on_embedded_cluster_fails_before_starting_ray(tmp_path):
    workers = 2 * cpu_cores()
    start = time.monotonic()
    records = sweep(tmp_path / "out", workers=str(workers))
    assert time.monotonic() - start < 30  # a check before anything starts
    [record] = records
    assert record["status"] == "failed"
    assert record["error"] == f"{workers} workers x 1 CPU requested, cluster has {cpu_cores()} CPUs"
    log = (tmp_path / "out" / "ray.log")
    assert not log.exists() or "starting embedded Ray" not in log.read_text()


def test_embedded_cluster_that_cannot_start_gives_one_line(tmp_path):
    from scalebench.frameworks.ray import EmbeddedCluster

    cluster = EmbeddedCluster(tmp_path, num_cpus=-1, num_gpus=0)  # Ray refuses -1 CPUs
    with pytest.raises(RuntimeError, match=r"did not start \(exit code 1\): ValueError: "):
        cluster.ensure_started()
    assert "embedded Ray stopped" in (tmp_path / "ray.log").read_text()


def test_unreachable_cluster_fails_fast_in_one_line(tmp_path):
    start = time.monotonic()
    [record] = sweep(tmp_path / "out", ray={"address": "127.0.0.1:1"})
    assert time.monotonic() - start < 30
    assert record["status"] == "failed"
    assert record["error"].startswith("cannot reach the Ray cluster at 127.0.0.1:1 (")
    assert "\n" not in record["error"]


@pytest.mark.slow  # a real sweep command
def test_ray_absent_gives_skipped_with_the_reason(tmp_path):
    stub = tmp_path / "stub" / "ray"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'ray'\", name='ray')\n")
    env = cli_env()
    env["PYTHONPATH"] = os.pathsep.join([str(stub.parent), str(REPO)])
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "scalebench", "sweep", "--frameworks", "ray", "--models",
         "resnet101", "--workers", "1,2", "--batch-size", "2", "--image-size", "32", "--out",
         str(out), "--quiet"], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    records = read_records(out / results.RESULTS_FILE)
    assert [r["status"] for r in records] == ["skipped", "skipped"]
    assert records[0]["error"] == "ray is not installed; run `make setup` (installs ray[train]==2.60.0)"
    assert "SKIPPED - ray is not installed" in proc.stdout


# ---------------------------------------------------------------- slow: real Ray

@pytest.mark.slow
def test_timeout_kills_the_driver_and_ray_stops_its_workers(tmp_path, two_nodes):
    # one training worker: what is asserted (the driver killed, Ray stopping the job's
    # workers) is the same for two, and a Ray worker costs about 6 CPU-s more on shared cores
    run_id = "001-ray-resnet101-w1-fp32"
    seen: list[psutil.Process] = []
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            seen.extend(p for p in ray_train_workers(run_id) if p not in seen)
            time.sleep(0.3)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        # a second of input wait per batch: the run waits for its timeout asleep. 75 s: beside
        # the other tests, a 40 s timeout once came before the worker group had started, and a
        # 60 s one when Ray's workers still ran at niceness 15.
        [record] = sweep(tmp_path / "out", workers="1", iters=1000, timeout=75,
                         inject_input_delay=1, ray={"address": two_nodes})
    finally:
        stop.set()
        watcher.join()
    assert record["status"] == "timeout", record["error"]
    assert "no result within the 75 s timeout" in record["error"]
    assert "Ray driver killed during TorchTrainer.fit" in record["error"]
    # Killing the driver ends its Ray job: Ray stops the job's training workers.
    assert seen, "the run timed out before its training workers started"
    assert gone_within(seen, 60), [p.pid for p in seen]


@pytest.mark.slow
def test_all_models_one_and_two_workers(tmp_path, two_nodes):
    # grouped: one TorchTrainer fit per worker count measures the three models
    records = sweep(tmp_path / "out", models="resnet101,inception_v3,vgg16", workers="1,2",
                    ray={"address": two_nodes}, launch="grouped", breakdown=True,
                    report=True)  # a report of real Ray records: writing it must not fail
    assert [(r["model"], r["world_size"], r["status"]) for r in records] == [
        (m, w, "ok") for w in (1, 2) for m in ("resnet101", "inception_v3", "vgg16")], \
        [r.get("error") for r in records]
    assert len({r["group_id"] for r in records}) == 2
    for r in records:
        results.validate(r)
        assert r["backend"] == "gloo" and r["framework"] == "ray"
        assert len(r["window_seconds"]) == r["world_size"]
        assert all(len(w) == r["trials"] for w in r["window_seconds"])
        assert r["threads_measured"] == [r["threads_per_worker"]] * r["world_size"]
        # One CPU per node: two workers cannot share a node.
        assert r["nodes"] == r["world_size"]
        # Ray's own node_rank/local_rank group workers by IP address: one machine here.
        assert len({t["node_id"] for t in r["topology"]}) == r["nodes"]
        assert 0 < r["startup_seconds"] < 600
        assert r["options"] == {"address": two_nodes, "placement": "PACK",
                                "bucket_cap_mb": None, "gradient_as_bucket_view": False}
    check_real_breakdown(records)  # its structure (the timing: benchmarks/breakdown_accuracy.py)


@pytest.mark.slow
def test_impossible_request_on_existing_cluster_fails_fast(tmp_path, two_nodes):
    start = time.monotonic()
    [record] = sweep(tmp_path / "out", workers="3", ray={"address": two_nodes})
    assert record["status"] == "failed"
    assert record["error"] == "3 workers x 1 CPU requested, cluster has 2 CPUs"
    assert time.monotonic() - start < 120  # connect and check, no fit


@pytest.mark.slow
def test_worker_killed_mid_run_fails_that_run_and_the_sweep_goes_on_and_spread_is_recorded(
        tmp_path, two_nodes):
    """A worker killed in the first run fails that run; the second runs as usual. Both run
    with placement SPREAD, which the surviving run's record carries with its two nodes."""
    victim = "001-ray-resnet101-w2-fp32"
    killed: list[int] = []
    stop = threading.Event()

    def kill_one_worker_once_training():
        while not stop.is_set() and not killed:
            for proc in ray_train_workers(victim):
                try:  # torchvision is loaded once measure.run builds the model
                    if "torchvision" in Path(f"/proc/{proc.pid}/maps").read_text():
                        time.sleep(1.0)
                        proc.kill()
                        killed.append(proc.pid)
                        break
                except (OSError, psutil.NoSuchProcess):
                    continue
            time.sleep(0.3)

    killer = threading.Thread(target=kill_one_worker_once_training, daemon=True)
    killer.start()
    try:
        records = sweep(tmp_path / "out", models="resnet101,inception_v3", workers="2", iters=4,
                        ray={"address": two_nodes, "placement": "SPREAD"})
    finally:
        stop.set()
        killer.join()
    assert killed, "no training worker of the first run was found to kill"
    assert [r["status"] for r in records] == ["failed", "ok"], [r["error"] for r in records]
    assert records[0]["error"].startswith("rank ")
    assert "Ray worker process died" in records[0]["error"]
    assert records[1]["model"] == "inception_v3"
    spread = records[1]
    assert spread["status"] == "ok" and spread["nodes"] == 2
    assert spread["options"]["placement"] == "SPREAD"
    result = json.loads((tmp_path / "out" / "runs" / "002-ray-inception_v3-w2-fp32"
                         / "result.json").read_text())
    assert len(set(result["node_ids"])) == 2


@pytest.mark.slow
def test_exception_in_a_worker_comes_back_with_its_traceback(tmp_path, two_nodes):
    from PIL import Image

    folder = tmp_path / "images" / "only-class"
    folder.mkdir(parents=True)
    Image.new("RGB", (40, 40)).save(folder / "one.png")  # too few images for batch 2
    [record] = sweep(tmp_path / "out", data=f"imagefolder:{folder.parent}", loader_workers=0,
                     ray={"address": two_nodes})
    assert record["status"] == "failed"
    assert record["error"].startswith("rank 0: ValueError: data: ")
    assert "too few for batch 2" in record["error"]
    assert "imagefolder_batches" in record["stderr_tail"]  # the worker's own traceback


def _session_processes(session_dir: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if any(session_dir in part for part in proc.info["cmdline"] or []):
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


@pytest.mark.slow
def test_embedded_cluster_quiet_terminal_then_ctrl_c_shuts_it_down(tmp_path):
    """CLI, embedded default: one run completes with a clean terminal; Ctrl-C in the next one
    stops the driver and the whole embedded cluster."""
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "scalebench", "sweep", "--frameworks", "ray", "--models",
           "inception_v3,resnet101", "--workers", "2", "--batch-size", "2", "--image-size", "75",
           "--warmup", "1", "--iters", "1", "--trials", "2", "--device", "cpu", "--out", str(out),
           "--launch", "isolated"]
    proc = subprocess.Popen(cmd, cwd=REPO, env=cli_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        second = out / "runs" / "002-ray-resnet101-w2-fp32" / "ray-driver.json"
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and proc.poll() is None:
            if second.is_file() and json.loads(second.read_text() or "{}").get("stage") == "fit":
                break
            time.sleep(0.5)
        assert proc.poll() is None, proc.communicate()
        info = json.loads((out / "ray-head.json").read_text())
        # the same priority as torchrun's and horovodrun's workers, not Ray's default 15
        workers = {}
        for worker in ray_train_workers(title="ray::", under=info["pid"]):
            with contextlib.suppress(psutil.NoSuchProcess):
                workers[worker.pid] = worker.nice()
        assert workers and set(workers.values()) == {0}, workers
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
        stdout, stderr = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, stdout + stderr
    assert stderr == ""  # nothing of Ray's on the terminal
    lines = stdout.splitlines()
    assert lines[0].startswith("[1/2] inception_v3 ray x2 fp32: ") and "images/s" in lines[0]
    assert "interrupted" in stdout
    [record] = read_records(out / results.RESULTS_FILE)
    assert record["status"] == "ok" and record["nodes"] == 1 and record["startup_seconds"] > 0
    log = (out / "ray.log").read_text()
    assert "embedded Ray 2.60.0 up" in log and "embedded Ray stopped" in log
    assert not psutil.pid_exists(info["pid"]) or \
        psutil.Process(info["pid"]).status() == psutil.STATUS_ZOMBIE
    assert gone_within(_session_processes(info["session_dir"]), 30)
