"""torchrun command, the Slurm step (one task per worker) and the DDP adapter."""

from __future__ import annotations

import sys
from pathlib import Path

from scalebench.frameworks import process
from scalebench.frameworks.base import Framework, LaunchOutcome
from scalebench.frameworks.ddp import options as ddp_options
from scalebench.hardware.envinfo import package_version
from scalebench.slurm import steps
from scalebench.spec.launch import Job

WORKER_MODULE = "scalebench.frameworks.ddp.worker"


def torchrun_command(job: Job, run_dir: Path) -> list[str]:
    opts: ddp_options.Options = job.launch.options
    cmd = [sys.executable, "-m", "torch.distributed.run",
           "--nproc-per-node", str(job.launch.world_size // opts.nnodes), "--max-restarts", "0"]
    if opts.nnodes == 1:
        cmd.append("--standalone")
    else:
        # Static rendezvous: node 0 hosts the store and owns global rank 0, so the node that
        # writes the records is known in advance.
        cmd += ["--nnodes", str(opts.nnodes), "--node-rank", str(opts.node_rank),
                "--rdzv-backend", "static", "--rdzv-endpoint", str(opts.rdzv_endpoint)]
    cmd += ["-m", WORKER_MODULE, str(run_dir)]
    return cmd


def slurm_launch(job: Job, run_dir: Path) -> LaunchOutcome:
    """One task per worker in one step; ranks, world size and the store's address (the step's
    first node, where rank 0 runs) come from Slurm's task variables (slurm/task.py)."""
    _, placement = steps.placement_for(job.launch)
    master = f"{steps.node_address(placement.nodes[0])}:{steps.free_port()}"
    cmd = [sys.executable, "-m", WORKER_MODULE, str(run_dir), "--slurm-master", master]
    return steps.launch_step(
        job, run_dir, placement, cmd, process.base_env(job.launch.threads_per_worker),
        lambda proc: process.outcome_from_files(run_dir, proc, "srun", job.launch.timeout))


def slurm_problem(options: ddp_options.Options) -> str | None:
    """Why these options cannot run as Slurm steps (None: they can)."""
    if options.nnodes > 1 or options.rdzv_endpoint:
        return ("ddp.nnodes: not used with launcher slurm (a run's nodes come from the "
                "allocation); drop nnodes, node_rank and rdzv_endpoint")
    return None


class DDP(Framework):
    name = "ddp"
    title = "DDP (torchrun)"
    options_type = ddp_options.Options
    table = ddp_options.TABLE
    flags = ddp_options.FLAGS
    step_options = ("bucket_cap_mb", "gradient_as_bucket_view")
    knobs = ddp_options.KNOBS
    bucket_option = "bucket_cap_mb"

    def check_options(self, options, workers) -> None:
        ddp_options.check(options, workers)

    def available(self) -> tuple[bool, str]:
        version = package_version("torch")
        if version is None:
            return False, "torch is not installed; run `make setup`"
        return True, f"torch {version}"

    def fixed_nodes(self, options) -> int:
        return options.nnodes

    def planned_nodes(self, options, world_size: int) -> int:
        return options.nnodes

    def records_here(self, options) -> bool:
        return options.node_rank == 0

    def slurm_problem(self, options) -> str | None:
        return slurm_problem(options)

    def launch(self, job: Job, run_dir: Path) -> LaunchOutcome:
        process.write_spec(run_dir, job.to_json())
        if job.launch.launcher == "slurm":
            return slurm_launch(job, run_dir)
        proc = process.run_isolated(torchrun_command(job, run_dir),
                                    process.base_env(job.launch.threads_per_worker),
                                    job.launch.timeout, run_dir)
        if job.launch.options.node_rank != 0 and proc.returncode == 0 \
                and not process.worker_errors(run_dir):
            # Global rank 0 lives on node 0, which writes the result; this node's part is done.
            return LaunchOutcome("ok", {}, launch_unix=proc.launch_unix)
        return process.outcome_from_files(run_dir, proc, "torchrun", job.launch.timeout)
