"""A history store in one JSONL file. Writers hold an exclusive lock (flock on FILE.lock beside
it) from reading the ids through appending, so two processes adding at once never interleave
lines or write a row twice; readers hold a shared one, so they never see half a line."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from scalebench.records import atomic
from scalebench.spec.errors import UserError
from scalebench.tracking import store_format as store


class FileStore:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.location = str(path)
        self._seen: set[str] | None = None  # the entry ids of the last entries()
        self._known: tuple[str, list[str | None]] | None = None  # text parsed last, its ids

    @contextlib.contextmanager
    def _lock(self, exclusive: bool) -> Iterator[None]:
        lock = self.path.with_name(self.path.name + ".lock")
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError:
            if exclusive:
                raise
            yield  # a reader in a folder it may not write to reads without the lock
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            yield
        finally:
            os.close(fd)  # closing releases the lock; the lock file stays (removing it races)

    def _text(self) -> str:
        try:
            with open(self.path, encoding="utf-8", errors="replace") as fh:
                return fh.read()
        except FileNotFoundError:
            return ""

    def entries(self) -> tuple[list[dict], list[str]]:
        if not self.path.is_file():
            raise UserError(f"history store {self.location!r} does not exist; create it with "
                            "`scalebench history add RESULTS --store FILE`")
        with self._lock(exclusive=False):
            text = self._text()
        found, problems, ids = store.scan(text.splitlines(), self.location)
        self._known, self._seen = (text, ids), set(ids) - {None}
        return found, problems

    def add_entries(self, entries: list[dict], message: str = "") -> tuple[int, int]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock(exclusive=True):
            text = self._text()
            ids = store.line_ids(text, self.location, self._known)
            self._known = (text, ids)
            new = store.fresh(entries, set(ids) - {None})
            with open(self.path, "a", encoding="utf-8") as fh:
                if text and not text.endswith("\n"):
                    fh.write("\n")  # a line cut short by a crash stays on a line of its own
                fh.write(store.encode(new))
                fh.flush()
                os.fsync(fh.fileno())
        return len(new), len({e["id"] for e in entries}) - len(new)

    def rewrite(self, keep: list[dict], message: str = "") -> int:
        if self._seen is None:
            self.entries()
        drop = (self._seen or set()) - {e.get("id") for e in keep}
        with self._lock(exclusive=True):
            text, removed = store.without(self._text(), drop, self.location, self._known)
            if removed:
                atomic.write_text(self.path, text)
        return removed
