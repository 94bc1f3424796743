"""The shared timed training loop. Every framework runs exactly this code (the fair-comparison
rule, docs/ARCHITECTURE.md).

Warm-up steps are not timed. Then `trials` windows of `iters` steps each; every window starts
after a device sync and a barrier and ends with a device sync, on every rank. Per-rank window
times are gathered once at the end (gathering per window would add a collective to the clock).
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

from scalebench import workloads
from scalebench.comm import Comm
from scalebench.launch import Job

AUTOCAST_DTYPES = {"bf16": "bfloat16", "fp16": "float16"}
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


def synthetic_batches(spec, device) -> Iterator[tuple[Any, Any]]:
    """One random batch generated once on the device and reused (as tf_cnn_benchmarks does)."""
    import torch

    generator = torch.Generator().manual_seed(1234)
    shape = (spec.batch_size, 3, spec.image_size, spec.image_size)
    images = torch.randn(shape, generator=generator).to(device)
    target = torch.randint(0, workloads.NUM_CLASSES, (spec.batch_size,), generator=generator)
    target = target.to(device)
    while True:
        yield images, target


def imagefolder_batches(spec, comm: Comm, device) -> Iterator[tuple[Any, Any]]:
    """A real input pipeline: ImageFolder, ImageNet training transforms, DistributedSampler."""
    import torchvision.transforms as T
    from torch.utils.data import DataLoader
    from torch.utils.data.distributed import DistributedSampler
    from torchvision.datasets import ImageFolder

    root = spec.data.split(":", 1)[1]
    transform = T.Compose([
        T.RandomResizedCrop(spec.image_size),
        T.RandomHorizontalFlip(),
        T.ToTensor(),
        T.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
    ])
    dataset = ImageFolder(root, transform=transform)
    sampler = DistributedSampler(dataset, num_replicas=comm.world_size, rank=comm.rank,
                                 shuffle=True, drop_last=True)
    loader = DataLoader(dataset, batch_size=spec.batch_size, sampler=sampler, drop_last=True,
                        num_workers=spec.loader_workers, pin_memory=device.type == "cuda",
                        persistent_workers=spec.loader_workers > 0)
    if len(loader) == 0:
        raise ValueError(
            f"data: {root} has {len(dataset)} images, too few for batch {spec.batch_size} "
            f"on each of {comm.world_size} workers"
        )
    epoch = 0
    while True:
        sampler.set_epoch(epoch)
        for images, target in loader:
            yield (images.to(device, non_blocking=True), target.to(device, non_blocking=True))
        epoch += 1


def plain_optimizer_step(optimizer, scaler) -> None:
    """One update with no framework: the one-worker step of every framework."""
    if scaler is None:
        optimizer.step()
    else:
        scaler.step(optimizer)
        scaler.update()


class Step:
    """One training step, callable; counts GradScaler-skipped steps on the device (reading the
    scale every step would synchronise the device inside the timed window)."""

    def __init__(self, spec, optimizer_step: Callable, model, optimizer, batches, device):
        import torch

        self.criterion = torch.nn.CrossEntropyLoss()
        self.optimizer_step = optimizer_step
        self.model, self.optimizer, self.batches = model, optimizer, batches
        self.dtype = (None if spec.precision == "fp32"
                      else getattr(torch, AUTOCAST_DTYPES[spec.precision]))
        self.device_type = device.type
        self.scaler = torch.amp.GradScaler(device.type) if spec.precision == "fp16" else None
        self.skipped = torch.zeros((), dtype=torch.int64, device=device)

    def autocast(self):
        import torch

        if self.dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device_type, dtype=self.dtype)

    def __call__(self):
        images, target = next(self.batches)
        self.optimizer.zero_grad()  # set_to_none by default; Horovod's wrapper takes no argument
        with self.autocast():
            loss = workloads.compute_loss(self.model(images), target, self.criterion)
        if self.scaler is None:
            loss.backward()
            self.optimizer_step(self.optimizer, None)
            return loss
        self.scaler.scale(loss).backward()
        before = self.scaler._scale.clone()  # the scale falls exactly when a step is skipped
        self.optimizer_step(self.optimizer, self.scaler)
        self.skipped += (self.scaler._scale < before).long().reshape(())
        return loss

    def skipped_steps(self) -> int:
        return int(self.skipped.item())


def make_step(spec, comm: Comm, model, optimizer, batches, device) -> Step:
    return Step(spec, comm.optimizer_step, model, optimizer, batches, device)


def timed_windows(step: Callable[[], Any], trials: int, iters: int, comm: Comm, device,
                  clock: Callable[[], float]) -> tuple[list[float], float, Any]:
    """`trials` windows of `iters` steps, each framed by a device sync and a barrier:
    (window seconds, wall time of the first timed step, the last loss)."""
    first_unix = None
    windows: list[float] = []
    loss = None
    for _ in range(trials):
        synchronize(device)
        comm.barrier()
        if first_unix is None:
            first_unix = time.time()
        start = clock()
        for _ in range(iters):
            loss = step()
        synchronize(device)
        windows.append(clock() - start)
    comm.barrier()
    return windows, first_unix, loss


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
    """
    import torch

    spec = job.task  # tasks.train.TrainSpec
    build_start_unix = time.time()
    set_threads(job.launch.threads_per_worker)
    torch.manual_seed(0)
    device = pick_device(job.launch.device, comm, spec.tf32)
    model, aux = workloads.build_model(spec.model, spec.image_size)
    model = model.to(device)
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE, momentum=MOMENTUM)
    if spec.data == "synthetic":
        batches = synthetic_batches(spec, device)
    else:
        batches = imagefolder_batches(spec, comm, device)
    if comm.world_size > 1:
        model, optimizer = comm.wrap(model, optimizer)
        step = make_step(spec, comm, model, optimizer, batches, device)
    else:
        step = Step(spec, plain_optimizer_step, model, optimizer, batches, device)

    train_start_unix = time.time()
    loss = warm_up(step, spec.warmup, comm, device)
    warmup_seconds = time.time() - train_start_unix
    skipped_before = step.skipped_steps()
    windows, first_timed_step_unix, last = timed_windows(step, spec.trials, spec.iters, comm,
                                                         device, clock)
    loss = last if last is not None else loss
    skipped = step.skipped_steps() - skipped_before if step.scaler is not None else None

    wrapped_windows = None
    if spec.measure_wrapper and comm.world_size == 1:
        wrapped_model, wrapped_opt = comm.wrap(model, optimizer)
        wrapped = make_step(spec, comm, wrapped_model, wrapped_opt, batches, device)
        warm_up(wrapped, max(1, spec.warmup), comm, device)
        wrapped_windows, _, _ = timed_windows(wrapped, spec.trials, spec.iters, comm, device,
                                              clock)

    final_loss = float(loss.detach().float().item()) if loss is not None else None
    local = {
        "window_seconds": windows,
        "hostname": socket.gethostname(),
        "device_name": device_name(device),
        "threads": torch.get_num_threads(),
        "final_loss": final_loss,
        "param_checksum": param_checksum(model),
        "topology": comm.topology(),
        "scaler_skipped_steps": skipped,
    }
    gathered = comm.all_gather(local)
    if comm.rank != 0:
        return None
    return {
        "window_seconds": [g["window_seconds"] for g in gathered],
        "hostnames": [g["hostname"] for g in gathered],
        "device_names": [g["device_name"] for g in gathered],
        "threads": [g["threads"] for g in gathered],
        "final_loss": [g["final_loss"] for g in gathered],
        "param_checksums": [g["param_checksum"] for g in gathered],
        "topology": [g["topology"] for g in gathered],
        "scaler_skipped_steps": [g["scaler_skipped_steps"] for g in gathered],
        "wrapped_window_seconds": None if wrapped_windows is None else [wrapped_windows],
        "math": math_settings(device),
        "step": dict(STEP_RULES),
        "aux_logits": aux,
        "build_start_unix": build_start_unix,
        "train_start_unix": train_start_unix,
        "first_timed_step_unix": first_timed_step_unix,
        "warmup_seconds": warmup_seconds,
    }


def param_checksum(model) -> float:
    """Sum of all weights in float64: equal on every rank when the replicas stayed in sync."""
    import torch

    with torch.no_grad():
        return float(sum(p.detach().double().sum() for p in model.parameters()).item())


def device_name(device) -> str:
    import torch

    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    from scalebench.envinfo import cpu_model

    return cpu_model()
