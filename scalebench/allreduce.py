"""Allreduce microbenchmark: the spec, the worker task, the records, and the launch loop.

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

import dataclasses
import json
import math
import re
import socket
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from scalebench import results, stats
from scalebench.comm import Comm
from scalebench.errors import UserError
from scalebench.frameworks.base import Sessions
from scalebench.results import SCHEMA_VERSION, RecordError, now_iso

KIND = "allreduce"
DTYPES = {"float32": 4, "float16": 2, "bfloat16": 2}
DEFAULT_SIZES = "1M,16M,128M,512M"
DEFAULT_OUT = "results/allreduce"

# Size suffixes. Bare K/M/G and KiB/MiB/GiB are powers of two (nccl-tests' convention);
# kB/MB/GB are SI powers of ten. Case-insensitive; a plain number is bytes.
_SIZE_UNITS = {
    "": 1, "b": 1,
    "k": 2**10, "m": 2**20, "g": 2**30,
    "kib": 2**10, "mib": 2**20, "gib": 2**30,
    "kb": 10**3, "mb": 10**6, "gb": 10**9,
}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def parse_size(text: str, name: str = "sizes") -> int:
    """'1M' -> 1048576, '64K' -> 65536, '100MB' -> 100000000, '4096' -> 4096 (bytes)."""
    match = _SIZE_RE.match(str(text))
    unit = match.group(2).lower() if match else None
    if not match or unit not in _SIZE_UNITS:
        raise UserError(f"{name}: cannot read {text!r} as a size; use bytes or K/M/G (powers of "
                        "two, as nccl-tests), e.g. 64K,1M,16M")
    value = float(match.group(1)) * _SIZE_UNITS[unit]
    if not value.is_integer() or value <= 0:
        raise UserError(f"{name}: {text!r} is not a whole number of bytes above 0")
    return int(value)


def parse_sizes(text: str, dtype: str) -> tuple[int, ...]:
    items = [t.strip() for t in str(text).split(",") if t.strip()]
    if not items:
        raise UserError("sizes: needs at least one size, e.g. 1M,16M")
    sizes = tuple(sorted(dict.fromkeys(parse_size(t) for t in items)))
    itemsize = DTYPES[dtype]
    for size in sizes:
        if size % itemsize:
            raise UserError(f"sizes: {size} bytes is not a whole number of {dtype} elements "
                            f"({itemsize} bytes each)")
    return sizes


def format_size(nbytes: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            value = nbytes / scale
            return f"{value:g} {unit}" if value >= 10 or value.is_integer() else f"{value:.2f} {unit}"
    return f"{nbytes} B"


def busbw_factor(world_size: int) -> float:
    """2(N-1)/N: bus bandwidth over algorithm bandwidth for a ring allreduce (nccl-tests)."""
    return 2 * (world_size - 1) / world_size


@dataclass(frozen=True)
class AllreduceSpec:
    """One launch: every size for one framework at one worker count. Sent whole to the workers."""

    run_id: str
    framework: str
    world_size: int
    nodes: int
    device: str  # resolved: cpu or cuda
    backend: str  # gloo or nccl
    sizes: tuple[int, ...]  # bytes per message
    dtype: str
    warmup: int
    iters: int
    trials: int
    timeout: float
    threads_per_worker: int
    options: dict[str, Any] = field(default_factory=dict)  # the framework's options, as given
    kind: str = KIND

    def __post_init__(self):
        object.__setattr__(self, "sizes", tuple(int(s) for s in self.sizes))
        if self.kind != KIND:
            raise ValueError(f"an AllreduceSpec has kind {KIND!r}, not {self.kind!r}")
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype {self.dtype!r} not one of {', '.join(DTYPES)}")
        if not self.sizes or any(s <= 0 or s % DTYPES[self.dtype] for s in self.sizes):
            raise ValueError(f"sizes {self.sizes} must be positive multiples of the element size")
        if self.world_size < 1 or self.iters < 1 or self.trials < 1 or self.warmup < 0:
            raise ValueError("world_size, iters and trials must be >= 1 and warmup >= 0")

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> AllreduceSpec:
        return cls(**json.loads(text))


# ---------------------------------------------------------------- worker task

def run(spec: AllreduceSpec, comm: Comm, clock: Callable[[], float] = time.perf_counter
        ) -> dict | None:
    """Time comm.allreduce for every size. Returns the gathered windows on rank 0, None elsewhere.

    Before timing, one allreduce of ones must give world_size everywhere: the collective really
    summed across ranks. The timed tensor holds zeros (no overflow, no denormals on CPU).
    """
    import torch

    from scalebench import measure

    measure.set_threads(spec.threads_per_worker)
    device = measure.pick_device(spec, comm)
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
             "device_name": measure._device_name(device), "threads": torch.get_num_threads()}
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

# field -> allowed types, beyond results.COMMON_FIELDS; one record per message size
FIELDS: dict[str, tuple[type, ...]] = {
    "run_id": (str,),
    "framework": (str,),
    "world_size": (int,),
    "nodes": (int,),
    "device": (str,),
    "backend": (str,),
    "dtype": (str,),
    "size_bytes": (int,),
    "warmup": (int,),
    "iters": (int,),
    "trials": (int,),
    "threads_per_worker": (int,),
    "options": (dict,),
    "error": (str, type(None)),
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
    fields = dict(FIELDS)
    if record.get("status") == "ok":
        fields.update(OK_FIELDS)
    results.check_fields(record, fields)
    if record["size_bytes"] <= 0:
        raise RecordError("size_bytes must be above 0")
    if record.get("status") == "ok":
        trial = record["trial_seconds"]
        if len(trial) != record["trials"]:
            raise RecordError("trial_seconds does not have one value per trial")
        if not all(isinstance(v, (int, float)) and math.isfinite(v) and v > 0 for v in trial):
            raise RecordError("trial_seconds has a non-positive or non-finite value")


def build_records(spec: AllreduceSpec, outcome, env: dict, skipped_reason: str = "") -> list[dict]:
    """One validated record per message size from a launch outcome (None: skipped)."""
    base: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION, "kind": KIND, "timestamp": now_iso(),
        "run_id": spec.run_id, "framework": spec.framework, "world_size": spec.world_size,
        "nodes": spec.nodes, "device": spec.device, "backend": spec.backend, "dtype": spec.dtype,
        "warmup": spec.warmup, "iters": spec.iters, "trials": spec.trials,
        "threads_per_worker": spec.threads_per_worker, "options": spec.options, "env": env,
    }
    if outcome is not None and outcome.nodes is not None:
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
    factor = busbw_factor(spec.world_size)
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


def point_key(record: dict) -> tuple:
    device_kind = record.get("env", {}).get("device_kind", record.get("device"))
    return (record["framework"], record["world_size"], record["nodes"], record["dtype"],
            record["device"], device_kind, record["size_bytes"])


def latest_points(records: Sequence[dict]) -> list[dict]:
    """The newest ok record per framework x workers x nodes x dtype x device x size, sorted."""
    chosen: dict[tuple, dict] = {}
    for r in records:
        if r.get("kind") == KIND and r.get("status") == "ok":
            chosen[point_key(r)] = r
    return sorted(chosen.values(), key=lambda r: (r["framework"], r["device"], r["dtype"],
                                                  r["nodes"], r["world_size"], r["size_bytes"]))


# ---------------------------------------------------------------- planning and launching

def plan(sweep, sizes: Sequence[int], dtype: str, device, stamp: str | None = None
         ) -> list[AllreduceSpec]:
    """One AllreduceSpec per framework x worker count; every input error before any launch."""
    from scalebench import devices, frameworks
    from scalebench import plan as sweep_plan

    if dtype not in DTYPES:
        raise UserError(f"dtype: unknown value {dtype!r}; allowed: {', '.join(DTYPES)}")
    workers = sweep.workers
    if workers is None:
        workers = tuple(w for w in sweep_plan.default_workers(device.default_max_workers(),
                                                              sweep.ddp.nnodes) if w >= 2) or (2,)
    if min(workers) < 2:
        raise UserError(f"workers: an allreduce needs at least 2 workers, got {min(workers)}")
    stamp = stamp or time.strftime("%Y%m%d-%H%M%S")
    specs = []
    for framework in sweep.frameworks:
        adapter = frameworks.get(framework)
        for world in workers:
            nodes = adapter.planned_nodes(sweep, world)
            specs.append(AllreduceSpec(
                run_id=f"allreduce-{stamp}-{len(specs) + 1:02d}-{framework}-w{world}",
                framework=framework, world_size=world, nodes=nodes, device=device.device,
                backend=device.backend, sizes=tuple(sizes), dtype=dtype, warmup=sweep.warmup,
                iters=sweep.iters, trials=sweep.trials, timeout=sweep.timeout,
                threads_per_worker=devices.threads_per_worker(device, -(-world // nodes),
                                                              sweep.threads_per_worker),
                options=sweep_plan.framework_options(sweep, framework),
            ))
    return specs


def point_line(record: dict) -> str:
    head = f"{record['framework']} x{record['world_size']} {format_size(record['size_bytes'])}"
    if record["status"] != "ok":
        return f"{head}: {record['status'].upper()} - {record['error']}"
    lo, hi = record["seconds_ci95"]
    ci = f" (95% CI {lo * 1e3:.3g}-{hi * 1e3:.3g})" if lo is not None else ""
    noisy = f"  noisy ({100 * record['seconds_std'] / record['seconds']:.0f}%)" \
        if record.get("noisy") else ""
    return (f"{head}: {record['seconds'] * 1e3:.3g} ms{ci}, algbw "
            f"{record['algbw_bytes_per_sec'] / 1e9:.3g} GB/s, busbw "
            f"{record['busbw_bytes_per_sec'] / 1e9:.3g} GB/s{noisy}")


@dataclass
class AllreduceOutcome:
    out_dir: Path
    records: list[dict] = field(default_factory=list)
    interrupted: bool = False


def run_allreduce(sweep, sizes: Sequence[int], dtype: str = "float32",
                  stream: TextIO | None = None) -> AllreduceOutcome:
    """Launch every framework x worker count, append one record per size to OUT/results.jsonl.

    Records are appended to an existing results file (never moved aside), so allreduce points
    can sit next to a sweep's training records. Unavailable frameworks give skipped records.
    """
    from scalebench import devices, envinfo, frameworks

    stream = stream or sys.stdout
    device = devices.resolve(sweep.device)
    specs = plan(sweep, sizes, dtype, device)
    outcome = AllreduceOutcome(Path(sweep.out))
    outcome.out_dir.mkdir(parents=True, exist_ok=True)
    results_path = outcome.out_dir / results.RESULTS_FILE
    env = envinfo.collect(device.device, device.backend)
    sessions = Sessions(sweep, outcome.out_dir)

    def emit(records: list[dict]) -> None:
        for record in records:
            results.append(results_path, record)
            outcome.records.append(record)
            print(point_line(record), file=stream, flush=True)

    try:
        for index, spec in enumerate(specs, start=1):
            adapter = frameworks.get(spec.framework)
            available, reason = adapter.available()
            if not available:
                emit(build_records(spec, None, env, skipped_reason=reason))
                continue
            sessions.activate(adapter)
            print(f"[{index}/{len(specs)}] {spec.framework} x{spec.world_size}: "
                  f"{len(spec.sizes)} sizes ...", file=stream, flush=True)
            launch = adapter.launch(spec, outcome.out_dir / "runs" / spec.run_id)
            if launch.status == "ok" and not adapter.records_here(sweep):
                print(f"{spec.framework} x{spec.world_size}: done; node 0 records the results",
                      file=stream, flush=True)
                continue
            try:
                records = build_records(spec, launch, env)
            except (KeyError, TypeError, ValueError) as exc:  # a bad result is data, not a crash
                records = build_records(spec, dataclasses.replace(
                    launch, status="failed", result=None,
                    error=f"unreadable worker result: {type(exc).__name__}: {exc}"[:500]), env)
            emit(records)
    except KeyboardInterrupt:
        outcome.interrupted = True
        print(f"interrupted: children stopped; points so far are in {results_path}",
              file=stream, flush=True)
    finally:
        sessions.close_all()
    return outcome
