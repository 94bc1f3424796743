"""Candidates of one cell measured inside one launch, interleaved: round after round, each
candidate's settings are applied (a fresh wrap of the same model), warmed up, and timed for one
window, in an order shuffled per round by a seed every rank shares. Adjacent windows of
different candidates see the same machine, so slow drift cancels in their paired comparison.

Before every candidate's wrap the model, optimizer state and random state go back to the start
(measure.FreshStart): every window times the same step from the same weights, whatever came
before it (VGG-16 diverges after a few steps on one synthetic batch, and NaNs may change speed).
A launch of one candidate (a knob read when the framework starts, as Horovod's) wraps once and
times its windows as a run's trials: re-wrapping would stack Horovod's gradient hooks.
"""

from __future__ import annotations

import gc
import random
import time
from collections.abc import Callable
from typing import Any

from scalebench.spec.launch import Job
from scalebench.worker import measure
from scalebench.worker.comm import Comm
from scalebench.worker.step import Step, make_step, plain_optimizer_step


def run(job: Job, comm: Comm, clock: Callable[[], float] = time.perf_counter) -> dict | None:
    """job.task: a tasks.tune.TuneSpec. Returns, on rank 0, every candidate's per-round window
    seconds on every rank and what the framework reported for its settings."""
    spec = job.task
    train = spec.train
    measure.set_threads(job.launch.threads_per_worker)
    built = measure.build(train, comm, job.launch.device)
    model, optimizer, device = built.model, built.optimizer, built.device
    fresh = measure.FreshStart(model, device)
    names = [name for name, _ in spec.candidates]
    settings = dict(spec.candidates)
    seconds: dict[str, list[float]] = {name: [] for name in names}
    read_back: dict[str, dict[str, Any]] = {}
    orders: list[list[str]] = []
    rng = random.Random(spec.seed)
    started = time.time()
    if len(names) == 1:  # one candidate (a launch-time knob): one wrap, windows as trials
        name = names[0]
        comm.configure(settings[name])
        wrapped, wrapped_opt = comm.wrap(model, optimizer)
        step = make_step(train, comm, wrapped, wrapped_opt, built.batches, device)
        measure.warm_up(step, max(spec.rewarm, train.warmup), comm, device)
        windows = measure.timed_windows(step, spec.rounds, train.iters, comm, device, clock)
        seconds[name] = windows.seconds
        read_back[name] = comm.read_back(wrapped)
        orders = [[name]] * spec.rounds
    if len(names) > 1:  # the launch's own warm-up (allocator, caches), on the plain step
        plain = Step(train, plain_optimizer_step, model, optimizer, built.batches, device)
        measure.warm_up(plain, train.warmup, comm, device)
        del plain
    for _ in range(spec.rounds if len(names) > 1 else 0):
        order = list(names)
        rng.shuffle(order)
        orders.append(order)
        for name in order:
            fresh.restore(model, optimizer)
            optimizer.zero_grad(set_to_none=True)
            comm.configure(settings[name])
            wrapped, wrapped_opt = comm.wrap(model, optimizer)
            step = make_step(train, comm, wrapped, wrapped_opt, built.batches, device)
            measure.warm_up(step, spec.rewarm, comm, device)
            window = measure.timed_windows(step, 1, train.iters, comm, device, clock)
            seconds[name].append(window.seconds[0])
            if name not in read_back:
                read_back[name] = comm.read_back(wrapped)
            del step, wrapped, wrapped_opt
            gc.collect()
    gathered = comm.all_gather({"seconds": seconds, "read_back": read_back})
    if comm.rank != 0:
        return None
    return {
        "window_seconds": {name: [g["seconds"][name] for g in gathered] for name in names},
        "read_back": {name: [g["read_back"].get(name, {}) for g in gathered] for name in names},
        "orders": orders,
        "threads": measure_threads(),
        "device_name": measure.device_name(device),
        "seconds": time.time() - started,
    }


def measure_threads() -> int:
    import torch

    return torch.get_num_threads()
