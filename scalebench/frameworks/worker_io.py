"""Worker-side plumbing shared by launched workers: read the job, run its task, write the
result or the error.

Results never travel over stdout (launchers and NCCL print freely): rank 0 writes result.json,
a failing rank writes error-rank<N>.json with its traceback for the parent to record.
"""

from __future__ import annotations

import gc
import importlib
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


def load_modules(job: Job) -> None:
    """Import what the job's task will, with the cyclic collector paused, then freeze what the
    imports made. torch and torchvision make some 530,000 objects at import, none of them
    garbage: the collector's passes over them (794 of them) were 0.5-0.8 of the import's 2.7-3.0
    CPU-s (a 2-core Xeon), in every worker. Frozen (gc.freeze), they stay out of every later
    collection (a grouped launch's between members, the tuner's between rounds, any during a
    timed step). The collector is back on before the task runs."""
    from scalebench import tasks

    enabled = gc.isenabled()
    gc.disable()
    try:
        for name in tasks.get(job.kind).worker_modules(job):
            importlib.import_module(name)
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


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
        load_modules(job)
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
