"""Allreduce microbenchmark task: the spec, the worker function, the records.

Each framework sums a tensor with its own collective (Comm.allreduce: torch.distributed for DDP
and Ray, hvd.allreduce for Horovod). The clock follows the training runs (measure.py): untimed
warm-up calls, then `trials` windows of `iters` calls; every window starts after a device sync
and a barrier and ends with a device sync; per-rank window times are gathered once at the end.
A trial's time per call is the slowest rank's window / iters.

Bandwidths follow nccl-tests: algbw = bytes / time, busbw = algbw x 2(N-1)/N (what each link
carries in a ring allreduce, comparable across worker counts and with a link's rated speed).
Sizes K/M/G are powers of two, as in nccl-tests (1M = 1,048,576 bytes).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from scalebench.analysis import stats
from scalebench.frameworks.base import LaunchOutcome
from scalebench.records import validity
from scalebench.records.schema import LAUNCH_FIELDS, RecordError, check_fields, launch_fields
from scalebench.spec import identity, units
from scalebench.spec.errors import UserError
from scalebench.spec.launch import Job
from scalebench.tasks.base import Task
from scalebench.worker.comm import Comm

KIND = "allreduce"
DTYPES = {"float32": 4, "float16": 2, "bfloat16": 2}
DEFAULT_SIZES = "1M,16M,128M,512M"
DEFAULT_OUT = "results/allreduce"
MIB = 2**20


def parse_sizes(text: str, dtype: str) -> tuple[int, ...]:
    items = [t.strip() for t in str(text).split(",") if t.strip()]
    if not items:
        raise UserError("sizes: needs at least one size, e.g. 1M,16M")
    sizes = tuple(sorted(dict.fromkeys(units.parse_size(t) for t in items)))
    itemsize = DTYPES[dtype]
    for size in sizes:
        if size % itemsize:
            raise UserError(f"sizes: {size} bytes is not a whole number of {dtype} elements "
                            f"({itemsize} bytes each)")
    return sizes


def busbw_factor(world_size: int) -> float:
    """2(N-1)/N: bus bandwidth over algorithm bandwidth for a ring allreduce (nccl-tests)."""
    return 2 * (world_size - 1) / world_size


@dataclass(frozen=True)
class AllreduceSpec:
    """Every size for one framework at one worker count."""
    kind: ClassVar[str] = KIND  # the task this spec belongs to (Job checks it)

    sizes: tuple[int, ...]  # bytes per message
    dtype: str
    warmup: int
    iters: int
    trials: int

    def __post_init__(self):
        object.__setattr__(self, "sizes", tuple(int(s) for s in self.sizes))
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype {self.dtype!r} not one of {', '.join(DTYPES)}")
        if not self.sizes or any(s <= 0 or s % DTYPES[self.dtype] for s in self.sizes):
            raise ValueError(f"sizes {self.sizes} must be positive multiples of the element size")
        if self.iters < 1 or self.trials < 1 or self.warmup < 0:
            raise ValueError("iters and trials must be >= 1 and warmup >= 0")


# ---------------------------------------------------------------- worker function

def run(job: Job, comm: Comm, clock: Callable[[], float] = time.perf_counter) -> dict | None:
    """Time comm.allreduce for every size. Returns the gathered windows on rank 0, None elsewhere.

    Before timing, one allreduce of ones must give world_size everywhere: the collective really
    summed across ranks. The timed tensor holds zeros (no overflow, no denormals on CPU).
    """
    import torch

    from scalebench.worker import measure

    spec: AllreduceSpec = job.task
    measure.set_threads(job.launch.threads_per_worker)
    device = measure.pick_device(job.launch.device, comm)
    dtype = getattr(torch, spec.dtype)
    per_size: list[list[float]] = []
    for size in spec.sizes:
        tensor = torch.ones(size // DTYPES[spec.dtype], dtype=dtype, device=device)
        comm.allreduce(tensor)
        measure.synchronize(device)
        ends = (float(tensor[0].item()), float(tensor[-1].item()))
        if ends != (float(comm.world_size),) * 2:
            raise RuntimeError(f"allreduce of ones over {comm.world_size} ranks gave {ends} for "
                               f"{size} bytes: the collective did not sum across ranks")
        tensor.zero_()
        for _ in range(spec.warmup):
            comm.allreduce(tensor)
        windows: list[float] = []
        for _ in range(spec.trials):
            measure.synchronize(device)
            comm.barrier()
            start = clock()
            for _ in range(spec.iters):
                comm.allreduce(tensor)
            measure.synchronize(device)
            windows.append(clock() - start)
        per_size.append(windows)
        del tensor
    comm.barrier()
    local = {"windows": per_size, "hostname": socket.gethostname(),
             "device_name": measure.device_name(device), "threads": torch.get_num_threads()}
    gathered = comm.all_gather(local)
    if comm.rank != 0:
        return None
    return {
        "points": [{"size_bytes": size, "window_seconds": [g["windows"][i] for g in gathered]}
                   for i, size in enumerate(spec.sizes)],
        "hostnames": [g["hostname"] for g in gathered],
        "device_names": [g["device_name"] for g in gathered],
        "threads": [g["threads"] for g in gathered],
    }


# ---------------------------------------------------------------- records

# field -> allowed types, beyond records.COMMON_FIELDS and LAUNCH_FIELDS; one record per size
FIELDS: dict[str, tuple[type, ...]] = {
    "dtype": (str,),
    "size_bytes": (int,),
    "warmup": (int,),
    "iters": (int,),
    "trials": (int,),
}
OK_FIELDS: dict[str, tuple[type, ...]] = {
    "seconds": (float,),
    "trial_seconds": (list,),
    "algbw_bytes_per_sec": (float,),
    "trial_algbw_bytes_per_sec": (list,),
    "busbw_bytes_per_sec": (float,),
    "busbw_factor": (float,),
    "window_seconds": (list,),
    "hosts": (list,),
}


def validate_fields(record: dict[str, Any]) -> None:
    """The allreduce record's own fields (results.validate checks the common ones)."""
    fields = {**LAUNCH_FIELDS, **FIELDS}
    if record.get("status") == "ok":
        fields.update(OK_FIELDS)
    check_fields(record, fields)
    if record["size_bytes"] <= 0:
        raise RecordError("size_bytes must be above 0")
    if record.get("status") == "ok":
        validity.check_values("trial_seconds", record["trial_seconds"], record["trials"])


def build_records(job: Job, outcome: LaunchOutcome | None, env: dict, skipped_reason: str = ""
                  ) -> list[dict]:
    """One validated record per message size from a launch outcome (None: skipped)."""
    from scalebench.records import results

    spec: AllreduceSpec = job.task
    base: dict[str, Any] = {**launch_fields(job, env), "dtype": spec.dtype, "warmup": spec.warmup,
                            "iters": spec.iters, "trials": spec.trials}
    if outcome is not None:
        base["scheduler"] = outcome.scheduler
        if outcome.nodes is not None:
            base["nodes"] = outcome.nodes
    records = []
    if outcome is None or outcome.status != "ok":
        for size in spec.sizes:
            record = {**base, "size_bytes": size}
            if outcome is None:
                record.update(status="skipped", error=skipped_reason)
            else:
                record.update(status=outcome.status, error=outcome.error,
                              stderr_tail=outcome.stderr_tail)
            results.validate(record)
            records.append(record)
        return records
    result = outcome.result
    points = {p["size_bytes"]: p["window_seconds"] for p in result["points"]}
    if sorted(points) != sorted(spec.sizes):
        raise ValueError(f"the workers measured sizes {sorted(points)}, not {list(spec.sizes)}")
    factor = busbw_factor(job.launch.world_size)
    for size in spec.sizes:
        windows = points[size]
        # Seconds per call in each trial: the slowest rank's window sets the pace.
        trial = [1.0 / v for v in stats.trial_throughputs(windows, spec.iters)]
        seconds = stats.summarize(trial)
        algbw = [size / t for t in trial]
        rate = stats.summarize(algbw)
        record = {
            **base, "size_bytes": size, "status": "ok", "error": None,
            "seconds": seconds.mean, "seconds_median": seconds.median, "seconds_std": seconds.std,
            "seconds_ci95": [seconds.ci_low, seconds.ci_high], "trial_seconds": trial,
            "algbw_bytes_per_sec": rate.mean,
            "algbw_bytes_per_sec_ci95": [rate.ci_low, rate.ci_high],
            "trial_algbw_bytes_per_sec": algbw,
            "busbw_factor": factor,
            "busbw_bytes_per_sec": rate.mean * factor,
            "busbw_bytes_per_sec_ci95": [None if rate.ci_low is None else rate.ci_low * factor,
                                         None if rate.ci_high is None else rate.ci_high * factor],
            "noisy": seconds.noisy,
            "window_seconds": windows,
            "hosts": result.get("hostnames", []),
            "device_names": result.get("device_names", []),
            "threads_measured": result.get("threads", []),
            "artifacts": outcome.artifacts,
        }
        results.validate(record)
        records.append(record)
    return records


# ---------------------------------------------------------------- planning

def plan(sweep, sizes: Sequence[int], dtype: str, device, stamp: str | None = None,
         vetting=None) -> list[Job]:
    """One job per framework x worker count; every input error before any launch (vetting:
    as train.launch_spec)."""
    from scalebench.tasks import train

    if dtype not in DTYPES:
        raise UserError(f"dtype: unknown value {dtype!r}; allowed: {', '.join(DTYPES)}")
    train.check_warmup(sweep.warmup, device)
    workers = sweep.workers
    if workers is None:
        workers = tuple(w for w in train.sweep_workers(sweep, device) if w >= 2) or (2,)
    if min(workers) < 2:
        raise UserError(f"workers: an allreduce needs at least 2 workers, got {min(workers)}")
    stamp = stamp or time.strftime("%Y%m%d-%H%M%S")
    spec = AllreduceSpec(sizes=tuple(sizes), dtype=dtype, warmup=sweep.warmup, iters=sweep.iters,
                         trials=sweep.trials)
    jobs = []
    for framework in sweep.frameworks:
        for world in workers:
            jobs.append(Job(f"allreduce-{stamp}-{len(jobs) + 1:02d}-{framework}-w{world}", KIND,
                            train.launch_spec(sweep, framework, world, device, vetting),
                            spec))
    return jobs


def point_line(record: dict) -> str:
    head = f"{record['framework']} x{record['world_size']} {units.format_size(record['size_bytes'])}"
    if record["status"] != "ok":
        return f"{head}: {record['status'].upper()} - {record['error']}"
    lo, hi = record["seconds_ci95"]
    ci = f" (95% CI {lo * 1e3:.3g}-{hi * 1e3:.3g})" if lo is not None else ""
    noisy = f"  noisy ({100 * record['seconds_std'] / record['seconds']:.0f}%)" \
        if record.get("noisy") else ""
    return (f"{head}: {record['seconds'] * 1e3:.3g} ms{ci}, algbw "
            f"{record['algbw_bytes_per_sec'] / 1e9:.3g} GB/s, busbw "
            f"{record['busbw_bytes_per_sec'] / 1e9:.3g} GB/s{noisy}")


class AllreduceTask(Task):
    kind = KIND
    spec_type = AllreduceSpec
    noun = "point"

    def worker(self, job: Job, comm: Comm) -> dict | None:
        return run(job, comm)

    def records(self, job: Job, outcome: LaunchOutcome | None, env: dict,
                skipped_reason: str = "") -> list[dict]:
        return build_records(job, outcome, env, skipped_reason)

    def check_record(self, record: dict[str, Any]) -> None:
        validate_fields(record)

    def label(self, job: Job) -> str:
        return (f"allreduce {job.launch.framework} x{job.launch.world_size}: "
                f"{len(job.task.sizes)} sizes")

    def result_line(self, record: dict) -> str:
        return point_line(record)

    def resume_keys(self, job: Job) -> list[tuple]:
        from scalebench.tasks.train import job_record_shape

        shape = job_record_shape(job)
        return [identity.resume_key({**shape, "size_bytes": size}) for size in job.task.sizes]


TASK = AllreduceTask()
