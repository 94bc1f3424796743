"""The training task: model x framework x precision x workers, each run timed by measure.run.

Spec: TrainSpec (what each worker trains). Plan: SweepSpec -> [Job], every input checked before
anything launches. Records: one per job, throughput from the slowest rank's windows.
"""

from __future__ import annotations

import dataclasses
import math
import random
from dataclasses import dataclass
from typing import Any, ClassVar

from scalebench import frameworks
from scalebench.analysis import disturbance, mfu, stats
from scalebench.frameworks.base import LaunchOutcome
from scalebench.hardware import devices, energy
from scalebench.models import flops, workloads
from scalebench.records import validity
from scalebench.records.schema import (
    LAUNCH_FIELDS,
    OPTIONAL_TRAIN_FIELDS,
    check_fields,
    check_optional,
    launch_fields,
)
from scalebench.spec import identity
from scalebench.spec.errors import UserError
from scalebench.spec.launch import Job, LaunchSpec
from scalebench.tasks.base import Task
from scalebench.worker.comm import Comm

KIND = "train"
MIN_CUDA_WARMUP = 2
# One-worker runs of these also time the DDP-wrapped step: PyTorch DDP benchmark's "no ddp"
# vs DDP on one GPU.
WRAPPER_OVERHEAD_FRAMEWORKS = ("ddp",)


@dataclass(frozen=True)
class TrainSpec:
    kind: ClassVar[str] = KIND  # the task this spec belongs to (Job checks it)
    model: str
    batch_size: int  # per worker
    global_batch: int
    image_size: int
    aux_logits: bool
    precision: str
    scaling: str
    data: str
    warmup: int
    iters: int
    trials: int
    loader_workers: int
    params: int
    tf32: str = "default"  # CUDA fp32 math: default, on, off (config.TF32_MODES)
    measure_wrapper: bool = False  # also time the DDP-wrapped one-worker step (wrapper overhead)
    breakdown_windows: int = 0  # extra windows without gradient sync (scaling-loss breakdown)
    profile: bool = False  # a torch.profiler trace of one extra window on rank 0
    # Fault injection (tests of the breakdown; off by default): sleep after each step on one
    # rank, and before each batch on every rank.
    fault_rank: int | None = None
    fault_step_delay: float = 0.0
    fault_input_delay: float = 0.0
    # For MFU, never used by the worker: FLOPs per image counted at plan time
    # (scalebench/flops.py) and the device's peak measured once per sweep before the runs
    # (scalebench/peak.py).
    flops_per_image: float | None = None
    flops_method: str = "not counted"
    peak_flops: float | None = None
    peak_method: str = "not measured"
    datasheet_peak_flops: float | None = None
    datasheet_peak_source: str | None = None

    def faults(self) -> dict[str, Any]:
        """The fault injections this run has (empty: none, the normal case)."""
        out: dict[str, Any] = {}
        if self.fault_step_delay and self.fault_rank is not None:
            out["step_delay"] = {"rank": self.fault_rank, "seconds": self.fault_step_delay}
        if self.fault_input_delay:
            out["input_delay_seconds"] = self.fault_input_delay
        return out


# field -> allowed types, beyond records.COMMON_FIELDS and LAUNCH_FIELDS
FIELDS: dict[str, tuple[type, ...]] = {
    "model": (str,),
    "batch_size": (int,),
    "global_batch": (int,),
    "image_size": (int,),
    "aux_logits": (bool,),
    "precision": (str,),
    "scaling": (str,),
    "data": (str,),
    "warmup": (int,),
    "iters": (int,),
    "trials": (int,),
    "params": (int,),
}
OK_FIELDS: dict[str, tuple[type, ...]] = {
    "images_per_sec": (float,),
    "trial_images_per_sec": (list,),
    "per_worker_images_per_sec": (float,),
    "per_rank_images_per_sec": (list,),
    "window_seconds": (list,),
    "startup_seconds": (float, type(None)),
    "hosts": (list,),
}


# Counts and sizes every train record must hold as positive numbers, and the measured values
# every ok record must (records.validity: what makes a record invalid).
POSITIVE_FIELDS = ("world_size", "nodes", "batch_size", "global_batch", "image_size", "iters",
                   "trials")
OK_POSITIVE_FIELDS = ("images_per_sec", "per_worker_images_per_sec")


def check_measurements(record: dict[str, Any]) -> None:
    """An ok record's measured values: positive and finite, one per trial and one per rank."""
    validity.check_positive(record, OK_POSITIVE_FIELDS)
    trials, world = record["trials"], record["world_size"]
    validity.check_values("trial_images_per_sec", record["trial_images_per_sec"], trials)
    validity.check_per_rank("per_rank_images_per_sec", record["per_rank_images_per_sec"], world)
    validity.check_per_rank("window_seconds", record["window_seconds"], world, trials)


def default_workers(maximum: int, nnodes: int = 1) -> tuple[int, ...]:
    """1, 2, 4, ... up to the GPUs (or cores) of one node, times the node count."""
    counts, n = [], 1
    while n <= max(1, maximum):
        counts.append(n * nnodes)
        n *= 2
    return tuple(counts)


def sweep_workers(sweep, device: devices.DeviceInfo) -> tuple[int, ...]:
    """The sweep's worker counts; by default powers of two up to one node, times the nodes
    that a framework's runs always span (DDP's nnodes)."""
    if sweep.workers:
        return sweep.workers
    nnodes = max(frameworks.get(f).fixed_nodes(sweep.options(f)) for f in sweep.frameworks)
    return default_workers(device.default_max_workers(), nnodes)


def launch_spec(sweep, framework: str, world: int, device: devices.DeviceInfo,
                vetting=None) -> LaunchSpec:
    """The launch of one run: shared by every task planned from a sweep.

    Under Slurm the allocation decides the run's nodes and CPUs per worker (the same thread
    policy over the allocated CPUs); a run it cannot hold is a UserError here, at planning.
    vetting (vet.files.Vetting): the run goes on vetted nodes only; one that needs more nodes
    than remain is planned unplaced, to be recorded skipped with the reason.
    """
    options = sweep.options(framework)
    pool: tuple[str, ...] = ()
    unplaced = None
    if sweep.launcher == "slurm":
        from scalebench.slurm import allocation

        problem = frameworks.get(framework).slurm_problem(options)
        if problem:
            raise UserError(problem)
        alloc = allocation.current()
        place = alloc.place(world, device.device, sweep.threads_per_worker)
        if vetting is not None:
            pool = tuple(vetting.vetted)
            try:
                if not pool:
                    raise UserError("no node left")
                place = alloc.subset(pool).place(world, device.device, sweep.threads_per_worker)
            except UserError:
                unplaced = (f"vetting {vetting.id}: {world} workers need {len(place.nodes)} "
                            f"node{'s' if len(place.nodes) != 1 else ''}, {len(pool)} of the "
                            f"{len(alloc.nodes)} remain vetted ({vetting.excluded_text()})")
        nodes, threads = len(place.nodes), place.cpus_per_task
    else:
        nodes = frameworks.get(framework).planned_nodes(options, world)
        threads = devices.threads_per_worker(device, -(-world // nodes), sweep.threads_per_worker)
    return LaunchSpec(
        framework=framework, world_size=world, nodes=nodes, device=device.device,
        backend=device.backend, timeout=sweep.timeout, threads_per_worker=threads,
        options=options, launcher=sweep.launcher, slurm_nodes=pool, unplaced=unplaced)


def check_warmup(warmup: int, device: devices.DeviceInfo) -> None:
    """On CUDA the first steps pay cuDNN autotuning, DDP's bucket rebuild and Horovod's first
    negotiation; timing them would measure start-up, not training."""
    if device.device == "cuda" and warmup < MIN_CUDA_WARMUP:
        raise UserError(f"warmup: at least {MIN_CUDA_WARMUP} steps on CUDA (cuDNN autotuning, "
                        f"DDP bucket rebuild, Horovod negotiation), got {warmup}")


def plan(sweep, device: devices.DeviceInfo, vetting=None) -> list[Job]:
    """One job per model x framework x precision x worker count, `repeats` times.

    Repeats are interleaved: round 1 holds the first launch of every configuration, round 2 the
    second, ...; with repeats >= 2 the framework order within each round is shuffled (seeded,
    the seed recorded) so that drift over time is not confounded with a framework.
    """
    check_warmup(sweep.warmup, device)
    for precision in sweep.precision:
        devices.check_precision(device, precision)
    workers = sweep_workers(sweep, device)
    configs: list[tuple[str, LaunchSpec, TrainSpec]] = []
    for model in sweep.models:
        info = workloads.get_info(model)
        image_size = sweep.image_size or info.native_image_size
        for framework in sweep.frameworks:
            for precision in sweep.precision:
                for world in workers:
                    if sweep.scaling == "strong":
                        if sweep.batch_size % world:
                            raise UserError(
                                f"batch_size: strong scaling splits the global batch "
                                f"{sweep.batch_size} over {world} workers; it must divide evenly"
                            )
                        per_worker = sweep.batch_size // world
                    else:
                        per_worker = sweep.batch_size
                    workloads.check_input(model, image_size, per_worker)
                    aux = workloads.uses_aux_logits(model, image_size)
                    counted, counted_how = flops.recorded(model, image_size)
                    spec = TrainSpec(
                        model=model, batch_size=per_worker, global_batch=per_worker * world,
                        image_size=image_size, aux_logits=aux, precision=precision,
                        scaling=sweep.scaling, data=sweep.data, warmup=sweep.warmup,
                        iters=sweep.iters, trials=sweep.trials,
                        loader_workers=sweep.loader_workers, params=info.param_count(aux),
                        tf32=sweep.tf32,
                        measure_wrapper=framework in WRAPPER_OVERHEAD_FRAMEWORKS and world == 1,
                        breakdown_windows=breakdown_windows(sweep, world),
                        profile=sweep.profile, fault_rank=sweep.fault_rank,
                        fault_step_delay=sweep.fault_step_delay,
                        fault_input_delay=sweep.fault_input_delay,
                        flops_per_image=counted, flops_method=counted_how)
                    launch = launch_spec(sweep, framework, world, device, vetting)
                    configs.append((framework, launch, spec))
                    tuned = tuned_options(sweep, framework, model, world)
                    if tuned:  # the tuned run beside the default one (its own configuration)
                        configs.append((framework, dataclasses.replace(
                            launch, options=dataclasses.replace(launch.options, **tuned)), spec))
    return interleave(configs, sweep.repeats, sweep.seed)


def tuned_options(sweep, framework: str, model: str, world: int) -> dict[str, Any]:
    """The options `scalebench tune` found best for this cell (empty: none, or the default)."""
    for cell in getattr(sweep, "tuned", ()):
        if (cell.framework, cell.model, cell.workers) == (framework, model, world):
            return dict(cell.options)
    return {}


MAX_BREAKDOWN_WINDOWS = 3


def breakdown_windows(sweep, world: int) -> int:
    """As many no-sync windows as trials, at most 3; none at one worker or with --no-breakdown
    (they must not double a sweep)."""
    return min(sweep.trials, MAX_BREAKDOWN_WINDOWS) if sweep.breakdown and world > 1 else 0


def interleave(configs: list[tuple[str, LaunchSpec, TrainSpec]], repeats: int,
               seed: int | None) -> list[Job]:
    """Jobs round by round. One round keeps the plan's order; with repeats > 1 each round
    takes the frameworks in a seeded random order (the seed is recorded in every job)."""
    rounds = [configs]
    if repeats > 1:
        seed = random.SystemRandom().randrange(2**31) if seed is None else seed
        rng = random.Random(seed)
        names = list(dict.fromkeys(framework for framework, _, _ in configs))
        rounds = []
        for _ in range(repeats):
            rng.shuffle(names)
            rounds.append([c for name in names for c in configs if c[0] == name])
    jobs: list[Job] = []
    for repeat, members in enumerate(rounds, start=1):
        for framework, launch, spec in members:
            run_id = (f"{len(jobs) + 1:03d}-{framework}-{spec.model}-w{launch.world_size}-"
                      f"{spec.precision}" + (f"-r{repeat}" if repeats > 1 else ""))
            jobs.append(Job(run_id, KIND, launch, spec, repeat, repeats,
                            seed if repeats > 1 else None))
    return jobs


def build_record(job: Job, outcome: LaunchOutcome | None, env: dict, skipped_reason: str = ""
                 ) -> dict[str, Any]:
    """The validated record of one run from its job and launch outcome (None: skipped)."""
    from scalebench.records import results

    spec: TrainSpec = job.task
    record: dict[str, Any] = {
        **launch_fields(job, env),
        "model": spec.model, "batch_size": spec.batch_size, "global_batch": spec.global_batch,
        "image_size": spec.image_size, "aux_logits": spec.aux_logits,
        "precision": spec.precision, "scaling": spec.scaling, "data": spec.data,
        "warmup": spec.warmup, "iters": spec.iters, "trials": spec.trials,
        "params": spec.params, "tf32": spec.tf32,
        "flops_per_image": spec.flops_per_image, "flops_method": spec.flops_method,
        "peak_flops": spec.peak_flops, "peak_method": spec.peak_method,
        "datasheet_peak_flops": spec.datasheet_peak_flops,
        "datasheet_peak_source": spec.datasheet_peak_source,
    }
    if outcome is None:
        record.update(status="skipped", error=skipped_reason)
        results.validate(record)
        return record
    record.update(status=outcome.status, error=outcome.error, artifacts=outcome.artifacts,
                  scheduler=outcome.scheduler)
    if outcome.nodes is not None:
        record["nodes"] = outcome.nodes
    if outcome.status != "ok":
        record["stderr_tail"] = outcome.stderr_tail
        results.validate(record)
        return record
    result = outcome.result
    windows = result["window_seconds"]
    world = job.launch.world_size
    trial = stats.trial_throughputs(windows, spec.global_batch * spec.iters)
    summary = stats.summarize_positive(trial, unit="trials")
    first_step = result.get("first_timed_step_unix")
    # The first configuration of a launch carries the launch's start-up; a later one in a
    # grouped launch only its own model build and warm-up.
    began = outcome.launch_unix
    if job.group is not None and job.group.position > 1:
        began = result.get("build_start_unix")
    startup = first_step - began if first_step is not None and began is not None else None
    record.update(
        images_per_sec=summary.mean,
        images_per_sec_median=summary.median,
        images_per_sec_std=summary.std,
        images_per_sec_ci95=[summary.ci_low, summary.ci_high],
        trial_images_per_sec=trial,
        per_worker_images_per_sec=summary.mean / world,
        per_rank_images_per_sec=stats.per_rank_throughputs(windows, spec.batch_size * spec.iters),
        window_seconds=windows,
        startup_seconds=startup,
        warmup_seconds=result.get("warmup_seconds"),
        hosts=result.get("hostnames", []),
        device_names=result.get("device_names", []),
        threads_measured=result.get("threads", []),
        final_loss=_finite_or_none(result.get("final_loss", [])),
        param_checksums=_finite_or_none(result.get("param_checksums", [])),
        warnings=run_warnings(result),
        topology=result.get("topology", []),
        aux_logits=bool(result.get("aux_logits", spec.aux_logits)),
        step=result.get("step", {}),
        math=result.get("math", {}),
        scaler_skipped_steps=skipped_steps(result),
        input_wait_seconds=result.get("input_wait_seconds"),
        nosync_window_seconds=result.get("nosync_window_seconds"),
        nosync_input_wait_seconds=result.get("nosync_input_wait_seconds"),
        faults=result.get("faults", {}),
        phase_seconds=result.get("phase_seconds"),
    )
    record.update(mfu.record_fields(record))
    record.update(energy.record_fields(result.get("energy"), windows,
                                       spec.global_batch * spec.iters))
    record.update(disturbance.record_fields(result.get("disturbance"), spec.trials))
    record["worker_placement"] = result.get("placement") or []
    if result.get("profile"):
        record["artifacts"] = {**record["artifacts"], "profile": result["profile"]}
    wrapped = result.get("wrapped_window_seconds")
    if wrapped:
        trial_wrapped = stats.trial_throughputs(wrapped, spec.global_batch * spec.iters)
        wrapped_mean = stats.summarize(trial_wrapped).mean
        record.update(trial_wrapped_images_per_sec=trial_wrapped,
                      wrapped_images_per_sec=wrapped_mean,
                      wrapper_overhead=1.0 - wrapped_mean / summary.mean)
    results.validate(record)
    return record


def skipped_steps(result: dict) -> int | None:
    """GradScaler-skipped steps in the timed windows (the most any rank saw); None without fp16."""
    counts = [c for c in result.get("scaler_skipped_steps") or [] if c is not None]
    return max(counts) if counts else None


def _finite_or_none(values: list) -> list:
    return [v if isinstance(v, (int, float)) and math.isfinite(v) else None for v in values]


def run_warnings(result: dict) -> list[str]:
    """Facts about a successful run a reader must not miss."""
    notes = []
    losses = result.get("final_loss", [])
    bad = [rank for rank, v in enumerate(losses) if v is None or not math.isfinite(v)]
    if bad:
        notes.append(f"final loss is not finite on ranks {bad}: training diverged "
                     "(throughput is still measured)")
    skipped = skipped_steps(result)
    if skipped:
        steps = "1 fp16 step in the timed windows was" if skipped == 1 else \
            f"{skipped} fp16 steps in the timed windows were"
        notes.append(f"{steps} skipped by the gradient "
                     "scaler (inf/NaN gradients): skipped steps do no update and inflate "
                     "throughput")
    sums = [v for v in result.get("param_checksums", []) if v is not None and math.isfinite(v)]
    if len(sums) > 1 and max(sums) - min(sums) > 1e-6 * max(1.0, abs(max(sums))):
        notes.append("replicas hold different weights at the end of the run: gradients were "
                     "not averaged consistently")
    return notes


class TrainTask(Task):
    kind = KIND
    builds_model = True
    spec_type = TrainSpec

    def worker(self, job: Job, comm: Comm) -> dict | None:
        from scalebench.worker import measure

        return measure.run(job, comm)

    def records(self, job: Job, outcome: LaunchOutcome | None, env: dict,
                skipped_reason: str = "") -> list[dict]:
        return [build_record(job, outcome, env, skipped_reason)]

    def check_record(self, record: dict[str, Any]) -> None:
        fields = {**LAUNCH_FIELDS, **FIELDS}
        if record.get("status") == "ok":
            fields.update(OK_FIELDS)
        check_fields(record, fields)
        check_optional(record, mfu.RECORD_FIELDS)
        check_optional(record, OPTIONAL_TRAIN_FIELDS)
        validity.check_positive(record, POSITIVE_FIELDS)
        if record["status"] == "ok":
            check_measurements(record)

    def label(self, job: Job) -> str:
        return (f"{job.task.model} {job.launch.framework} x{job.launch.world_size} "
                f"{job.task.precision}")

    def result_line(self, record: dict) -> str:
        head = (f"{record['model']} {record['framework']} x{record['world_size']} "
                f"{record['precision']}")
        if record["status"] != "ok":
            return f"{head}: {record['status'].upper()} - {record['error']}"
        lo, hi = record["images_per_sec_ci95"]
        why = "" if lo is not None else \
            stats.summarize_positive(record["trial_images_per_sec"], unit="trials").too_noisy
        ci = f" (95% CI {lo:.2f}-{hi:.2f})" if lo is not None else \
            f" (95% CI {stats.noisy_text(why)})" if why else ""
        return f"{head}: {record['images_per_sec']:.2f} images/s{ci}"

    def resume_keys(self, job: Job) -> list[tuple]:
        return [identity.resume_key(job_record_shape(job))]


def job_record_shape(job: Job) -> dict[str, Any]:
    """The fields a job's record will carry that identify it (for resume keys)."""
    from scalebench.tasks.base import spec_dict

    launch = job.launch
    return {"kind": job.kind, "framework": launch.framework, "world_size": launch.world_size,
            "nodes": launch.nodes, "device": launch.device, "options": launch.options_dict(),
            "repeat": job.repeat, "faults": job.task.faults(), **spec_dict(job)}


TASK = TrainTask()


def local_job(model: str, batch_size: int, image_size: int, *, precision: str = "fp32",
              warmup: int = 1, iters: int = 1, trials: int = 2, threads: int = 1,
              device: str = "cpu") -> Job:
    """One in-process worker's job (benchmarks and tests run it under SingleProcessComm; the
    framework named is never launched)."""
    from scalebench.frameworks import ddp

    workloads.check_input(model, image_size, batch_size)
    aux = workloads.uses_aux_logits(model, image_size)
    counted, counted_how = flops.recorded(model, image_size)
    spec = TrainSpec(model=model, batch_size=batch_size, global_batch=batch_size,
                     image_size=image_size, aux_logits=aux, precision=precision, scaling="weak",
                     data="synthetic", warmup=warmup, iters=iters, trials=trials,
                     loader_workers=0, params=workloads.get_info(model).param_count(aux),
                     flops_per_image=counted, flops_method=counted_how)
    launch = LaunchSpec(framework="ddp", world_size=1, nodes=1, device=device,
                        backend="gloo" if device == "cpu" else "nccl", timeout=0.0,
                        threads_per_worker=threads, options=ddp.Options())
    return Job("local", KIND, launch, spec)
