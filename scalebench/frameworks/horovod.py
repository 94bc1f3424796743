"""Placeholder until the horovod adapter lands: reports itself unavailable."""

from __future__ import annotations

from scalebench.frameworks.base import Framework


class NotYet(Framework):
    name = "horovod"

    def available(self) -> tuple[bool, str]:
        return False, "the horovod adapter is not implemented yet"


FRAMEWORK = NotYet()
