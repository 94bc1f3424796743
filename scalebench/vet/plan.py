"""A vetting as jobs of the vet task: node-probe steps (one over the allocation; over halves of
it, then halves of those, when one fails: vet/run.py), pair-probe steps (the schedule's rounds,
then the retests), each with one task per node (per GPU for the node probes on CUDA), launched
by the executor through DDP's Slurm step (torch.distributed over the step's tasks).

Nodes that share one machine's cores (Slurm says so: the same NodeHostName, or NodeAddr) would
compete and look slow when probed at once, so then every task takes its turn; on a cluster of
separate machines, all nodes measure at the same time.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scalebench.hardware import devices
from scalebench.models import workloads
from scalebench.slurm.allocation import Allocation, compress_hostlist
from scalebench.spec.errors import UserError
from scalebench.spec.launch import Job, LaunchSpec
from scalebench.tasks import vet as vet_task
from scalebench.tasks.train import TrainSpec, check_warmup
from scalebench.vet import schedule, topology
from scalebench.vet.options import DEFAULT_ALLREDUCE, DEFAULT_MATMUL, DEFAULT_SUSTAINED, VetOptions


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
    for node in options.probe_kill:
        if node not in nodes:
            raise UserError(f"inject_probe_kill: unknown node {node!r}; the allocation's "
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


def _launch(options: VetOptions, alloc: Allocation, device: devices.DeviceInfo,
            nodes: Sequence[str], per_node: int) -> LaunchSpec:
    """One step over these nodes, per_node tasks on each (DDP's Slurm step)."""
    from scalebench.frameworks import ddp

    part = alloc.subset(list(nodes))
    on_node = part.place(len(nodes) * per_node, device.device, max_per_node=per_node)
    return LaunchSpec(framework="ddp", world_size=len(nodes) * per_node, nodes=len(nodes),
                      device=device.device, backend=device.backend, timeout=options.timeout,
                      threads_per_worker=on_node.cpus_per_task, options=ddp.Options(),
                      launcher="slurm", slurm_nodes=tuple(nodes), max_per_node=per_node)


def _faults(options: VetOptions) -> dict:
    return {"node_slowdown": options.node_slowdown, "link_delay": options.link_delay}


def node_job(options: VetOptions, alloc: Allocation, device: devices.DeviceInfo,
             share: Sharing, nodes: Sequence[str], run_id: str) -> Job:
    """The node probes of these nodes as one step (one task per node, per GPU on CUDA)."""
    cuda = device.device == "cuda"
    per_node = alloc.gpus_per_node if cuda else 1
    if cuda and per_node < 1:
        raise UserError(f"device: a CUDA vetting needs GPUs and {alloc.describe()} has none; "
                        "ask salloc/sbatch for --gpus-per-node")
    return Job(run_id, vet_task.KIND, _launch(options, alloc, device, nodes, per_node),
               vet_task.VetSpec(
                   probe="nodes", nodes=tuple(nodes), together=share.together,
                   repeats=options.repeats, per_node=per_node, train=train_spec(options, device),
                   matmul_size=options.matmul_size or DEFAULT_MATMUL[device.device],
                   matmul_iters=options.matmul_iters,
                   sustained_seconds=options.sustained or DEFAULT_SUSTAINED[device.device],
                   probe_kill=options.probe_kill, **_faults(options)))


def pair_job(options: VetOptions, alloc: Allocation, device: devices.DeviceInfo,
             share: Sharing, nodes: Sequence[str], rounds: Sequence[Sequence[tuple[str, str]]],
             first_round: int, run_id: str) -> Job:
    """The pairs of these rounds as one step over the nodes they name (one task per node)."""
    busy = {n for r in rounds for p in r for n in p}
    step_nodes = tuple(n for n in nodes if n in busy)
    return Job(run_id, vet_task.KIND, _launch(options, alloc, device, step_nodes, 1),
               vet_task.VetSpec(
                   probe="pairs", nodes=step_nodes, together=share.together,
                   repeats=options.repeats, rounds=tuple(tuple(r) for r in rounds),
                   first_round=first_round,
                   allreduce_bytes=options.allreduce_size or DEFAULT_ALLREDUCE[device.device],
                   allreduce_iters=options.allreduce_iters, **_faults(options)))


def topology_for(options: VetOptions, nodes: Sequence[str]) -> topology.Topology | None:
    """--topology's file, else Slurm's own tree topology, else None; over these nodes."""
    found = topology.read_file(options.topology) if options.topology else topology.from_slurm()
    return topology.for_nodes(found, nodes) if found else None


def pair_schedule(options: VetOptions, nodes: Sequence[str],
                  tree: topology.Topology | None) -> schedule.Schedule:
    return schedule.choose(nodes, options.pairs, options.rounds,
                           tree.leaves if tree else None)
