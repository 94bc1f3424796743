"""Ray Train's options: the dataclass, its workload-file table [ray], its flags."""

from __future__ import annotations

from dataclasses import dataclass

from scalebench.frameworks.base import Flag
from scalebench.spec import fields

PLACEMENTS = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")


@dataclass(frozen=True)
class Options:
    address: str | None = None  # None: embedded local cluster; "auto", "HOST:PORT", "ray://HOST:PORT"
    placement: str = "PACK"


TABLE = {
    "address": lambda v: fields.text("ray.address", v),
    "placement": lambda v: fields.choice("ray.placement", v.upper() if isinstance(v, str) else v,
                                         PLACEMENTS),
}

FLAGS = (
    Flag("--ray-address", "address", "Ray: auto, HOST:PORT or ray://HOST:10001 (default: an "
         "embedded cluster per sweep)"),
    Flag("--placement", "placement", "Ray placement: PACK, SPREAD, STRICT_PACK or STRICT_SPREAD"),
)
