"""Parsers for user-given values: each returns the typed value or raises one UserError that
names the field and the allowed values. Shared by the sweep's own fields and every framework's
options table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scalebench.spec.errors import UserError


def as_list(name: str, value: Any) -> list:
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, (list, tuple)):
        return list(value)
    raise UserError(f"{name}: expected a list or comma-separated string, got {value!r}")


def choices(name: str, values: Any, allowed: tuple[str, ...]) -> tuple[str, ...]:
    values = as_list(name, values)
    for v in values:
        if v not in allowed:
            raise UserError(f"{name}: unknown value {v!r}; allowed: {', '.join(allowed)}")
    if not values:
        raise UserError(f"{name}: needs at least one of: {', '.join(allowed)}")
    return tuple(dict.fromkeys(values))


def choice(name: str, value: Any, allowed: tuple[str, ...]) -> str:
    return choices(name, [value] if isinstance(value, str) else value, allowed)[0]


def integer(name: str, value: Any, minimum: int) -> int:
    try:
        if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
            raise ValueError
        number = int(value)
    except (TypeError, ValueError):
        raise UserError(f"{name}: expected an integer >= {minimum}, got {value!r}") from None
    if number < minimum:
        raise UserError(f"{name}: expected an integer >= {minimum}, got {number}")
    return number


def number(name: str, value: Any, minimum: float) -> float:
    """A number strictly above minimum."""
    try:
        if isinstance(value, bool):
            raise ValueError
        result = float(value)
    except (TypeError, ValueError):
        raise UserError(f"{name}: expected a number > {minimum:g}, got {value!r}") from None
    if not result > minimum:
        raise UserError(f"{name}: expected a number > {minimum:g}, got {result:g}")
    return result


def boolean(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    raise UserError(f"{name}: expected true or false, got {value!r}")


def text(name: str, value: Any) -> str:
    if isinstance(value, str) and value:
        return value
    raise UserError(f"{name}: expected a non-empty string, got {value!r}")


def endpoint(name: str, value: Any) -> str:
    raw = text(name, value)
    host, sep, port = raw.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UserError(f"{name}: expected HOST:PORT, got {raw!r}")
    return raw


def workers(value: Any, name: str = "workers") -> tuple[int, ...]:
    items = as_list(name, value)
    counts = tuple(sorted(dict.fromkeys(integer(name, w, 1) for w in items)))
    if not counts:
        raise UserError(f"{name}: expected one or more integers >= 1, e.g. 1,2,4")
    return counts


def data_source(value: Any) -> str:
    raw = text("data", value)
    if raw == "synthetic":
        return raw
    if raw.startswith("imagefolder:") and len(raw) > len("imagefolder:"):
        path = Path(raw.split(":", 1)[1]).expanduser()
        if not path.is_dir():
            raise UserError(f"data: image folder {str(path)!r} does not exist")
        return f"imagefolder:{path.resolve()}"
    raise UserError(f"data: unknown value {raw!r}; allowed: synthetic, imagefolder:PATH")
