"""The step every framework times: batches (synthetic or ImageFolder, with the time spent
waiting for them), the training step itself (autocast, GradScaler, skipped-step count), and the
documented fault injections used by tests of the scaling-loss breakdown.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

from scalebench.models import workloads
from scalebench.worker.comm import Comm

AUTOCAST_DTYPES = {"bf16": "bfloat16", "fp16": "float16"}


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


class TimedBatches:
    """Batches, with the time spent waiting for each (the input pipeline's share of a step);
    `delay` is the fault injection --inject-input-delay (seconds of sleep per batch)."""

    def __init__(self, batches: Iterator[tuple[Any, Any]], delay: float = 0.0):
        self.batches = batches
        self.delay = delay
        self.waited = 0.0

    def __iter__(self) -> TimedBatches:
        return self

    def __next__(self) -> tuple[Any, Any]:
        start = time.perf_counter()
        if self.delay:
            time.sleep(self.delay)
        batch = next(self.batches)
        self.waited += time.perf_counter() - start
        return batch


def batch_source(spec, comm: Comm, device) -> TimedBatches:
    source = synthetic_batches(spec, device) if spec.data == "synthetic" else \
        imagefolder_batches(spec, comm, device)
    return TimedBatches(source, spec.fault_input_delay)


class Step:
    """One training step, callable; counts GradScaler-skipped steps on the device (reading the
    scale every step would synchronise the device inside the timed window). `delay` is the
    fault injection --inject-step-delay (seconds of sleep after each step, on one rank)."""

    def __init__(self, spec, optimizer_step: Callable, model, optimizer, batches, device,
                 delay: float = 0.0):
        import torch

        self.delay = delay
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
        else:
            self.scaler.scale(loss).backward()
            before = self.scaler._scale.clone()  # the scale falls exactly when a step is skipped
            self.optimizer_step(self.optimizer, self.scaler)
            self.skipped += (self.scaler._scale < before).long().reshape(())
        if self.delay:
            time.sleep(self.delay)
        return loss

    def input_wait(self) -> float:
        return self.batches.waited if isinstance(self.batches, TimedBatches) else 0.0

    def skipped_steps(self) -> int:
        return int(self.skipped.item())


def make_step(spec, comm: Comm, model, optimizer, batches, device, delay: float = 0.0) -> Step:
    return Step(spec, comm.optimizer_step, model, optimizer, batches, device, delay)


