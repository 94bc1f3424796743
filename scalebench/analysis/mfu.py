"""Model FLOPs utilisation: how far a run's compute is from what its device can do.

    achieved FLOP/s per worker = per-worker images/s x counted FLOPs per image (forward +
                                 backward, scalebench/flops.py)
    MFU                        = achieved FLOP/s per worker / the peak one worker holds

(Chowdhery et al., PaLM, 2022, appendix B.) The peak is measured per device and precision
(scalebench/peak.py): one GPU per worker on CUDA; on a CPU the probe used every core of the
node, and the workers on a node share them, so a worker holds 1/(workers per node) of it. MFU
at N workers is then all workers' FLOP/s over all the devices they hold, the same at one
worker: efficiency says what scaling lost, the one-worker MFU what the baseline already left.

Pure arithmetic on record fields; older records without FLOPs or a peak give None.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# The fields a train record carries for MFU (all optional: older records lack them).
RECORD_FIELDS: dict[str, tuple[type, ...]] = {
    "flops_per_image": (float, type(None)),
    "flops_method": (str,),
    "peak_flops": (float, type(None)),
    "peak_method": (str,),
    "datasheet_peak_flops": (float, type(None)),
    "datasheet_peak_source": (str, type(None)),
    "achieved_flops_per_worker": (float, type(None)),
    "mfu": (float, type(None)),
    "mfu_datasheet": (float, type(None)),
}


def worker_share(device: str | None, world_size: int, nodes: int) -> float:
    """The part of one probed device a worker holds."""
    if device == "cuda":
        return 1.0
    return max(1, nodes) / max(1, world_size)


def achieved(per_worker_images_per_sec: float | None, flops_per_image: float | None
             ) -> float | None:
    if per_worker_images_per_sec is None or not flops_per_image:
        return None
    return per_worker_images_per_sec * flops_per_image


def utilisation(per_worker_images_per_sec: float | None, flops_per_image: float | None,
                peak_flops: float | None, device: str | None, world_size: int, nodes: int
                ) -> float | None:
    """MFU of one worker against `peak_flops` (the whole device's); None without the inputs."""
    rate = achieved(per_worker_images_per_sec, flops_per_image)
    if rate is None or not peak_flops:
        return None
    return rate / (peak_flops * worker_share(device, world_size, nodes))


def _of(record: Mapping[str, Any], per_worker: float | None, peak_field: str) -> float | None:
    return utilisation(per_worker, record.get("flops_per_image"), record.get(peak_field),
                       record.get("device"), record.get("world_size") or 1,
                       record.get("nodes") or 1)


def record_fields(record: Mapping[str, Any]) -> dict[str, float | None]:
    """What an ok train record adds from its own per-worker throughput, FLOPs and peaks."""
    per_worker = record.get("per_worker_images_per_sec")
    return {"achieved_flops_per_worker": achieved(per_worker, record.get("flops_per_image")),
            "mfu": _of(record, per_worker, "peak_flops"),
            "mfu_datasheet": _of(record, per_worker, "datasheet_peak_flops")}


def row_fields(record: Mapping[str, Any], images_per_sec: float, ci_low: float | None,
               ci_high: float | None) -> dict[str, Any]:
    """A summary row's FLOPs, peak and MFU (with the throughput interval carried over), from
    the row's throughput and its newest ok record's FLOPs and peaks."""
    world = record.get("world_size") or 1
    share = worker_share(record.get("device"), world, record.get("nodes") or 1)

    def per_worker(value: float | None) -> float | None:
        return None if value is None else value / world

    peak = record.get("peak_flops")
    return {
        "flops_per_image": record.get("flops_per_image"),
        "flops_method": record.get("flops_method"),
        "achieved_flops_per_worker": achieved(per_worker(images_per_sec),
                                              record.get("flops_per_image")),
        "peak_flops": peak,
        "peak_flops_per_worker": None if not peak else peak * share,
        "peak_method": record.get("peak_method"),
        "mfu": _of(record, per_worker(images_per_sec), "peak_flops"),
        "mfu_ci95_low": _of(record, per_worker(ci_low), "peak_flops"),
        "mfu_ci95_high": _of(record, per_worker(ci_high), "peak_flops"),
        "datasheet_peak_flops": record.get("datasheet_peak_flops"),
        "datasheet_peak_source": record.get("datasheet_peak_source"),
        "mfu_datasheet": _of(record, per_worker(images_per_sec), "datasheet_peak_flops"),
    }
