"""torch.distributed process group as a Comm: used by DDP workers and Ray Train workers."""

from __future__ import annotations

import os
from typing import Any

from scalebench.frameworks.base import Knob
from scalebench.spec import fields
from scalebench.worker.comm import Comm


def parse_bool(value: str) -> bool:
    return fields.boolean("knobs.gradient_as_bucket_view", value)


# What `scalebench tune` searches for DDP and for Ray Train (which wraps with the same DDP).
# Left out: static_graph and find_unused_parameters (the torchvision models have one static
# graph and no unused parameters: the first changes no communication here, the second only
# adds a graph walk); broadcast_buffers (fixed off for every framework, measure.STEP_RULES).
DDP_KNOBS = (
    Knob("bucket_cap_mb", (1.0, 5.0, 25.0, 100.0), 25.0, in_launch=True,
         why="DDP's gradient bucket in MiB (PyTorch's default 25): fewer, larger allreduces "
             "against earlier overlap with the backward pass"),
    Knob("gradient_as_bucket_view", (False, True), False, in_launch=True,
         parse=parse_bool,
         why="gradients as views into the buckets: saves a copy per parameter per step"),
)


class TorchDistComm(Comm):
    """Wraps an initialised (or to-be-initialised from env://) torch.distributed group."""

    def __init__(self, backend: str, init: bool = True, bucket_cap_mb: float | None = None,
                 gradient_as_bucket_view: bool = False):
        import torch.distributed as dist

        self._dist = dist
        self.backend = backend
        self.bucket_cap_mb = bucket_cap_mb
        self.gradient_as_bucket_view = gradient_as_bucket_view
        if init and not dist.is_initialized():
            dist.init_process_group(backend=backend)
        self.rank = dist.get_rank()
        self.world_size = dist.get_world_size()
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))

    def barrier(self) -> None:
        if self.backend == "nccl":
            self._dist.barrier(device_ids=[self.device_index()])
        else:
            self._dist.barrier()

    def all_gather(self, obj: Any) -> list[Any]:
        out: list[Any] = [None] * self.world_size
        self._dist.all_gather_object(out, obj)
        return out

    def allreduce(self, tensor) -> None:
        self._dist.all_reduce(tensor)

    def wrap(self, model, optimizer):
        from torch.nn.parallel import DistributedDataParallel

        return DistributedDataParallel(model, **self.ddp_kwargs()), optimizer

    def ddp_kwargs(self) -> dict:
        """DistributedDataParallel's arguments: no buffer broadcast, the device, the bucket size."""
        # Horovod never broadcasts BatchNorm buffers; DDP would at every forward (fair rule:
        # measure.STEP_RULES).
        kwargs: dict = {"broadcast_buffers": False}
        if self.backend == "nccl":
            kwargs["device_ids"] = [self.device_index()]
        if self.bucket_cap_mb is not None:
            kwargs["bucket_cap_mb"] = self.bucket_cap_mb
        if self.gradient_as_bucket_view:
            kwargs["gradient_as_bucket_view"] = True
        return kwargs

    TUNABLE = ("bucket_cap_mb", "gradient_as_bucket_view")

    def configure(self, settings: dict[str, Any]) -> None:
        unknown = set(settings) - set(self.TUNABLE)
        if unknown:
            raise NotImplementedError(f"DDP has no step option {sorted(unknown)}")
        self.bucket_cap_mb = settings.get("bucket_cap_mb", self.bucket_cap_mb)
        self.gradient_as_bucket_view = bool(settings.get("gradient_as_bucket_view",
                                                         self.gradient_as_bucket_view))

    def read_back(self, model) -> dict[str, Any]:
        """DDP's own logging data: the bucket cap it uses, the bucket sizes it built, whether
        gradients are views into the buckets."""
        getter = getattr(model, "_get_ddp_logging_data", None)
        if getter is None:
            return {"wrapped": False}
        data = getter()
        sizes = data.get("rebuilt_bucket_sizes") or data.get("bucket_sizes", "")
        return {"wrapped": True, "bucket_cap_mb": data.get("bucket_cap_bytes", 0) / 2**20,
                "buckets": len([s for s in str(sizes).split(",") if s.strip()]),
                "bucket_sizes": str(sizes),
                "rebuilt_buckets": bool(data.get("has_rebuilt_buckets", 0)),
                "gradient_as_bucket_view": bool(data.get("gradient_as_bucket_view", 0))}

    def close(self) -> None:
        if self._dist.is_initialized():
            self._dist.destroy_process_group()
