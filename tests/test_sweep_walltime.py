"""The wall-time accounting of benchmarks/sweep_walltime.py (pure arithmetic on records)."""

import importlib.util
import sys
from pathlib import Path

import pytest

from scalebench.spec import identity

PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "sweep_walltime.py"
SPEC = importlib.util.spec_from_file_location("sweep_walltime", PATH)
walltime = importlib.util.module_from_spec(SPEC)
sys.modules[SPEC.name] = walltime  # dataclasses look their module up
SPEC.loader.exec_module(walltime)


def record(position=None, startup=10.0, status="ok", **phases):
    phases = phases or {"build": 2.0, "nosync_warmup": 1.5, "nosync_timed": 3.0, "wrap": 0.5,
                        "warmup": 1.0, "timed": 6.0, "gather": 0.0}
    return {"status": status, "launch": "isolated" if position is None else "grouped",
            "group_position": position, "startup_seconds": startup, "warmup_seconds": 1.0,
            "window_seconds": [[2.0, 2.0, 2.0], [1.0, 2.5, 1.0]], "global_batch": 8,
            "iters": 3, "nosync_window_seconds": [[1.0, 1.0, 1.0]], "phase_seconds": phases}


def test_timed_seconds_counts_every_warm_up_and_the_slowest_rank():
    # warm-up 1 + slowest per window (2 + 2.5 + 2) + no-sync windows 3 + no-sync warm-up 1.5
    assert walltime.timed_seconds(record()) == pytest.approx(12.0)


def test_account_splits_work_start_up_and_the_rest():
    isolated = [record(), record(), record(status="skipped")]
    result = walltime.account(isolated, wall=60.0)
    assert (result.launches, result.ok, result.runs) == (2, 2, 3)
    assert result.work == pytest.approx(2 * 14.0)
    assert result.startup == pytest.approx(2 * (10.0 - 3.5))  # build, no-sync warm-up
    assert result.per_launch_overhead == pytest.approx((60.0 - 28.0) / 2)
    grouped = walltime.account([record(1), record(2, startup=4.0)], wall=40.0)
    assert grouped.launches == 1 and grouped.startup == pytest.approx(6.5)


def test_launch_overhead_that_meets_a_ratio():
    grouped = walltime.account([record(1)] + [record(2) for _ in range(2)], wall=0.0)
    isolated = walltime.account([record() for _ in range(3)], wall=0.0)
    # work 42 s in both; (42 + L) / (42 + 3 L) = 0.5 at L = 42
    needed = walltime.launch_overhead_for(0.5, grouped, isolated)
    assert needed == pytest.approx(42.0)
    assert (grouped.work + needed) / (isolated.work + 3 * needed) == pytest.approx(0.5)
    # a ratio below launches_g / launches_i cannot be reached at any launch cost
    assert walltime.launch_overhead_for(0.3, grouped, isolated) == float("inf")


def test_grouped_vs_isolated_images_per_sec_fail_only_on_a_shift_both_significant_and_large():
    """The benchmark's judgement of 'grouping measures alike' on fabricated sweeps: 8
    configurations, noise like this machine's launches (a few %, one outlier), a shared
    shift of a whole sweep."""
    import random

    keys = [identity.config_key({"framework": f, "model": m, "world_size": w,
                                 "precision": "fp32"})
            for f in ("ddp", "horovod") for m in ("resnet101", "vgg16") for w in (1, 2)]

    def accounts(factor: float, seed: int) -> list:
        rng = random.Random(seed)
        rates = {k: 10.0 * factor * rng.lognormvariate(0, 0.03) for k in keys}
        rates[keys[3]] *= 1.25  # one heavy-tailed launch
        return [walltime.Account(1.0, 0.5, 0.5, 0.1, 2, 8, 8, rates)]

    alike = walltime.measured_alike(accounts(1.0, 1), accounts(1.0, 2))
    assert alike[1] is True and "measured alike" in alike[0]
    # every grouped run 5% slower: consistent (p < 0.01) but within the 10% the goal allows
    small = walltime.measured_alike(accounts(0.95, 1), accounts(1.0, 1))
    assert small[1] is True
    moved = walltime.measured_alike(accounts(0.8, 1), accounts(1.0, 1))
    assert moved[1] is False and "grouping moves the numbers" in moved[0]
    few = walltime.measured_alike(accounts(0.8, 1)[:1], [walltime.Account(
        1.0, 0.5, 0.5, 0.1, 2, 1, 1, {keys[0]: 10.0})])
    assert few[1] is None and "too few configurations" in few[0]
