"""Sweep wall time, grouped vs isolated launches, in one run.

Runs the same workload (default: workloads/default.toml) twice through the real sweep
(sweep.run_sweep): once with --launch grouped, once isolated (the order alternates with
--rounds). Prints each sweep's wall time, the share of it spent in warm-up and timed windows
(per run: warm-up seconds + the slowest rank's timed windows, including the breakdown's no-sync
windows and DDP's wrapped one-worker windows, with their warm-ups; summed), and the ratio
grouped / isolated. Goals on a 2-core CPU machine: ratio <= 0.65, timed share of the grouped
sweep >= 50%.

Then where each sweep's wall time went, from the records' phase_seconds: per-configuration
work (build, wrap, warm-ups, windows, gather: the same in both modes), the start-up before the
first build of each launch, and the rest (teardown, cluster start and stop, records, reports);
how much of the saving came from launches and how much from per-configuration work, and
the per-launch overhead at which this workload's per-configuration work would meet the goal
(grouping saves launches, so the cheaper a launch, the closer the ratio stays to 1).

Then whether grouping changes what is measured: per configuration, its images/s grouped against
isolated (geometric mean over the rounds), and over the configurations a paired two-sided
Wilcoxon signed-rank test on log(grouped / isolated) with the geometric-mean shift. Goal: no
shift that is both significant (p < 0.01) and beyond 10%. The test needs at least 8
configurations to reach p < 0.01 (run it on a workload of 2 models x 2 worker counts x 2
frameworks or more: `--models resnet101,vgg16` with the default workload's 1, 2 workers and
DDP and Horovod); with fewer it prints the ratios and says so. One process's trials cannot
tell launch-to-launch noise from a real difference, hence across configurations; the launches
of one sweep share the machine's state of the moment, so on a noisy machine a whole sweep can
come out a few percent apart (measured: all 8 grouped runs 2-13% slower once, p = 0.0078),
which is why a shift must also exceed 10%. A light model (Inception V3 at 75 px, windows of a
fraction of a second) measured 6-30% faster grouped: a fresh process is still warm-up-bound.

    python benchmarks/sweep_walltime.py [--workload workloads/default.toml] [--rounds 1]
        [--also-without-breakdown]
    python benchmarks/sweep_walltime.py --smoke [--out DIR]   # under a minute: the workload
        # cut to DDP, resnet101 at 32 px, batch 2, 1 worker x 1 thread, warm-up 1, 1 iter x 2
        # trials, no breakdown, no reports (--frameworks / --models still override it); one
        # grouped and one isolated sweep into a temporary folder (removed at the end) unless
        # --out is given
"""

from __future__ import annotations

import argparse
import io
import math
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from scalebench.running.progress import Progress
from scalebench.running.sweep import run_sweep
from scalebench.spec import config, identity

GOAL_RATIO = 0.65
GOAL_TIMED_SHARE = 0.50
GOAL_SHIFT = 0.10  # grouped vs isolated images/s: a significant shift must stay within this
ALPHA = 0.01
MODES = ("grouped", "isolated")
# --smoke: the workload's values replaced by the smallest sweep that still measures a run
# (no breakdown windows, no reports)
SMOKE_VALUES = {"frameworks": ["ddp"], "models": ["resnet101"], "workers": [1], "batch_size": 2,
                "image_size": 32, "warmup": 1, "iters": 1, "trials": 2, "threads_per_worker": 1,
                "breakdown": False, "report": False}


def _slowest(windows: list | None) -> float:
    if not windows:
        return 0.0
    return sum(max(rank[t] for rank in windows) for t in range(len(windows[0])))


EXTRA_WARMUPS = ("wrapped_warmup", "nosync_warmup")  # phases: warm-ups of the extra windows


def timed_seconds(record: dict) -> float:
    """Warm-up plus every timed window of one run (slowest rank per window): the throughput
    windows, the no-sync windows of the breakdown and DDP's wrapped one-worker windows, and
    the warm-ups of those extra windows."""
    phases = record.get("phase_seconds") or {}
    return (float(record.get("warmup_seconds") or 0.0) + _slowest(record.get("window_seconds"))
            + _slowest(record.get("nosync_window_seconds"))
            + sum(record["global_batch"] * record["iters"] / t
                  for t in record.get("trial_wrapped_images_per_sec") or [])
            + sum(float(phases.get(name, 0.0)) for name in EXTRA_WARMUPS))


def first_in_launch(record: dict) -> bool:
    return record.get("launch") != "grouped" or record.get("group_position") == 1


@dataclass
class Account:
    """Where one sweep's wall time went."""

    wall: float
    timed: float  # warm-ups and timed windows (timed_seconds, summed)
    work: float  # every phase of every configuration, rank 0's clock
    startup: float  # launch to the first model build, per launch
    launches: int
    ok: int
    runs: int
    images_per_sec: dict[tuple, float]  # identity.config_key -> its images/s (ok runs)

    @property
    def per_launch_overhead(self) -> float:
        """Wall time outside the configurations' own work, per launch."""
        return (self.wall - self.work) / max(1, self.launches)


def before_first_window(record: dict) -> float:
    """The run's own seconds before its first timed window (phases in the order they ran)."""
    total = 0.0
    for name, seconds in (record.get("phase_seconds") or {}).items():
        if name.endswith("timed"):
            break
        total += float(seconds)
    return total


def account(records: list[dict], wall: float) -> Account:
    ok = [r for r in records if r["status"] == "ok"]
    work = sum(sum((r.get("phase_seconds") or {}).values()) for r in ok)
    startup = 0.0
    for r in ok:
        if first_in_launch(r) and r.get("startup_seconds") is not None:
            startup += max(0.0, float(r["startup_seconds"]) - before_first_window(r))
    launches = sum(1 for r in records if r["status"] != "skipped" and first_in_launch(r))
    measured = {identity.config_key(r): float(r["images_per_sec"]) for r in ok
                if r.get("kind", "train") == "train" and r.get("images_per_sec")}
    return Account(wall, sum(timed_seconds(r) for r in ok), work, startup, launches, len(ok),
                   len(records), measured)


def measured_alike(grouped: list[Account], isolated: list[Account]) -> tuple[str, bool | None]:
    """Whether grouped launches measure what isolated ones do: per configuration the log ratio
    of its geometric-mean images/s over the rounds, then the paired test over configurations.
    The text, and whether the goal holds (None: too few configurations to test)."""
    from scipy.stats import wilcoxon

    def geomean(accounts: list[Account], key: tuple) -> float | None:
        values = [a.images_per_sec[key] for a in accounts if key in a.images_per_sec]
        return math.exp(statistics.fmean(map(math.log, values))) if values else None

    keys = list(dict.fromkeys(k for a in grouped + isolated for k in a.images_per_sec))
    logs, lines = [], []
    for key in keys:
        g, i = geomean(grouped, key), geomean(isolated, key)
        if g is None or i is None:
            continue
        logs.append(math.log(g / i))
        c = identity.key_dict(key)
        lines.append(f"    {c['framework']} {c['model']} {c['world_size']} {c['precision']}: "
                     f"grouped {g:.2f}, isolated {i:.2f} images/s, ratio {g / i:.3f}")
    if not logs:
        return "  grouped vs isolated images/s: no configuration measured in both", None
    shift = math.exp(statistics.fmean(logs))
    head = (f"  grouped vs isolated images/s over {len(logs)} configuration"
            f"{'s' if len(logs) != 1 else ''}: geometric-mean ratio {shift:.3f}")
    if 2.0 ** -len(logs) * 2 >= ALPHA:  # the least two-sided p of n pairs is 2 x 2^-n
        return "\n".join([head + f"; too few configurations for the paired test (p < {ALPHA} "
                           f"needs at least 8)", *lines]), None
    p = float(wilcoxon(logs, alternative="two-sided").pvalue)
    alike = p >= ALPHA or abs(math.log(shift)) <= math.log1p(GOAL_SHIFT)
    return "\n".join([head + f", Wilcoxon p = {p:.2g}: "
                       + ("measured alike" if alike else "grouping moves the numbers")
                       + f" (goal: no shift both significant at p < {ALPHA} and beyond "
                       f"{GOAL_SHIFT:.0%})", *lines]), alike


def launch_overhead_for(ratio: float, grouped: Account, isolated: Account) -> float:
    """The per-launch overhead L (the same in both modes) at which these sweeps' per-
    configuration work would give exactly `ratio`: grouped = work_g + launches_g x L,
    isolated = work_i + launches_i x L. Grouping reaches the ratio only with launches at
    least this costly; inf: never."""
    denominator = ratio * isolated.launches - grouped.launches
    if denominator <= 0:
        return float("inf")
    return max(0.0, (grouped.work - ratio * isolated.work) / denominator)


def one_sweep(values: dict, mode: str, out: Path) -> Account:
    spec = config.build_spec({**values, "launch": mode, "out": str(out), "quiet": True})
    start = time.monotonic()
    outcome = run_sweep(spec, Progress(0, stream=io.StringIO(), live=False))
    result = account(outcome.records, time.monotonic() - start)
    print(f"  {mode}: {result.launches} launches; per-configuration work {result.work:.1f} s "
          f"(build, warm-ups, windows); start-up before the first build {result.startup:.1f} s; "
          f"the rest (teardown, clusters, records, reports) "
          f"{result.wall - result.work - result.startup:.1f} s; per launch "
          f"{result.per_launch_overhead:.1f} s outside the work", flush=True)
    return result


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workload", default="workloads/default.toml")
    p.add_argument("--frameworks", help="override the workload's frameworks (comma list)")
    p.add_argument("--models", help="override the workload's models (comma list)")
    p.add_argument("--rounds", type=int, default=1, help="pairs of sweeps; order alternates")
    p.add_argument("--out", default="results/sweep-walltime",
                   help="default: results/sweep-walltime; with --smoke a temporary folder")
    p.add_argument("--also-without-breakdown", action="store_true",
                   help="then the same pairs again with --no-breakdown")
    p.add_argument("--smoke", action="store_true",
                   help="smallest run (under a minute), to check that the script still works")
    if p.parse_known_args(argv)[0].smoke:
        p.set_defaults(out=None)
    a = p.parse_args(argv)
    values = config.load_workload(a.workload)
    if a.smoke:
        values.update(SMOKE_VALUES)
    for key in ("frameworks", "models"):
        if getattr(a, key):
            values[key] = getattr(a, key)
    if a.out is None:
        with tempfile.TemporaryDirectory(prefix="scalebench-sweep-walltime-") as tmp:
            both(values, a, Path(tmp))
    else:
        both(values, a, Path(a.out))


def both(values: dict, a: argparse.Namespace, out: Path) -> None:
    compare(values, a.rounds, out, "")
    if a.also_without_breakdown:
        compare({**values, "breakdown": False}, a.rounds, out, "no-breakdown")


def compare(values: dict, rounds: int, out: Path, label: str) -> None:
    """`rounds` pairs of sweeps, grouped and isolated; prints the figures."""
    suffix = f"-{label}" if label else ""
    totals: dict[str, list[Account]] = {mode: [] for mode in MODES}
    for round_ in range(rounds):
        order = MODES if round_ % 2 == 0 else MODES[::-1]
        for mode in order:
            result = one_sweep(values, mode, out / f"{mode}{suffix}-{round_ + 1}")
            totals[mode].append(result)
            print(f"round {round_ + 1} {mode:8s}{' ' + label if label else ''}: {result.ok} of "
                  f"{result.runs} runs ok, wall {result.wall:7.1f} s, warm-up + timed "
                  f"{result.timed:7.1f} s ({result.timed / result.wall:.1%})", flush=True)
    grouped, isolated = totals["grouped"], totals["isolated"]
    g_wall, i_wall = sum(r.wall for r in grouped), sum(r.wall for r in isolated)
    share = sum(r.timed for r in grouped) / g_wall
    g_work, i_work = sum(r.work for r in grouped), sum(r.work for r in isolated)
    print(f"{label or 'default'}: wall time grouped / isolated {g_wall / i_wall:.3f} (goal <= "
          f"{GOAL_RATIO}); timed share of the grouped sweep {share:.1%} (goal >= "
          f"{GOAL_TIMED_SHARE:.0%}); isolated {sum(r.timed for r in isolated) / i_wall:.1%}",
          flush=True)
    print(f"  grouping saved {i_wall - g_wall:.1f} s: {(i_wall - i_work) - (g_wall - g_work):.1f} s "
          f"of launch overhead, {i_work - g_work:.1f} s of per-configuration work (a warm "
          f"process); with no overhead at all outside the work the ratio would be "
          f"{g_work / i_wall:.3f}", flush=True)
    needed = statistics.fmean(launch_overhead_for(GOAL_RATIO, g, i)
                              for g, i in zip(grouped, isolated, strict=True))
    measured = statistics.fmean(i.per_launch_overhead for i in isolated)
    print(f"  with this per-configuration work, a ratio <= {GOAL_RATIO} needs launches that cost "
          f"at least {needed:.1f} s each outside the work; measured here {measured:.1f} s "
          f"(isolated)", flush=True)
    print(measured_alike(grouped, isolated)[0], flush=True)

if __name__ == "__main__":
    main()
