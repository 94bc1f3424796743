"""The history store's line format and the helpers both kinds of store share: entries parsed
from and written as JSONL, new entries picked by id, lines removed by id, the cache folder."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from scalebench.spec.errors import UserError

# Rows that add `step_options`, `options`, `global_batch`, `tf32`, the launch fields,
# `efficiency_samples`, `sweep_id`, `faults`, `warnings`, `branch` and `disturbance` are still
# version 1: older rows without them read as single launches with the framework's default
# options, no faults, no warnings, no branch and no disturbance recorded, grouped into sweeps
# by their launch fields (history.sweep_groups).
HISTORY_VERSION = 1
STORE_FILE = "history.jsonl"  # the file a git store keeps on its branch
PUSH_TIMEOUT = 120.0  # seconds a git store retries rejected pushes before it gives up
SHAPES = ("a JSONL file path (e.g. history.jsonl) or a git location git:REPO#BRANCH "
          "(e.g. git:../history.git#scalebench-history)")


def cache_root() -> Path:
    """$SCALEBENCH_CACHE, default ~/.cache/scalebench (models/flops.py keeps its counts there)."""
    return Path(os.environ.get("SCALEBENCH_CACHE") or Path.home() / ".cache" / "scalebench")


def parse_lines(lines: Iterable[str], label: str) -> tuple[list[dict], list[str]]:
    """Entries of JSONL text; unknown format versions are refused, malformed lines reported
    as `label:LINE: skipped: why`."""
    entries, problems, _ = scan(lines, label)
    return entries, problems


def scan(lines: Iterable[str], label: str, first: int = 1
         ) -> tuple[list[dict], list[str], list[str | None]]:
    """parse_lines, and each line's entry id (None for a line that is not an entry), so that a
    later add or rewrite need not parse the same lines again (line_ids). first: the first
    line's number."""
    entries, problems, ids = [], [], []
    for number, line in enumerate(lines, start=first):
        entry, problem = _parse(line)
        if problem == "version":
            raise UserError(
                f"history store {label!r} line {number} has history_version "
                f"{entry['history_version']!r}; this scalebench reads version {HISTORY_VERSION}: "
                "use the scalebench that wrote it, or start a new store")
        if problem:
            problems.append(f"{label}:{number}: skipped: {problem}")
        elif entry is not None:
            entries.append(entry)
        ids.append(entry.get("id") if entry is not None and not problem else None)
    return entries, problems, ids


def _parse(line: str) -> tuple[dict | None, str]:
    """(entry, "") for an entry line, (None, "") for a blank one, else (what it was, why not)."""
    if not line.strip():
        return None, ""
    try:
        entry = json.loads(line)
    except json.JSONDecodeError as exc:
        return None, f"malformed JSON ({exc.msg})"
    if not isinstance(entry, dict) or "history_version" not in entry:
        return None, "not a history row"
    if entry["history_version"] != HISTORY_VERSION:
        return entry, "version"
    return entry, ""


def encode(entries: Iterable[dict]) -> str:
    """Entries as JSONL lines, each ending in a newline."""
    return "".join(json.dumps(e, allow_nan=False, default=str) + "\n" for e in entries)


def fresh(entries: list[dict], present: set[str]) -> list[dict]:
    """The entries whose id is in neither `present` nor earlier in the list; every entry gets
    the format version when it has none. An entry without an id is a programming error."""
    out, seen = [], set(present)
    for entry in entries:
        if not entry.get("id"):
            raise ValueError(f"a history entry needs an id: {entry!r:.200}")
        if entry["id"] in seen:
            continue
        seen.add(entry["id"])
        out.append({"history_version": HISTORY_VERSION, **entry})
    return out


def line_ids(text: str, label: str, known: tuple[str, list[str | None]] | None = None
             ) -> list[str | None]:
    """Each line's entry id (None for a line that is not an entry). known: (text read earlier,
    its ids): while `text` still begins with it (a store only appends between a read and the
    next write) only the lines after it are parsed."""
    lines = text.splitlines()
    ids: list[str | None] = []
    if known is not None and text.startswith(known[0]) and \
            len(known[1]) == len(known[0].splitlines()):
        ids = list(known[1])
        if ids and not known[0].endswith("\n"):
            ids.pop()  # that last line may have grown since: read it again
    return ids + scan(lines[len(ids):], label, first=len(ids) + 1)[2]


def without(text: str, drop: set[str], label: str,
            known: tuple[str, list[str | None]] | None = None) -> tuple[str, int]:
    """JSONL text without the entry lines whose id is in drop (every other line kept as it
    is), and how many lines it removed. known: as for line_ids."""
    kept, removed = [], 0
    for line, entry_id in zip(text.splitlines(keepends=True), line_ids(text, label, known),
                              strict=True):
        if entry_id is not None and entry_id in drop:
            removed += 1
        else:
            kept.append(line if line.endswith("\n") else line + "\n")
    return "".join(kept), removed
