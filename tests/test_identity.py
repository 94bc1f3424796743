"""identity: configuration key (with step options), efficiency baseline (weak, strong), resume
key; and the summary rows, summary.csv and report that use them."""

from __future__ import annotations

import csv

import pytest

from scalebench import cli
from scalebench.analysis import aggregate
from scalebench.spec import identity
from tests.conftest import fake_record, reference_records, write_records

TIGHT_1 = (10.0, 10.1, 9.9)
TIGHT_2 = (19.0, 19.2, 18.8)


def horovod(world_size: int, trials=None, **options) -> dict:
    trials = trials or (TIGHT_1 if world_size == 1 else TIGHT_2)
    return fake_record(trials, framework="horovod", world_size=world_size, options=options)


def strong(world_size: int, trials, global_batch: int = 8, **fields) -> dict:
    return fake_record(trials, world_size=world_size, scaling="strong",
                       batch_size=global_batch // world_size, global_batch=global_batch, **fields)


# ---------------------------------------------------------------- configuration key

def test_config_key_includes_step_options():
    plain, compressed = horovod(2), horovod(2, fp16_allreduce=True)
    assert identity.config_key(plain) != identity.config_key(compressed)
    assert identity.key_dict(identity.config_key(compressed))["step_options"] == \
        '{"fp16_allreduce": true}'
    fused = horovod(2, fusion_threshold_mb=32)
    assert len({identity.config_key(r) for r in (plain, compressed, fused)}) == 3


def test_an_option_at_its_default_is_the_same_configuration():
    absent = horovod(2)
    default = horovod(2, fp16_allreduce=False, fusion_threshold_mb=None, timeline=False)
    assert identity.config_key(absent) == identity.config_key(default)
    assert identity.step_label(default) == ""


def test_options_that_do_not_change_the_step_are_not_part_of_the_key():
    # where workers run (hosts) is launch detail, not the timed step
    assert identity.config_key(horovod(2)) == identity.config_key(horovod(2, hosts="a:1,b:1"))
    ddp = fake_record(world_size=2, options={"nnodes": 1, "node_rank": 0})
    assert identity.config_key(ddp) == identity.config_key(fake_record(world_size=2))


def test_step_label_and_describe():
    r = horovod(2, fp16_allreduce=True, fusion_threshold_mb=32)
    assert identity.step_label(r) == "fp16_allreduce, fusion_threshold_mb=32"
    assert identity.step_label(fake_record(world_size=2, options={"bucket_cap_mb": 50})) == \
        "bucket_cap_mb=50"
    words = identity.describe(identity.config_key(r)).split()
    assert words[:3] == ["inception_v3", "horovod", "x2"]
    assert identity.describe(identity.config_key(r)).endswith(
        "[fp16_allreduce, fusion_threshold_mb=32]")
    assert "[" not in identity.describe(identity.config_key(horovod(2)))


def test_device_kind_comes_from_the_environment():
    gpu = fake_record(device="cuda", env={"device_kind": "NVIDIA H100"})
    assert identity.key_dict(identity.config_key(gpu))["device_kind"] == "NVIDIA H100"
    row = {"framework": "ddp", "device": "cuda", "device_kind": "NVIDIA H100"}  # summary row
    assert identity.device_kind(row) == "NVIDIA H100"


# ---------------------------------------------------------------- efficiency baseline

def test_weak_baseline_keeps_the_per_worker_batch():
    two, one = fake_record(world_size=2), fake_record(world_size=1)
    assert identity.baseline_key(two) == identity.config_key(one)
    assert identity.baseline_key(one) == identity.config_key(one)


def test_strong_baseline_keeps_the_global_batch():
    one, two, four = strong(1, TIGHT_1), strong(2, TIGHT_2), strong(4, TIGHT_2)
    assert identity.baseline_key(two) == identity.config_key(one)
    assert identity.baseline_key(four) == identity.config_key(one)
    # per-node efficiency of 2 nodes x 2 workers: one full node, 2 workers of batch 4
    assert identity.baseline_key({**four, "nodes": 2}, 2) == identity.config_key(two)
    # a weak run's baseline is not the strong one-worker run with the same global batch
    assert identity.baseline_key(fake_record(world_size=2, batch_size=4, global_batch=8)) != \
        identity.config_key(one)


def test_baseline_keeps_framework_and_step_options():
    assert identity.baseline_key(horovod(2, fp16_allreduce=True)) == \
        identity.config_key(horovod(1, fp16_allreduce=True))
    assert identity.baseline_key(horovod(2, fp16_allreduce=True)) != \
        identity.config_key(horovod(1))
    best = identity.best_baseline_key(horovod(2, fp16_allreduce=True))
    assert identity.key_dict(best)["framework"] is None
    assert identity.key_dict(best)["step_options"] is None


def test_series_key_spans_frameworks_workers_and_options():
    keys = {identity.series_key(r) for r in
            (fake_record(world_size=1), fake_record(world_size=2), horovod(2),
             horovod(2, fp16_allreduce=True))}
    assert len(keys) == 1
    assert identity.series_key(strong(1, TIGHT_1)) == identity.series_key(strong(2, TIGHT_2))
    assert identity.series_key(strong(2, TIGHT_2)) != identity.series_key(fake_record())


# ---------------------------------------------------------------- resume key

def test_resume_key_takes_every_option_and_the_repeat():
    r = fake_record(world_size=2, options={"nnodes": 1, "node_rank": 0})
    assert identity.resume_key(r) == identity.resume_key(dict(r))
    assert identity.resume_key(r) != identity.resume_key({**r, "options": {"nnodes": 2}})
    assert identity.resume_key(r) != identity.resume_key({**r, "repeat": 2})
    assert identity.resume_key(r) == identity.resume_key({**r, "repeat": 1})  # absent: the first
    assert identity.resume_key(r) != identity.resume_key({**r, "device": "cuda"})
    # a resume key is about the plan: results and environment do not enter it
    assert identity.resume_key(r) == identity.resume_key(
        {**r, "trial_images_per_sec": [1.0, 2.0, 3.0], "env": {}, "status": "failed"})


def test_allreduce_point_key():
    point = {"framework": "ddp", "world_size": 2, "nodes": 1, "dtype": "float32",
             "device": "cpu", "env": {"device_kind": "cpu"}, "size_bytes": 1024}
    assert identity.allreduce_point_key(point) != identity.allreduce_point_key(
        {**point, "size_bytes": 2048})


# ---------------------------------------------------------------- summary rows

def test_summary_rows_keep_step_options_apart():
    records = [horovod(1), horovod(2), horovod(1, fp16_allreduce=True),
               horovod(2, (14.0, 14.1, 13.9), fp16_allreduce=True)]
    rows = {(r["world_size"], r["step_label"]): r for r in aggregate.summary_rows(records)}
    assert set(rows) == {(1, ""), (2, ""), (1, "fp16_allreduce"), (2, "fp16_allreduce")}
    assert rows[2, ""]["efficiency"] == pytest.approx(0.95)
    # against its own (compressed) one-worker run
    assert rows[2, "fp16_allreduce"]["efficiency"] == pytest.approx(0.7)
    assert rows[2, "fp16_allreduce"]["options"] == {"fp16_allreduce": True}
    assert rows[2, "fp16_allreduce"]["step_options"] == "fp16_allreduce"
    assert rows[2, ""]["options"] == {}


def test_summary_rows_strong_scaling_baseline():
    rows = {r["world_size"]: r for r in aggregate.summary_rows(
        [strong(1, TIGHT_1), strong(2, (16.0, 16.1, 15.9))])}
    assert rows[2]["efficiency"] == pytest.approx(0.8)
    assert rows[2]["efficiency_vs_best"] == pytest.approx(0.8)


def test_report_writes_one_row_per_step_options(tmp_path, capsys):
    # in one results file: the same Horovod runs with and without fp16 compression; a later
    # record that spells the default out (fp16_allreduce false) replaces the plain one
    records = [horovod(1), horovod(2), horovod(1, fp16_allreduce=True),
               horovod(2, (14.0, 14.1, 13.9), fp16_allreduce=True),
               {**horovod(2, fp16_allreduce=False), "timestamp": "2026-01-01T01:00:00+0000"}]
    write_records(tmp_path / "results.jsonl", records)
    assert cli.main(["report", str(tmp_path)]) == 0, capsys.readouterr()
    with open(tmp_path / "summary.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 4
    assert sorted((r["world_size"], r["step_options"]) for r in rows) == [
        ("1", ""), ("1", "fp16_allreduce"), ("2", ""), ("2", "fp16_allreduce")]
    by = {(r["world_size"], r["step_options"]): r for r in rows}
    assert float(by["2", "fp16_allreduce"]["efficiency"]) == pytest.approx(0.7)
    assert float(by["2", ""]["efficiency"]) == pytest.approx(0.95)
    report = (tmp_path / "report.md").read_text()
    assert "fp16_allreduce" in report


def test_reference_set_keeps_compressed_horovod_apart():
    records = reference_records("train")
    rows = aggregate.summary_rows(records)
    keys = sorted((r["framework"], r["step_label"], r["world_size"]) for r in rows)
    assert keys == [("ddp", "", 1), ("ddp", "", 2), ("horovod", "", 1), ("horovod", "", 2),
                    ("horovod", "fp16_allreduce", 1), ("horovod", "fp16_allreduce", 2)]
    assert all(r["efficiency"] is not None for r in rows)


def test_a_summary_row_has_its_records_configuration_key():
    # the report joins rows back to their records by this key
    records = [horovod(1), horovod(2, fp16_allreduce=True, hosts="a:2"),
               fake_record(world_size=2, device="cuda", env={"device_kind": "NVIDIA H100"}),
               fake_record(world_size=2, options={"bucket_cap_mb": 50})]
    rows = aggregate.summary_rows(records)
    assert {identity.config_key(r) for r in rows} == {identity.config_key(r) for r in records}


# ---------------------------------------------------------------- TF32 setting

def cuda(tf32: str | None = None, world_size: int = 1, trials=TIGHT_1, **fields) -> dict:
    extra = {} if tf32 is None else {"tf32": tf32}
    return fake_record(trials, world_size=world_size, device="cuda",
                       env={"device_kind": "NVIDIA H200", "backend": "nccl"}, **extra, **fields)


def test_tf32_settings_are_different_configurations():
    absent, default, on, off = cuda(), cuda("default"), cuda("on"), cuda("off")
    assert identity.config_key(absent) == identity.config_key(default)
    assert len({identity.config_key(r) for r in (default, on, off)}) == 3
    assert identity.series_key(on) != identity.series_key(off)
    assert identity.series_key(absent) == identity.series_key(default)
    assert identity.baseline_key(cuda("off", world_size=2)) == identity.config_key(off)
    assert identity.describe(identity.config_key(off)).endswith(" tf32 off")
    assert "tf32" not in identity.describe(identity.config_key(default))
    # --resume: a run with TF32 off does not stand in for a planned default one
    assert identity.resume_key(on) != identity.resume_key(default)
    assert identity.resume_key(absent) == identity.resume_key(default)


def test_history_ids_of_default_tf32_records_do_not_change():
    from scalebench.tracking import history

    r = fake_record()
    assert history._row_id(r) == history._row_id({**r, "tf32": "default"})
    assert history._row_id(r) != history._row_id({**r, "tf32": "on"})


def test_summary_rows_keep_tf32_settings_apart_and_label_tf32_math():
    on_math = {"cudnn_allow_tf32": True, "matmul_precision": "highest"}
    off_math = {"cudnn_allow_tf32": False, "matmul_precision": "highest"}
    records = [cuda("on", math=on_math), cuda("off", math=off_math),
               cuda(math={"cudnn_allow_tf32": False, "matmul_precision": "high"}),
               fake_record(math={"cudnn_allow_tf32": None, "matmul_precision": None})]
    rows = {(r["device"], r["tf32"]): r for r in aggregate.summary_rows(records)}
    assert set(rows) == {("cuda", "on"), ("cuda", "off"), ("cuda", "default"), ("cpu", "default")}
    assert rows["cuda", "on"]["precision_label"] == "fp32 (TF32)"
    assert rows["cuda", "off"]["precision_label"] == "fp32"
    assert rows["cuda", "default"]["precision_label"] == "fp32 (TF32)"  # matmuls at "high"
    assert rows["cpu", "default"]["precision_label"] == "fp32"
    # a record without the measured math: its setting says it
    assert aggregate.precision_label([cuda("on")]) == "fp32 (TF32)"
    assert aggregate.precision_label([cuda()]) == "fp32"


def test_summary_csv_has_the_new_columns(tmp_path, capsys):
    from tests.conftest import launches

    records = launches([TIGHT_1, TIGHT_1, TIGHT_1]) + [
        fake_record(TIGHT_2, world_size=2, warnings=["fp16: GradScaler skipped 2 steps"])]
    write_records(tmp_path / "results.jsonl", records)
    assert cli.main(["report", str(tmp_path)]) == 0, capsys.readouterr()
    with open(tmp_path / "summary.csv") as fh:
        rows = {r["world_size"]: r for r in csv.DictReader(fh)}
    for name in ("processes", "processes_planned", "trials_total", "samples_basis",
                 "precision_label", "tf32", "wrapper_overhead", "warnings"):
        assert name in rows["1"], name
    assert (rows["1"]["processes"], rows["1"]["processes_planned"]) == ("3", "3")
    assert (rows["1"]["samples_basis"], rows["2"]["samples_basis"]) == ("processes", "trials")
    assert rows["1"]["trials_total"] == "9" and rows["2"]["tf32"] == "default"
    assert rows["2"]["warnings"] == "fp16: GradScaler skipped 2 steps"


# ---------------------------------------------------------------- injected faults

def test_injected_faults_are_a_configuration_of_their_own():
    # issue 22, case 8: a faulted run never pools with clean runs of the same configuration
    from scalebench.report.labels import run_label

    faults = {"step_delay": {"rank": 1, "seconds": 0.3}, "input_delay_seconds": 0.2}
    clean = fake_record(TIGHT_2, world_size=2)
    faulted = fake_record(TIGHT_2, world_size=2, faults=faults)
    assert identity.config_key(clean) == identity.config_key(fake_record(world_size=2, faults={}))
    assert identity.config_key(clean) != identity.config_key(faulted)
    assert identity.baseline_key(faulted) == identity.config_key(fake_record(faults=faults))
    words = "faults: input delay 0.2 s, step delay 0.3 s on rank 1"
    assert identity.describe(identity.config_key(faulted)).endswith(f" [{words}]")
    records = [fake_record(), fake_record(faults=faults), clean, faulted]
    rows = aggregate.summary_rows(records)
    assert len(rows) == 4
    assert {identity.config_key(r) for r in rows} == {identity.config_key(r) for r in records}
    [row] = [r for r in rows if r["world_size"] == 2 and r["faults"]]
    assert run_label(row) == f"inception_v3 ddp ({words}) x2"
    assert row["warnings"][0] == f"injected {words} (a fault test, not a measurement of the " \
                                 "framework)"
    assert row["efficiency"] == pytest.approx(0.95)  # against the faulted one-worker run


def test_resume_never_takes_a_clean_run_for_a_faulted_one():
    from dataclasses import replace

    from scalebench.tasks import train
    from tests.test_results import SPEC

    faulted = replace(SPEC, task=replace(SPEC.task, fault_rank=1, fault_step_delay=0.3))
    clean_record = fake_record(world_size=2)
    faulted_record = {**clean_record, "faults": {"step_delay": {"rank": 1, "seconds": 0.3}}}
    assert identity.resume_key(clean_record) != identity.resume_key(faulted_record)
    assert identity.resume_key({**clean_record, "faults": {}}) == identity.resume_key(clean_record)
    # the planned job's key carries the faults its record will carry
    planned = identity.resume_key(train.job_record_shape(faulted))
    assert planned != identity.resume_key(train.job_record_shape(SPEC))
    assert planned[-1] == ("faults", identity.faults_text(faulted_record))
