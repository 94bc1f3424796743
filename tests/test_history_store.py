"""The history store (tracking/store.py): a JSONL file that locks while it appends, and a git
branch (real git, bare repositories under tmp_path) that fetches, appends, commits and pushes,
retries a refused push, and keeps what it could not push in a spool for the next add."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone

import pytest

from scalebench import cli
from scalebench.spec.errors import UserError
from scalebench.tracking import branch, history, store, store_git
from tests.conftest import REPO, fake_record, write_records

# A process that adds `count` batches of 3 entries (and one entry every process adds) from a
# given moment on, so that processes started one after another add at the same time.
ADDER = """
import sys, time
from scalebench.tracking import store
where, name, start, count, pad = sys.argv[1:3] + [float(sys.argv[3])] + [int(a) for a in sys.argv[4:]]
s = store.open_store(where)
while time.time() < start:
    time.sleep(0.002)
for k in range(count):
    batch = [{"id": f"{name}-{k}-{j}", "pad": "x" * pad} for j in range(3)] + [{"id": "shared"}]
    s.add_entries(batch, f"{name} add {k}")
"""


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    """Each test its own cache (the git stores' private clones and spools)."""
    monkeypatch.setenv("SCALEBENCH_CACHE", str(tmp_path / "cache"))


def bare(path) -> str:
    subprocess.run(["git", "init", "--quiet", "--bare", str(path)], check=True)
    return str(path)


def git(repo, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout


def start_adders(where: str, names: list[str], count: int, pad: int = 0,
                 caches: list[str] | None = None) -> list[subprocess.Popen]:
    at = time.time() + 0.6  # after every interpreter has started
    procs = []
    for i, name in enumerate(names):
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        if caches:
            env["SCALEBENCH_CACHE"] = caches[i]
        procs.append(subprocess.Popen([sys.executable, "-c", ADDER, where, name, str(at),
                                       str(count), str(pad)], env=env, stderr=subprocess.PIPE,
                                      text=True))
    for p in procs:
        assert p.wait(timeout=120) == 0, p.stderr.read()
    return procs


def ids_of(where: str) -> list[str]:
    entries, problems = store.open_store(where).entries()
    assert problems == []
    return [e["id"] for e in entries]


def main(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def one_error(capsys, *argv: str) -> str:
    """The command exits 2 with one line on stderr; that line."""
    code, _, err = main(capsys, *argv)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    return err


def sweep(tmp_path, name: str, when: datetime, commit: str, factor: float = 1.0):
    """A results file of one sweep (1 and 2 workers) measured at `when`."""
    stamp = when.strftime("%Y-%m-%dT%H:%M:%S%z")
    records = [fake_record(tuple(factor * v for v in trials), world_size=w, timestamp=stamp,
                           env={"git_commit": commit}, sweep_id=name)
               for w, trials in ((1, (10.0, 10.1, 9.9)), (2, (19.0, 19.2, 18.8)))]
    return write_records(tmp_path / name / "results.jsonl", records)


# ---------------------------------------------------------------- the git store

def test_git_store_add_read_and_again(tmp_path, capsys, monkeypatch):
    repo = bare(tmp_path / "h.git")
    where = f"git:{repo}#scalebench-history"
    first = sweep(tmp_path, "s1", datetime(2026, 1, 1, tzinfo=timezone.utc), "c1")
    code, out, _ = main(capsys, "history", "add", str(first), "--store", where, "--branch", "main")
    assert code == 0 and "added 2 runs" in out
    # an orphan branch holding one file; the commit names the sweep and the measured commit
    assert git(repo, "ls-tree", "--name-only", "scalebench-history").split() == ["history.jsonl"]
    assert git(repo, "log", "--format=%s%x09%an", "scalebench-history").strip() == \
        "history add: 2 runs; sweep s1; commit c1\tscalebench"
    code, out, _ = main(capsys, "history", "add", str(first), "--store", where)
    assert code == 0 and "added 0 runs" in out and "2 already there" in out
    assert git(repo, "rev-list", "--count", "scalebench-history").strip() == "1"
    rows, _ = history.load_store(store.open_store(where))
    assert len(rows) == 2 and {r["branch"] for r in rows} == {"main"}
    # a reader in another cache (another runner), through a file:// URL, reads the same rows
    monkeypatch.setenv("SCALEBENCH_CACHE", str(tmp_path / "other-cache"))
    assert sorted(ids_of(f"git:file://{repo}#scalebench-history")) == \
        sorted(r["id"] for r in rows)


def test_two_processes_adding_at_once_lose_and_duplicate_nothing(tmp_path):
    where = f"git:{bare(tmp_path / 'h.git')}#hist"
    start_adders(where, ["a", "b"], count=3)  # one machine: one cache, one spool
    ids = ids_of(where)
    expected = {f"{n}-{k}-{j}" for n in "ab" for k in range(3) for j in range(3)} | {"shared"}
    assert sorted(ids) == sorted(expected)  # each once
    assert not list((tmp_path / "cache" / "history-spool").rglob("pending.jsonl"))


class Rival(store_git.GitStore):
    """A git store that, before each of its first `races` pushes, lets another writer (another
    cache: another runner) push a commit of its own, so its own push is refused."""

    def __init__(self, where: str, rival: store_git.GitStore, races: float) -> None:
        repo, branch_name = where[4:].split("#")
        super().__init__(repo, branch_name, push_timeout=60)
        self.rival, self.races, self.raced = rival, races, 0

    def _commit(self, tip, text, message):
        if self.raced < self.races:
            self.raced += 1
            self.rival.add_entries([{"id": f"rival-{self.raced}"}], "rival")
        return super()._commit(tip, text, message)


def rival_store(tmp_path, where: str, monkeypatch) -> store_git.GitStore:
    monkeypatch.setenv("SCALEBENCH_CACHE", str(tmp_path / "rival-cache"))
    rival = store.open_store(where)
    monkeypatch.setenv("SCALEBENCH_CACHE", str(tmp_path / "cache"))
    return rival


def test_a_refused_push_is_retried_on_the_new_tip(tmp_path, monkeypatch):
    repo = bare(tmp_path / "h.git")
    where = f"git:{repo}#hist"
    mine = Rival(where, rival_store(tmp_path, where, monkeypatch), races=2)
    assert mine.add_entries([{"id": "mine"}], "mine") == (1, 0)
    assert mine.raced == 2  # two pushes refused, the third taken
    assert sorted(ids_of(where)) == ["mine", "rival-1", "rival-2"]
    assert git(repo, "log", "--format=%s", "hist").split("\n")[0] == "mine"


def test_the_spool_keeps_rows_until_a_later_add_pushes_them(tmp_path, capsys, monkeypatch):
    repo = tmp_path / "h.git"
    where = f"git:{bare(repo)}#hist"
    # refused for longer than the push timeout: one line, nothing lost
    mine = Rival(where, rival_store(tmp_path, where, monkeypatch), races=float("inf"))
    mine.push_timeout = 0.3
    with pytest.raises(UserError, match=r"refused \d+ times in 0.3 s.*nothing lost: 1 rows wait"):
        mine.add_entries([{"id": "late"}], "late")
    assert "late" not in ids_of(where)
    # the remote unreachable: exit 2, one line; the rows wait in the spool with the earlier one
    results = sweep(tmp_path, "s1", datetime(2026, 1, 1, tzinfo=timezone.utc), "c1")
    repo.rename(tmp_path / "away.git")
    err = one_error(capsys, "history", "add", str(results), "--store", where)
    assert "cannot read the repository" in err and "3 rows wait" in err
    # restored: the next add pushes the spooled rows first, each once
    (tmp_path / "away.git").rename(repo)
    later = sweep(tmp_path, "s2", datetime(2026, 1, 2, tzinfo=timezone.utc), "c2")
    code, out, _ = main(capsys, "history", "add", str(later), "--store", where)
    assert code == 0 and "added 2 runs" in out
    ids = ids_of(where)
    assert len(ids) == len(set(ids)) == 1 + mine.raced + 2 + 2 and "late" in ids
    assert "(and 3 rows an earlier add left in the spool)" in git(repo, "log", "-1",
                                                                  "--format=%s", "hist")
    assert not list((tmp_path / "cache" / "history-spool").rglob("pending.jsonl"))


def test_bad_git_stores_are_one_line_and_exit_2(tmp_path, capsys):
    results = sweep(tmp_path, "s1", datetime(2026, 1, 1, tzinfo=timezone.utc), "c1")
    err = one_error(capsys, "history", "detect", "--store", "git:../history.git")
    assert "--store" in err and "git:REPO#BRANCH" in err and "JSONL file" in err
    assert "not a valid branch name" in one_error(capsys, "history", "add", str(results),
                                                  "--store", f"git:{tmp_path}#a..b")
    err = one_error(capsys, "history", "add", str(results), "--store",
                    f"git:{tmp_path / 'none.git'}#hist")
    assert "cannot read the repository" in err
    # a branch that is not a store is never written into, and nothing waits to be pushed there
    repo = bare(tmp_path / "h.git")
    work = tmp_path / "work"
    subprocess.run(["git", "init", "--quiet", "-b", "docs", str(work)], check=True)
    (work / "README.md").write_text("docs\n")
    git(work, "add", "README.md")
    git(work, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-m", "docs")
    git(work, "push", "--quiet", repo, "docs")
    for argv in (("detect",), ("add", str(results))):
        err = one_error(capsys, "history", *argv, "--store", f"git:{repo}#docs")
        assert "not a scalebench history store" in err
    assert not store_git.GitStore(repo, "docs").spool.exists()
    assert "has no branch 'hist'" in one_error(capsys, "history", "detect", "--store",
                                               f"git:{repo}#hist")
    assert "--push-timeout" in one_error(capsys, "history", "add", str(results), "--store",
                                         f"git:{repo}#hist", "--push-timeout", "0")
    # a refusal that is not a lost race (here a hook) ends at once, the rows kept
    hook = tmp_path / "h.git" / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'branch is protected' >&2\nexit 1\n")
    hook.chmod(0o755)
    began = time.monotonic()
    err = one_error(capsys, "history", "add", str(results), "--store", f"git:{repo}#hist")
    assert "refused the push: remote: branch is protected" in err and "2 rows wait" in err
    assert time.monotonic() - began < 10


# ---------------------------------------------------------------- the file store

def test_file_store_processes_adding_at_once_never_interleave(tmp_path):
    path = tmp_path / "h.jsonl"
    start_adders(str(path), ["a", "b"], count=5, pad=200_000)  # lines far over a pipe's write
    ids = ids_of(str(path))
    assert sorted(ids) == sorted({f"{n}-{k}-{j}" for n in "ab" for k in range(5)
                                  for j in range(3)} | {"shared"})


def test_file_store_add_waits_for_the_lock(tmp_path):
    path = tmp_path / "h.jsonl"
    fd = os.open(tmp_path / "h.jsonl.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        proc = subprocess.Popen([sys.executable, "-c", ADDER, str(path), "a", "0", "1", "0"],
                                env={**os.environ, "PYTHONPATH": str(REPO)})
        time.sleep(0.5)
        assert proc.poll() is None and not path.exists()  # waiting, nothing written
    finally:
        os.close(fd)
    assert proc.wait(timeout=60) == 0
    assert len(ids_of(str(path))) == 4


# ---------------------------------------------------------------- prune

def test_prune_keep_days_on_a_file_store(tmp_path, capsys):
    path = tmp_path / "h.jsonl"
    now = datetime.now(timezone.utc)
    for i, days in enumerate((60, 45, 20, 1)):
        history.add(path, _records(sweep(tmp_path, f"s{i}", now - timedelta(days=days), f"c{i}")))
    fs = store.open_store(str(path))
    fs.add_entries([{"id": "acc-old", "kind": "accepted", "from": "c0", "to": "c1"},
                    {"id": "acc-new", "kind": "accepted", "from": "c1", "to": "c2"}], "accept")
    code, out, _ = main(capsys, "history", "prune", "--store", str(path), "--keep-days", "30")
    assert code == 0, out
    assert f"removed 4 run rows measured {now - timedelta(days=60):%Y-%m-%d} to " \
           f"{now - timedelta(days=45):%Y-%m-%d}, from 2 sweeps, and 1 accepted change" in out
    rows, _ = history.load_store(path)
    assert sorted({r["sweep_id"] for r in rows}) == ["s2", "s3"] and len(rows) == 4
    assert [e["id"] for e in history.split_entries(fs.entries()[0])[1]] == ["acc-new"]
    code, out, _ = main(capsys, "history", "prune", "--store", str(path), "--keep-days", "30")
    assert code == 0 and out.startswith("nothing to remove from ") and "5 of 5 entries stay" in out


def _records(path):
    from scalebench.records import results

    return results.load([path])[0]


def test_prune_keep_points_on_a_git_store(tmp_path, capsys):
    repo = bare(tmp_path / "h.git")
    where = f"git:{repo}#hist"
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    target = store.open_store(where)
    for i in range(4):
        history.add(target, _records(sweep(tmp_path, f"s{i}", start + timedelta(days=i),
                                           f"c{i}")))
    code, out, _ = main(capsys, "history", "prune", "--store", where, "--keep-points", "2",
                        "--dry-run")
    assert code == 0 and out.startswith("would remove 4 run rows") and len(ids_of(where)) == 8
    code, out, _ = main(capsys, "history", "prune", "--store", where, "--keep-points", "2")
    assert code == 0 and "removed 4 run rows measured 2026-01-01 to 2026-01-02, from 2 sweeps" \
        in out
    rows, _ = history.load_store(store.open_store(where))
    # each configuration line (1 and 2 workers) keeps its last two sweeps
    assert sorted((r["world_size"], r["sweep_id"]) for r in rows) == \
        [(1, "s2"), (1, "s3"), (2, "s2"), (2, "s3")]
    assert git(repo, "log", "-1", "--format=%s", "hist").startswith("prune: 4 run rows")


@pytest.mark.parametrize("kind", ["file", "git"])
def test_a_rewrite_keeps_what_others_added_after_it_read(tmp_path, kind, monkeypatch):
    where = str(tmp_path / "h.jsonl") if kind == "file" else f"git:{bare(tmp_path / 'h.git')}#h"
    pruner = store.open_store(where)
    pruner.add_entries([{"id": "old"}, {"id": "kept"}], "two")
    entries, _ = pruner.entries()
    rival_store(tmp_path, where, monkeypatch).add_entries([{"id": "new"}], "meanwhile")
    assert pruner.rewrite([e for e in entries if e["id"] == "kept"], "prune") == 1
    assert ids_of(where) == ["kept", "new"]


def test_prune_needs_a_bound(tmp_path, capsys):
    path = tmp_path / "h.jsonl"
    path.write_text("")
    assert "--keep-days" in one_error(capsys, "history", "prune", "--store", str(path))
    assert "--keep-points 0" in one_error(capsys, "history", "prune", "--store", str(path),
                                          "--keep-points", "0")


# ---------------------------------------------------------------- the measured branch

def test_measured_branch_order(tmp_path):
    assert branch.measured_branch("given", {"GITHUB_REF_NAME": "main"}) == "given"
    pr = {"GITHUB_HEAD_REF": "feature", "GITHUB_REF_NAME": "12/merge"}
    assert branch.measured_branch(None, pr) == "feature"
    assert branch.measured_branch(None, {"GITHUB_HEAD_REF": "", "GITHUB_REF_NAME": "main"}) == \
        "main"
    assert branch.measured_branch(None, {"CI_COMMIT_BRANCH": "dev"}) == "dev"
    assert branch.measured_branch(None, {"GIT_BRANCH": "origin/main"}) == "main"
    work = tmp_path / "w"
    subprocess.run(["git", "init", "--quiet", "-b", "topic", str(work)], check=True)
    git(work, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "--allow-empty",
        "-m", "x")
    assert branch.measured_branch(None, {}, cwd=str(work)) == "topic"
    assert branch.measured_branch(None, {}, cwd=str(tmp_path)) is None  # not a repository


def test_store_entries_keep_accepted_out_of_run_rows(tmp_path):
    path = tmp_path / "h.jsonl"
    history.add(path, [fake_record()])
    store.open_store(str(path)).add_entries([{"id": "a1", "kind": "accepted"}], "accept")
    rows, _ = history.load_store(path)
    assert len(rows) == 1 and rows[0].get("kind") is None
    entries, _ = store.open_store(str(path)).entries()
    runs, accepted = history.split_entries(entries)
    assert [a["id"] for a in accepted] == ["a1"] and len(runs) == 1
    assert json.loads(path.read_text().splitlines()[-1])["history_version"] == \
        history.HISTORY_VERSION


def test_line_ids_parse_only_what_was_appended_since_the_last_read():
    from scalebench.tracking import store_format

    old = store_format.encode(store_format.fresh([{"id": "a"}, {"id": "b"}], set())) + "junk\n"
    known = (old, store_format.line_ids(old, "s"))
    assert known[1] == ["a", "b", None]
    grown = old + store_format.encode(store_format.fresh([{"id": "c"}], set()))
    # the known prefix's ids are taken as they were read: a lie about them shows that
    assert store_format.line_ids(grown, "s", (old, ["x", "y", None])) == ["x", "y", None, "c"]
    assert store_format.line_ids(grown, "s", ("other\n", ["z"])) == ["a", "b", None, "c"]
    text, removed = store_format.without(grown, {"b", "c"}, "s", known)
    assert removed == 2 and text == old.splitlines(keepends=True)[0] + "junk\n"
    with pytest.raises(UserError, match="line 5 has history_version 2"):
        store_format.line_ids(grown + '{"history_version": 2, "id": "d"}\n', "s", known)
