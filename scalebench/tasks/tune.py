"""The tuning task: the candidates of one cell (framework x model x workers) measured inside one
launch, interleaved window by window (worker/interleave.py). Where a framework reads its knobs
only when it starts (Horovod), a launch holds one candidate, and the tuner interleaves launches
instead (tuning/run.py); the record has the same shape either way.

A record holds, per candidate, the images/s of each round's window (slowest rank) and what the
framework reported for the settings it ran with.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

from scalebench.analysis import stats
from scalebench.frameworks.base import LaunchOutcome
from scalebench.records import validity
from scalebench.records.schema import LAUNCH_FIELDS, RecordError, check_fields, launch_fields
from scalebench.spec import identity
from scalebench.spec.launch import Job
from scalebench.tasks.base import Task
from scalebench.tasks.train import TrainSpec
from scalebench.worker.comm import Comm

KIND = "tune"


@dataclass(frozen=True)
class TuneSpec:
    kind: ClassVar[str] = KIND  # the task this spec belongs to (Job checks it)
    train: TrainSpec  # the step every candidate times (its iters: steps per window)
    candidates: tuple[tuple[str, dict[str, Any]], ...]  # (name, settings) changed in-launch
    rounds: int  # windows per candidate in this launch, interleaved
    rewarm: int  # untimed steps after each candidate's wrap
    seed: int  # shuffles the candidates' order in each round (shared by every rank)
    cell: str  # "framework/model/wN", the cell this launch belongs to
    phase: str = "race"  # race or confirm

    def __post_init__(self):
        object.__setattr__(self, "candidates",
                           tuple((str(n), dict(s)) for n, s in self.candidates))

    @property
    def steps(self) -> int:
        """Training steps each worker runs in this launch, warm-ups included
        (worker/interleave.py: one candidate warms up once; several re-warm after each wrap)."""
        t = self.train
        if len(self.candidates) == 1:
            return max(self.rewarm, t.warmup) + self.rounds * t.iters
        return t.warmup + self.rounds * len(self.candidates) * (self.rewarm + t.iters)


FIELDS: dict[str, tuple[type, ...]] = {
    "cell": (str,), "phase": (str,), "model": (str,), "batch_size": (int,),
    "image_size": (int,), "precision": (str,), "iters": (int,), "rounds": (int,),
    "candidates": (list,),
}
OK_FIELDS: dict[str, tuple[type, ...]] = {
    "candidate_images_per_sec": (dict,), "read_back": (dict,), "orders": (list,),
}


class TuneTask(Task):
    kind = KIND
    builds_model = True
    spec_type = TuneSpec
    noun = "launch"

    def spec_from_dict(self, values: dict[str, Any]) -> TuneSpec:
        return TuneSpec(**{**values, "train": TrainSpec(**values["train"]),
                           "candidates": tuple((n, s) for n, s in values["candidates"])})

    def worker(self, job: Job, comm: Comm) -> dict | None:
        from scalebench.worker import interleave

        return interleave.run(job, comm)

    def records(self, job: Job, outcome: LaunchOutcome | None, env: dict,
                skipped_reason: str = "") -> list[dict]:
        from scalebench.records import results

        spec: TuneSpec = job.task
        record: dict[str, Any] = {
            **launch_fields(job, env), "cell": spec.cell, "phase": spec.phase,
            "model": spec.train.model, "batch_size": spec.train.batch_size,
            "image_size": spec.train.image_size, "precision": spec.train.precision,
            "iters": spec.train.iters, "rounds": spec.rounds,
            "candidates": [{"name": n, "settings": s} for n, s in spec.candidates],
        }
        if outcome is None:
            record.update(status="skipped", error=skipped_reason)
        else:
            record.update(status=outcome.status, error=outcome.error)
            if outcome.status != "ok":
                record["stderr_tail"] = outcome.stderr_tail
            else:
                result = outcome.result
                images = spec.train.global_batch * spec.train.iters
                record.update(
                    candidate_images_per_sec={
                        name: stats.trial_throughputs(windows, images)
                        for name, windows in result["window_seconds"].items()},
                    read_back=result["read_back"], orders=result["orders"],
                    threads_measured=result.get("threads"),
                    device_name=result.get("device_name"),
                    launch_seconds=result.get("seconds"))
        results.validate(record)
        return [record]

    def check_record(self, record: dict[str, Any]) -> None:
        fields = {**LAUNCH_FIELDS, **FIELDS}
        if record.get("status") == "ok":
            fields.update(OK_FIELDS)
        check_fields(record, fields)
        if record["status"] == "ok":
            names = {c["name"] for c in record["candidates"]}
            rates = record["candidate_images_per_sec"]
            if set(rates) != names:
                raise RecordError("candidate_images_per_sec does not name every candidate")
            for name, values in rates.items():
                validity.check_values(f"candidate {name}'s images/s", values, record["rounds"],
                                      per="round")

    def label(self, job: Job) -> str:
        spec: TuneSpec = job.task
        return (f"tune {spec.cell} {spec.phase}: {len(spec.candidates)} candidate"
                f"{'s' if len(spec.candidates) != 1 else ''} x {spec.rounds} rounds")

    def result_line(self, record: dict) -> str:
        head = f"tune {record['cell']} {record['phase']}"
        if record["status"] != "ok":
            return f"{head}: {record['status'].upper()} - {record['error']}"
        best = max(record["candidate_images_per_sec"].items(),
                   key=lambda kv: sum(kv[1]) / len(kv[1]))
        return (f"{head}: {len(record['candidates'])} candidates measured, fastest here "
                f"{best[0]} {sum(best[1]) / len(best[1]):.2f} images/s")

    def resume_keys(self, job: Job) -> list[tuple]:
        launch = job.launch
        return [identity.resume_key({"kind": KIND, "framework": launch.framework,
                                     "world_size": launch.world_size, "run_id": job.run_id,
                                     "options": launch.options_dict(),
                                     **dataclasses.asdict(job.task)})]


TASK = TuneTask()
