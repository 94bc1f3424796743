"""Ray Train (TorchTrainer, the successor of RaySGD): embedded local cluster or an existing one.

Per sweep: without --ray-address, one embedded Ray instance (cluster.py, head.py) started at the first
Ray run, reused by every Ray run, shut down in close_session (also on error or Ctrl-C). With
--ray-address (auto, HOST:PORT, ray://HOST:10001) the runs join that cluster instead.

Per run: the driver (driver.py) runs in its own process through process.run_isolated, like
torchrun for DDP. Its timeout kills the driver; Ray then stops the job's controller and workers.
After a timeout the embedded cluster is also restarted, so nothing hung survives into the next
run. The driver calls TorchTrainer.fit; each worker (worker.py) runs the shared loop.

With --launcher slurm the cluster is Ray on the allocation (cluster.SlurmCluster: one job step
per node) unless --ray-address names another, and each driver is a job step of its own.

Ray's console goes to files: the embedded cluster's to OUT/ray.log, each driver's to its run
folder's stdout.log/stderr.log. Errors come back as one line (ray-error.json).
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from pathlib import Path

from scalebench.frameworks import process
from scalebench.frameworks.base import Framework, LaunchOutcome
from scalebench.frameworks.ray import options as ray_options
from scalebench.frameworks.ray import resources
from scalebench.frameworks.ray.cluster import (
    LOG_FILE,
    EmbeddedCluster,
    SlurmCluster,
    _log,
    probe,
    unreachable,
)
from scalebench.frameworks.ray.driver import DRIVER_FILE, ERROR_FILE, STAGES
from scalebench.hardware.envinfo import cpu_cores
from scalebench.slurm import allocation, steps
from scalebench.spec.launch import Job, LaunchSpec


class RayTrain(Framework):
    name = "ray"
    title = "Ray Train"
    options_type = ray_options.Options
    table = ray_options.TABLE
    flags = ray_options.FLAGS
    step_options = ("placement", "bucket_cap_mb", "gradient_as_bucket_view")
    knobs = ray_options.KNOBS

    def __init__(self):
        self._available: tuple[bool, str] | None = None
        self._address: str | None = None
        self._embedded: EmbeddedCluster | None = None
        self._slurm: SlurmCluster | None = None
        self._out_dir: Path | None = None

    def available(self) -> tuple[bool, str]:
        if self._available is None:
            self._available = probe()
        return self._available

    def open_session(self, options: ray_options.Options, device: str, out_dir: Path) -> None:
        self.close_session()
        self._out_dir = Path(out_dir)
        self._address = options.address
        if self._address is None:
            self._embedded = EmbeddedCluster(self._out_dir, cpu_cores(), _gpu_count(device))
        else:
            _log(self._out_dir / LOG_FILE, f"using the Ray cluster at {self._address}")

    def close_session(self) -> None:
        embedded, self._embedded = self._embedded, None
        if embedded is not None:
            embedded.stop()
        on_slurm, self._slurm = self._slurm, None
        if on_slurm is not None:
            on_slurm.stop()

    def suspend(self) -> None:
        """Another framework runs next: stop the idle embedded cluster (its daemons take CPU
        time from the other framework's measurement, and on Slurm its steps hold the nodes);
        the next Ray run starts a fresh one."""
        if self._embedded is not None:
            self._embedded.stop()
        if self._slurm is not None:
            self._slurm.stop()

    def _target(self, cluster: EmbeddedCluster | SlurmCluster | None,
                launch: LaunchSpec) -> tuple[str | None, str | None]:
        """(address, None): --ray-address's, or the sweep's own cluster's, started on first use
        once the run is known to fit it; (None, why) when neither can take the run."""
        if self._address is not None:
            problem = unreachable(self._address)
            return (None, problem) if problem else (self._address, None)
        problem = resources.check_fits(cluster.nodes, launch.world_size,
                                       resources.per_worker(launch), launch.options.placement)
        if problem:
            return None, problem
        try:
            return cluster.ensure_started(), None
        except (RuntimeError, OSError) as exc:
            what = "Ray on Slurm" if isinstance(cluster, SlurmCluster) else "embedded Ray"
            return None, f"{what}: {exc}"[:500]

    @staticmethod
    def _stop_after_timeout(cluster: EmbeddedCluster | SlurmCluster | None, outcome: LaunchOutcome,
                            job: Job) -> None:
        """Nothing hung survives into the next run: a timed-out run's cluster is stopped (the
        next Ray run starts a fresh one)."""
        if outcome.status == "timeout" and cluster is not None:
            _log(cluster.log_path, f"run {job.run_id} timed out; stopping Ray (the next Ray run "
                 "starts a fresh one)")
            cluster.stop()

    def slurm_launch(self, job: Job, run_dir: Path, env: dict[str, str]) -> LaunchOutcome:
        """The driver as a one-task step on the first node (sharing the CPUs the Ray node steps
        hold: --overlap), against the Ray cluster on the allocation, or --ray-address's."""
        alloc = steps.usable(job.launch)
        if self._address is None and self._slurm is None:
            self._slurm = SlurmCluster(self._out_dir or run_dir.parent, alloc, job.launch.device)
        own = self._slurm if self._address is None else None
        address, problem = self._target(own, job.launch)
        if problem:
            return LaunchOutcome("failed", None, problem, None, time.time())
        expect = len(alloc.nodes) if own is not None else 0
        cmd = [sys.executable, "-m", "scalebench.frameworks.ray.driver", str(run_dir),
               "--address", address, "--expect-nodes", str(expect)]
        if own is not None:
            env.update(own.client_env)
        driver = allocation.Placement((alloc.nodes[0],), 1, 1)
        outcome = steps.launch_step(job, run_dir, driver, cmd, env,
                                    lambda proc: outcome_from_run(run_dir, proc, job.launch.timeout),
                                    overlap=True)
        cluster_fields: dict = {}
        if own is not None:  # the node steps have started by now
            cluster_fields = {"nodes": list(alloc.nodes), "nodelist": ",".join(alloc.nodes),
                              "ray_steps": own.steps}
        self._stop_after_timeout(own, outcome, job)
        scheduler = {**outcome.scheduler, "driver_nodes": outcome.scheduler.get("nodes"),
                     **cluster_fields}
        return dataclasses.replace(outcome, scheduler=scheduler)

    def launch(self, job: Job, run_dir: Path) -> LaunchOutcome:
        process.write_spec(run_dir, job.to_json())
        launch = job.launch
        env = process.base_env(launch.threads_per_worker)
        env["RAY_USAGE_STATS_ENABLED"] = "0"
        if launch.launcher == "slurm":
            return self.slurm_launch(job, run_dir, env)
        if self._address is None and self._embedded is None:
            # launched without open_session (tests, scripts)
            self._embedded = EmbeddedCluster(run_dir.parent, cpu_cores(), 0)
        own = self._embedded if self._address is None else None
        address, problem = self._target(own, launch)
        if problem:
            return LaunchOutcome("failed", None, problem, None, time.time())
        if own is not None:
            env.update(own.client_env)
        cmd = [sys.executable, "-m", "scalebench.frameworks.ray.driver", str(run_dir),
               "--address", address]
        proc = process.run_isolated(cmd, env, launch.timeout, run_dir)
        outcome = outcome_from_run(run_dir, proc, launch.timeout)
        self._stop_after_timeout(own, outcome, job)
        return outcome


def _gpu_count(device: str) -> int:
    if device == "cpu":
        return 0
    try:
        import torch

        return torch.cuda.device_count()
    except Exception:  # noqa: BLE001 - no usable CUDA means no GPUs for Ray either
        return 0


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def outcome_from_run(run_dir: Path, proc: process.ProcessOutcome, timeout: float) -> LaunchOutcome:
    """ok/failed/timeout from the driver's files; launch_unix is the fit call when it happened."""
    stages = _read_json(run_dir / DRIVER_FILE) or {}
    launch_unix = stages.get("fit_call_unix", proc.launch_unix)
    if proc.timed_out:
        stage = stages.get("stage")
        where = STAGES.get(stage, f"after {stage}" if stage else "before it started")
        return LaunchOutcome("timeout", None, f"no result within the {timeout:g} s timeout; "
                             f"Ray driver killed {where}", proc.stderr_tail, launch_unix)
    error = _read_json(run_dir / ERROR_FILE)
    if error is not None:
        return LaunchOutcome("failed", None, error.get("error") or "Ray driver failed",
                             (error.get("traceback") or "")[-4000:] or proc.stderr_tail, launch_unix)
    outcome = process.outcome_from_files(run_dir, proc, "ray driver", timeout)
    if outcome.status != "ok":
        return LaunchOutcome(outcome.status, None, outcome.error, outcome.stderr_tail, launch_unix)
    result = outcome.result
    return LaunchOutcome("ok", result, None, None, result.get("fit_call_unix", launch_unix),
                         nodes=result.get("nodes"))


FRAMEWORK = RayTrain()
