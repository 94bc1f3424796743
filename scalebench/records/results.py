"""The results store: validation of every record (common fields, then its task's, with the
value rules of records.validity), JSONL append and load (invalid lines handed back as Invalid),
the keys already done (--resume), a DataFrame view.

results.jsonl holds one JSON object per line, appended and flushed as each run ends.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from scalebench import tasks
from scalebench.records import validity
from scalebench.records.schema import SCHEMA_VERSION, RecordError, check_common, check_fields, now_iso
from scalebench.records.validity import Invalid
from scalebench.spec import identity
from scalebench.spec.errors import UserError

__all__ = ["SCHEMA_VERSION", "RESULTS_FILE", "RecordError", "check_fields", "now_iso", "validate",
           "append", "load", "resolve_inputs", "done_keys", "sweep_id_of", "Problem", "Invalid",
           "to_frame"]

RESULTS_FILE = "results.jsonl"


def validate(record: dict[str, Any]) -> None:
    """Raise RecordError naming the first bad field. Records of a kind this scalebench does
    not know are checked for the common fields only."""
    check_common(record)
    if tasks.known(record["kind"]):
        tasks.get(record["kind"]).check_record(record)


def append(path: Path, record: dict[str, Any]) -> None:
    """Append one validated record and flush it to disk before returning."""
    validate(record)
    line = json.dumps(record, allow_nan=False, default=str)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(line + "\n")
        fh.flush()
        os.fsync(fh.fileno())


# An invalid line of a results file (records.validity: what makes a record invalid).
Problem = Invalid


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


def load(paths: Iterable[str | os.PathLike]) -> tuple[list[dict], list[Invalid]]:
    """Every valid record of the given files, and every invalid line as an Invalid (file, line,
    reason, the record where the line parsed). Readers must not treat an invalid record as
    absent (records.validity)."""
    records: list[dict] = []
    invalid: list[Invalid] = []
    for path in resolve_inputs(paths):
        with open(path, encoding="utf-8", errors="replace") as fh:
            for number, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                record = None
                try:
                    record = validity.parse_line(line)
                    validate(record)
                except RecordError as exc:
                    invalid.append(Invalid(str(path), number, str(exc), record))
                    continue
                records.append(record)
    return records, invalid


def sweep_id_of(path: Path) -> str | None:
    """The sweep id of the newest record in this file that carries one (None: no file, or
    records written before sweep ids)."""
    if not path.is_file():
        return None
    records, _ = load([path])
    return next((r["sweep_id"] for r in reversed(records) if r.get("sweep_id")), None)


def done_keys(path: Path) -> set[tuple]:
    """identity.resume_key of every record already ok in this file (for --resume)."""
    if not path.is_file():
        return set()
    records, _ = load([path])
    return {identity.resume_key(r) for r in records if r["status"] == "ok"}


def to_frame(records: list[dict]):
    """Train records as a pandas DataFrame (one row per run, env flattened to a few columns)."""
    import pandas as pd

    rows = []
    for r in records:
        if r.get("kind") != "train":
            continue
        row = {k: v for k, v in r.items() if k not in ("env", "window_seconds", "options")}
        row["hostname"] = r["env"].get("hostname")
        row["device_kind"] = identity.device_kind(r)
        rows.append(row)
    return pd.DataFrame(rows)
