"""The one executor loop with fake frameworks (no launches): resume, set-aside of an old results
file, idle sessions suspended between frameworks, Ctrl-C, unusable results, skipped frameworks."""

from __future__ import annotations

import io
import json

import pytest

from scalebench import frameworks
from scalebench.frameworks import ddp, horovod, ray
from scalebench.frameworks.base import Framework, LaunchOutcome
from scalebench.hardware.devices import DeviceInfo
from scalebench.records import results
from scalebench.running import executor
from scalebench.running.progress import Progress
from scalebench.spec import config
from scalebench.tasks import train
from tests.conftest import read_records

CPU = DeviceInfo("cpu", "gloo", 0, 2)


class FakeFramework(Framework):
    """Records every call in a shared log; launches return a made-up but valid result."""

    def __init__(self, name: str, options_type: type, log: list[str], available: bool = True):
        self.name = name
        self.options_type = options_type
        self.log = log
        self.is_available = available
        self.result: dict | None = None  # None: a good result
        self.interrupt_on: int | None = None  # raise KeyboardInterrupt at this launch
        self.die_after: int | None = None  # a grouped launch dies after this many members
        self.interrupt_after: int | None = None  # Ctrl-C in a grouped launch after N members
        self.launches = 0

    def available(self):
        return (True, "fake") if self.is_available else (False, f"{self.name} is missing; fix it")

    def open_session(self, options, device, out_dir):
        self.log.append(f"open {self.name}")

    def suspend(self):
        self.log.append(f"suspend {self.name}")

    def close_session(self):
        self.log.append(f"close {self.name}")

    def launch(self, job, run_dir):
        self.launches += 1
        if self.interrupt_on == self.launches:
            raise KeyboardInterrupt
        if job.kind == "group":
            return self.launch_group(job, run_dir)
        self.log.append(f"launch {self.name} x{job.launch.world_size}")
        return LaunchOutcome("ok", self.result_of(job), launch_unix=10.0)

    def result_of(self, job):
        world, trials = job.launch.world_size, job.task.trials
        return self.result if self.result is not None else {
            "window_seconds": [[0.5] * trials for _ in range(world)], "hostnames": ["h"] * world,
            "first_timed_step_unix": 11.0, "build_start_unix": 10.5}

    def launch_group(self, job, run_dir):
        members = job.task.jobs()
        self.log.append(f"launch {self.name} x{job.launch.world_size} group of {len(members)} "
                        f"timeout {job.launch.timeout:g}")
        results = [self.result_of(m) for m in members]
        if self.interrupt_after is not None:
            run_dir.mkdir(parents=True, exist_ok=True)
            for index, result in enumerate(results[:self.interrupt_after]):
                (run_dir / f"member-{index}.json").write_text(json.dumps(result))
            raise KeyboardInterrupt
        if self.die_after is None:
            return LaunchOutcome("ok", {"members": results}, launch_unix=10.0)
        run_dir.mkdir(parents=True, exist_ok=True)
        for index, result in enumerate(results[:self.die_after]):
            (run_dir / f"member-{index}.json").write_text(json.dumps(result))
        self.die_after = None  # the isolated relaunches succeed
        return LaunchOutcome("failed", None, "rank 1: killed by signal 9", "tail", 10.0)


@pytest.fixture
def fakes(monkeypatch):
    log: list[str] = []
    made = {"ddp": FakeFramework("ddp", ddp.Options, log),
            "horovod": FakeFramework("horovod", horovod.Options, log),
            "ray": FakeFramework("ray", ray.Options, log)}
    monkeypatch.setattr(frameworks, "get", lambda name: made[name])
    return made, log


def plan(**values):
    sweep = config.build_spec({"models": "vgg16", "frameworks": "ddp,ray", "workers": "1,2",
                               "image_size": 32, "batch_size": 2, "trials": 2, "iters": 1,
                               **values})
    return sweep, train.plan(sweep, CPU)


def run(sweep, jobs, out, **kwargs):
    stream = io.StringIO()
    outcome = executor.execute(jobs, CPU, out, sweep.options,
                               progress=Progress(len(jobs), stream=stream, live=False), **kwargs)
    return outcome, stream.getvalue()


def test_runs_every_job_and_suspends_idle_sessions(tmp_path, fakes):
    made, log = fakes
    sweep, jobs = plan()
    outcome, text = run(sweep, jobs, tmp_path)
    assert log == ["open ddp", "launch ddp x1", "launch ddp x2",
                   "open ray", "suspend ddp", "launch ray x1",
                   "suspend ddp", "launch ray x2", "close ddp", "close ray"]
    records = read_records(tmp_path / "results.jsonl")
    assert [(r["framework"], r["world_size"], r["status"]) for r in records] == [
        ("ddp", 1, "ok"), ("ddp", 2, "ok"), ("ray", 1, "ok"), ("ray", 2, "ok")]
    assert records[1]["images_per_sec"] == pytest.approx(2 * 2 * 1 / 0.5)  # 2 workers x batch 2
    assert "[4/4] vgg16 ray x2 fp32: 8.00 images/s" in text


def test_resume_skips_what_is_recorded_ok(tmp_path, fakes):
    made, log = fakes
    sweep, jobs = plan()
    run(sweep, jobs[:2], tmp_path)
    log.clear()
    outcome, text = run(sweep, jobs, tmp_path, resume=True)
    assert outcome.skipped_existing == 2 and "already recorded ok (--resume)" in text
    assert [entry for entry in log if entry.startswith("launch")] == ["launch ray x1",
                                                                      "launch ray x2"]
    assert len(read_records(tmp_path / "results.jsonl")) == 4


def test_without_resume_an_old_file_is_set_aside(tmp_path, fakes):
    sweep, jobs = plan(frameworks="ddp")
    run(sweep, jobs, tmp_path)
    outcome, text = run(sweep, jobs, tmp_path)
    assert outcome.set_aside is not None and outcome.set_aside.parent == tmp_path / "previous"
    assert len(read_records(outcome.set_aside)) == 2
    assert len(read_records(tmp_path / "results.jsonl")) == 2
    assert "previous results moved to" in text
    appended, _ = run(sweep, jobs, tmp_path, fresh_file=False)  # allreduce's way: append
    assert appended.set_aside is None and len(read_records(tmp_path / "results.jsonl")) == 4


def test_ctrl_c_keeps_a_valid_file_and_closes_every_session(tmp_path, fakes):
    made, log = fakes
    made["ray"].interrupt_on = 1
    sweep, jobs = plan()
    outcome, text = run(sweep, jobs, tmp_path)
    assert outcome.interrupted and "continue with --resume" in text
    records, problems = results.load([tmp_path])
    assert not problems and [r["framework"] for r in records] == ["ddp", "ddp"]
    assert log[-2:] == ["close ddp", "close ray"]


def test_an_unusable_result_becomes_a_failed_record(tmp_path, fakes):
    made, _ = fakes
    made["ddp"].result = {"window_seconds": [[0.5], [0.5, 0.5]]}  # ranks disagree on trials
    sweep, jobs = plan(frameworks="ddp", workers="2")
    run(sweep, jobs, tmp_path)
    [record] = read_records(tmp_path / "results.jsonl")
    assert record["status"] == "failed" and "unreadable worker result" in record["error"]
    assert "different trial counts" in record["error"]


def test_an_unavailable_framework_gives_skipped_records_and_no_session(tmp_path, fakes):
    made, log = fakes
    made["ray"].is_available = False
    sweep, jobs = plan()
    outcome, text = run(sweep, jobs, tmp_path)
    records = read_records(tmp_path / "results.jsonl")
    assert [r["status"] for r in records] == ["ok", "ok", "skipped", "skipped"]
    assert records[2]["error"] == "ray is missing; fix it"
    assert "open ray" not in log and "SKIPPED - ray is missing" in text


def test_grouped_launch_measures_configurations_that_share_a_launch(tmp_path, fakes):
    made, log = fakes
    sweep, jobs = plan(models="vgg16,resnet101,inception_v3", image_size=75, frameworks="ddp",
                       timeout=100)
    outcome, text = run(sweep, jobs, tmp_path, launch_mode="grouped")
    assert [e for e in log if e.startswith("launch")] == [
        "launch ddp x1 group of 3 timeout 300", "launch ddp x2 group of 3 timeout 300"]
    records = read_records(tmp_path / "results.jsonl")
    assert [(r["model"], r["world_size"], r["launch"], r["group_position"]) for r in records] == [
        ("vgg16", 1, "grouped", 1), ("resnet101", 1, "grouped", 2),
        ("inception_v3", 1, "grouped", 3), ("vgg16", 2, "grouped", 1),
        ("resnet101", 2, "grouped", 2), ("inception_v3", 2, "grouped", 3)]
    assert len({r["group_id"] for r in records}) == 2 and {r["group_size"] for r in records} == {3}
    # the first carries the launch's start-up, the others their own build and warm-up
    assert [r["startup_seconds"] for r in records[:3]] == [1.0, 0.5, 0.5]
    assert "[6/6] inception_v3 ddp x2 fp32" in text and "3 configurations in one launch" in text


def test_a_group_that_dies_keeps_what_it_measured_and_relaunches_the_rest(tmp_path, fakes):
    made, log = fakes
    made["ddp"].die_after = 1
    sweep, jobs = plan(models="vgg16,resnet101,inception_v3", image_size=75, frameworks="ddp",
                       workers="2")
    run(sweep, jobs, tmp_path, launch_mode="grouped")
    records = read_records(tmp_path / "results.jsonl")
    assert [(r["model"], r["status"], r["launch"]) for r in records] == [
        ("vgg16", "ok", "grouped"), ("resnet101", "failed", "grouped"),
        ("inception_v3", "ok", "isolated")]
    assert "rank 1: killed by signal 9 (grouped launch, configuration 2 of 3)" == \
        records[1]["error"]
    assert [e for e in log if e.startswith("launch")] == ["launch ddp x2 group of 3 timeout 2700",
                                                          "launch ddp x2"]


def test_ctrl_c_in_a_group_keeps_the_configurations_it_had_measured(tmp_path, fakes):
    made, _ = fakes
    made["ddp"].interrupt_after = 2
    sweep, jobs = plan(models="vgg16,resnet101,inception_v3", image_size=75, frameworks="ddp",
                       workers="2")
    outcome, _ = run(sweep, jobs, tmp_path, launch_mode="grouped")
    assert outcome.interrupted
    records = read_records(tmp_path / "results.jsonl")
    assert [(r["model"], r["status"]) for r in records] == [("vgg16", "ok"), ("resnet101", "ok")]


def test_resume_works_across_groups(tmp_path, fakes):
    made, log = fakes
    sweep, jobs = plan(models="vgg16,resnet101", image_size=75, frameworks="ddp", workers="2")
    run(sweep, jobs[:1], tmp_path, launch_mode="grouped")
    log.clear()
    outcome, _ = run(sweep, jobs, tmp_path, launch_mode="grouped", resume=True)
    assert outcome.skipped_existing == 1
    assert [e for e in log if e.startswith("launch")] == ["launch ddp x2"]


def test_repeats_are_never_grouped_together(tmp_path, fakes):
    made, log = fakes
    sweep, jobs = plan(models="vgg16,resnet101", image_size=75, frameworks="ddp", workers="2",
                       repeats=2, seed=1)
    run(sweep, jobs, tmp_path, launch_mode="grouped")
    assert [e for e in log if e.startswith("launch")] == [
        "launch ddp x2 group of 2 timeout 1800", "launch ddp x2 group of 2 timeout 1800"]
    records = read_records(tmp_path / "results.jsonl")
    groups = {}
    for r in records:
        groups.setdefault(r["group_id"], set()).add(r["repeat"])
    assert all(len(repeats) == 1 for repeats in groups.values())


def test_every_record_of_a_sweep_carries_its_sweep_id_and_resume_keeps_it(tmp_path, fakes):
    # issue 22, case 3: history's point is one sweep, so each sweep has an id of its own
    sweep, jobs = plan()
    run(sweep, jobs[:2], tmp_path / "a")
    run(sweep, jobs[2:], tmp_path / "a", resume=True)
    run(sweep, jobs, tmp_path / "b")
    first = read_records(tmp_path / "a" / "results.jsonl")
    second = read_records(tmp_path / "b" / "results.jsonl")
    assert len({r["sweep_id"] for r in first}) == 1 and len(first) == 4
    assert len({r["sweep_id"] for r in second}) == 1
    assert first[0]["sweep_id"] != second[0]["sweep_id"]
    # records written before sweep ids: a resumed sweep gets a new id and still loads
    old = tmp_path / "c" / "results.jsonl"
    old.parent.mkdir()
    old.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "sweep_id"}) + "\n"
                           for r in first[:2]))
    run(sweep, jobs, tmp_path / "c", resume=True)
    records, problems = results.load([old])
    assert problems == [] and [bool(r.get("sweep_id")) for r in records] == [False] * 2 + [True] * 2
