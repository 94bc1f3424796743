"""One number, one answer: the summary, the report, the breakdown, breakdown.csv and the scaling
model's verdict agree on the records behind them (fabricated records with known answers, in the
shape of the reference set's; no launch). Each test names the case it covers."""

from __future__ import annotations

import csv
import statistics

import pytest

from scalebench import cli, report
from scalebench.analysis import aggregate, breakdown, scaling_model, stats
from scalebench.models import workloads
from scalebench.report import markdown
from tests.conftest import fake_record, write_records

EXACT = 1e-12


def record(windows: list[list[float]], world_size: int = 1, batch: int = 2,
           nosync: list[list[float]] | None = None, repeat: int | None = None,
           repeats: int | None = None, framework: str = "ddp", **fields) -> dict:
    """A train record (1 step per window) whose trials come from its windows as the worker
    computes them; with no-sync windows when given (no input wait)."""
    images = batch * world_size
    extra = dict(fields)
    if nosync is not None:
        extra.update(nosync_window_seconds=nosync,
                     nosync_input_wait_seconds=[[0.0] * len(nosync[0]) for _ in nosync])
    if repeat is not None:
        extra.update(repeat=repeat, repeats=repeats,
                     run_id=f"{framework}-w{world_size}-r{repeat}",
                     timestamp=f"2026-01-01T00:{repeat:02d}:00+0000")
    trials = stats.trial_throughputs(windows, images)
    return fake_record(tuple(trials), framework=framework, world_size=world_size,
                       batch_size=batch, global_batch=images, window_seconds=windows, **extra)


def both_ranks(seconds, trials: int = 3) -> list[list[float]]:
    """Two ranks with the same window(s): one value repeated, or one per trial."""
    values = list(seconds) if isinstance(seconds, (list, tuple)) else [seconds] * trials
    return [list(values), list(values)]


def only(rows, **match) -> dict:
    [row] = [r for r in rows if all(r.get(k) == v for k, v in match.items())]
    return row


# ---------------------------------------------------------------- case 1: the paired interval

ONE, TWO = (1.0, 1.05, 0.95), (1.2, 1.26, 1.14)  # each round's host drift, on both sides


def drifting_launches() -> list[dict]:
    """Three interleaved rounds: each 2-worker launch is exactly 1/1.2 of its round's 1-worker
    launch, while the rounds themselves drift by 5%."""
    out = []
    for k, (a, b) in enumerate(zip(ONE, TWO, strict=True), start=1):
        out.append(record([[a] * 3], repeat=k, repeats=3))
        out.append(record(both_ranks(b), 2, nosync=both_ranks(b), repeat=k, repeats=3))
    return out


def test_case1_summary_report_and_breakdown_give_the_one_paired_interval():
    records = drifting_launches()
    row = only(aggregate.summary_rows(records), world_size=2)
    assert row["samples_basis"] == stats.PROCESSES
    # the unpaired delta method gave 83.3% [68.7-98.0]
    assert row["efficiency"] == pytest.approx(1 / 1.2)
    assert row["efficiency_ci95_low"] == pytest.approx(1 / 1.2)
    assert row["efficiency_ci95_high"] == pytest.approx(1 / 1.2)
    [bd] = breakdown.rows(records)  # its ideal from the baseline's mean gave [73.0-93.7]
    assert bd["efficiency"] == pytest.approx(row["efficiency"])
    assert bd["efficiency_ci95"] == pytest.approx([1 / 1.2, 1 / 1.2])
    md = markdown.render(report.build(records, []), {})
    assert "| 83.3% | 83.3–83.3% |" in md and "68.7" not in md


def test_case1_scaling_model_verdict_reads_the_paired_interval():
    records = drifting_launches()
    row = only(aggregate.summary_rows(records), world_size=2)
    # a link that puts the bounds at exactly 90% (no overlap) and 100% (full overlap): the
    # allreduce takes a ninth of the one-worker step, less than the backward pass
    compute = row["batch_size"] / statistics.fmean(2 / a for a in ONE)  # the one-worker step
    params = workloads.get_info("inception_v3").param_count(
        workloads.uses_aux_logits("inception_v3", row["image_size"]))
    link = scaling_model.Link(scaling_model.gradient_bytes(params) * 9 / compute, 0.0)
    [entry] = scaling_model.model_rows([row], link)
    assert entry["efficiency_no_overlap"] == pytest.approx(0.9)
    assert entry["efficiency_full_overlap"] == pytest.approx(1.0)
    assert entry["verdict"] == scaling_model.BELOW  # was compute-bound on [68.7-98.0]
    [modelled] = report.build(records, [], link).modelled
    assert modelled.entry["verdict"] == scaling_model.BELOW


# ---------------------------------------------------------------- case 2: the headline's records

def test_case2_breakdown_uses_the_records_behind_the_headline(tmp_path):
    old = [record([[1.0] * 3]), record(both_ranks(1.2), 2, nosync=both_ranks(1.2))]
    new = [record([[1.0] * 3]), record(both_ranks(2.0), 2, nosync=both_ranks(2.0))]
    write_records(tmp_path / "old.jsonl", old)
    write_records(tmp_path / "new.jsonl", new)
    out = tmp_path / "report"
    assert cli.main(["report", str(tmp_path / "old.jsonl"), str(tmp_path / "new.jsonl"),
                     "--out", str(out)]) == 0
    model = report.build(old + new, [])
    assert only(model.rows, world_size=2)["efficiency"] == pytest.approx(0.5)
    [bd] = model.losses.rows
    assert bd["efficiency"] == pytest.approx(0.5) and bd["launches"] == 1
    assert bd["communication"] == pytest.approx(0.0, abs=EXACT)
    section = (out / "report.md").read_text().split("## Where the efficiency went")[1]
    assert "| ddp | 2 | 1 | 4 | 2 |" in section and "66.7%" not in section


# ---------------------------------------------------------------- case 4: one kind of mean

def test_case4_identical_synced_and_nosync_windows_expose_no_communication():
    windows = both_ranks([0.6, 1.0, 1.4])
    records = [record([[1.0] * 3]), record(windows, 2, nosync=windows)]
    [bd] = breakdown.rows(records)
    summary = only(aggregate.summary_rows(records), world_size=2)
    assert bd["communication"] == pytest.approx(0.0, abs=EXACT)  # was -12.7% of ideal
    assert bd["straggler"] == pytest.approx(0.0, abs=EXACT)
    assert bd["input_wait"] == pytest.approx(0.0, abs=EXACT)
    assert bd["communication_seconds_per_step"] == pytest.approx(0.0, abs=EXACT)
    assert bd["efficiency"] == pytest.approx(summary["efficiency"])
    assert bd["efficiency"] + bd["contention"] == pytest.approx(1.0)
    assert bd["measured_images_per_sec"] == pytest.approx(summary["images_per_sec"])


def test_case4_identical_windows_everywhere_give_exactly_no_loss():
    seconds = [0.9, 1.0, 1.1]
    records = [record([seconds]), record(both_ranks(seconds), 2, nosync=both_ranks(seconds))]
    [bd] = breakdown.rows(records)
    assert bd["contention"] == pytest.approx(0.0, abs=EXACT)  # was +0.5%
    assert bd["communication"] == pytest.approx(0.0, abs=EXACT)  # was -0.5%
    assert bd["efficiency"] == pytest.approx(1.0)


# ---------------------------------------------------------------- case 5: strong scaling

def strong_sweep() -> list[dict]:
    """One worker at batch 8 in 1.0 s (8 images/s), two at batch 4 each in 0.55 s (ideal 16,
    measured 14.5), synced equal to no-sync."""
    return [record([[1.0] * 3], batch=8, scaling="strong"),
            record(both_ranks(0.55), 2, batch=4, nosync=both_ranks(0.55), scaling="strong")]


def test_case5_strong_scaling_names_the_batch_effect_not_separable_without_its_run():
    [bd] = breakdown.rows(strong_sweep())
    assert bd["batch_effect"] is None
    assert bd["contention"] == pytest.approx(1 - (8 / 0.55) / 16)
    assert "not separable: no one-worker run at the per-worker batch 4" in bd["batch_effect_note"]
    text = breakdown.verdict([bd])
    assert "shared-host contention (9% of ideal)" not in text
    assert "shared-host contention and per-worker batch effect together (9% of ideal)" in text
    assert "ddp: not separable: no one-worker run at the per-worker batch 4." in text


def test_case5_strong_scaling_measures_the_batch_effect_against_the_one_worker_run():
    records = strong_sweep() + [record([[0.55] * 3], batch=4, scaling="strong")]
    [bd] = breakdown.rows(records)
    assert bd["batch_effect"] == pytest.approx(1 - 2 * (4 / 0.55) / 16)
    assert bd["contention"] == pytest.approx(0.0, abs=EXACT)  # no sharing here
    assert bd["largest_loss"] == "batch_effect" and bd["accounted"] == pytest.approx(1.0)
    assert "its largest loss is per-worker batch effect (9% of ideal)" in breakdown.verdict([bd])
    section = markdown.render(report.build(records, []), {}).split("## Where the efficiency")[1]
    assert "per-worker batch (% of ideal)" in section


# ---------------------------------------------------------------- case 7: one row, one set

def test_case7_every_figure_of_a_row_comes_from_the_same_launches():
    records = [record([[0.5] * 3], repeat=k, repeats=2) for k in (1, 2)]  # 4 images/s
    records += [record(both_ranks(0.6), 2, nosync=both_ranks(0.6), repeat=1, repeats=2),
                record(both_ranks(1.0), 2, repeat=2, repeats=2)]  # 6.67 and 4.0, no windows
    model = report.build(records, [])
    [bd] = model.losses.rows
    assert bd["measured_images_per_sec"] == pytest.approx(4 / 0.6)  # was 5.33, both launches
    assert bd["efficiency"] == pytest.approx(4 / 0.6 / 8)
    assert bd["ideal_images_per_sec"] == pytest.approx(8.0)
    assert (bd["launches"], bd["launches_total"], bd["records"]) == (1, 2, ["ddp-w2-r1"])
    assert "| ddp | 2 | 1 of 2 |" in markdown.render(model, {})


# ---------------------------------------------------------------- case 9: breakdown.csv

def test_case9_breakdown_csv_holds_the_rows_the_report_renders(tmp_path):
    windows = [[0.5] * 3, [0.5] * 3]
    nosync = [[0.4, 0.4], [0.25, 0.25]]
    records = [record([[0.2] * 3]),  # 10 images/s
               record(windows, 2, nosync=nosync, run_id="ddp-two")]
    paths = report.write_all(records, [], tmp_path)
    assert tmp_path / "breakdown.csv" in paths
    with open(tmp_path / "breakdown.csv") as fh:
        [line] = list(csv.DictReader(fh))
    assert list(line) == breakdown.BREAKDOWN_COLUMNS
    [row] = report.build(records, []).losses.rows
    assert line["records"] == "ddp-two" and line["launches"] == "1"
    for name in ("efficiency", "contention", "straggler", "communication",
                 "communication_seconds_per_step", "ideal_images_per_sec"):
        assert float(line[name]) == pytest.approx(row[name])
    assert float(line["straggler"]) == pytest.approx((4 / 0.25 - 4 / 0.4) / 20)
    assert float(line["batch_effect"]) == 0.0 and line["efficiency_ci95_low"]
    assert line["largest_loss"] == row["largest_loss"] == "straggler"


# ---------------------------------------------------------------- case 11: what a user gets

def ray_and_ddp() -> list[dict]:
    """The real run of the issue: Ray's one-worker runs are 20% slower than DDP's, while it
    delivers fewer images per second at 2 workers."""
    out = []
    per = {"ddp": ((13.72, 14.03), (11.00, 12.04)), "ray": ((10.85, 11.35), (10.75, 11.06))}
    for framework, (ones, twos) in per.items():
        for k, (one, two) in enumerate(zip(ones, twos, strict=True), start=1):
            out.append(record([[2 / one] * 3], repeat=k, repeats=2, framework=framework))
            w = both_ranks(4 / two)
            out.append(record(w, 2, nosync=w, repeat=k, repeats=2, framework=framework))
    return out


RAY_NOTE = ("ray's own one-worker run (11.1 images/s) is 20% slower than the best one-worker "
            "run (ddp, 13.9 images/s), which flatters its own efficiency: 49% against its own "
            "run, 39% against the best")


def test_case11_verdict_ranks_delivered_throughput_and_names_the_slow_baseline():
    model = report.build(ray_and_ddp(), [])
    [series] = model.losses.series
    text = series.verdict
    assert text.startswith("At 2 workers, ranked by the throughput they deliver: ddp 11.5 "
                           "images/s")
    assert "; ray 10.9 images/s, 49% of its own ideal (39% against the best one-worker run, " \
           "ddp)" in text
    assert RAY_NOTE in text and "scales best" not in text


def test_case11_report_headline_says_the_same():
    model = report.build(ray_and_ddp(), [])
    [group] = model.groups
    assert group.headline.startswith("At 2 workers, ranked by the throughput they deliver: "
                                     "ddp 11.5 images/s")
    assert "; ray 10.9 images/s (39% of ideal against the best one-worker run)" in group.headline
    assert RAY_NOTE in group.headline
    headline = markdown.render(model, {}).split("## Throughput and scaling efficiency")[1]
    assert RAY_NOTE in headline.split("\n## ")[0]


# ---------------------------------------------------------------- the same families elsewhere

def test_report_settings_come_from_the_records_behind_the_rows():
    # a launch recorded again (--resume): the stale record's 5 trials stand behind no row
    stale = fake_record((5.0,) * 5)
    again = fake_record((10.0, 10.1, 9.9), timestamp="2026-01-01T01:00:00+0000")
    model = report.build([stale, again], [])
    assert model.settings == (("weak", 1, 3, 1, 1),)
    assert "5 trials" not in model.settings_text


def test_breakdown_rows_add_up_with_the_batch_effect_column():
    for records in (strong_sweep(), drifting_launches(), ray_and_ddp()):
        for row in breakdown.rows(records):
            assert row["accounted"] == pytest.approx(1.0)


def test_efficiency_vs_best_is_paired_like_the_efficiency():
    # ddp's own one-worker run is the best one: both numbers are the same one
    ddp = only(aggregate.summary_rows(ray_and_ddp()), world_size=2, framework="ddp")
    assert ddp["best_one_worker_framework"] == "ddp"
    assert ddp["efficiency_vs_best"] == ddp["efficiency"]
    [bd] = [r for r in breakdown.rows(ray_and_ddp()) if r["framework"] == "ddp"]
    assert bd["efficiency_vs_best"] == bd["efficiency"] == pytest.approx(ddp["efficiency"])


def test_a_failed_launch_run_again_ok_says_so_in_the_problems():
    failed = fake_record(status="failed", error="boom")
    model = report.build([failed, fake_record(timestamp="2026-01-01T01:00:00+0000")], [])
    [failure] = model.failures
    assert failure.reason == "boom; this launch also has an ok record, which the tables use"
