"""scalebench predict: bounds on scaling efficiency at N workers from one worker's throughput,
or for a device not measured from the model's counted FLOPs and the device's peak FLOP/s.

Runs nothing. The model and its assumptions: docs/scaling-model.md, scalebench/scaling_model.py.
"""

from __future__ import annotations

import argparse
import json

from scalebench.analysis import scaling_model as sm
from scalebench.models import flops, workloads
from scalebench.spec import units
from scalebench.spec.errors import UserError


def register(sub) -> None:
    p = sub.add_parser(
        "predict", help="extrapolate efficiency bounds to N workers (no runs)",
        description="No-overlap and full-overlap bounds on scaling efficiency at N workers: "
        "step = compute + allreduce, and step = forward + max(backward, allreduce), with a ring "
        "allreduce of the model's gradients. See docs/scaling-model.md.")
    p.add_argument("--model", required=True, help=f"one of: {', '.join(workloads.MODELS)}")
    p.add_argument("--workers", required=True, help="worker count N (GPUs)")
    p.add_argument("--bandwidth", required=True,
                   help=f"per-worker link bandwidth, {units.BANDWIDTH_HELP} (bit units and "
                   "k/M/G/T are powers of ten; Ki/Mi/Gi powers of two)")
    p.add_argument("--images-per-sec-one",
                   help="one worker's measured throughput (images/s) at --batch-size")
    p.add_argument("--peak-flops",
                   help="instead of --images-per-sec-one: the peak FLOP/s of one worker's "
                   f"device ({units.FLOPS_HELP}); compute = batch x the model's counted FLOPs "
                   "per image / (peak x --mfu)")
    p.add_argument("--mfu", help="with --peak-flops: the share of the peak a training step "
                   "reaches (a fraction, e.g. 0.35; a report's MFU column measures it)")
    p.add_argument("--image-size", help="with --peak-flops: the input size the FLOPs are "
                   "counted at (default: the model's native size)")
    p.add_argument("--batch-size", required=True, help="images per worker per step")
    p.add_argument("--latency", default=f"{sm.DEFAULT_STEP_LATENCY * 1e6:g}us",
                   help="latency of one ring step (a message costs 2(N-1) of them), e.g. 5us, 0 "
                   f"(default {sm.DEFAULT_STEP_LATENCY * 1e6:g}us)")
    p.add_argument("--bucket", default="64M",
                   help="gradient bytes per allreduce message (Horovod's fusion buffer: 64M "
                   "before 0.21, 128M since; DDP's bucket 25M; default 64M)")
    p.add_argument("--fp16-allreduce", action="store_true",
                   help="gradients compressed to fp16 for the allreduce (2 bytes per parameter)")
    p.add_argument("--backward-ratio", default=str(sm.BACKWARD_TO_FORWARD),
                   help="backward time / forward time (default 2)")
    p.add_argument("--params", help="parameter count (default: the torchvision model's)")
    p.add_argument("--measured-efficiency",
                   help="a measured efficiency (fraction, e.g. 0.68) to place between the bounds")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(run=run)


def _number(name: str, text: str, integer: bool = False) -> float:
    try:
        value = int(text) if integer else float(text)
    except (TypeError, ValueError):
        kind = "an integer" if integer else "a number"
        raise UserError(f"{name}: expected {kind}, got {text!r}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise UserError(f"{name}: expected a finite number, got {text!r}")
    return value


def from_flops(args: argparse.Namespace) -> sm.FromFlops | None:
    """--peak-flops, --mfu and --image-size as the compute term from counted FLOPs."""
    if args.peak_flops is None:
        for name in ("mfu", "image_size"):
            if getattr(args, name) is not None:
                raise UserError(f"{name}: --{name.replace('_', '-')} goes with --peak-flops")
        return None
    if args.mfu is None:
        raise UserError("mfu: --peak-flops needs --mfu, the share of the peak a training step "
                        "reaches (a fraction, e.g. 0.35; a report's MFU column measures it)")
    info = workloads.get_info(args.model)
    size = info.native_image_size if args.image_size is None else \
        int(_number("image_size", args.image_size, integer=True))
    workloads.check_input(args.model, size, info.min_batch())
    count = flops.for_run(args.model, size)
    return sm.FromFlops(count.flops_per_image, units.parse_flops(args.peak_flops),
                        _number("mfu", args.mfu), count.method)


def run(args: argparse.Namespace) -> int:
    result = sm.predict(
        model=args.model,
        workers=int(_number("workers", args.workers, integer=True)),
        bandwidth=units.parse_bandwidth(args.bandwidth),
        images_per_sec_one=(None if args.images_per_sec_one is None else
                            _number("images_per_sec_one", args.images_per_sec_one)),
        from_flops=from_flops(args),
        batch_size=int(_number("batch_size", args.batch_size, integer=True)),
        step_latency=units.parse_duration(args.latency),
        bucket_bytes=units.parse_size(args.bucket, "bucket"),
        fp16_allreduce=bool(args.fp16_allreduce),
        backward_to_forward=_number("backward_ratio", args.backward_ratio),
        params=None if args.params is None else int(_number("params", args.params, integer=True)),
        measured_efficiency=(None if args.measured_efficiency is None
                             else _number("measured_efficiency", args.measured_efficiency)),
    )
    if args.json:
        print(json.dumps(result))
        return 0
    print("\n".join(text_lines(result)))
    return 0


def text_lines(r: dict) -> list[str]:
    ms = 1e3
    lines = [
        f"{r['model']} on {r['workers']} workers over "
        f"{units.format_bandwidth(r['bandwidth_bytes_per_sec'])}, "
        f"{r['step_latency_seconds'] * 1e6:.3g} us per ring step",
        *([] if r["compute_source"] != "flops" else [
            f"  compute:     {units.format_flops(r['flops_per_image'])} per image (counted) at "
            f"{r['mfu']:.0%} MFU of {units.format_flops(r['peak_flops'], 'FLOP/s')} -> "
            f"{r['images_per_sec_one']:.4g} images/s"]),
        f"  one worker:  {r['images_per_sec_one']:g} images/s at batch {r['batch_size']} -> "
        f"{r['step_seconds_one'] * ms:.1f} ms per step (forward {r['forward_seconds'] * ms:.1f} ms, "
        f"backward {r['backward_seconds'] * ms:.1f} ms at backward = {r['backward_to_forward']:g} "
        "x forward)",
        f"  gradients:   {r['params']:,} params ({r['params_source']}) x {r['bytes_per_param']} B = "
        f"{r['grad_bytes'] / 1e6:.1f} MB in {r['messages']} message(s) of <= "
        f"{r['bucket_bytes'] / 2**20:g} MiB",
        f"  allreduce:   {r['allreduce_bandwidth_seconds'] * ms:.1f} ms bandwidth + "
        f"{r['allreduce_latency_seconds'] * ms:.1f} ms latency = {r['allreduce_seconds'] * ms:.1f} ms",
        f"  efficiency:  {r['efficiency_no_overlap']:.1%} (no overlap) to "
        f"{r['efficiency_full_overlap']:.1%} (full overlap); "
        f"{r['images_per_sec_no_overlap']:,.0f} to {r['images_per_sec_full_overlap']:,.0f} images/s",
        f"  limit:       {r['limit']} (allreduce {r['allreduce_seconds'] * ms:.1f} ms vs backward "
        f"{r['backward_seconds'] * ms:.1f} ms)",
    ]
    if "verdict" in r:
        lines.append(f"  measured:    {r['measured_efficiency']:.1%}: {r['verdict_text']}")
    return lines
