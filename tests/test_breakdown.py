"""The scaling-loss breakdown from fabricated windows (pure arithmetic, by hand)."""

from __future__ import annotations

import pytest

from scalebench.analysis import breakdown
from tests.conftest import fake_record


def two_worker_record(**fields):
    # 2 workers x batch 2 x 1 iter = 4 images per window; synced windows 0.5 s on both ranks
    trials = (8.0, 8.0, 8.0)
    return fake_record(trials, world_size=2, window_seconds=[[0.5] * 3, [0.5] * 3],
                       nosync_window_seconds=[[0.4, 0.4], [0.25, 0.25]],
                       nosync_input_wait_seconds=[[0.0, 0.0], [0.05, 0.05]], **fields)


def test_parts_by_hand_add_up_to_ideal():
    r = two_worker_record()
    p = breakdown.parts(r, one_worker_images_per_sec=10.0)  # ideal 20 images/s
    assert p.ideal == 20.0 and p.efficiency == pytest.approx(8.0 / 20)
    # median rank (lower median of two: the faster) 0.25 s, of which 0.05 s waiting for input
    assert p.compute_images_per_sec == pytest.approx(4 / 0.20)  # 20: no contention
    assert p.contention == pytest.approx(0.0)
    assert p.input_wait == pytest.approx((20 - 4 / 0.25) / 20)  # 0.2
    assert p.straggler == pytest.approx((16 - 10) / 20)  # slowest rank 0.4 s -> 10 images/s
    assert p.communication == pytest.approx((10 - 8) / 20)
    assert p.efficiency + sum(p.fractions().values()) == pytest.approx(1.0)
    assert p.seconds_per_step == pytest.approx(
        {"input_wait": 0.05, "straggler": 0.15, "communication": 0.1})


def test_rows_take_the_baseline_and_give_intervals_over_repeats():
    # each two-worker launch against the same round's one-worker launch (paired)
    one = [fake_record((10.0, 10.0, 10.0), world_size=1, repeat=k) for k in (1, 2)]
    runs = [two_worker_record(repeat=1), two_worker_record(repeat=2)]
    [row] = breakdown.rows([*one, *runs])
    assert row["runs"] == 2 and row["world_size"] == 2 and row["framework"] == "ddp"
    assert row["accounted"] == pytest.approx(1.0)
    assert row["largest_loss"] == "straggler"
    assert row["straggler_ci95"][0] == pytest.approx(0.3)  # identical repeats: zero width
    assert breakdown.rows([*runs]) == []  # no one-worker baseline, no breakdown
    assert "At 2 workers ddp delivers 8 images/s, 40% of its own ideal" in breakdown.verdict([row])
    assert "straggler / imbalance" in breakdown.verdict([row])


def test_records_without_nosync_windows_have_no_breakdown():
    r = fake_record((8.0, 8.0, 8.0), world_size=2)
    assert breakdown.parts(r, 10.0) is None


def test_link_share_compares_exposed_time_with_the_links_bandwidth():
    row = {"communication_seconds_per_step": 0.1, "world_size": 2}
    # ring factor 1 at 2 workers: 1e8 bytes in 0.1 s needs 1e9 B/s; link measured 2e9 B/s
    assert breakdown.link_share(row, 2e9, 1e8) == pytest.approx(0.5)
    assert breakdown.link_share({**row, "communication_seconds_per_step": 0.0}, 2e9, 1e8) is None


def check_real_breakdown(records: list[dict]) -> list[dict]:
    """For a real 1- and 2-worker sweep: every 2-worker run has a breakdown whose parts and
    efficiency account for 100% of ideal within 5 points, and its compute-only (no-sync)
    throughput is not below the synced one beyond noise (10%)."""
    rows = breakdown.rows(records)
    two = [r for r in records if r["world_size"] == 2 and r["status"] == "ok"]
    assert len(rows) == len(two) > 0
    for row in rows:
        assert abs(row["accounted"] - 1.0) <= 0.05, row
    for r in two:
        assert len(r["nosync_window_seconds"]) == 2
        assert len(r["nosync_window_seconds"][0]) == min(r["trials"], 3)
        slowest = breakdown.parts(r, 1.0).nosync_images_per_sec
        assert slowest >= 0.9 * r["images_per_sec"], (slowest, r["images_per_sec"])
    return rows


@pytest.mark.slow
@pytest.mark.serial
def test_injected_straggler_and_input_delay_show_up_where_they_belong(tmp_path):
    import subprocess
    import sys

    from tests.conftest import cli_env, read_records

    def sweep(out, *extra):
        proc = subprocess.run(
            [sys.executable, "-m", "scalebench", "sweep", "--frameworks", "ddp", "--models",
             "inception_v3", "--workers", "1,2", "--image-size", "75", "--batch-size", "2",
             "--warmup", "1", "--iters", "3", "--trials", "3", "--threads-per-worker", "1",
             "--device", "cpu", "--quiet", "--out", str(out), *extra],
            capture_output=True, text=True, env=cli_env(), timeout=600)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return read_records(out / "results.jsonl")

    # one sweep, both faults: a straggler's delay and a slow input pipeline land in their own
    # components (the median rank's input wait vs the slowest rank's extra time)
    records = sweep(tmp_path / "faults", "--inject-step-delay", "1:0.3",
                    "--inject-input-delay", "0.2")
    [row] = breakdown.rows(records)
    assert records[1]["faults"] == {"step_delay": {"rank": 1, "seconds": 0.3},
                                    "input_delay_seconds": 0.2}
    assert abs(row["straggler_seconds_per_step"] - 0.3) <= 0.3 * 0.3, row
    assert abs(row["input_wait_seconds_per_step"] - 0.2) <= 0.3 * 0.2, row
    assert row["straggler"] > 0.05 and row["input_wait"] > 0.05
