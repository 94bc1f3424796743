"""Native PyTorch DDP, launched with torchrun (standalone, or static rendezvous across nodes).

options.py: Options, the [ddp] table, flags, checks; launcher.py: the torchrun command and the
adapter; worker.py: the worker entry (its Comm is torch_dist.TorchDistComm).
"""

from scalebench.frameworks.ddp.launcher import DDP
from scalebench.frameworks.ddp.options import Options

FRAMEWORK = DDP()

__all__ = ["DDP", "FRAMEWORK", "Options"]
