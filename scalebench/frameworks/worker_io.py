"""Worker-side plumbing shared by launched workers: read the job, run its task, write the
result or the error.

Results never travel over stdout (launchers and NCCL print freely): rank 0 writes result.json,
a failing rank writes error-rank<N>.json with its traceback for the parent to record.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from pathlib import Path

from scalebench.frameworks.process import RESULT_FILE, SPEC_FILE
from scalebench.records import atomic
from scalebench.spec.launch import Job, LaunchSpec
from scalebench.worker.comm import Comm


def parse_job(text: str) -> Job:
    from scalebench import tasks

    return tasks.job_from_json(text)


def execute(job: Job, comm: Comm) -> dict | None:
    """Run the job's task in this worker (found in the task registry); the same entry for
    launched and Ray workers."""
    from scalebench import tasks

    return tasks.get(job.kind).worker(job, comm)


def read_job(run_dir: Path) -> Job:
    return parse_job((run_dir / SPEC_FILE).read_text())


def write_error(run_dir: Path, rank: int, exc: BaseException) -> None:
    atomic.write_json(run_dir / f"error-rank{rank}.json", {
        "rank": rank,
        "error": f"{type(exc).__name__}: {exc}".splitlines()[0][:500],
        "traceback": "".join(traceback.format_exception(exc)),
    })


def run_worker(run_dir: Path, make_comm: Callable[[LaunchSpec], Comm], rank_hint: int) -> int:
    """Entry point body for one launched worker. Returns the process exit code."""
    rank = rank_hint
    try:
        job = read_job(run_dir)
        comm = make_comm(job.launch)
        rank = comm.rank
        result = execute(job, comm)
        if result is not None:
            atomic.write_json(run_dir / RESULT_FILE, result)
        return 0
    except BaseException as exc:  # noqa: BLE001 - everything goes back to the parent
        write_error(run_dir, rank, exc)
        traceback.print_exc()
        return 1
