"""The git history store under a crowd, and prune on a large store (printed figures, not a
timed test).

Crowd: a bare repository in a temporary folder; W worker processes (each its own cache, as W CI
runners would have) add S sweeps each through `history.add` on `git:REPO#BRANCH`, all starting
at the same moment. Each sweep is results/reference's train records with a fresh sweep id and
timestamps (6 rows; each runner its own host name, as a run's row id holds its host).
Printed: the sweeps present exactly once (goal: all of them), rows lost or doubled (goal:
none), the pushes the remote refused and were retried (and so attempts per add: 1 would be no
wasted work), and the time per add: each add's own duration (mean, p90), and the crowd's wall
time over its adds, against a lone add's (the median of S adds by one process on a fresh
repository; goal: at most 3x). All processes share this machine's cores: where W exceeds them,
the crowd's times measure the CPU's sharing as much as the store's.

Prune: a store of R rows (reference rows, timestamps spread evenly over 365 days) pruned to the
last 30 days, on a file store and on a git store: every row of the last 30 days kept, every
older one gone (the check), and the time `history prune` took.

    python benchmarks/ci_history.py [--workers 8] [--sweeps 5] [--rows 20000] [--smoke]
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import hashlib
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scalebench import cli  # noqa: E402
from scalebench.records import results  # noqa: E402
from scalebench.tracking import history, store, store_format  # noqa: E402

REFERENCE = ROOT / "results" / "reference" / "results.jsonl"
BRANCH = "scalebench-history"
STAMP = "%Y-%m-%dT%H:%M:%S%z"


def reference() -> list[dict]:
    return [r for r in results.load([REFERENCE])[0] if r.get("kind") == "train"]


def fresh_sweep(records: list[dict], when: datetime, host: str) -> list[dict]:
    """The records as a new sweep on `host`: a sweep id of its own, timestamps from `when` on.
    (A run's row id is its configuration, time, host and figures: two runners' sweeps in the
    same second differ by their host.)"""
    sweep_id = uuid.uuid4().hex[:12]
    out = []
    for i, r in enumerate(records):
        r = copy.deepcopy(r)
        r["sweep_id"] = sweep_id
        r["env"] = {**r["env"], "hostname": host}
        r["timestamp"] = (when + timedelta(seconds=30 * i)).strftime(STAMP)
        out.append(r)
    return out


def run_worker(location: str, go: Path, sweeps: int, host: str) -> None:
    """One process of the crowd: once `go` exists, S adds, each timed; prints its sweep ids,
    times and refusals."""
    records = reference()
    target = store.open_store(location)
    (go.parent / f"ready-{host}").touch()
    while not go.exists():
        time.sleep(0.001)
    ids, seconds, present = [], [], 0
    now = datetime.now(timezone.utc)
    for k in range(sweeps):
        sweep = fresh_sweep(records, now + timedelta(hours=k), host)
        began = time.perf_counter()
        present += history.add(target, sweep)[1]
        seconds.append(time.perf_counter() - began)
        ids.append(sweep[0]["sweep_id"])
    print(json.dumps({"sweeps": ids, "seconds": seconds, "refused": target.refused,
                      "present": present}))


def crowd(tmp: Path, name: str, workers: int, sweeps: int) -> tuple[list[dict], float, str]:
    """W processes adding S sweeps each at once to a fresh bare repository: their reports, the
    wall time from the common start to the last one's end, and the store's location."""
    repo = tmp / f"{name}.git"
    subprocess.run(["git", "init", "--quiet", "--bare", str(repo)], check=True)
    location = f"git:{repo}#{BRANCH}"
    go = tmp / f"{name}-go"
    procs = []
    for i in range(workers):
        env = {**os.environ, "SCALEBENCH_CACHE": str(tmp / f"{name}-cache-{i}"),
               "PYTHONPATH": str(ROOT)}
        procs.append(subprocess.Popen(
            [sys.executable, __file__, "--worker", location, str(go), str(sweeps),
             f"{name}-runner-{i}"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    while len(list(tmp.glob(f"ready-{name}-runner-*"))) < workers:  # every one imported
        if any(p.poll() is not None for p in procs):
            break
        time.sleep(0.01)
    start = time.time()
    go.touch()
    reports = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        if p.returncode != 0:
            raise SystemExit(f"a worker failed (exit {p.returncode}):\n{err}")
        reports.append(json.loads(out.strip().splitlines()[-1]))
    return reports, time.time() - start, location


def check_crowd(location: str, reports: list[dict], per_sweep: int) -> tuple[int, int, int, int]:
    """(sweeps present exactly once, sweeps expected, rows lost, rows doubled)."""
    rows, _ = history.load_store(store.open_store(location))
    expected = [s for r in reports for s in r["sweeps"]]
    by_sweep: dict[str, list[dict]] = {}
    for row in rows:
        by_sweep.setdefault(row["sweep_id"], []).append(row)
    once = sum(1 for s in expected if len(by_sweep.get(s, ())) == per_sweep
               and len({r["id"] for r in by_sweep[s]}) == per_sweep)
    lost = sum(max(0, per_sweep - len({r["id"] for r in by_sweep.get(s, ())})) for s in expected)
    doubled = len(rows) - len({r["id"] for r in rows})
    return once, len(expected), lost, doubled


def big_store(rows: int, now: datetime) -> list[dict]:
    """R history rows from the reference sweep, timestamps spread evenly over the last 365 days
    (each copy a fresh id and sweep id)."""
    base = history.rows_from_records(reference())
    out = []
    step = timedelta(days=365) / rows
    for i in range(rows):
        row = copy.deepcopy(base[i % len(base)])
        when = now - step * (rows - 1 - i)
        row["timestamp"] = when.strftime(STAMP)
        row["sweep_id"] = f"big-{i // len(base)}"
        row["id"] = hashlib.sha256(f"{row['id']}-{i}".encode()).hexdigest()[:16]
        out.append(row)
    return out


def prune_check(location: str, rows: list[dict], days: int, now: datetime) -> tuple[str, float]:
    """Prune the store to `days` and check it: (the check in words, seconds prune took)."""
    said = io.StringIO()
    began = time.perf_counter()
    with contextlib.redirect_stdout(said):
        code = cli.main(["history", "prune", "--store", location, "--keep-days", str(days)])
    seconds = time.perf_counter() - began
    kept = {r["id"] for r in history.load_store(store.open_store(location))[0]}
    since = now - timedelta(days=days)
    recent = {r["id"] for r in rows if datetime.strptime(r["timestamp"], STAMP) >= since}
    ok = code == 0 and kept == recent
    return (f"{'PASS' if ok else 'FAIL'}: {len(kept & recent)} of {len(recent)} rows of the last "
            f"{days} days kept, {len(kept - recent)} older rows kept; prune said: "
            f"{said.getvalue().strip().replace(f' from {location}', '')}"), seconds


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--sweeps", type=int, default=5, help="sweeps each worker adds")
    p.add_argument("--rows", type=int, default=20_000, help="rows of the store to prune (0: no "
                   "prune)")
    p.add_argument("--smoke", action="store_true", help="2 workers x 2 sweeps, 200 rows")
    p.add_argument("--worker", nargs=4, metavar=("LOCATION", "GO", "SWEEPS", "HOST"),
                   help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        run_worker(args.worker[0], Path(args.worker[1]), int(args.worker[2]), args.worker[3])
        return 0
    workers, sweeps, n_rows = (2, 2, 200) if args.smoke else (args.workers, args.sweeps,
                                                              args.rows)
    per_sweep = len(reference())
    with tempfile.TemporaryDirectory(prefix="scalebench-ci-history-") as folder:
        tmp = Path(folder)
        os.environ["SCALEBENCH_CACHE"] = str(tmp / "cache")
        alone, _, _ = crowd(tmp, "lone", 1, sweeps)
        lone = statistics.median(alone[0]["seconds"])
        reports, wall, location = crowd(tmp, "crowd", workers, sweeps)
        once, expected, lost, doubled = check_crowd(location, reports, per_sweep)
        each = sorted(s for r in reports for s in r["seconds"])
        refused = sum(r["refused"] for r in reports)
        adds = len(each)
        print(f"git store crowd: {workers} processes x {sweeps} sweeps ({per_sweep} rows each) "
              "at once, one bare repository, a cache per process")
        print("| figure | value | goal |")
        print("|---|---|---|")
        print(f"| sweeps present exactly once | {once} of {expected} | {expected} of {expected} |")
        print(f"| rows lost / doubled | {lost} / {doubled} | 0 / 0 |")
        print(f"| rows an add found already there | {sum(r['present'] for r in reports)} | 0 |")
        print(f"| pushes refused and retried | {refused} ({(adds + refused) / adds:.2f} attempts "
              "per add) | |")
        print(f"| lone add (median of {sweeps}) | {lone:.3f} s | |")
        print(f"| crowd wall / adds | {wall / adds:.3f} s ({wall / adds / lone:.2f}x lone) "
              "| at most 3x |")
        print(f"| one add in the crowd, mean | {statistics.mean(each):.3f} s "
              f"({statistics.mean(each) / lone:.2f}x lone) | |")
        print(f"| one add in the crowd, p90 | {each[int(0.9 * (adds - 1))]:.3f} s "
              f"({each[int(0.9 * (adds - 1))] / lone:.2f}x lone) | |")

        if not n_rows:
            return 0
        now = datetime.now(timezone.utc)
        rows = big_store(n_rows, now)
        print(f"\nprune: a store of {n_rows} rows over 365 days, --keep-days 30")
        print("| store | check | prune took |")
        print("|---|---|---|")
        path = tmp / "big.jsonl"
        path.write_text(store_format.encode(rows))
        size = path.stat().st_size / 1e6
        repo = tmp / "big.git"
        subprocess.run(["git", "init", "--quiet", "--bare", str(repo)], check=True)
        git_location = f"git:{repo}#{BRANCH}"
        store.open_store(git_location).add_entries(rows, "a large store")
        for label, location in (("file", str(path)), ("git", git_location)):
            check, seconds = prune_check(location, rows, 30, now)
            print(f"| {label} ({size:.0f} MB before) | {check} | {seconds:.2f} s |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
