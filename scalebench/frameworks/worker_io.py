"""Worker-side plumbing shared by launched workers: read the spec, run, write result or error.

Results never travel over stdout (launchers and NCCL print freely): rank 0 writes result.json,
a failing rank writes error-rank<N>.json with its traceback for the parent to record.
"""

from __future__ import annotations

import importlib
import json
import os
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scalebench.comm import Comm
from scalebench.config import RunSpec
from scalebench.frameworks.process import RESULT_FILE, SPEC_FILE

# spec "kind" -> (module, spec class, function(spec, comm) -> rank-0 result or None)
TASKS: dict[str, tuple[str, str, str]] = {
    "train": ("scalebench.measure", "scalebench.config:RunSpec", "run"),
    "allreduce": ("scalebench.allreduce", "scalebench.allreduce:AllreduceSpec", "run"),
}


def parse_spec(text: str) -> Any:
    """The spec object for a worker, of the type its "kind" names."""
    data = json.loads(text)
    module, spec_type, _ = TASKS[data.get("kind", "train")]
    type_module, type_name = spec_type.split(":")
    return getattr(importlib.import_module(type_module), type_name)(**data)


def execute(spec: Any, comm: Comm) -> dict | None:
    """Run the spec's task in this worker; the same entry for launched and Ray workers."""
    module, _, function = TASKS[spec.kind]
    return getattr(importlib.import_module(module), function)(spec, comm)


def read_spec(run_dir: Path) -> RunSpec:
    return parse_spec((run_dir / SPEC_FILE).read_text())


def _atomic_write(path: Path, data: dict) -> None:
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(data))
    tmp.replace(path)


def write_error(run_dir: Path, rank: int, exc: BaseException) -> None:
    _atomic_write(run_dir / f"error-rank{rank}.json", {
        "rank": rank,
        "error": f"{type(exc).__name__}: {exc}".splitlines()[0][:500],
        "traceback": "".join(traceback.format_exception(exc)),
    })


def run_worker(run_dir: Path, make_comm: Callable[[RunSpec], Comm], rank_hint: int) -> int:
    """Entry point body for one launched worker. Returns the process exit code."""
    rank = rank_hint
    try:
        spec = read_spec(run_dir)
        comm = make_comm(spec)
        rank = comm.rank
        result = execute(spec, comm)
        if result is not None:
            _atomic_write(run_dir / RESULT_FILE, result)
        return 0
    except BaseException as exc:  # noqa: BLE001 - everything goes back to the parent
        write_error(run_dir, rank, exc)
        traceback.print_exc()
        return 1
