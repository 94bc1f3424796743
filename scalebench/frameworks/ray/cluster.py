"""The Ray cluster a sweep's runs use: is Ray usable here, is an address reachable, the
embedded local cluster (one per sweep, held by head.py) started on first use, and the cluster
on a Slurm allocation (SlurmCluster, one job step per node).
"""

from __future__ import annotations

import json
import secrets
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from scalebench.frameworks import process
from scalebench.frameworks.ray import resources
from scalebench.slurm import allocation, steps

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


def _object_store_here() -> int:
    import psutil

    try:
        shm_free = shutil.disk_usage("/dev/shm").free
    except OSError:
        shm_free = None
    return resources.object_store_bytes(psutil.virtual_memory().total, shm_free)


def _daemon_env(marker: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of Ray's own processes (head, node daemons): no per-run thread count
    (workers get theirs per run), no usage stats, workers at the priority torchrun's and
    horovodrun's run at, and the cluster's marker, which every process Ray starts inherits
    (stop() finds orphans by it)."""
    env = process.base_env(1)
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env.pop(name, None)
    # Ray renices its workers to 15 by default: beside any other load on a node they then get
    # a fraction of the cores the other frameworks' workers get, and a Ray job's start-up
    # beside three busy test processes once took 30 s for one actor's imports.
    env.update(extra or {}, RAY_USAGE_STATS_ENABLED="0", RAY_worker_niceness="0")
    env[process.MARKER_VAR] = marker
    return env


def _wait_until(ready: Callable[[], bool], proc: subprocess.Popen, poll: float,
                ended: Callable[[int], str], late: Callable[[], str]) -> None:
    """Poll ready() until it is true; RuntimeError(ended(exit code)) when proc ends first,
    RuntimeError(late()) when HEAD_START_TIMEOUT passes."""
    deadline = time.monotonic() + HEAD_START_TIMEOUT
    while not ready():
        if proc.poll() is not None:
            raise RuntimeError(ended(proc.returncode))
        if time.monotonic() > deadline:
            raise RuntimeError(late())
        time.sleep(poll)


class EmbeddedCluster:
    """One local Ray instance for a sweep, held by a head.py process; started on first use."""

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
        """Known before start: head.py is told exactly these resources."""
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
        self.info_path.unlink(missing_ok=True)
        store = _object_store_here()
        cmd = [sys.executable, "-m", "scalebench.frameworks.ray.head", "--info", str(self.info_path),
               "--num-cpus", str(self.num_cpus), "--num-gpus", str(self.num_gpus),
               "--object-store-bytes", str(store)]
        self._marker = uuid.uuid4().hex
        _log(self.log_path, f"starting embedded Ray: {self.num_cpus} CPUs, {self.num_gpus} GPUs, "
             f"object store {store // resources.MIB} MiB")
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=log, stderr=log,
                                          env=_daemon_env(self._marker), start_new_session=True)
        try:
            _wait_until(self.info_path.is_file, self._proc, poll=0.2,
                        ended=lambda code: f"did not start (exit code {code}): "
                                           f"{self._last_log_line()}",
                        late=lambda: f"did not start within {HEAD_START_TIMEOUT:g} s: "
                                     f"{self._last_log_line()}")
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


class SlurmCluster:
    """Ray on a Slurm allocation, as Ray's documentation runs it under Slurm: `ray start --head
    --block` as a job step on the first node, `ray start --address=HEAD --block` as one step on
    each other node, each step holding the node's allocated CPUs and GPUs. Drivers connect from
    their own steps (launcher.py). Started on first use; stopped (steps cancelled through Slurm,
    local leftovers killed) when the sweep's Ray runs pause, end, or one times out.

    Every step gets the same generated Ray token (RAY_AUTH_TOKEN), so nodes need no shared home.
    """

    def __init__(self, out_dir: Path, alloc: allocation.Allocation, device: str):
        self.out_dir = out_dir
        self.log_path = out_dir / LOG_FILE
        self.alloc = alloc
        self.gpus = alloc.gpus_per_node if device == "cuda" else 0
        self._procs: list[subprocess.Popen] = []
        self._infos: list[Path] = []
        self._address: str | None = None
        self._marker: str | None = None
        self._token = secrets.token_hex(32)

    @property
    def nodes(self) -> list[dict[str, float]]:
        """Known before start: every `ray start` is told its node's allocated resources."""
        return [{"CPU": float(cpus), "GPU": float(self.gpus)} for cpus in self.alloc.cpus_per_node]

    @property
    def client_env(self) -> dict[str, str]:
        return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": self._token}

    @property
    def steps(self) -> list[str]:
        """The job step ids of the Ray nodes (head first)."""
        return [s for s in (steps.step_id(steps.read_info(p)) for p in self._infos) if s]

    def ensure_started(self) -> str:
        if self._address is not None and all(p.poll() is None for p in self._procs):
            return self._address
        if self._procs:
            _log(self.log_path, "a Ray node step on Slurm ended; restarting Ray")
            self.stop()
        return self._start()

    def _node_step(self, index: int, args: list[str]) -> None:
        node = self.alloc.nodes[index]
        placement = allocation.Placement((node,), 1, self.alloc.cpus_per_node[index], self.gpus)
        info = self.out_dir / f"ray-slurm-{index}.json"
        info.unlink(missing_ok=True)
        ray = [sys.executable, "-m", "ray.scripts.scripts", "start", "--block",
               f"--num-cpus={self.alloc.cpus_per_node[index]}", f"--num-gpus={self.gpus}",
               "--disable-usage-stats", *args]
        address = steps.node_address(node)
        if not address.startswith("127."):  # a loopback NodeAddr (one-machine clusters): Ray picks
            ray.append(f"--node-ip-address={address}")
        cmd = steps.srun_command(placement, ray, name=f"ray-{'head' if index == 0 else 'node'}",
                                 info_path=info, overlap=True, kill_on_bad_exit=False, bind=False)
        env = _daemon_env(self._marker or "", self.client_env)
        with open(self.log_path, "ab") as log:
            self._procs.append(subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log,
                                                stderr=log, env=steps.srun_env(env),
                                                start_new_session=True))
        self._infos.append(info)

    def _start(self) -> str:
        self._marker = uuid.uuid4().hex
        head = self.alloc.nodes[0]
        port = steps.free_port()
        address = f"{steps.node_address(head)}:{port}"
        store = _object_store_here()
        _log(self.log_path, f"starting Ray on Slurm job {self.alloc.job_id}: head on {head} "
             f"({address}), {len(self.alloc.nodes) - 1} more node(s)")
        try:
            self._node_step(0, ["--head", f"--port={port}", "--include-dashboard=false",
                                f"--object-store-memory={store}"])
            _wait_until(lambda: unreachable(address, timeout=2.0) is None, self._procs[0], poll=0.5,
                        ended=lambda code: f"the head step ended (srun exit code {code}); see "
                                           f"{self.log_path}",
                        late=lambda: f"the head did not listen at {address} within "
                                     f"{HEAD_START_TIMEOUT:g} s; see {self.log_path}")
            for index in range(1, len(self.alloc.nodes)):
                self._node_step(index, [f"--address={address}", f"--object-store-memory={store}"])
        except BaseException:  # also Ctrl-C: never leave a half-started cluster behind
            self.stop()
            raise
        self._address = address
        return address

    def stop(self) -> None:
        """Cancel the node steps through Slurm, then kill whatever is left here."""
        procs, marker, infos = self._procs, self._marker, self._infos
        self._procs, self._infos, self._address, self._marker = [], [], None, None
        if not procs:
            return
        for info in infos:
            step = steps.step_id(steps.read_info(info))
            if step:
                steps.scancel(step)
        deadline = time.monotonic() + HEAD_STOP_TIMEOUT
        for proc in procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for proc in procs:
            process.kill_tree(proc.pid if proc.poll() is None else None, marker)
            proc.wait()
        _log(self.log_path, "Ray on Slurm stopped")
