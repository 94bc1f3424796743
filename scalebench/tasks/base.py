"""The interface every task provides to the executor and to the workers."""

from __future__ import annotations

import dataclasses
from typing import Any

from scalebench.frameworks.base import LaunchOutcome
from scalebench.spec.launch import Job
from scalebench.worker.comm import Comm


class Task:
    """One kind of measurement. Subclasses set kind and spec_type and implement the rest."""

    kind: str = ""
    spec_type: type = object
    noun: str = "run"  # what a record counts: a run, a point
    builds_model: bool = False  # its workers build a torchvision model (worker_modules)

    def spec_from_dict(self, values: dict[str, Any]) -> Any:
        return self.spec_type(**values)

    def worker(self, job: Job, comm: Comm) -> dict | None:
        """Runs in every worker process; returns the gathered result on rank 0, None elsewhere."""
        raise NotImplementedError

    def worker_modules(self, job: Job) -> tuple[str, ...]:
        """The modules worker() imports: loaded before it runs (worker_io.load_modules)."""
        return ("torch", "torch.distributed", *(("torchvision",) if self.builds_model else ()))

    def records(self, job: Job, outcome: LaunchOutcome | None, env: dict,
                skipped_reason: str = "") -> list[dict]:
        """Validated records of one job (outcome None: skipped before launch, with the reason).
        Raises KeyError/TypeError/ValueError when an ok outcome's result is unusable."""
        raise NotImplementedError

    def check_record(self, record: dict[str, Any]) -> None:
        """This kind's own fields (results.validate checks the common ones first)."""

    def label(self, job: Job) -> str:
        return f"{job.kind} {job.launch.framework} x{job.launch.world_size}"

    def result_line(self, record: dict) -> str:
        """One line for a finished record, without the [k/n] prefix."""
        raise NotImplementedError

    def resume_keys(self, job: Job) -> list[tuple]:
        """identity.resume_key of every record this job leaves when it succeeds."""
        raise NotImplementedError


def spec_dict(job: Job) -> dict[str, Any]:
    """The task spec's fields, flat (record-shaped)."""
    return dataclasses.asdict(job.task)
