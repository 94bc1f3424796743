"""Framework adapters: one module each; they never import each other."""

from __future__ import annotations

import importlib

from scalebench.frameworks.base import Framework

MODULES = {
    "ddp": "scalebench.frameworks.ddp",
    "horovod": "scalebench.frameworks.horovod",
    "ray": "scalebench.frameworks.ray",
}


def get(name: str) -> Framework:
    module = importlib.import_module(MODULES[name])
    return module.FRAMEWORK


def names() -> list[str]:
    return list(MODULES)
