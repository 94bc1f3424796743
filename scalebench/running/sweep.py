"""The two things a user launches: a training sweep (then its report) and an allreduce sweep.
Each is plan -> executor.execute; commands/ only parse arguments into these calls."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from scalebench.hardware import devices, peak
from scalebench.records import results
from scalebench.running import executor
from scalebench.running.progress import Progress
from scalebench.spec.config import SweepSpec
from scalebench.spec.errors import UserError
from scalebench.tasks import allreduce, train


@dataclass
class SweepOutcome:
    out_dir: Path
    records: list[dict] = field(default_factory=list)
    skipped_existing: int = 0
    outputs: list[Path] = field(default_factory=list)
    interrupted: bool = False


def allreduce_jobs(sweep: SweepSpec, device: devices.DeviceInfo, vetting=None) -> list:
    """--with-allreduce: each framework's own allreduce at its own message size (DDP bucket,
    Horovod fusion buffer) and at 1 MiB (the latency end of the link fit), at every worker
    count of the sweep from 2 up, before the training runs."""
    from scalebench import frameworks

    workers = [w for w in train.sweep_workers(sweep, device) if w >= 2]
    if not workers:
        return []
    jobs = []
    for framework in sweep.frameworks:
        options = dataclasses.asdict(sweep.options(framework))
        bucket = frameworks.bucket_bytes(framework, options) or allreduce.MIB
        sizes = sorted({allreduce.MIB, bucket - bucket % 4})
        one = dataclasses.replace(sweep, frameworks=(framework,), workers=tuple(workers))
        jobs += allreduce.plan(one, sizes, "float32", device, vetting=vetting)
    return jobs


def run_sweep(sweep: SweepSpec, progress: Progress | None = None) -> SweepOutcome:
    """Plan the training runs (and with --with-allreduce the link measurements first), measure
    the device's peak FLOP/s at each precision, execute them, then write summary, figures and
    reports (unless the sweep asks for records only)."""
    device = devices.resolve(sweep.device)
    jobs = train.plan(sweep, device)  # every input error before a vetting spends time
    vetting = vet_first(sweep)
    if vetting is not None:  # the same plan, placed on the vetted nodes
        jobs = train.plan(sweep, device, vetting)
    jobs = peak.with_peaks(jobs, device)  # before any launch
    if sweep.with_allreduce:
        jobs = allreduce_jobs(sweep, device, vetting) + jobs
    progress = progress or Progress(len(jobs), live=False if sweep.quiet else None)
    if not progress.total:
        progress.total = len(jobs)
    done = executor.execute(jobs, device, Path(sweep.out), sweep.options, resume=sweep.resume,
                            progress=progress, launch_mode=sweep.launch,
                            vetting=None if vetting is None else vetting.record_field(),
                            strict=sweep.strict)
    outcome = SweepOutcome(done.out_dir, done.records, done.skipped_existing,
                           interrupted=done.interrupted)
    if sweep.report:
        outcome.outputs = write_report(done.results_path)
    return outcome


def write_report(results_path: Path) -> list[Path]:
    """Summary, figures and reports beside a sweep's results file (none without one)."""
    if not results_path.is_file():
        return []
    from scalebench import report

    records, problems = results.load([results_path])
    return report.write_all(records, problems, results_path.parent)


def vet_first(sweep: SweepSpec):
    """--vet: vet the allocation now (into OUT/vet); --vet-file: an earlier vetting of this
    job; else None. A vetting whose probes failed stops the sweep (exit 1)."""
    if sweep.vet is None and sweep.vet_file is None:
        return None
    from scalebench.slurm import allocation
    from scalebench.vet import files

    if sweep.vet_file is not None:
        vetting = files.load(sweep.vet_file, allocation.current())
        print(f"vetting {vetting.id} from {vetting.path}: {vetting.excluded_text()}")
        return vetting
    from scalebench.vet.run import run_vet, summary_lines

    outcome = run_vet(sweep.vet, Path(sweep.out) / "vet", live=False if sweep.quiet else None)
    for line in summary_lines(outcome.document):
        print(line)
    if outcome.interrupted:
        raise KeyboardInterrupt
    if not outcome.ok:
        raise VetFailed(f"vet: the vetting failed ({outcome.document['error']}); no run "
                        f"placed; see {Path(sweep.out) / 'vet' / 'vet.json'}")
    return outcome.vetting


class VetFailed(UserError):
    exit_code = 1


def run_allreduce(sweep: SweepSpec, sizes: Sequence[int], dtype: str = "float32",
                  stream: TextIO | None = None) -> executor.ExecutionOutcome:
    """Launch every framework x worker count; one record per size appended to OUT/results.jsonl
    (never moved aside, so allreduce points can sit next to a sweep's training records)."""
    device = devices.resolve(sweep.device)
    jobs = allreduce.plan(sweep, sizes, dtype, device)
    progress = Progress(len(jobs), stream=stream or sys.stdout, live=False)
    return executor.execute(jobs, device, Path(sweep.out), sweep.options, resume=sweep.resume,
                            fresh_file=False, progress=progress)
