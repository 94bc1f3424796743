"""What `scalebench tune` may search for a framework (its package declares the knobs:
Framework.knobs), the --knobs text parsed against them, and the candidates of one cell."""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Sequence
from typing import Any

from scalebench import frameworks
from scalebench.frameworks.base import Knob
from scalebench.spec.errors import UserError
from scalebench.tuning.race import Candidate

# Values a knob refuses: name -> (check, the allowed values in words)
LIMITS = {
    "bucket_cap_mb": (lambda v: v > 0 and math.isfinite(v), "numbers > 0 (MiB)"),
    "fusion_threshold_mb": (lambda v: v >= 0 and math.isfinite(v), "numbers >= 0 (MB; 0: no fusion)"),
    "cycle_time_ms": (lambda v: v > 0 and math.isfinite(v), "numbers > 0 (ms)"),
    "cache_capacity": (lambda v: v >= 0, "integers >= 0 (0: no cache)"),
}


def all_knobs() -> dict[str, list[str]]:
    """knob name -> the frameworks that have it."""
    out: dict[str, list[str]] = {}
    for name in frameworks.names():
        for knob in frameworks.get(name).knobs:
            out.setdefault(knob.option, []).append(name)
    return out


def default_knobs(framework: str) -> tuple[Knob, ...]:
    adapter = frameworks.get(framework)
    chosen = getattr(adapter, "default_knobs", None)
    if chosen is None:
        return adapter.knobs
    return tuple(k for k in adapter.knobs if k.option in chosen)


def parse(text: str | None, chosen_frameworks: Sequence[str]) -> dict[str, tuple[Knob, ...]]:
    """--knobs "bucket_cap_mb=1:5:25,fusion_threshold_mb,..." -> framework -> its knobs (with
    the grids given, the default added where missing); None: every framework's default set.
    UserError (field `knobs`) for an unknown knob, a knob of a framework not tuned, a value the
    framework refuses, or a framework left with no knob."""
    if text is None:
        return {f: default_knobs(f) for f in chosen_frameworks}
    owners = all_knobs()
    given: dict[str, str | None] = {}
    for item in (i.strip() for i in text.split(",")):
        if not item:
            continue
        name, _, values = item.partition("=")
        name = name.strip()
        if name not in owners:
            raise UserError(f"knobs: unknown knob {name!r}; known: {', '.join(sorted(owners))}")
        if not set(owners[name]) & set(chosen_frameworks):
            raise UserError(f"knobs: {name} is a knob of {', '.join(owners[name])}, which is not "
                            f"among the frameworks tuned ({', '.join(chosen_frameworks)})")
        given[name] = values.strip() or None
    out: dict[str, tuple[Knob, ...]] = {}
    for framework in chosen_frameworks:
        own = [k for k in frameworks.get(framework).knobs if k.option in given]
        if not own:
            names = ", ".join(k.option for k in frameworks.get(framework).knobs)
            raise UserError(f"knobs: none of {framework}'s knobs given (its knobs: {names})")
        out[framework] = tuple(with_values(k, given[k.option]) for k in own)
    return out


def with_values(knob: Knob, text: str | None) -> Knob:
    if text is None:
        return knob
    values = []
    for part in text.split(":"):
        try:
            value = knob.parse(part.strip())
        except (ValueError, UserError):
            raise UserError(f"knobs.{knob.option}: {part.strip()!r} is not a value of this knob; "
                            f"allowed: {allowed(knob)}") from None
        check = LIMITS.get(knob.option)
        if check is not None and not check[0](value):
            raise UserError(f"knobs.{knob.option}: {part.strip()!r} refused; allowed: {check[1]}")
        if value not in values:
            values.append(value)
    if knob.default not in values:  # the default is always a candidate
        values.insert(0, knob.default)
    return dataclasses.replace(knob, values=tuple(values))


def allowed(knob: Knob) -> str:
    if knob.option in LIMITS:
        return LIMITS[knob.option][1]
    return ", ".join(str(v) for v in knob.values)


def for_cell(knobs: Sequence[Knob], nodes: int) -> tuple[Knob, ...]:
    """The knobs that mean something for a cell (hierarchical allreduce only across nodes)."""
    return tuple(k for k in knobs if not k.multi_node or nodes > 1)


def candidates(knobs: Sequence[Knob]) -> list[Candidate]:
    """Every combination of the knobs' values; the combination of defaults is the default."""
    out = []
    for values in itertools.product(*(k.values for k in knobs)):
        settings = {k.option: v for k, v in zip(knobs, values, strict=True)}
        default = all(v == k.default for k, v in zip(knobs, values, strict=True))
        out.append(Candidate(label(settings), settings, default))
    return out


def label(settings: dict[str, Any]) -> str:
    def text(v: Any) -> str:
        if isinstance(v, bool):
            return "on" if v else "off"
        return f"{v:g}" if isinstance(v, float) else str(v)

    return ",".join(f"{k}={text(v)}" for k, v in settings.items()) or "default"


def options_with(framework: str, base: Any, settings: dict[str, Any]) -> Any:
    """The framework's options with a candidate's settings; a knob at its default keeps the
    option's own default (None: the framework's default), so a tuned configuration that equals
    the default is the default configuration, not a second one."""
    knobs = {k.option: k for k in frameworks.get(framework).knobs}
    field_defaults = {f.name: f.default for f in dataclasses.fields(base)}
    changes = {}
    for name, value in settings.items():
        knob = knobs[name]
        changes[name] = field_defaults[name] if value == knob.default else value
    return dataclasses.replace(base, **changes)


def in_launch(knobs: Sequence[Knob]) -> bool:
    """Whether every knob can change between windows of one launch."""
    return all(k.in_launch for k in knobs)
