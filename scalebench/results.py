"""The run record: schema, validation when built, JSONL append/load, DataFrame view.

results.jsonl holds one JSON object per line, appended and flushed as each run ends. Records
are the raw data; efficiency is derived at analysis time and never stored as the only copy.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scalebench import stats
from scalebench.config import RunSpec, run_key
from scalebench.errors import UserError
from scalebench.frameworks.base import STATUSES, LaunchOutcome

SCHEMA_VERSION = 1
RESULTS_FILE = "results.jsonl"

# field -> allowed types; checked on every record built and every record read
COMMON_FIELDS: dict[str, tuple[type, ...]] = {
    "schema_version": (int,),
    "kind": (str,),
    "status": (str,),
    "timestamp": (str,),
    "env": (dict,),
}
TRAIN_FIELDS: dict[str, tuple[type, ...]] = {
    "run_id": (str,),
    "framework": (str,),
    "model": (str,),
    "world_size": (int,),
    "nodes": (int,),
    "batch_size": (int,),
    "global_batch": (int,),
    "image_size": (int,),
    "aux_logits": (bool,),
    "precision": (str,),
    "device": (str,),
    "backend": (str,),
    "scaling": (str,),
    "data": (str,),
    "warmup": (int,),
    "iters": (int,),
    "trials": (int,),
    "threads_per_worker": (int,),
    "params": (int,),
    "options": (dict,),
    "error": (str, type(None)),
}
OK_FIELDS: dict[str, tuple[type, ...]] = {
    "images_per_sec": (float,),
    "trial_images_per_sec": (list,),
    "per_worker_images_per_sec": (float,),
    "per_rank_images_per_sec": (list,),
    "window_seconds": (list,),
    "startup_seconds": (float, type(None)),
    "hosts": (list,),
}


class RecordError(ValueError):
    pass


def check_fields(record: dict[str, Any], fields: dict[str, tuple[type, ...]]) -> None:
    """Every field present with an allowed type (an int passes for a float, a bool never
    for an int); RecordError names the first that is not."""
    for name, types in fields.items():
        if name not in record:
            raise RecordError(f"missing field {name!r}")
        value = record[name]
        if float in types and isinstance(value, int) and not isinstance(value, bool):
            continue
        if not isinstance(value, types) or (bool not in types and isinstance(value, bool)):
            raise RecordError(f"field {name!r} has type {type(value).__name__}")


def validate(record: dict[str, Any]) -> None:
    """Raise RecordError naming the first bad field."""
    if record.get("schema_version") != SCHEMA_VERSION:
        raise RecordError(
            f"schema_version {record.get('schema_version')!r} is not supported (this scalebench "
            f"reads version {SCHEMA_VERSION}); re-run the sweep or use the scalebench that wrote it"
        )
    fields = dict(COMMON_FIELDS)
    if record.get("kind") == "train":
        fields.update(TRAIN_FIELDS)
        if record.get("status") == "ok":
            fields.update(OK_FIELDS)
    check_fields(record, fields)
    if record["status"] not in STATUSES:
        raise RecordError(f"status {record['status']!r} not one of {', '.join(STATUSES)}")
    if record["status"] != "ok" and not record.get("error"):
        raise RecordError("a non-ok record needs an error (its reason)")
    if record.get("kind") == "train" and record["status"] == "ok":
        if len(record["trial_images_per_sec"]) != record["trials"]:
            raise RecordError("trial_images_per_sec does not have one value per trial")
        if not all(math.isfinite(v) and v > 0 for v in record["trial_images_per_sec"]):
            raise RecordError("trial_images_per_sec has a non-positive or non-finite value")
    if record.get("kind") == "allreduce":
        from scalebench.allreduce import validate_fields  # that record kind's own fields

        validate_fields(record)


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def train_record(spec: RunSpec, outcome: LaunchOutcome | None, env: dict, skipped_reason: str = ""
                 ) -> dict[str, Any]:
    """Build (and validate) the record of one run from its spec and launch outcome."""
    record: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION, "kind": "train", "timestamp": now_iso(),
        "run_id": spec.run_id, "framework": spec.framework, "model": spec.model,
        "world_size": spec.world_size, "nodes": spec.nodes,
        "batch_size": spec.batch_size, "global_batch": spec.global_batch,
        "image_size": spec.image_size, "aux_logits": spec.aux_logits,
        "precision": spec.precision, "device": spec.device, "backend": spec.backend,
        "scaling": spec.scaling, "data": spec.data, "warmup": spec.warmup, "iters": spec.iters,
        "trials": spec.trials, "threads_per_worker": spec.threads_per_worker,
        "params": spec.params, "options": spec.options, "env": env,
    }
    if outcome is None:
        record.update(status="skipped", error=skipped_reason)
        validate(record)
        return record
    record.update(status=outcome.status, error=outcome.error, artifacts=outcome.artifacts)
    if outcome.nodes is not None:
        record["nodes"] = outcome.nodes
    if outcome.status != "ok":
        record["stderr_tail"] = outcome.stderr_tail
        validate(record)
        return record
    result = outcome.result
    windows = result["window_seconds"]
    trial = stats.trial_throughputs(windows, spec.global_batch * spec.iters)
    summary = stats.summarize(trial)
    first_step = result.get("first_timed_step_unix")
    startup = (first_step - outcome.launch_unix
               if first_step is not None and outcome.launch_unix is not None else None)
    record.update(
        images_per_sec=summary.mean,
        images_per_sec_median=summary.median,
        images_per_sec_std=summary.std,
        images_per_sec_ci95=[summary.ci_low, summary.ci_high],
        trial_images_per_sec=trial,
        per_worker_images_per_sec=summary.mean / spec.world_size,
        per_rank_images_per_sec=stats.per_rank_throughputs(windows, spec.batch_size * spec.iters),
        window_seconds=windows,
        startup_seconds=startup,
        warmup_seconds=result.get("warmup_seconds"),
        hosts=result.get("hostnames", []),
        device_names=result.get("device_names", []),
        threads_measured=result.get("threads", []),
        final_loss=_finite_or_none(result.get("final_loss", [])),
        param_checksums=_finite_or_none(result.get("param_checksums", [])),
        warnings=run_warnings(result),
        topology=result.get("topology", []),
        aux_logits=bool(result.get("aux_logits", spec.aux_logits)),
    )
    validate(record)
    return record


def _finite_or_none(values: list) -> list:
    return [v if isinstance(v, (int, float)) and math.isfinite(v) else None for v in values]


def run_warnings(result: dict) -> list[str]:
    """Facts about a successful run a reader must not miss."""
    notes = []
    losses = result.get("final_loss", [])
    bad = [rank for rank, v in enumerate(losses) if v is None or not math.isfinite(v)]
    if bad:
        notes.append(f"final loss is not finite on ranks {bad}: training diverged "
                     "(throughput is still measured)")
    sums = [v for v in result.get("param_checksums", []) if v is not None and math.isfinite(v)]
    if len(sums) > 1 and max(sums) - min(sums) > 1e-6 * max(1.0, abs(max(sums))):
        notes.append("replicas hold different weights at the end of the run: gradients were "
                     "not averaged consistently")
    return notes


def append(path: Path, record: dict[str, Any]) -> None:
    """Append one validated record and flush it to disk before returning."""
    validate(record)
    line = json.dumps(record, allow_nan=False, default=str)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(line + "\n")
        fh.flush()
        os.fsync(fh.fileno())


@dataclass(frozen=True)
class Problem:
    path: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: skipped: {self.reason}"


def resolve_inputs(paths: Iterable[str | os.PathLike]) -> list[Path]:
    """Results files or sweep output folders (which hold results.jsonl)."""
    files = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            p = p / RESULTS_FILE
        if not p.is_file():
            raise UserError(f"results: {str(raw)!r} is neither a results file nor a folder holding "
                            f"{RESULTS_FILE}")
        files.append(p)
    return files


def load(paths: Iterable[str | os.PathLike]) -> tuple[list[dict], list[Problem]]:
    """Every valid record of the given files; bad lines are reported with their line number."""
    records: list[dict] = []
    problems: list[Problem] = []
    for path in resolve_inputs(paths):
        with open(path, encoding="utf-8", errors="replace") as fh:
            for number, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                    if not isinstance(record, dict):
                        raise RecordError("not a JSON object")
                    validate(record)
                except json.JSONDecodeError as exc:
                    problems.append(Problem(str(path), number, f"malformed JSON ({exc.msg})"))
                    continue
                except RecordError as exc:
                    problems.append(Problem(str(path), number, str(exc)))
                    continue
                records.append(record)
    return records, problems


def ok_keys(path: Path) -> set[tuple]:
    """Configurations already recorded ok (for --resume)."""
    if not path.is_file():
        return set()
    records, _ = load([path])
    return {run_key(r) for r in records if r.get("kind") == "train" and r["status"] == "ok"}


def to_frame(records: list[dict]):
    """Train records as a pandas DataFrame (one row per run, env flattened to a few columns)."""
    import pandas as pd

    rows = []
    for r in records:
        if r.get("kind") != "train":
            continue
        row = {k: v for k, v in r.items() if k not in ("env", "window_seconds", "options")}
        row["hostname"] = r["env"].get("hostname")
        row["device_kind"] = r["env"].get("device_kind", r["device"])
        rows.append(row)
    return pd.DataFrame(rows)
