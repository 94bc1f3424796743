"""A testbed: the class of machine a run measured on, defined once for every reader (the gate
pools only sweeps of the same testbed and shows it in every row).

From a record's (or history row's) environment: on GPUs the GPU model and count, the driver,
CUDA and NCCL; on CPUs the CPU model and core count; on both the interconnect (the node's
topology: GPU links, NICs and their rates, NUMA, as topology.signature has it) and the runner
host class (`runner_class`, which a record takes from $SCALEBENCH_RUNNER_CLASS, so that a
replaced runner of the same class is still the same testbed while its hostname is not). A field
the environment does not carry (a record written before it was recorded, a machine where it
could not be read) is "not recorded" and matches any value: it cannot tell two testbeds apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scalebench.hardware import topology

NOT_RECORDED = topology.UNKNOWN
RUNNER_CLASS_VARIABLE = "SCALEBENCH_RUNNER_CLASS"


@dataclass(frozen=True)
class Testbed:
    kind: str  # "gpu" or "cpu"
    fields: tuple[tuple[str, str], ...]  # (name, value) in a fixed order; NOT_RECORDED if absent

    @property
    def label(self) -> str:
        """e.g. "NVIDIA H100 x8, driver 550.54, CUDA 12.4, NCCL 2.21.5, interconnect ..., host
        class gpu-large"; fields not recorded are left out of the words."""
        f = dict(self.fields)
        known = {k: v for k, v in f.items() if v != NOT_RECORDED}
        if self.kind == "gpu":
            head = f"{known.get('gpu_model', 'GPU')} x{known.get('gpus', '?')}"
            names = ("driver", "cuda", "nccl")
        else:
            head = f"{known.get('cpu_model', 'CPU')} x{known.get('cpu_cores', '?')} cores"
            names = ()
        words = {"driver": "driver", "cuda": "CUDA", "nccl": "NCCL",
                 "interconnect": "interconnect", "runner_class": "host class"}
        parts = [head] + [f"{words[n]} {known[n]}" for n in names + ("interconnect", "runner_class")
                          if n in known]
        return ", ".join(parts)

    def matches(self, other: Testbed) -> bool:
        """The same testbed: the same kind, and every field recorded on both sides equal."""
        if self.kind != other.kind:
            return False
        theirs = dict(other.fields)
        return all(v == theirs.get(k, NOT_RECORDED) for k, v in self.fields
                   if v != NOT_RECORDED and theirs.get(k, NOT_RECORDED) != NOT_RECORDED)


def _text(value: Any) -> str:
    return NOT_RECORDED if value in (None, "") else str(value)


def of(env: Mapping[str, Any] | None) -> Testbed:
    """The one definition: a run's testbed from its environment."""
    env = env or {}
    device = env.get("device_kind")
    # a CPU run on a GPU machine is a CPU run; a record without device_kind goes by its GPUs
    if device not in (None, "cpu") or (device is None and env.get("gpus")):
        kind, values = "gpu", [("gpu_model", env.get("accelerator_model")),
                               ("gpus", env.get("gpus")), ("driver", env.get("driver")),
                               ("cuda", env.get("cuda")), ("nccl", env.get("nccl"))]
    else:
        kind, values = "cpu", [("cpu_model", env.get("cpu_model")),
                               ("cpu_cores", env.get("cpu_cores"))]
    link = topology.signature(env.get("topology"))
    values += [("interconnect", link), ("runner_class", env.get("runner_class"))]
    return Testbed(kind, tuple((name, _text(value)) for name, value in values))
