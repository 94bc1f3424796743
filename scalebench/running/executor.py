"""The one loop that runs any task's jobs: sessions, availability, launch, records, resume.

For each job: already recorded ok (--resume) -> skipped here; framework unavailable -> skipped
records with the reason; else the framework's session is activated (idle ones suspended), the job
is launched in its own run folder, and the task turns the outcome into records, which are
appended and fsynced one by one. An unusable worker result becomes failed records; Ctrl-C stops
the loop with every record so far saved, and every session is closed in all cases.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scalebench import frameworks, tasks
from scalebench.analysis import disturbance
from scalebench.frameworks.base import LaunchOutcome, Sessions
from scalebench.hardware import cpu_load, envinfo
from scalebench.hardware.devices import DeviceInfo
from scalebench.records import results
from scalebench.records.schema import new_sweep_id
from scalebench.running.progress import Progress
from scalebench.spec.launch import Job
from scalebench.tasks import group


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
            fresh_file: bool = True, progress: Progress | None = None,
            launch_mode: str = "isolated", vetting: dict | None = None,
            sessions: Sessions | None = None, strict: bool = False) -> ExecutionOutcome:
    """Run jobs and append their records to OUT/results.jsonl, each stamped with this sweep's
    `sweep_id` (a new one; with resume, the one the file's records carry, so that a resumed
    sweep stays one sweep) and, when a vetting placed the runs, with `vetting`.

    resume: skip jobs whose records are already ok in the file. fresh_file: without resume, an
    existing results file is moved aside first (sweeps); False appends to it (allreduce points
    sit next to a sweep's training records). options_for(framework) gives the options a
    framework's session opens with. launch_mode grouped: jobs that can share a launch run in
    one (tasks/group.py); the members of a group that died before reaching them run alone.
    vetting: the vetting that placed the runs (vet.files.Vetting.record_field), carried by
    every record. sessions: framework sessions the caller holds open across several execute
    calls (the tuner's rounds) and closes itself; None: opened here and closed at the end.
    strict: a run whose windows were disturbed (analysis/disturbance.py) runs once more,
    alone; both records are kept (the newer one counts in the summary).
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / results.RESULTS_FILE
    outcome = ExecutionOutcome(out_dir, path)
    progress = progress or Progress(len(jobs))
    done = results.done_keys(path) if resume else set()
    sweep_id = (results.sweep_id_of(path) if resume else None) or new_sweep_id()
    if not resume and fresh_file:
        outcome.set_aside = set_aside(path)
        if outcome.set_aside:
            progress.note(f"previous results moved to {outcome.set_aside}")
    env = envinfo.collect(device.device, device.backend)
    for name in dict.fromkeys(job.launch.framework for job in jobs):
        adapter = frameworks.get(name)
        if adapter.available()[0]:
            env.update(adapter.environment())
    own_sessions = sessions is None
    if sessions is None:
        sessions = Sessions(options_for, device.device, out_dir)
    runner = _Runner(out_dir, env, sessions, progress, outcome, sweep_id, vetting, strict)
    # every process launched from here on descends from this one: the workers' disturbance
    # readers count them as the benchmark's own (hardware/cpu_load.py)
    outer_sweep = os.environ.get(cpu_load.SWEEP_PID_VAR)
    os.environ[cpu_load.SWEEP_PID_VAR] = cpu_load.sweep_value()
    try:
        for unit in group.plan_groups(jobs, launch_mode):
            pending = []
            for job in unit:
                task = tasks.get(job.kind)
                if done and all(key in done for key in task.resume_keys(job)):
                    outcome.skipped_existing += 1
                    progress.skip(task.label(job), "already recorded ok (--resume)")
                else:
                    pending.append(job)
            if not pending:
                continue
            reason = runner.unavailable(pending[0])
            if reason is not None:
                for job in pending:
                    runner.emit(tasks.get(job.kind).records(job, None, env,
                                                            skipped_reason=reason))
                    progress.skip(tasks.get(job.kind).label(job), f"SKIPPED - {reason}")
            elif len(pending) == 1:
                runner.run_alone(pending[0])
            else:
                runner.run_group(pending)
    except KeyboardInterrupt:
        outcome.interrupted = True
        progress.note("interrupted: children stopped; results so far are saved in "
                      f"{path}; continue with --resume")
    finally:
        progress.close()
        if own_sessions:
            sessions.close_all()
        if outer_sweep is None:
            os.environ.pop(cpu_load.SWEEP_PID_VAR, None)
        else:
            os.environ[cpu_load.SWEEP_PID_VAR] = outer_sweep
    return outcome


def append_records(outcome: ExecutionOutcome, records: list[dict], sweep_id: str,
                   vetting: dict | None = None) -> None:
    """Stamp each record with the sweep (and the vetting that placed it), append and fsync it
    to the sweep's results file, and keep it in the outcome."""
    for record in records:
        record["sweep_id"] = sweep_id
        if vetting is not None:
            record["vetting"] = vetting
        results.append(outcome.results_path, record)
        outcome.records.append(record)


class _Runner:
    """Launches of one execute call: alone or as a group; records appended as they come."""

    def __init__(self, out_dir: Path, env: dict, sessions: Sessions, progress: Progress,
                 outcome: ExecutionOutcome, sweep_id: str, vetting: dict | None = None,
                 strict: bool = False):
        self.out_dir, self.env, self.sessions = out_dir, env, sessions
        self.progress, self.outcome, self.sweep_id = progress, outcome, sweep_id
        self.vetting = vetting
        self.groups = 0
        self.strict = strict
        self.reruns: dict[str, str] = {}  # --strict: the re-run's run id -> the disturbed one's

    def emit(self, records: list[dict]) -> None:
        for record in records:
            if record.get("run_id") in self.reruns:
                record["rerun_of"] = self.reruns[record["run_id"]]
        append_records(self.outcome, records, self.sweep_id, self.vetting)

    def unavailable(self, job: Job) -> str | None:
        if job.launch.unplaced:
            return job.launch.unplaced
        adapter = frameworks.get(job.launch.framework)
        available, reason = adapter.available()
        if not available:
            return reason
        return adapter.unavailable_for(job)

    def run_alone(self, job: Job) -> None:
        task = tasks.get(job.kind)
        adapter = frameworks.get(job.launch.framework)
        self.sessions.activate(adapter)
        self.progress.start(task.label(job))
        run_dir = self.out_dir / "runs" / job.run_id
        job = dataclasses.replace(job, run_dir=str(run_dir.resolve()))
        launch = adapter.launch(job, run_dir)
        if launch.status == "ok" and not adapter.records_here(job.launch.options):
            self.progress.finish_elsewhere(task.label(job))
            return
        records = usable_records(task, job, launch, self.env)
        self.emit(records)
        self.progress.finish(records)
        self.rerun_disturbed([job], records)

    def run_group(self, members: list[Job]) -> None:
        self.groups += 1
        adapter = frameworks.get(members[0].launch.framework)
        group_id = (f"group-{time.strftime('%Y%m%d-%H%M%S')}-{self.groups:02d}-"
                    f"{members[0].launch.framework}-w{members[0].launch.world_size}")
        run_dir = self.out_dir / "runs" / group_id
        group_job, placed = group.make_job(members, group_id, run_dir)
        labels = [tasks.get(job.kind).label(job) for job in placed]
        self.sessions.activate(adapter)
        self.progress.start(f"{len(placed)} configurations in one launch: " + "; ".join(labels),
                            configurations=len(placed))
        try:
            launch = adapter.launch(group_job, run_dir)
        except KeyboardInterrupt:
            # Ctrl-C: the members measured before it keep their records (rank 0 wrote each
            # one's result as soon as it was measured); the one running is not recorded.
            stopped = LaunchOutcome("failed", None, "interrupted", None, None)
            measured = [record for job, member in zip(
                placed, group.member_outcomes(stopped, placed, run_dir), strict=True)
                if member is not None and member.status == "ok"
                for record in usable_records(tasks.get(job.kind), job, member, self.env)]
            self.emit(measured)
            raise
        if launch.status == "ok" and not adapter.records_here(group_job.launch.options):
            self.progress.finish_elsewhere(labels[0], configurations=len(placed))
            return
        measured, left = [], []
        for job, member in zip(placed, group.member_outcomes(launch, placed, run_dir),
                               strict=True):
            if member is None:
                left.append(job)
            else:
                measured += usable_records(tasks.get(job.kind), job, member, self.env)
        self.emit(measured)
        self.progress.finish(measured, configurations=len(measured))
        self.rerun_disturbed(placed, measured)
        for job in left:  # the group died before these: each alone, as an isolated launch
            self.run_alone(dataclasses.replace(job, group=None))

    def rerun_disturbed(self, jobs: Sequence[Job], records: list[dict]) -> None:
        """--strict: each disturbed ok run of these jobs once more, alone (a re-run is never
        re-run); both records stay in the results file."""
        if not self.strict:
            return
        by_id = {job.run_id: job for job in jobs}
        for record in records:
            job = by_id.get(record.get("run_id", ""))
            if job is None or record.get("rerun_of") or record.get("status") != "ok" \
                    or not disturbance.is_disturbed(record):
                continue
            self.progress.note(f"{job.run_id} was disturbed ({disturbance.record_text(record)});"
                               " --strict runs it once more")
            again = dataclasses.replace(job, run_id=f"{job.run_id}-again", group=None)
            self.reruns[again.run_id] = job.run_id
            self.progress.total += 1
            self.run_alone(again)


def usable_records(task: tasks.Task, job: Job, launch: LaunchOutcome, env: dict) -> list[dict]:
    """The task's records of a launch; a result the task cannot read makes failed records."""
    try:
        return task.records(job, launch, env)
    except (KeyError, TypeError, ValueError) as exc:  # a bad result is data, not a crash
        bad = dataclasses.replace(launch, status="failed", result=None,
                                  error=f"unreadable worker result: {type(exc).__name__}: "
                                        f"{exc}"[:500])
        return task.records(job, bad, env)
