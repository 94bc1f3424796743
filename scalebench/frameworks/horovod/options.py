"""Horovod's options: the dataclass, its workload-file table [horovod], its flags, its checks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from scalebench.frameworks.base import Flag, Knob
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
    cache_capacity: int | None = None  # HOROVOD_CACHE_CAPACITY (response cache); None: 1024
    hierarchical_allreduce: bool = False  # HOROVOD_HIERARCHICAL_ALLREDUCE (multi-node)


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
    "cache_capacity": lambda v: fields.integer("horovod.cache_capacity", v, 0),
    "hierarchical_allreduce": lambda v: fields.boolean("horovod.hierarchical_allreduce", v),
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
    Flag("--cache-capacity", "cache_capacity", "Horovod: response cache capacity "
         "(HOROVOD_CACHE_CAPACITY, default 1024; 0 turns the cache off)"),
    Flag("--hierarchical-allreduce", "hierarchical_allreduce", "Horovod: hierarchical allreduce "
         "(within nodes, then across)", switch=True),
)


# The variable hvd.init() reads for each knob (horovodrun's --fusion-threshold-mb, ... set the
# same), and the value's text; None: the variable unset (Horovod's default).
VARIABLES = {
    "fusion_threshold_mb": ("HOROVOD_FUSION_THRESHOLD", lambda v: str(int(v * 1024 * 1024))),
    "cycle_time_ms": ("HOROVOD_CYCLE_TIME", lambda v: f"{v:g}"),
    "cache_capacity": ("HOROVOD_CACHE_CAPACITY", str),
    "hierarchical_allreduce": ("HOROVOD_HIERARCHICAL_ALLREDUCE", lambda v: "1" if v else None),
}


def variables(settings: dict[str, Any]) -> dict[str, str | None]:
    """Environment variable -> its text (None: unset) for the given knob settings; a setting
    of None leaves the variable unset."""
    out = {}
    for option, value in settings.items():
        name, text = VARIABLES[option]
        out[name] = None if value is None else text(value)
    return out


def parse_bool(value: str) -> bool:
    return fields.boolean("knobs.hierarchical_allreduce", value)


# What `scalebench tune` searches for Horovod. Horovod reads these from the environment when
# hvd.init() starts its background thread; a launch re-sets them between windows by
# hvd.shutdown(), new variables, hvd.init() (worker.HorovodComm.configure), so candidates are
# interleaved inside one launch as DDP's are. The grids include Horovod's defaults (128 MB,
# 1 ms, 1024) and 0 (fusion off, no cache). The cycle time spans 1-25 ms: on a CPU with gloo,
# Horovod's own autotuner chose 25 ms for ResNet-101 (+13% over the default,
# benchmarks/horovod_autotune.py), outside a 1-5 ms grid.
KNOBS = (
    Knob("fusion_threshold_mb", (0.0, 32.0, 128.0), 128.0,
         why="the tensor-fusion buffer in MB (default 128; 0: no fusion)"),
    Knob("cycle_time_ms", (1.0, 5.0, 25.0), 1.0,
         why="how long Horovod's background thread waits between cycles (default 1 ms)"),
    Knob("cache_capacity", (0, 1024), 1024, parse=int,
         why="the response cache (default 1024 entries; 0 turns it off)"),
    Knob("hierarchical_allreduce", (False, True), False, parse=parse_bool,
         multi_node=True, why="allreduce within each node, then across nodes"),
)
# Searched unless --knobs says otherwise (the cache only on request: its default is almost
# never worse, and every candidate doubles the grid).
DEFAULT_KNOBS = ("fusion_threshold_mb", "cycle_time_ms", "hierarchical_allreduce")


def check(options: Options, workers: tuple[int, ...] | None) -> None:
    if options.hosts and options.hostfile:
        raise UserError("horovod.hosts: give either hosts or hostfile, not both")
