"""Apache Otava's CSV input (docs/CSV.md and its CsvImporter): a header row, a time column,
attribute columns (commit, sweep, and branch when the store records one: Otava then asks for
`--branch`), and a number column per configuration and metric, one row per sweep; with
`otava.yaml`, a test per file whose metrics name those columns (direction 1: higher is better).

Otava's reader converts every metric cell of a row to a float, so a row cannot leave one
empty: columns that cover the same sweeps share a file (`scalebench.csv`; where a
configuration missed some sweeps, its columns go to `scalebench-2.csv`, ... with their own
test). Run `otava --config-file otava.yaml analyze scalebench` from the folder."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from scalebench.records import atomic
from scalebench.tracking.export.sweeps import Sweep

DESCRIPTION = "Apache Otava: CSV files (a row per sweep, a column per configuration and metric) " \
              "and otava.yaml"
TEST = "scalebench"
TIME = "time"
TIME_FORMAT = "%Y-%m-%d %H:%M:%S %z"  # as Otava prints times; its reader takes any dateparser form


def column(config: str, metric: str) -> str:
    return f"{config} {metric}"


def tables(sweeps: list[Sweep]) -> list[tuple[str, list[str], list[Sweep]]]:
    """(test name, metric columns, sweeps) per file: the columns that have a value in exactly
    the same sweeps, the largest group first."""
    cover: dict[str, list[int]] = {}
    for i, sweep in enumerate(sweeps):
        for v in sweep.values:
            cover.setdefault(column(v.config, v.metric), []).append(i)
    groups: dict[tuple[int, ...], list[str]] = {}
    for name, where in cover.items():
        groups.setdefault(tuple(where), []).append(name)
    ordered = sorted(groups.items(), key=lambda kv: (-len(kv[0]), -len(kv[1]), kv[1]))
    return [(TEST if n == 0 else f"{TEST}-{n + 1}", sorted(cols), [sweeps[i] for i in where])
            for n, (where, cols) in enumerate(ordered)]


def render(columns: list[str], sweeps: list[Sweep]) -> str:
    branches = any(s.branch for s in sweeps)
    buffer = io.StringIO()
    out = csv.writer(buffer, lineterminator="\n")
    out.writerow([TIME, "commit", "sweep"] + (["branch"] if branches else []) + columns)
    for sweep in sweeps:
        values = {column(v.config, v.metric): v.value for v in sweep.values}
        out.writerow([sweep.utc.strftime(TIME_FORMAT), sweep.commit or "", sweep.sweep_id or ""]
                     + ([sweep.branch or ""] if branches else [])
                     + [repr(values[c]) for c in columns])
    return buffer.getvalue()


def config_yaml(files: list[tuple[str, str, list[str]]]) -> str:
    """otava.yaml: a csv test per (test, file, columns). Strings are written as JSON strings,
    which YAML reads as they are."""
    lines = ["# Apache Otava tests over the CSV files beside this file (run otava from here).",
             "tests:"]
    for test, file, columns in files:
        lines += [f"  {json.dumps(test)}:", "    type: csv", f"    file: {json.dumps(file)}",
                  f"    time_column: {TIME}", "    attributes: [commit, sweep]", "    metrics:"]
        for c in columns:
            lines += [f"      {json.dumps(c)}:", f"        column: {json.dumps(c)}",
                      "        direction: 1"]
    return "\n".join(lines) + "\n"


def write(sweeps: list[Sweep], out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written, files = [], []
    for test, columns, members in tables(sweeps):
        path = out / f"{test}.csv"
        atomic.write_text(path, render(columns, members))
        written.append(path)
        files.append((test, path.name, columns))
    path = out / "otava.yaml"
    atomic.write_text(path, config_yaml(files))
    return written + [path]
