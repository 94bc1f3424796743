"""The first program of every task of a scalebench job step:

    python -m scalebench.slurm.task INFO_FILE -- COMMAND [ARGS...]

Task 0 writes INFO_FILE (job id, step id, the step's nodes), which lets the sweep record the step
and cancel it by id; then every task becomes COMMAND through exec, so the pid Slurm signals
(time limit, scancel, --kill-on-bad-exit) is the worker's own.

torch_env: Slurm's task variables as torch.distributed's env:// variables (DDP's one task per
worker). Import-light on purpose: it runs before every worker.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from scalebench.records import atomic
from scalebench.slurm.allocation import expand_counts, expand_hostlist


def step_info(environ: Mapping[str, str]) -> dict:
    """What the sweep records about the step this task belongs to."""
    nodelist = environ.get("SLURM_STEP_NODELIST") or environ.get("SLURM_NODELIST") or ""
    return {
        "job_id": environ.get("SLURM_JOB_ID") or environ.get("SLURM_JOBID"),
        "step_id": environ.get("SLURM_STEP_ID") or environ.get("SLURM_STEPID"),
        "nodelist": nodelist,
        "nodes": expand_hostlist(nodelist) if nodelist else [],
        "tasks": int(environ.get("SLURM_STEP_NUM_TASKS") or environ.get("SLURM_NTASKS") or 1),
        "partition": environ.get("SLURM_JOB_PARTITION"),
        "host": environ.get("SLURMD_NODENAME"),
        "start_unix": time.time(),
    }


def torch_env(environ: Mapping[str, str], master_addr: str, master_port: int) -> dict[str, str]:
    """RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR/PORT of this task,
    as torchrun would set them; rank 0 (on the step's first node) hosts the store."""
    rank = int(environ["SLURM_PROCID"])
    world = int(environ.get("SLURM_STEP_NUM_TASKS") or environ["SLURM_NTASKS"])
    node = int(environ.get("SLURM_NODEID", "0"))
    per_node = expand_counts(environ.get("SLURM_STEP_TASKS_PER_NODE")
                             or environ.get("SLURM_TASKS_PER_NODE") or str(world))
    local_size = per_node[node] if node < len(per_node) else per_node[-1]
    return {"RANK": str(rank), "WORLD_SIZE": str(world),
            "LOCAL_RANK": environ.get("SLURM_LOCALID", "0"),
            "LOCAL_WORLD_SIZE": str(local_size), "GROUP_RANK": str(node),
            "MASTER_ADDR": master_addr, "MASTER_PORT": str(master_port)}


def write_info(path: Path, info: dict) -> None:
    atomic.write_json(path, info)


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m scalebench.slurm.task INFO_FILE -- COMMAND [ARGS...]",
              file=sys.stderr)
        return 2
    info_path, command = Path(argv[0]), argv[2:]
    if os.environ.get("SLURM_PROCID", "0") == "0":
        try:
            write_info(info_path, step_info(os.environ))
        except OSError as exc:  # the run goes on; only its record lacks the step's ids
            print(f"scalebench: cannot write {info_path}: {exc}", file=sys.stderr)
    sys.stdout.flush()
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        print(f"scalebench: cannot run {command[0]}: {exc}", file=sys.stderr)
    return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
