"""Horovod through scalebench vs. a minimal hand-written Horovod loop, alternated in one run.

Same model, per-worker batch, image size, workers and threads (max(1, cores // workers), or
--threads).
Prints each round and the ratio scalebench / minimal (goal >= 0.98) with its 95% interval
over rounds; the order alternates (A B, B A, ...) so that drift and a warm page cache favour
neither. With --setup-times it
also times scripts/install_horovod.sh against a cold (empty) and a warm wheel cache.

    python benchmarks/horovod_overhead.py [--model resnet101] [--workers 2] [--rounds 3]
    python benchmarks/horovod_overhead.py --smoke   # under a minute: resnet101 at 32 px, batch
        # 2/worker, 1 worker of 1 thread, warm-up 1, 1 iter x 2 trials, 1 round (explicit flags
        # still win);
        # it also runs minimal_horovod_loop.py under horovodrun once

Both runs of each round go to a temporary folder, removed at the end.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scalebench.frameworks import horovod, process
from scalebench.frameworks.horovod.install import check_installation, horovodrun_path
from scalebench.hardware import devices
from scalebench.spec import config
from scalebench.tasks import train
from scalebench.tuning.race import ratio_interval

HERE = Path(__file__).resolve().parent
# --smoke: the smallest run that still launches both loops under horovodrun (one worker of one
# thread: two workers only added two torch start-ups to what the suite checks)
SMOKE = {"model": "resnet101", "workers": 1, "threads": 1, "batch_size": 2, "image_size": 32,
         "warmup": 1, "iters": 1, "trials": 2, "rounds": 1}


def scalebench_run(a, out: Path) -> float:
    sweep = config.build_spec({
        "frameworks": "horovod", "models": a.model, "workers": str(a.workers),
        "batch_size": a.batch_size, "image_size": a.image_size, "warmup": a.warmup,
        "iters": a.iters, "trials": a.trials, "device": "cpu",
        **({"threads_per_worker": a.threads} if a.threads else {})})
    [job] = train.plan(sweep, devices.resolve("cpu"))
    outcome = horovod.FRAMEWORK.launch(job, out)
    if outcome.status != "ok":
        raise SystemExit(f"scalebench run failed: {outcome.error}")
    return train.build_record(job, outcome, {})["images_per_sec"]


def minimal_run(a, out: Path, threads: int) -> float:
    out.mkdir(parents=True, exist_ok=True)
    result = out / "minimal.json"
    steps = a.iters * a.trials
    cmd = [horovodrun_path(), "-np", str(a.workers), "-H", f"localhost:{a.workers}",
           "--gloo", sys.executable, str(HERE / "minimal_horovod_loop.py"), str(result), a.model,
           str(a.image_size), str(a.batch_size), str(steps), str(a.warmup), str(threads)]
    proc = process.run_isolated(cmd, process.base_env(threads), 1800, out)
    if proc.returncode != 0 or not result.is_file():
        raise SystemExit(f"minimal loop failed: {proc.stderr_tail}")
    return json.loads(result.read_text())["images_per_sec"]


def setup_times(venv: str) -> None:
    script = HERE.parent / "scripts" / "install_horovod.sh"
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "SCALEBENCH_CACHE": cache}
        for label in ("cold cache (build)", "warm cache"):
            start = time.monotonic()
            subprocess.run(["bash", str(script), venv, "--force"], env=env, check=True,
                           stdout=subprocess.DEVNULL)
            print(f"install_horovod.sh with a {label}: {time.monotonic() - start:.0f} s")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="resnet101")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--threads", type=int, default=None,
                   help="threads per worker (default: the harness's policy, cores / workers)")
    p.add_argument("--setup-times", action="store_true")
    p.add_argument("--smoke", action="store_true",
                   help="smallest run (under a minute), to check that the script still works")
    if p.parse_known_args(argv)[0].smoke:
        p.set_defaults(**SMOKE)
    a = p.parse_args(argv)
    ok, reason = check_installation()
    if not ok:
        raise SystemExit(reason)
    threads = devices.threads_per_worker(devices.resolve("cpu"), a.workers, a.threads)
    print(f"{a.model} {a.image_size}px batch {a.batch_size}/worker, {a.workers} workers x "
          f"{threads} threads, {a.iters * a.trials} timed steps, {a.rounds} rounds (order "
          f"alternated)")
    ours, theirs = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(a.rounds):
            if i % 2 == 0:
                ours.append(scalebench_run(a, Path(tmp) / f"sb{i}"))
                theirs.append(minimal_run(a, Path(tmp) / f"min{i}", threads))
            else:
                theirs.append(minimal_run(a, Path(tmp) / f"min{i}", threads))
                ours.append(scalebench_run(a, Path(tmp) / f"sb{i}"))
            print(f"round {i + 1} ({'scalebench first' if i % 2 == 0 else 'minimal first'}): "
                  f"scalebench {ours[-1]:.3f} images/s, minimal {theirs[-1]:.3f} images/s, "
                  f"ratio {ours[-1] / theirs[-1]:.4f}")
    ratios = [o / t for o, t in zip(ours, theirs, strict=True)]
    ratio, low, high = ratio_interval([math.log(r) for r in ratios])
    interval = "" if low is None else f" [{low:.4f}, {high:.4f}] (95%, {len(ratios)} rounds)"
    print(f"ratio scalebench/minimal: geometric mean {ratio:.4f}{interval}, median "
          f"{statistics.median(ratios):.4f} (goal >= 0.98)")
    if a.setup_times:
        setup_times(str(Path(sys.executable).parent.parent))


if __name__ == "__main__":
    main()
