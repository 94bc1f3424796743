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


def pick_device(device: str, comm: Comm):
    import torch

    if device == "cuda":
        index = comm.device_index()
        torch.cuda.set_device(index)
        torch.backends.cudnn.benchmark = True
        return torch.device("cuda", index)
    return torch.device("cpu")


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


def make_step(spec, comm: Comm, model, optimizer, batches, device) -> Callable[[], Any]:
    import torch

    criterion = torch.nn.CrossEntropyLoss()
    if spec.precision == "fp32":
        def autocast():
            return contextlib.nullcontext()
    else:
        dtype = getattr(torch, AUTOCAST_DTYPES[spec.precision])

        def autocast():
            return torch.autocast(device_type=device.type, dtype=dtype)
    scaler = torch.amp.GradScaler(device.type) if spec.precision == "fp16" else None

    def step():
        images, target = next(batches)
        optimizer.zero_grad()  # set_to_none by default; Horovod's wrapper takes no argument
        with autocast():
            loss = workloads.compute_loss(model(images), target, criterion)
        if scaler is None:
            loss.backward()
        else:
            scaler.scale(loss).backward()
        comm.optimizer_step(optimizer, scaler)
        return loss

    return step


def synchronize(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run(job: Job, comm: Comm, clock: Callable[[], float] = time.perf_counter) -> dict | None:
    """Build, wrap, warm up, time. Returns the gathered samples on rank 0, None elsewhere."""
    import torch

    spec = job.task  # tasks.train.TrainSpec
    set_threads(job.launch.threads_per_worker)
    torch.manual_seed(0)
    device = pick_device(job.launch.device, comm)
    model, aux = workloads.build_model(spec.model, spec.image_size)
    model = model.to(device)
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE, momentum=MOMENTUM)
    model, optimizer = comm.wrap(model, optimizer)
    if spec.data == "synthetic":
        batches = synthetic_batches(spec, device)
    else:
        batches = imagefolder_batches(spec, comm, device)
    step = make_step(spec, comm, model, optimizer, batches, device)

    comm.barrier()
    train_start_unix = time.time()
    loss = None
    for _ in range(spec.warmup):
        loss = step()
    synchronize(device)
    comm.barrier()
    warmup_seconds = time.time() - train_start_unix

    first_timed_step_unix = None
    windows: list[float] = []
    for _ in range(spec.trials):
        synchronize(device)
        comm.barrier()
        if first_timed_step_unix is None:
            first_timed_step_unix = time.time()
        start = clock()
        for _ in range(spec.iters):
            loss = step()
        synchronize(device)
        windows.append(clock() - start)
    comm.barrier()

    final_loss = float(loss.detach().float().item()) if loss is not None else None
    local = {
        "window_seconds": windows,
        "hostname": socket.gethostname(),
        "device_name": device_name(device),
        "threads": torch.get_num_threads(),
        "final_loss": final_loss,
        "param_checksum": param_checksum(model),
        "topology": comm.topology(),
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
        "aux_logits": aux,
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
