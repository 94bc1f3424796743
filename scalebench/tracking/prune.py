"""`history prune`: which entries a bounded store keeps (pure; the store applies the plan).

--keep-points N keeps the last N sweeps of every configuration line (history.sweep_groups of
each panel x line); --keep-days N keeps every run row measured within the last N days (its
timestamp, else when it was added). Given both, a row stays when either keeps it. An accepted
change stays while its range still touches a kept row: a kept row measured one of its two
commits, or measured between them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from scalebench.spec.errors import UserError
from scalebench.tracking import history


@dataclass(frozen=True)
class Plan:
    keep: list[dict]  # every entry that stays, in store order
    removed: list[dict]  # run rows that go
    removed_accepted: list[dict]  # accepted changes that go
    summary: str  # what goes, in words (counts, dates and sweeps)


def _summary(removed: list[dict], times: dict[int, datetime], accepted: int) -> str:
    text = f"{len(removed)} run row{'s' if len(removed) != 1 else ''}"
    if removed:
        whens = sorted(times[id(r)] for r in removed)
        sweeps = {r.get("sweep_id") or f"commit {r.get('commit')}" for r in removed}
        text += (f" measured {whens[0]:%Y-%m-%d} to {whens[-1]:%Y-%m-%d}, from "
                 f"{len(sweeps)} sweep{'s' if len(sweeps) != 1 else ''}")
    if accepted:
        text += f", and {accepted} accepted change(s) no kept row touches"
    return text


def check(keep_days: float | None, keep_points: int | None) -> None:
    if keep_days is None and keep_points is None:
        raise UserError("history prune: give --keep-days N (rows newer than N days) or "
                        "--keep-points N (the last N sweeps of each configuration)")
    if keep_days is not None and not keep_days > 0:
        raise UserError(f"--keep-days {keep_days:g}: give a positive number of days")
    if keep_points is not None and keep_points < 1:
        raise UserError(f"--keep-points {keep_points}: give a whole number of sweeps, 1 or more")


def plan(entries: list[dict], keep_days: float | None = None, keep_points: int | None = None,
         now: datetime | None = None) -> Plan:
    check(keep_days, keep_points)
    rows, accepted = history.split_entries(entries)
    times = {id(r): history.row_time(r) for r in rows}  # once: a large store has many
    kept: set[int] = set()
    if keep_days is not None:
        since = (now or datetime.now().astimezone()) - timedelta(days=keep_days)
        kept |= {id(r) for r in rows if times[id(r)] >= since}
    if keep_points is not None:
        lines: dict[tuple, list[dict]] = {}
        for r in rows:
            lines.setdefault((history.panel_key(r), history.line_key(r)), []).append(r)
        for members in lines.values():
            sweeps = sorted(history.sweep_groups(members),
                            key=lambda g: min(times[id(r)] for r in g))
            kept |= {id(r) for g in sweeps[-keep_points:] for r in g}
    staying = [r for r in rows if id(r) in kept]
    touched = _touching(accepted, rows, staying, times)
    removed = [r for r in rows if id(r) not in kept]
    gone = [a for a in accepted if id(a) not in touched]
    return Plan(keep=[e for e in entries if id(e) in kept or id(e) in touched], removed=removed,
                removed_accepted=gone, summary=_summary(removed, times, len(gone)))


def _touching(accepted: list[dict], rows: list[dict], staying: list[dict],
              times: dict[int, datetime]) -> set[int]:
    """ids (id()) of the accepted entries whose range touches a kept row; an entry whose
    commits the store never measured is kept too (nothing says it is stale)."""
    first: dict[str, datetime] = {}
    for r in rows:
        if r.get("commit"):
            when = times[id(r)]
            first[r["commit"]] = min(first.get(r["commit"], when), when)
    out = set()
    for a in accepted:
        ends = [first.get(a.get("from")), first.get(a.get("to"))]
        if any(t is None for t in ends):
            out.add(id(a))
            continue
        low, high = min(ends), max(ends)
        if any(r.get("commit") in (a.get("from"), a.get("to")) or low <= times[id(r)] <= high
               for r in staying):
            out.add(id(a))
    return out
