"""Framework adapters: one package each (ddp/, horovod/, ray/); they never import each other.

Adding a framework: its own package with a FRAMEWORK object (frameworks.base.Framework) and one
line in PACKAGES. Frameworks import worker (the loop), spec, records, hardware and slurm; the
worker entry (worker_io) looks up the task registry to run the task its Job names; never running,
analysis, tracking or the report.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Mapping
from typing import Any

from scalebench.frameworks.base import Framework

PACKAGES = {
    "ddp": "scalebench.frameworks.ddp",
    "horovod": "scalebench.frameworks.horovod",
    "ray": "scalebench.frameworks.ray",
}



def get(name: str) -> Framework:
    module = importlib.import_module(PACKAGES[name])
    return module.FRAMEWORK


def names() -> list[str]:
    return list(PACKAGES)


def step_options(framework: str, options: Mapping[str, Any] | None) -> dict[str, Any]:
    """The framework options that change the timed step (part of a configuration's identity),
    as given in a record's `options`; an unknown framework has none."""
    if framework not in PACKAGES:
        return {}
    names_ = get(framework).step_options
    return {k: (options or {}).get(k) for k in names_ if (options or {}).get(k) is not None}


def bucket_bytes(framework: str, options: Mapping[str, Any] | None) -> int | None:
    """Gradient bytes per allreduce message under this framework's options (None: unknown)."""
    if framework not in PACKAGES:
        return None
    return get(framework).bucket_bytes(dict(options or {}))


def default_step_options(framework: str | None) -> dict[str, Any]:
    """The step options' default values (what a run without that option uses)."""
    if framework not in PACKAGES:
        return {}
    adapter = get(framework)
    defaults = dataclasses.asdict(adapter.options_type())
    return {k: defaults.get(k) for k in adapter.step_options}
