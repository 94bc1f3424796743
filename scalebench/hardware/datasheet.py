"""Vendors' published peak FLOP/s per device and math (dense: NVIDIA lists twice the tensor-core
figures "with sparsity", 2:4 structured sparsity that dense training never uses).

Only a reference next to the measured peak (scalebench/peak.py): a datasheet peak assumes boost
clocks and a cooling the machine may not have, and no CPU is listed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

TERA = 1e12
SOURCE = "NVIDIA datasheet, dense (without 2:4 sparsity)"
# The math a run's precision uses on a GPU: fp32 as plain fp32 or as TF32 (peak.math_of).
MATHS = ("fp32", "tf32", "bf16", "fp16")


@dataclass(frozen=True)
class Entry:
    name: str
    pattern: str  # searched in torch.cuda.get_device_name(), first match wins
    teraflops: dict[str, float]  # math -> dense peak in TFLOP/s


# More specific names first (an "H100 PCIe" also contains "H100").
ENTRIES: tuple[Entry, ...] = (
    Entry("H200 NVL", r"H200 NVL", {"fp32": 60, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5}),
    Entry("H200 SXM", r"H200", {"fp32": 67, "tf32": 494.5, "bf16": 989.5, "fp16": 989.5}),
    Entry("H100 NVL", r"H100 NVL", {"fp32": 60, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5}),
    Entry("H100 PCIe", r"H100 PCIe", {"fp32": 51, "tf32": 378, "bf16": 756.5, "fp16": 756.5}),
    Entry("H100 SXM", r"H100", {"fp32": 67, "tf32": 494.5, "bf16": 989.5, "fp16": 989.5}),
    Entry("A100", r"A100", {"fp32": 19.5, "tf32": 156, "bf16": 312, "fp16": 312}),
    Entry("A10", r"\bA10\b", {"fp32": 31.2, "tf32": 62.5, "bf16": 125, "fp16": 125}),
    Entry("L40S", r"L40S", {"fp32": 91.6, "tf32": 183, "bf16": 362, "fp16": 362}),
    Entry("L4", r"\bL4\b", {"fp32": 30.3, "tf32": 60, "bf16": 121, "fp16": 121}),
    Entry("V100 PCIe", r"V100-PCIE|V100 PCIe", {"fp32": 14, "fp16": 112}),
    Entry("V100 SXM2", r"V100", {"fp32": 15.7, "fp16": 125}),
    Entry("T4", r"\bT4\b", {"fp32": 8.1, "fp16": 65}),
)


@dataclass(frozen=True)
class Peak:
    flops: float  # FLOP/s
    source: str  # e.g. "NVIDIA datasheet, dense (without 2:4 sparsity): H100 SXM, bf16"


def lookup(device_name: str, math: str) -> Peak | None:
    """The published dense peak of a named device for one math; None when not listed."""
    for entry in ENTRIES:
        if re.search(entry.pattern, device_name):
            value = entry.teraflops.get(math)
            if value is None:
                return None
            return Peak(value * TERA, f"{SOURCE}: {entry.name}, {math}")
    return None
