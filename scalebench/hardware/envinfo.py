"""The environment fingerprint every record carries (versions, hardware, commit, and the
node's topology: hardware/topology.py)."""

from __future__ import annotations

import functools
import os
import platform
import socket
import subprocess
from importlib import metadata
from pathlib import Path

from scalebench.hardware.testbed import RUNNER_CLASS_VARIABLE

PACKAGES = ("torch", "torchvision", "horovod", "ray", "numpy")
# Fields that make two results incomparable when they differ (compare warns on these).
HARDWARE_FIELDS = ("device_kind", "accelerator_model", "cpu_model", "cuda", "cudnn", "nccl",
                   "torch", "horovod", "ray")


def package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


@functools.cache
def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def git_commit() -> str | None:
    root = Path(__file__).resolve().parent.parent
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True, timeout=10).stdout.strip()
    return out.stdout.strip() + ("-dirty" if dirty else "")


@functools.cache
def gpu_driver() -> str | None:
    """The NVIDIA driver's version (NVML), None where it cannot be read."""
    from scalebench.hardware import energy

    nvml, _ = energy.load_nvml()
    if nvml is None:
        return None
    try:
        version = nvml.nvmlSystemGetDriverVersion()
    except Exception:  # noqa: BLE001 - an NVMLError: the driver is a fact we could not read
        return None
    return version.decode() if isinstance(version, bytes) else str(version)


@functools.cache
def torch_details() -> dict:
    import torch

    info = {
        "cuda": torch.version.cuda if torch.cuda.is_available() else None,
        "cuda_build": torch.version.cuda,
        "cudnn": None,
        "nccl": None,
        "gpus": 0,
        "accelerator_model": None,
    }
    if torch.cuda.is_available():
        info["cudnn"] = str(torch.backends.cudnn.version())
        try:
            info["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
        except Exception:  # noqa: BLE001 - NCCL missing is a fact to record, not an error
            info["nccl"] = None
        info["gpus"] = torch.cuda.device_count()
        info["accelerator_model"] = torch.cuda.get_device_name(0)
    return info


def collect(device: str | None = None, backend: str | None = None) -> dict:
    """The fingerprint of this machine. device/backend are the run's, when known."""
    env = {
        "python": platform.python_version(),
        **{name: package_version(name) for name in PACKAGES},
        "scalebench": package_version("scalebench"),
        "git_commit": git_commit(),
        "hostname": socket.gethostname(),
        "os": platform.platform(),
        "cpu_model": cpu_model(),
        "cpu_cores": cpu_cores(),
        **torch_details(),
    }
    from scalebench.hardware import topology

    env["topology"] = topology.collect()
    # the testbed's (hardware/testbed.py): the driver, and the runner's class from the CI's setup
    env["driver"] = gpu_driver() if env.get("gpus") else None
    env["runner_class"] = os.environ.get(RUNNER_CLASS_VARIABLE) or None
    if device is not None:
        env["device_kind"] = device if device == "cpu" else env["accelerator_model"]
    if backend is not None:
        env["backend"] = backend
    return env
