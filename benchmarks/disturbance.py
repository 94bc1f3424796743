"""Disturbance detection: does a record name the CPU hog that ran beside it, and does a quiet
machine leave every record unflagged?

(a) A sweep of the workload beside a CPU hog that takes one core (a child process this script
    starts before the sweep and stops after it; it names itself HOG): every record whose
    windows overlapped the hog (all of them: it runs the whole sweep) should be flagged with
    the hog named. Goal: 18 of 18 with the default workload.
(b) Sweeps on a quiet machine: no record flagged. Goal: 0 of 54 (three sweeps of 18).
It also prints what the edge readings cost (seconds spent reading at a window's edges).

    python benchmarks/disturbance.py [--workload workloads/default.toml] [--quiet-sweeps 3]
    python benchmarks/disturbance.py --smoke   # ddp only, one worker, one model at 32 px,
        # one quiet sweep, a hog spinning a quarter of the time (explicit flags still win;
        # its hog need not be flagged: it checks the pieces run, not what they find)

(b) needs an idle machine: anything else running is, rightly, a disturbance.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from spin import spin_program  # noqa: E402  (benchmarks/spin.py, beside this script)

from scalebench.analysis import disturbance  # noqa: E402

HOG = "sbench-cpuhog"  # the hog's process name (its comm, set through prctl)
SMOKE_DUTY = 0.25  # the smoke's hog spins a quarter of the time: the suite's cores are shared


def hog_words(duty: float) -> str:
    return "one-core" if duty >= 1 else f"{duty:.0%}-of-a-core"
# One thread: a worker with two threads beside the hog stalls at every parallel region (its
# smoke took minutes that way).
SMOKE_FLAGS = ["--frameworks", "ddp", "--models", "resnet101", "--workers", "1",
               "--batch-size", "2", "--image-size", "32", "--warmup", "1", "--iters", "1",
               "--trials", "2", "--no-breakdown", "--threads-per-worker", "1"]


def sweep(workload: str, out: Path, extra: list[str]) -> list[dict]:
    """One `scalebench sweep` in its own process; its ok train records."""
    cmd = [sys.executable, "-m", "scalebench", "sweep", workload, "--out", str(out), "--quiet",
           "--no-report", *extra]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"sweep failed ({done.returncode}): {done.stderr[-2000:]}")
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()
               if line.strip()]
    return [r for r in records if r.get("kind") == "train" and r.get("status") == "ok"]


def hog_named(record: dict) -> bool:
    """Flagged, and the hog named in the cause (the top other process)."""
    return disturbance.is_disturbed(record) and HOG in (disturbance.record_text(record) or "")


def hog_listed(record: dict) -> bool:
    """Flagged, and the hog among the node's top other processes."""
    return disturbance.is_disturbed(record) and any(
        name == HOG for node in record["disturbance"].get("nodes") or ()
        for name, _ in node.get("top") or ())


def costs(records: list[dict]) -> tuple[float, float]:
    """(mean, max) seconds spent reading at one window's edges, over the records."""
    means = [r["disturbance"]["edge_seconds_mean"] for r in records
             if r["disturbance"].get("edge_seconds_mean") is not None]
    peaks = [r["disturbance"]["edge_seconds_max"] for r in records
             if r["disturbance"].get("edge_seconds_max") is not None]
    return (sum(means) / len(means) if means else float("nan"),
            max(peaks) if peaks else float("nan"))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workload", default=str(REPO / "workloads" / "default.toml"))
    p.add_argument("--quiet-sweeps", type=int, default=None)
    p.add_argument("--out", help="folder for the sweeps (default: a temporary one)")
    p.add_argument("--hog-duty", type=float, default=None,
                   help="the share of a core the hog spins (default 1; --smoke 0.25)")
    p.add_argument("--smoke", action="store_true")
    args = p.parse_args(argv)
    duty = args.hog_duty if args.hog_duty is not None else (SMOKE_DUTY if args.smoke else 1.0)
    if not 0 < duty <= 1:
        print("--hog-duty: expected a share of a core in (0, 1]", file=sys.stderr)
        return 2
    quiet_sweeps = args.quiet_sweeps if args.quiet_sweeps is not None else \
        (1 if args.smoke else 3)
    if quiet_sweeps < 0:
        print("--quiet-sweeps: expected an integer >= 0", file=sys.stderr)
        return 2
    extra = SMOKE_FLAGS if args.smoke else []
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.out or tmp)
        hog = subprocess.Popen([sys.executable, "-c", spin_program(duty, HOG)])
        try:
            time.sleep(0.5)
            started = time.time()
            hogged = sweep(args.workload, out / "hog", extra)
        finally:
            hog.kill()
            hog.wait()
        named = sum(map(hog_named, hogged))
        listed = sum(map(hog_listed, hogged))
        print(f"(a) beside a {hog_words(duty)} CPU hog ({HOG}, {time.time() - started:.0f} s): "
              f"{named} of {len(hogged)} records flagged with the hog named as the top other "
              f"process (goal: all); {listed} of {len(hogged)} with it among the top 5")
        for r in hogged:
            if not hog_named(r):
                print(f"    {r['run_id']}: {disturbance.record_text(r) or 'not flagged'}")
        quiet: list[dict] = []
        for i in range(quiet_sweeps):
            quiet += sweep(args.workload, out / f"quiet{i + 1}", extra)
        flagged = [r for r in quiet if disturbance.is_disturbed(r)]
        print(f"(b) {quiet_sweeps} sweep{'s' if quiet_sweeps != 1 else ''} on this machine "
              f"without the hog: {len(flagged)} of {len(quiet)} records flagged (goal: 0)")
        for r in flagged:
            print(f"    {r['run_id']}: {disturbance.record_text(r)}")
        mean, peak = costs(hogged + quiet)
        print(f"edge readings: {1e3 * mean:.2f} ms per window on average, at most "
              f"{1e3 * peak:.2f} ms (both edges, outside the timed windows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
