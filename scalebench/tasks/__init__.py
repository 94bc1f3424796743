"""Tasks: one module per kind of measurement (train, allreduce, vet). Each declares its spec, how a
request expands into jobs, the worker function that runs under a Comm, how a worker result
becomes records, and its record fields. executor.py runs any of them.

Adding a task: its own module with a TASK object (tasks.base.Task) and one line in KINDS.
"""

from __future__ import annotations

import importlib

from scalebench.tasks.base import Task

KINDS = {
    "train": "scalebench.tasks.train",
    "allreduce": "scalebench.tasks.allreduce",
    "group": "scalebench.tasks.group",
    "vet": "scalebench.tasks.vet",
}


def get(kind: str) -> Task:
    if kind not in KINDS:
        raise KeyError(f"unknown task kind {kind!r}; known: {', '.join(KINDS)}")
    return importlib.import_module(KINDS[kind]).TASK


def known(kind: str) -> bool:
    return kind in KINDS
