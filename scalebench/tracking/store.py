"""Where history entries live: one small interface over two kinds of place.

An entry is one JSON object per line (a run row, or another kind such as an accepted change),
each with `history_version` and a unique `id`; adding is idempotent by id, so a retried add can
never write a row twice. `open_store(text)` reads the `--store` text: a plain path is a JSONL
file (store_file.FileStore), `git:REPO#BRANCH` one JSONL file on a branch of a git repository
(store_git.GitStore). Reading never writes; writing takes the store's own exclusion (a file
lock, or git's refusal of a push that is not a fast-forward).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Protocol

from scalebench.spec.errors import UserError
from scalebench.tracking import store_file, store_git
from scalebench.tracking.store_format import HISTORY_VERSION, PUSH_TIMEOUT, SHAPES, STORE_FILE

__all__ = ["HISTORY_VERSION", "PUSH_TIMEOUT", "SHAPES", "STORE_FILE", "Store", "open_store"]
_GIT = re.compile(r"^git:(?P<repo>[^#]+)#(?P<branch>[^#]+)$")


class Store(Protocol):
    """A history store: entries read whole, added by id, rewritten for pruning."""

    location: str  # as the user wrote it, for messages

    def entries(self) -> tuple[list[dict], list[str]]:
        """Every entry, and one problem line per line that is not an entry (skipped). A store
        that does not exist yet is a UserError."""
        ...

    def add_entries(self, entries: list[dict], message: str) -> tuple[int, int]:
        """Append the entries whose id the store does not hold yet. Returns (added, already
        there). message: what the change was (a git store's commit message)."""
        ...

    def rewrite(self, keep: list[dict], message: str) -> int:
        """Remove every entry this store read at its last entries() that is not in keep (by
        id); entries others added since stay, and so do lines that are not entries. Returns
        how many entries it removed."""
        ...


def open_store(text: str, push_timeout: float = PUSH_TIMEOUT) -> Store:
    """The store `--store TEXT` names: `git:REPO#BRANCH` or a file path."""
    text = (text or "").strip()
    if text.startswith("git:"):

        match = _GIT.match(text)
        if not match or not match["repo"].strip() or not match["branch"].strip():
            raise UserError(f"--store {text!r}: not a store location; give {SHAPES}")
        return store_git.GitStore(match["repo"].strip(), match["branch"].strip(), push_timeout)
    if not text:
        raise UserError(f"--store is empty; give {SHAPES}")
    path = Path(text).expanduser()
    if path.is_dir():
        raise UserError(f"--store {text!r} is a folder; give {SHAPES}")
    return store_file.FileStore(path)
