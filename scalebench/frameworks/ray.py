"""Placeholder until the ray adapter lands: reports itself unavailable."""

from __future__ import annotations

from scalebench.frameworks.base import Framework


class NotYet(Framework):
    name = "ray"

    def available(self) -> tuple[bool, str]:
        return False, "the ray adapter is not implemented yet"


FRAMEWORK = NotYet()
