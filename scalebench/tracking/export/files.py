"""The per-sweep files of the folder formats (bmf, gab): `<n>-<sweep>.json`, numbered oldest
first. A new export replaces the numbered files an earlier one left in the folder, so a
folder never mixes two exports."""

from __future__ import annotations

import re
from pathlib import Path

from scalebench.tracking.export.sweeps import Sweep

NUMBERED = re.compile(r"\d{4}-[A-Za-z0-9_.-]*\.json")


def sweep_file(out: Path, number: int, sweep: Sweep) -> Path:
    tag = re.sub(r"[^A-Za-z0-9_.-]+", "-", sweep.sweep_id or sweep.commit or "sweep")[:40]
    return out / f"{number:04d}-{tag}.json"


def fresh_folder(out: Path) -> None:
    """Create `out`, or remove the numbered files an earlier export wrote there."""
    out.mkdir(parents=True, exist_ok=True)
    for path in out.iterdir():
        if path.is_file() and NUMBERED.fullmatch(path.name):
            path.unlink()
