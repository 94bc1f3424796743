"""The measured peak FLOP/s of one device at a run's precision: a matrix-product probe.

A large square GEMM at the run's dtype (on CUDA: fp16/bf16 on the tensor cores; fp32 as TF32
where the run's convolutions use TF32), warmed up, then repeated for about a second; the peak is
the best repeat's 2n^3 / seconds. The size adapts to the device: one timed GEMM at a starting
size sets the size at which one GEMM takes about a twentieth of the budget (smaller on a slow
CPU or a dtype without native support, larger on a GPU or a many-core CPU), so the probe takes
about its budget anywhere. One device is one GPU, or on a CPU all the cores of the node (the
probe uses them all; workers on a node share them).

Measured once per sweep, device and precision (`with_peaks`), in the sweep's own process before
any run is launched, never inside a timed window. On CUDA the probe runs in a child process
(`python -m scalebench.hardware.peak`) so that the sweep holds no CUDA context on a worker's GPU.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from scalebench.hardware import datasheet
from scalebench.hardware.devices import DeviceInfo
from scalebench.spec import fields
from scalebench.spec.errors import UserError
from scalebench.spec.launch import Job

DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}
BUDGET_SECONDS = {"cpu": 0.8, "cuda": 1.0}
# Overrides the budget (seconds, above 0): a shorter probe for the test suite's many tiny
# sweeps, a longer one where a second of repeats is too few for a stable best.
BUDGET_ENV = "SCALEBENCH_PEAK_SECONDS"
START_SIZE = {"cpu": 512, "cuda": 4096}
MIN_SIZE, MAX_SIZE = {"cpu": 128, "cuda": 1024}, {"cpu": 8192, "cuda": 16384}
WARMUP_GEMMS = 2
MIN_REPEATS, MAX_REPEATS = 3, 200
CUDA_PROBE_TIMEOUT = 300.0
TF32_CAPABILITY = 8  # Ampere and later run fp32 convolutions as TF32 unless told otherwise


@dataclass(frozen=True)
class Peak:
    """The recorded peak of one device at one precision."""

    flops: float | None  # FLOP/s of one device; None when the probe failed
    method: str
    datasheet_flops: float | None = None  # the vendor's figure for this device and math
    datasheet_source: str | None = None


def math_of(device: str, precision: str, tf32: str, capability: int | None) -> str:
    """The math a run's matrix products use: fp32 runs on CUDA use TF32 when told to, and by
    default on Ampere and later (cuDNN allows TF32 for convolutions unless --tf32 off)."""
    if device == "cuda" and precision == "fp32":
        if tf32 == "on" or (tf32 == "default" and (capability or 0) >= TF32_CAPABILITY):
            return "tf32"
    return precision


def _sync(torch, device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def budget_seconds(device: str) -> float:
    """The probe's time budget on this device: $SCALEBENCH_PEAK_SECONDS, else the default."""
    value = os.environ.get(BUDGET_ENV, "").strip()
    if not value:
        return BUDGET_SECONDS[device]
    seconds = fields.number(BUDGET_ENV, value, 0)
    if seconds == float("inf"):  # the probe sizes its GEMM from the budget: it must be finite
        raise UserError(f"{BUDGET_ENV}: expected a finite number > 0, got {value!r}")
    return seconds


def gemm_probe(device: str, precision: str, budget: float | None = None
               ) -> tuple[float, int, int, float]:
    """(best FLOP/s, size n, repeats, seconds) of n x n x n GEMMs at the precision's dtype on
    the current settings (threads, TF32)."""
    import torch

    budget = budget_seconds(device) if budget is None else budget
    dtype = getattr(torch, DTYPES[precision])
    n = START_SIZE[device]

    def operands(size: int):  # made on the device: a GPU's are too large to make on the host
        a = torch.randn(size, size, device=device).to(dtype)
        b = torch.randn(size, size, device=device).to(dtype)
        return a, b, torch.empty(size, size, device=device, dtype=dtype)

    def once(a, b, out) -> float:
        start = time.perf_counter()
        torch.mm(a, b, out=out)
        _sync(torch, device)
        return time.perf_counter() - start

    a, b, out = operands(n)
    once(a, b, out)  # the first call also pays allocation and kernel choice
    # One resize, aimed at a GEMM of a twentieth of the budget (the cube root: time ~ n^3).
    seconds = min(once(a, b, out) for _ in range(WARMUP_GEMMS))
    n = int(n * (budget / 20 / max(seconds, 1e-9)) ** (1 / 3)) // 64 * 64
    n = min(max(n, MIN_SIZE[device]), MAX_SIZE[device])
    if n != a.shape[0]:
        a, b, out = operands(n)
        for _ in range(WARMUP_GEMMS):
            once(a, b, out)
    times: list[float] = []
    began = time.perf_counter()
    while len(times) < MAX_REPEATS and (len(times) < MIN_REPEATS
                                        or time.perf_counter() - began < budget):
        times.append(once(a, b, out))
    return 2.0 * n**3 / min(times), n, len(times), time.perf_counter() - began


def probe(device: str, precision: str, tf32: str = "default", budget: float | None = None
          ) -> Peak:
    """Measure the peak here, in this process (CPU: with every core of the node)."""
    import torch

    from scalebench.hardware.envinfo import cpu_cores, cpu_model

    if device == "cuda":
        name = torch.cuda.get_device_name(0)
        capability = torch.cuda.get_device_capability(0)[0]
        math = math_of(device, precision, tf32, capability)
        saved = torch.get_float32_matmul_precision()
        torch.set_float32_matmul_precision("high" if math == "tf32" else "highest")
        try:
            rate, n, repeats, seconds = gemm_probe(device, precision, budget)
        finally:
            torch.set_float32_matmul_precision(saved)
        how = ("in TF32 (the math of fp32 convolutions here)" if math == "tf32" else
               "on the tensor cores" if precision in ("bf16", "fp16") else "in full fp32")
        where = f"{name}, GPU 0"
    else:
        name, math = cpu_model(), precision
        saved_threads = torch.get_num_threads()
        threads = cpu_cores()
        torch.set_num_threads(threads)
        try:
            rate, n, repeats, seconds = gemm_probe(device, precision, budget)
        finally:
            torch.set_num_threads(saved_threads)
        # Other work on the machine slows the probe, and then MFU reads high: say how busy.
        how = f"with {threads} threads, 1-minute load average {os.getloadavg()[0]:.1f}"
        where = f"{name}, all cores of this node"
    sheet = datasheet.lookup(name, math) if device == "cuda" else None
    method = (f"measured: best of {repeats} {DTYPES[precision]} GEMMs of {n} x {n} x {n} "
              f"{how} ({WARMUP_GEMMS} warm-up GEMMs first), {seconds:.2f} s, on {where}; once per "
              "sweep before the runs")
    return Peak(rate, method, None if sheet is None else sheet.flops,
                None if sheet is None else sheet.source)


def measure(device: str, precision: str, tf32: str = "default") -> Peak:
    """The peak of this machine's device: on CPU here, on CUDA in a child process."""
    if device != "cuda":
        try:
            return probe(device, precision, tf32)
        except (RuntimeError, ValueError) as exc:  # a dtype this CPU's torch cannot multiply
            return Peak(None, f"probe failed: {type(exc).__name__}: {exc}"[:300])
    return in_child(device, precision, tf32)


def in_child(device: str, precision: str, tf32: str = "default") -> Peak:
    """probe() in a child process (`python -m scalebench.hardware.peak`), its result read from a file;
    a failure is a Peak without flops and the reason."""
    with tempfile.TemporaryDirectory(prefix="scalebench-peak-") as tmp:
        out = Path(tmp) / "peak.json"
        cmd = [sys.executable, "-m", "scalebench.hardware.peak", "--device", device, "--precision",
               precision, "--tf32", tf32, "--out", str(out)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True,
                                  timeout=CUDA_PROBE_TIMEOUT)
        except subprocess.TimeoutExpired:
            return Peak(None, f"probe failed: no result within {CUDA_PROBE_TIMEOUT:g} s")
        if proc.returncode != 0 or not out.is_file():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            return Peak(None, f"probe failed (exit {proc.returncode}): {tail[0][:300]}")
        return Peak(**json.loads(out.read_text()))


def with_peaks(jobs: Sequence[Job], device: DeviceInfo) -> list[Job]:
    """The train jobs with their device's peak at their precision, each measured once."""
    budget_seconds(device.device)  # a bad $SCALEBENCH_PEAK_SECONDS: exit 2 before any probe
    peaks: dict[tuple[str, str], Peak] = {}
    out = []
    for job in jobs:
        if job.kind != "train":
            out.append(job)
            continue
        key = (job.task.precision, job.task.tf32)
        if key not in peaks:
            peaks[key] = measure(device.device, *key)
        found = peaks[key]
        out.append(dataclasses.replace(job, task=dataclasses.replace(
            job.task, peak_flops=found.flops, peak_method=found.method,
            datasheet_peak_flops=found.datasheet_flops,
            datasheet_peak_source=found.datasheet_source)))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scalebench.hardware.peak")
    parser.add_argument("--device", choices=("cpu", "cuda"), required=True)
    parser.add_argument("--precision", choices=tuple(DTYPES), required=True)
    parser.add_argument("--tf32", choices=("default", "on", "off"), default="default")
    parser.add_argument("--out", required=True, help="JSON file the peak is written to")
    args = parser.parse_args(argv)
    found = probe(args.device, args.precision, args.tf32)
    Path(args.out).write_text(json.dumps(dataclasses.asdict(found)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
