"""Tasks: one module per kind of measurement (train, allreduce, vet). Each declares its spec, how a
request expands into jobs, the worker function that runs under a Comm, how a worker result
becomes records, and its record fields. executor.py runs any of them.

Adding a task: its own module with a TASK object (tasks.base.Task) and one line in KINDS.
Tasks import frameworks, worker, models, hardware, records and spec; never running or reports.
"""

from __future__ import annotations

import importlib
import json

from scalebench import frameworks
from scalebench.spec.launch import Job, LaunchSpec
from scalebench.tasks.base import Task

KINDS = {
    "train": "scalebench.tasks.train",
    "allreduce": "scalebench.tasks.allreduce",
    "group": "scalebench.tasks.group",
    "vet": "scalebench.tasks.vet",
    "tune": "scalebench.tasks.tune",
}


def get(kind: str) -> Task:
    if kind not in KINDS:
        raise KeyError(f"unknown task kind {kind!r}; known: {', '.join(KINDS)}")
    return importlib.import_module(KINDS[kind]).TASK


def known(kind: str) -> bool:
    return kind in KINDS


def check_job(job: Job) -> None:
    """A job's task spec is its kind's spec type (ValueError otherwise)."""
    expected = get(job.kind).spec_type
    if not isinstance(job.task, expected):
        raise ValueError(f"a {job.kind} job needs a {expected.__name__}, not "
                         f"{type(job.task).__name__}")


def job_from_json(text: str) -> Job:
    """A Job from Job.to_json's text: its launch options and task spec decoded by the types
    the framework and task registries name."""
    data = json.loads(text)
    options_type = frameworks.get(data["launch"]["framework"]).options_type
    job = Job.from_dict(data, LaunchSpec.from_dict(data["launch"], options_type),
                        get(data["kind"]).spec_from_dict(data["task"]))
    check_job(job)
    return job
