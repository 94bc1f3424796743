"""One DDP worker: python -m scalebench.frameworks.ddp.worker RUN_DIR [--slurm-master HOST:PORT].

Started by torchrun (which sets RANK, WORLD_SIZE, ...), or as one task of a Slurm step: then
--slurm-master names the store's address and Slurm's task variables give the rest.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from scalebench.frameworks.torch_dist import TorchDistComm
from scalebench.frameworks.worker_io import run_worker


def main(argv: list[str]) -> int:
    run_dir = Path(argv[1])
    if len(argv) > 3 and argv[2] == "--slurm-master":
        from scalebench.slurm.task import torch_env

        host, _, port = argv[3].rpartition(":")
        os.environ.update(torch_env(os.environ, host, int(port)))
    rank = int(os.environ.get("RANK", "0"))

    def make_comm(launch):
        return TorchDistComm(launch.backend, bucket_cap_mb=launch.options.bucket_cap_mb,
                             gradient_as_bucket_view=launch.options.gradient_as_bucket_view)

    code = run_worker(run_dir, make_comm, rank)
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
