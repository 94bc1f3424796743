"""Horovod, launched with horovodrun (gloo controller); multi-host through --hosts/--hostfile."""

from __future__ import annotations

import dataclasses
import functools
import shutil
import subprocess
import sys
from pathlib import Path

from scalebench import config
from scalebench.config import HorovodOptions, RunSpec, SweepSpec
from scalebench.frameworks import process
from scalebench.frameworks.base import Framework, LaunchOutcome

FIX = "run `make horovod` (or point SCALEBENCH_HOROVOD=system at your own installation)"


def horovodrun_path() -> str | None:
    beside = Path(sys.executable).parent / "horovodrun"
    return str(beside) if beside.is_file() else shutil.which("horovodrun")


@functools.cache
def check_installation() -> tuple[bool, str]:
    """Import horovod.torch in a child: a broken extension must not take down the sweep."""
    if horovodrun_path() is None:
        return False, f"horovod is not installed (no horovodrun found); {FIX}"
    probe = ("import horovod, horovod.torch as hvd; "
             "assert hvd.gloo_built(), 'built without Gloo'; print(horovod.__version__)")
    try:
        out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                             timeout=120)
    except subprocess.TimeoutExpired:
        return False, f"importing horovod.torch took over 120 s; {FIX}"
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["unknown error"])[-1]
        return False, f"horovod.torch does not load ({last}); {FIX}"
    return True, f"horovod {out.stdout.strip()}"


def slots(options: HorovodOptions | dict) -> list[tuple[str, int]]:
    """(host, slots) pairs from --hosts or a hostfile ("host slots=N" lines)."""
    opts = options if isinstance(options, dict) else options.__dict__
    if opts.get("hosts"):
        return [(h, int(n)) for h, n in (item.split(":") for item in opts["hosts"].split(","))]
    if opts.get("hostfile"):
        pairs = []
        for line in Path(opts["hostfile"]).read_text().splitlines():
            line = line.split("#", 1)[0].strip()
            if line:
                host, _, rest = line.partition(" ")
                count = rest.strip().removeprefix("slots=")
                pairs.append((host, int(count) if count.isdigit() else 1))
        return pairs
    return []


def hosts_used(pairs: list[tuple[str, int]], world_size: int) -> int:
    """How many hosts horovodrun fills, in order, for world_size processes."""
    left, used = world_size, 0
    for _, count in pairs:
        if left <= 0:
            break
        used += 1
        left -= count
    return max(1, used)


def horovodrun_command(spec: RunSpec, run_dir: Path) -> list[str]:
    opts = spec.options
    cmd = [horovodrun_path() or "horovodrun", "-np", str(spec.world_size), "--gloo"]
    if opts.get("hostfile"):
        cmd += ["--hostfile", opts["hostfile"]]
    else:
        cmd += ["-H", opts.get("hosts") or f"localhost:{spec.world_size}"]
    if opts.get("fusion_threshold_mb") is not None:
        cmd += ["--fusion-threshold-mb", f"{opts['fusion_threshold_mb']:g}"]
    if opts.get("cycle_time_ms") is not None:
        cmd += ["--cycle-time-ms", f"{opts['cycle_time_ms']:g}"]
    if opts.get("timeline"):
        cmd += ["--timeline-filename", str(run_dir / "timeline.json")]
    cmd += [sys.executable, "-m", "scalebench.frameworks.horovod_worker", str(run_dir)]
    return cmd


class Horovod(Framework):
    name = "horovod"
    options_type = config.HorovodOptions
    step_options = ("fp16_allreduce", "fusion_threshold_mb", "cycle_time_ms", "timeline")
    default_bucket_bytes = 128 * 2**20  # HOROVOD_FUSION_THRESHOLD since Horovod 0.21

    def bucket_bytes(self, options: dict) -> int:
        mb = options.get("fusion_threshold_mb")
        return self.default_bucket_bytes if mb is None else int(mb * 2**20)

    def available(self) -> tuple[bool, str]:
        return check_installation()

    def planned_nodes(self, sweep: SweepSpec, world_size: int) -> int:
        pairs = slots(sweep.horovod)
        return hosts_used(pairs, world_size) if pairs else 1

    def launch(self, spec: RunSpec, run_dir: Path) -> LaunchOutcome:
        process.write_spec(run_dir, spec.to_json())
        proc = process.run_isolated(horovodrun_command(spec, run_dir),
                                    process.base_env(spec.threads_per_worker), spec.timeout,
                                    run_dir)
        outcome = process.outcome_from_files(run_dir, proc, "horovodrun", spec.timeout)
        timeline = run_dir / "timeline.json"
        artifacts = {"timeline": str(timeline)} if spec.options.get("timeline") and \
            timeline.is_file() else {}
        nodes = None
        if outcome.result and outcome.result.get("topology"):
            nodes = outcome.result["topology"][0].get("cross_size")  # Horovod's own host count
        return dataclasses.replace(outcome, nodes=nodes, artifacts=artifacts)


FRAMEWORK = Horovod()
