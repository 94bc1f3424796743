"""Native PyTorch DDP, launched with torchrun (standalone, or static rendezvous across nodes)."""

from __future__ import annotations

import sys
from pathlib import Path

from scalebench import config
from scalebench.config import RunSpec, SweepSpec
from scalebench.envinfo import package_version
from scalebench.frameworks import process
from scalebench.frameworks.base import Framework, LaunchOutcome


def torchrun_command(spec: RunSpec, run_dir: Path) -> list[str]:
    opts = spec.options
    nnodes = opts.get("nnodes", 1)
    cmd = [sys.executable, "-m", "torch.distributed.run",
           "--nproc-per-node", str(spec.world_size // nnodes), "--max-restarts", "0"]
    if nnodes == 1:
        cmd.append("--standalone")
    else:
        # Static rendezvous: node 0 hosts the store and owns global rank 0, so the node that
        # writes the records is known in advance.
        cmd += ["--nnodes", str(nnodes), "--node-rank", str(opts["node_rank"]),
                "--rdzv-backend", "static", "--rdzv-endpoint", opts["rdzv_endpoint"]]
    cmd += ["-m", "scalebench.frameworks.ddp_worker", str(run_dir)]
    return cmd


class DDP(Framework):
    name = "ddp"
    options_type = config.DDPOptions

    def available(self) -> tuple[bool, str]:
        version = package_version("torch")
        if version is None:
            return False, "torch is not installed; run `make setup`"
        return True, f"torch {version}"

    def planned_nodes(self, sweep: SweepSpec, world_size: int) -> int:
        return sweep.ddp.nnodes

    def records_here(self, sweep: SweepSpec) -> bool:
        return sweep.ddp.node_rank == 0

    def launch(self, spec: RunSpec, run_dir: Path) -> LaunchOutcome:
        process.write_spec(run_dir, spec.to_json())
        proc = process.run_isolated(torchrun_command(spec, run_dir),
                                    process.base_env(spec.threads_per_worker), spec.timeout, run_dir)
        if spec.options.get("node_rank", 0) != 0 and proc.returncode == 0 \
                and not process.worker_errors(run_dir):
            # Global rank 0 lives on node 0, which writes the result; this node's part is done.
            return LaunchOutcome("ok", {}, launch_unix=proc.launch_unix)
        return process.outcome_from_files(run_dir, proc, "torchrun", spec.timeout)


FRAMEWORK = DDP()
