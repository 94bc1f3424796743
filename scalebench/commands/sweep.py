"""scalebench sweep [WORKLOAD.toml] [flags]: flags override the workload file."""

from __future__ import annotations

import argparse

from scalebench import config
from scalebench.sweep import run_sweep

TOP_FLAGS = {  # flag dest -> SweepSpec field
    "models": "models", "frameworks": "frameworks", "workers": "workers",
    "batch_size": "batch_size", "image_size": "image_size", "precision": "precision",
    "warmup": "warmup", "iters": "iters", "trials": "trials", "timeout": "timeout",
    "device": "device", "scaling": "scaling", "data": "data", "out": "out",
    "loader_workers": "loader_workers", "threads_per_worker": "threads_per_worker",
}
SECTION_FLAGS = {  # flag dest -> (section, field)
    "nnodes": ("ddp", "nnodes"), "node_rank": ("ddp", "node_rank"),
    "rdzv_endpoint": ("ddp", "rdzv_endpoint"),
    "hosts": ("horovod", "hosts"), "hostfile": ("horovod", "hostfile"),
    "fp16_allreduce": ("horovod", "fp16_allreduce"),
    "fusion_threshold_mb": ("horovod", "fusion_threshold_mb"),
    "cycle_time_ms": ("horovod", "cycle_time_ms"), "timeline": ("horovod", "timeline"),
    "ray_address": ("ray", "address"), "placement": ("ray", "placement"),
}


def register(sub) -> None:
    p = sub.add_parser("sweep", help="run models x frameworks x worker counts, write results")
    p.add_argument("workload", nargs="?", help="workload TOML file (see workloads/)")
    p.add_argument("--models", help="comma list: resnet101,inception_v3,vgg16")
    p.add_argument("--frameworks", help="comma list: ddp,horovod,ray")
    p.add_argument("--workers", help="comma list of worker counts (default 1..GPUs or cores, "
                   "powers of two)")
    p.add_argument("--batch-size", help="images per worker (weak) or in total (strong)")
    p.add_argument("--image-size", help="pixels (default: 224, 299 for inception_v3)")
    p.add_argument("--precision", help="fp32, bf16 or fp16 (comma list allowed)")
    p.add_argument("--warmup", help="untimed steps before the trials")
    p.add_argument("--iters", help="steps per timed trial window")
    p.add_argument("--trials", help="timed windows per run")
    p.add_argument("--timeout", help="seconds before a run is killed and recorded as timeout")
    p.add_argument("--device", help="auto, cpu or cuda")
    p.add_argument("--scaling", help="weak (fixed per-worker batch) or strong (fixed global)")
    p.add_argument("--data", help="synthetic or imagefolder:PATH")
    p.add_argument("--loader-workers", help="DataLoader worker processes per rank (imagefolder)")
    p.add_argument("--threads-per-worker", help="CPU threads per worker (default cores/workers)")
    p.add_argument("--out", help="output folder (default results/<workload name>)")
    p.add_argument("--resume", action="store_true", default=None,
                   help="skip runs already recorded ok in OUT/results.jsonl")
    p.add_argument("--quiet", action="store_true", default=None,
                   help="only one result line per run")
    g = p.add_argument_group("DDP (torchrun) multi-node")
    g.add_argument("--nnodes", help="number of machines")
    g.add_argument("--node-rank", help="this machine's index, 0 on the one that records results")
    g.add_argument("--rdzv-endpoint", help="HOST:PORT on node 0")
    g = p.add_argument_group("Horovod")
    g.add_argument("--hosts", help="horovodrun -H, e.g. host1:4,host2:4")
    g.add_argument("--hostfile", help="horovodrun --hostfile")
    g.add_argument("--fp16-allreduce", action="store_true", default=None,
                   help="compress gradients to fp16 for the allreduce")
    g.add_argument("--fusion-threshold-mb", help="HOROVOD_FUSION_THRESHOLD in MB")
    g.add_argument("--cycle-time-ms", help="HOROVOD_CYCLE_TIME in ms")
    g.add_argument("--timeline", action="store_true", default=None,
                   help="save a Horovod timeline next to the results")
    g = p.add_argument_group("Ray Train")
    g.add_argument("--ray-address", help="auto, HOST:PORT or ray://HOST:10001 (default: embedded)")
    g.add_argument("--placement", help="PACK or SPREAD")
    p.set_defaults(run=run)


def values_from_args(args: argparse.Namespace) -> dict:
    values = config.load_workload(args.workload) if args.workload else {}
    flags: dict = {field: getattr(args, dest) for dest, field in TOP_FLAGS.items()}
    flags["resume"], flags["quiet"] = args.resume, args.quiet
    for dest, (section, field) in SECTION_FLAGS.items():
        flags.setdefault(section, {})[field] = getattr(args, dest)
    values = config.merge(values, flags)
    values.setdefault("out", f"results/{values.get('name', 'default')}")
    return values


def run(args: argparse.Namespace) -> int:
    spec = config.build_spec(values_from_args(args))
    outcome = run_sweep(spec)
    ok = sum(1 for r in outcome.records if r["status"] == "ok")
    print(f"{ok} of {len(outcome.records)} runs ok"
          + (f", {outcome.skipped_existing} already recorded" if outcome.skipped_existing else "")
          + f"; results in {outcome.out_dir / 'results.jsonl'}")
    for path in outcome.outputs:
        print(f"  wrote {path}")
    return 130 if outcome.interrupted else 0
