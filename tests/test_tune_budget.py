"""How a cell's budget is split between the race and the confirmation (tuning.run.race_cell),
on a simulated launcher and clock: launches cost known seconds and return a known response
surface with noise, so the split is checked against the arithmetic, not against a machine."""

from __future__ import annotations

import math
import random
import types

import pytest

from scalebench.hardware import devices
from scalebench.spec import config
from scalebench.tuning import files
from scalebench.tuning import knobs as knob_rules
from scalebench.tuning import run as tune_run

FIXED, WINDOW = 12.0, 3.0  # seconds a simulated launch takes: start-up, and per window


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


class SimulatedTuner:
    """Tuner.launch without processes: advances the clock by what the launch would cost and
    returns a record of images/s from `gain` (candidate -> true ratio to the default) times
    log-normal noise."""

    def __init__(self, clock: Clock, gain: dict[str, float], seed: int = 1) -> None:
        self.clock, self.gain = clock, gain
        self.rng = random.Random(seed)
        self.noise = random.Random(seed + 1)

    def note(self, text: str) -> None:
        pass

    def launch(self, cell, result, candidates, rounds, phase, options=None):
        windows = rounds * len(candidates)
        self.clock.now += FIXED + windows * WINDOW
        rates = {c.name: [10.0 * self.gain.get(c.name, 1.0) * math.exp(self.noise.gauss(0, .03))
                          for _ in range(rounds)] for c in candidates}
        result.launches.append({"phase": phase, "candidates": [c.name for c in candidates],
                                "status": "ok", "steps": 0, "seconds": 0.0})
        return {"status": "ok", "candidate_images_per_sec": rates, "rounds": rounds,
                "launch_seconds": windows * WINDOW, "read_back": {}}


def horovod_cell() -> tune_run.Cell:
    sweep = config.build_spec({"batch_size": 2, "image_size": 64, "warmup": 1, "iters": 2,
                               "trials": 2, "workers": "2", "threads_per_worker": 1,
                               "device": "cpu", "frameworks": "horovod", "models": "vgg16"})
    return tune_run.plan_cells(sweep, devices.resolve("cpu"), None)[0]


@pytest.fixture
def clock(monkeypatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(tune_run, "time", types.SimpleNamespace(monotonic=clock.monotonic))
    return clock


def race(clock: Clock, budget: float, gain: float = 1.10, tuner: type | None = None,
         seed: int = 1) -> tune_run.CellResult:
    """race_cell on the Horovod VGG-16 cell whose fusion 0 MB / cycle 25 ms runs `gain` x the
    others, launched by `tuner` (SimulatedTuner by default)."""
    cell = horovod_cell()
    names = [c.name for c in knob_rules.candidates(cell.knobs)]
    best = next(n for n in names if "cycle_time_ms=25" in n and "fusion_threshold_mb=0" in n)
    launcher = (tuner or SimulatedTuner)(clock, {best: gain}, seed=seed)
    return tune_run.race_cell(launcher, cell, budget, [])


@pytest.mark.parametrize("pairs", [3, 5, 8])
def test_one_race_round_then_the_confirmation_takes_what_is_left_up_to_its_most(clock, pairs):
    # across launches a round is a launch per candidate (each FIXED + 3 windows); a paired
    # confirmation slot is a launch of the winner and one of the default
    launch = FIXED + tune_run.ROUNDS_PER_LAUNCH * WINDOW
    candidates = len(knob_rules.candidates(horovod_cell().knobs))
    budget = candidates * launch + pairs * 2 * launch + launch / 2
    result = race(clock, budget)
    phases = [x["phase"] for x in result.launches]
    assert phases.count("race") == candidates
    assert result.confirm_plan.launches == pairs and phases.count("confirm") == 2 * pairs
    # tune.json says it in launches and paired slots, not in the plan's pairs
    assert files.plan_document(result.confirm_plan, in_launch=False) == {
        "launches": 2 * pairs, "paired_slots": pairs, "rounds_per_launch": None,
        "planned_seconds": result.confirm_plan.seconds}
    assert result.seconds <= budget


def test_a_budget_beyond_the_most_confirmation_goes_on_racing(clock):
    launch = FIXED + tune_run.ROUNDS_PER_LAUNCH * WINDOW
    candidates = len(knob_rules.candidates(horovod_cell().knobs))
    budget = 4 * candidates * launch + tune_run.CONFIRM_MAX * 2 * launch
    result = race(clock, budget)
    phases = [x["phase"] for x in result.launches]
    assert phases.count("race") > 2 * candidates  # rounds after the first, fewer as it drops
    assert result.confirm_plan.launches == tune_run.CONFIRM_MAX
    assert phases.count("confirm") == 2 * tune_run.CONFIRM_MAX
    assert result.seconds <= budget
    assert result.confirmation.significant and "cycle_time_ms=25" in result.winner


class LaunchNoiseTuner(SimulatedTuner):
    """Confirmation launches whose ratio moves from launch to launch (a whole launch of the
    winner faster or slower) far beyond the race's window noise."""

    def launch(self, cell, result, candidates, rounds, phase, options=None):
        record = super().launch(cell, result, candidates, rounds, phase, options)
        if phase == "confirm" and any(c.name in self.gain for c in candidates):
            factor = math.exp(self.noise.gauss(0, 0.10))
            for name, values in record["candidate_images_per_sec"].items():
                if name in self.gain:
                    record["candidate_images_per_sec"][name] = [v * factor for v in values]
        return record


def test_an_unconfirmed_pick_asks_for_what_its_own_confirmation_measured(clock):
    """The advice after a failed confirmation rests on the confirmation's own launches: the
    race's slots (3% noise) would ask for the least confirmation, which just failed."""
    launch = FIXED + tune_run.ROUNDS_PER_LAUNCH * WINDOW
    candidates = len(knob_rules.candidates(horovod_cell().knobs))
    budget = 4 * candidates * launch + tune_run.CONFIRM_MAX * 2 * launch
    result = race(clock, budget, gain=1.05, tuner=LaunchNoiseTuner, seed=3)
    assert result.winner == result.race.default  # 8 pairs spreading by ~10% do not confirm 5%
    [finding] = [f for f in result.findings if f.startswith("not confirmed over 8 pairs")]
    assert "measured gain" in finding and "a confirmation pair spreads by" in finding
    asked = int(finding.split("takes at least ")[1].split()[0])
    assert asked > tune_run.CONFIRM_MAX, finding
