"""scalebench sweep [WORKLOAD.toml] [flags]: flags override the workload file."""

from __future__ import annotations

import argparse

from scalebench.commands import k8s_sweep
from scalebench.commands.framework_flags import add_framework_flags, section_values
from scalebench.running.sweep import run_sweep
from scalebench.spec import config

TOP_FLAGS = {  # flag dest -> SweepSpec field
    "models": "models", "frameworks": "frameworks", "workers": "workers",
    "batch_size": "batch_size", "image_size": "image_size", "precision": "precision",
    "warmup": "warmup", "iters": "iters", "trials": "trials", "timeout": "timeout",
    "device": "device", "scaling": "scaling", "data": "data", "out": "out",
    "loader_workers": "loader_workers", "threads_per_worker": "threads_per_worker",
    "repeats": "repeats", "seed": "seed", "tf32": "tf32", "launcher": "launcher",
    "launch": "launch", "breakdown": "breakdown", "profile": "profile", "report": "report",
    "with_allreduce": "with_allreduce", "vet_file": "vet_file",
    "inject_step_delay": "inject_step_delay", "inject_input_delay": "inject_input_delay",
    "tuned": "tuned", "strict": "strict",
}


def register(sub) -> None:
    p = sub.add_parser("sweep", help="run models x frameworks x worker counts, write results")
    p.add_argument("workload", nargs="?", help="workload TOML file (see workloads/)")
    add_step_flags(p)
    p.add_argument("--scaling", help="weak (fixed per-worker batch) or strong (fixed global)")
    p.add_argument("--data", help="synthetic or imagefolder:PATH")
    p.add_argument("--loader-workers", help="DataLoader worker processes per rank (imagefolder)")
    p.add_argument("--repeats", help="separate launches of every configuration, interleaved "
                   "round by round (default 1); intervals then use the per-launch means")
    p.add_argument("--seed", help="seed of the framework order within each round (default: "
                   "random, recorded)")
    p.add_argument("--launch", help="grouped (default: configurations that share a launch - "
                   "framework, workers, precision, options - run in one launched worker group, "
                   "each with its own warm-up, windows and record) or isolated (one launch each)")
    p.add_argument("--breakdown", action=argparse.BooleanOptionalAction, default=None,
                   help="time extra windows without gradient sync at N > 1 workers (as many as "
                   "trials, at most 3) for the scaling-loss breakdown (default on)")
    p.add_argument("--report", action=argparse.BooleanOptionalAction, default=None,
                   help="write summary, figures and reports after the runs (default on); "
                   "--no-report: records only, `scalebench report OUT` writes them later")
    p.add_argument("--with-allreduce", action="store_true", default=None,
                   help="first time each framework's own allreduce at its bucket/fusion size "
                   "and 1 MiB at every worker count >= 2: the report then compares the exposed "
                   "communication with the link's measured bandwidth")
    p.add_argument("--profile", action="store_true", default=None,
                   help="save a torch.profiler Chrome trace of one extra window on rank 0 per run")
    g = p.add_argument_group("fault injection (tests of the breakdown; off by default)")
    g.add_argument("--inject-step-delay", help="RANK:SECONDS: sleep after every step on that rank")
    g.add_argument("--inject-input-delay", help="SECONDS: sleep before every batch on every rank")
    p.add_argument("--launcher", help="local (each framework's launcher), slurm (job steps "
                   "inside an allocation) or k8s (experimental: one operator job per framework "
                   "x node count, see the Kubernetes flags)")
    p.add_argument("--vet", action="store_true", default=None,
                   help="with --launcher slurm: first vet every node and link of the allocation "
                   "(`scalebench vet`, into OUT/vet; settings from the workload's [vet] table, "
                   "else the sweep's batch, image size, precision and first model), then place "
                   "every run on vetted nodes only")
    p.add_argument("--vet-file", help="with --launcher slurm: place runs by an earlier vetting "
                   "of this same job (its vet.json or folder)")
    p.add_argument("--tuned", help="a `scalebench tune` folder or its tuned.toml: every cell it "
                   "tuned also runs with its winning settings, beside the default run")
    p.add_argument("--strict", action="store_true", default=None,
                   help="run a configuration whose timed windows were disturbed (other "
                   "processes, steal time, a throttled GPU: docs/disturbance.md) once more; "
                   "both records are kept, the newer one counts")
    p.add_argument("--out", help="output folder (default results/<workload name>)")
    p.add_argument("--resume", action="store_true", default=None,
                   help="skip runs already recorded ok in OUT/results.jsonl")
    p.add_argument("--quiet", action="store_true", default=None,
                   help="only one result line per run")
    add_framework_flags(p)
    k8s_sweep.add_flags(p)
    p.set_defaults(run=run)


def add_step_flags(p: argparse.ArgumentParser) -> None:
    """The flags that say what is trained and timed (shared by sweep and tune)."""
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
    p.add_argument("--tf32", help="CUDA fp32 math: default (PyTorch's), on or off")
    p.add_argument("--threads-per-worker", help="CPU threads per worker (default cores/workers)")


def values_from_args(args: argparse.Namespace) -> dict:
    values = config.load_workload(args.workload) if args.workload else {}
    flags: dict = {field: getattr(args, dest) for dest, field in TOP_FLAGS.items()}
    flags["resume"], flags["quiet"] = args.resume, args.quiet
    if args.vet and not isinstance(values.get("vet"), dict):  # a [vet] table already says yes
        flags["vet"] = True
    flags.update(section_values(args))
    values = config.merge(values, flags)
    values.setdefault("out", f"results/{values.get('name', 'default')}")
    return values


def pod_sweep_values(values: dict, sweep_args: list[str]) -> dict:
    """What a pod's `scalebench sweep WORKLOAD ARGS` asks (values: the workload as
    config.load_workload reads it), its flags parsed by the sweep's own parser."""
    parser = argparse.ArgumentParser(prog="scalebench")
    register(parser.add_subparsers())
    flags = values_from_args(parser.parse_args(["sweep", *sweep_args]))
    return config.merge(values, flags)


def run(args: argparse.Namespace) -> int:
    values = values_from_args(args)
    if values.get("launcher") == "k8s":
        outcome = k8s_sweep.run(args, values, pod_sweep_values)
        return 0 if outcome is None else print_outcome(outcome)
    if values.get("launcher", "local") in config.LAUNCHERS:
        k8s_sweep.refuse_flags(args, values.get("launcher", "local"))
    return print_outcome(run_sweep(config.build_spec(values)))


def print_outcome(outcome) -> int:
    """The sweep's last lines (runs ok, where the results are) and its exit status."""
    ok = sum(1 for r in outcome.records if r["status"] == "ok")
    print(f"{ok} of {len(outcome.records)} runs ok"
          + (f", {outcome.skipped_existing} already recorded" if outcome.skipped_existing else "")
          + f"; results in {outcome.out_dir / 'results.jsonl'}")
    for path in outcome.outputs:
        print(f"  wrote {path}")
    return 130 if outcome.interrupted else 0
