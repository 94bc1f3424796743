"""Record schema, JSONL loading with bad lines, progress lines (fake clock)."""

import io
import json

import pytest

from scalebench.frameworks import ddp
from scalebench.frameworks.base import LaunchOutcome
from scalebench.records import results
from scalebench.running.progress import Progress
from scalebench.spec.launch import Job, LaunchSpec
from scalebench.tasks import train

SPEC = Job("001-ddp-vgg16-w2-fp32", "train",
           LaunchSpec(framework="ddp", world_size=2, nodes=1, device="cpu", backend="gloo",
                      timeout=60, threads_per_worker=1, options=ddp.Options()),
           train.TrainSpec(model="vgg16", batch_size=4, global_batch=8, image_size=64,
                           aux_logits=False, precision="fp32", scaling="weak", data="synthetic",
                           warmup=1, iters=5, trials=2, loader_workers=0, params=138_357_544))
RESULT = {"window_seconds": [[1.0, 2.0], [2.0, 1.0]], "hostnames": ["a", "a"],
          "first_timed_step_unix": 105.0, "train_start_unix": 103.0, "warmup_seconds": 1.5}


def test_ok_record_from_outcome():
    record = train.build_record(SPEC, LaunchOutcome("ok", RESULT, launch_unix=100.0), {"x": 1})
    # 8 images x 5 iters per window, slowest rank 2 s in both trials
    assert record["trial_images_per_sec"] == [20.0, 20.0]
    assert record["images_per_sec"] == 20.0
    assert record["per_worker_images_per_sec"] == 10.0
    assert record["startup_seconds"] == 5.0
    assert record["schema_version"] == results.SCHEMA_VERSION
    json.dumps(record, allow_nan=False)


def test_failed_and_skipped_records_carry_reason():
    failed = train.build_record(SPEC, LaunchOutcome("failed", None, error="rank 1: boom",
                                                      stderr_tail="tb"), {})
    assert failed["status"] == "failed" and failed["error"] == "rank 1: boom"
    skipped = train.build_record(SPEC, None, {}, skipped_reason="horovod missing")
    assert skipped["status"] == "skipped" and skipped["error"] == "horovod missing"


def test_validate_rejects_bad_records():
    good = train.build_record(SPEC, LaunchOutcome("ok", RESULT, launch_unix=100.0), {})
    for mutate, message in [
        (lambda r: r.pop("model"), "missing field 'model'"),
        (lambda r: r.update(world_size="2"), "field 'world_size' has type str"),
        (lambda r: r.update(status="weird"), "status 'weird'"),
        (lambda r: r.update(trial_images_per_sec=[1.0]), "one value per trial"),
        (lambda r: r.update(schema_version=99), "schema_version 99 is not supported"),
        (lambda r: r.update(sweep_id=7), "field 'sweep_id' has type int"),
    ]:
        bad = json.loads(json.dumps(good))
        mutate(bad)
        with pytest.raises(results.RecordError, match=message):
            results.validate(bad)


def test_load_skips_malformed_lines_with_line_numbers(tmp_path):
    path = tmp_path / "results.jsonl"
    good = train.build_record(SPEC, LaunchOutcome("ok", RESULT, launch_unix=100.0), {})
    results.append(path, good)
    with open(path, "a") as fh:
        fh.write('{"schema_version": 1, "kind": "tr\n')  # truncated by a crash
        fh.write("[1, 2]\n")
    results.append(path, good)
    records, problems = results.load([tmp_path])
    assert len(records) == 2
    assert [(p.line, p.reason.split(" (")[0]) for p in problems] == [
        (2, "malformed JSON"), (3, "not a JSON object")]
    assert str(problems[0]).startswith(f"{path}:2: invalid record: malformed JSON")
    assert results.done_keys(path) == set(train.TASK.resume_keys(SPEC))


def test_progress_lines_and_estimate():
    now = [0.0]
    out = io.StringIO()
    p = Progress(3, stream=out, live=False, clock=lambda: now[0])
    p.start("vgg16 ddp x1 fp32")
    now[0] = 10.0
    assert p.status_line() == "[1/3] vgg16 ddp x1 fp32 running 10s, 2 after this"
    record = train.build_record(SPEC, LaunchOutcome("ok", RESULT, launch_unix=100.0), {})
    p.finish([record])
    assert p.estimate_left() == 20.0
    p.start("vgg16 ddp x2 fp32")
    now[0] = 14.0
    assert p.status_line() == "[2/3] vgg16 ddp x2 fp32 running 4s, 1 after this, ~16s left"
    p.finish([{**record, "status": "timeout", "error": "no result within 60 s"}])
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("[1/3] vgg16 ddp x2 fp32: 20.00 images/s (95% CI ")
    assert lines[1] == "[2/3] vgg16 ddp x2 fp32: TIMEOUT - no result within 60 s"
