"""The launch plan of a sweep on Kubernetes: one launch per framework x node count, each a
complete `scalebench sweep` of its worker counts inside the cluster.

Pure: the workload's values and what the user asked of the cluster (Target) in, launches out;
every bad value is one UserError naming the field.
"""

from __future__ import annotations

import dataclasses
import math
import re
import string
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scalebench.frameworks.horovod.launcher import knob_env
from scalebench.slurm.script import default_workers
from scalebench.spec import config
from scalebench.spec.config import SweepSpec
from scalebench.spec.errors import UserError

RESULTS_MOUNT = "/results"  # the results volume, at the same path in every pod
MPI_HOSTFILE = "/etc/mpi/hostfile"  # where MPI Operator v2 mounts the hostfile it writes
WORKLOAD_FILE = "/tmp/scalebench-workload.toml"  # written in the pod from $SCALEBENCH_WORKLOAD
STARTUP_SECONDS = 900  # added to a launch's deadline: image pulls, pods and the Ray cluster
DDP_KINDS = ("trainjob", "pytorchjob")
# The environment each DDP operator sets in its pods: (node rank, rendezvous host, port).
# Trainer v2's torch plugin sets PET_*; PyTorchJob (v1) sets RANK (the pod's index: Master 0,
# Worker i+1), MASTER_ADDR and MASTER_PORT.
DDP_ENV = {"trainjob": ("PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT"),
           "pytorchjob": ("RANK", "MASTER_ADDR", "MASTER_PORT")}
# Values of those variables for checking a pod's command line before it exists.
SAMPLE_ENV = {"PET_NODE_RANK": "0", "RANK": "0", "PET_MASTER_ADDR": "node-0",
              "MASTER_ADDR": "node-0", "PET_MASTER_PORT": "29400", "MASTER_PORT": "29400"}

_NAME = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")  # RFC 1035 label
NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")  # RFC 1123 label
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


@dataclass(frozen=True)
class Target:
    """What the user asks of the cluster."""

    image: str
    gpus_per_node: int
    nodes: tuple[int, ...]
    run_name: str
    sweep_id: str
    namespace: str = "default"
    results_pvc: str | None = None  # a ReadWriteMany claim; None: an emptyDir per pod
    ddp_kind: str = "trainjob"
    ttl_seconds: int = 3600  # how long a finished job (its pods, its logs) is kept

    def __post_init__(self):
        check_image(self.image)
        if self.gpus_per_node < 1:
            raise UserError(f"gpus_per_node: at least 1 (one worker per GPU), got {self.gpus_per_node}")
        if not self.nodes or any(n < 1 for n in self.nodes):
            raise UserError(f"nodes: a comma list of node counts >= 1, got {self.nodes}")
        check_label("run_name", self.run_name, _NAME, "an RFC 1035 label (lower-case letters, "
                    "digits and '-', starting with a letter)")
        check_label("namespace", self.namespace, NAMESPACE, "an RFC 1123 label (lower-case "
                    "letters, digits and '-')")
        if self.results_pvc is not None:
            check_label("results_pvc", self.results_pvc, re.compile(
                r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"),
                "a claim name (lower-case letters, digits, '-' and '.')", limit=253)
        if self.ddp_kind not in DDP_KINDS:
            raise UserError(f"ddp_kind: one of {', '.join(DDP_KINDS)}, got {self.ddp_kind!r}")


@dataclass(frozen=True)
class Launch:
    """One job: a framework on a number of nodes, running its worker counts as one sweep."""

    framework: str
    nodes: int
    workers: tuple[int, ...]
    name: str  # the job's name (metadata.name)
    out: str  # the sweep's results folder inside the pods
    sweep_args: tuple[str, ...]  # after `scalebench sweep WORKLOAD`; ${VAR} expands in the pod
    deadline_seconds: int  # activeDeadlineSeconds: every run at its timeout, plus start-up
    rank_var: str | None = None  # the variable that is 0 in the pod that writes the records
    env: tuple[tuple[str, str], ...] = ()  # more environment of the pod that runs the sweep

    def sample_args(self) -> list[str]:
        """sweep_args with the operators' variables replaced by sample values."""
        return [string.Template(a).substitute(SAMPLE_ENV) for a in self.sweep_args]


@dataclass(frozen=True)
class Plan:
    target: Target
    workload_text: str
    launches: tuple[Launch, ...]


def check_label(field: str, value: str, pattern: re.Pattern, what: str, limit: int = 63) -> str:
    if not isinstance(value, str) or len(value) > limit or not pattern.fullmatch(value):
        raise UserError(f"{field}: {value!r} is not {what}, at most {limit} characters")
    return value


def check_image(image: str) -> str:
    """An image reference pinned by a tag or a digest (NAME:TAG, NAME@sha256:HEX)."""
    name, at, digest = image.partition("@")
    if at:
        if not _DIGEST.fullmatch(digest):
            raise UserError(f"image: digest must be sha256: and 64 hex digits, got {image!r}")
        return image
    last = name.rsplit("/", 1)[-1]
    if ":" not in last or not last.split(":", 1)[1] or not last.split(":", 1)[0] or " " in image:
        raise UserError(f"image: give a tag or a digest (NAME:TAG or NAME@sha256:...), so every "
                        f"pod runs the same build; got {image!r}")
    return image


def default_run_name(workload_name: str) -> str:
    """A workload's name as a Kubernetes name: "horovod_paper" -> "horovod-paper"."""
    name = re.sub(r"[^a-z0-9-]+", "-", workload_name.lower()).strip("-")
    name = name if name and name[0].isalpha() else f"sb-{name}".strip("-")
    return name[:40].rstrip("-")


def job_name(run_name: str, framework: str, nodes: int) -> str:
    name = f"{run_name}-{framework}-{nodes}n"
    if len(name) > 63:
        room = 63 - len(name) + len(run_name)
        raise UserError(f"run_name: {run_name!r} makes the job name {name!r} {len(name)} "
                        f"characters; Kubernetes allows 63: use at most {room}")
    return name


def pod_values(values: dict[str, Any]) -> dict[str, Any]:
    """The workload's values as the pods' sweeps see them (each runs its framework locally)."""
    return {**values, "launcher": "local", "device": "cuda"}


def worker_counts(spec: SweepSpec, target: Target) -> dict[int, tuple[int, ...]]:
    """Node count -> the worker counts that run on that many nodes. One node runs up to its
    GPUs; a multi-node launch fills whole nodes (slotsPerWorker, numProcPerNode are per job)."""
    gpus = target.gpus_per_node
    if spec.workers is None:
        return {n: default_workers(1, gpus) if n == 1 else (n * gpus,) for n in target.nodes}
    counts: dict[int, list[int]] = {n: [] for n in target.nodes}
    for w in spec.workers:
        need = math.ceil(w / gpus)
        if need > 1 and w != need * gpus:
            raise UserError(f"workers: {w} workers need {need} nodes of {gpus} GPUs and do not "
                            f"fill them; a multi-node launch runs {gpus} per node: use "
                            f"{need * gpus} (or {(need - 1) * gpus})")
        if need not in counts:
            raise UserError(f"nodes: {w} workers need {need} node{'s' if need > 1 else ''} of "
                            f"{gpus} GPUs; add {need} to --nodes or drop {w} from workers")
        counts[need].append(w)
    empty = [n for n, ws in counts.items() if not ws]
    if empty:
        raise UserError(f"nodes: no worker count of the sweep runs on {empty[0]} nodes of {gpus} "
                        f"GPUs (workers {', '.join(map(str, spec.workers))}); drop it or add "
                        f"{empty[0] * gpus} to workers")
    return {n: tuple(ws) for n, ws in counts.items()}


def runs_per_worker_count(spec: SweepSpec) -> int:
    return len(spec.models) * len(spec.precision) * spec.repeats * (1 + len(spec.tuned))


def plan(values: dict[str, Any], workload_text: str, target: Target) -> Plan:
    """The launches of a workload's sweep (values as config.load_workload reads them)."""
    spec = config.build_spec(pod_values(values))
    by_nodes = worker_counts(spec, target)
    seed = spec.seed if spec.seed is not None else zlib.crc32(target.sweep_id.encode()) % 2**31
    launches = []
    for framework in spec.frameworks:
        for nodes in sorted(set(target.nodes)):
            name = job_name(target.run_name, framework, nodes)
            workers = by_nodes[nodes]
            out = f"{RESULTS_MOUNT}/{target.run_name}/{name}"
            out_arg, rank_var, env = out, None, ()
            if framework == "ddp" and nodes > 1:
                # every node runs the sweep; on a shared volume each needs a folder of its own
                # (node 0's holds the records)
                rank_var = DDP_ENV[target.ddp_kind][0]
                out, out_arg = f"{out}/node-0", f"{out}/node-${{{rank_var}}}"
            args = ["--frameworks", framework, "--workers", ",".join(map(str, workers)),
                    "--device", "cuda", "--launcher", "local", "--out", out_arg]
            if framework in ("horovod", "ray") and nodes > 1 and not target.results_pvc:
                why = ("every worker reads its run from it" if framework == "horovod"
                       else "Ray Train keeps its run folder there")
                raise UserError(f"results_pvc: {framework} on {nodes} nodes needs a shared volume "
                                f"(a ReadWriteMany claim): {why}; give --results-pvc NAME or run "
                                "it on 1 node")
            if framework == "horovod":
                args += ["--hostfile", MPI_HOSTFILE]
                options = dataclasses.replace(spec.options("horovod"), timeline=False)
                env = tuple(sorted(knob_env(options, Path(out)).items()))
            elif framework == "ray":
                args += ["--ray-address", "auto"]
            elif framework == "ddp" and nodes > 1:
                rank, addr, port = DDP_ENV[target.ddp_kind]
                # Every node runs the same sweep: the same order of runs needs the same seed.
                args += ["--nnodes", str(nodes), "--node-rank", f"${{{rank}}}",
                         "--rdzv-endpoint", f"${{{addr}}}:${{{port}}}", "--seed", str(seed)]
            runs = runs_per_worker_count(spec) * len(workers)
            if spec.with_allreduce:
                runs += sum(1 for w in workers if w >= 2)
            launches.append(Launch(framework, nodes, workers, name, out, tuple(args),
                                   int(runs * spec.timeout) + STARTUP_SECONDS, rank_var, env))
    return Plan(target, workload_text, tuple(launches))
