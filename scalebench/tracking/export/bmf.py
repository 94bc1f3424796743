"""Bencher Metric Format (BMF) JSON, one report per sweep: benchmark (the configuration in
words) -> measure ("throughput", "efficiency") -> {value, lower_value, upper_value}, the bounds
being the point's 95% interval (bencher.dev/docs/reference/bencher-metric-format).

A BMF file has no place for when or from which commit it was measured, so the folder holds,
besides one `<n>-<sweep>.json` per sweep, `index.json` (per file: its sweep, commit, branch,
ISO time and epoch seconds) and `import.sh`, which sends the files oldest first with
`bencher run --adapter json --file F --backdate SECONDS [--hash SHA] [--branch B]`; project,
token and testbed come from BENCHER_PROJECT, BENCHER_API_TOKEN and BENCHER_TESTBED."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from scalebench.records import atomic
from scalebench.tracking.export import files
from scalebench.tracking.export.sweeps import Sweep, Value

DESCRIPTION = "Bencher Metric Format: a folder of one JSON report per sweep, index.json, import.sh"
FULL_SHA = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")  # what `bencher run --hash` takes


def metric(v: Value) -> dict[str, float]:
    out = {"value": v.value}
    if v.interval is not None:
        out["lower_value"], out["upper_value"] = v.interval
    return out


def report(sweep: Sweep) -> dict[str, dict[str, dict[str, float]]]:
    """One sweep as BMF: {benchmark: {measure: metric}}."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for v in sweep.values:
        out.setdefault(v.config, {})[v.metric] = metric(v)
    return out


def _command(entry: dict) -> str:
    words = ["bencher", "run", "--adapter", "json", "--file", entry["file"],
             "--backdate", str(entry["backdate"])]
    if entry["commit"] and FULL_SHA.fullmatch(entry["commit"]):
        words += ["--hash", entry["commit"]]
    if entry["branch"]:
        words += ["--branch", entry["branch"]]
    return " ".join(shlex.quote(w) for w in words)


def write(sweeps: list[Sweep], out: Path) -> list[Path]:
    files.fresh_folder(out)
    index, written = [], []
    for number, sweep in enumerate(sweeps, start=1):
        path = files.sweep_file(out, number, sweep)
        atomic.write_json(path, report(sweep), indent=1, allow_nan=False)
        written.append(path)
        index.append({"file": path.name, "sweep_id": sweep.sweep_id, "commit": sweep.commit,
                      "branch": sweep.branch, "time": sweep.utc.isoformat(),
                      "backdate": int(sweep.utc.timestamp())})
    atomic.write_json(out / "index.json", index, indent=1)
    script = ["#!/bin/sh", "# Sends these reports to Bencher oldest first (--backdate: when each "
              "sweep ran).", "# Set BENCHER_PROJECT, BENCHER_API_TOKEN and BENCHER_TESTBED "
              "first.", "set -e", 'cd "$(dirname "$0")"'] + [_command(e) for e in index]
    atomic.write_text(out / "import.sh", "\n".join(script) + "\n")
    (out / "import.sh").chmod(0o755)
    return written + [out / "index.json", out / "import.sh"]
