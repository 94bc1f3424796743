"""Resolve the requested device and check the precision it can run, before anything launches."""

from __future__ import annotations

from dataclasses import dataclass

from scalebench.hardware.envinfo import cpu_cores
from scalebench.spec.errors import UserError


@dataclass(frozen=True)
class DeviceInfo:
    device: str  # cpu or cuda
    backend: str  # gloo or nccl
    accelerators: int  # GPUs on this node (0 on CPU)
    cores: int

    def default_max_workers(self) -> int:
        return self.accelerators if self.device == "cuda" else self.cores


def resolve(requested: str) -> DeviceInfo:
    import torch

    has_cuda = torch.cuda.is_available()
    if requested == "cuda" and not has_cuda:
        raise UserError("device: cuda requested but no CUDA device is visible; allowed here: auto, cpu")
    if requested == "cuda" or (requested == "auto" and has_cuda):
        return DeviceInfo("cuda", "nccl", torch.cuda.device_count(), cpu_cores())
    return DeviceInfo("cpu", "gloo", 0, cpu_cores())


def check_precision(info: DeviceInfo, precision: str) -> None:
    import torch

    if precision == "bf16" and info.device == "cuda" and not torch.cuda.is_bf16_supported():
        raise UserError(
            f"precision: bf16 is not supported on {torch.cuda.get_device_name(0)}; allowed: fp32, fp16"
        )
    if precision == "fp16" and info.device == "cuda":
        major, _ = torch.cuda.get_device_capability(0)
        if major < 6:
            raise UserError("precision: fp16 needs compute capability >= 6.0; allowed: fp32")


def threads_per_worker(info: DeviceInfo, workers_on_node: int, override: int | None) -> int:
    """max(1, cores // workers), identical for every framework (docs/ARCHITECTURE.md)."""
    if override is not None:
        return override
    return max(1, info.cores // max(1, workers_on_node))
