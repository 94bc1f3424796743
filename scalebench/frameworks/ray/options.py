"""Ray Train's options: the dataclass, its workload-file table [ray], its flags."""

from __future__ import annotations

from dataclasses import dataclass

from scalebench.frameworks.base import Flag
from scalebench.frameworks.torch_dist import DDP_KNOBS
from scalebench.spec import fields

PLACEMENTS = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")


@dataclass(frozen=True)
class Options:
    address: str | None = None  # None: embedded local cluster; "auto", "HOST:PORT", "ray://HOST:PORT"
    placement: str = "PACK"
    # DDP's arguments through prepare_model(parallel_strategy_kwargs=...), as DDP has them
    bucket_cap_mb: float | None = None
    gradient_as_bucket_view: bool = False


TABLE = {
    "address": lambda v: fields.text("ray.address", v),
    "placement": lambda v: fields.choice("ray.placement", v.upper() if isinstance(v, str) else v,
                                         PLACEMENTS),
    "bucket_cap_mb": lambda v: fields.number("ray.bucket_cap_mb", v, 0),
    "gradient_as_bucket_view": lambda v: fields.boolean("ray.gradient_as_bucket_view", v),
}

FLAGS = (
    Flag("--ray-address", "address", "Ray: auto, HOST:PORT or ray://HOST:10001 (default: an "
         "embedded cluster per sweep)"),
    Flag("--placement", "placement", "Ray placement: PACK, SPREAD, STRICT_PACK or STRICT_SPREAD"),
    Flag("--ray-bucket-cap-mb", "bucket_cap_mb", "Ray: DDP's gradient bucket size in MiB through "
         "prepare_model (default 25)", training_only=True),
    Flag("--ray-gradient-as-bucket-view", "gradient_as_bucket_view", "Ray: DDP's "
         "gradient_as_bucket_view through prepare_model", switch=True, training_only=True),
)

KNOBS = DDP_KNOBS  # Ray Train wraps with DDP: the same arguments, the same grid
