"""Ray Train vs DDP side by side: steady-state throughput (goal: Ray >= 0.97 of DDP) and startup.

Both go through the real sweep (sweep.run_sweep) in one run: same model, per-worker batch,
workers, threads, warm-up and timed windows; DDP via torchrun, Ray Train via TorchTrainer on the
embedded cluster (or --ray-address). Rounds alternate which framework goes first, so drift on a
noisy machine hits both. Throughput is the shared measurement (trial = global batch x iters /
slowest rank's window); startup is launch -> first timed step: torchrun's start for DDP, the
fit call for Ray (also shown from the Ray driver's process start; the embedded cluster's own
start, once per sweep, is shown apart).

    python benchmarks/ray_vs_ddp.py [--model resnet101] [--workers 2] [--rounds 1] ...
    python benchmarks/ray_vs_ddp.py --smoke [--out DIR]   # under a minute: resnet101 at 32 px,
        # batch 2, 1 worker x 1 thread, warm-up 1, 1 iter x 2 trials, 1 round, sweeps without
        # the breakdown and reports, into a temporary folder (removed at the end) unless --out
        # is given (explicit flags still win)
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import sys
import tempfile
from pathlib import Path

from scalebench.analysis import stats
from scalebench.frameworks.ray.options import PLACEMENTS
from scalebench.hardware.envinfo import cpu_cores
from scalebench.models import workloads
from scalebench.running.progress import Progress
from scalebench.running.sweep import run_sweep
from scalebench.spec import config

GOAL = 0.97
FRAMEWORKS = ("ddp", "ray")
# --smoke: the smallest run that still measures both frameworks (out None: a temporary folder),
# its sweeps without the breakdown's extra windows and without reports (SMOKE_SWEEP)
SMOKE = {"model": "resnet101", "workers": 1, "threads_per_worker": 1, "batch_size": 2,
         "image_size": 32, "warmup": 1, "iters": 1, "trials": 2, "rounds": 1, "out": None}
SMOKE_SWEEP = {"breakdown": False, "report": False}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="resnet101", choices=list(workloads.MODELS))
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--threads-per-worker", type=int, default=None,
                   help="default: max(1, cores // workers), the sweep's policy")
    p.add_argument("--batch-size", type=int, default=4, help="images per worker")
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--rounds", type=int, default=1, help="sweeps, alternating which goes first")
    p.add_argument("--device", default="cpu", choices=config.DEVICES)
    p.add_argument("--timeout", type=float, default=900.0)
    p.add_argument("--ray-address", default=None, help="existing cluster (default: embedded)")
    p.add_argument("--placement", default="PACK", choices=PLACEMENTS)
    p.add_argument("--out", default="results/ray-vs-ddp",
                   help="default: results/ray-vs-ddp; with --smoke a temporary folder")
    p.add_argument("--smoke", action="store_true",
                   help="smallest run (under a minute), to check that the script still works")
    if p.parse_known_args(argv)[0].smoke:
        p.set_defaults(**SMOKE)
    return p.parse_args(argv)


def sweep_values(a: argparse.Namespace, order: tuple[str, ...], out: Path) -> dict:
    return {
        "name": "ray-vs-ddp", "models": [a.model], "frameworks": list(order),
        "workers": [a.workers], "batch_size": a.batch_size, "image_size": a.image_size,
        "warmup": a.warmup, "iters": a.iters, "trials": a.trials, "timeout": a.timeout,
        "device": a.device, "threads_per_worker": a.threads_per_worker or max(1, cpu_cores() // a.workers),
        "out": str(out), "quiet": True,
        "ray": {"address": a.ray_address, "placement": a.placement},
        **(SMOKE_SWEEP if getattr(a, "smoke", False) else {}),
    }


def ray_driver_startup(out: Path, record: dict) -> float | None:
    """Ray driver process start -> first timed step, from the run's result.json."""
    try:
        result = json.loads((out / "runs" / record["run_id"] / "result.json").read_text())
        return result["first_timed_step_unix"] - result["driver_start_unix"]
    except (OSError, KeyError, TypeError, json.JSONDecodeError):
        return None


def embedded_start(out: Path) -> float | None:
    try:
        return json.loads((out / "ray-head.json").read_text())["start_seconds"]
    except (OSError, KeyError, json.JSONDecodeError):
        return None


def fmt_summary(summary: stats.Summary) -> str:
    ci = (f" (95% CI {summary.ci_low:.3f}-{summary.ci_high:.3f})"
          if summary.ci_low is not None else "")
    return f"{summary.mean:.3f} images/s{ci}"


def mean_or_none(values: list[float]) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.fmean(values) if values else None


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    if a.out is None:
        with tempfile.TemporaryDirectory(prefix="scalebench-ray-vs-ddp-") as tmp:
            return compare(a, Path(tmp))
    return compare(a, Path(a.out))


def compare(a: argparse.Namespace, root: Path) -> int:
    """The rounds into root/round-N; prints each round and the figures."""
    trials: dict[str, list[float]] = {f: [] for f in FRAMEWORKS}
    startup: dict[str, list[float]] = {f: [] for f in FRAMEWORKS}
    driver_startup: list[float] = []
    cluster_start: list[float] = []
    threads = None
    for index in range(a.rounds):
        order = FRAMEWORKS if index % 2 == 0 else tuple(reversed(FRAMEWORKS))
        out = root / f"round-{index + 1}"
        spec = config.build_spec(sweep_values(a, order, out))
        outcome = run_sweep(spec, Progress(0, stream=io.StringIO(), live=False))
        by_framework = {r["framework"]: r for r in outcome.records}
        parts = []
        for framework in order:
            r = by_framework.get(framework)
            if r is None or r["status"] != "ok":
                why = r["error"] if r else "no record"
                print(f"round {index + 1}: {framework} {r['status'] if r else 'missing'}: {why}")
                return 1
            threads = r["threads_per_worker"]
            trials[framework] += r["trial_images_per_sec"]
            startup[framework].append(r["startup_seconds"])
            parts.append(f"{framework} {r['images_per_sec']:.3f} images/s, "
                         f"startup {r['startup_seconds']:.1f} s")
            if framework == "ray":
                driver_startup.append(ray_driver_startup(out, r))
                cluster_start.append(embedded_start(out))
        print(f"round {index + 1} ({' then '.join(order)}): " + "; ".join(parts))
        if outcome.interrupted:
            return 130

    ddp, ray = stats.summarize(trials["ddp"]), stats.summarize(trials["ray"])
    ratio = stats.efficiency(ray, 1, ddp)
    verdict = "met" if ratio.value >= GOAL else "not met"
    if ratio.ci_low is not None and ratio.ci_low < GOAL <= ratio.ci_high:
        verdict += " (the interval straddles it: inconclusive at this noise)"
    difference = stats.difference(trials["ray"], trials["ddp"])
    where = a.ray_address or "embedded cluster"
    print()
    print(f"Ray Train vs DDP: {a.model} {a.image_size} px, {a.workers} workers x {threads} "
          f"thread{'s' if threads != 1 else ''}, batch {a.batch_size}/worker, {a.device}, "
          f"{a.trials} trials x {a.iters} iters per run, {a.rounds} round{'s' if a.rounds != 1 else ''}; "
          f"Ray on {where}, placement {a.placement}")
    print(f"  DDP throughput  {fmt_summary(ddp)}")
    print(f"  Ray throughput  {fmt_summary(ray)}")
    ci = (f" (95% CI {ratio.ci_low:.3f}-{ratio.ci_high:.3f})" if ratio.ci_low is not None else "")
    print(f"  Ray / DDP       {ratio.value:.3f}{ci}; goal >= {GOAL}: {verdict}")
    print(f"  difference      {'significant' if difference.significant else 'not significant'} "
          f"({difference.test}: {difference.reason})")
    print(f"  DDP startup     {mean_or_none(startup['ddp']):.1f} s (torchrun start -> first timed step)")
    line = f"  Ray startup     {mean_or_none(startup['ray']):.1f} s (fit call -> first timed step)"
    if mean_or_none(driver_startup) is not None:
        line += f"; {mean_or_none(driver_startup):.1f} s from the driver process start"
    print(line)
    if mean_or_none(cluster_start) is not None:
        print(f"  Ray cluster     {mean_or_none(cluster_start):.1f} s to start the embedded cluster, "
              "once per sweep (not in either figure)")
    if a.workers == 1:
        print("  note: at 1 worker Ray's prepare_model leaves the model unwrapped; DDP wraps it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
