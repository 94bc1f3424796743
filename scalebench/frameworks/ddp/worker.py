"""One DDP worker, started by torchrun: python -m scalebench.frameworks.ddp.worker RUN_DIR."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from scalebench.frameworks.torch_dist import TorchDistComm
from scalebench.frameworks.worker_io import run_worker


def main(argv: list[str]) -> int:
    run_dir = Path(argv[1])
    rank = int(os.environ.get("RANK", "0"))

    def make_comm(launch):
        return TorchDistComm(launch.backend, bucket_cap_mb=launch.options.bucket_cap_mb)

    code = run_worker(run_dir, make_comm, rank)
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
