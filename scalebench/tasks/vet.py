"""The vetting task: the probes of `scalebench vet`, as jobs the executor launches as Slurm steps.

Two probes, each one job (one step, one task per node, or per GPU on CUDA):

- nodes: on every device, (a) the compute probe: the sweep's own one-worker training step
  (measure.build and the plain step of measure.run) timed in windows of `iters` steps; (b) the
  matmul probe: an N x N GEMM at the run's dtype, FLOP/s. Each repeat is one window of each;
  then (c) the sustained probe: the same GEMM back to back for `sustained_seconds`, timed in
  `repeats` consecutive windows (clocks and temperatures settle under sustained load).
- pairs: every pair of the schedule's rounds (vet/schedule.py) sums one tensor with
  torch.distributed (gloo on CPU, NCCL on CUDA), one worker per node, through
  tasks.allreduce.run on a two-rank group; the pairs of a round run at the same time. Each
  repeat is one window per pair; busbw as nccl-tests (x 2(N-1)/N = 1 for a pair).

Repeats are interleaved (every device or pair measures once, then again) so that a change of
load over time spreads over all figures instead of spoiling one. together False (nodes that
share one machine's cores): the tasks take turns, one measuring at a time, the rest waiting in
a barrier. The documented fault injections (off by default) are keyed by Slurm node name: a
node slowdown makes each compute step and GEMM window on that node take (1 + fraction) as
long; a link delay sleeps after each collective between one pair; a probe kill makes the node
probe on that node SIGKILL itself as it starts (a node that dies under its probe).
"""

from __future__ import annotations

import math
import os
import signal
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any, ClassVar

from scalebench.frameworks.base import LaunchOutcome
from scalebench.records.schema import LAUNCH_FIELDS, RecordError, check_fields, launch_fields
from scalebench.spec.launch import Job
from scalebench.tasks.base import Task
from scalebench.tasks.train import TrainSpec
from scalebench.worker.comm import Comm, SingleProcessComm

KIND = "vet"
PROBES = ("nodes", "pairs")
MATMUL_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


@dataclass(frozen=True)
class VetSpec:
    kind: ClassVar[str] = KIND  # the task this spec belongs to (Job checks it)
    probe: str  # nodes or pairs
    nodes: tuple[str, ...]  # the step's nodes, in the order of their tasks
    together: bool  # False: the tasks take turns (nodes sharing one machine's cores)
    repeats: int
    per_node: int = 1  # tasks per node: GPUs on CUDA (node probes), else 1
    train: TrainSpec | None = None  # the compute probe's step (node probes)
    matmul_size: int = 0
    matmul_iters: int = 0
    rounds: tuple[tuple[tuple[str, str], ...], ...] = ()  # the schedule's (pair probes)
    first_round: int = 1  # the number of the first of them (retests go on counting)
    sustained_seconds: float = 0.0  # the sustained GEMM per node (node probes; 0: none)
    allreduce_bytes: int = 0
    allreduce_iters: int = 0
    allreduce_warmup: int = 1
    # fault injection, keyed by Slurm node name (off: empty)
    node_slowdown: tuple[tuple[str, float], ...] = ()  # (node, fraction)
    link_delay: tuple[tuple[str, str, float], ...] = ()  # (node, node, seconds per call)
    probe_kill: tuple[str, ...] = ()  # nodes whose node probe kills itself

    def __post_init__(self):
        if self.probe not in PROBES:
            raise ValueError(f"probe {self.probe!r} not one of {', '.join(PROBES)}")
        if self.repeats < 1:
            raise ValueError("repeats must be >= 1")
        object.__setattr__(self, "nodes", tuple(self.nodes))
        object.__setattr__(self, "rounds", tuple(tuple(tuple(p) for p in r)
                                                 for r in self.rounds))
        object.__setattr__(self, "node_slowdown", tuple(tuple(x) for x in self.node_slowdown))
        object.__setattr__(self, "link_delay", tuple(tuple(x) for x in self.link_delay))
        object.__setattr__(self, "probe_kill", tuple(self.probe_kill))

    def faults(self) -> dict[str, Any]:
        return injected_faults(self.node_slowdown, self.link_delay, self.probe_kill)


def injected_faults(node_slowdown: tuple[tuple[str, float], ...],
                    link_delay: tuple[tuple[str, str, float], ...],
                    probe_kill: tuple[str, ...] = ()) -> dict[str, Any]:
    """The fault injections as vet.json and the records carry them (empty: none)."""
    out: dict[str, Any] = {}
    if probe_kill:
        out["probe_kill"] = list(probe_kill)
    if node_slowdown:
        out["node_slowdown"] = {node: fraction for node, fraction in node_slowdown}
    if link_delay:
        out["link_delay_seconds"] = {f"{a}:{b}": s for a, b, s in link_delay}
    return out


# ---------------------------------------------------------------- worker side


class DeviceComm(SingleProcessComm):
    """One process on its own (no collective), on the accelerator at `index`."""

    def __init__(self, index: int = 0):
        self.local_rank = index


class Slowed:
    """Fault injection --inject-node-slowdown: each call takes (1 + fraction) times as long."""

    def __init__(self, call: Callable[[], Any], fraction: float, device):
        self.call, self.fraction, self.device = call, fraction, device

    def __call__(self) -> Any:
        from scalebench.worker import measure

        start = time.perf_counter()
        out = self.call()
        if self.fraction:
            measure.synchronize(self.device)
            time.sleep(self.fraction * (time.perf_counter() - start))
        return out

    def input_wait(self) -> float:
        return getattr(self.call, "input_wait", lambda: 0.0)()


class Matmul:
    """One N x N GEMM into a preallocated output (2 N^3 floating-point operations)."""

    def __init__(self, size: int, dtype: str, device):
        import torch

        generator = torch.Generator().manual_seed(7)
        kind = getattr(torch, dtype)
        self.a = torch.randn(size, size, generator=generator).to(device=device, dtype=kind)
        self.b = torch.randn(size, size, generator=generator).to(device=device, dtype=kind)
        self.out = torch.empty_like(self.a)
        self.flop = 2.0 * size**3

    def __call__(self):
        import torch

        return torch.mm(self.a, self.b, out=self.out)


def in_turns(comm: Comm, together: bool, body: Callable[[], None]) -> None:
    """body on every rank at once (after a barrier), or rank by rank while the others wait."""
    if together:
        comm.barrier()
        body()
    else:
        for turn in range(comm.world_size):
            comm.barrier()
            if turn == comm.rank:
                body()
    comm.barrier()


def machine_id() -> str:
    """This machine's boot id: equal on nodes that share one machine's cores."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as fh:
            return fh.read().strip()
    except OSError:
        return socket.gethostname()


def node_probes(job: Job, comm: Comm, clock: Callable[[], float] = time.perf_counter
                ) -> dict | None:
    import torch

    from scalebench.worker import measure
    from scalebench.worker.step import Step, plain_optimizer_step

    spec: VetSpec = job.task
    train: TrainSpec = spec.train
    measure.set_threads(job.launch.threads_per_worker)
    node = os.environ.get("SLURMD_NODENAME") or spec.nodes[comm.rank // spec.per_node]
    index = comm.local_rank if job.launch.device == "cuda" else 0
    if node in spec.probe_kill:  # fault injection: this node dies under its probe
        os.kill(os.getpid(), signal.SIGKILL)
    fraction = dict(spec.node_slowdown).get(node, 0.0)
    alone = DeviceComm(index)
    built = measure.build(train, alone, job.launch.device)
    device = built.device
    step = Slowed(Step(train, plain_optimizer_step, built.model, built.optimizer, built.batches,
                       device), fraction, device)
    gemm = Matmul(spec.matmul_size, MATMUL_DTYPES[train.precision], device)
    matmul = Slowed(gemm, fraction, device)

    def warm() -> None:
        measure.warm_up(step, train.warmup, alone, device)
        measure.warm_up(matmul, 2, alone, device)

    compute: list[float] = []
    flops: list[float] = []

    def once() -> None:
        window = measure.timed_windows(step, 1, train.iters, alone, device, clock)
        compute.append(train.batch_size * train.iters / window.seconds[0])
        window = measure.timed_windows(matmul, 1, spec.matmul_iters, alone, device, clock)
        flops.append(gemm.flop * spec.matmul_iters / window.seconds[0])

    sustained: list[float] = []

    def sustain() -> None:
        share = spec.sustained_seconds / spec.repeats
        for _ in range(spec.repeats):
            measure.synchronize(device)
            start, calls = clock(), 0
            while True:
                matmul()
                calls += 1
                if calls % 4 == 0:
                    measure.synchronize(device)
                    if clock() - start >= share:
                        break
            sustained.append(gemm.flop * calls / (clock() - start))

    in_turns(comm, spec.together, warm)
    for _ in range(spec.repeats):
        in_turns(comm, spec.together, once)
    if spec.sustained_seconds > 0:
        in_turns(comm, spec.together, sustain)
    local = {"node": node, "device_index": index, "device_name": measure.device_name(device),
             "hostname": socket.gethostname(), "machine": machine_id(),
             "threads": torch.get_num_threads(), "compute_images_per_sec": compute,
             "matmul_flops_per_sec": flops, "sustained_flops_per_sec": sustained,
             "slowdown": fraction}
    gathered = comm.all_gather(local)
    return {"units": gathered} if comm.rank == 0 else None


class PairComm(Comm):
    """Two ranks of the step's process group as a Comm (tasks.allreduce.run times it); `delay`
    is the fault injection --inject-link-delay (seconds of sleep after each collective)."""

    def __init__(self, group, ranks: tuple[int, int], backend: str, delay: float = 0.0):
        import torch.distributed as dist

        self._dist, self.group, self.backend, self.delay = dist, group, backend, delay
        self.rank = ranks.index(dist.get_rank())
        self.world_size = 2
        self.local_rank = 0

    def barrier(self) -> None:
        if self.backend == "nccl":
            self._dist.barrier(group=self.group, device_ids=[self.device_index()])
        else:
            self._dist.barrier(group=self.group)

    def all_gather(self, obj: Any) -> list[Any]:
        out: list[Any] = [None, None]
        self._dist.all_gather_object(out, obj, group=self.group)
        return out

    def allreduce(self, tensor) -> None:
        self._dist.all_reduce(tensor, group=self.group)
        if self.delay:
            time.sleep(self.delay)


def pair_probes(job: Job, comm: Comm, clock: Callable[[], float] = time.perf_counter
                ) -> dict | None:
    import torch.distributed as dist

    from scalebench.tasks import allreduce
    from scalebench.worker import measure

    spec: VetSpec = job.task
    measure.set_threads(job.launch.threads_per_worker)
    rank_of = {node: i for i, node in enumerate(spec.nodes)}
    delays = {frozenset((a, b)): s for a, b, s in spec.link_delay}
    # Every rank creates every group, in one order (torch.distributed requires it).
    groups = {pair: dist.new_group([rank_of[pair[0]], rank_of[pair[1]]])
              for rnd in spec.rounds for pair in rnd}
    once = Job(job.run_id, allreduce.KIND, job.launch, allreduce.AllreduceSpec(
        sizes=(spec.allreduce_bytes,), dtype="float32", warmup=spec.allreduce_warmup,
        iters=spec.allreduce_iters, trials=1))
    seconds: dict[tuple[str, str], list[float]] = {}

    def measure_pair(pair: tuple[str, str]) -> None:
        ranks = (rank_of[pair[0]], rank_of[pair[1]])
        pair_comm = PairComm(groups[pair], ranks, job.launch.backend,
                             delays.get(frozenset(pair), 0.0))
        result = allreduce.run(once, pair_comm, clock)
        if result is not None:  # the pair's first rank
            [point] = result["points"]
            slowest = max(w[0] for w in point["window_seconds"])
            seconds.setdefault(pair, []).append(slowest / spec.allreduce_iters)

    def measure_mine(pairs) -> None:
        for pair in pairs:
            if comm.rank in (rank_of[pair[0]], rank_of[pair[1]]):
                measure_pair(pair)

    for _ in range(spec.repeats):
        for rnd in spec.rounds:
            if spec.together:  # the pairs of a round share no node: all at once
                in_turns(comm, True, lambda r=rnd: measure_mine(r))
            else:
                for pair in rnd:
                    in_turns(comm, True, lambda p=pair: measure_mine([p]))
    gathered = comm.all_gather({"seconds": {f"{a}:{b}": s for (a, b), s in seconds.items()},
                                "node": spec.nodes[comm.rank], "hostname": socket.gethostname()})
    if comm.rank != 0:
        return None
    measured = {key: s for g in gathered for key, s in g["seconds"].items()}
    factor = allreduce.busbw_factor(2)
    pairs = []
    for number, rnd in enumerate(spec.rounds, start=spec.first_round):
        for a, b in rnd:
            times = measured.get(f"{a}:{b}", [])
            pairs.append({"nodes": [a, b], "round": number, "seconds": times,
                          "busbw_bytes_per_sec": [spec.allreduce_bytes / t * factor
                                                  for t in times],
                          "link_delay_seconds": delays.get(frozenset((a, b)), 0.0)})
    return {"pairs": pairs, "hostnames": [g["hostname"] for g in gathered]}


# ---------------------------------------------------------------- records

FIELDS: dict[str, tuple[type, ...]] = {
    "probe": (str,),
    "slurm_nodes": (list,),
    "repeats": (int,),
    "together": (bool,),
    "faults": (dict,),
}
OK_FIELDS = {"nodes": {"units": (list,)}, "pairs": {"pairs": (list,)}}


def _positive_rates(values: Any) -> bool:
    return isinstance(values, list) and all(
        isinstance(v, (int, float)) and math.isfinite(v) and v > 0 for v in values)


def check_vet_record(record: dict[str, Any]) -> None:
    check_fields(record, {**LAUNCH_FIELDS, **FIELDS})
    if record["probe"] not in PROBES:
        raise RecordError(f"probe {record['probe']!r} not one of {', '.join(PROBES)}")
    if record["status"] != "ok":
        return
    check_fields(record, OK_FIELDS[record["probe"]])
    for unit in record.get("units", []):
        for name in ("compute_images_per_sec", "matmul_flops_per_sec",
                     "sustained_flops_per_sec"):
            if not _positive_rates(unit.get(name, [])):
                raise RecordError(f"units: {name} of {unit.get('node')!r} is not a list of "
                                  "positive rates")
    for pair in record.get("pairs", []):
        if not _positive_rates(pair.get("busbw_bytes_per_sec")):
            raise RecordError(f"pairs: busbw of {pair.get('nodes')} is not a list of positive "
                              "rates")


def build_record(job: Job, outcome: LaunchOutcome | None, env: dict, skipped_reason: str = ""
                 ) -> dict[str, Any]:
    from scalebench.records import results

    spec: VetSpec = job.task
    record: dict[str, Any] = {
        **launch_fields(job, env), "probe": spec.probe, "slurm_nodes": list(spec.nodes),
        "repeats": spec.repeats, "together": spec.together, "faults": spec.faults()}
    if spec.probe == "nodes":
        record.update(model=spec.train.model, batch_size=spec.train.batch_size,
                      image_size=spec.train.image_size, precision=spec.train.precision,
                      warmup=spec.train.warmup, iters=spec.train.iters,
                      matmul_size=spec.matmul_size, matmul_iters=spec.matmul_iters,
                      sustained_seconds=spec.sustained_seconds)
    else:
        record.update(rounds=[[list(p) for p in r] for r in spec.rounds],
                      allreduce_bytes=spec.allreduce_bytes, allreduce_iters=spec.allreduce_iters)
    if outcome is None:
        record.update(status="skipped", error=skipped_reason)
    else:
        record.update(status=outcome.status, error=outcome.error, scheduler=outcome.scheduler)
        if outcome.status == "ok":
            key = "units" if spec.probe == "nodes" else "pairs"
            record[key] = outcome.result[key]
        else:
            record["stderr_tail"] = outcome.stderr_tail
    results.validate(record)
    return record


def result_text(record: dict) -> str:
    head = f"vet {record['probe']} on {len(record['slurm_nodes'])} nodes"
    if record["status"] != "ok":
        return f"{head}: {record['status'].upper()} - {record['error']}"
    import statistics

    if record["probe"] == "nodes":
        rates = [statistics.median(u["compute_images_per_sec"]) for u in record["units"]]
        return (f"{head}: compute {min(rates):.3g}-{max(rates):.3g} images/s over "
                f"{len(rates)} devices")
    rates = [statistics.median(p["busbw_bytes_per_sec"]) for p in record["pairs"]
             if p["busbw_bytes_per_sec"]]
    if not rates:
        return f"{head}: no pair measured"
    return (f"{head}: busbw {min(rates) / 1e9:.3g}-{max(rates) / 1e9:.3g} GB/s over "
            f"{len(rates)} pairs")


class VetTask(Task):
    kind = KIND
    # builds_model stays False: the node probe's injected kill comes before its model, and
    # torchvision imported up front in all 8 probes kept that failed step alive 6 s longer (8
    # nodes, 2 cores); the compute probe imports it as it builds.
    spec_type = VetSpec
    noun = "probe"

    def spec_from_dict(self, values: dict[str, Any]) -> VetSpec:
        values = dict(values)
        if values.get("train") is not None:
            names = {f.name for f in fields(TrainSpec)}
            values["train"] = TrainSpec(**{k: v for k, v in values["train"].items()
                                           if k in names})
        return VetSpec(**values)

    def worker(self, job: Job, comm: Comm) -> dict | None:
        probe = node_probes if job.task.probe == "nodes" else pair_probes
        return probe(job, comm)

    def records(self, job: Job, outcome: LaunchOutcome | None, env: dict,
                skipped_reason: str = "") -> list[dict]:
        return [build_record(job, outcome, env, skipped_reason)]

    def check_record(self, record: dict[str, Any]) -> None:
        check_vet_record(record)

    def label(self, job: Job) -> str:
        spec: VetSpec = job.task
        how = "at once" if spec.together else "one at a time"
        if spec.probe == "nodes":
            return (f"vet node probes ({spec.train.model} step, {spec.matmul_size}^2 matmul) "
                    f"x{spec.repeats} on {len(spec.nodes)} nodes, {how}")
        count = sum(len(r) for r in spec.rounds)
        return (f"vet pair probes: {count} pairs in {len(spec.rounds)} rounds x{spec.repeats}, "
                f"pairs of a round {how}")

    def result_line(self, record: dict) -> str:
        return result_text(record)

    def resume_keys(self, job: Job) -> list[tuple]:
        return [("vet", job.run_id)]  # a vetting is never resumed (each one measures anew)


TASK = VetTask()
