"""The one loop that runs any task's jobs: sessions, availability, launch, records, resume.

For each job: already recorded ok (--resume) -> skipped here; framework unavailable -> skipped
records with the reason; else the framework's session is activated (idle ones suspended), the job
is launched in its own run folder, and the task turns the outcome into records, which are
appended and fsynced one by one. An unusable worker result becomes failed records; Ctrl-C stops
the loop with every record so far saved, and every session is closed in all cases.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scalebench import envinfo, frameworks, results, tasks
from scalebench.devices import DeviceInfo
from scalebench.frameworks.base import LaunchOutcome, Sessions
from scalebench.launch import Job
from scalebench.progress import Progress


@dataclass
class ExecutionOutcome:
    out_dir: Path
    results_path: Path
    records: list[dict] = field(default_factory=list)
    skipped_existing: int = 0
    set_aside: Path | None = None
    interrupted: bool = False


def set_aside(path: Path) -> Path | None:
    """Move an old results file to previous/ (never mixed with new runs, never overwritten)."""
    if not path.is_file() or path.stat().st_size == 0:
        return None
    previous = path.parent / "previous"
    previous.mkdir(exist_ok=True)
    target = previous / f"results-{time.strftime('%Y%m%d-%H%M%S')}.jsonl"
    path.replace(target)
    return target


def execute(jobs: Sequence[Job], device: DeviceInfo, out_dir: Path,
            options_for: Callable[[str], Any], *, resume: bool = False,
            fresh_file: bool = True, progress: Progress | None = None) -> ExecutionOutcome:
    """Run jobs in order and append their records to OUT/results.jsonl.

    resume: skip jobs whose records are already ok in the file. fresh_file: without resume, an
    existing results file is moved aside first (sweeps); False appends to it (allreduce points
    sit next to a sweep's training records). options_for(framework) gives the options a
    framework's session opens with.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / results.RESULTS_FILE
    outcome = ExecutionOutcome(out_dir, path)
    progress = progress or Progress(len(jobs))
    done = results.done_keys(path) if resume else set()
    if not resume and fresh_file:
        outcome.set_aside = set_aside(path)
        if outcome.set_aside:
            progress.note(f"previous results moved to {outcome.set_aside}")
    env = envinfo.collect(device.device, device.backend)
    for name in dict.fromkeys(job.launch.framework for job in jobs):
        adapter = frameworks.get(name)
        if adapter.available()[0]:
            env.update(adapter.environment())
    sessions = Sessions(options_for, device.device, out_dir)

    def emit(records: list[dict]) -> None:
        for record in records:
            results.append(path, record)
            outcome.records.append(record)

    try:
        for job in jobs:
            task = tasks.get(job.kind)
            label = task.label(job)
            if done and all(key in done for key in task.resume_keys(job)):
                outcome.skipped_existing += 1
                progress.skip(label, "already recorded ok (--resume)")
                continue
            adapter = frameworks.get(job.launch.framework)
            available, reason = adapter.available()
            if available and (why := adapter.unavailable_for(job)):
                available, reason = False, why
            if not available:
                records = task.records(job, None, env, skipped_reason=reason)
                emit(records)
                progress.skip(label, f"SKIPPED - {reason}")
                continue
            sessions.activate(adapter)
            progress.start(label)
            launch = adapter.launch(job, out_dir / "runs" / job.run_id)
            if launch.status == "ok" and not adapter.records_here(job.launch.options):
                progress.finish_elsewhere(label)
                continue
            records = usable_records(task, job, launch, env)
            emit(records)
            progress.finish(records)
    except KeyboardInterrupt:
        outcome.interrupted = True
        progress.note("interrupted: children stopped; results so far are saved in "
                      f"{path}; continue with --resume")
    finally:
        progress.close()
        sessions.close_all()
    return outcome


def usable_records(task: tasks.Task, job: Job, launch: LaunchOutcome, env: dict) -> list[dict]:
    """The task's records of a launch; a result the task cannot read makes failed records."""
    try:
        return task.records(job, launch, env)
    except (KeyError, TypeError, ValueError) as exc:  # a bad result is data, not a crash
        bad = dataclasses.replace(launch, status="failed", result=None,
                                  error=f"unreadable worker result: {type(exc).__name__}: "
                                        f"{exc}"[:500])
        return task.records(job, bad, env)
