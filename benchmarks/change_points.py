"""Change-point detection (scalebench.tracking.changepoints) against today's point-to-point rule, on
synthetic histories with this project's measured noise.

The noise is taken from results/reference/results.jsonl (or --results): the trial-to-trial
coefficient of variation (root mean square of every ok train record's own CV) and the
launch-to-launch CV (of the mean throughputs of the one-worker launches, which run the same
plain step under every framework). A synthetic point is one sweep: --launches launches of
--trials trials each; a launch's mean moves by its own offset (the launch CV less the part its
trials explain), its trials scatter around it. At a noise level c the launch means vary by c and
the trials by c x (trial CV / launch CV), the measured ratio.

Histories of --length points: a step down of 3, 5, 10 or 20% at a random position with at least
6 points on each side; a slide of the same total over 10 points; noise only. For each detector:
recall per step size (a regression found within --tolerance points of the step; for a slide,
within it), the mean position error of the found steps, and false alarms (regressions found)
per 1,000 noise-only points. The point-to-point rule (history plot's marks: compare's verdict on
each point against the previous one) is printed at its default threshold and over a range of
thresholds, to read its false alarms at the detector's recall.

    python benchmarks/change_points.py [--seed 1] [--series 120] [--noise-series 400]
        [--length 40] [--launches 1] [--noise measured,0.05] [--penalty 3] [--alpha 0.05]
        [--min-magnitude 2]
    python benchmarks/change_points.py --smoke   # seconds: 2 series per step size and kind,
        # 3 noise-only, 24 points, 2 trials a point, the measured noise only (explicit flags
        # still win); it writes no files, here or anywhere
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

from scalebench.analysis import stats
from scalebench.tracking import changepoints

REFERENCE = Path(__file__).resolve().parent.parent / "results" / "reference" / "results.jsonl"
STEPS = (3.0, 5.0, 10.0, 20.0)
SLIDE_POINTS = 10
MARGIN = 6  # points on each side of a step
P2P_THRESHOLDS = (0.0, 2.0, 5.0, 8.0, 10.0, 12.0, 15.0, 20.0)
# --smoke: the fewest series that still run every path (a step and a slide fit in 24 points)
SMOKE = {"series": 2, "noise_series": 3, "length": 2 * MARGIN + SLIDE_POINTS + 2, "trials": 2,
         "noise": "measured"}
GOAL = "recall >= 0.9 for 10% steps, position error <= 1, false alarms <= 2 per 1,000 points"


@dataclass(frozen=True)
class Noise:
    trial_cv: float
    launch_cv: float
    source: str


def measured_noise(path: Path) -> Noise:
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    ok = [r for r in records if r.get("kind") == "train" and r.get("status") == "ok"]
    cvs = [stats.summarize(r["trial_images_per_sec"]).rel_std for r in ok]
    one = [stats.summarize(r["trial_images_per_sec"]).mean for r in ok if r["world_size"] == 1]
    return Noise(math.sqrt(statistics.fmean(c * c for c in cvs)),
                 statistics.stdev(one) / statistics.fmean(one),
                 f"{path.name}: {len(ok)} ok train records, {len(one)} one-worker launches")


@dataclass
class Point:
    launches: list[list[float]]  # trials per launch

    @property
    def values(self) -> list[float]:
        return [statistics.fmean(t) for t in self.launches]

    @property
    def samples(self) -> stats.Samples:
        return stats.Samples.of_processes(self.launches)


def draw(levels: list[float], launch_cv: float, trial_cv: float, launches: int, trials: int,
         rng: random.Random) -> list[Point]:
    # the launch means vary by launch_cv in all: their trials explain trial_cv / sqrt(trials)
    offset = math.sqrt(max(0.0, launch_cv ** 2 - trial_cv ** 2 / trials))
    out = []
    for level in levels:
        per = []
        for _ in range(launches):
            mean = level * (1 + rng.gauss(0, offset))
            per.append([mean * (1 + rng.gauss(0, trial_cv)) for _ in range(trials)])
        out.append(Point(per))
    return out


@dataclass
class Tally:
    found: int = 0
    total: int = 0
    errors: list[int] = field(default_factory=list)

    @property
    def recall(self) -> float:
        return self.found / self.total if self.total else math.nan

    @property
    def error(self) -> float:
        return statistics.fmean(self.errors) if self.errors else math.nan


def detector_marks(points: list[Point], args) -> list[int]:
    d = changepoints.detect([p.values for p in points], args.alpha, args.min_magnitude,
                            args.penalty)
    return [c.index for c in d.change_points if c.change_pct < 0]


def p2p_judged(points: list[Point], alpha: float) -> list[tuple[int, float, bool]]:
    """(index, change %, significant) of every point against the previous one: compare.judge's
    rule without its threshold, which is applied afterwards."""
    out = []
    for i in range(1, len(points)):
        a, b = points[i - 1].samples, points[i].samples
        diff = stats.difference_of(a, b, alpha)
        ma, mb = a.summary(diff.basis).mean, b.summary(diff.basis).mean
        out.append((i, 100.0 * (mb - ma) / ma, diff.significant))
    return out


def p2p_marks(judged, threshold: float) -> list[int]:
    return [i for i, change, significant in judged if significant and change < -threshold]


def score(tally: Tally, marks: list[int], lo: int, hi: int, tolerance: int) -> None:
    """A hit: a mark within tolerance of [lo, hi] (a step: lo == hi)."""
    tally.total += 1
    near = [0 if lo <= m <= hi else min(abs(m - lo), abs(m - hi)) for m in marks]
    near = [e for e in near if e <= tolerance]
    if near:
        tally.found += 1
        tally.errors.append(min(near))


def run_level(label: str, launch_cv: float, trial_cv: float, args, rng: random.Random) -> dict:
    n = args.length
    det = {("step", s): Tally() for s in STEPS} | {("slide", s): Tally() for s in STEPS}
    p2p = {t: {k: Tally() for k in det} for t in P2P_THRESHOLDS}
    det_false, p2p_false = 0, dict.fromkeys(P2P_THRESHOLDS, 0)
    # hits by chance: a noise-only history scored as if it had a step at a random position
    det_chance, p2p_chance = Tally(), Tally()
    noise_points = 0

    def draw_levels(levels):
        return draw(levels, launch_cv, trial_cv, args.launches, args.trials, rng)

    for kind in ("step", "slide"):
        for size in STEPS:
            for _ in range(args.series):
                if kind == "step":
                    at = rng.randint(MARGIN, n - MARGIN)
                    levels = [100.0 if i < at else 100.0 * (1 - size / 100) for i in range(n)]
                    lo = hi = at
                else:
                    at = rng.randint(MARGIN, n - MARGIN - SLIDE_POINTS)
                    levels = [100.0 * (1 - size / 100 * min(1.0, max(0, i - at + 1) / SLIDE_POINTS))
                              for i in range(n)]
                    lo, hi = at, at + SLIDE_POINTS - 1
                points = draw_levels(levels)
                score(det[(kind, size)], detector_marks(points, args), lo, hi, args.tolerance)
                judged = p2p_judged(points, args.alpha)
                for t in P2P_THRESHOLDS:
                    score(p2p[t][(kind, size)], p2p_marks(judged, t), lo, hi, args.tolerance)
    for _ in range(args.noise_series):
        points = draw_levels([100.0] * n)
        noise_points += n
        marks = detector_marks(points, args)
        det_false += len(marks)
        judged = p2p_judged(points, args.alpha)
        for t in P2P_THRESHOLDS:
            p2p_false[t] += len(p2p_marks(judged, t))
        at = rng.randint(MARGIN, n - MARGIN)
        score(det_chance, marks, at, at, args.tolerance)
        score(p2p_chance, p2p_marks(judged, p2p_default(args)), at, at, args.tolerance)
    per_k = 1000.0 / noise_points
    return {"label": label, "det": det, "p2p": p2p, "det_false": det_false * per_k,
            "p2p_false": {t: v * per_k for t, v in p2p_false.items()},
            "chance": (det_chance.recall, p2p_chance.recall)}


def fmt(x: float, digits: int = 2) -> str:
    return "   -" if math.isnan(x) else f"{x:.{digits}f}"


def print_level(r: dict, args) -> None:
    det, p2p, default = r["det"], r["p2p"], p2p_default(args)
    print(f"\n== {r['label']}")
    print(f"{'':16}{'change points':>24}    {'point-to-point (threshold ' + f'{default:g}%)':>30}")
    print(f"{'':16}{'recall':>12}{'pos. error':>12}    {'recall':>18}{'pos. error':>12}")
    for kind in ("step", "slide"):
        for size in STEPS:
            d, p = det[(kind, size)], p2p[default][(kind, size)]
            print(f"  {f'{kind} -{size:g}%':<14}{fmt(d.recall):>12}{fmt(d.error):>12}    "
                  f"{fmt(p.recall):>18}{fmt(p.error):>12}")
    print(f"  false alarms / 1,000 noise-only points: change points {r['det_false']:.2f}, "
          f"point-to-point {r['p2p_false'][default]:.2f}")
    print("  point-to-point by threshold (recall of 10% steps, false alarms / 1,000):")
    print("    " + "; ".join(f"{t:g}%: {p2p[t][('step', 10.0)].recall:.2f}, "
                             f"{r['p2p_false'][t]:.1f}" for t in P2P_THRESHOLDS))
    print(f"  recall by chance (noise only, a step assumed at a random position): change points "
          f"{r['chance'][0]:.2f}, point-to-point {r['chance'][1]:.2f}")
    target = det[("step", 10.0)].recall
    t = min(P2P_THRESHOLDS, key=lambda t: (abs(p2p[t][("step", 10.0)].recall - target), -t))
    print(f"  at (nearly) equal recall of 10% steps: change points {target:.2f} with "
          f"{r['det_false']:.2f} false alarms / 1,000; point-to-point at threshold {t:g}% "
          f"{p2p[t][('step', 10.0)].recall:.2f} with {r['p2p_false'][t]:.2f}")


def p2p_default(args) -> float:
    return 5.0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--results", type=Path, default=REFERENCE)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--series", type=int, default=120, help="histories per step size and kind")
    p.add_argument("--noise-series", type=int, default=400, help="noise-only histories")
    p.add_argument("--length", type=int, default=40, help="points per history")
    p.add_argument("--launches", type=int, default=1, help="launches per point")
    p.add_argument("--trials", type=int, default=5, help="trials per launch")
    p.add_argument("--noise", default="measured,0.05",
                   help="comma list of launch CVs: 'measured' or a fraction")
    p.add_argument("--tolerance", type=int, default=3, help="points a found step may be off")
    p.add_argument("--penalty", type=float, default=changepoints.PENALTY)
    p.add_argument("--alpha", type=float, default=changepoints.ALPHA)
    p.add_argument("--min-magnitude", type=float, default=changepoints.MIN_MAGNITUDE)
    p.add_argument("--smoke", action="store_true",
                   help="smallest run (seconds), to check that the script still works")
    if p.parse_known_args(argv)[0].smoke:
        p.set_defaults(**SMOKE)
    args = p.parse_args(argv)
    noise = measured_noise(args.results)
    ratio = noise.trial_cv / noise.launch_cv
    print(f"measured noise ({noise.source}): trial CV {100 * noise.trial_cv:.1f}%, launch CV "
          f"{100 * noise.launch_cv:.1f}% (trial / launch {ratio:.2f})")
    print(f"histories: {args.length} points, {args.launches} launch(es) x {args.trials} trials a "
          f"point; {args.series} per step size and kind, {args.noise_series} noise-only "
          f"({args.noise_series * args.length} points); tolerance {args.tolerance} points; "
          f"seed {args.seed}")
    print(f"change points: PELT penalty {args.penalty:g} x log(n), alpha {args.alpha:g}, "
          f"min magnitude {args.min_magnitude:g}%; point-to-point: compare's rule, alpha "
          f"{args.alpha:g}")
    print(f"goal at 5% noise: {GOAL}, fewer false alarms than point-to-point at equal recall")
    rng = random.Random(args.seed)
    started = time.perf_counter()
    for item in args.noise.split(","):
        item = item.strip()
        launch_cv = noise.launch_cv if item == "measured" else float(item)
        trial_cv = launch_cv * ratio
        label = (f"noise {100 * launch_cv:.1f}% ({'measured' if item == 'measured' else 'set'}): "
                 f"launch CV {100 * launch_cv:.1f}%, trial CV {100 * trial_cv:.1f}%")
        print_level(run_level(label, launch_cv, trial_cv, args, rng), args)
    print(f"\n{time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
