"""DDP's options: the dataclass, its workload-file table [ddp], its flags, its checks."""

from __future__ import annotations

from dataclasses import dataclass

from scalebench.frameworks.base import Flag
from scalebench.frameworks.torch_dist import DDP_KNOBS
from scalebench.spec import fields
from scalebench.spec.errors import UserError


@dataclass(frozen=True)
class Options:
    nnodes: int = 1
    node_rank: int = 0
    rdzv_endpoint: str | None = None  # HOST:PORT of node 0, needed when nnodes > 1
    bucket_cap_mb: float | None = None  # DDP's gradient bucket; None: PyTorch's 25 MiB
    gradient_as_bucket_view: bool = False  # gradients as views into DDP's buckets (no copy)


TABLE = {
    "nnodes": lambda v: fields.integer("ddp.nnodes", v, 1),
    "node_rank": lambda v: fields.integer("ddp.node_rank", v, 0),
    "rdzv_endpoint": lambda v: fields.endpoint("ddp.rdzv_endpoint", v),
    "bucket_cap_mb": lambda v: fields.number("ddp.bucket_cap_mb", v, 0),
    "gradient_as_bucket_view": lambda v: fields.boolean("ddp.gradient_as_bucket_view", v),
}

FLAGS = (
    Flag("--nnodes", "nnodes", "DDP: number of machines (torchrun --nnodes)"),
    Flag("--node-rank", "node_rank", "DDP: this machine's index, 0 on the one that records results"),
    Flag("--rdzv-endpoint", "rdzv_endpoint", "DDP: HOST:PORT on node 0"),
    Flag("--bucket-cap-mb", "bucket_cap_mb", "DDP: gradient bucket size in MiB (default 25)",
         training_only=True),
    Flag("--gradient-as-bucket-view", "gradient_as_bucket_view", "DDP: gradients as views into "
         "the buckets (saves a copy per step)", switch=True, training_only=True),
)

KNOBS = DDP_KNOBS  # what `scalebench tune` searches (frameworks/torch_dist.py)


def check(options: Options, workers: tuple[int, ...] | None) -> None:
    if options.node_rank >= options.nnodes:
        raise UserError(f"ddp.node_rank: must be below ddp.nnodes ({options.nnodes}), got "
                        f"{options.node_rank}")
    if options.nnodes > 1:
        if options.rdzv_endpoint is None:
            raise UserError("ddp.rdzv_endpoint: required when ddp.nnodes > 1 (HOST:PORT of node 0)")
        for w in workers or ():
            if w % options.nnodes:
                raise UserError(
                    f"workers: {w} is not a multiple of ddp.nnodes ({options.nnodes}); every node "
                    "runs the same number of workers"
                )
