"""The report's MFU section: which scaling series have FLOPs and a peak, the peaks they were
taken against, and the words. The numbers are the summary rows' (scalebench/mfu.py); the table
is tables.mfu_table, the figure figures.mfu_figure."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from scalebench.spec.units import format_flops

KEY = "mfu"
TITLE = "Distance to the compute limit (MFU)"
TEXT = (
    "**Model FLOPs utilisation** (MFU; Chowdhery et al., PaLM, 2022, appendix B) = achieved "
    "FLOP/s per worker / the peak FLOP/s that worker holds. Achieved = per-worker images/s × "
    "the model's FLOPs per image for one training step (forward, loss and backward), counted "
    "with PyTorch's torch.utils.flop_counter.FlopCounterMode (matrix products and "
    "convolutions, 2 FLOPs per multiply-add; elementwise work and the optimizer update are "
    "not counted).",
    "The peak is measured: a large matrix product at the run's precision (on CUDA fp16/bf16 on "
    "the tensor cores, fp32 as TF32 where the convolutions run in TF32), warmed up, best of the "
    "repeats, once per sweep and precision before the runs. A GPU is one worker's; on a CPU the "
    "probe uses all cores of the node and the workers on a node share them. Where the GPU is "
    "known, MFU against the vendor's datasheet peak (dense) is shown too.",
    "Efficiency and MFU side by side: efficiency says what scaling lost, the one-worker MFU "
    "what the baseline already left on the table; a high efficiency on a low MFU is a good "
    "efficiency of a slow baseline.",
)
EMPTY_TEXT = ("No run here carries counted FLOPs and a measured peak (records written before "
              "scalebench counted them): no MFU.")


class HasRows(Protocol):
    title: str
    rows: tuple[dict, ...]


def groups(all_groups: Sequence[HasRows]) -> list[HasRows]:
    """The scaling series with FLOPs counted for at least one run."""
    return [g for g in all_groups if any(r.get("flops_per_image") for r in g.rows)]


def empty_text(all_groups: Sequence[HasRows]) -> str:
    """What to say when no series has FLOPs ("" when one has)."""
    return "" if groups(all_groups) else EMPTY_TEXT


def peak_lines(rows: Sequence[dict]) -> list[str]:
    """Each distinct peak the rows were taken against, in words, once."""
    seen: dict[tuple, str] = {}
    for r in rows:
        if not r.get("flops_per_image"):
            continue
        key = (r.get("device_kind"), r["precision"], r.get("peak_flops"), r.get("peak_method"),
               r.get("datasheet_peak_flops"))
        if key in seen:
            continue
        head = f"{r.get('device_kind') or r.get('device')}, {r['precision']}: "
        if r.get("peak_flops"):
            text = f"{format_flops(r['peak_flops'], 'FLOP/s')} per device, {r['peak_method']}"
        else:
            text = f"no measured peak ({r.get('peak_method') or 'not measured'})"
        if r.get("datasheet_peak_flops"):
            text += (f"; datasheet {format_flops(r['datasheet_peak_flops'], 'FLOP/s')} "
                     f"({r['datasheet_peak_source']})")
        seen[key] = head + text
    return list(seen.values())
