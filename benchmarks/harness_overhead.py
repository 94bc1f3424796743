"""Harness overhead: scalebench's timed loop vs. a minimal hand-written training loop.

Same model, batch, image size and threads, alternated in one process (A B A B ...), so drift
on a noisy machine hits both. Prints each round and the ratio scalebench / minimal (goal >= 0.98).

    python benchmarks/harness_overhead.py [--model resnet101] [--rounds 3] ...
    python benchmarks/harness_overhead.py --smoke   # seconds: resnet101 at 32 px, batch 2,
        # 1 thread, warm-up 1, 1 iter x 2 trials, 1 round (explicit flags still win)

It writes no files (the FLOPs count goes to scalebench's cache, as in any run).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from scalebench.analysis import stats
from scalebench.hardware.envinfo import cpu_cores
from scalebench.models import workloads
from scalebench.spec.launch import Job
from scalebench.tasks import train
from scalebench.worker import measure
from scalebench.worker.comm import SingleProcessComm

# --smoke: the smallest measurement that still runs both loops
SMOKE = {"model": "resnet101", "batch_size": 2, "image_size": 32, "threads": 1, "warmup": 1,
         "iters": 1, "trials": 2, "rounds": 1}


def minimal_loop(model_name: str, batch: int, size: int, warmup: int, steps: int,
                 device: str = "cpu") -> float:
    """The loop a user would write by hand: no barriers, no windows, one clock around it all."""
    model, _ = workloads.build_model(model_name, size)
    model = model.to(device)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    x = torch.randn(batch, 3, size, size, device=device)
    y = torch.randint(0, 1000, (batch,), device=device)
    for _ in range(warmup):
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
    if device == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(steps):
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
    if device == "cuda":
        torch.cuda.synchronize()
    return batch * steps / (time.perf_counter() - start)


def scalebench_loop(job: Job) -> float:
    result = measure.run(job, SingleProcessComm())
    trials = stats.trial_throughputs(result["window_seconds"],
                                     job.task.global_batch * job.task.iters)
    return statistics.fmean(trials)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="resnet101", choices=list(workloads.MODELS))
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--threads", type=int, default=cpu_cores())
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--json", help="also write the rounds and ratios to this JSON file")
    p.add_argument("--smoke", action="store_true",
                   help="smallest run (seconds), to check that the script still works")
    if p.parse_known_args(argv)[0].smoke:
        p.set_defaults(**SMOKE)
    a = p.parse_args(argv)
    workloads.check_input(a.model, a.image_size, a.batch_size)
    # Model code is not Inception's training output here: the minimal loop uses plain CE.
    if workloads.uses_aux_logits(a.model, a.image_size):
        raise SystemExit("pick an image size below 299 for inception_v3 (no aux head)")
    measure.set_threads(a.threads)
    spec = train.local_job(a.model, a.batch_size, a.image_size, warmup=a.warmup, iters=a.iters,
                           trials=a.trials, threads=a.threads, device=a.device)
    timed_steps = a.iters * a.trials
    ours, theirs = [], []
    print(f"{a.model} {a.image_size}px batch {a.batch_size} on {a.device}, {a.threads} threads, "
          f"{timed_steps} timed steps per measurement, {a.rounds} rounds (A/B alternated)")
    for i in range(a.rounds):
        ours.append(scalebench_loop(spec))
        theirs.append(minimal_loop(a.model, a.batch_size, a.image_size, a.warmup, timed_steps,
                                   a.device))
        print(f"round {i + 1}: scalebench {ours[-1]:.3f} images/s, minimal {theirs[-1]:.3f} "
              f"images/s, ratio {ours[-1] / theirs[-1]:.4f}")
    ratios = [o / t for o, t in zip(ours, theirs, strict=True)]
    print(f"ratio scalebench/minimal: median {statistics.median(ratios):.4f}, "
          f"of means {statistics.fmean(ours) / statistics.fmean(theirs):.4f} (goal >= 0.98)")
    if a.json:
        with open(a.json, "w", encoding="utf-8") as fh:
            json.dump({"model": a.model, "image_size": a.image_size, "batch_size": a.batch_size,
                       "device": a.device, "scalebench_images_per_sec": ours,
                       "minimal_images_per_sec": theirs, "ratios": ratios,
                       "median_ratio": statistics.median(ratios)}, fh)


if __name__ == "__main__":
    main()
