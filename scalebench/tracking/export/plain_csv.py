"""Plain CSV, one row per run of the store (failed runs too, with their error): when, which
sweep and commit, the configuration (in words and field by field), the launch, and the run's
own figures (its mean images/s over its trials, its efficiency against the paired one-worker
launch)."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from scalebench.records import atomic
from scalebench.tracking.export.sweeps import config_name, runs

DESCRIPTION = "plain CSV, one row per run"
COLUMNS = ("time", "sweep_id", "commit", "branch", "configuration", "framework", "model",
           "world_size", "nodes", "batch_size", "image_size", "precision", "device_kind",
           "scaling", "repeat", "repeats", "status", "images_per_sec", "trials", "efficiency",
           "error", "id")


def row(entry: dict) -> list[object]:
    values = {**entry, "time": entry.get("timestamp") or entry.get("added_at"),
              "configuration": config_name(entry),
              "trials": len(entry.get("trial_images_per_sec") or ())}
    return ["" if values.get(c) is None else values[c] for c in COLUMNS]


def render(entries: list[dict]) -> str:
    buffer = io.StringIO()
    out = csv.writer(buffer, lineterminator="\n")
    out.writerow(COLUMNS)
    for entry in runs(entries):  # store order: the order they were added
        out.writerow(row(entry))
    return buffer.getvalue()


def write(entries: list[dict], out: Path) -> list[Path]:
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_text(out, render(entries))
    return [out]
