"""Horovod's options: the dataclass, its workload-file table [horovod], its flags, its checks."""

from __future__ import annotations

from dataclasses import dataclass

from scalebench.frameworks.base import Flag
from scalebench.spec import fields
from scalebench.spec.errors import UserError


@dataclass(frozen=True)
class Options:
    hosts: str | None = None  # "host1:4,host2:4", passed to horovodrun -H
    hostfile: str | None = None
    fp16_allreduce: bool = False
    fusion_threshold_mb: float | None = None
    cycle_time_ms: float | None = None
    timeline: bool = False


def parse_hosts(value) -> str:
    text = fields.text("horovod.hosts", value)
    for item in text.split(","):
        host, sep, slots = item.partition(":")
        if not host or not sep or not slots.isdigit() or int(slots) < 1:
            raise UserError(
                f"horovod.hosts: expected HOST:SLOTS[,HOST:SLOTS...], e.g. h1:4,h2:4, got {text!r}"
            )
    return text


TABLE = {
    "hosts": parse_hosts,
    "hostfile": lambda v: fields.text("horovod.hostfile", v),
    "fp16_allreduce": lambda v: fields.boolean("horovod.fp16_allreduce", v),
    "fusion_threshold_mb": lambda v: fields.number("horovod.fusion_threshold_mb", v, -1e-9),
    "cycle_time_ms": lambda v: fields.number("horovod.cycle_time_ms", v, 0),
    "timeline": lambda v: fields.boolean("horovod.timeline", v),
}

FLAGS = (
    Flag("--hosts", "hosts", "Horovod: horovodrun -H, e.g. host1:4,host2:4"),
    Flag("--hostfile", "hostfile", "Horovod: horovodrun --hostfile"),
    Flag("--fp16-allreduce", "fp16_allreduce", "Horovod: compress gradients to fp16 for the "
         "allreduce", switch=True, training_only=True),
    Flag("--fusion-threshold-mb", "fusion_threshold_mb", "Horovod: HOROVOD_FUSION_THRESHOLD in MB"),
    Flag("--cycle-time-ms", "cycle_time_ms", "Horovod: HOROVOD_CYCLE_TIME in ms"),
    Flag("--timeline", "timeline", "Horovod: save a timeline next to the results", switch=True,
         training_only=True),
)


def check(options: Options, workers: tuple[int, ...] | None) -> None:
    if options.hosts and options.hostfile:
        raise UserError("horovod.hosts: give either hosts or hostfile, not both")
