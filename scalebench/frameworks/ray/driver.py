"""Ray Train driver of one run:
python -m scalebench.frameworks.ray.driver RUN_DIR --address ADDR [--expect-nodes N].

Started by the adapter through process.run_isolated (own session, timeout, whole-tree kill), so
a hung fit never hangs the sweep: killing this process ends its Ray job, and Ray then stops the
job's controller and training workers. Its console (Ray's included) goes to RUN_DIR's logs.
Under Slurm it is a job step, and --expect-nodes makes it wait for the nodes of a cluster that
is still starting.

Files written to RUN_DIR (never stdout):
  ray-driver.json  stage reached and its times (read on timeout)
  result.json      measure.run's result from rank 0, plus fit_call_unix, node_ids, nodes
  ray-error.json   one-line error and the traceback text, when the run fails
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
import traceback
from pathlib import Path

from scalebench.frameworks import worker_io
from scalebench.frameworks.process import RESULT_FILE
from scalebench.frameworks.ray import resources
from scalebench.records import atomic

DRIVER_FILE = "ray-driver.json"
NODES_TIMEOUT = 120.0  # seconds for every node of a cluster being started to join
ERROR_FILE = "ray-error.json"
STAGES = {  # stage -> where a timeout caught the driver
    "starting": "while starting",
    "connecting": "while connecting to the Ray cluster",
    "nodes": "while waiting for the Ray cluster's nodes to join",
    "fit": "during TorchTrainer.fit (worker start-up or training)",
}


def _one_line(text: str) -> str:
    return " ".join(text.split())[:500]


def _died(failure: BaseException) -> bool:
    from scalebench.frameworks.ray.worker import WorkerError

    text = str(failure)
    return not isinstance(failure, WorkerError) and ("died" in text or "dead" in text)


def describe_failure(exc: BaseException) -> tuple[str, str]:
    """(one-line error, traceback text) for whatever fit raised."""
    from ray.train import ControllerError, WorkerGroupError

    from scalebench.frameworks.ray.worker import WorkerError

    if isinstance(exc, WorkerGroupError) and exc.worker_failures:
        # A dead worker process is the cause of its peers' errors; otherwise the lowest rank.
        rank, failure = min(exc.worker_failures.items(),
                            key=lambda item: (not _died(item[1]), item[0]))
        if isinstance(failure, WorkerError):
            return f"rank {rank}: {failure.summary}", failure.traceback_text
        text = str(failure)
        first = text.strip().splitlines()[0] if text.strip() else type(failure).__name__
        if _died(failure):
            line = f"rank {rank}: Ray worker process died ({type(failure).__name__}: {first})"
        else:
            line = f"rank {rank}: {type(failure).__name__}: {first}"
        return _one_line(line), text
    if isinstance(exc, ControllerError):
        cause = exc.controller_failure
        return (_one_line(f"Ray Train controller failed: {type(cause).__name__}: {cause}"),
                "".join(traceback.format_exception(exc)))
    return (_one_line(f"{type(exc).__name__}: {exc}"), "".join(traceback.format_exception(exc)))


def alive_nodes() -> list[dict[str, float]]:
    import ray

    return [dict(node["Resources"]) for node in ray.nodes() if node.get("Alive")]


def make_trainer(job, run_dir: Path, address: str):
    from ray.train import FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    from scalebench.frameworks.ray.worker import train_loop

    launch = job.launch
    threads = str(launch.threads_per_worker)
    env_vars = {
        # Ray would set OMP_NUM_THREADS to the worker's CPU count; the shared policy wins.
        "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads,
        "SCALEBENCH_RUN_ID": job.run_id,  # names the run's worker processes (ps, tests)
    }
    # Ray Client drivers run remotely: a local path would name a folder on the head node.
    storage = None if address.startswith("ray://") else str(run_dir.resolve() / "ray_train")
    return TorchTrainer(
        train_loop,
        train_loop_config={"job": job.to_json()},
        scaling_config=ScalingConfig(
            num_workers=launch.world_size,
            use_gpu=launch.device == "cuda",
            resources_per_worker=resources.per_worker(launch),
            placement_strategy=launch.options.placement,
        ),
        torch_config=TorchConfig(backend=launch.backend, timeout_s=max(60, int(launch.timeout))),
        run_config=RunConfig(
            name=job.run_id,
            storage_path=storage,
            failure_config=FailureConfig(max_failures=0),  # a failed run is a record, not a retry
            worker_runtime_env={"env_vars": env_vars},
        ),
    )


def wait_for_nodes(expect: int, timeout: float) -> int:
    """How many nodes are alive once `expect` are (or the timeout has passed)."""
    deadline = time.monotonic() + timeout
    while True:
        alive = len(alive_nodes())
        if alive >= expect or time.monotonic() > deadline:
            return alive
        time.sleep(0.5)


def run(run_dir: Path, address: str, expect_nodes: int = 0) -> int:
    stages: dict = {"stage": "starting", "driver_start_unix": time.time()}
    atomic.write_json(run_dir / DRIVER_FILE, stages)
    job = worker_io.read_job(run_dir)
    # Our timeout governs; Ray's own 60 s worker start-up limit is too short on a loaded machine.
    os.environ.setdefault("RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S", str(max(60, int(job.launch.timeout))))
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

    import ray

    stages.update(stage="connecting")
    atomic.write_json(run_dir / DRIVER_FILE, stages)
    try:
        ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
    except Exception as exc:  # noqa: BLE001 - one line for the record
        atomic.write_json(run_dir / ERROR_FILE, {
            "error": _one_line(f"cannot connect to Ray at {address}: {type(exc).__name__}: {exc}"),
            "traceback": "".join(traceback.format_exception(exc))})
        return 1
    stages.update(connected_unix=time.time())
    if expect_nodes > 1:  # a cluster whose nodes are still joining (Ray on Slurm)
        stages.update(stage="nodes")
        atomic.write_json(run_dir / DRIVER_FILE, stages)
        alive = wait_for_nodes(expect_nodes, NODES_TIMEOUT)
        if alive < expect_nodes:
            atomic.write_json(run_dir / ERROR_FILE, {
                "error": f"only {alive} of the Ray cluster's {expect_nodes} nodes joined within "
                         f"{NODES_TIMEOUT:g} s", "traceback": ""})
            return 1
        stages.update(nodes_unix=time.time())
    request = resources.per_worker(job.launch)
    problem = resources.check_fits(alive_nodes(), job.launch.world_size, request,
                                   job.launch.options.placement)
    if problem:
        atomic.write_json(run_dir / ERROR_FILE, {"error": problem, "traceback": ""})
        return 2

    trainer = make_trainer(job, run_dir, address)
    stages.update(stage="fit", fit_call_unix=time.time())
    atomic.write_json(run_dir / DRIVER_FILE, stages)
    try:
        result = trainer.fit()
    except Exception as exc:  # noqa: BLE001 - TrainingFailedError and anything under it
        error, text = describe_failure(exc)
        atomic.write_json(run_dir / ERROR_FILE, {"error": error, "traceback": text})
        return 1
    stages.update(stage="done", fit_return_unix=time.time())
    atomic.write_json(run_dir / DRIVER_FILE, stages)
    value = result.return_value
    if not isinstance(value, dict) or not isinstance(value.get("result"), dict):
        atomic.write_json(run_dir / ERROR_FILE, {
            "error": f"Ray Train returned no result from rank 0 (return_value={value!r:.200})",
            "traceback": ""})
        return 1
    node_ids = value.get("node_ids") or []
    out = dict(value["result"])
    out.update(fit_call_unix=stages["fit_call_unix"], driver_start_unix=stages["driver_start_unix"],
               node_ids=node_ids, nodes=len(set(node_ids)) or None)
    atomic.write_json(run_dir / RESULT_FILE, out)
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="scalebench.frameworks.ray.driver")
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--address", required=True)
    parser.add_argument("--expect-nodes", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        return run(args.run_dir, args.address, args.expect_nodes)
    except Exception as exc:  # noqa: BLE001 - the parent records it
        atomic.write_json(args.run_dir / ERROR_FILE, {"error": _one_line(f"{type(exc).__name__}: {exc}"),
                                           "traceback": traceback.format_exc()})
        traceback.print_exc()
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
