"""scalebench tune [WORKLOAD.toml] [flags]: each framework's own knobs searched per cell
(framework x model x workers), candidates interleaved and raced, the winner confirmed against
the default; writes tune.json, tuned.toml, tune.md and tune.html into --out."""

from __future__ import annotations

import argparse
from pathlib import Path

from scalebench.commands.framework_flags import add_framework_flags, section_values
from scalebench.commands.sweep import add_step_flags
from scalebench.spec import config, fields, units
from scalebench.tuning.run import run_tune

STEP_FLAGS = {"models": "models", "frameworks": "frameworks", "workers": "workers",
              "batch_size": "batch_size", "image_size": "image_size", "precision": "precision",
              "warmup": "warmup", "iters": "iters", "timeout": "timeout", "device": "device",
              "threads_per_worker": "threads_per_worker", "tf32": "tf32"}
DEFAULT_BUDGET = "10m"


def register(sub) -> None:
    p = sub.add_parser("tune", help="find each framework's best communication settings per "
                       "model and worker count (paired, interleaved, raced, confirmed)")
    p.add_argument("workload", nargs="?", help="workload TOML file (see workloads/)")
    add_step_flags(p)
    p.add_argument("--budget", default=DEFAULT_BUDGET,
                   help=f"wall time for the whole tune, e.g. 90s, 10m, 1h (default "
                   f"{DEFAULT_BUDGET}), shared by the cells")
    p.add_argument("--knobs", help="comma list of knobs, each optionally with its values: "
                   "bucket_cap_mb=1:5:25:100,gradient_as_bucket_view,fusion_threshold_mb,"
                   "cycle_time_ms,cache_capacity,hierarchical_allreduce (default: each "
                   "framework's own set; the default value is always a candidate)")
    p.add_argument("--seed", help="seed of the candidates' order (default: random, recorded)")
    p.add_argument("--out", help="output folder (default results/tune)")
    p.add_argument("--quiet", action="store_true", default=None, help="no live progress line")
    add_framework_flags(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    values = config.load_workload(args.workload) if args.workload else {}
    for key in ("repeats", "breakdown", "profile", "with_allreduce", "tuned", "report"):
        values.pop(key, None)  # sweep-only keys of a shared workload file
    flags = {field: getattr(args, dest) for dest, field in STEP_FLAGS.items()}
    flags.update(section_values(args))
    values = config.merge(values, flags)
    spec = config.build_spec(values)
    budget = units.parse_wall_time(args.budget, "budget")
    seed = None if args.seed is None else fields.integer("seed", args.seed, 0)
    out = Path(args.out or "results/tune")
    outcome = run_tune(spec, out, budget, args.knobs, seed,
                       live=False if args.quiet else None)
    for cell in outcome.cells:
        from scalebench.tuning.files import verdict

        print(verdict(cell))
    for path in outcome.files:
        print(f"  wrote {path}")
    return 130 if outcome.interrupted else 0
