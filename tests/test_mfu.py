"""MFU: counted FLOPs against torchvision's published figures, the GEMM peak probe, datasheet
peaks, MFU arithmetic from fabricated records, the report section, list and predict."""

from __future__ import annotations

import dataclasses
import json

import pytest

from scalebench import cli, report, tasks
from scalebench.analysis import aggregate, mfu
from scalebench.hardware import datasheet, peak
from scalebench.hardware.devices import DeviceInfo
from scalebench.models import flops, workloads
from scalebench.spec import units
from scalebench.spec.errors import UserError
from scalebench.tasks import train
from tests.conftest import fake_record

# torchvision's model documentation: forward GFLOPS at the native input (224 px; Inception V3
# 299 px), which are multiply-adds (GMACs): ResNet-50 is listed at 4.09, its well-known MAC count.
# FlopCounterMode counts 2 FLOPs per multiply-add, so published = counted / 2 / 1e9. The
# figures are rounded to two decimals (at most 0.1% of 5.71): the tolerance is 0.5%.
PUBLISHED_GMACS = {"resnet101": 7.80, "inception_v3": 5.71, "vgg16": 15.47}
TOLERANCE = 0.005


def test_counted_flops_match_torchvision_published_figures():
    for model, gmacs in PUBLISHED_GMACS.items():
        native = workloads.get_info(model).native_image_size
        counted = flops.inference_flops(model, native) / 2 / 1e9
        assert counted == pytest.approx(gmacs, rel=TOLERANCE), model
        # the recorded count is the training step: forward, loss and backward (the backward
        # computes gradients of activations and weights, about twice the forward; the first
        # convolution needs no input gradient, so a little less)
        step = flops.count_train_flops(model, native, workloads.uses_aux_logits(model, native))
        assert 1.95 < step.backward_to_forward < 2.0, model
        assert step.forward_flops_per_image == pytest.approx(
            flops.inference_flops(model, native), rel=0.01 if model != "inception_v3" else 0.05)
        assert "FlopCounterMode" in step.method and "meta device" in step.method


def test_meta_device_count_equals_a_count_on_real_tensors():
    # VGG-16 at 32 px: convolutions and matrix products, the two kinds counted, in a second
    module, _ = workloads.build_model("vgg16", 32)
    forward, total = flops.count_step(module, 32, device="cpu")
    counted = flops.count_train_flops("vgg16", 32, False)
    assert (forward, total) == (counted.forward_flops_per_image, counted.flops_per_image)


def test_a_count_is_kept_per_torch_and_torchvision_version_and_read_back(tmp_path, monkeypatch):
    monkeypatch.setenv("SCALEBENCH_CACHE", str(tmp_path))
    flops.train_flops.cache_clear()
    counted = []
    real = flops.count_train_flops
    monkeypatch.setattr(flops, "count_train_flops",
                        lambda *args: counted.append(args) or real(*args))
    try:
        first = flops.for_run("vgg16", 32)
        assert counted == [("vgg16", 32, False)]
        path = flops.cache_path()
        assert path.parent == tmp_path and "torch" in path.name and "torchvision" in path.name
        flops.train_flops.cache_clear()  # a later sweep: a new process
        assert flops.for_run("vgg16", 32) == first and len(counted) == 1
        path.write_text("{not json")  # a damaged file is counted again, and rewritten
        flops.train_flops.cache_clear()
        assert flops.for_run("vgg16", 32) == first and len(counted) == 2
        assert json.loads(path.read_text())
        monkeypatch.setattr(flops, "COUNT_VERSION", flops.COUNT_VERSION + 1)
        flops.train_flops.cache_clear()  # another way of counting: the old entry is not read
        assert flops.for_run("vgg16", 32) == first and len(counted) == 3
    finally:
        flops.train_flops.cache_clear()


def test_inception_counts_its_aux_head_only_where_the_run_builds_it():
    with_aux, without = flops.for_run("inception_v3", 299), flops.for_run("inception_v3", 298)
    assert with_aux.aux_logits and not without.aux_logits
    assert "with the aux head" in with_aux.method and "aux" not in without.method
    assert with_aux.flops_per_image > without.flops_per_image


def test_plan_records_the_count_in_every_job():
    from tests.test_config import spec

    jobs = train.plan(spec(models="vgg16,inception_v3", workers="1,2", image_size=75),
                      DeviceInfo("cpu", "gloo", 0, 2))
    for job in jobs:
        count = flops.for_run(job.task.model, 75)
        assert job.task.flops_per_image == count.flops_per_image
        assert job.task.flops_method == count.method


# ---------------------------------------------------------------- the peak

def test_cpu_probe_measures_a_positive_peak_quickly():
    import time

    began = time.perf_counter()
    found = peak.probe("cpu", "fp32", budget=0.2)
    assert time.perf_counter() - began < 5
    assert found.flops > 1e8  # any CPU of this century does more than 0.1 GFLOP/s
    assert found.method.startswith("measured: best of ") and "float32 GEMMs" in found.method
    assert found.datasheet_flops is None and found.datasheet_source is None  # no CPU datasheets


def test_the_child_process_probe_returns_its_peak_through_a_file():
    # the way CUDA peaks are measured (the sweep holds no CUDA context), here on the CPU
    found = peak.in_child("cpu", "fp32")
    assert found.flops > 1e8 and found.method.startswith("measured: best of ")
    failed = peak.in_child("cpu", "int8")  # not a precision: the child exits with an error
    assert failed.flops is None and failed.method.startswith("probe failed (exit 2)")


def test_probe_size_follows_the_budget():
    _, small, _, _ = peak.gemm_probe("cpu", "fp32", budget=0.02)
    _, large, _, seconds = peak.gemm_probe("cpu", "fp32", budget=0.5)
    assert small < large and small % 64 == 0 and large % 64 == 0
    assert seconds < 3


def test_the_budget_comes_from_the_environment_else_the_default(monkeypatch):
    monkeypatch.delenv(peak.BUDGET_ENV, raising=False)
    assert peak.budget_seconds("cpu") == 0.8 and peak.budget_seconds("cuda") == 1.0
    monkeypatch.setenv(peak.BUDGET_ENV, "0.05")
    assert peak.budget_seconds("cuda") == 0.05
    _, _, _, seconds = peak.gemm_probe("cpu", "fp32")  # the environment's budget, not 0.8 s
    assert seconds < 0.5


@pytest.mark.parametrize("value, message", [
    ("0", "expected a number > 0, got 0"), ("-1", "expected a number > 0, got -1"),
    ("soon", "expected a number > 0, got 'soon'"), ("nan", "expected a number > 0, got nan"),
    ("inf", "expected a finite number > 0, got 'inf'")])
def test_a_bad_budget_is_one_line_exit_2_before_any_run(monkeypatch, capsys, tmp_path, value,
                                                         message):
    from scalebench import cli

    monkeypatch.setenv(peak.BUDGET_ENV, value)
    code = cli.main(["sweep", "--frameworks", "ddp", "--models", "resnet101", "--workers", "1",
                     "--device", "cpu", "--out", str(tmp_path / "out"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.strip().splitlines() == [
        f"scalebench sweep: error: SCALEBENCH_PEAK_SECONDS: {message}"]
    assert not (tmp_path / "out" / "results.jsonl").exists()


@pytest.mark.parametrize("device, precision, tf32, capability, math", [
    ("cuda", "fp32", "default", 8, "tf32"),  # cuDNN's default TF32 convolutions on Ampere+
    ("cuda", "fp32", "default", 7, "fp32"),
    ("cuda", "fp32", "off", 9, "fp32"),
    ("cuda", "fp32", "on", 9, "tf32"),
    ("cuda", "bf16", "default", 9, "bf16"),
    ("cpu", "fp32", "on", None, "fp32"),
])
def test_the_math_a_run_uses(device, precision, tf32, capability, math):
    assert peak.math_of(device, precision, tf32, capability) == math


@pytest.mark.parametrize("name, math, teraflops, entry", [
    ("NVIDIA H100 80GB HBM3", "bf16", 989.5, "H100 SXM"),
    ("NVIDIA H100 PCIe", "tf32", 378, "H100 PCIe"),
    ("NVIDIA H200", "bf16", 989.5, "H200 SXM"),
    ("NVIDIA A100-SXM4-80GB", "fp16", 312, "A100"),
    ("NVIDIA A10", "fp32", 31.2, "A10"),
    ("Tesla V100-SXM2-16GB", "fp16", 125, "V100 SXM2"),
    ("Tesla V100-PCIE-32GB", "fp16", 112, "V100 PCIe"),
])
def test_datasheet_peaks(name, math, teraflops, entry):
    found = datasheet.lookup(name, math)
    assert found.flops == pytest.approx(teraflops * 1e12)
    assert found.source.endswith(f"{entry}, {math}") and "dense" in found.source


def test_no_datasheet_peak_for_unknown_devices_or_missing_maths():
    assert datasheet.lookup("AMD EPYC 7B13", "fp32") is None
    assert datasheet.lookup("NVIDIA A10G", "fp32") is None  # not the A10
    assert datasheet.lookup("Tesla V100-SXM2-16GB", "bf16") is None  # Volta has no bf16


def test_peaks_are_measured_once_per_precision_and_attached_to_every_train_job(monkeypatch):
    from tests.test_config import spec

    calls = []

    def fake_measure(device, precision, tf32):
        calls.append((device, precision, tf32))
        return peak.Peak(1e12 if precision == "fp32" else 2e12, f"fake {precision}", 3e12,
                         "sheet")

    monkeypatch.setattr(peak, "measure", fake_measure)
    jobs = train.plan(spec(models="vgg16,inception_v3", workers="1,2", image_size=75,
                           precision="fp32,bf16"), DeviceInfo("cpu", "gloo", 0, 2))
    attached = peak.with_peaks(jobs, DeviceInfo("cpu", "gloo", 0, 2))
    assert calls == [("cpu", "fp32", "default"), ("cpu", "bf16", "default")]
    for job in attached:
        want = 1e12 if job.task.precision == "fp32" else 2e12
        assert (job.task.peak_flops, job.task.peak_method) == (want, f"fake {job.task.precision}")
        assert (job.task.datasheet_peak_flops, job.task.datasheet_peak_source) == (3e12, "sheet")
    # the jobs are otherwise unchanged: same identity, same resume keys
    assert [train.TASK.resume_keys(j) for j in attached] == \
        [train.TASK.resume_keys(j) for j in jobs]


# ---------------------------------------------------------------- MFU from records

FLOPS, PEAK, SHEET = 3.0e9, 60.0e9, 100.0e9  # FLOPs per image; FLOP/s of the device


def mfu_record(trials, world_size=1, device="cpu", **fields):
    values = {"flops_per_image": FLOPS, "flops_method": "counted", "peak_flops": PEAK,
              "peak_method": "measured", "datasheet_peak_flops": SHEET,
              "datasheet_peak_source": "sheet", "device": device, **fields}
    r = fake_record(trials, world_size=world_size, **values)
    r.update(mfu.record_fields(r))
    return r


def test_mfu_from_fabricated_records_equals_the_hand_calculation():
    one = mfu_record((10.0, 10.0, 10.0))
    two = mfu_record((16.0, 16.0, 16.0), world_size=2)
    # one worker on the CPU holds the whole probed device: 10 images/s x 3 GFLOP = 30 GFLOP/s
    assert one["achieved_flops_per_worker"] == pytest.approx(30e9)
    assert one["mfu"] == pytest.approx(30e9 / 60e9) and one["mfu_datasheet"] == \
        pytest.approx(30e9 / 100e9)
    # two workers share the node's cores: 8 images/s each x 3 GFLOP over half of 60 GFLOP/s
    assert two["achieved_flops_per_worker"] == pytest.approx(24e9)
    assert two["mfu"] == pytest.approx(24e9 / 30e9)
    rows = {r["world_size"]: r for r in aggregate.summary_rows([one, two])}
    assert rows[1]["mfu"] == pytest.approx(0.5) and rows[2]["mfu"] == pytest.approx(0.8)
    assert rows[2]["peak_flops_per_worker"] == pytest.approx(30e9)
    assert rows[2]["efficiency"] == pytest.approx(0.8)
    # the interval is the throughput's, carried over: MFU is linear in images/s
    spread = mfu_record((15.0, 16.0, 17.0), world_size=2)
    [row] = aggregate.summary_rows([spread])
    assert row["mfu_ci95_low"] == pytest.approx(row["ci95_low"] / 2 * FLOPS / (PEAK / 2))
    assert row["mfu_ci95_high"] == pytest.approx(row["ci95_high"] / 2 * FLOPS / (PEAK / 2))


def test_on_cuda_each_worker_holds_one_gpu():
    r = mfu_record((400.0, 400.0), world_size=4, device="cuda", peak_flops=312e12)
    # 100 images/s per worker x 3 GFLOP = 300 GFLOP/s of one GPU's 312 TFLOP/s
    assert r["mfu"] == pytest.approx(300e9 / 312e12)
    assert mfu.worker_share("cuda", 4, 1) == 1.0 and mfu.worker_share("cpu", 4, 2) == 0.5


def test_old_records_without_flops_still_load_and_report(tmp_path):
    old = [fake_record((10.0,) * 3), fake_record((19.0,) * 3, world_size=2)]
    assert all("flops_per_image" not in r for r in old)
    rows = aggregate.summary_rows(old)
    assert all(r["mfu"] is None and r["flops_per_image"] is None for r in rows)
    report.write_all(old, [], tmp_path)
    text = (tmp_path / "report.md").read_text()
    assert "no MFU." in text and not (tmp_path / "mfu.png").exists()
    without_peak = mfu_record((10.0,) * 3, peak_flops=None, peak_method="probe failed: x")
    assert without_peak["mfu"] is None and without_peak["achieved_flops_per_worker"] == 30e9


def test_a_record_with_a_wrong_type_is_refused():
    from scalebench.records import results

    r = mfu_record((10.0,) * 3)
    r["mfu"] = "high"
    with pytest.raises(results.RecordError, match="'mfu'"):
        results.validate(r)


def test_report_shows_the_mfu_table_peaks_and_figure(tmp_path):
    records = [mfu_record((10.0,) * 3), mfu_record((16.0,) * 3, world_size=2),
               mfu_record((12.0,) * 3, framework="horovod"),
               mfu_record((18.0,) * 3, framework="horovod", world_size=2)]
    written = report.write_all(records, [], tmp_path)
    assert tmp_path / "mfu.png" in written
    text = (tmp_path / "report.md").read_text()
    section = text.split("## Distance to the compute limit (MFU)")[1].split("\n## ")[0]
    assert "![mfu](mfu.png)" in section
    assert "| ddp | 2 | 8 | 3 GFLOP | 24 GFLOP/s | 30 GFLOP/s | 80.0% |" in section
    assert "| horovod | 1 | 12 | 3 GFLOP | 36 GFLOP/s | 60 GFLOP/s | 60.0% |" in section
    assert "- cpu, fp32: 60 GFLOP/s per device, measured; datasheet 100 GFLOP/s (sheet)" in section
    page = (tmp_path / "report.html").read_text()
    assert 'id="fig-mfu"' in page.split('id="mfu"')[1].split("<h2 ")[0]
    with open(tmp_path / "summary.csv") as fh:
        header = fh.readline().strip().split(",")
    assert {"flops_per_image", "mfu", "mfu_ci95_low", "peak_flops", "mfu_datasheet"} <= set(header)


def test_an_mfu_above_the_peak_is_marked(tmp_path):
    # a probe slowed by another load on the machine: the run beats the "peak"
    records = [mfu_record((10.0,) * 3, peak_flops=20e9)]
    report.write_all(records, [], tmp_path)
    text = (tmp_path / "report.md").read_text()
    assert "| 150.0% **above the peak** |" in text


# ---------------------------------------------------------------- list and predict

def test_list_shows_flops_per_image(capsys):
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    count = flops.for_run("vgg16", 224)
    assert f"{units.format_flops(count.flops_per_image)} per image per training step" in out
    assert "FlopCounterMode" in out


PREDICT = ["predict", "--model", "vgg16", "--workers", "512", "--bandwidth", "25Gbit",
           "--batch-size", "64"]


def test_predict_from_counted_flops_and_a_given_peak(capsys):
    assert cli.main([*PREDICT, "--peak-flops", "989T", "--mfu", "0.4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    counted = flops.for_run("vgg16", 224).flops_per_image
    assert out["compute_source"] == "flops" and out["flops_per_image"] == counted
    assert out["step_seconds_one"] == pytest.approx(64 * counted / (989e12 * 0.4))
    assert out["images_per_sec_one"] == pytest.approx(989e12 * 0.4 / counted)
    # at another input size the count is taken there
    assert cli.main([*PREDICT, "--peak-flops", "989T", "--mfu", "0.4", "--image-size", "112",
                     "--json"]) == 0
    small = json.loads(capsys.readouterr().out)
    assert small["flops_per_image"] == flops.for_run("vgg16", 112).flops_per_image


@pytest.mark.parametrize("extra, message", [
    (["--peak-flops", "989T"], "mfu: --peak-flops needs --mfu"),
    (["--peak-flops", "989T", "--mfu", "1.5"], "mfu: expected a fraction"),
    (["--peak-flops", "lots", "--mfu", "0.4"], "peak_flops: cannot read 'lots'"),
    (["--mfu", "0.4", "--images-per-sec-one", "130"], "mfu: --mfu goes with --peak-flops"),
    (["--peak-flops", "989T", "--mfu", "0.4", "--images-per-sec-one", "130"],
     "images_per_sec_one: give one worker's measured throughput"),
    ([], "images_per_sec_one: give one worker's measured throughput"),
])
def test_predict_compute_input_errors(capsys, extra, message):
    assert cli.main([*PREDICT, *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("text, value", [("989T", 989e12), ("312e12", 312e12),
                                         ("19.5 TFLOPS", 19.5e12), ("100GFLOP/s", 1e11)])
def test_flops_units(text, value):
    assert units.parse_flops(text) == pytest.approx(value)
    assert units.format_flops(value, "FLOP/s").endswith("FLOP/s")


def test_flops_units_refuse_nonsense():
    for text in ("x", "0", "-1T", "5Q"):
        with pytest.raises(UserError, match="peak_flops: cannot read"):
            units.parse_flops(text)


def test_a_failing_count_is_recorded_not_raised(monkeypatch):
    def broken(model, image_size):
        raise RuntimeError("no formula")

    monkeypatch.setattr(flops, "for_run", broken)
    assert flops.recorded("vgg16", 64) == (None, "not counted: RuntimeError: no formula")


def test_job_round_trips_with_its_flops_and_peak():

    job = train.local_job("vgg16", 2, 32)
    job = dataclasses.replace(job, task=dataclasses.replace(job.task, peak_flops=1e11,
                                                            peak_method="measured"))
    again = tasks.job_from_json(job.to_json())
    assert again.task == job.task and again.task.flops_per_image > 0
