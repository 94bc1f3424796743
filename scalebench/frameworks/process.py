"""Run one launcher command isolated: own session, timeout, whole-tree kill, logs to files.

Shared by every framework that launches a command (torchrun, horovodrun, a Ray driver).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from scalebench.frameworks.base import LaunchOutcome
from scalebench.hardware.cpu_load import MARKER_VAR

TERM_GRACE_SECONDS = 5.0
KILL_ROUNDS = 5
TAIL_LINES = 20
RESULT_FILE = "result.json"
SPEC_FILE = "spec.json"


@dataclass(frozen=True)
class ProcessOutcome:
    returncode: int | None
    timed_out: bool
    launch_unix: float
    stderr_tail: str


def tail(path: Path, lines: int = TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip().splitlines()[-lines:])


def _marked(marker: str) -> list:
    import psutil  # imported where used: `scalebench env` runs on machines without it

    found = []
    for proc in psutil.process_iter():
        try:
            if proc.pid != os.getpid() and proc.environ().get(MARKER_VAR) == marker:
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def kill_tree(pid: int | None, marker: str | None = None) -> None:
    """Kill the process, every descendant and every process carrying the run's marker.

    Horovod's shell executor starts each worker in a new session, and a dying launcher
    orphans its children, so neither a process group nor a parent walk is enough: every
    launched process inherits MARKER_VAR=marker, which finds them wherever they ended up.
    Found processes are stopped first so that none can start another meanwhile.
    """
    import psutil

    for _ in range(KILL_ROUNDS):
        procs = []
        if pid is not None:
            try:
                root = psutil.Process(pid)
                procs = [root, *root.children(recursive=True)]
            except psutil.NoSuchProcess:
                pass
        if marker is not None:
            procs += [p for p in _marked(marker) if p not in procs]
        if not procs:
            return
        for sig in (signal.SIGSTOP, signal.SIGKILL, signal.SIGCONT):
            for proc in procs:
                try:
                    proc.send_signal(sig)
                except psutil.NoSuchProcess:
                    pass
        psutil.wait_procs(procs, timeout=TERM_GRACE_SECONDS)


def run_isolated(cmd: Sequence[str], env: dict[str, str], timeout: float, run_dir: Path,
                 cwd: str | None = None, on_stop: Callable[[], None] | None = None
                 ) -> ProcessOutcome:
    """Start cmd in its own session with logs in run_dir; kill the whole tree on timeout/Ctrl-C.

    on_stop runs first on timeout or Ctrl-C: what must end beyond this machine (a Slurm step's
    tasks on other nodes are cancelled through Slurm, not by killing the local srun).
    """
    stdout_path, stderr_path = run_dir / "stdout.log", run_dir / "stderr.log"
    marker = uuid.uuid4().hex
    env = {**env, MARKER_VAR: marker}
    with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
        launch_unix = time.time()
        proc = None
        timed_out = False
        try:
            # inside the try: a Ctrl-C that lands while Popen starts the launcher (the child
            # forked, `proc` not yet bound) must still kill it, found through the marker
            proc = subprocess.Popen(list(cmd), stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                    env=env, cwd=cwd, start_new_session=True)
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _call(on_stop)
        except BaseException:  # Ctrl-C or anything else: leave nothing behind
            _call(on_stop)
            kill_tree(proc.pid if proc is not None else None, marker)
            raise
        # Also after a normal exit: a launcher can leave workers behind. An exited launcher's
        # pid may already belong to someone else, so only the marker is used then.
        kill_tree(proc.pid if timed_out else None, marker)
        proc.wait()
    return ProcessOutcome(None if timed_out else proc.returncode, timed_out, launch_unix,
                          tail(stderr_path))


def _call(hook: Callable[[], None] | None) -> None:
    if hook is None:
        return
    try:
        hook()
    except Exception:  # noqa: BLE001 - the local kill that follows must still happen
        pass


def write_spec(run_dir: Path, spec_json: str) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    for stale in run_dir.glob("*.json"):
        stale.unlink()
    path = run_dir / SPEC_FILE
    path.write_text(spec_json)
    return path


def worker_errors(run_dir: Path) -> list[dict]:
    errors = []
    for path in sorted(run_dir.glob("error-rank*.json")):
        try:
            errors.append(json.loads(path.read_text()))
        except (OSError, json.JSONDecodeError):
            continue
    return sorted(errors, key=lambda e: e.get("rank", 0))


def outcome_from_files(run_dir: Path, proc: ProcessOutcome, launcher: str, timeout: float
                       ) -> LaunchOutcome:
    """Turn a finished launch into ok/failed/timeout using the files the workers wrote."""
    result_path = run_dir / RESULT_FILE
    errors = worker_errors(run_dir)
    if proc.timed_out:
        return LaunchOutcome("timeout", None, f"no result within the {timeout:g} s timeout; "
                             "all processes killed", proc.stderr_tail, proc.launch_unix)
    if errors:
        first = errors[0]
        return LaunchOutcome("failed", None, f"rank {first['rank']}: {first['error']}",
                             first.get("traceback", "")[-4000:] or proc.stderr_tail,
                             proc.launch_unix)
    if proc.returncode == 0 and result_path.is_file():
        try:
            result = json.loads(result_path.read_text())
        except json.JSONDecodeError as exc:
            return LaunchOutcome("failed", None, f"unreadable result file: {exc}",
                                 proc.stderr_tail, proc.launch_unix)
        return LaunchOutcome("ok", result, None, None, proc.launch_unix)
    last = next((line for line in reversed(proc.stderr_tail.splitlines()) if line.strip()), "")
    reason = f"{launcher} exited with code {proc.returncode}"
    if proc.returncode == 0:
        reason = f"{launcher} exited 0 but no worker wrote a result"
    return LaunchOutcome("failed", None, f"{reason}: {last.strip()}"[:500], proc.stderr_tail,
                         proc.launch_unix)


def base_env(threads: int) -> dict[str, str]:
    """The child environment: thread count set identically for every launcher."""
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = str(threads)
    env["MKL_NUM_THREADS"] = str(threads)
    env["PYTHONUNBUFFERED"] = "1"
    return env
