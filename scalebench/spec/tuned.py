"""tuned.toml, what `scalebench tune` leaves for a sweep: one [[cell]] per framework x model x
workers with the options that won there (none where the default was kept). A sweep given it
(`--tuned FILE`, or `tuned = "FILE"` in a workload) runs each such cell a second time with
those options, beside the default run; the options are parsed by the framework's own table."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomllib

from scalebench import frameworks
from scalebench.spec.errors import UserError

FORMAT_VERSION = 1
TUNED_TOML = "tuned.toml"


@dataclass(frozen=True)
class TunedCell:
    framework: str
    model: str
    workers: int
    options: dict[str, Any]  # the framework's option fields, already parsed by its table
    verdict: str


def load(path: str | Path) -> tuple[TunedCell, ...]:
    """tuned.toml's cells, each option parsed by its framework's table (UserError naming
    `tuned` and the field for a bad file)."""
    path = Path(path)
    if path.is_dir():
        path = path / TUNED_TOML
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise UserError(f"tuned: {path} does not exist (write one with `scalebench tune`)") from None
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"tuned: {path} is not valid TOML: {exc}") from None
    if data.get("format_version") != FORMAT_VERSION:
        raise UserError(f"tuned: {path} has format_version {data.get('format_version')!r}; this "
                        f"scalebench reads {FORMAT_VERSION}")
    cells = []
    for i, raw in enumerate(data.get("cell", []), start=1):
        where = f"tuned: {path} cell {i}"
        framework = raw.get("framework")
        if framework not in frameworks.names():
            raise UserError(f"{where}: framework {framework!r} not one of "
                            f"{', '.join(frameworks.names())}")
        adapter = frameworks.get(framework)
        knob_names = {k.option for k in adapter.knobs}
        options = {}
        for key, value in (raw.get("options") or {}).items():
            if key not in knob_names:
                raise UserError(f"{where}: options.{key} is not a knob of {framework} "
                                f"(its knobs: {', '.join(sorted(knob_names))})")
            options[key] = adapter.table[key](value)
        if not isinstance(raw.get("model"), str) or not isinstance(raw.get("workers"), int):
            raise UserError(f"{where}: needs model (text) and workers (an integer)")
        cells.append(TunedCell(framework, raw["model"], raw["workers"], options,
                               str(raw.get("verdict", ""))))
    return tuple(cells)
