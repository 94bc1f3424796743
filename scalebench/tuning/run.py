"""`scalebench tune`: for every cell (framework x model x workers), race the candidates of the
framework's knobs in interleaved launches through the executor, confirm the winner against the
default over fresh paired launches, and write tune.json, tuned.toml, tune.md and tune.html.

Two ways to interleave, chosen by the framework's knobs (Knob.in_launch):
- in one launch (DDP, Ray Train: a re-wrap changes the bucket settings): every launch times
  each surviving candidate once per round, `rounds` rounds, in a shuffled order; a slot of the
  race is one round;
- across launches (Horovod reads its knobs at hvd.init()): a round launches each surviving
  candidate once, in a shuffled order; a slot is one round of launches, a candidate's value its
  launch's mean.
"""

from __future__ import annotations

import dataclasses
import math
import random
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from scalebench import frameworks
from scalebench.frameworks.base import Knob, Sessions
from scalebench.hardware import devices
from scalebench.running import executor
from scalebench.running.progress import Progress, duration
from scalebench.spec.config import SweepSpec
from scalebench.spec.errors import UserError
from scalebench.spec.launch import Job
from scalebench.tasks import train
from scalebench.tasks.tune import KIND, TuneSpec
from scalebench.tuning import knobs as knob_rules
from scalebench.tuning.race import (
    Candidate,
    Confirmation,
    ConfirmPlan,
    Race,
    confirm,
    launches_to_confirm,
    plan_confirmation,
)

ROUNDS_PER_LAUNCH = 3  # windows per candidate per launch, at most (in-launch races)
CONFIRM_LAUNCHES = 3  # at least
# At most: the confirmation takes more paired launches where the cell's budget has room left
# after the race (how many, and how many rounds each, is fixed from the budget before the
# first, never from its results, so stopping cannot favour a verdict). Horovod's
# launch-to-launch spread on a CPU (about 10% a launch) leaves 3 launches an interval of +-30%.
CONFIRM_MAX = 8
# A confirmation may overrun the cell's budget by this factor, no more (else it is skipped and
# the default kept, said as such).
CONFIRM_OVERRUN = 1.25
# Untimed steps after each re-wrap. DDP reduces its first two iterations with every gradient in
# one bucket and rebuilds its buckets (by bucket_cap_mb, in backward order) at the start of the
# third forward (torch 2.14, measured: DDP's logging data reports one bucket reduced in the first
# two iterations, has_rebuilt_buckets and the capped buckets after the third). Timing from the
# fourth step keeps both the single bucket and the rebuild out of the window.
REWARM = 3
# Timed steps of an in-launch window, at least: every window pays REWARM untimed steps and a
# re-wrap, so a short window is mostly overhead (at 2 steps a window, 60% of a launch's steps
# were untimed). From 3 x REWARM the re-warm is at most a quarter of a window's steps. A longer
# window than the workload's iters changes no step: it times more of the same steps.
WINDOW_STEPS_MIN = 3 * REWARM
# A floor on one launch's seconds, to refuse a budget too small for a race and its
# confirmation before anything runs (start-up alone of the smallest cell on a CPU: torchrun and
# horovodrun ~5 s, a TorchTrainer fit on a running embedded Ray ~15 s).
MIN_LAUNCH_SECONDS = {"ddp": 5.0, "horovod": 5.0, "ray": 15.0}


@dataclass
class Cell:
    framework: str
    model: str
    workers: int
    nodes: int
    job: Job  # the planned training job of this cell at the framework's defaults
    knobs: tuple[Knob, ...]
    # the least timed steps of an in-launch window (a smoke run that only checks that the
    # pieces fit together may ask for fewer; what it measures is then mostly re-warm)
    window_min: int = WINDOW_STEPS_MIN

    @property
    def name(self) -> str:
        return f"{self.framework}/{self.model}/w{self.workers}"

    @property
    def in_launch(self) -> bool:
        return knob_rules.in_launch(self.knobs)

    @property
    def samples(self) -> str:
        """What the confirmation's samples are, plural: launches timing both candidates, or
        pairs of launches (one each) where the knobs are read only as the framework starts.
        Every text that counts them says this, so a Horovod "8" is never read as 8 launches."""
        return "launches" if self.in_launch else "pairs of launches"

    @property
    def window_steps(self) -> int:
        """Timed steps of one window: the workload's iters, at least window_min
        (WINDOW_STEPS_MIN) where every window follows a re-wrap (a launch of one candidate
        warms up once)."""
        iters = self.job.task.iters
        return max(iters, self.window_min) if self.in_launch else iters


@dataclass
class CellResult:
    cell: Cell
    race: Race
    launches: list[dict[str, Any]] = field(default_factory=list)  # run id, phase, status, s
    confirmation: Confirmation | None = None
    read_back: dict[str, list[dict]] = field(default_factory=dict)
    findings: list[str] = field(default_factory=list)
    stopped: str = ""  # why the race ended
    seconds: float = 0.0
    confirm_slots: list[dict[str, float]] = field(default_factory=list)
    confirm_plan: ConfirmPlan | None = None

    @property
    def winner(self) -> str:
        c = self.confirmation
        if c is None or not c.significant:
            return self.race.default
        return c.winner


@dataclass
class TuneOutcome:
    out_dir: Path
    cells: list[CellResult]
    budget_seconds: float
    seed: int
    interrupted: bool = False
    files: list[Path] = field(default_factory=list)


def plan_cells(sweep: SweepSpec, device: devices.DeviceInfo, knobs_text: str | None,
               window_min: int = WINDOW_STEPS_MIN) -> list[Cell]:
    """One cell per framework x model x worker count >= 2, each planned as the sweep plans it
    (every input checked before anything launches)."""
    if len(sweep.precision) != 1:
        raise UserError(f"precision: tune takes one precision at a time, got "
                        f"{', '.join(sweep.precision)}")
    chosen = knob_rules.parse(knobs_text, sweep.frameworks)
    workers = train.sweep_workers(sweep, device)
    if not any(w >= 2 for w in workers):
        raise UserError(f"workers: tune needs worker counts >= 2 (one worker has no "
                        f"communication to tune), got {','.join(map(str, workers))}")
    cells = []
    for framework in sweep.frameworks:
        for model in sweep.models:
            for w in (w for w in workers if w >= 2):
                one = dataclasses.replace(sweep, frameworks=(framework,), models=(model,),
                                          workers=(w,), repeats=1, breakdown=False,
                                          profile=False, with_allreduce=False)
                jobs = [j for j in train.plan(one, device) if j.launch.world_size == w]
                job = jobs[0]
                spec = dataclasses.replace(job.task, measure_wrapper=False, breakdown_windows=0)
                job = dataclasses.replace(job, task=spec)
                cells.append(Cell(framework, model, w, job.launch.nodes, job,
                                  knob_rules.for_cell(chosen[framework], job.launch.nodes),
                                  window_min))
    return cells


def check_budget(cells: Sequence[Cell], budget: float) -> None:
    """A budget that cannot pay for one race launch and the confirmation in every cell is
    refused before anything runs."""
    need = sum(MIN_LAUNCH_SECONDS.get(c.framework, 10.0) * (1 + CONFIRM_LAUNCHES)
               * (1 if c.in_launch else 2) for c in cells)
    if budget < need:
        raise UserError(f"budget: {duration(budget)} is too small for {len(cells)} cell"
                        f"{'s' if len(cells) != 1 else ''}: at least {duration(need)} (a race "
                        f"launch and {CONFIRM_LAUNCHES} confirmation "
                        f"{' or '.join(sorted({c.samples for c in cells}))} per cell)")


class Tuner:
    """The launches of one tune: every cell's race, then its confirmation."""

    def __init__(self, sweep: SweepSpec, device: devices.DeviceInfo, out_dir: Path,
                 budget: float, seed: int, stream: TextIO | None = None,
                 live: bool | None = None):
        self.sweep, self.device, self.out_dir = sweep, device, out_dir
        self.budget, self.seed = budget, seed
        self.rng = random.Random(seed)
        self.stream, self.live = stream, live
        self.started = time.monotonic()
        self.sessions = Sessions(sweep.options, device.device, out_dir)
        self.launch_count = 0

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def note(self, text: str) -> None:
        left = max(0.0, self.budget - self.elapsed())
        print(f"[tune {duration(self.elapsed())} of {duration(self.budget)}, "
              f"{duration(left)} left] {text}", file=self.stream, flush=True)

    def launch(self, cell: Cell, result: CellResult, candidates: Sequence[Candidate],
               rounds: int, phase: str, options: Any = None) -> dict | None:
        """One launch of the tune task; its record (or None when interrupted)."""
        self.launch_count += 1
        spec = TuneSpec(train=dataclasses.replace(cell.job.task, iters=cell.window_steps),
                        candidates=tuple((c.name, dict(c.settings) if cell.in_launch else {})
                                         for c in candidates),
                        rounds=rounds, rewarm=REWARM, seed=self.rng.randrange(2**31),
                        cell=cell.name, phase=phase)
        launch = cell.job.launch if options is None else dataclasses.replace(
            cell.job.launch, options=options)
        run_id = (f"tune-{self.launch_count:03d}-{cell.framework}-{cell.model}-w{cell.workers}"
                  f"-{phase}")
        job = Job(run_id, KIND, launch, spec)
        begun = time.monotonic()
        done = executor.execute([job], self.device, self.out_dir, self.sweep.options,
                                fresh_file=False, sessions=self.sessions,
                                progress=Progress(1, stream=self.stream, live=self.live))
        if done.interrupted:
            raise KeyboardInterrupt
        record = done.records[0] if done.records else None
        result.launches.append({"run_id": run_id, "phase": phase,
                                "candidates": [c.name for c in candidates],
                                "status": None if record is None else record["status"],
                                "error": None if record is None else record.get("error"),
                                "steps": spec.steps, "seconds": time.monotonic() - begun})
        return record

    def close(self) -> None:
        self.sessions.close_all()


def slot_values(record: dict) -> list[dict[str, float]]:
    """One slot per round of an in-launch record: candidate -> that round's images/s."""
    rates = record["candidate_images_per_sec"]
    return [{name: values[i] for name, values in rates.items()}
            for i in range(record["rounds"])]


def round_of_launches(tuner: Tuner, cell: Cell, result: CellResult,
                      candidates: Sequence[Candidate], rounds: int, phase: str
                      ) -> dict[str, float]:
    """One launch per candidate, in the order given, each with its own settings (knobs read
    when the framework starts); candidate -> its launch's mean, for the launches that ended ok."""
    values = {}
    for candidate in candidates:
        options = knob_rules.options_with(cell.framework, cell.job.launch.options,
                                          dict(candidate.settings))
        record = tuner.launch(cell, result, [candidate], rounds, phase, options)
        if record is not None and record["status"] == "ok":
            values[candidate.name] = launch_mean(record)
    return values


def launch_mean(record: dict) -> float:
    """An across-launch candidate's value: the geometric mean of its launch's windows."""
    values = next(iter(record["candidate_images_per_sec"].values()))
    return math.exp(sum(math.log(v) for v in values) / len(values))


def keep_read_back(result: CellResult, record: dict, wanted: dict[str, Candidate]) -> None:
    """What the framework reported for each candidate's settings, and any it did not apply."""
    for name, per_rank in (record.get("read_back") or {}).items():
        if name in result.read_back:
            continue
        result.read_back[name] = per_rank
        candidate = wanted.get(name)
        if candidate is None:
            continue
        for problem in ignored_settings(candidate.settings, per_rank):
            result.findings.append(f"{name}: {problem}")


def ignored_settings(settings: dict[str, Any], per_rank: list[dict]) -> list[str]:
    """Settings the framework reports otherwise than asked (a silent no-op is a finding)."""
    problems = []
    for rank, seen in enumerate(per_rank):
        if seen.get("rebuilt_buckets") is False:
            problems.append(f"rank {rank}: DDP had not rebuilt its buckets by the end of the "
                            "window: the bucket cap was not in effect while timed")
        for key, asked in settings.items():
            if key not in seen:
                continue
            got = seen[key]
            same = (abs(float(got) - float(asked)) <= 1e-6 * max(1.0, abs(float(asked)))
                    if isinstance(asked, (int, float)) and not isinstance(asked, bool)
                    else bool(got) == bool(asked))
            if not same:
                problems.append(f"rank {rank} runs {key}={got} although {asked} was asked")
    return problems


def race_cell(tuner: Tuner, cell: Cell, budget: float, into: list[CellResult]) -> CellResult:
    """The race of one cell within its budget (seconds), then the confirmation. The result is
    appended to `into` first, so that an interruption keeps what was measured."""
    candidates = knob_rules.candidates(cell.knobs)
    race = Race(candidates)
    result = CellResult(cell, race)
    into.append(result)
    started = time.monotonic()
    by_name = {c.name: c for c in candidates}
    # A launch's seconds: fixed (start-up, build, gather) + its windows (each with its re-wrap
    # and re-warm), measured on the last race launch; a floor until one is measured.
    cost = {"fixed": MIN_LAUNCH_SECONDS.get(cell.framework, 10.0), "window": 0.0}
    # windows per launch of one candidate (its trials) where launches interleave
    trials = 1 if cell.in_launch else ROUNDS_PER_LAUNCH

    def spent() -> float:
        return time.monotonic() - started

    def measured(began: float, record: dict, windows: int) -> None:
        wall = time.monotonic() - began
        inside = min(wall, record.get("launch_seconds") or wall)
        cost.update(fixed=wall - inside, window=inside / windows)

    def round_cost(candidates: int, rounds: int = 1) -> float:
        """Seconds to measure `candidates` for `rounds` paired slots: one launch, or a launch
        each per round."""
        if cell.in_launch:
            return cost["fixed"] + candidates * rounds * cost["window"]
        return rounds * candidates * (cost["fixed"] + trials * cost["window"])

    def reserve(launches: int = CONFIRM_LAUNCHES) -> float:
        """The confirmation's seconds: of its least launches (what decides whether it can be
        paid at all) or of its most (what the race leaves it before taking another round)."""
        return launches * round_cost(2)

    def race_rounds(candidates: int) -> int:
        """Rounds of the next in-launch race launch: what the budget holds besides the
        confirmation's reserve, 1 to ROUNDS_PER_LAUNCH (1 until a launch is measured)."""
        if not cost["window"]:
            return 1
        room = budget - spent() - reserve(CONFIRM_MAX) - cost["fixed"]
        return max(1, min(ROUNDS_PER_LAUNCH, int(room // (candidates * cost["window"]))))

    how = ("interleaved inside each launch" if cell.in_launch else
           "one launch each, in interleaved rounds")
    tuner.note(f"{cell.name}: {len(candidates)} candidates of "
               f"{', '.join(k.option for k in cell.knobs)} ({how})")
    while True:
        alive = race.survivors()
        if len(alive) == 1:
            result.stopped = "only the default is left"
            break
        # After its first round the race goes on only while the confirmation keeps the room
        # for its most launches: the race picks, only the confirmation certifies (a short race
        # drops nothing anyway: a signed-rank test's least p over n slots is 2^-n, against an
        # alpha spent over every look). Measured: Horovod VGG-16 picked well in 5 tunes of 5
        # and confirmed none, over 3 pairs of launches.
        if result.launches and spent() + round_cost(len(alive)) + reserve(CONFIRM_MAX) > budget:
            result.stopped = f"the cell's budget ({duration(budget)}) is spent"
            break
        if cell.in_launch:
            began = time.monotonic()
            rounds = race_rounds(len(alive))
            record = tuner.launch(cell, result, alive, rounds, "race")
            if record is None or record["status"] != "ok":
                if not find_broken(tuner, cell, result, alive, record):
                    break
                continue
            measured(began, record, len(alive) * rounds)
            keep_read_back(result, record, by_name)
            for slot in slot_values(record):
                race.add_slot(slot)
        else:
            slot: dict[str, float] = {}
            order = list(alive)
            tuner.rng.shuffle(order)
            for candidate in order:
                began = time.monotonic()
                options = knob_rules.options_with(cell.framework, cell.job.launch.options,
                                                  dict(candidate.settings))
                record = tuner.launch(cell, result, [candidate], trials, "race", options)
                if record is None or record["status"] != "ok":
                    reason = "no record" if record is None else record.get("error") or "failed"
                    if candidate.default:
                        result.stopped = f"the default failed: {reason}"
                        return finish(result, started)
                    race.fail(candidate.name, reason)
                    continue
                measured(began, record, trials)
                keep_read_back(result, record, by_name)
                slot[candidate.name] = launch_mean(record)
            if len(slot) > 1:
                race.add_slot(slot)
        for drop in race.step():
            tuner.note(f"{cell.name}: dropped {drop.candidate}: {drop.reason()}")
    winner = race.best()
    if winner == race.default or result.stopped.startswith("the default failed"):
        result.confirmation = confirm(race.default, race.default, [1.0])
        tuner.note(f"{cell.name}: no candidate ahead of the default ({result.stopped})")
        return finish(result, started)
    race_seconds = spent()
    advice = confirm_advice(race, winner, race_seconds, round_cost(2), cell.samples)
    if race_seconds + reserve() > budget * CONFIRM_OVERRUN:
        result.findings.append(
            f"{winner} led the race ({race.score(winner) * 100:+.1f}% on its paired slots) but "
            f"the cell's budget ({duration(budget)}) cannot pay for its confirmation (about "
            f"{duration(reserve())} more): the default is kept; a larger --budget confirms it"
            + (f" ({advice})" if advice else ""))
        result.confirmation = confirm(race.default, race.default, [1.0])
        tuner.note(f"{cell.name}: {result.findings[-1]}")
        return finish(result, started)
    if cell.in_launch:
        plan = plan_confirmation(budget - race_seconds, cost["fixed"], 2 * cost["window"],
                                 CONFIRM_LAUNCHES, CONFIRM_MAX)
    else:  # a paired slot is a launch of each: one slot per pair of launches
        plan = plan_confirmation(budget - race_seconds, 0.0, round_cost(2), CONFIRM_LAUNCHES,
                                 CONFIRM_MAX, most_rounds=1)
    result.confirm_plan = plan
    tuner.note(f"{cell.name}: confirming {winner} against the default over "
               + (f"{plan.launches} fresh launches of {plan.rounds} paired windows each"
                  if cell.in_launch else f"{plan.launches} fresh pairs of launches"))
    ratios = []
    pair = [by_name[winner], by_name[race.default]]
    for _ in range(plan.launches):
        if cell.in_launch:
            record = tuner.launch(cell, result, pair, plan.rounds, "confirm")
            if record is None or record["status"] != "ok":
                continue
            slots = slot_values(record)
            result.confirm_slots += slots
            ratios.append(math.exp(sum(math.log(s[winner] / s[race.default]) for s in slots)
                                   / len(slots)))
        else:
            order = list(pair)
            tuner.rng.shuffle(order)
            values = round_of_launches(tuner, cell, result, order, trials, "confirm")
            if len(values) == 2:
                result.confirm_slots.append(values)
                ratios.append(values[winner] / values[race.default])
    if ratios:
        result.confirmation = confirm(winner, race.default, ratios,
                                      "paired launches" if cell.in_launch else cell.samples)
        if not result.confirmation.significant:
            # the confirmation's own spread first: it holds the launch-to-launch variation the
            # race's slots cannot (measured: a race spread of 2.7% a slot asked for 3 launches,
            # where 8 launches spread by 8% and did not confirm)
            advice = confirmation_advice(winner, ratios, race_seconds,
                                         plan.seconds / plan.launches, cell.samples) or advice
            if advice:
                result.findings.append(f"not confirmed over {len(ratios)} {cell.samples}; "
                                       f"{advice}")
    else:
        result.findings.append(f"every confirmation launch of {winner} failed")
        result.confirmation = confirm(race.default, race.default, [1.0])
    tuner.note(f"{cell.name}: {result.confirmation.words()}")
    return finish(result, started)


def confirm_advice(race: Race, winner: str, race_seconds: float, pair_seconds: float,
                   samples: str = "launches") -> str | None:
    """What it would take to confirm the race's pick: confirmation `samples` (launches of one
    paired slot each, as the race's, or pairs of launches; `pair_seconds` each) for its lead
    under the additive model, from the spread of one paired slot (pooled over every
    candidate's log ratios to the default, each about its own mean), and the cell budget they
    need (None: nothing to say)."""
    predicted = race.predicted()
    if winner == race.default or winner not in predicted:
        return None
    lead = predicted[winner] - predicted.get(race.default, 0.0)
    spread = pooled_spread(race)
    if lead <= 0 or spread is None:
        return None
    return launches_advice(f"{winner}'s lead", lead, spread, "a slot", race_seconds,
                           pair_seconds, samples)


def confirmation_advice(winner: str, ratios: Sequence[float], race_seconds: float,
                        launch_seconds: float, samples: str = "launches") -> str | None:
    """The same, from an unconfirmed confirmation's own launches (preferred to the race's
    slots wherever there are two: they hold the launch-to-launch spread): its measured gain
    against the spread of its launch ratios."""
    if len(ratios) < 2:
        return None
    logs = [math.log(r) for r in ratios]
    lead, spread = statistics.fmean(logs), statistics.stdev(logs)
    if lead <= 0 or not spread > 0:
        return None
    unit = "a confirmation launch" if samples == "launches" else "a confirmation pair"
    return launches_advice(f"{winner}'s measured gain", lead, spread, unit, race_seconds,
                           launch_seconds, samples)


def launches_advice(what: str, lead: float, spread: float, unit: str, before: float,
                    launch_seconds: float, samples: str = "launches") -> str:
    n = launches_to_confirm(lead, spread, 1)
    if n is None:
        return (f"{what} ({math.expm1(lead) * 100:+.1f}%) is too small for this cell's noise "
                f"({unit} spreads by {spread * 100:.1f}%) to confirm in 100 {samples}")
    n = max(n, CONFIRM_LAUNCHES)
    return (f"confirming {what} ({math.expm1(lead) * 100:+.1f}%) against this cell's noise "
            f"({unit} spreads by {spread * 100:.1f}%) takes at least {n} confirmation "
            f"{samples}: a cell budget of about {duration(before + n * launch_seconds)}")


def pooled_spread(race: Race) -> float | None:
    """Standard deviation of one slot's log ratio to the default, pooled over candidates."""
    squares, freedom = 0.0, 0
    for c in race.candidates:
        diffs = race.paired(c.name, race.default) if not c.default else []
        if len(diffs) >= 2:
            mean = statistics.fmean(diffs)
            squares += sum((d - mean) ** 2 for d in diffs)
            freedom += len(diffs) - 1
    return math.sqrt(squares / freedom) if freedom else None


def find_broken(tuner: Tuner, cell: Cell, result: CellResult, alive: Sequence[Candidate],
                record: dict | None) -> bool:
    """A failed in-launch race launch: each non-default candidate again beside the default,
    one round each, to find which setting breaks the run; those are out of the race. False
    when the default itself fails (the cell stops)."""
    reason = "no record" if record is None else record.get("error") or record["status"]
    default = next(c for c in alive if c.default)
    tuner.note(f"{cell.name}: a race launch failed ({reason}); trying each candidate beside the "
               f"default")
    for candidate in alive:
        if candidate.default:
            continue
        alone = tuner.launch(cell, result, [default, candidate], 1, "isolate")
        if alone is None or alone["status"] != "ok":
            why = "no record" if alone is None else alone.get("error") or alone["status"]
            result.race.fail(candidate.name, why)
            tuner.note(f"{cell.name}: {candidate.name} failed: {why}")
    check = tuner.launch(cell, result, [default], 1, "isolate")
    if check is None or check["status"] != "ok":
        result.stopped = f"the default failed: {reason}"
        return False
    return True


def finish(result: CellResult, started: float) -> CellResult:
    result.seconds = time.monotonic() - started
    return result


def run_tune(sweep: SweepSpec, out_dir: Path, budget: float, knobs_text: str | None = None,
             seed: int | None = None, stream: TextIO | None = None,
             live: bool | None = None, window_min: int = WINDOW_STEPS_MIN) -> TuneOutcome:
    """Plan the cells, race each within its share of the budget, write the files (also when
    interrupted: what was measured is kept). window_min: Cell.window_min."""
    from scalebench.tuning import files

    device = devices.resolve(sweep.device)
    cells = plan_cells(sweep, device, knobs_text, window_min)
    check_budget(cells, budget)
    for cell in cells:
        available, why = frameworks.get(cell.framework).available()
        if not available:
            raise UserError(f"frameworks: {cell.framework} is not usable here: {why}")
    seed = seed if seed is not None else random.SystemRandom().randrange(2**31)
    out_dir.mkdir(parents=True, exist_ok=True)
    executor.set_aside(out_dir / "results.jsonl")
    tuner = Tuner(sweep, device, out_dir, budget, seed, stream, live)
    outcome = TuneOutcome(out_dir, [], budget, seed)
    try:
        for index, cell in enumerate(cells):
            share = (budget - tuner.elapsed()) / (len(cells) - index)
            race_cell(tuner, cell, share, outcome.cells)
    except KeyboardInterrupt:
        outcome.interrupted = True
        tuner.note("interrupted: writing what was measured")
    finally:
        tuner.close()
        outcome.files = files.write_all(outcome)
    return outcome
