"""The parts of a record every task shares: format version, common fields, the field check,
and the launch fields. Tasks add their own fields (tasks/<kind>.py); results.py stores them.

Records are the raw data; efficiency is derived at analysis time and never stored as the only
copy.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from scalebench.spec.launch import Job

# The version this scalebench writes, and every version it reads. Version 2 added
# `disturbance` to train records (analysis/disturbance.py); a version-1 record reads as one
# whose disturbance was not recorded.
SCHEMA_VERSION = 2
READABLE_VERSIONS = (1, 2)
STATUSES = ("ok", "failed", "timeout", "skipped")

# field -> allowed types; checked on every record built and every record read
COMMON_FIELDS: dict[str, tuple[type, ...]] = {
    "schema_version": (int,),
    "kind": (str,),
    "status": (str,),
    "timestamp": (str,),
    "env": (dict,),
}
LAUNCH_FIELDS: dict[str, tuple[type, ...]] = {
    "run_id": (str,),
    "framework": (str,),
    "world_size": (int,),
    "nodes": (int,),
    "device": (str,),
    "backend": (str,),
    "threads_per_worker": (int,),
    "options": (dict,),
    "error": (str, type(None)),
}
# Written by this version, absent from older records (readers default them: local, 1, 1).
OPTIONAL_LAUNCH_FIELDS: dict[str, tuple[type, ...]] = {
    "launcher": (str,),
    "scheduler": (dict,),  # e.g. Slurm's job id, step id and node list
    "repeat": (int,),
    "repeats": (int,),
    "order_seed": (int, type(None)),
    "launch": (str,),  # grouped or isolated
    "group_id": (str,),
    "group_position": (int,),
    "group_size": (int,),
    "sweep_id": (str,),  # the sweep that wrote it (executor.execute; --resume keeps it)
    "vetting": (dict,),  # the vetting that placed the run: its id, the nodes left out and why
    "rerun_of": (str,),  # sweep --strict: the run id of the disturbed run this one repeats
}


# Train records written by this version also carry energy (hardware/energy.RECORD_FIELDS) and
# each rank's placement (`worker_placement`); readers treat their absence as "not recorded".
OPTIONAL_TRAIN_FIELDS: dict[str, tuple[type, ...]] = {
    "joules_per_image": (float, type(None)),
    "mean_watts_per_worker": (float, type(None)),
    "energy": (dict,),
    "worker_placement": (list,),
    "disturbance": (dict,),  # schema 2: what else ran during the windows (analysis/disturbance)
}


def check_optional(record: dict[str, Any], fields: dict[str, tuple[type, ...]]) -> None:
    """Fields that may be absent, but have an allowed type when present."""
    check_fields(record, {k: v for k, v in fields.items() if k in record})


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


def check_common(record: dict[str, Any]) -> None:
    """Format version, common fields, status and its reason."""
    if record.get("schema_version") not in READABLE_VERSIONS:
        raise RecordError(
            f"schema_version {record.get('schema_version')!r} is not supported (this scalebench "
            f"reads versions {', '.join(map(str, READABLE_VERSIONS))}); re-run the sweep or use "
            "the scalebench that wrote it"
        )
    check_fields(record, COMMON_FIELDS)
    check_optional(record, OPTIONAL_LAUNCH_FIELDS)
    if record["status"] not in STATUSES:
        raise RecordError(f"status {record['status']!r} not one of {', '.join(STATUSES)}")
    if record["status"] != "ok" and not record.get("error"):
        raise RecordError("a non-ok record needs an error (its reason)")


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def new_sweep_id() -> str:
    """A sweep's own id: when it started and a random part (two sweeps in one second differ)."""
    return f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"


def launch_fields(job: Job, env: dict) -> dict[str, Any]:
    """The fields every record of a job starts with."""
    launch = job.launch
    return {
        "schema_version": SCHEMA_VERSION, "kind": job.kind, "timestamp": now_iso(),
        "run_id": job.run_id, "framework": launch.framework, "world_size": launch.world_size,
        "nodes": launch.nodes, "device": launch.device, "backend": launch.backend,
        "threads_per_worker": launch.threads_per_worker, "options": launch.options_dict(),
        "launcher": launch.launcher, "repeat": job.repeat, "repeats": job.repeats,
        "order_seed": job.order_seed,
        "launch": "isolated" if job.group is None else "grouped",
        **({} if job.group is None else {"group_id": job.group.group_id,
                                         "group_position": job.group.position,
                                         "group_size": job.group.size}),
        "env": env,
    }
