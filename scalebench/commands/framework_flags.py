"""Framework option flags shared by the commands that launch runs (sweep, allreduce)."""

from __future__ import annotations

import argparse

SECTION_FLAGS = {  # flag dest -> (workload table, field)
    "nnodes": ("ddp", "nnodes"), "node_rank": ("ddp", "node_rank"),
    "rdzv_endpoint": ("ddp", "rdzv_endpoint"),
    "hosts": ("horovod", "hosts"), "hostfile": ("horovod", "hostfile"),
    "fp16_allreduce": ("horovod", "fp16_allreduce"),
    "fusion_threshold_mb": ("horovod", "fusion_threshold_mb"),
    "cycle_time_ms": ("horovod", "cycle_time_ms"), "timeline": ("horovod", "timeline"),
    "ray_address": ("ray", "address"), "placement": ("ray", "placement"),
}


def add_framework_flags(p: argparse.ArgumentParser, training: bool = True) -> None:
    """DDP multi-node, Horovod and Ray options; training-only knobs when training is True."""
    g = p.add_argument_group("DDP (torchrun) multi-node")
    g.add_argument("--nnodes", help="number of machines")
    g.add_argument("--node-rank", help="this machine's index, 0 on the one that records results")
    g.add_argument("--rdzv-endpoint", help="HOST:PORT on node 0")
    g = p.add_argument_group("Horovod")
    g.add_argument("--hosts", help="horovodrun -H, e.g. host1:4,host2:4")
    g.add_argument("--hostfile", help="horovodrun --hostfile")
    if training:
        g.add_argument("--fp16-allreduce", action="store_true", default=None,
                       help="compress gradients to fp16 for the allreduce")
    g.add_argument("--fusion-threshold-mb", help="HOROVOD_FUSION_THRESHOLD in MB")
    g.add_argument("--cycle-time-ms", help="HOROVOD_CYCLE_TIME in ms")
    if training:
        g.add_argument("--timeline", action="store_true", default=None,
                       help="save a Horovod timeline next to the results")
    g = p.add_argument_group("Ray Train")
    g.add_argument("--ray-address", help="auto, HOST:PORT or ray://HOST:10001 (default: embedded)")
    g.add_argument("--placement", help="Ray placement: PACK, SPREAD, STRICT_PACK or STRICT_SPREAD")


def section_values(args: argparse.Namespace) -> dict[str, dict]:
    """{table: {field: value}} for the flags this command has (None where not given)."""
    values: dict[str, dict] = {}
    for dest, (section, field) in SECTION_FLAGS.items():
        if hasattr(args, dest):
            values.setdefault(section, {})[field] = getattr(args, dest)
    return values
