"""The shared timed loop in one process (SingleProcessComm) with a fake clock."""

from __future__ import annotations

import itertools

from scalebench import measure
from scalebench.comm import SingleProcessComm
from scalebench.tasks import train


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
    job = train.local_job("vgg16", 2, 32, warmup=1, iters=2, trials=3)
    comm = CountingComm()
    result = measure.run(job, comm, clock=lambda: next(ticks))
    # one clock read at each end of a window: consecutive reads 0.25 s apart
    assert result["window_seconds"] == [[0.25, 0.25, 0.25]]
    assert comm.wrapped == 1
    # before warm-up, after warm-up, before each of 3 windows, after the last
    assert comm.barriers == 1 + 1 + 3 + 1
    assert result["threads"] == [1] and len(result["param_checksums"]) == 1
    assert result["final_loss"][0] is not None and result["warmup_seconds"] >= 0
    assert result["first_timed_step_unix"] >= result["train_start_unix"]
