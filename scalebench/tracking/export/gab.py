"""github-action-benchmark: per sweep, the `customBiggerIsBetter` input the action reads
(a JSON array of {name, unit, value, range, extra}; its README, "custom" tools), and `data.js`,
the file its gh-pages chart page loads: `window.BENCHMARK_DATA = {lastUpdate, repoUrl, entries:
{suite: [{commit, date, tool, benches}]}}` (its src/write.ts and src/extract.ts). Both metrics
are higher-is-better. A bench is one configuration's metric, so the page draws one chart per
configuration and metric, a point per sweep."""

from __future__ import annotations

import json
from pathlib import Path

from scalebench.records import atomic
from scalebench.report.format import num
from scalebench.tracking.export import files
from scalebench.tracking.export.sweeps import Sweep, Value

DESCRIPTION = ("github-action-benchmark: customBiggerIsBetter JSON per sweep, and data.js for "
               "its gh-pages page")
TOOL = "customBiggerIsBetter"
SUITE = "scalebench"  # the action's `name` input: keep it to feed the same page afterwards
DATA_JS_PREFIX = "window.BENCHMARK_DATA = "  # as the action writes and reads it


def bench(v: Value) -> dict[str, object]:
    out: dict[str, object] = {"name": f"{v.config} {v.metric}", "unit": v.unit, "value": v.value}
    if v.interval is not None:
        out["range"] = f"± {num((v.interval[1] - v.interval[0]) / 2, '.4g')}"
    launches = f"{v.launches} launch{'es' if v.launches != 1 else ''}"
    out["extra"] = f"95% interval over {launches if v.launches > 1 else f'{v.trials} trials'}"
    return out


def benches(sweep: Sweep) -> list[dict[str, object]]:
    """One sweep as the action's custom-tool input."""
    return [bench(v) for v in sweep.values]


def _commit(sweep: Sweep, repo_url: str) -> dict[str, object]:
    sha = sweep.commit or "unknown"
    who = {"name": "unknown", "username": "unknown"}  # the page shows committer.username
    return {"author": who, "committer": dict(who), "id": sha,
            "message": f"scalebench sweep {sweep.sweep_id or sweep.key}",
            "timestamp": sweep.utc.isoformat(),
            "url": f"{repo_url.rstrip('/')}/commit/{sha}" if repo_url and sweep.commit else ""}


def _millis(sweep: Sweep) -> int:
    return int(sweep.utc.timestamp() * 1000)


def data(sweeps: list[Sweep], repo_url: str = "") -> dict[str, object]:
    """The page's data: every sweep, oldest first, under one suite."""
    entries = [{"commit": _commit(s, repo_url), "date": _millis(s), "tool": TOOL,
                "benches": benches(s)} for s in sweeps]
    return {"lastUpdate": max((_millis(s) for s in sweeps), default=0), "repoUrl": repo_url,
            "entries": {SUITE: entries}}


def write(sweeps: list[Sweep], out: Path, repo_url: str = "") -> list[Path]:
    files.fresh_folder(out)
    written = []
    for number, sweep in enumerate(sweeps, start=1):
        path = files.sweep_file(out, number, sweep)
        atomic.write_json(path, benches(sweep), indent=1, allow_nan=False)
        written.append(path)
    path = out / "data.js"
    atomic.write_text(path, DATA_JS_PREFIX + json.dumps(data(sweeps, repo_url), indent=2,
                                                        allow_nan=False))
    return written + [path]
