"""The sbatch file of `scalebench slurm-script`: one job on whole nodes that runs a workload's
sweep as job steps (--launcher slurm), then `scalebench report` on its results."""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from scalebench.slurm.allocation import Allocation
from scalebench.spec.errors import UserError

_TIME = re.compile(r"\d+|\d+:\d{2}|\d+:\d{2}:\d{2}|\d+-\d+|\d+-\d+:\d{2}|\d+-\d+:\d{2}:\d{2}")
_NAME = re.compile(r"[A-Za-z0-9._-]+")


def check_time(value: str) -> str:
    if not _TIME.fullmatch(value):
        raise UserError(f"time: expected MINUTES, MINUTES:SECONDS, HOURS:MINUTES:SECONDS, "
                        f"DAYS-HOURS or DAYS-HOURS:MINUTES:SECONDS, got {value!r}")
    return value


def check_name(name: str, value: str) -> str:
    if not _NAME.fullmatch(value):
        raise UserError(f"{name}: letters, digits, '.', '_' and '-' only, got {value!r}")
    return value


def default_workers(nodes: int, per_node: int) -> tuple[int, ...]:
    """1, 2, 4, ... up to one node's workers, then whole nodes: 2 nodes x 8 -> 1,2,4,8,16."""
    counts, w = [], 1
    while w < per_node:
        counts.append(w)
        w *= 2
    return tuple(counts) + tuple(per_node * n for n in range(1, nodes + 1))


def check_fits(workers: Sequence[int], nodes: int, gpus_per_node: int,
               ntasks_per_node: int | None, threads: int | None) -> None:
    """The same fits-check the sweep makes inside the job, against the job asked for."""
    per_node = (f" x {gpus_per_node} GPUs" if gpus_per_node else
                f" x {ntasks_per_node} tasks" if ntasks_per_node else "")
    planned = Allocation(job_id="", nodes=tuple(f"node{i}" for i in range(1, nodes + 1)),
                         cpus_per_node=(2**20,) * nodes, gpus_per_node=gpus_per_node,
                         tasks_per_node=ntasks_per_node,
                         ntasks=ntasks_per_node * nodes if ntasks_per_node else None,
                         label=f"the job ({nodes} node{'s' if nodes != 1 else ''}{per_node})")
    device = "cuda" if gpus_per_node else "cpu"
    for w in workers:
        planned.place(w, device, threads)


@dataclass(frozen=True)
class BatchJob:
    workload: Path
    out: Path
    nodes: int
    python: str
    workdir: Path
    gpus_per_node: int = 0
    ntasks_per_node: int | None = None
    partition: str | None = None
    time: str | None = None
    account: str | None = None
    job_name: str = "scalebench"
    exclusive: bool = True
    sweep_args: tuple[str, ...] = field(default_factory=tuple)

    def render(self) -> str:
        tasks = self.gpus_per_node or self.ntasks_per_node
        directives = [f"--job-name={self.job_name}", f"--nodes={self.nodes}"]
        if tasks:
            directives.append(f"--ntasks-per-node={tasks}")
        if self.gpus_per_node:
            directives.append(f"--gpus-per-node={self.gpus_per_node}")
        if self.partition:
            directives.append(f"--partition={self.partition}")
        if self.account:
            directives.append(f"--account={self.account}")
        if self.time:
            directives.append(f"--time={self.time}")
        if self.exclusive:
            directives.append("--exclusive")
        directives.append(f"--output={self.out / 'slurm-%j.out'}")
        q = shlex.quote
        # --no-report: the next line writes the report, after a failed sweep too (the sweep's
        # own report would be written and then overwritten, seconds of plotting twice)
        sweep = " ".join(q(a) for a in ["sweep", str(self.workload), "--launcher", "slurm",
                                        "--out", str(self.out), "--no-report", *self.sweep_args])
        lines = [
            "#!/bin/bash",
            "# Written by `scalebench slurm-script`: the sweep runs every run as a job step on",
            "# the allocated nodes (--launcher slurm), then `scalebench report` writes the report,",
            "# also after a failed or interrupted sweep. Submit with: sbatch THIS_FILE",
            *(f"#SBATCH {d}" for d in directives),
            "set -uo pipefail",
            f"cd {q(str(self.workdir))}",
            "export PYTHONUNBUFFERED=1",
            f"PY={q(self.python)}",
            'echo "scalebench: Slurm job $SLURM_JOB_ID on $SLURM_JOB_NODELIST"',
            "status=0",
            f'"$PY" -m scalebench {sweep} || status=$?',
            f'"$PY" -m scalebench report {q(str(self.out))} || {{ rc=$?; '
            '[ "$status" -ne 0 ] || status=$rc; }',
            'exit "$status"',
        ]
        return "\n".join(lines) + "\n"
