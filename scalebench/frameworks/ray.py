"""Ray Train (TorchTrainer, the successor of RaySGD): embedded local cluster or an existing one.

Per sweep: without --ray-address, one embedded Ray instance (ray_head.py) started at the first
Ray run, reused by every Ray run, shut down in close_session (also on error or Ctrl-C). With
--ray-address (auto, HOST:PORT, ray://HOST:10001) the runs join that cluster instead.

Per run: the driver (ray_driver.py) runs in its own process through process.run_isolated, like
torchrun for DDP. Its timeout kills the driver; Ray then stops the job's controller and workers.
After a timeout the embedded cluster is also restarted, so nothing hung survives into the next
run. The driver calls TorchTrainer.fit; each worker (ray_worker.py) runs the shared loop.

Ray's console goes to files: the embedded cluster's to OUT/ray.log, each driver's to its run
folder's stdout.log/stderr.log. Errors come back as one line (ray-error.json).
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

from scalebench import config
from scalebench.config import RunSpec, SweepSpec
from scalebench.envinfo import cpu_cores
from scalebench.frameworks import process, ray_resources
from scalebench.frameworks.base import Framework, LaunchOutcome
from scalebench.frameworks.ray_driver import DRIVER_FILE, ERROR_FILE, STAGES

PINNED = "2.60.0"
SETUP_HINT = f"run `make setup` (installs ray[train]=={PINNED})"
LOG_FILE = "ray.log"
HEAD_INFO_FILE = "ray-head.json"
HEAD_START_TIMEOUT = 300.0  # seconds for the embedded cluster to come up
HEAD_STOP_TIMEOUT = 60.0


def probe() -> tuple[bool, str]:
    """Is a usable Ray Train importable here? (True, version) or (False, reason and fix)."""
    import importlib.util

    try:
        import ray
    except ModuleNotFoundError as exc:
        if exc.name == "ray":
            return False, f"ray is not installed; {SETUP_HINT}"
        return False, f"ray is not importable ({exc}); {SETUP_HINT}"
    except Exception as exc:  # noqa: BLE001 - a broken install is a skip reason, not a crash
        return False, f"ray is not importable ({type(exc).__name__}: {exc}); {SETUP_HINT}"
    version = getattr(ray, "__version__", "unknown")
    try:
        major, minor = (int(p) for p in version.split(".")[:2])
    except ValueError:
        major, minor = 0, 0
    if (major, minor) < (2, 60):
        return False, (f"ray {version} is older than {PINNED} (Train V2 with "
                       f"Result.return_value is needed); {SETUP_HINT}")
    for module in ("ray.train", "pyarrow"):
        if importlib.util.find_spec(module) is None:
            return False, f"ray {version} lacks its train extra ({module}); {SETUP_HINT}"
    if version != PINNED:
        return True, f"ray {version} (scalebench pins {PINNED})"
    return True, f"ray {version}"


def unreachable(address: str, timeout: float = 5.0) -> str | None:
    """Why HOST:PORT (or ray://HOST:PORT) takes no TCP connection, else None ("auto": Ray finds
    the local cluster itself). Ray would retry an unreachable address until the run's timeout."""
    target = address.removeprefix("ray://")
    host, sep, port = target.rpartition(":")
    if address == "auto" or not sep or not port.isdigit():
        return None
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            return None
    except OSError as exc:
        return (f"cannot reach the Ray cluster at {address} ({exc.strerror or exc}); start it "
                "with `ray start --head` or fix --ray-address")


def _log(path: Path, text: str) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} scalebench: {text}\n")


class EmbeddedCluster:
    """One local Ray instance for a sweep, held by a ray_head process; started on first use."""

    def __init__(self, out_dir: Path, num_cpus: int, num_gpus: int):
        self.out_dir = out_dir
        self.log_path = out_dir / LOG_FILE
        self.info_path = out_dir / HEAD_INFO_FILE
        self.num_cpus = num_cpus
        self.num_gpus = num_gpus
        self._proc: subprocess.Popen | None = None
        self._info: dict | None = None
        self._marker: str | None = None  # inherited by every Ray process of this cluster

    @property
    def nodes(self) -> list[dict[str, float]]:
        """Known before start: ray_head is told exactly these resources."""
        return [{"CPU": float(self.num_cpus), "GPU": float(self.num_gpus)}]

    @property
    def client_env(self) -> dict[str, str]:
        return dict((self._info or {}).get("env", {}))

    def ensure_started(self) -> str:
        """The cluster's address, starting (or restarting, if it died) the cluster first."""
        if self._proc is not None and self._proc.poll() is None and self._info is not None:
            return self._info["address"]
        if self._proc is not None:
            _log(self.log_path, f"embedded Ray exited (code {self._proc.returncode}); restarting")
            self.stop()
        return self._start()

    def _start(self) -> str:
        import psutil

        self.info_path.unlink(missing_ok=True)
        try:
            shm_free = shutil.disk_usage("/dev/shm").free
        except OSError:
            shm_free = None
        store = ray_resources.object_store_bytes(psutil.virtual_memory().total, shm_free)
        cmd = [sys.executable, "-m", "scalebench.frameworks.ray_head", "--info", str(self.info_path),
               "--num-cpus", str(self.num_cpus), "--num-gpus", str(self.num_gpus),
               "--object-store-bytes", str(store)]
        env = process.base_env(1)
        for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            env.pop(name, None)  # Ray's own processes; workers get theirs per run
        env["RAY_USAGE_STATS_ENABLED"] = "0"
        self._marker = uuid.uuid4().hex
        env[process.MARKER_VAR] = self._marker
        _log(self.log_path, f"starting embedded Ray: {self.num_cpus} CPUs, {self.num_gpus} GPUs, "
             f"object store {store // ray_resources.MIB} MiB")
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=log, stderr=log,
                                          env=env, start_new_session=True)
        deadline = time.monotonic() + HEAD_START_TIMEOUT
        try:
            while not self.info_path.is_file():
                if self._proc.poll() is not None:
                    raise RuntimeError(f"did not start (exit code "
                                       f"{self._proc.returncode}): {self._last_log_line()}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"did not start within "
                                       f"{HEAD_START_TIMEOUT:g} s: {self._last_log_line()}")
                time.sleep(0.2)
            self._info = json.loads(self.info_path.read_text())
        except BaseException:  # also Ctrl-C: never leave a half-started cluster behind
            self.stop()
            raise
        return self._info["address"]

    def _last_log_line(self) -> str:
        lines = [line for line in process.tail(self.log_path).splitlines() if line.strip()]
        return lines[-1].strip()[:300] if lines else f"see {self.log_path}"

    def stop(self) -> None:
        """Close the helper's stdin (it shuts Ray down), then kill whatever is left of it."""
        proc, marker = self._proc, self._marker
        self._proc, self._info, self._marker = None, None, None
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(timeout=HEAD_STOP_TIMEOUT)
        except (subprocess.TimeoutExpired, OSError):
            pass
        finally:
            # Every Ray process it started carries the marker, also ones orphaned by a crash;
            # an exited helper's pid may already be someone else's.
            process.kill_tree(proc.pid if proc.poll() is None else None, marker)
            proc.wait()
            _log(self.log_path, "embedded Ray stopped")


class RayTrain(Framework):
    name = "ray"
    options_type = config.RayOptions
    step_options = ("placement",)

    def __init__(self):
        self._available: tuple[bool, str] | None = None
        self._address: str | None = None
        self._embedded: EmbeddedCluster | None = None
        self._out_dir: Path | None = None

    def available(self) -> tuple[bool, str]:
        if self._available is None:
            self._available = probe()
        return self._available

    def open_session(self, sweep: SweepSpec, out_dir: Path) -> None:
        self.close_session()
        self._out_dir = Path(out_dir)
        self._address = sweep.ray.address
        if self._address is None:
            self._embedded = EmbeddedCluster(self._out_dir, cpu_cores(), _gpu_count(sweep))
        else:
            _log(self._out_dir / LOG_FILE, f"using the Ray cluster at {self._address}")

    def close_session(self) -> None:
        embedded, self._embedded = self._embedded, None
        if embedded is not None:
            embedded.stop()

    def suspend(self) -> None:
        """Another framework runs next: stop the idle embedded cluster (its daemons take CPU
        time from the other framework's measurement); the next Ray run starts a fresh one."""
        if self._embedded is not None:
            self._embedded.stop()

    def launch(self, spec: RunSpec, run_dir: Path) -> LaunchOutcome:
        process.write_spec(run_dir, spec.to_json())
        env = process.base_env(spec.threads_per_worker)
        env["RAY_USAGE_STATS_ENABLED"] = "0"
        if self._address is not None:
            address = self._address
            problem = unreachable(address)
            if problem:
                return LaunchOutcome("failed", None, problem, None, time.time())
        else:
            if self._embedded is None:  # launched without open_session (tests, scripts)
                self._embedded = EmbeddedCluster(run_dir.parent, cpu_cores(), 0)
            problem = ray_resources.check_fits(self._embedded.nodes, spec.world_size,
                                               ray_resources.per_worker(spec),
                                               spec.options.get("placement", "PACK"))
            if problem:
                return LaunchOutcome("failed", None, problem, None, time.time())
            try:
                address = self._embedded.ensure_started()
            except (RuntimeError, OSError) as exc:
                return LaunchOutcome("failed", None, f"embedded Ray: {exc}"[:500], None, time.time())
            env.update(self._embedded.client_env)
        cmd = [sys.executable, "-m", "scalebench.frameworks.ray_driver", str(run_dir),
               "--address", address]
        proc = process.run_isolated(cmd, env, spec.timeout, run_dir)
        outcome = outcome_from_run(run_dir, proc, spec.timeout)
        if outcome.status == "timeout" and self._embedded is not None:
            _log(self._embedded.log_path, f"run {spec.run_id} timed out; stopping embedded Ray "
                 "(the next Ray run starts a fresh one)")
            self._embedded.stop()
        return outcome


def _gpu_count(sweep: SweepSpec) -> int:
    if sweep.device == "cpu":
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
