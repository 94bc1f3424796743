"""horovodrun command, the Slurm step (srun-launched Gloo workers) and the Horovod adapter."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

from scalebench.frameworks import process
from scalebench.frameworks.base import MIB, Framework, LaunchOutcome
from scalebench.frameworks.horovod import install
from scalebench.frameworks.horovod import options as hvd_options
from scalebench.frameworks.horovod.install import check_installation, horovodrun_path
from scalebench.frameworks.horovod.slurm_worker import SLOTS_FILE
from scalebench.slurm import steps
from scalebench.spec.launch import Job

WORKER_MODULE = "scalebench.frameworks.horovod.worker"
SLURM_WORKER_MODULE = "scalebench.frameworks.horovod.slurm_worker"


def slots(options: hvd_options.Options | dict) -> list[tuple[str, int]]:
    """(host, slots) pairs from --hosts or a hostfile ("host slots=N" lines)."""
    opts = options if isinstance(options, dict) else dataclasses.asdict(options)
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


def horovodrun_command(job: Job, run_dir: Path) -> list[str]:
    opts: hvd_options.Options = job.launch.options
    world = job.launch.world_size
    cmd = [horovodrun_path() or "horovodrun", "-np", str(world), "--gloo"]
    if opts.hostfile:
        cmd += ["--hostfile", opts.hostfile]
    else:
        cmd += ["-H", opts.hosts or f"localhost:{world}"]
    if opts.fusion_threshold_mb is not None:
        cmd += ["--fusion-threshold-mb", f"{opts.fusion_threshold_mb:g}"]
    if opts.cycle_time_ms is not None:
        cmd += ["--cycle-time-ms", f"{opts.cycle_time_ms:g}"]
    if opts.timeline:
        cmd += ["--timeline-filename", str(run_dir / "timeline.json")]
    if opts.cache_capacity is not None:
        cmd += ["--cache-capacity", str(opts.cache_capacity)]
    if opts.hierarchical_allreduce:
        cmd += ["--hierarchical-allreduce"]
    cmd += [sys.executable, "-m", WORKER_MODULE, str(run_dir)]
    return cmd


def knob_env(options: hvd_options.Options, run_dir: Path) -> dict[str, str]:
    """The variables horovodrun sets for --fusion-threshold-mb, --cycle-time-ms, --timeline."""
    names = hvd_options.VARIABLES
    env = {}
    if options.fusion_threshold_mb is not None:
        env[names["fusion_threshold_mb"]] = str(int(options.fusion_threshold_mb * 1024 * 1024))
    if options.cycle_time_ms is not None:
        env[names["cycle_time_ms"]] = f"{options.cycle_time_ms:g}"
    if options.timeline:
        env["HOROVOD_TIMELINE"] = str(run_dir / "timeline.json")
    if options.cache_capacity is not None:
        env[names["cache_capacity"]] = str(options.cache_capacity)
    if options.hierarchical_allreduce:
        env[names["hierarchical_allreduce"]] = "1"
    return env


def slurm_launch(job: Job, run_dir: Path) -> LaunchOutcome:
    """srun-launched workers (one task per worker), with the rendezvous server horovodrun's Gloo
    launcher would hold, held here for the step: no SSH, and Slurm's time limit, scancel and
    --kill-on-bad-exit act on the workers themselves (see slurm_worker.py for why not srun alone).
    """
    from horovod.runner.common.util.hosts import HostInfo, get_host_assignments
    from horovod.runner.http.http_server import RendezvousServer

    _, placement = steps.placement_for(job.launch)
    plan = get_host_assignments([HostInfo(node, placement.tasks_per_node)
                                 for node in placement.nodes], placement.tasks)
    (run_dir / SLOTS_FILE).write_text(json.dumps([dataclasses.asdict(s) for s in plan]))
    server = RendezvousServer()
    port = server.start()
    try:
        server.init(plan)
        env = process.base_env(job.launch.threads_per_worker)
        env.update(knob_env(job.launch.options, run_dir))
        env.update(HOROVOD_GLOO_RENDEZVOUS_ADDR=steps.this_host_address(placement.nodes),
                   HOROVOD_GLOO_RENDEZVOUS_PORT=str(port), HOROVOD_CONTROLLER="gloo",
                   HOROVOD_CPU_OPERATIONS="gloo")
        cmd = [sys.executable, "-m", SLURM_WORKER_MODULE, str(run_dir)]
        return steps.launch_step(
            job, run_dir, placement, cmd, env,
            lambda proc: process.outcome_from_files(run_dir, proc, "srun", job.launch.timeout))
    finally:
        server.stop()


def slurm_problem(options: hvd_options.Options) -> str | None:
    """Why these options cannot run as Slurm steps (None: they can)."""
    if options.hosts or options.hostfile:
        return ("horovod.hosts: not used with launcher slurm (hosts and slots come from the "
                "allocation); drop hosts and hostfile")
    return None


class Horovod(Framework):
    name = "horovod"
    title = "Horovod (horovodrun)"
    options_type = hvd_options.Options
    table = hvd_options.TABLE
    flags = hvd_options.FLAGS
    step_options = ("fp16_allreduce", "fusion_threshold_mb", "cycle_time_ms", "timeline",
                    "cache_capacity", "hierarchical_allreduce")
    knobs = hvd_options.KNOBS
    default_knobs = hvd_options.DEFAULT_KNOBS
    bucket_option = "fusion_threshold_mb"
    default_bucket_bytes = 128 * MIB  # HOROVOD_FUSION_THRESHOLD since Horovod 0.21


    def check_options(self, options, workers) -> None:
        hvd_options.check(options, workers)

    def available(self) -> tuple[bool, str]:
        return check_installation()

    def unavailable_for(self, job: Job) -> str | None:
        return install.device_problem(job.launch.device)

    def environment(self) -> dict:
        return {"horovod_build": install.build_flags()}

    def planned_nodes(self, options, world_size: int) -> int:
        pairs = slots(options)
        return hosts_used(pairs, world_size) if pairs else 1

    def slurm_problem(self, options) -> str | None:
        return slurm_problem(options)

    def launch(self, job: Job, run_dir: Path) -> LaunchOutcome:
        process.write_spec(run_dir, job.to_json())
        if job.launch.launcher == "slurm":
            outcome = slurm_launch(job, run_dir)
        else:
            proc = process.run_isolated(horovodrun_command(job, run_dir),
                                        process.base_env(job.launch.threads_per_worker),
                                        job.launch.timeout, run_dir)
            outcome = process.outcome_from_files(run_dir, proc, "horovodrun", job.launch.timeout)
        timeline = run_dir / "timeline.json"
        artifacts = {"timeline": str(timeline)} if job.launch.options.timeline and \
            timeline.is_file() else {}
        nodes = None
        if outcome.result and outcome.result.get("topology"):
            nodes = outcome.result["topology"][0].get("cross_size")  # Horovod's own host count
        return dataclasses.replace(outcome, nodes=nodes, artifacts=artifacts)
