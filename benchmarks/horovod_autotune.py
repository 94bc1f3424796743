"""`scalebench tune` against Horovod's own autotuner (HOROVOD_AUTOTUNE=1), on one cell.

1. `scalebench tune` races Horovod's fusion threshold and cycle time on the cell; its winner and
   the training steps it ran (per worker, warm-ups and confirmation included) are kept.
2. Horovod's autotuner runs in minimal_horovod_loop.py under `horovodrun --autotune` with its
   defaults (3 warm-up samples, 10 steps per sample, 5 samples per score, 20 Bayesian samples)
   until it logs "Autotuner: Best params"; the step at which it did is read from the loop's
   per-step end times. The knobs scalebench does not search on one node (hierarchical
   allreduce and allgather, torus allreduce, the response cache) are held at their defaults
   for the autotuner too, as Horovod's docs describe for fixed parameters.
3. The default, scalebench's winner and the autotuner's best are measured side by side through
   scalebench (one launch each per round, order shuffled per round), and compared paired.

Goal (issue "Each framework at its best"): scalebench's winner at least as fast as the
autotuner's best, with at most a third of its steps.

    python benchmarks/horovod_autotune.py [--model resnet101] [--budget 300] [--rounds 5]
    python benchmarks/horovod_autotune.py --autotune-from OLD/autotune   # reuse its autotune run
    python benchmarks/horovod_autotune.py --smoke   # tiny sizes; the autotuner cut short
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import re
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from scalebench.frameworks import process
from scalebench.frameworks.horovod.install import check_installation, horovodrun_path
from scalebench.hardware import devices
from scalebench.hardware.envinfo import cpu_model
from scalebench.spec import config
from scalebench.tuning import run as tune_run
from scalebench.tuning.page import interval
from scalebench.tuning.race import Candidate, Race, ratio_interval

HERE = Path(__file__).resolve().parent
# Horovod 0.28's ParameterManager: a score is the median of 5 samples of steps_per_sample steps
SAMPLES_PER_SCORE = 5
# horovodrun prefixes a rank's lines with "[0]<stdout>:"; Horovod's log pads the microseconds
# to 6 characters with spaces
BEST_LINE = re.compile(r"^(?:\[\d+\]<stdout>:)?\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\.([ \d]{6}): "
                       r"I [^\]]*\] Autotuner: Best params \[(.*)\] (\S+)$")


def autotune(a, out: Path, threads: int) -> dict:
    """Horovod's autotuner in the minimal loop: the best it logged and the step it finished at."""
    out.mkdir(parents=True, exist_ok=True)
    log, times, result = out / "autotune.csv", out / "step_times.json", out / "minimal.json"
    cmd = [horovodrun_path(), "-np", str(a.workers), "-H", f"localhost:{a.workers}", "--gloo",
           sys.executable, str(HERE / "minimal_horovod_loop.py"), str(result), a.model,
           str(a.image_size), str(a.batch_size), str(a.autotune_steps), "0", str(threads),
           str(times)]
    env = {**process.base_env(threads), "HOROVOD_AUTOTUNE": "1",
           "HOROVOD_AUTOTUNE_LOG": str(log), "HOROVOD_LOG_LEVEL": "info",
           "HOROVOD_HIERARCHICAL_ALLREDUCE": "0", "HOROVOD_HIERARCHICAL_ALLGATHER": "0",
           "HOROVOD_TORUS_ALLREDUCE": "0", "HOROVOD_CACHE_CAPACITY": "1024"}
    if a.steps_per_sample:
        env["HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE"] = str(a.steps_per_sample)
    began = time.monotonic()
    proc = process.run_isolated(cmd, env, 7200, out)
    seconds = time.monotonic() - began
    if proc.returncode != 0 or not times.is_file():
        raise SystemExit(f"the autotune loop failed: {proc.stderr_tail}")
    return read_autotune(out, seconds)


def read_autotune(out: Path, seconds: float) -> dict:
    """What an autotune run left in `out`: its best and the step it finished at."""
    log, times = out / "autotune.csv", out / "step_times.json"
    ended = json.loads(times.read_text())
    best = None
    for line in (out / "stdout.log").read_text(errors="replace").splitlines():
        m = BEST_LINE.match(line.strip())
        if m:
            best = m
    rows = [r.split(",") for r in log.read_text().splitlines()[1:]] if log.is_file() else []
    if best is None:
        return {"finished": False, "steps": len(ended), "seconds": seconds, "scores": len(rows)}
    at = time.mktime(datetime.strptime(best.group(1), "%Y-%m-%d %H:%M:%S").timetuple()) \
        + int(best.group(2)) / 1e6
    finished_at = next((i + 1 for i, t in enumerate(ended) if t >= at), len(ended))
    cycle, fusion = best_settings(best.group(3))
    return {"finished": True, "steps": finished_at, "steps_run": len(ended), "seconds": seconds,
            "seconds_to_finish": at - (ended[0] if ended else at), "scores": len(rows) - 1,
            "fusion_threshold_mb": fusion, "cycle_time_ms": cycle,
            "seconds_per_step": (ended[-1] - ended[0]) / max(1, len(ended) - 1)}


def best_settings(params: str) -> tuple[float, float]:
    """(cycle time ms, fusion threshold MB) of the autotuner's "Best params [.., 3.5 ms, 32 mb]"."""
    items = [x.strip() for x in params.split(",")]
    return float(items[-2].removesuffix(" ms")), float(items[-1].removesuffix(" mb"))


def side_by_side(sweep, cell_out: Path, candidates: list[Candidate], rounds: int) -> dict:
    """Every candidate once per round (own launch, order shuffled), paired with the default."""
    device = devices.resolve("cpu")
    cell = tune_run.plan_cells(sweep, device, "fusion_threshold_mb,cycle_time_ms")[0]
    tuner = tune_run.Tuner(sweep, device, cell_out, budget=1e9, seed=0, live=False)
    result = tune_run.CellResult(cell, Race(candidates))
    slots = []
    try:
        for _ in range(rounds):
            order = list(candidates)
            tuner.rng.shuffle(order)
            slot = tune_run.round_of_launches(tuner, cell, result, order,
                                              tune_run.ROUNDS_PER_LAUNCH, "compare")
            if len(slot) == len(candidates):
                slots.append(slot)
    finally:
        tuner.close()
    return {"slots": slots}


def paired(slots: list[dict], a: str, b: str) -> dict[str, float | None]:
    """a / b over the slots: the geometric mean ratio and its 95% interval."""
    ratio, low, high = ratio_interval([math.log(s[a] / s[b]) for s in slots])
    return {"ratio": ratio, "low": low, "high": high}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="resnet101")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--iters", type=int, default=2, help="steps per window")
    p.add_argument("--budget", type=float, default=300.0, help="scalebench tune's seconds")
    p.add_argument("--autotune-steps", type=int, default=1500,
                   help="the most steps the autotuner gets (it needs about 1,200 by default)")
    p.add_argument("--steps-per-sample", type=int, default=0,
                   help="HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE (0: Horovod's default, 10)")
    p.add_argument("--rounds", type=int, default=5, help="rounds of the side-by-side launches")
    p.add_argument("--autotune-from", default=None, metavar="DIR",
                   help="the autotune/ folder of an earlier run of this script (same cell): its "
                        "result is read instead of running the autotuner again (~15 min here)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", default=None)
    p.add_argument("--smoke", action="store_true",
                   help="ResNet-101 at 32 px, 1 step per sample, 1 round: checks the script runs")
    a = p.parse_args(argv)
    if a.smoke:
        a.model, a.image_size, a.batch_size, a.iters, a.rounds = "resnet101", 32, 2, 1, 1
        a.budget, a.autotune_steps, a.steps_per_sample = 60.0, 120, 1
    ok, reason = check_installation()
    if not ok:
        raise SystemExit(reason)
    out = Path(a.out or tempfile.mkdtemp(prefix="horovod-autotune-"))
    threads = devices.threads_per_worker(devices.resolve("cpu"), a.workers, None)
    sweep = config.build_spec({"frameworks": "horovod", "models": a.model,
                               "workers": str(a.workers), "batch_size": a.batch_size,
                               "image_size": a.image_size, "warmup": 1, "iters": a.iters,
                               "trials": 2, "timeout": 900, "threads_per_worker": threads,
                               "device": "cpu"})
    print(f"CPU: {cpu_model()}; horovod/{a.model}/w{a.workers}, {threads} thread each, batch "
          f"{a.batch_size}, {a.image_size} px")

    began = time.monotonic()
    outcome = tune_run.run_tune(sweep, out / "tune", a.budget, "fusion_threshold_mb,cycle_time_ms",
                                a.seed, stream=sys.stderr, live=False)
    tuned = json.loads((out / "tune" / "tune.json").read_text())["cells"][0]
    cell = outcome.cells[0]
    ours_steps = tuned["steps"]
    print(f"scalebench tune: winner {cell.winner} ({tuned['verdict']}); {ours_steps} steps per "
          f"worker in {len(tuned['launches'])} launches, {time.monotonic() - began:.0f} s")

    if a.autotune_from:
        at = read_autotune(Path(a.autotune_from), math.nan)
        print(f"Horovod autotune: read from an earlier run in {a.autotune_from}")
    else:
        at = autotune(a, out / "autotune", threads)
    if not at["finished"]:
        print(f"Horovod autotune: not finished after {at['steps']} steps ({at['scores']} scores "
              f"logged, {at['seconds']:.0f} s); raise --autotune-steps")
        return 1
    print(f"Horovod autotune: best fusion_threshold_mb={at['fusion_threshold_mb']:g}, "
          f"cycle_time_ms={at['cycle_time_ms']:g} after {at['scores']} scores; finished at step "
          f"{at['steps']} ({at['seconds_to_finish']:.0f} s of training)")

    default = next(c for c in cell.race.candidates if c.default)
    ours = cell.race.candidate(cell.winner)
    theirs = Candidate("autotune", {"fusion_threshold_mb": at["fusion_threshold_mb"],
                                    "cycle_time_ms": at["cycle_time_ms"]})
    candidates = [default] + ([ours] if ours.name != default.name else []) + [theirs]
    compared = side_by_side(dataclasses.replace(sweep), out / "compare", candidates, a.rounds)
    slots = compared["slots"]
    if not slots:
        print("side by side: no round where every launch succeeded")
        return 1
    vs_theirs = paired(slots, ours.name, theirs.name)
    print(f"side by side, {len(slots)} rounds of launches (95% intervals):")
    print(f"  scalebench's winner vs the default: {interval(paired(slots, ours.name, default.name))}"
          if ours.name != default.name else "  scalebench's winner is the default")
    print(f"  autotune's best vs the default: {interval(paired(slots, theirs.name, default.name))}")
    print(f"  scalebench's winner vs autotune's best: {interval(vs_theirs)}")
    as_fast = vs_theirs["high"] is None or vs_theirs["high"] >= 1.0
    share = ours_steps / at["steps"]
    print(f"steps: scalebench {ours_steps}, autotune {at['steps']} ({share:.2f} of autotune's; "
          f"goal <= 0.33); scalebench's winner at least as fast (not significantly slower): "
          f"{'yes' if as_fast else 'NO'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
