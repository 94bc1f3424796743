"""Coverage of the 95% intervals of images/s and efficiency: the log-scale interval the reports
show now (stats.positive_interval) against the linear Student-t interval they showed before, on
simulated trials that look like real ones, not only Gaussian ones.

A run is --trials-list trials of one configuration; the one-worker run's trials come from a
family below at level 10 images/s, the 2-worker run's from the same family at 2 x 0.9 x that
level, independently. For images/s (the one-worker run) the target is the family's mean
throughput of a trial (estimated once from --draws draws, exact for drift); for the efficiency
(the 2-worker run against the one-worker run, trial i with trial i, as aggregate pairs them) it
is the ratio of the two runs' means, 0.9 in every family. Families:

  gaussian 3%     normal trials, 3% relative spread (a quiet machine)
  lognormal 20%   multiplicative noise, 20% relative spread (a noisy one)
  t3 5%           window times stretched by 5% x |t| (Student t, 3 degrees of freedom): slow
                  trials only, heavy-tailed
  slow 10%        3% normal noise, and one trial in 10 slowed 2 to 20 times by another job
                  (issue 44's case: a trial at 0.584 images/s beside 9.8 and 10.5)
  drift 10%       3% normal noise on a level that slides 10% over the run (clocks throttling)

For each family and trial count: old cover (share of linear intervals holding the target), old
<0 (share of them reaching below zero), new cover (share of bounded log-scale intervals holding
it), new <0 (always 0), too noisy (share shown as "too noisy to bound" instead of bounds), and
new+noisy (share of runs whose shown statement holds: a bounded interval holding the target, or
"too noisy to bound", which claims no bounds; comparable with old cover).

    python benchmarks/interval_coverage.py            # 4,000 runs a cell, 3, 5 and 10 trials
    python benchmarks/interval_coverage.py --smoke    # 300 runs, 3 trials, all families
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scalebench.analysis import aggregate, stats  # noqa: E402

LEVEL, EFFICIENCY = 10.0, 0.9
Draw = Callable[[random.Random, int, float], list[float]]  # (rng, trials, level) -> trials


def _gaussian(rng: random.Random, n: int, level: float) -> list[float]:
    return [level * (1 + rng.gauss(0, 0.03)) for _ in range(n)]


def _lognormal(rng: random.Random, n: int, level: float) -> list[float]:
    sigma = math.sqrt(math.log(1 + 0.2 ** 2))
    return [level * rng.lognormvariate(-sigma ** 2 / 2, sigma) for _ in range(n)]


def _t3(rng: random.Random, n: int, level: float) -> list[float]:
    def t3() -> float:
        return rng.gauss(0, 1) / math.sqrt(sum(rng.gauss(0, 1) ** 2 for _ in range(3)) / 3)

    return [level / (1 + 0.05 * abs(t3())) for _ in range(n)]


def _slow(rng: random.Random, n: int, level: float) -> list[float]:
    return [level * (1 + rng.gauss(0, 0.03)) / (rng.uniform(2, 20) if rng.random() < 0.1 else 1)
            for _ in range(n)]


def _drift(rng: random.Random, n: int, level: float) -> list[float]:
    return [level * (1 - 0.1 * i / max(n - 1, 1)) * (1 + rng.gauss(0, 0.03)) for i in range(n)]


FAMILIES: dict[str, Draw] = {"gaussian 3%": _gaussian, "lognormal 20%": _lognormal,
                             "t3 5%": _t3, "slow 10%": _slow, "drift 10%": _drift}


def target_mean(name: str, draws: int) -> float:
    """The family's mean throughput of a trial at LEVEL (for drift: over the trial positions)."""
    if name == "drift 10%":
        return LEVEL * (1 - 0.1 / 2)
    rng = random.Random(1)
    return statistics.fmean(FAMILIES[name](rng, draws, LEVEL))


class Tally:
    def __init__(self) -> None:
        self.runs = self.old_cover = self.old_negative = 0
        self.bounded = self.new_cover = self.new_negative = self.noisy = 0

    def add(self, target: float, old: tuple[float | None, float | None],
            new: tuple[float | None, float | None, str]) -> None:
        self.runs += 1
        self.old_cover += old[0] <= target <= old[1]
        self.old_negative += old[0] < 0
        low, high, why = new
        if low is None:
            self.noisy += bool(why)
            return
        self.bounded += 1
        self.new_cover += low <= target <= high
        self.new_negative += low < 0

    def cells(self) -> list[str]:
        def share(k: int, of: int) -> str:
            return f"{100 * k / of:.1f}%" if of else "–"

        return [share(self.old_cover, self.runs), share(self.old_negative, self.runs),
                share(self.new_cover, self.bounded), share(self.new_negative, self.bounded),
                share(self.noisy, self.runs), share(self.new_cover + self.noisy, self.runs)]


def run(families: list[str], trial_counts: list[int], runs: int, seed: int, draws: int) -> None:
    header = ["family", "n", "metric", "old cover", "old <0", "new cover", "new <0",
              "too noisy", "new+noisy"]
    widths = [14, 3, 11, 10, 8, 10, 8, 10, 9]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    totals = {"images/s": Tally(), "efficiency": Tally()}
    for name in families:
        draw = FAMILIES[name]
        mean = target_mean(name, draws)
        for n in trial_counts:
            rng = random.Random(f"{seed}-{name}-{n}")
            tallies = {"images/s": Tally(), "efficiency": Tally()}
            for _ in range(runs):
                one = draw(rng, n, LEVEL)
                two = draw(rng, n, 2 * EFFICIENCY * LEVEL)
                old = stats.summarize(one)
                new = stats.summarize_positive(one, unit="trials")
                for t in (tallies["images/s"], totals["images/s"]):
                    t.add(mean, (old.ci_low, old.ci_high), (new.ci_low, new.ci_high, new.too_noisy))
                paired = stats.paired_efficiency([(two, one)], 2)
                linear = stats.summarize(paired.trials)  # the interval the reports showed
                e = aggregate.efficiency_estimate(paired)
                for t in (tallies["efficiency"], totals["efficiency"]):
                    t.add(EFFICIENCY, (linear.ci_low, linear.ci_high),
                          (e.ci_low, e.ci_high, e.too_noisy))
            for metric, t in tallies.items():
                cells = [name, str(n), metric, *t.cells()]
                print("  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip())
    for metric, t in totals.items():
        old_cover, old_negative, new_cover, new_negative, noisy, either = t.cells()
        print(f"all cells, {metric}: old cover {old_cover} ({old_negative} below zero); new "
              f"cover {new_cover} of those bounded ({new_negative} below zero), {noisy} too "
              f"noisy to bound, {either} bounded and covering or too noisy")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=4000, help="simulated runs per cell")
    p.add_argument("--trials-list", default="3,5,10", help="trial counts, comma-separated")
    p.add_argument("--seed", type=int, default=44)
    p.add_argument("--draws", type=int, default=200_000,
                   help="draws that estimate each family's mean")
    p.add_argument("--smoke", action="store_true", help="300 runs a cell, 3 trials")
    args = p.parse_args(argv)
    if args.smoke:
        args.runs, args.trials_list, args.draws = 300, "3", 20_000
    counts = [int(x) for x in args.trials_list.split(",") if x.strip()]
    print(f"95% intervals, {args.runs} simulated runs a cell, seed {args.seed}")
    run(list(FAMILIES), counts, args.runs, args.seed, args.draws)
    return 0


if __name__ == "__main__":
    sys.exit(main())
