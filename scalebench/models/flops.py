"""FLOPs per image of each model at an input size, counted with PyTorch's own counter.

torch.utils.flop_counter.FlopCounterMode counts the matrix products and convolutions (2 FLOPs
per multiply-add) of whatever runs under it; elementwise work (activations, batch norm, the
optimizer update) is not counted, as in the model-FLOPs convention MFU uses. The counted step is
the timed step's work: forward, loss (Inception's aux loss where the aux head is built) and
backward, in training mode.

It runs on the meta device: shapes only, no data, no arithmetic, so a count costs a fraction of
a second and nothing of the machine being measured. The counter's formulas depend on shapes
alone, so the count equals one on real tensors (a test checks). Counted once per model, input
size and aux head, at plan time, before anything is launched; the count is kept in a file
(cache_path(): per torch and torchvision version) so that later sweeps on this machine read it
instead of building the model again.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
from dataclasses import dataclass
from pathlib import Path

from scalebench.models import workloads
from scalebench.records import atomic

COUNT_BATCH = 2  # batch norm in training mode needs two images; counts are per image
COUNT_VERSION = 1  # bump when what is counted changes: older cached counts are then not read


@dataclass(frozen=True)
class Count:
    model: str
    image_size: int
    aux_logits: bool
    flops_per_image: float  # forward + backward of one training step
    forward_flops_per_image: float
    method: str

    @property
    def backward_to_forward(self) -> float:
        return (self.flops_per_image - self.forward_flops_per_image) / \
            self.forward_flops_per_image


def _counter():
    from torch.utils.flop_counter import FlopCounterMode

    return FlopCounterMode(display=False)


def _meta_model(model: str, image_size: int, aux_logits: bool):
    import torch

    with torch.device("meta"):
        module, aux = workloads.build_model(model, image_size)
    if aux != aux_logits:
        raise ValueError(f"{model} at {image_size} px is built with aux_logits={aux}")
    return module


def count_step(module, image_size: int, batch: int = COUNT_BATCH, device: str = "meta"
               ) -> tuple[float, float]:
    """(forward, forward + backward) FLOPs per image of one training step of `module` on
    `device` (the meta device, or real tensors to check the meta count against)."""
    import torch

    module.train()
    images = torch.randn(batch, 3, image_size, image_size, device=device)
    target = torch.randint(0, workloads.NUM_CLASSES, (batch,), device=device)
    criterion = torch.nn.CrossEntropyLoss()
    counter = _counter()
    with counter:
        output = module(images)
        loss = workloads.compute_loss(output, target, criterion)
    forward = counter.get_total_flops()
    with counter:
        loss.backward()
    return forward / batch, (forward + counter.get_total_flops()) / batch


def cache_path() -> Path:
    """$SCALEBENCH_CACHE (default ~/.cache/scalebench)/flops-torch<v>-torchvision<v>.json: a
    count depends on the model code and the counter, so on both versions (read without
    importing torchvision)."""
    from importlib.metadata import version

    root = Path(os.environ.get("SCALEBENCH_CACHE") or Path.home() / ".cache" / "scalebench")
    return root / f"flops-torch{version('torch')}-torchvision{version('torchvision')}.json"


def _cache_key(model: str, image_size: int, aux_logits: bool) -> str:
    return f"{COUNT_VERSION}:{model}:{image_size}:{int(aux_logits)}:{COUNT_BATCH}"


def _read_cache() -> dict:
    try:
        data = json.loads(cache_path().read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_cache(key: str, count: Count) -> None:
    """Best effort (a read-only home must not stop a sweep); atomic, so that concurrent sweeps
    never read half a file."""
    path = cache_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = {**_read_cache(), key: dataclasses.asdict(count)}
        atomic.write_json(path, data, indent=1, sort_keys=True)
    except OSError:
        pass


@functools.cache
def train_flops(model: str, image_size: int, aux_logits: bool) -> Count:
    """The counted FLOPs of one training step per image (cached in the process and in
    cache_path())."""
    key = _cache_key(model, image_size, aux_logits)
    cached = _read_cache().get(key)
    if isinstance(cached, dict):
        try:
            return Count(**cached)
        except TypeError:  # written by another layout of Count: count again
            pass
    count = count_train_flops(model, image_size, aux_logits)
    _write_cache(key, count)
    return count


def count_train_flops(model: str, image_size: int, aux_logits: bool) -> Count:
    """Count now, on the meta device (no cache)."""
    import torch

    forward, total = count_step(_meta_model(model, image_size, aux_logits), image_size)
    aux = " with the aux head" if aux_logits else ""
    method = (f"counted with torch.utils.flop_counter.FlopCounterMode (torch {torch.__version__}):"
              f" forward, loss and backward of one training step{aux} at {image_size} px, batch "
              f"{COUNT_BATCH} on the meta device, per image; matrix products and convolutions, "
              "2 FLOPs per multiply-add, elementwise work and the optimizer update not counted")
    return Count(model, image_size, aux_logits, total, forward, method)


def inference_flops(model: str, image_size: int) -> float:
    """Forward FLOPs per image in evaluation mode (no aux head): what torchvision's model
    documentation lists, as multiply-adds (= FLOPs / 2)."""
    import torch

    module = _meta_model(model, image_size, workloads.uses_aux_logits(model, image_size))
    module.eval()
    counter = _counter()
    with torch.no_grad(), counter:
        module(torch.randn(1, 3, image_size, image_size, device="meta"))
    return float(counter.get_total_flops())


def for_run(model: str, image_size: int) -> Count:
    """The count for a run of `model` at `image_size` (its aux head as the run builds it)."""
    return train_flops(model, image_size, workloads.uses_aux_logits(model, image_size))


def recorded(model: str, image_size: int) -> tuple[float | None, str]:
    """What a run's record carries: the count and how it was made, or None and why not (a
    count that fails must not stop the measurement)."""
    try:
        count = for_run(model, image_size)
    except Exception as exc:  # noqa: BLE001 - any failure of the counter is recorded
        return None, f"not counted: {type(exc).__name__}: {exc}"[:300]
    return count.flops_per_image, count.method
