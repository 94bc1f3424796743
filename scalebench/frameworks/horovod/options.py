"""Horovod's options: the dataclass, its workload-file table [horovod], its flags, its checks."""

from __future__ import annotations

from dataclasses import dataclass

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


# The variable hvd.init() reads for each knob: the launcher sets it (as horovodrun's
# --fusion-threshold-mb, ... do), the worker reads it back (Horovod has no getter).
VARIABLES = {"fusion_threshold_mb": "HOROVOD_FUSION_THRESHOLD",
             "cycle_time_ms": "HOROVOD_CYCLE_TIME",
             "cache_capacity": "HOROVOD_CACHE_CAPACITY",
             "hierarchical_allreduce": "HOROVOD_HIERARCHICAL_ALLREDUCE"}


def parse_bool(value: str) -> bool:
    return fields.boolean("knobs.hierarchical_allreduce", value)


# What `scalebench tune` searches for Horovod. Horovod reads these when hvd.init() starts its
# background thread, so each candidate is its own launch (interleaved rounds of launches): a
# restart inside a launch (hvd.shutdown, new variables, hvd.init) crashes Horovod 0.28.1 by the
# third start (docs/tuning.md, "Why Horovod cannot restart inside a launch").
# The grids include Horovod's defaults (128 MB, 1 ms, 1024) and 0 (fusion off, no cache). The
# cycle time spans 1-25 ms: on a CPU with gloo, Horovod's own autotuner chose 25 ms for
# ResNet-101 (+13% over the default, benchmarks/horovod_autotune.py), outside a 1-5 ms grid.
KNOBS = (
    Knob("fusion_threshold_mb", (0.0, 32.0, 128.0), 128.0, in_launch=False,
         why="the tensor-fusion buffer in MB (default 128; 0: no fusion)"),
    Knob("cycle_time_ms", (1.0, 5.0, 25.0), 1.0, in_launch=False,
         why="how long Horovod's background thread waits between cycles (default 1 ms)"),
    Knob("cache_capacity", (0, 1024), 1024, in_launch=False, parse=int,
         why="the response cache (default 1024 entries; 0 turns it off)"),
    Knob("hierarchical_allreduce", (False, True), False, in_launch=False, parse=parse_bool,
         multi_node=True, why="allreduce within each node, then across nodes"),
)
# Searched unless --knobs says otherwise (the cache only on request: its default is almost
# never worse, and each Horovod candidate costs a launch).
DEFAULT_KNOBS = ("fusion_threshold_mb", "cycle_time_ms", "hierarchical_allreduce")


def check(options: Options, workers: tuple[int, ...] | None) -> None:
    if options.hosts and options.hostfile:
        raise UserError("horovod.hosts: give either hosts or hostfile, not both")
