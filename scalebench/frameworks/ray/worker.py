"""Inside one Ray Train worker: the shared timed loop with Ray's process group and model wrap.

Ray Train has already formed the torch.distributed group (gloo on CPU, nccl on GPU) when
train_loop starts. The loop is worker_io.execute, exactly as DDP workers run it; the only
differences are Ray's: prepare_model does the DDP wrap and Ray picks the GPU.
"""

from __future__ import annotations

import traceback
from typing import Any

from scalebench.frameworks import worker_io
from scalebench.frameworks.torch_dist import TorchDistComm


class WorkerError(RuntimeError):
    """A worker's exception as (one-line summary, traceback text).

    Ray carries a worker's exception back to the driver without its traceback; this keeps it,
    and pickles without needing the original exception's class on the driver.
    """

    def __init__(self, summary: str, traceback_text: str):
        super().__init__(summary, traceback_text)

    @property
    def summary(self) -> str:
        return self.args[0]

    @property
    def traceback_text(self) -> str:
        return self.args[1]

    def __str__(self) -> str:
        return self.summary


class RayTorchComm(TorchDistComm):
    """TorchDistComm over the group Ray formed; wrap with ray.train.torch.prepare_model."""

    def __init__(self, backend: str, options=None):
        import ray.train

        super().__init__(backend, init=False,
                         bucket_cap_mb=getattr(options, "bucket_cap_mb", None),
                         gradient_as_bucket_view=getattr(options, "gradient_as_bucket_view", False))
        self._context = ray.train.get_context()
        self.local_rank = self._context.get_local_rank()

    def topology(self) -> dict[str, Any]:
        import ray

        ctx = self._context
        return {"node_id": ray.get_runtime_context().get_node_id(),
                "node_rank": ctx.get_node_rank(), "local_rank": ctx.get_local_rank(),
                "local_world_size": ctx.get_local_world_size()}

    def wrap(self, model, optimizer):
        from ray.train.torch import prepare_model

        # measure.run has already moved the model to this worker's device, and calls wrap only
        # with more than one worker (or to time the wrapper); the DDP arguments are the same
        # as DDP's own (no buffer broadcast).
        return prepare_model(model, move_to_device=False, parallel_strategy="ddp",
                             parallel_strategy_kwargs=self.ddp_kwargs()), optimizer

    def device_index(self) -> int:
        from ray.train.torch import get_device

        # Ray sets CUDA_VISIBLE_DEVICES per worker; its device is the right index, not LOCAL_RANK.
        device = get_device()
        return device.index if device.type == "cuda" and device.index is not None else self.local_rank


def summarize(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:500]


def train_loop(config: dict) -> dict | None:
    """train_loop_per_worker: run the job; rank 0 returns the result and where workers ran.

    The node ids are gathered here, before the task, so every task kind (train, allreduce)
    reports how many nodes its workers landed on.
    """
    import ray

    try:
        job = worker_io.parse_job(config["job"])
        worker_io.load_modules(job)
        comm = RayTorchComm(job.launch.backend, job.launch.options)
        node_ids = comm.all_gather(ray.get_runtime_context().get_node_id())
        result = worker_io.execute(job, comm)
    except Exception as exc:  # noqa: BLE001 - travels to the driver with its traceback
        raise WorkerError(summarize(exc), traceback.format_exc()) from None
    if comm.rank != 0:
        return None
    return {"result": result, "node_ids": node_ids}
