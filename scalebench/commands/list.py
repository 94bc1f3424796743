"""scalebench list: models (parameters, input sizes, FLOPs per image) and frameworks with
availability."""

from __future__ import annotations

import argparse

from scalebench import frameworks
from scalebench.models import flops, workloads
from scalebench.spec import units


def register(sub) -> None:
    p = sub.add_parser("list", help="models and frameworks, with availability and reasons")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    print("models:")
    for info in workloads.MODELS.values():
        extra = (f" ({info.params_without_aux:,} without the aux head below "
                 f"{workloads.INCEPTION_AUX_MIN_SIZE} px)" if info.params_without_aux else "")
        count = flops.for_run(info.name, info.native_image_size)
        print(f"  {info.name:<13} {info.params:>12,} params{extra}; default input "
              f"{info.native_image_size} px, min {info.min_image_size} px; "
              f"{units.format_flops(count.flops_per_image)} per image per training step "
              f"(forward {units.format_flops(count.forward_flops_per_image)} = "
              f"{units.format_flops(count.forward_flops_per_image / 2, 'MAC')})")
    print("  FLOPs: counted with torch.utils.flop_counter.FlopCounterMode at the default input "
          "(forward + loss + backward; 2 FLOPs per multiply-add); records carry the count at "
          "the run's size")
    print("frameworks:")
    for name in frameworks.names():
        ok, reason = frameworks.get(name).available()
        print(f"  {name:<8} {'available' if ok else 'unavailable'}: {reason}")
    return 0
