"""A history store on a branch of a git repository: one JSONL file (store.STORE_FILE) at the
branch's tip, written by commits that only ever append (or, for prune, remove named ids).

Nothing touches a working tree of the user's. A private bare repository in the cache
($SCALEBENCH_CACHE/history-git/<hash of the location>) fetches the branch's tip (depth 1);
readers take the file from it with `git cat-file`; a writer builds the next commit with
plumbing (hash-object, mktree, commit-tree: no checkout) and pushes it. The remote refuses a
push that is not a fast-forward, so of two writers racing one wins and the other fetches the new
tip, re-applies its change (idempotent by entry id, so nothing is written twice) and pushes
again, with jittered exponential backoff until the push timeout. Rows to add are written first
to a spool ($SCALEBENCH_CACHE/history-spool/<hash>/pending.jsonl) and leave it only once a push
holding them succeeded: an add that gave up (rejected too long, remote unreachable) loses
nothing, and the next add on this machine pushes them first.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import random
import re
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from scalebench.spec.errors import UserError
from scalebench.tracking import store_format as store

IDENTITY = ("-c", "user.name=scalebench", "-c", "user.email=scalebench@localhost")
NETWORK_TIMEOUT = 120.0  # seconds one fetch or push may take
BACKOFF_FIRST, BACKOFF_CAP = 0.05, 2.0  # seconds: the shortest first window, the longest
_MISSING = ("couldn't find remote ref", "could not find remote ref")
# what git says when another push moved the branch first
_RACE = ("fetch first", "non-fast-forward", "cannot lock ref", "failed to update ref",
         "incorrect old value", "stale info")
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://|^[^/:]+@[^/:]+:")  # scheme:// or user@host:


def _location_repo(repo: str) -> str:
    """A URL as given; a local path made absolute (the cache is keyed by it, and git runs in
    the cache, not in the user's folder)."""
    return repo if _URL.match(repo) else str(Path(repo).expanduser().resolve())


@contextlib.contextmanager
def _flock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


class NotAStore(UserError):
    """The branch exists but is not a history store."""


class GitStore:
    def __init__(self, repo: str, branch: str, push_timeout: float = store.PUSH_TIMEOUT) -> None:
        self.repo = _location_repo(repo)
        self.branch = branch
        self.location = f"git:{repo}#{branch}"
        self.push_timeout = push_timeout
        key = hashlib.sha256(f"{self.repo}#{branch}".encode()).hexdigest()[:16]
        root = store.cache_root()
        self.cache = root / "history-git" / key
        self.spool = root / "history-spool" / key / "pending.jsonl"
        self._seen: set[str] | None = None  # the entry ids of the last entries()
        self._known: tuple[str, list[str | None]] | None = None  # text parsed last, its ids
        self.refused = 0  # pushes the remote refused so far (benchmarks/ci_history.py counts)
        self._check_branch()

    # ------------------------------------------------------------ git

    def _git(self, *args: str, stdin: str | None = None, timeout: float = NETWORK_TIMEOUT
             ) -> subprocess.CompletedProcess:
        env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", "GIT_ASKPASS": "true"}
        try:
            return subprocess.run(["git", *IDENTITY, "-C", str(self.cache), *args],
                                  input=stdin, capture_output=True, text=True, env=env,
                                  timeout=timeout)
        except FileNotFoundError:
            raise UserError(f"--store {self.location!r}: a git store needs git, which is not "
                            "installed") from None
        except subprocess.TimeoutExpired:
            raise UserError(f"--store {self.location!r}: git {args[0]} took over {timeout:g} s; "
                            "is the repository reachable?") from None

    def _out(self, *args: str, stdin: str | None = None) -> str:
        proc = self._git(*args, stdin=stdin)
        if proc.returncode != 0:
            raise RuntimeError(f"git {' '.join(args)}: {proc.stderr.strip()}")
        return proc.stdout

    def _check_branch(self) -> None:
        proc = subprocess.run(["git", "check-ref-format", "--branch", self.branch],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise UserError(f"--store {self.location!r}: {self.branch!r} is not a valid branch "
                            f"name; give {store.SHAPES}")

    def _init_cache(self) -> None:
        if not (self.cache / "HEAD").is_file():
            self.cache.mkdir(parents=True, exist_ok=True)
            self._out("init", "--bare", "--quiet")

    def _fetch(self) -> str | None:
        """The branch's tip, fetched into the cache; None when the repository has no such
        branch. An unreachable repository is a UserError."""
        with _flock(self.cache.with_name(self.cache.name + ".lock")):
            self._init_cache()
            ref = "refs/scalebench/tip"
            proc = self._git("fetch", "--quiet", "--no-tags", "--depth=1", self.repo,
                             f"+refs/heads/{self.branch}:{ref}")
            if proc.returncode == 0:
                return self._out("rev-parse", ref).strip()
            if any(m in proc.stderr.lower() for m in _MISSING):
                self._git("update-ref", "-d", ref)
                return None
        raise UserError(f"--store {self.location!r}: cannot read the repository: "
                        f"{_first_line(proc.stderr)}")

    def _read(self, tip: str | None) -> str | None:
        """The store file's text at tip; None without a tip. A branch without the store file
        is not a store: a UserError (never written into)."""
        if tip is None:
            return None
        names = self._out("ls-tree", "--name-only", tip).split("\n")
        if store.STORE_FILE not in names:
            raise NotAStore(f"--store {self.location!r}: branch {self.branch!r} exists but holds "
                            f"no {store.STORE_FILE}, so it is not a scalebench history store; "
                            "name another branch (a new one is created on the first add)")
        return self._out("cat-file", "blob", f"{tip}:{store.STORE_FILE}")

    def _commit(self, tip: str | None, text: str, message: str) -> str:
        blob = self._out("hash-object", "-w", "--stdin", stdin=text).strip()
        listing = [line for line in (self._out("ls-tree", tip).splitlines() if tip else ())
                   if line.split("\t", 1)[1] != store.STORE_FILE]
        tree = self._out("mktree", stdin="\n".join(
            listing + [f"100644 blob {blob}\t{store.STORE_FILE}"]) + "\n").strip()
        return self._out("commit-tree", tree, *(("-p", tip) if tip else ()), "-m",
                         message).strip()

    def _push(self, commit: str) -> bool:
        """True when the remote took the commit as the branch's new tip; False when another
        writer got there first (not a fast-forward, its ref locked or moved); any other refusal
        (no permission, a protected branch, a hook) is a UserError at once."""
        proc = self._git("push", "--quiet", self.repo, f"{commit}:refs/heads/{self.branch}")
        if proc.returncode == 0:
            return True
        if any(m in proc.stderr.lower() for m in _RACE):
            return False
        raise UserError(f"--store {self.location!r}: the repository refused the push: "
                        f"{_first_line(proc.stderr)}")

    def _change(self, edit: Callable[[str | None], str | None], message: str, what: str) -> None:
        """fetch -> edit the text -> commit -> push until a push succeeds, edit returns None
        (nothing to change) or the push timeout passes (a UserError)."""
        deadline = time.monotonic() + self.push_timeout
        for attempt in range(1, 1_000_000):
            began = time.monotonic()
            tip = self._fetch()
            text = edit(self._read(tip))
            if text is None or self._push(self._commit(tip, text, message)):
                return
            self.refused += 1
            took = time.monotonic() - began
            left = deadline - time.monotonic()
            if left <= 0:
                raise UserError(f"--store {self.location!r}: {what}: the push was refused "
                                f"{attempt} times in {self.push_timeout:g} s (others writing "
                                "the branch; --push-timeout allows longer)")
            # full jitter over a window that doubles from one attempt's own duration: the
            # writers that lost spread out over about as many attempts as there are of them
            window = min(BACKOFF_CAP, max(BACKOFF_FIRST, took) * 2 ** (attempt - 1))
            time.sleep(min(left, random.uniform(0, window)))

    # ------------------------------------------------------------ spool

    def _spooled(self) -> list[dict]:
        try:
            text = self.spool.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        return store.parse_lines(text.splitlines(), str(self.spool))[0]

    def _spool(self, entries: list[dict]) -> list[dict]:
        """Add entries to the spool; returns everything it holds (earlier adds' rows first)."""
        with _flock(self.spool.with_name("spool.lock")):
            held = self._spooled()
            new = store.fresh(entries, {e["id"] for e in held})
            if new:
                with open(self.spool, "a", encoding="utf-8") as fh:
                    fh.write(store.encode(new))
                    fh.flush()
                    os.fsync(fh.fileno())
            return held + new

    def _unspool(self, ids: set[str]) -> None:
        with _flock(self.spool.with_name("spool.lock")):
            if self.spool.is_file():
                text, _ = store.without(self.spool.read_text(encoding="utf-8"), ids,
                                        str(self.spool))
                if text.strip():
                    self.spool.write_text(text, encoding="utf-8")
                else:
                    self.spool.unlink()

    # ------------------------------------------------------------ the interface

    def entries(self) -> tuple[list[dict], list[str]]:
        text = self._read(self._fetch())
        if text is None:
            raise UserError(f"history store {self.location!r} does not exist: the repository has "
                            f"no branch {self.branch!r}; create it with "
                            "`scalebench history add RESULTS --store git:REPO#BRANCH`")
        found, problems, ids = store.scan(text.splitlines(), self.location)
        self._known, self._seen = (text, ids), set(ids) - {None}
        return found, problems

    def add_entries(self, entries: list[dict], message: str = "") -> tuple[int, int]:
        ids = {e["id"] for e in store.fresh(entries, set())}
        pending = self._spool(entries)
        earlier = len(pending) - len([e for e in pending if e["id"] in ids])
        counts = {"added": 0}

        def append(text: str | None) -> str | None:
            held = store.line_ids(text or "", self.location, self._known)
            self._known = (text or "", held)
            new = store.fresh(pending, set(held) - {None})
            counts["added"] = len([e for e in new if e["id"] in ids])
            if not new:
                return None
            return (text or "") + ("\n" if text and not text.endswith("\n") else "") + \
                store.encode(new)

        note = f" (and {earlier} rows an earlier add left in the spool)" if earlier else ""
        try:
            self._change(append, (message or "history add") + note, "add")
        except NotAStore:
            self._unspool(ids)  # never to be pushed there: not kept for a later add
            raise
        except UserError as exc:
            raise UserError(f"{exc}; nothing lost: {len(pending)} rows wait in {self.spool} and "
                            "the next add to this store pushes them first") from None
        self._unspool({e["id"] for e in pending})
        return counts["added"], len(ids) - counts["added"]

    def rewrite(self, keep: list[dict], message: str = "") -> int:
        if self._seen is None:
            self.entries()
        drop = (self._seen or set()) - {e.get("id") for e in keep}
        removed = {"n": 0}

        def remove(text: str | None) -> str | None:
            new, removed["n"] = store.without(text or "", drop, self.location, self._known)
            return new if removed["n"] else None

        if drop:
            self._change(remove, message or "history prune", "prune")
        return removed["n"]


def _first_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    fatal = [ln for ln in lines if ln.lower().startswith("fatal:")]
    return (fatal or lines or ["git gave no reason"])[0]
