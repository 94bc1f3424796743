"""Run a sweep: expand, launch each run isolated, append its record, resume, then analyse."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from scalebench import devices, envinfo, frameworks, plan, report, results
from scalebench.config import RunSpec, SweepSpec
from scalebench.frameworks.base import LaunchOutcome, Sessions
from scalebench.progress import Progress


@dataclass
class SweepOutcome:
    out_dir: Path
    records: list[dict] = field(default_factory=list)
    skipped_existing: int = 0
    outputs: list[Path] = field(default_factory=list)
    interrupted: bool = False


def _label(run: RunSpec) -> str:
    return f"{run.model} {run.framework} x{run.world_size} {run.precision}"


def _set_aside(path: Path) -> Path | None:
    """Without --resume an old results file is moved aside, never mixed or overwritten."""
    if not path.is_file() or path.stat().st_size == 0:
        return None
    previous = path.parent / "previous"
    previous.mkdir(exist_ok=True)
    target = previous / f"results-{time.strftime('%Y%m%d-%H%M%S')}.jsonl"
    path.replace(target)
    return target


def run_sweep(sweep: SweepSpec, progress: Progress | None = None) -> SweepOutcome:
    device = devices.resolve(sweep.device)
    runs = plan.expand(sweep, device)
    out_dir = Path(sweep.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    results_path = out_dir / results.RESULTS_FILE
    progress = progress or Progress(len(runs), live=False if sweep.quiet else None)
    outcome = SweepOutcome(out_dir)

    done = results.ok_keys(results_path) if sweep.resume else set()
    if not sweep.resume:
        moved = _set_aside(results_path)
        if moved:
            progress.note(f"previous results moved to {moved}")
    env = envinfo.collect(device.device, device.backend)
    sessions = Sessions(sweep, out_dir)
    try:
        for run in runs:
            if run.key() in done:
                outcome.skipped_existing += 1
                progress.skip(_label(run), "already recorded ok (--resume)")
                continue
            adapter = frameworks.get(run.framework)
            available, reason = adapter.available()
            if not available:
                record = results.train_record(run, None, env, skipped_reason=reason)
                results.append(results_path, record)
                outcome.records.append(record)
                progress.skip(_label(run), f"SKIPPED - {reason}")
                continue
            sessions.activate(adapter)
            progress.start(_label(run))
            launch = adapter.launch(run, out_dir / "runs" / run.run_id)
            if launch.status == "ok" and not adapter.records_here(sweep):
                progress.finish_elsewhere(_label(run))
                continue
            try:
                record = results.train_record(run, launch, env)
            except (ValueError, KeyError, TypeError) as exc:  # workers sent something unusable
                bad = LaunchOutcome("failed", None, f"unusable result from the workers: {exc}",
                                    launch.stderr_tail, launch.launch_unix)
                record = results.train_record(run, bad, env)
            results.append(results_path, record)
            outcome.records.append(record)
            progress.finish(record)
    except KeyboardInterrupt:
        outcome.interrupted = True
        progress.note("interrupted: children stopped; results so far are saved in "
                      f"{results_path}; continue with --resume")
    finally:
        progress.close()
        sessions.close_all()
    if results_path.is_file():
        records, problems = results.load([results_path])
        outcome.outputs = report.write_all(records, problems, out_dir)
    return outcome
