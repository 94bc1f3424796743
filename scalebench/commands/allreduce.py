"""scalebench allreduce [flags]: allreduce time and bandwidth per message size, per framework."""

from __future__ import annotations

import argparse

from scalebench.commands.framework_flags import add_framework_flags, section_values
from scalebench.running.sweep import run_allreduce
from scalebench.spec import config
from scalebench.spec.errors import UserError
from scalebench.tasks import allreduce

TOP_FLAGS = {  # flag dest -> SweepSpec field
    "frameworks": "frameworks", "workers": "workers", "warmup": "warmup", "iters": "iters",
    "trials": "trials", "timeout": "timeout", "device": "device",
    "threads_per_worker": "threads_per_worker", "out": "out",
}


def register(sub) -> None:
    p = sub.add_parser(
        "allreduce", help="time each framework's own allreduce per message size (algbw, busbw)",
        description="Sum a tensor across workers with each framework's own collective and "
        "report time, algorithm bandwidth (bytes / time) and bus bandwidth (algbw x 2(N-1)/N, "
        "as nccl-tests). Warm-up, trials and intervals as in the training runs.")
    p.add_argument("--frameworks", help="comma list: ddp,horovod,ray (default ddp)")
    p.add_argument("--workers", help="comma list of worker counts, each >= 2 (default 2, 4, ... "
                   "up to GPUs or cores)")
    p.add_argument("--sizes", default=allreduce.DEFAULT_SIZES,
                   help="comma list of message sizes; K/M/G are powers of two as in nccl-tests "
                   "(1M = 1,048,576 bytes), kB/MB/GB powers of ten, a plain number is bytes "
                   f"(default {allreduce.DEFAULT_SIZES})")
    p.add_argument("--dtype", default="float32", help=f"{', '.join(allreduce.DTYPES)} "
                   "(default float32)")
    p.add_argument("--warmup", help="untimed allreduce calls per size before the trials")
    p.add_argument("--iters", help="allreduce calls per timed trial window")
    p.add_argument("--trials", help="timed windows per size")
    p.add_argument("--timeout", help="seconds per launch (all sizes) before it is killed")
    p.add_argument("--device", help="auto, cpu or cuda")
    p.add_argument("--threads-per-worker", help="CPU threads per worker (default cores/workers)")
    p.add_argument("--out", help=f"output folder; records are appended to OUT/results.jsonl "
                   f"(default {allreduce.DEFAULT_OUT})")
    add_framework_flags(p, training=False)
    p.set_defaults(run=run)


def values_from_args(args: argparse.Namespace) -> dict:
    values: dict = {field: getattr(args, dest) for dest, field in TOP_FLAGS.items()}
    values.update(section_values(args))
    values = config.merge({"name": "allreduce", "out": allreduce.DEFAULT_OUT}, values)
    return values


def run(args: argparse.Namespace) -> int:
    sweep = config.build_spec(values_from_args(args))
    dtype = str(args.dtype)
    if dtype not in allreduce.DTYPES:
        raise UserError(f"dtype: unknown value {dtype!r}; allowed: {', '.join(allreduce.DTYPES)}")
    sizes = allreduce.parse_sizes(args.sizes, dtype)
    outcome = run_allreduce(sweep, sizes, dtype)
    ok = sum(1 for r in outcome.records if r["status"] == "ok")
    print(f"{ok} of {len(outcome.records)} points ok; appended to "
          f"{outcome.out_dir / 'results.jsonl'} (`scalebench report {outcome.out_dir}` for tables)")
    return 130 if outcome.interrupted else 0
