"""The Slurm allocation a sweep runs in, read from the SLURM_* environment of salloc or sbatch,
and where one run of N workers goes in it (nodes, tasks per node, CPUs and GPUs per task).

A run fills whole nodes before it takes the next one (one worker per GPU on CUDA; on CPU the
tasks per node the job asked for, else one per allocated CPU), so a run that fits on one node
stays on one node, and a multi-node run splits its workers evenly over the first nodes of the
allocation. Anything the allocation cannot hold is a UserError before anything is launched.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from scalebench.spec.errors import UserError

JOB_VAR = "SLURM_JOB_ID"
OUTSIDE = ("launcher: slurm runs inside a Slurm allocation (salloc or sbatch), but SLURM_JOB_ID "
           "is not set; start the sweep inside one, or write a batch file with "
           "`scalebench slurm-script`")


def _split_top(text: str) -> list[str]:
    """Split on commas outside brackets: "a[1-2],b" -> ["a[1-2]", "b"]."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    return [item.strip() for item in items if item.strip()]


def expand_hostlist(text: str) -> list[str]:
    """Slurm's compressed host list as names, in order (as `scontrol show hostnames` gives them):
    "gpu[01-03,07],login1" -> gpu01 gpu02 gpu03 gpu07 login1; zero padding is kept."""
    names: list[str] = []
    for item in _split_top(text):
        match = re.match(r"([^\[]*)\[([^\]]+)\](.*)$", item)
        if not match:
            names.append(item)
            continue
        prefix, ranges, rest = match.groups()
        for part in ranges.split(","):
            low, _, high = part.partition("-")
            if not low.isdigit() or (high and not high.isdigit()):
                raise ValueError(f"bad host range {part!r} in {text!r}")
            for number in range(int(low), int(high or low) + 1):
                # the rest may hold another bracket (rack[1-2]-node[1-3])
                names += expand_hostlist(f"{prefix}{number:0{len(low)}d}{rest}")
    return names


def compress_hostlist(names: Sequence[str]) -> str:
    """Names as one Slurm host list, in the given order (the inverse of expand_hostlist):
    sb1 sb2 sb4 -> "sb[1-2,4]", gpu01 gpu02 login1 -> "gpu[01-02],login1"; "" for none."""
    groups: list[tuple[str, list[str]]] = []  # (prefix, numbers as written), consecutive names
    for name in names:
        match = re.fullmatch(r"(.*?)(\d+)", name)
        prefix, digits = (match.group(1), match.group(2)) if match else (name, "")
        if digits and groups and groups[-1][0] == prefix and groups[-1][1]:
            groups[-1][1].append(digits)
        else:
            groups.append((prefix, [digits] if digits else []))
    items = []
    for prefix, numbers in groups:
        if len(numbers) <= 1:
            items.append(prefix + (numbers[0] if numbers else ""))
            continue
        ranges: list[list[str]] = []
        for digits in numbers:
            last = ranges[-1][-1] if ranges else None
            if last is not None and int(digits) == int(last) + 1 and _same_width(last, digits):
                ranges[-1] = [ranges[-1][0], digits]
            else:
                ranges.append([digits])
        items.append(f"{prefix}[{','.join('-'.join(r) for r in ranges)}]")
    return ",".join(items)


def _same_width(a: str, b: str) -> bool:
    """Whether a and b+1 can share one range: equal length, or neither zero-padded."""
    return len(a) == len(b) or not (a.startswith("0") or b.startswith("0"))


def expand_counts(text: str) -> list[int]:
    """Slurm's per-node counts: "2(x3),1" -> [2, 2, 2, 1]."""
    counts: list[int] = []
    for item in _split_top(text):
        match = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", item)
        if not match:
            raise ValueError(f"bad count {item!r} in {text!r}")
        counts += [int(match.group(1))] * int(match.group(2) or 1)
    return counts


def _leading_int(text: str | None) -> int | None:
    """"8", "a100:8", "gpu:a100:8" -> 8 (the count is the last field)."""
    if not text:
        return None
    last = text.split(",")[0].rsplit(":", 1)[-1]
    return int(last) if last.isdigit() else None


@dataclass(frozen=True)
class Placement:
    """Where one run goes: its nodes, tasks per node, CPUs per task and GPUs per node."""

    nodes: tuple[str, ...]
    tasks_per_node: int
    cpus_per_task: int
    gpus_per_node: int = 0

    @property
    def tasks(self) -> int:
        return len(self.nodes) * self.tasks_per_node


@dataclass(frozen=True)
class Allocation:
    job_id: str
    nodes: tuple[str, ...]
    cpus_per_node: tuple[int, ...]
    gpus_per_node: int = 0
    ntasks: int | None = None  # the task count the job asked for (-n / --ntasks-per-node)
    tasks_per_node: int | None = None  # --ntasks-per-node, when the job gave it
    partition: str | None = None
    label: str | None = None  # how messages name it (default: "Slurm job ID (...)")

    def __post_init__(self):
        if len(self.cpus_per_node) != len(self.nodes):
            raise ValueError(f"{len(self.nodes)} nodes but CPU counts for "
                             f"{len(self.cpus_per_node)}")

    def describe(self) -> str:
        if self.label:
            return self.label
        cpus = sorted(set(self.cpus_per_node))
        cpu_text = "/".join(str(c) for c in cpus)
        gpus = f", {self.gpus_per_node} GPUs" if self.gpus_per_node else ""
        tasks = f", {self.ntasks} tasks" if self.ntasks else ""
        return (f"Slurm job {self.job_id} ({len(self.nodes)} node"
                f"{'s' if len(self.nodes) != 1 else ''} x {cpu_text} CPUs{gpus}{tasks})")

    def subset(self, nodes: Sequence[str]) -> Allocation:
        """The allocation cut to these of its nodes, in this order (what vetting left); each
        node keeps its CPUs and its share of the job's tasks."""
        unknown = [n for n in nodes if n not in self.nodes]
        if unknown or not nodes:
            raise ValueError(f"nodes {unknown or list(nodes)} are not a part of {self.describe()}")
        share = self.tasks_per_node or (-(-self.ntasks // len(self.nodes)) if self.ntasks else None)
        return replace(self, nodes=tuple(nodes),
                       cpus_per_node=tuple(self.cpus_per_node[self.nodes.index(n)] for n in nodes),
                       ntasks=share * len(nodes) if share else None,
                       label=self.label or f"the {len(nodes)} usable node"
                       f"{'s' if len(nodes) != 1 else ''} ({compress_hostlist(nodes)}) of "
                       f"{self.describe()}")

    def slots_per_node(self, device: str) -> int:
        """Workers one node takes before a run spills onto the next."""
        if device == "cuda":
            return self.gpus_per_node
        if self.tasks_per_node:
            return self.tasks_per_node
        if self.ntasks:
            return max(1, -(-self.ntasks // len(self.nodes)))
        return min(self.cpus_per_node)

    def place(self, world: int, device: str, threads: int | None = None,
              max_per_node: int | None = None) -> Placement:
        """The run's placement, or a UserError (one line) when the allocation cannot hold it.

        threads: CPUs per worker when given (--threads-per-worker), else the shared policy
        max(1, CPUs on the node // workers on the node) over the allocated CPUs. max_per_node:
        at most this many workers on a node (vetting's probes: one per node).
        """
        where = self.describe()
        slots = self.slots_per_node(device)
        if max_per_node is not None:
            slots = min(slots, max_per_node)
        if device == "cuda" and slots < 1:
            raise UserError(f"workers: a CUDA run needs GPUs and {where} has none; ask salloc/"
                            "sbatch for --gpus-per-node")
        if self.ntasks and world > self.ntasks:
            raise UserError(f"workers: {world} workers need {world} tasks, {where} has "
                            f"{self.ntasks}")
        count = math.ceil(world / slots)
        unit = "GPU" if device == "cuda" else "task"
        if count > len(self.nodes):
            raise UserError(f"workers: {world} workers need {count} nodes of {slots} (one per "
                            f"{unit}), {where} has {len(self.nodes)}")
        if world % count:
            raise UserError(f"workers: {world} workers do not split evenly over the {count} "
                            f"nodes they need ({slots} per node in {where}); use a multiple "
                            f"of {count}")
        per_node = world // count
        nodes = self.nodes[:count]
        cpus = min(self.cpus_per_node[:count])
        cpus_per_task = threads if threads is not None else max(1, cpus // per_node)
        if per_node * cpus_per_task > cpus:
            raise UserError(f"threads_per_worker: {per_node} workers x {cpus_per_task} threads "
                            f"need {per_node * cpus_per_task} CPUs per node, {where} has {cpus}")
        gpus = per_node if device == "cuda" else 0
        return Placement(tuple(nodes), per_node, cpus_per_task, gpus)


def _int_var(environ: Mapping[str, str], *names: str) -> int | None:
    for name in names:
        value = environ.get(name, "")
        if value.strip().isdigit():
            return int(value)
    return None


def _gpus_from_scontrol(job_id: str, nodes: int) -> int:
    """GPUs per node from the job's allocated TRES (salloc's shell has no SLURM_GPUS_ON_NODE)."""
    try:
        proc = subprocess.run(["scontrol", "show", "job", "-o", job_id], capture_output=True,
                              text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    match = re.search(r"AllocTRES=\S*?gres/gpu=(\d+)", proc.stdout)
    return int(match.group(1)) // max(1, nodes) if match else 0


def from_env(environ: Mapping[str, str] | None = None, ask_scontrol: bool = True) -> Allocation:
    """The allocation this process runs in, from salloc's or sbatch's SLURM_* variables."""
    environ = os.environ if environ is None else environ
    job_id = environ.get(JOB_VAR) or environ.get("SLURM_JOBID")
    if not job_id:
        raise UserError(OUTSIDE)
    nodelist = environ.get("SLURM_JOB_NODELIST") or environ.get("SLURM_NODELIST")
    if not nodelist:
        raise UserError(f"launcher: Slurm job {job_id} gives no node list (SLURM_JOB_NODELIST)")
    nodes = expand_hostlist(nodelist)
    cpus_text = environ.get("SLURM_JOB_CPUS_PER_NODE")
    cpus = expand_counts(cpus_text) if cpus_text else []
    if len(cpus) != len(nodes):
        on_node = _int_var(environ, "SLURM_CPUS_ON_NODE") or os.cpu_count() or 1
        cpus = [cpus[0] if cpus else on_node] * len(nodes)
    gpus = _int_var(environ, "SLURM_GPUS_ON_NODE")
    if gpus is None:
        gpus = _leading_int(environ.get("SLURM_GPUS_PER_NODE"))
    if gpus is None and environ.get("SLURM_JOB_GPUS"):
        gpus = len(environ["SLURM_JOB_GPUS"].split(","))
    if gpus is None:
        gpus = _gpus_from_scontrol(job_id, len(nodes)) if ask_scontrol else 0
    return Allocation(job_id=job_id, nodes=tuple(nodes), cpus_per_node=tuple(cpus),
                      gpus_per_node=gpus, ntasks=_int_var(environ, "SLURM_NTASKS", "SLURM_NPROCS"),
                      tasks_per_node=_int_var(environ, "SLURM_NTASKS_PER_NODE"),
                      partition=environ.get("SLURM_JOB_PARTITION"))


_CURRENT: dict[str, Allocation] = {}


def current() -> Allocation:
    """from_env(), read once per job (planning asks for every run)."""
    job_id = os.environ.get(JOB_VAR) or os.environ.get("SLURM_JOBID") or ""
    if job_id not in _CURRENT:
        _CURRENT[job_id] = from_env()
    return _CURRENT[job_id]
