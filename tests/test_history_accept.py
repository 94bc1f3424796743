"""history accept A..B: an accepted change kept in the store (tracking/accepted.py); detect
shows it as accepted and does not fail on it, and a later regression still fails."""

from __future__ import annotations

import random
import subprocess

import pytest

from scalebench import cli
from scalebench.spec.errors import UserError
from scalebench.tracking import accepted, history_changes
from tests.test_gate import history_rows, noise_series, sweep, write_records

NOW = "2026-02-01T00:00:00+0000"


def test_an_entry_names_measured_commits_and_is_idempotent_by_id():
    rows = history_rows([1.0] * 6)
    a = accepted.entry("c02..c03", "new allocator", ["ddp x2"], rows, NOW)
    assert (a["kind"], a["from"], a["to"], a["configs"]) == ("accepted", "c02", "c03", ["ddp x2"])
    assert a["id"] == accepted.entry("c02..c03", "new allocator", ["ddp x2"], rows, "later")["id"]
    assert a["id"] != accepted.entry("c02..c04", "new allocator", [], rows, NOW)["id"]


@pytest.mark.parametrize("text, configs, message", [
    ("c02-c03", [], "expected A..B"),
    ("c02..zz", [], "commit 'zz' names no point of the store"),
    ("c04..c02", [], "c04 was measured after c02"),
    ("c02..c03", ["vgg16"], "--config 'vgg16': names no configuration"),
    ("c", [], "expected A..B"),
])
def test_bad_ranges_are_user_errors(text, configs, message):
    rows = history_rows([1.0] * 6)
    with pytest.raises(UserError, match=message):
        accepted.entry(text, "why", configs, rows, NOW)


def test_a_range_that_names_no_point_of_the_configuration_is_refused():
    rows = [r for r in history_rows([1.0] * 6) if r["world_size"] == 1 or r["commit"] == "c05"]
    with pytest.raises(UserError, match="names no point of the configurations given"):
        accepted.entry("c01..c03", "why", ["ddp x2"], rows, NOW)
    with pytest.raises(UserError, match="--reason"):
        accepted.entry("c01..c03", " ", [], rows, NOW)


def stepped(n: int, steps: dict[int, float], seed: int = 3) -> list[dict]:
    """A history with AR(1), heavy-tailed noise (1.5% of the level) and steps: level x factor from
    sweep i on, for each {i: factor}."""
    levels, level = [], 1.0
    for s in range(n):
        level *= steps.get(s, 1.0)
        levels.append(level)
    return history_rows(levels, seed=seed, sd=0.015)


def test_detect_shows_an_accepted_change_and_fails_on_a_later_one():
    rows = stepped(20, {10: 0.85})
    found = history_changes.find(rows, ["throughput"], last=12)
    assert found.exit_code == 1
    (change,) = [c for c in found.new_regressions if c.series.line[1] == 2]
    entry = accepted.entry(change.commit_range, "new kernel", [], rows, NOW)
    accepts = accepted.from_entries([entry, {"kind": "run", "id": "x"}])
    found = history_changes.find(rows, ["throughput"], last=12, accepts=accepts)
    assert found.exit_code == 0 and found.accepted
    assert "accepted c09..c10: new kernel" in history_changes.render_text(found)
    assert "accepted regression" in history_changes.render_markdown(found)
    # the level after the accepted step is the baseline: a second step below it fails
    later = stepped(30, {10: 0.85, 22: 0.85})
    found = history_changes.find(later, ["throughput"], last=12, accepts=accepts)
    assert found.exit_code == 1
    assert {c.commit_range for c in found.new_regressions} == {"c21..c22"}


def test_an_accept_for_one_configuration_leaves_the_others_failing():
    rows = stepped(20, {10: 0.85})
    entry = accepted.entry("c09..c10", "known", ["ddp x2"], rows, NOW)
    found = history_changes.find(rows, ["throughput"], last=12,
                                 accepts=accepted.from_entries([entry]))
    assert found.exit_code == 1
    assert {c.series.line[1] for c in found.new_regressions} == {1}
    assert {c.series.line[1] for c in found.accepted} == {2}


def main(capsys, *argv) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def add_stepped(capsys, tmp_path, store: str, n: int, steps: dict[int, float], start: int = 0):
    rng = random.Random(5)
    e = noise_series(n, random.Random(6), sd=0.015)
    level = 1.0
    for s in range(n):
        level *= steps.get(s, 1.0)
        if s < start:
            continue
        path = write_records(tmp_path / f"s{s}.jsonl",
                             sweep(s, 10 * level * (1 + e[s]), 19 * level * (1 + e[s]), rng))
        code, _, err = main(capsys, "history", "add", str(path), "--store", store)
        assert code == 0, err


@pytest.mark.parametrize("kind", ["file", "git"])
def test_accept_through_the_cli_on_a_real_store(tmp_path, capsys, kind):
    if kind == "git":
        subprocess.run(["git", "init", "--bare", "-q", str(tmp_path / "h.git")], check=True)
        store = f"git:{tmp_path / 'h.git'}#scalebench-history"
    else:
        store = str(tmp_path / "history.jsonl")
    add_stepped(capsys, tmp_path, store, 12, {6: 0.85})
    code, out, _ = main(capsys, "history", "detect", "--store", store, "--metric", "throughput",
                         "--last", "10")
    assert code == 1 and "c05..c06" in out
    argv = ["history", "accept", "c05..c06", "--reason", "new kernel", "--store", store]
    code, out, _ = main(capsys, *argv)
    assert code == 0 and out.startswith("accepted c05..c06")
    code, out, _ = main(capsys, *argv)
    assert code == 0 and "already accepted" in out
    code, out, _ = main(capsys, "history", "detect", "--store", store, "--metric", "throughput",
                         "--last", "10")
    assert code == 0 and "accepted c05..c06: new kernel" in out
    code, _, err = main(capsys, "history", "accept", "c05..c99", "--reason", "x", "--store", store)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "names no point" in err
    add_stepped(capsys, tmp_path, store, 20, {6: 0.85, 14: 0.85}, start=12)
    code, out, _ = main(capsys, "history", "detect", "--store", store, "--metric", "throughput",
                         "--last", "10")
    assert code == 1 and "c13..c14" in out
