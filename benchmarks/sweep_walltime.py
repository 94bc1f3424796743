"""Sweep wall time, grouped vs isolated launches, in one run.

Runs the same workload (default: workloads/default.toml) twice through the real sweep
(sweep.run_sweep): once with --launch grouped, once isolated (the order alternates with
--rounds). Prints each sweep's wall time, the share of it spent in warm-up and timed windows
(per run: warm-up seconds + the slowest rank's timed windows, including the breakdown's no-sync
windows; summed), and the ratio
grouped / isolated. Goals on a 2-core CPU machine: ratio <= 0.65, timed share of the grouped
sweep >= 50%.

    python benchmarks/sweep_walltime.py [--workload workloads/default.toml] [--rounds 1]
        [--also-without-breakdown]
"""

from __future__ import annotations

import argparse
import io
import time
from pathlib import Path

from scalebench import config
from scalebench.progress import Progress
from scalebench.sweep import run_sweep

GOAL_RATIO = 0.65
GOAL_TIMED_SHARE = 0.50
MODES = ("grouped", "isolated")


def _slowest(windows: list | None) -> float:
    if not windows:
        return 0.0
    return sum(max(rank[t] for rank in windows) for t in range(len(windows[0])))


def timed_seconds(record: dict) -> float:
    """Warm-up plus every timed window of one run (slowest rank per window): the throughput
    windows, the no-sync windows of the breakdown and DDP's wrapped one-worker windows."""
    return (float(record.get("warmup_seconds") or 0.0) + _slowest(record.get("window_seconds"))
            + _slowest(record.get("nosync_window_seconds"))
            + sum(record["global_batch"] * record["iters"] / t
                  for t in record.get("trial_wrapped_images_per_sec") or []))


def one_sweep(values: dict, mode: str, out: Path) -> tuple[float, float, int, int]:
    spec = config.build_spec({**values, "launch": mode, "out": str(out), "quiet": True})
    start = time.monotonic()
    outcome = run_sweep(spec, Progress(0, stream=io.StringIO(), live=False))
    wall = time.monotonic() - start
    ok = [r for r in outcome.records if r["status"] == "ok"]
    startup = sum(float(r.get("startup_seconds") or 0.0) for r in ok)
    print(f"  {mode}: recorded start-up (launch to first step, per group or run) {startup:.1f} s",
          flush=True)
    return wall, sum(timed_seconds(r) for r in ok), len(ok), len(outcome.records)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workload", default="workloads/default.toml")
    p.add_argument("--frameworks", help="override the workload's frameworks (comma list)")
    p.add_argument("--models", help="override the workload's models (comma list)")
    p.add_argument("--rounds", type=int, default=1, help="pairs of sweeps; order alternates")
    p.add_argument("--out", default="results/sweep-walltime")
    p.add_argument("--also-without-breakdown", action="store_true",
                   help="then one more grouped sweep with --no-breakdown: the breakdown's cost")
    a = p.parse_args()
    values = config.load_workload(a.workload)
    for key in ("frameworks", "models"):
        if getattr(a, key):
            values[key] = getattr(a, key)
    totals = {mode: [0.0, 0.0] for mode in MODES}
    for round_ in range(a.rounds):
        order = MODES if round_ % 2 == 0 else MODES[::-1]
        for mode in order:
            wall, timed, ok, n = one_sweep(values, mode, Path(a.out) / f"{mode}-{round_ + 1}")
            totals[mode][0] += wall
            totals[mode][1] += timed
            print(f"round {round_ + 1} {mode:8s}: {ok} of {n} runs ok, wall {wall:7.1f} s, "
                  f"warm-up + timed {timed:7.1f} s ({timed / wall:.1%})", flush=True)
    grouped, isolated = totals["grouped"], totals["isolated"]
    ratio = grouped[0] / isolated[0]
    share = grouped[1] / grouped[0]
    print(f"wall time grouped / isolated: {ratio:.3f} (goal <= {GOAL_RATIO}); timed share of "
          f"the grouped sweep {share:.1%} (goal >= {GOAL_TIMED_SHARE:.0%}); isolated "
          f"{isolated[1] / isolated[0]:.1%}")
    if a.also_without_breakdown:
        wall, timed, ok, n = one_sweep({**values, "breakdown": False}, "grouped",
                                       Path(a.out) / "grouped-no-breakdown")
        with_it = grouped[0] / a.rounds
        print(f"grouped --no-breakdown: {ok} of {n} runs ok, wall {wall:7.1f} s, warm-up + timed "
              f"{timed:7.1f} s ({timed / wall:.1%}); the breakdown's windows add "
              f"{with_it - wall:.1f} s ({with_it / wall - 1:+.1%}) to the grouped sweep")


if __name__ == "__main__":
    main()
