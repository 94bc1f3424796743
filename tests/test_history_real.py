"""A real history: 10 one-worker DDP sweeps (torchrun), the last 4 of them slowed by busy
processes competing for the cores, which the records cannot see. History A, the first 6
(all clean): no change point, exit 0. History B, the last 4 clean then the 4 slowed:
`history detect` names the commit range where the slowdown began, exit 1.

This machine's own speed moves under the sweeps: after the heavy test before it, the clean
sweeps once sped up by a fifth over their two minutes (17.3-17.9 img/s for the first three,
20.5-20.7 for the last two) with one at 12.9 between. Hence a 30% floor on a change (the
slowdown takes about half) and, in B, the clean sweeps nearest in time to the slowed ones."""

from __future__ import annotations

import statistics
import subprocess
import sys

import pytest

from scalebench import cli
from tests.conftest import read_records, sweep_here, wait_until_quiet
from tests.test_ddp import sweep_cmd

# DDP, not Horovod, though horovodrun starts 2 s faster (it does not import torch): beside the
# same busy processes a one-thread Horovod worker (with its background thread) was left
# unslowed in one of four slowed sweeps, twice in five runs, and the change point went unfound.
pytestmark = [pytest.mark.slow, pytest.mark.serial]

CLEAN, SLOWED = 6, 4
# Busy processes beside the slowed sweeps, each in a session of its own. Two took 35-55% off a
# one-thread worker, and a 35% step over single-launch points of ~15% noise was missed once
# (PELT's gain for the split barely above its penalty); three take about half.
BUSY = 3
# Three busy processes took 48-57% off (measured: see the assert); the clean sweeps' drift in
# time reached 11% (17.6-19.2 against 20.0-20.8 img/s, which a 10% floor called an
# improvement) and 21% in another run.
MIN_MAGNITUDE = "30"


def sweep(out) -> dict:
    # one thread: busy processes beside it then take a share of its core, where with two threads
    # one busy process stalled every parallel region and the slowed sweeps took 30 x as long
    # (480 s for the test). In this process: 10 sweep start-ups fewer.
    # Records only (--no-report): history reads nothing else.
    code = sweep_here(sweep_cmd(out, "--models", "inception_v3", "--workers", "1",
                                "--no-breakdown", "--no-report", trials=3))
    assert code == 0
    assert sorted(p.name for p in out.iterdir()) == ["results.jsonl", "runs"]
    (record,) = read_records(out / "results.jsonl")
    assert record["status"] == "ok", record.get("error")
    return record


def mean(record: dict) -> float:
    return statistics.fmean(record["trial_images_per_sec"])


def detect(capsys, store) -> tuple[int, str]:
    code = cli.main(["history", "detect", "--store", str(store), "--metric", "throughput",
                     "--min-magnitude", MIN_MAGNITUDE])
    return code, capsys.readouterr().out


def test_a_slowdown_the_records_cannot_see_is_found_at_its_commit(tmp_path, capsys):
    clean = [tmp_path / f"clean{i}" for i in range(CLEAN)]
    slowed = [tmp_path / f"slowed{i}" for i in range(SLOWED)]
    wait_until_quiet()
    clean_records = [sweep(out) for out in clean]
    # each in a session of its own, as the sweep's workers are: the kernel shares the cores
    # between sessions (autogroups) before it shares them between processes
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
            for _ in range(BUSY)]
    # Running for the whole slowed phase: stopped between launches and resumed only once a
    # worker started, they left some sweeps' half-second windows unslowed (the scheduler had
    # not yet spread three busy processes and the worker over the two cores).
    try:
        slowed_records = [sweep(out) for out in slowed]
    finally:
        for proc in busy:
            proc.kill()
            proc.wait()
    before = statistics.median(mean(r) for r in clean_records)
    after = statistics.median(mean(r) for r in slowed_records)
    means = (f"clean {[round(mean(r), 2) for r in clean_records]}, slowed "
             f"{[round(mean(r), 2) for r in slowed_records]} img/s, in time order")
    assert after < 0.65 * before, (f"the busy processes did not slow the sweeps well beyond the "
                                   f"{MIN_MAGNITUDE}% floor "
                                   f"({means}): is the machine loaded?")

    store_a, store_b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    for i, out in enumerate(clean):
        assert cli.main(["history", "add", str(out), "--store", str(store_a), "--commit",
                         f"commit{i}"]) == 0
    for i, out in enumerate(clean[-SLOWED:] + slowed):
        assert cli.main(["history", "add", str(out), "--store", str(store_b), "--commit",
                         f"commit{i}"]) == 0
    capsys.readouterr()

    code, out = detect(capsys, store_a)
    assert code == 0, out + means
    assert f"{CLEAN} points, 0 changes" in out, means

    code, out = detect(capsys, store_b)
    assert code == 1, out + means
    assert "8 points, 1 change (" in out, means
    # The slowdown began between commit3 and commit4. A step there, or (where the last clean
    # sweep came out low: 10.76 against 12.4-14.4 img/s in one run) a short gradual regression
    # from commit2 that ends at commit4: either range holds the start, and no other does.
    assert "regression of " in out, out + means
    assert (" at commit3..commit4 (first seen" in out
            or " over commit2..commit4 (first seen" in out), out + means
