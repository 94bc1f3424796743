"""The shared timed loop in one process (SingleProcessComm) with a fake clock."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from scalebench.frameworks.base import LaunchOutcome
from scalebench.tasks import train
from scalebench.worker import measure
from scalebench.worker.comm import SingleProcessComm


class CountingComm(SingleProcessComm):
    def __init__(self):
        self.barriers = 0
        self.wrapped = 0

    def barrier(self):
        self.barriers += 1

    def wrap(self, model, optimizer):
        self.wrapped += 1
        return model, optimizer


def test_windows_come_from_the_clock_and_barriers_frame_every_window():
    ticks = itertools.count(step=0.25)
    job = train.local_job("inception_v3", 2, 75, warmup=1, iters=2, trials=3)
    comm = CountingComm()
    result = measure.run(job, comm, clock=lambda: next(ticks))
    # one clock read at each end of a window: consecutive reads 0.25 s apart
    assert result["window_seconds"] == [[0.25, 0.25, 0.25]]
    assert comm.wrapped == 0  # one worker: the plain step, whatever the framework
    # before warm-up, after warm-up, before each of 3 windows, after the last
    assert comm.barriers == 1 + 1 + 3 + 1
    assert result["threads"] == [1] and len(result["param_checksums"]) == 1
    assert result["final_loss"][0] is not None and result["warmup_seconds"] >= 0
    assert result["first_timed_step_unix"] >= result["train_start_unix"]


def test_one_worker_wrapper_overhead_windows_and_step_rules():
    ticks = itertools.count(step=0.5)
    job = train.local_job("inception_v3", 2, 75, warmup=1, iters=1, trials=2)
    job = dataclasses.replace(job, task=dataclasses.replace(job.task, measure_wrapper=True))
    comm = CountingComm()
    result = measure.run(job, comm, clock=lambda: next(ticks))
    assert comm.wrapped == 1
    assert result["window_seconds"] == [[0.5, 0.5]]
    assert result["wrapped_window_seconds"] == [[0.5, 0.5]]
    assert result["step"] == {"broadcast_buffers": False, "one_worker_unwrapped": True}
    assert result["math"] == {"cudnn_allow_tf32": None, "matmul_precision": None}  # CPU
    assert result["scaler_skipped_steps"] == [None]  # fp32: no scaler


class HalvingScaler:
    """A GradScaler stand-in that skips (halves its scale on) every second update."""

    def __init__(self, device_type):
        import torch

        self._scale = torch.tensor(1024.0)
        self.updates = 0

    def scale(self, loss):
        return loss

    def step(self, optimizer):
        optimizer.step()

    def update(self):
        self.updates += 1
        if self.updates % 2 == 0:
            self._scale = self._scale / 2


@pytest.mark.slow  # fp16 training steps on a CPU: several seconds each
def test_fp16_skipped_steps_are_counted_inside_the_windows(monkeypatch):
    import torch

    monkeypatch.setattr(torch.amp, "GradScaler", HalvingScaler)
    # three steps, the fewest that put a skip in a timed window (fp16 on a CPU is emulated:
    # 7-10 s a step here beside other tests, and five steps took 46 s)
    job = train.local_job("inception_v3", 2, 75, precision="fp16", warmup=1, iters=1, trials=2)
    result = measure.run(job, SingleProcessComm())
    # updates 1 (warm-up) .. 3: update 2 skips, inside the first timed window
    assert result["scaler_skipped_steps"] == [1]
    record = train.build_record(job, LaunchOutcome("ok", result, launch_unix=0.0), {})
    assert record["scaler_skipped_steps"] == 1
    assert any("1 fp16 step in the timed windows was skipped" in w for w in record["warnings"])


class TwoRankComm(CountingComm):
    """Two ranks as far as the loop can tell (the breakdown's windows run); one process."""

    world_size = 2

    def optimizer_step(self, optimizer, scaler):
        optimizer.step()

    def all_gather(self, obj):
        return [obj]


def test_synced_windows_start_as_a_fresh_run_after_the_breakdown_windows():
    # The no-sync windows train the model first; the synced series must still start from the
    # initial weights, zero momentum and the same random state (Inception's dropout), so the
    # run ends exactly where a run without the breakdown ends.
    def run(windows: int) -> dict:
        job = train.local_job("inception_v3", 2, 75, warmup=1, iters=2, trials=2)
        job = dataclasses.replace(job, task=dataclasses.replace(job.task,
                                                                breakdown_windows=windows))
        comm = TwoRankComm()
        result = measure.run(job, comm)
        assert comm.wrapped == 1
        return result

    plain, with_breakdown = run(0), run(2)
    assert plain["nosync_window_seconds"] is None
    assert len(with_breakdown["nosync_window_seconds"][0]) == 2
    assert with_breakdown["final_loss"] == plain["final_loss"]
    assert with_breakdown["param_checksums"] == plain["param_checksums"]
    phases = list(with_breakdown["phase_seconds"])
    assert phases.index("nosync_timed") < phases.index("wrap") < phases.index("timed")
