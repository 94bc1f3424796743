"""A vetting as jobs of the vet task: one node-probe step and one pair-probe step over the
allocation, each with one task per node (per GPU for the node probes on CUDA), launched by the
executor through DDP's Slurm step (torch.distributed over the step's tasks).

Nodes that share one machine's cores (Slurm says so: the same NodeHostName, or NodeAddr) would
compete and look slow when probed at once, so then every task takes its turn; on a cluster of
separate machines, all nodes measure at the same time.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scalebench.hardware import devices
from scalebench.models import workloads
from scalebench.slurm.allocation import Allocation, compress_hostlist
from scalebench.spec.errors import UserError
from scalebench.spec.launch import Job, LaunchSpec
from scalebench.tasks import vet as vet_task
from scalebench.tasks.train import TrainSpec, check_warmup
from scalebench.vet import schedule
from scalebench.vet.options import DEFAULT_ALLREDUCE, DEFAULT_MATMUL, VetOptions


@dataclass(frozen=True)
class Sharing:
    together: bool  # probe all nodes at once
    hosts: Mapping[str, tuple[str, ...]]  # machine -> its nodes (more than one: shared)
    reason: str


def node_hosts(nodes: Sequence[str]) -> dict[str, str]:
    """Slurm node -> the machine it runs on (NodeHostName, else NodeAddr, else its name)."""
    try:
        text = subprocess.run(["scontrol", "show", "node", "-o", ",".join(nodes)],
                              capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        text = ""
    out = {}
    for line in text.splitlines():
        name = re.search(r"\bNodeName=(\S+)", line)
        host = re.search(r"\bNodeHostName=(\S+)", line) or re.search(r"\bNodeAddr=(\S+)", line)
        if name:
            out[name.group(1)] = host.group(1) if host else name.group(1)
    return {node: out.get(node, node) for node in nodes}


def sharing(hosts: Mapping[str, str]) -> Sharing:
    """Whether nodes share machines, from node -> machine."""
    by_host: dict[str, list[str]] = {}
    for node, host in hosts.items():
        by_host.setdefault(host, []).append(node)
    shared = {h: tuple(n) for h, n in by_host.items() if len(n) > 1}
    if not shared:
        return Sharing(True, {h: tuple(n) for h, n in by_host.items()},
                       "every node is its own machine: all probed at once")
    words = "; ".join(f"{compress_hostlist(n)} on {h}" for h, n in shared.items())
    return Sharing(False, {h: tuple(n) for h, n in by_host.items()},
                   f"nodes share machines ({words}): probed one at a time")


def check_faults(options: VetOptions, nodes: Sequence[str]) -> None:
    known = ", ".join(nodes)
    for node, _ in options.node_slowdown:
        if node not in nodes:
            raise UserError(f"inject_node_slowdown: unknown node {node!r}; the allocation's "
                            f"nodes: {known}")
    for a, b, _ in options.link_delay:
        for node in (a, b):
            if node not in nodes:
                raise UserError(f"inject_link_delay: unknown node {node!r}; the allocation's "
                                f"nodes: {known}")


def train_spec(options: VetOptions, device: devices.DeviceInfo) -> TrainSpec:
    """The compute probe's step: the sweep's one-worker training step at these settings."""
    check_warmup(options.warmup, device)
    devices.check_precision(device, options.precision)
    info = workloads.get_info(options.model)
    size = options.image_size or info.native_image_size
    workloads.check_input(options.model, size, options.batch_size)
    aux = workloads.uses_aux_logits(options.model, size)
    return TrainSpec(model=options.model, batch_size=options.batch_size,
                     global_batch=options.batch_size, image_size=size, aux_logits=aux,
                     precision=options.precision, scaling="weak", data="synthetic",
                     warmup=options.warmup, iters=options.iters, trials=options.repeats,
                     loader_workers=0, params=info.param_count(aux))


def plan(options: VetOptions, alloc: Allocation, device: devices.DeviceInfo, share: Sharing,
         stamp: str | None = None) -> list[Job]:
    """The node-probe job, then (with two nodes or more) the pair-probe job."""
    from scalebench.frameworks import ddp

    nodes = alloc.nodes
    check_faults(options, nodes)
    stamp = stamp or time.strftime("%Y%m%d-%H%M%S")
    cuda = device.device == "cuda"
    per_node = alloc.gpus_per_node if cuda else 1
    if cuda and per_node < 1:
        raise UserError(f"device: a CUDA vetting needs GPUs and {alloc.describe()} has none; "
                        "ask salloc/sbatch for --gpus-per-node")
    on_node = alloc.place(len(nodes) * per_node, device.device, max_per_node=per_node)
    base = LaunchSpec(framework="ddp", world_size=len(nodes) * per_node, nodes=len(nodes),
                      device=device.device, backend=device.backend, timeout=options.timeout,
                      threads_per_worker=on_node.cpus_per_task, options=ddp.Options(),
                      launcher="slurm", slurm_nodes=nodes, max_per_node=per_node)
    faults = {"node_slowdown": options.node_slowdown, "link_delay": options.link_delay}
    matmul = options.matmul_size or DEFAULT_MATMUL[device.device]
    jobs = [Job(f"vet-{stamp}-nodes", vet_task.KIND, base, vet_task.VetSpec(
        probe="nodes", nodes=nodes, together=share.together, repeats=options.repeats,
        per_node=per_node, train=train_spec(options, device), matmul_size=matmul,
        matmul_iters=options.matmul_iters, **faults))]
    rounds = schedule.rounds(nodes)
    if rounds:
        one = alloc.place(len(nodes), device.device, max_per_node=1)
        launch = LaunchSpec(**{**base.__dict__, "world_size": len(nodes), "max_per_node": 1,
                               "threads_per_worker": one.cpus_per_task})
        jobs.append(Job(f"vet-{stamp}-pairs", vet_task.KIND, launch, vet_task.VetSpec(
            probe="pairs", nodes=nodes, together=share.together, repeats=options.repeats,
            rounds=tuple(tuple(r) for r in rounds),
            allreduce_bytes=options.allreduce_size or DEFAULT_ALLREDUCE[device.device],
            allreduce_iters=options.allreduce_iters, **faults)))
    return jobs
