"""The small interface the shared timed loop needs from a framework, inside one worker.

A framework adapter may differ only in: process-group setup, how model and optimizer are
wrapped for gradient averaging, and how values are gathered to rank 0 (the fair-comparison
rule, docs/ARCHITECTURE.md).
"""

from __future__ import annotations

from typing import Any


class Comm:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    def barrier(self) -> None:
        raise NotImplementedError

    def all_gather(self, obj: Any) -> list[Any]:
        """Every rank's obj, in rank order, on every rank (small picklable values only)."""
        raise NotImplementedError

    def allreduce(self, tensor) -> None:
        """Sum tensor in place across ranks with the framework's own collective."""
        raise NotImplementedError

    def wrap(self, model, optimizer):
        """Return (model, optimizer) set up to average gradients across ranks."""
        raise NotImplementedError

    def configure(self, settings: dict[str, Any]) -> None:
        """Step options for the next wrap (a tuning candidate). A framework that reads its
        options only when it starts cannot change them inside a launch."""
        if settings:
            raise NotImplementedError(f"{type(self).__name__} cannot change {sorted(settings)} "
                                      "inside a launch")

    def read_back(self, model) -> dict[str, Any]:
        """The step options the framework really uses for this wrapped model, as it reports
        them (recorded beside the settings asked for)."""
        return {}

    def optimizer_step(self, optimizer, scaler) -> None:
        """Apply one update; scaler is a GradScaler for fp16 or None."""
        if scaler is None:
            optimizer.step()
        else:
            scaler.step(optimizer)
            scaler.update()

    def topology(self) -> dict[str, Any]:
        """How the framework itself sees the job (e.g. nodes), recorded per rank."""
        return {}

    def device_index(self) -> int:
        """Which local accelerator this rank uses (one per local rank)."""
        return self.local_rank


class SingleProcessComm(Comm):
    """One worker, no framework: used by benchmarks and unit tests of the loop."""

    def barrier(self) -> None:
        pass

    def all_gather(self, obj: Any) -> list[Any]:
        return [obj]

    def allreduce(self, tensor) -> None:
        pass

    def wrap(self, model, optimizer):
        return model, optimizer
