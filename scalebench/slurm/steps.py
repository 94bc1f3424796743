"""One run as one Slurm job step: the srun command, running it, and what Slurm did to it.

The step gets the run's nodes, tasks and CPUs per task (bound to cores), GPUs per node on CUDA
(every task sees the step's GPUs on its node and takes the one at its local rank, as under
torchrun and horovodrun), --kill-on-bad-exit, and the run's timeout as its time limit. Slurm
counts time limits in whole minutes and checks them about every 30 s, so a local guard timer
only backs it up: when it fires, the step is cancelled through Slurm (scancel), then the local
process tree is killed.

What happened is read from sacct where accounting is on, else from the lines slurmstepd and srun
write to the step's stderr ("*** STEP 12.3 ON node CANCELLED AT ... DUE TO TIME LIMIT ***").
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from scalebench.frameworks import process
from scalebench.frameworks.base import LaunchOutcome
from scalebench.slurm import allocation
from scalebench.slurm.allocation import Allocation, Placement

if TYPE_CHECKING:
    from scalebench.spec.launch import Job, LaunchSpec

STEP_INFO = "slurm-step.json"
TASK_MODULE = "scalebench.slurm.task"
# srun takes these from its environment as option defaults (sbatch and salloc export them for
# the job's own geometry); the run's geometry is given on the command line and must win.
GEOMETRY_VARS = (
    "SLURM_NTASKS", "SLURM_NPROCS", "SLURM_NNODES", "SLURM_NTASKS_PER_NODE",
    "SLURM_NTASKS_PER_SOCKET", "SLURM_NTASKS_PER_CORE", "SLURM_NTASKS_PER_GPU",
    "SLURM_CPUS_PER_TASK", "SLURM_CPUS_PER_GPU", "SLURM_DISTRIBUTION", "SLURM_CPU_BIND",
    "SLURM_GPUS", "SLURM_GPUS_PER_NODE", "SLURM_GPUS_PER_TASK", "SLURM_GPUS_PER_SOCKET",
    "SLURM_GPU_BIND", "SLURM_TRES_PER_TASK", "SLURM_OVERLAP", "SLURM_EXACT", "SLURM_TIMELIMIT",
    "SLURM_EXCLUSIVE", "SLURM_MEM_PER_CPU", "SLURM_MEM_PER_GPU", "SLURM_MEM_PER_NODE",
    "SLURM_HOSTFILE", "SLURM_ARBITRARY_NODELIST",
)
CHECK_PERIOD = 30.0  # slurmctld looks at time limits about this often
GUARD_SLACK = 30.0
_CANCELLED = re.compile(r"\*\*\* (?:STEP|JOB) (\S+) ON (\S+) CANCELLED AT (\S+)"
                        r"(?: DUE TO ([A-Z_ ]+?))?(?: \(JobId=\S+\))? \*\*\*")
_BAD_EXIT = re.compile(r"srun: error: (\S+): tasks? ([\d,\-]+): Exited with exit code (\d+)")
_STEP_ERROR = re.compile(r"srun: error: (Unable to create step.*|.*Requested node configuration.*)")


def time_limit_minutes(seconds: float) -> int:
    """Slurm time limits are whole minutes: the run's timeout rounded up."""
    return max(1, math.ceil(seconds / 60))


def srun_env(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k not in GEOMETRY_VARS}


def srun_command(placement: Placement, command: Sequence[str], *, name: str, info_path: Path,
                 time_limit: float | None = None, overlap: bool = False,
                 kill_on_bad_exit: bool = True, bind: bool = True) -> list[str]:
    """srun for one step: the placement's nodes and tasks, `command` wrapped by task.py."""
    cmd = ["srun", f"--job-name={name}", f"--nodes={len(placement.nodes)}",
           f"--ntasks={placement.tasks}", f"--ntasks-per-node={placement.tasks_per_node}",
           f"--nodelist={','.join(placement.nodes)}", "--distribution=block",
           f"--cpus-per-task={placement.cpus_per_task}",
           f"--kill-on-bad-exit={1 if kill_on_bad_exit else 0}",
           "--mpi=none", "--export=ALL", "--quiet"]
    if binds_cpus():  # else srun warns on every step
        cmd.append(f"--cpu-bind={'cores' if bind else 'none'}")
    if placement.gpus_per_node:
        cmd.append(f"--gpus-per-node={placement.gpus_per_node}")
    if time_limit is not None:
        cmd.append(f"--time={time_limit_minutes(time_limit)}")
    if overlap:
        cmd.append("--overlap")
    return cmd + [sys.executable, "-m", TASK_MODULE, str(info_path), "--", *command]


def read_info(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def step_id(info: Mapping | None) -> str | None:
    if not info or not info.get("job_id") or info.get("step_id") is None:
        return None
    return f"{info['job_id']}.{info['step_id']}"


def scancel(step: str) -> None:
    subprocess.run(["scancel", step], capture_output=True, timeout=30)


_CONFIG: dict[str, str] = {}


def slurm_config(name: str) -> str | None:
    """One value of `scontrol show config` ("KillWait" -> "30 sec"), all read once."""
    if not _CONFIG:
        try:
            text = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True,
                                  timeout=30).stdout
        except (OSError, subprocess.TimeoutExpired):
            text = ""
        for line in text.splitlines():
            key, sep, value = line.partition("=")
            if sep:
                _CONFIG[key.strip()] = value.strip()
        _CONFIG.setdefault("", "")
    return _CONFIG.get(name)


def _config_seconds(name: str, default: int) -> int:
    value = slurm_config(name) or ""
    number = re.match(r"(\d+)", value)
    if not number:
        return default
    return int(number.group(1)) * (60 if "min" in value else 1)


def binds_cpus() -> bool:
    """Whether the cluster's task plugin can bind tasks to cores (task/none cannot)."""
    return "task/none" not in (slurm_config("TaskPlugin") or "")


def guard_seconds(timeout: float) -> float:
    """When the local guard gives up on Slurm ending a step at its time limit."""
    return (time_limit_minutes(timeout) * 60 + _config_seconds("OverTimeLimit", 0)
            + CHECK_PERIOD + _config_seconds("KillWait", 30) + GUARD_SLACK)


_ADDRESSES: dict[str, str] = {}


def node_address(node: str) -> str:
    """The address Slurm reaches a node at (NodeAddr), else its name."""
    if node not in _ADDRESSES:
        address = node
        try:
            out = subprocess.run(["scontrol", "show", "node", "-o", node], capture_output=True,
                                 text=True, timeout=30).stdout
            match = re.search(r"\bNodeAddr=(\S+)", out)
            if match:
                address = match.group(1)
        except (OSError, subprocess.TimeoutExpired):
            pass
        _ADDRESSES[node] = address
    return _ADDRESSES[node]


def _is_loopback(address: str) -> bool:
    return address.startswith("127.") or address in ("::1", "localhost")


def this_host_address(peers: Sequence[str]) -> str:
    """An address of this machine that the step's nodes reach (a server the sweep holds)."""
    here = os.environ.get("SLURMD_NODENAME")  # the batch step runs on an allocated node
    if here:
        address = node_address(here)
    else:
        try:
            address = socket.gethostbyname(socket.gethostname())
        except OSError:
            address = "127.0.0.1"
    if _is_loopback(address) and not all(_is_loopback(node_address(p)) for p in peers):
        import psutil

        for addrs in psutil.net_if_addrs().values():
            for a in addrs:
                if a.family == socket.AF_INET and not _is_loopback(a.address):
                    return a.address
    return address


def free_port() -> int:
    """A port free on this machine (the step's first node is usually this one in sbatch)."""
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class Verdict:
    """What Slurm did to a step, as far as it says: state TIMEOUT, CANCELLED, NODE_FAIL, ... or
    None (it ended on its own); bad_exit: a task's own non-zero exit ended the step."""

    state: str | None = None
    reason: str = ""
    bad_exit: str = ""


def sacct_state(step: str) -> str | None:
    """The step's state in Slurm's accounting ("TIMEOUT", "CANCELLED by 1000"), None without it."""
    if shutil.which("sacct") is None:
        return None
    try:
        proc = subprocess.run(["sacct", "-n", "-P", "-j", step, "-o", "JobID,State"],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    for line in proc.stdout.splitlines():
        job, _, state = line.partition("|")
        if job.strip() == step and state.strip():
            return state.strip()
    return None


def verdict_from_text(stderr: str) -> Verdict:
    """The verdict from what slurmstepd and srun wrote to the step's stderr."""
    bad = _BAD_EXIT.search(stderr)
    bad_exit = ""
    if bad and bad.group(3) != "0":
        plural = "s" if any(c in bad.group(2) for c in ",-") else ""
        bad_exit = (f"task{plural} {bad.group(2)} on {bad.group(1)} exited with code "
                    f"{bad.group(3)}")
    cancelled = _CANCELLED.search(stderr)
    if cancelled:
        due = (cancelled.group(4) or "").strip()
        if due == "TIME LIMIT":
            return Verdict("TIMEOUT", "time limit", bad_exit)
        if due:
            return Verdict("CANCELLED", due.lower(), bad_exit)
        if bad_exit and bad.start() < cancelled.start():
            return Verdict(None, "", bad_exit)  # --kill-on-bad-exit ended the others
        return Verdict("CANCELLED", "scancel or an administrator", bad_exit)
    step_error = _STEP_ERROR.search(stderr)
    if step_error:
        return Verdict("FAILED", step_error.group(1).strip()[:300], bad_exit)
    return Verdict(None, "", bad_exit)


SLURM_ENDED = ("CANCELLED", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE")


def verdict(step: str | None, stderr: str) -> Verdict:
    """sacct's word where accounting is on, else what the step's stderr says."""
    text = verdict_from_text(stderr)
    state = sacct_state(step) if step else None
    head = state.split()[0] if state else None
    if head == "TIMEOUT":
        return Verdict("TIMEOUT", "time limit", text.bad_exit)
    if head in SLURM_ENDED:
        reason = text.reason if head == "CANCELLED" and text.state == "CANCELLED" else state.lower()
        return Verdict(head, reason, text.bad_exit)
    return text


def _stderr_text(run_dir: Path, limit: int = 256 * 1024) -> str:
    path = run_dir / "stderr.log"
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            fh.seek(max(0, fh.tell() - limit))
            return fh.read().decode(errors="replace")
    except OSError:
        return ""


def scheduler_fields(info: Mapping | None, placement: Placement, job_id: str | None,
                     partition: str | None, state: str) -> dict:
    """What a record's `scheduler` says about the step."""
    info = info or {}
    nodes = list(info.get("nodes") or placement.nodes)
    return {"name": "slurm", "job_id": info.get("job_id") or job_id,
            "step_id": info.get("step_id"), "step": step_id(info),
            "nodelist": info.get("nodelist") or ",".join(placement.nodes), "nodes": nodes,
            "partition": info.get("partition") or partition, "state": state}


def run_step(cmd: Sequence[str], env: Mapping[str, str], run_dir: Path, timeout: float,
             placement: Placement, read_outcome: Callable[[process.ProcessOutcome], LaunchOutcome],
             *, info_path: Path | None = None, job_id: str | None = None,
             partition: str | None = None) -> LaunchOutcome:
    """Run the srun command of one step, then the run's outcome with Slurm's verdict folded in:
    the time limit -> timeout; scancel, preemption, node failure -> failed with Slurm's reason;
    a task's own failure -> what the framework's files say. The step goes into `scheduler`."""
    info_path = info_path or run_dir / STEP_INFO
    info_path.unlink(missing_ok=True)

    def cancel() -> None:
        step = step_id(read_info(info_path))
        if step:
            scancel(step)

    proc = process.run_isolated(cmd, srun_env(env), guard_seconds(timeout), run_dir,
                                on_stop=cancel)
    info = read_info(info_path)
    step = step_id(info)
    found = verdict(step, _stderr_text(run_dir))
    outcome = read_outcome(proc)
    name = f"step {step}" if step else "the step"
    minutes = time_limit_minutes(timeout)
    if found.state == "TIMEOUT":
        outcome = replace(outcome, status="timeout", result=None, error=(
            f"Slurm ended {name} at its time limit ({minutes} min: the run's {timeout:g} s "
            "timeout in whole minutes); all its tasks were killed"))
        state = "TIMEOUT"
    elif proc.timed_out and step is None:
        outcome = replace(outcome, status="timeout", result=None, error=(
            f"the step did not start within {guard_seconds(timeout):g} s (srun waiting for "
            "resources of the allocation?); srun killed"))
        state = "TIMEOUT"
    elif proc.timed_out:
        outcome = replace(outcome, status="timeout", result=None, error=(
            f"no result within the {timeout:g} s timeout and Slurm had not ended {name} "
            f"{guard_seconds(timeout) - minutes * 60:g} s past its {minutes} min limit; "
            "cancelled it and killed every local process"))
        state = "TIMEOUT"
    elif outcome.status == "ok":
        state = "COMPLETED"
    elif found.state and not found.bad_exit:
        if found.state == "FAILED":
            error = f"srun could not start the step: {found.reason}"
        elif found.state == "CANCELLED":
            error = f"Slurm cancelled {name} ({found.reason})"
        else:
            error = f"Slurm ended {name}: {found.state} ({found.reason})"
        outcome = replace(outcome, status="failed", result=None, error=error[:500])
        state = found.state
    else:
        state = "FAILED"
        if found.bad_exit and not (outcome.error or "").startswith("rank "):
            outcome = replace(outcome, error=(
                f"{found.bad_exit}; Slurm ended the step's other tasks (--kill-on-bad-exit): "
                f"{outcome.error}")[:500])
    return replace(outcome, scheduler={
        **outcome.scheduler, **scheduler_fields(info, placement, job_id, partition, state)})


def placement_for(launch: LaunchSpec) -> tuple[Allocation, Placement]:
    """The allocation this sweep runs in and the run's place in it (planning checked it fits)."""
    alloc = usable(launch)
    return alloc, alloc.place(launch.world_size, launch.device, launch.threads_per_worker,
                              launch.max_per_node)


def usable(launch: LaunchSpec) -> Allocation:
    """The part of this sweep's allocation the run may use (after a vetting, the vetted nodes)."""
    alloc = allocation.current()
    return alloc.subset(launch.slurm_nodes) if launch.slurm_nodes else alloc


def launch_step(job: Job, run_dir: Path, placement: Placement, command: Sequence[str],
                env: Mapping[str, str],
                read_outcome: Callable[[process.ProcessOutcome], LaunchOutcome], *,
                overlap: bool = False) -> LaunchOutcome:
    """One run as one step named after the run, with the run's timeout as its time limit."""
    alloc = allocation.current()
    info_path = run_dir / STEP_INFO
    cmd = srun_command(placement, command, name=job.run_id, info_path=info_path,
                       time_limit=job.launch.timeout, overlap=overlap)
    return run_step(cmd, env, run_dir, job.launch.timeout, placement, read_outcome,
                    info_path=info_path, job_id=alloc.job_id, partition=alloc.partition)
