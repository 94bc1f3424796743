"""A grouped launch: several configurations that share a launch (framework, workers, nodes,
device, precision, framework options; different models or batch sizes) measured one after the
other by one launched worker group, so the launch's start-up is paid once.

Each member keeps its own warm-up, windows and record; its model and optimizer are rebuilt and
device memory is released in between. Rank 0 writes each member's result to the run folder as
soon as it is measured (member-<i>.json), so a group that dies keeps what it measured.
"""

from __future__ import annotations

import dataclasses
import gc
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from scalebench.frameworks.base import LaunchOutcome
from scalebench.records import atomic
from scalebench.spec.launch import GroupPlace, Job
from scalebench.tasks.base import Task
from scalebench.worker.comm import Comm

KIND = "group"
MEMBER_FILE = "member-{index}.json"


@dataclass(frozen=True)
class GroupSpec:
    kind: ClassVar[str] = KIND  # the task this spec belongs to (Job checks it)
    members: tuple[str, ...]  # each member's Job as JSON, in order
    results_dir: str  # where rank 0 leaves each member's result (the group's run folder)

    def jobs(self) -> list[Job]:
        from scalebench import tasks

        return [tasks.job_from_json(text) for text in self.members]


def group_key(job: Job) -> tuple | None:
    """Jobs with equal keys can share a launch; None: this job always runs alone."""
    if job.kind != "train":
        return None
    return (job.kind, job.launch, job.task.precision, job.task.tf32, job.repeat)


def plan_groups(jobs: Sequence[Job], mode: str) -> list[list[Job]]:
    """The jobs as launch units, in the order of each unit's first job. mode: grouped or
    isolated. A group never holds two repeats of one configuration (repeat is in the key)."""
    if mode == "isolated":
        return [[job] for job in jobs]
    units: dict[Any, list[Job]] = {}
    for index, job in enumerate(jobs):
        key = group_key(job)
        units.setdefault(key if key is not None else ("alone", index), []).append(job)
    return list(units.values())


def make_job(members: Sequence[Job], group_id: str, run_dir: Path) -> tuple[Job, list[Job]]:
    """The launch of a group and its members as recorded (each knowing its place). The group's
    timeout is the sum of its members' timeouts."""
    folder = str(Path(run_dir).resolve())
    placed = [dataclasses.replace(job, group=GroupPlace(group_id, i, len(members)),
                                  run_dir=folder)
              for i, job in enumerate(members, start=1)]
    first = placed[0]
    launch = dataclasses.replace(first.launch,
                                 timeout=sum(job.launch.timeout for job in placed))
    spec = GroupSpec(tuple(job.to_json() for job in placed), folder)
    return Job(group_id, KIND, launch, spec, first.repeat, first.repeats, first.order_seed,
               run_dir=folder), placed


def run(job: Job, comm: Comm) -> dict | None:
    """Every member's task in order under one Comm; rank 0 returns all members' results."""
    from scalebench import tasks

    spec: GroupSpec = job.task
    results: list[dict | None] = []
    for index, member in enumerate(spec.jobs()):
        result = tasks.get(member.kind).worker(member, comm)
        if comm.rank == 0 and result is not None:
            atomic.write_json(Path(spec.results_dir) / MEMBER_FILE.format(index=index), result)
        results.append(result)
        release_memory()
        comm.barrier()
    if comm.rank != 0:
        return None
    first = next((r for r in results if r), {})
    return {"members": results, "topology": first.get("topology", [])}


def release_memory() -> None:
    """Drop the finished member's model, optimizer and device memory before the next one."""
    gc.collect()
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except ImportError:  # pragma: no cover - torch is always there in a worker
        pass


def member_outcomes(outcome: LaunchOutcome, members: Sequence[Job], run_dir: Path
                    ) -> list[LaunchOutcome | None]:
    """One outcome per member: ok for each member measured (also when the group died later);
    the group's failure or timeout for the member that was running; None for those never
    reached (to be launched again, alone)."""
    if outcome.status == "ok" and isinstance(outcome.result, dict) \
            and "members" in outcome.result:
        results = outcome.result["members"]
        if len(results) == len(members):
            return [_ok(outcome, r) for r in results]
    found: list[LaunchOutcome | None] = []
    for index in range(len(members)):
        path = Path(run_dir) / MEMBER_FILE.format(index=index)
        try:
            result = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            break
        found.append(_ok(outcome, result))
    if len(found) < len(members):
        status = outcome.status if outcome.status != "ok" else "failed"
        error = outcome.error or "the group ended without this configuration's result"
        found.append(LaunchOutcome(status, None, f"{error} (grouped launch, configuration "
                                   f"{len(found) + 1} of {len(members)})"[:1000],
                                   outcome.stderr_tail, outcome.launch_unix, outcome.nodes,
                                   outcome.artifacts, outcome.scheduler))
    return found + [None] * (len(members) - len(found))


def _ok(outcome: LaunchOutcome, result: dict) -> LaunchOutcome:
    return LaunchOutcome("ok", result, None, None, outcome.launch_unix, outcome.nodes,
                         outcome.artifacts, outcome.scheduler)


class GroupTask(Task):
    kind = KIND
    builds_model = True
    spec_type = GroupSpec

    def spec_from_dict(self, values: dict[str, Any]) -> GroupSpec:
        return GroupSpec(tuple(values["members"]), values["results_dir"])

    def worker(self, job: Job, comm: Comm) -> dict | None:
        return run(job, comm)


TASK = GroupTask()
