"""Change detection (scalebench.tracking.changepoints) against the point-to-point rule and a
reference detector, on synthetic histories that look like real ones: correlated noise, wander,
seasons, trends, slow slides and outliers.

The noise is taken from results/reference/results.jsonl (or --results): the trial-to-trial
coefficient of variation (root mean square of every ok train record's own CV) and the
launch-to-launch CV (of the mean throughputs of the one-worker launches, which run the same
plain step under every framework). A synthetic point is one sweep: --launches launches of
--trials trials each. At a noise level c a launch's mean is level x (1 + e_t), e_t the family's
noise at point t with a standard deviation of c (with 2 or more launches, half its variance is
the point's, shared by its launches, and half each launch's own); its trials scatter around it
by c x (trial CV / launch CV), the measured ratio.

Families of --length points (the noise, then what is to be found):
  iid            independent noise; steps down of 5, 10 and 20%
  ar0.5 .. ar0.9 AR(1) noise, lag-one correlation phi (marginal deviation c); 10% steps
  wander         a random walk of c/5 a point on top of independent noise; 10% steps
  season24, 7    a sine of amplitude c/2 and period 24 points (hourly sweeps, a daily season)
                 or 7 (nightly sweeps, a weekly one); 10% steps
  trend          a straight rise of 10% over the history; 10% steps
  outliers       independent noise, one point in 50 off by 30% either way; 10% steps
  slide r% x L   independent noise; the level falls r% (compounded) at each of L points
Each family is run with nothing to find (--noise-series histories: false alarms) and with its
change at a random position at least 8 points from either end (--series histories). A change
counts as found when a regression lies within --tolerance points of it (of a slide: overlaps
it within that); the position error is the distance of the nearest found one. False alarms: every
finding, either direction, other than the first one matching the change, per 1,000 points. For a
slide, "one gradual": this detector reports exactly one finding there, gradual, whose range
covers the slide (its first moved point no later than the slide's, its first point at the new
level no earlier than the slide's last).

Detectors: this project's (changepoints.detect on per-launch values); the point-to-point rule
(compare's verdict on each point against the previous one, threshold 5%, as `history plot
--point-to-point`); ruptures' binary segmentation (Binseg, model "l2", its default min_size 2 and
jump 5) with the BIC penalty of its documentation, log(n) x sigma^2, sigma from the median
absolute difference of neighbours (independent noise assumed).

    python benchmarks/change_points.py --smoke   # seconds: 3 families, 2 + 3 histories of 28
        # points, 2 trials a point (explicit flags still win); it writes no files
    python benchmarks/change_points.py [--seed 1] [--series 100] [--noise-series 200]
        [--length 48] [--launches 1] [--trials 5] [--noise 0.05] [--families iid,ar0.5,...]
        [--tolerance 3] [--penalty 3] [--alpha 0.05] [--min-magnitude 2]
    python benchmarks/change_points.py --trend-bound 2000   # what a detector told the truth
        # of the trend family (a line and at most one step) finds there, and stops
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
MARGIN = 8  # points on each side of a change
P2P_THRESHOLD = 5.0
# --smoke: the fewest series that still run a step, correlated noise and a slide (seconds)
SMOKE = {"series": 2, "noise_series": 3, "length": 28, "trials": 2,
         "families": "iid:10,ar0.5,slide3x8"}
SLIDES = ((1.0, 5), (1.0, 10), (3.0, 5), (3.0, 8), (3.0, 10), (5.0, 5), (5.0, 10))
FAMILIES = (["iid:5", "iid:10", "iid:20", "ar0.5", "ar0.8", "ar0.9", "wander", "season24",
             "season7", "trend", "outliers"] + [f"slide{r:g}x{n}" for r, n in SLIDES])
GOAL = ("i.i.d.: recall >= 0.9 for 10% steps, <= 2 false alarms / 1,000 points; AR(1) with no "
        "step: <= 2 at phi 0.5, <= 5 at phi 0.8; slides of 3% x 8 found as one gradual "
        "regression >= 0.9; 10% steps on a season or a trend: recall >= 0.8")


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


# ---------------------------------------------------------------- families

def family_noise(name: str, n: int, c: float, rng: random.Random) -> list[float]:
    """The relative noise e_t of a family's points (deviation c where it is stationary)."""
    white = [rng.gauss(0, c) for _ in range(n)]
    if name.startswith("ar"):
        phi = float(name[2:])
        e, out = rng.gauss(0, c), []
        for _ in range(n):
            out.append(e)
            e = phi * e + rng.gauss(0, c * math.sqrt(1 - phi * phi))
        return out
    if name == "wander":
        walk, out = 0.0, []
        for w in white:
            walk += rng.gauss(0, c / 5)
            out.append(walk + w)
        return out
    if name.startswith("season"):
        period, phase = int(name[6:]), rng.uniform(0, 2 * math.pi)
        return [w + c / 2 * math.sin(2 * math.pi * t / period + phase)
                for t, w in enumerate(white)]
    if name == "trend":
        return [w + 0.10 * t / (n - 1) for t, w in enumerate(white)]
    if name == "outliers":
        return [w + (rng.choice((-0.3, 0.3)) if rng.random() < 1 / 50 else 0.0) for w in white]
    return white  # iid and slides


def family_change(name: str, n: int, rng: random.Random) -> tuple[list[float], int, int]:
    """The levels of a history with the family's change, and the change's first and last moved
    point (a step: the same)."""
    if name.startswith("slide"):
        rate, points = name[5:].split("x")
        r, length = float(rate) / 100, int(points)
        at = rng.randint(MARGIN, n - MARGIN - length)
        return ([(1 - r) ** min(length, max(0, t - at + 1)) for t in range(n)], at,
                at + length - 1)
    size = float(name.split(":")[1]) / 100 if ":" in name else 0.10
    at = rng.randint(MARGIN, n - MARGIN)
    return [1.0 if t < at else 1 - size for t in range(n)], at, at


def draw(levels: list[float], offsets: list[float], launch_cv: float, trial_cv: float,
         launches: int, trials: int, rng: random.Random) -> list[Point]:
    """Points at these levels (x 100): the family's offsets, a launch's own part and trials."""
    # the launch means vary by launch_cv in all: their trials explain trial_cv / sqrt(trials)
    own = math.sqrt(max(0.0, 1 - trial_cv ** 2 / trials / launch_cv ** 2)) if launch_cv else 0.0
    shared = math.sqrt(0.5) if launches > 1 else 1.0
    out = []
    for level, e in zip(levels, offsets, strict=True):
        per = []
        for _ in range(launches):
            u = rng.gauss(0, launch_cv * math.sqrt(1 - shared ** 2))
            mean = 100.0 * level * (1 + own * (shared * e + u))
            per.append([mean * (1 + rng.gauss(0, trial_cv)) for _ in range(trials)])
        out.append(Point(per))
    return out


# ---------------------------------------------------------------- detectors: (first, last, change)

def ours(points: list[Point], args) -> list[tuple[int, int, float, bool]]:
    d = changepoints.detect([p.values for p in points], args.alpha, args.min_magnitude,
                            args.penalty)
    return [(c.index, c.stop, c.change_pct, c.gradual) for c in d.change_points]


def point_to_point(points: list[Point], args) -> list[tuple[int, int, float, bool]]:
    """compare's rule on every point against the previous one, threshold P2P_THRESHOLD."""
    out = []
    for i in range(1, len(points)):
        a, b = points[i - 1].samples, points[i].samples
        basis = stats.common_basis(a, b)
        ma, mb = a.summary(basis).mean, b.summary(basis).mean
        change = 100.0 * (mb - ma) / ma
        # the threshold first: the test only where the change is large enough to count
        if abs(change) > P2P_THRESHOLD and stats.difference_of(a, b, args.alpha).significant:
            out.append((i, i, change, False))
    return out


def binseg(points: list[Point], args) -> list[tuple[int, int, float, bool]]:
    """ruptures' Binseg with its documented BIC penalty, on the point means."""
    import numpy as np
    import ruptures

    means = np.array([statistics.fmean(p.values) for p in points])
    n = len(means)
    sigma = 1.4826 * float(np.median(np.abs(np.diff(means)))) / math.sqrt(2)
    if sigma <= 0:
        return []
    bkps = ruptures.Binseg(model="l2").fit(means.reshape(-1, 1)).predict(
        pen=math.log(n) * sigma ** 2)
    bounds = [0, *bkps]
    out = []
    for k in range(1, len(bounds) - 1):
        before = float(means[bounds[k - 1]:bounds[k]].mean())
        after = float(means[bounds[k]:bounds[k + 1]].mean())
        out.append((bounds[k], bounds[k], 100.0 * (after - before) / before, False))
    return out


# ---------------------------------------------------------------- a bound for the trend family

def step_on_a_line_bound(histories: int, n: int, c: float, seed: int
                         ) -> list[tuple[float, float, float]]:
    """What a detector told the truth of the `trend` family (independent noise of deviation c,
    a rise of 10% over the history, at most one 10% step down) can find: at every place the
    least squares of level, slope and step, the largest |t| of the step; the threshold set on
    `histories` histories without a step, the recall on as many with one (found: the largest
    |t| is a decrease within 3 points of the step). (false alarms per 1,000 points, threshold,
    recall) for thresholds passed by 10%, 5% and 2.5% of the histories without a step."""
    import numpy as np

    rng = np.random.default_rng(seed)
    t = np.arange(n, dtype=float)
    places = np.arange(MARGIN // 4, n - MARGIN // 4 + 1)
    line = 1 + 0.10 * t / (n - 1)

    def largest_t(y):
        best = np.zeros(len(y))
        where = np.zeros(len(y), dtype=int)
        for k in places:
            X = np.stack([np.ones(n), t, (t >= k).astype(float)], axis=1)
            inv = np.linalg.inv(X.T @ X)
            beta = y @ (inv @ X.T).T
            e = y - beta @ X.T
            se = np.sqrt((e * e).sum(1) / (n - 3) * inv[2, 2])
            tk = beta[:, 2] / se
            better = np.abs(tk) > np.abs(best)
            best[better], where[better] = tk[better], k
        return best, where

    null, _ = largest_t(line + rng.normal(0, c, (histories, n)))
    at = rng.integers(MARGIN, n - MARGIN + 1, histories)
    stepped = line - 0.10 * (t[None, :] >= at[:, None]) + rng.normal(0, c, (histories, n))
    found, where = largest_t(stepped)
    near = (found < 0) & (np.abs(where - at) <= 3)
    out = []
    for share in (0.10, 0.05, 0.025):
        threshold = float(np.quantile(np.abs(null), 1 - share))
        out.append((1000 * share / n, threshold, float(np.mean(near & (np.abs(found) >=
                                                                         threshold)))))
    return out


DETECTORS = {"this detector": ours, "point-to-point": point_to_point, "ruptures Binseg BIC": binseg}


# ---------------------------------------------------------------- scoring

@dataclass
class Tally:
    found: int = 0
    total: int = 0
    gradual: int = 0  # slides: one gradual finding covering the slide
    false: int = 0
    points: int = 0
    errors: list[int] = field(default_factory=list)

    @property
    def recall(self) -> float:
        return self.found / self.total if self.total else math.nan

    @property
    def one_gradual(self) -> float:
        return self.gradual / self.total if self.total else math.nan

    @property
    def error(self) -> float:
        return statistics.fmean(self.errors) if self.errors else math.nan

    @property
    def false_per_k(self) -> float:
        return 1000.0 * self.false / self.points if self.points else math.nan


def score(t: Tally, found: list[tuple[int, int, float, bool]], n: int,
          change: tuple[int, int] | None, tolerance: int) -> None:
    t.points += n
    if change is None:
        t.false += len(found)
        return
    lo, hi = change
    t.total += 1

    def distance(f) -> int:
        first, last = f[0], f[1]
        return 0 if first <= hi and last >= lo else (first - hi if first > hi else lo - last)

    near = sorted((distance(f), k) for k, f in enumerate(found)
                  if f[2] < 0 and distance(f) <= tolerance)
    t.false += len(found) - (1 if near else 0)
    if near:
        t.found += 1
        t.errors.append(near[0][0])
        there = [f for f in found if distance(f) <= tolerance]
        f = found[near[0][1]]
        if len(there) == 1 and f[3] and f[0] <= lo and f[1] >= hi:
            t.gradual += 1


def run_family(name: str, launch_cv: float, trial_cv: float, args, rng: random.Random
               ) -> dict[str, dict[str, Tally]]:
    n = args.length
    noise_name = "iid" if name.startswith(("iid", "slide")) else name
    out = {kind: {d: Tally() for d in DETECTORS} for kind in ("none", "change")}
    runs = [("none", args.noise_series)] if not name.startswith(("slide", "iid:")) or \
        name == "iid:10" else []
    for kind, count in runs + [("change", args.series)]:
        for _ in range(count):
            offsets = family_noise(noise_name, n, launch_cv, rng)
            if kind == "none":
                levels, change = [1.0] * n, None
            else:
                levels, lo, hi = family_change(name, n, rng)
                change = (lo, hi)
            points = draw(levels, offsets, launch_cv, trial_cv, args.launches, args.trials, rng)
            for d, fn in DETECTORS.items():
                score(out[kind][d], fn(points, args), n, change, args.tolerance)
    return out


def fmt(x: float, spec: str = ".2f") -> str:
    return "-" if math.isnan(x) else format(x, spec)


def print_header() -> None:
    names = list(DETECTORS)
    print("\nfamily        | " + " | ".join(f"{d:^33}" for d in names))
    print("              | " + " | ".join(f"{'recall':>7} {'pos':>5} {'FA/1k':>6} {'FA/1k':>6}"
                                          f" {'1 grad':>6}" for _ in names))
    print("              | " + " | ".join(f"{'':>7} {'err':>5} {'none':>6} {'change':>6} "
                                          f"{'':>6}" for _ in names), flush=True)


def print_row(family: str, r: dict[str, dict[str, Tally]]) -> None:
    names = list(DETECTORS)
    cells = []
    for d in names:
        c, z = r["change"][d], r["none"][d]
        grad = fmt(c.one_gradual) if family.startswith("slide") and d == names[0] else "-"
        cells.append(f"{fmt(c.recall):>7} {fmt(c.error):>5} {fmt(z.false_per_k, '.1f'):>6} "
                     f"{fmt(c.false_per_k, '.1f'):>6} {grad:>6}")
    print(f"{family:<14}| " + " | ".join(cells), flush=True)


def print_bound(args) -> None:
    c = float(args.noise.split(",")[0])
    print(f"trend family, told the truth (a line, at most one step, independent noise of "
          f"{100 * c:g}%): {args.trend_bound} histories of {args.length} points with a 10% step "
          f"and as many without; seed {args.seed}")
    for per_k, threshold, recall in step_on_a_line_bound(args.trend_bound, args.length, c,
                                                         args.seed):
        print(f"  {per_k:4.1f} false alarms / 1,000 points: |t| >= {threshold:.2f}, recall "
              f"{recall:.3f}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--results", type=Path, default=REFERENCE)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--series", type=int, default=100, help="histories with a change, a family")
    p.add_argument("--noise-series", type=int, default=200,
                   help="histories with nothing to find, a family")
    p.add_argument("--length", type=int, default=48, help="points per history")
    p.add_argument("--launches", type=int, default=1, help="launches per point")
    p.add_argument("--trials", type=int, default=5, help="trials per launch")
    p.add_argument("--noise", default="0.05",
                   help="comma list of launch CVs: 'measured' or a fraction")
    p.add_argument("--families", default=",".join(FAMILIES),
                   help=f"comma list (default all: {','.join(FAMILIES)})")
    p.add_argument("--tolerance", type=int, default=3, help="points a found change may be off")
    p.add_argument("--penalty", type=float, default=changepoints.PENALTY)
    p.add_argument("--alpha", type=float, default=changepoints.ALPHA)
    p.add_argument("--min-magnitude", type=float, default=changepoints.MIN_MAGNITUDE)
    p.add_argument("--trend-bound", type=int, default=0, metavar="HISTORIES",
                   help="print what a detector told the trend family's truth finds (this many "
                   "histories with a step and without) and stop")
    p.add_argument("--smoke", action="store_true",
                   help="smallest run (seconds), to check that the script still works")
    if p.parse_known_args(argv)[0].smoke:
        p.set_defaults(**SMOKE)
    args = p.parse_args(argv)
    families = [f.strip() for f in args.families.split(",") if f.strip()]
    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        p.error(f"--families: unknown {', '.join(unknown)}; allowed: {', '.join(FAMILIES)}")
    if args.length < 2 * MARGIN + 10:
        p.error(f"--length: at least {2 * MARGIN + 10} points (a slide of 10 and {MARGIN} on "
                "either side)")
    if args.trend_bound:
        try:
            float(args.noise.split(",")[0])
        except ValueError:
            p.error("--trend-bound: --noise must be a fraction (the trend family's noise)")
        print_bound(args)
        return 0
    noise = measured_noise(args.results)
    ratio = noise.trial_cv / noise.launch_cv
    print(f"measured noise ({noise.source}): trial CV {100 * noise.trial_cv:.1f}%, launch CV "
          f"{100 * noise.launch_cv:.1f}% (trial / launch {ratio:.2f})")
    print(f"histories: {args.length} points, {args.launches} launch(es) x {args.trials} trials a "
          f"point; {args.series} with a change and {args.noise_series} without, a family; "
          f"tolerance {args.tolerance} points; seed {args.seed}")
    print(f"this detector: penalty {args.penalty:g} x log(n), alpha {args.alpha:g}, min magnitude "
          f"{args.min_magnitude:g}%; point-to-point: compare's rule, threshold "
          f"{P2P_THRESHOLD:g}%; ruptures Binseg: l2, BIC penalty log(n) sigma^2")
    print(f"goals at 5% noise: {GOAL}")
    print("columns: recall of the change; mean position error (points); false alarms / 1,000 "
          "points without a change and with one; slides: found as one gradual regression "
          "covering the slide")
    started = time.perf_counter()
    for item in args.noise.split(","):
        item = item.strip()
        launch_cv = noise.launch_cv if item == "measured" else float(item)
        trial_cv = launch_cv * ratio
        print(f"\n== noise {100 * launch_cv:.1f}% ({'measured' if item == 'measured' else 'set'}):"
              f" launch CV {100 * launch_cv:.1f}%, trial CV {100 * trial_cv:.1f}%")
        print_header()
        for family in families:
            rng = random.Random(f"{args.seed}:{family}:{item}")
            print_row(family, run_family(family, launch_cv, trial_cv, args, rng))
    print(f"\n{time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
