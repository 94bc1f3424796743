"""One Horovod worker, started by horovodrun:
python -m scalebench.frameworks.horovod.worker RUN_DIR."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from scalebench.frameworks.horovod import options as hvd_options
from scalebench.frameworks.worker_io import run_worker
from scalebench.worker.comm import Comm


class HorovodComm(Comm):
    def __init__(self, fp16_allreduce: bool = False):
        import horovod.torch as hvd

        hvd.init()
        self._hvd = hvd
        self.rank = hvd.rank()
        self.world_size = hvd.size()
        self.local_rank = hvd.local_rank()
        self.compression = hvd.Compression.fp16 if fp16_allreduce else hvd.Compression.none

    def topology(self) -> dict[str, Any]:
        hvd = self._hvd
        return {"local_rank": hvd.local_rank(), "local_size": hvd.local_size(),
                "cross_rank": hvd.cross_rank(), "cross_size": hvd.cross_size()}

    def read_back(self, model) -> dict[str, Any]:
        """Horovod has no getter for its knobs: what its hvd.init() read from the environment
        (which horovodrun's --fusion-threshold-mb, --cycle-time-ms, ... set) is what it uses."""
        seen = {k: os.environ.get(v) for k, v in hvd_options.VARIABLES.items()}
        out: dict[str, Any] = {"source": "environment read by hvd.init()"}
        if seen["fusion_threshold_mb"] is not None:
            out["fusion_threshold_mb"] = int(seen["fusion_threshold_mb"]) / 2**20
        if seen["cycle_time_ms"] is not None:
            out["cycle_time_ms"] = float(seen["cycle_time_ms"])
        if seen["cache_capacity"] is not None:
            out["cache_capacity"] = int(seen["cache_capacity"])
        if seen["hierarchical_allreduce"] is not None:
            out["hierarchical_allreduce"] = seen["hierarchical_allreduce"] not in ("0", "")
        return out

    def barrier(self) -> None:
        self._hvd.barrier()

    def all_gather(self, obj: Any) -> list[Any]:
        return self._hvd.allgather_object(obj)

    def allreduce(self, tensor) -> None:
        # A stable name per tensor shape: every call after the first hits Horovod's response
        # cache, as training's named gradients do (unnamed calls each negotiate anew).
        name = f"scalebench.allreduce.{tensor.dtype}.{tensor.numel()}"
        self._hvd.allreduce_(tensor, op=self._hvd.Sum, name=name)

    def wrap(self, model, optimizer):
        hvd = self._hvd
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                             compression=self.compression, op=hvd.Average)
        hvd.broadcast_optimizer_state(optimizer, root_rank=0)
        return model, optimizer

    def optimizer_step(self, optimizer, scaler) -> None:
        if scaler is None:
            optimizer.step()
            return
        # Horovod's recipe for a GradScaler: finish the allreduce, unscale, step without a
        # second synchronisation.
        optimizer.synchronize()
        scaler.unscale_(optimizer)
        with optimizer.skip_synchronize():
            scaler.step(optimizer)
        scaler.update()


def main(argv: list[str]) -> int:
    run_dir = Path(argv[1])
    rank = int(os.environ.get("HOROVOD_RANK", "0"))

    def make_comm(launch):
        return HorovodComm(fp16_allreduce=launch.options.fp16_allreduce)

    code = run_worker(run_dir, make_comm, rank)
    try:
        import horovod.torch as hvd

        hvd.shutdown()
    except Exception:  # noqa: BLE001 - shutting down after a failure must not mask it
        pass
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
