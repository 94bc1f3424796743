"""The shared timed training loop. Every framework runs exactly this code (the fair-comparison
rule, docs/ARCHITECTURE.md).

Warm-up steps are not timed. Then `trials` windows of `iters` steps each; every window starts
after a device sync and a barrier and ends with a device sync, on every rank. Per-rank window
times are gathered once at the end (gathering per window would add a collective to the clock).
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scalebench.hardware import disturbance, energy, topology
from scalebench.hardware.disturbance import Watcher
from scalebench.hardware.energy import Meter
from scalebench.models import workloads
from scalebench.spec.launch import Job
from scalebench.worker.comm import Comm
from scalebench.worker.step import Step, TimedBatches, batch_source, make_step, plain_optimizer_step

LEARNING_RATE = 0.01
MOMENTUM = 0.9


def set_threads(threads: int) -> None:
    """Identical thread policy for every framework; launchers otherwise differ."""
    import torch

    os.environ["OMP_NUM_THREADS"] = str(threads)
    torch.set_num_threads(threads)


def pick_device(device: str, comm: Comm, tf32: str = "default"):
    import torch

    if device == "cuda":
        index = comm.device_index()
        torch.cuda.set_device(index)
        torch.backends.cudnn.benchmark = True
        if tf32 != "default":  # on Ampere and later, "fp32" convolutions run as TF32 by default
            torch.backends.cudnn.allow_tf32 = tf32 == "on"
            torch.set_float32_matmul_precision("high" if tf32 == "on" else "highest")
        return torch.device("cuda", index)
    return torch.device("cpu")


def math_settings(device) -> dict[str, Any]:
    """What fp32 math really ran as (recorded: TF32 changes the numbers and the speed)."""
    import torch

    if device.type != "cuda":
        return {"cudnn_allow_tf32": None, "matmul_precision": None}
    return {"cudnn_allow_tf32": bool(torch.backends.cudnn.allow_tf32),
            "matmul_precision": torch.get_float32_matmul_precision()}


@dataclass
class Windows:
    """Timed windows of one series on this rank."""

    seconds: list[float] = field(default_factory=list)
    input_wait: list[float] = field(default_factory=list)  # seconds waiting for batches
    first_unix: float | None = None
    last_loss: Any = None


class Phases:
    """Seconds spent in each phase of one run on this rank (where a run's wall time went:
    build, wrap, warm-up, timed windows, the breakdown's extra windows, the gather)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._last = time.perf_counter()

    def mark(self, name: str) -> float:
        """Ends a phase; returns its seconds."""
        now = time.perf_counter()
        elapsed = now - self._last
        self.seconds[name] = self.seconds.get(name, 0.0) + elapsed
        self._last = now
        return elapsed


def timed_windows(step: Step | Callable[[], Any], trials: int, iters: int, comm: Comm, device,
                  clock: Callable[[], float], meter: Meter | None = None,
                  watcher: Watcher | None = None) -> Windows:
    """`trials` windows of `iters` steps, each framed by a device sync and a barrier. A meter
    (hardware/energy.py) reads its energy counters at each window's edges: after the barrier,
    just before the clock starts, and just after it stops, never inside the window. A watcher
    (hardware/disturbance.py) reads what else the node and the GPU did, outside the meter's
    readings: its first reading before the barrier, since it takes milliseconds (a scan of
    /proc on local rank 0) that the other ranks, their clocks started, would otherwise wait
    for at their first allreduce, inside their windows."""
    out = Windows()
    wait = getattr(step, "input_wait", lambda: 0.0)
    for _ in range(trials):
        synchronize(device)
        if watcher is not None:
            watcher.start()
        comm.barrier()
        if out.first_unix is None:
            out.first_unix = time.time()
        waited = wait()
        if meter is not None:
            meter.start()
        start = clock()
        for _ in range(iters):
            out.last_loss = step()
        synchronize(device)
        out.seconds.append(clock() - start)
        if meter is not None:
            meter.stop()
        if watcher is not None:
            watcher.stop()
        out.input_wait.append(wait() - waited)
    comm.barrier()
    return out


def warm_up(step: Callable[[], Any], steps: int, comm: Comm, device) -> Any:
    comm.barrier()
    loss = None
    for _ in range(steps):
        loss = step()
    synchronize(device)
    comm.barrier()
    return loss


def synchronize(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


@dataclass
class Built:
    """What a run builds before its first step."""

    model: Any
    aux: bool  # Inception V3's auxiliary head is on
    optimizer: Any
    batches: TimedBatches
    device: Any


def build(spec, comm: Comm, device_kind: str) -> Built:
    """Seed, device, model in training mode, SGD with momentum, batches (spec: TrainSpec)."""
    import torch

    torch.manual_seed(0)
    device = pick_device(device_kind, comm, spec.tf32)
    model, aux = workloads.build_model(spec.model, spec.image_size)
    model = model.to(device)
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE, momentum=MOMENTUM)
    return Built(model, aux, optimizer, batch_source(spec, comm, device), device)


STEP_RULES = {
    # DDP (and Ray through DDP) would broadcast BatchNorm buffers from rank 0 at every forward;
    # Horovod never does. One rule for all: off.
    "broadcast_buffers": False,
    # At one worker every framework runs the plain step (no wrapper, no one-rank allreduce).
    "one_worker_unwrapped": True,
}


def run(job: Job, comm: Comm, clock: Callable[[], float] = time.perf_counter) -> dict | None:
    """Build, wrap, warm up, time. Returns the gathered samples on rank 0, None elsewhere.

    At one worker the model is not wrapped (every framework's one-worker step is the plain
    step); spec.measure_wrapper then also times the framework-wrapped step, as wrapper overhead.
    With more workers and spec.breakdown_windows, extra windows first time the same step
    without gradient synchronisation, before the framework wraps the model
    (scalebench/breakdown.py turns them into a scaling-loss breakdown).
    """
    import torch

    spec = job.task  # tasks.train.TrainSpec
    build_start_unix = time.time()
    phases = Phases()
    set_threads(job.launch.threads_per_worker)
    built = build(spec, comm, job.launch.device)
    model, aux, optimizer, batches, device = (built.model, built.aux, built.optimizer,
                                              built.batches, built.device)
    delay = spec.fault_step_delay if comm.rank == spec.fault_rank else 0.0
    distributed = comm.world_size > 1
    meter = open_meter(device, comm)
    watcher = disturbance.open_watcher(device.type, device.index or 0, comm.local_rank)
    phases.mark("build")
    train_start_unix = time.time()

    nosync = None
    if distributed and spec.breakdown_windows:
        # The compute-only windows run first, on the model before the framework wraps it:
        # the plain step, with no gradient hooks (Horovod registers its allreduce on the
        # parameters when it wraps). No replica with its own gradients and optimizer state:
        # on a GPU that second copy would take device memory the measured run may need.
        fresh = FreshStart(model, device)
        local_step = Step(spec, plain_optimizer_step, model, optimizer, batches, device, delay)
        warm_up(local_step, spec.warmup, comm, device)
        phases.mark("nosync_warmup")
        nosync = timed_windows(local_step, spec.breakdown_windows, spec.iters, comm, device,
                               clock)
        phases.mark("nosync_timed")
        del local_step
        # The synced series starts as a fresh run would (more steps on one synthetic batch
        # can diverge, and NaNs would change the step it times).
        fresh.restore(model, optimizer)
        del fresh
    if distributed:
        model, optimizer = comm.wrap(model, optimizer)
        step = make_step(spec, comm, model, optimizer, batches, device, delay)
    else:
        step = Step(spec, plain_optimizer_step, model, optimizer, batches, device, delay)
    phases.mark("wrap")

    loss = warm_up(step, spec.warmup, comm, device)
    warmup_seconds = phases.mark("warmup")
    skipped_before = step.skipped_steps()
    synced = timed_windows(step, spec.trials, spec.iters, comm, device, clock, meter, watcher)
    phases.mark("timed")
    loss = synced.last_loss if synced.last_loss is not None else loss
    skipped = step.skipped_steps() - skipped_before if step.scaler is not None else None

    wrapped = None
    if spec.measure_wrapper and not distributed:
        wrapped_model, wrapped_opt = comm.wrap(model, optimizer)
        wrapped_step = make_step(spec, comm, wrapped_model, wrapped_opt, batches, device)
        phases.mark("wrapped_build")
        warm_up(wrapped_step, max(1, spec.warmup), comm, device)
        phases.mark("wrapped_warmup")
        wrapped = timed_windows(wrapped_step, spec.trials, spec.iters, comm, device, clock)
        phases.mark("wrapped_timed")

    profile_path = None
    if spec.profile and job.run_dir:
        profile_path = profile_window(step, spec.iters, comm, device, Path(job.run_dir))

    final_loss = float(loss.detach().float().item()) if loss is not None else None
    local = {
        "window_seconds": synced.seconds,
        "input_wait_seconds": synced.input_wait,
        "nosync_window_seconds": None if nosync is None else nosync.seconds,
        "nosync_input_wait_seconds": None if nosync is None else nosync.input_wait,
        "hostname": socket.gethostname(),
        "device_name": device_name(device),
        "threads": torch.get_num_threads(),
        "final_loss": final_loss,
        "param_checksum": param_checksum(model),
        "topology": comm.topology(),
        "scaler_skipped_steps": skipped,
        "energy": meter.result(),
        "disturbance": watcher.result(),
        "placement": topology.worker_placement(device.index if device.type == "cuda" else None),
    }
    phases.mark("finish")
    gathered = comm.all_gather(local)
    phases.mark("gather")
    if comm.rank != 0:
        return None
    return {
        "window_seconds": [g["window_seconds"] for g in gathered],
        "input_wait_seconds": [g["input_wait_seconds"] for g in gathered],
        "nosync_window_seconds": None if nosync is None else
        [g["nosync_window_seconds"] for g in gathered],
        "nosync_input_wait_seconds": None if nosync is None else
        [g["nosync_input_wait_seconds"] for g in gathered],
        "hostnames": [g["hostname"] for g in gathered],
        "device_names": [g["device_name"] for g in gathered],
        "threads": [g["threads"] for g in gathered],
        "final_loss": [g["final_loss"] for g in gathered],
        "param_checksums": [g["param_checksum"] for g in gathered],
        "topology": [g["topology"] for g in gathered],
        "scaler_skipped_steps": [g["scaler_skipped_steps"] for g in gathered],
        "energy": [g["energy"] for g in gathered],
        "disturbance": [g["disturbance"] for g in gathered],
        "placement": [g["placement"] for g in gathered],
        "wrapped_window_seconds": None if wrapped is None else [wrapped.seconds],
        "math": math_settings(device),
        "step": dict(STEP_RULES),
        "faults": spec.faults(),
        "profile": profile_path,
        "aux_logits": aux,
        "build_start_unix": build_start_unix,
        "train_start_unix": train_start_unix,
        "first_timed_step_unix": nosync.first_unix if nosync is not None else synced.first_unix,
        "warmup_seconds": warmup_seconds,
        "phase_seconds": phases.seconds,
    }


def open_meter(device, comm: Comm) -> Meter:
    """This rank's energy meter (hardware/energy.py), opened outside the timed windows."""
    return energy.open_meter(device.type, device.index or 0, comm.local_rank)


class FreshStart:
    """The model's initial weights and buffers and the random number generators' state, to
    start training again exactly as a fresh run would (the same dropout masks, too)."""

    def __init__(self, model, device) -> None:
        import torch

        self.weights = {name: value.detach().clone() for name, value in
                        model.state_dict().items()}
        self.cpu_rng = torch.get_rng_state()
        self.device = device
        self.cuda_rng = torch.cuda.get_rng_state(device) if device.type == "cuda" else None

    def restore(self, model, optimizer) -> None:
        """Weights back in place; every optimizer state tensor zeroed in place (SGD's momentum
        then acts exactly as on a fresh optimizer: buffer = gradient at the first step), so
        none of that memory is allocated and faulted in again."""
        import torch

        model.load_state_dict(self.weights)
        with torch.no_grad():
            for state in optimizer.state.values():
                for value in state.values():
                    if torch.is_tensor(value):
                        value.zero_()
        torch.set_rng_state(self.cpu_rng)
        if self.cuda_rng is not None:
            torch.cuda.set_rng_state(self.cuda_rng, self.device)


def profile_window(step: Step, iters: int, comm: Comm, device, run_dir: Path) -> str | None:
    """One extra window under torch.profiler on rank 0 (outside the timed windows), saved as
    a Chrome trace in the run folder; its path goes into the record's artifacts."""
    import torch.profiler as tp

    activities = [tp.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(tp.ProfilerActivity.CUDA)
    comm.barrier()
    path = None
    if comm.rank == 0:
        with tp.profile(activities=activities) as prof:
            for _ in range(iters):
                step()
            synchronize(device)
        path = run_dir / "profile-rank0.json"
        prof.export_chrome_trace(str(path))
    else:
        for _ in range(iters):
            step()
        synchronize(device)
    comm.barrier()
    return None if path is None else str(path)


def param_checksum(model) -> float:
    """Sum of all weights in float64: equal on every rank when the replicas stayed in sync."""
    import torch

    with torch.no_grad():
        return float(sum(p.detach().double().sum() for p in model.parameters()).item())


def device_name(device) -> str:
    import torch

    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    from scalebench.hardware.envinfo import cpu_model

    return cpu_model()
