"""Exports of a history store to the tools teams already run: renderers of the same rows, one
module per format (bmf: Bencher; gab: github-action-benchmark; otava: Apache Otava; plain_csv),
all but the plain CSV over the sweeps of sweeps.py. FORMATS is the registry `history export
--format` reads."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from scalebench.spec.errors import UserError
from scalebench.tracking.export import bmf, gab, otava, plain_csv
from scalebench.tracking.export.sweeps import runs, sweeps


@dataclass(frozen=True)
class Options:
    repo_url: str = ""  # github-action-benchmark links each commit under it


@dataclass(frozen=True)
class Format:
    description: str
    out: str  # what --out names: "folder" or "file"
    write: Callable[[list[dict], Path, Options], list[Path]]


def _sweeps(entries: list[dict]) -> list:
    found = sweeps(entries)
    if not found:
        raise UserError("history store holds no successful run to export")
    return found


def _runs(entries: list[dict]) -> list[dict]:
    if not runs(entries):
        raise UserError("history store holds no run to export")
    return entries


FORMATS: dict[str, Format] = {
    "bmf": Format(bmf.DESCRIPTION, "folder", lambda e, out, o: bmf.write(_sweeps(e), out)),
    "gab": Format(gab.DESCRIPTION, "folder",
                  lambda e, out, o: gab.write(_sweeps(e), out, o.repo_url)),
    "otava": Format(otava.DESCRIPTION, "folder", lambda e, out, o: otava.write(_sweeps(e), out)),
    "csv": Format(plain_csv.DESCRIPTION, "file", lambda e, out, o: plain_csv.write(_runs(e), out)),
}


def get(name: str) -> Format:
    if name not in FORMATS:
        raise UserError(f"--format: unknown format {name!r}; one of {', '.join(FORMATS)}")
    return FORMATS[name]


def export(entries: list[dict], name: str, out: Path, options: Options = Options()) -> list[Path]:
    """Write the store's rows in format `name` to `out` (a folder or a file, Format.out);
    the paths written."""
    fmt = get(name)
    if fmt.out == "folder" and out.exists() and not out.is_dir():
        raise UserError(f"--out: format {name} writes a folder; {str(out)!r} is a file")
    if fmt.out == "file" and out.is_dir():
        raise UserError(f"--out: format {name} writes a file; {str(out)!r} is a folder")
    return fmt.write(entries, out, options)
