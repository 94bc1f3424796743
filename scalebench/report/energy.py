"""The report's energy section: images per joule by worker count, next to efficiency. The
numbers are the summary rows' (hardware/energy.row_fields); this module holds the words and
what to say when nothing was measured; the table is tables.energy_table."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

KEY = "energy"
TITLE = "Energy (component energy, not MLPerf Power)"
TEXT = (
    "Energy of the timed windows only: each worker's GPU board from NVML's total-energy "
    "counter and each node's CPU packages from RAPL (/sys/class/powercap), read just before "
    "each window's clock starts and just after it stops, never inside a window. **Images per "
    "joule** = all workers' images / all measured joules; **watts per worker** = those joules "
    "over the workers' window seconds. This is component energy: no power supply losses, "
    "memory, fans, network or cooling, so it is not MLPerf Power and reads lower than power "
    "at the wall. A row says what was measured (gpu, cpu); where nothing was, why.",
)


class HasRows(Protocol):
    title: str
    rows: tuple[dict, ...]


def groups(all_groups: Sequence[HasRows]) -> list[HasRows]:
    """The scaling series with energy measured for at least one run."""
    return [g for g in all_groups if any(r.get("joules_per_image") for r in g.rows)]


def empty_text(rows: Sequence[dict]) -> str:
    """Why no run has energy ("" when one has), each distinct reason once."""
    if not rows or any(r.get("joules_per_image") for r in rows):
        return "" if rows else "No successful runs."
    reasons = dict.fromkeys(str(r.get("energy_measured", "")).removeprefix("not measured: ")
                            for r in rows)
    return "No run here measured energy: " + "; ".join(r for r in reasons if r) + "."
