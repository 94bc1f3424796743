"""Component energy of the timed windows: GPU board energy from NVML's total-energy counter
(NVIDIA's own bindings, nvidia-ml-py) and CPU package energy from RAPL (/sys/class/powercap).

Counters are read at the edges of each timed window, never inside one (worker/measure.py reads
them after the barrier, just before the window's clock starts, and just after it stops): a
read costs a system call or an NVML call, which must not land in the time measured. Each rank
reads its own GPU; RAPL packages are the node's, shared by its workers, so one rank per node
(local rank 0) reads them.

This is component energy (GPU boards, CPU packages), not MLPerf Power, which measures the
whole system at the wall. Where a source cannot be read, the record says why
(`energy.unavailable`); nothing is estimated.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SCOPE = ("component energy: GPU boards (NVML total-energy counter) and CPU packages (RAPL), "
         "read at the edges of the timed windows; not MLPerf Power (no wall power, no fans, "
         "memory, network or cooling)")
POWERCAP = Path("/sys/class/powercap")
GPU, CPU = "gpu", "cpu"
COARSE_WINDOW = 2.0  # seconds: below this, the NVML counter's update period shows (note)


@dataclass
class Counter:
    """One cumulative energy counter: `read()` gives joules since some origin; `wrap` is the
    counter's range in joules (RAPL wraps around), None when it never wraps in practice."""

    name: str  # e.g. "gpu0", "package-0"
    kind: str  # GPU or CPU
    read: Callable[[], float]
    wrap: float | None = None


def delta(before: float, after: float, wrap: float | None) -> float:
    """Joules between two readings of one counter, across one wrap-around at most."""
    if after >= before or wrap is None:
        return after - before
    return after + wrap - before


# ---------------------------------------------------------------- RAPL (CPU packages)

def rapl_counters(root: Path = POWERCAP) -> tuple[list[Counter], str | None]:
    """The CPU package zones of RAPL under root (intel-rapl:N; recent AMD CPUs use the same
    driver), or no counter and the reason."""
    if not root.is_dir():
        return [], f"no {root} on this machine (no RAPL driver: a VM, or not an x86 host)"
    zones = sorted(p for p in root.glob("intel-rapl:*") if p.name.count(":") == 1)
    packages = []
    for zone in zones:
        try:
            name = (zone / "name").read_text().strip()
        except OSError:
            continue
        if name.startswith("package"):
            packages.append((zone, name))
    if not packages:
        return [], f"no RAPL package zone under {root}"
    out = []
    for zone, name in packages:
        energy = zone / "energy_uj"
        try:
            int(energy.read_text())
        except PermissionError:
            return [], (f"{energy} is readable by root only (Linux restricts RAPL since the "
                        "2020 PLATYPUS fix); run as root or grant read access to measure CPU "
                        "energy")
        except (OSError, ValueError) as exc:
            return [], f"{energy} unreadable: {exc}"
        try:
            wrap = int((zone / "max_energy_range_uj").read_text()) / 1e6
        except (OSError, ValueError):
            wrap = None
        out.append(Counter(name, CPU, _microjoules(energy), wrap))
    return out, None


def _microjoules(path: Path) -> Callable[[], float]:
    def read() -> float:
        with open(path, "rb") as fh:
            return int(fh.read()) / 1e6
    return read


# ---------------------------------------------------------------- NVML (GPU boards)

def load_nvml() -> tuple[Any, str | None]:
    """pynvml (from nvidia-ml-py), initialised; or None and the reason."""
    try:
        import pynvml
    except ImportError:
        return None, "nvidia-ml-py is not installed (pip install nvidia-ml-py)"
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return None, f"NVML did not initialise: {nvml_error(exc)}"
    return pynvml, None


def nvml_error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def nvml_handle(nvml: Any, torch_index: int, uuid: str | None) -> tuple[Any, str]:
    """The NVML handle of the GPU torch calls `torch_index` (CUDA_VISIBLE_DEVICES renumbers
    torch's GPUs, NVML never does): by UUID when torch gives one, else by index when nothing
    is hidden. Returns (handle, how it was matched)."""
    if uuid:
        text = uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"
        return nvml.nvmlDeviceGetHandleByUUID(text), "uuid"
    if os.environ.get("CUDA_VISIBLE_DEVICES", "").strip():
        raise LookupError("CUDA_VISIBLE_DEVICES is set and torch gave no UUID: cannot tell "
                          "which NVML device this rank uses")
    return nvml.nvmlDeviceGetHandleByIndex(torch_index), "index"


def nvml_counter(nvml: Any, torch_index: int, uuid: str | None) -> tuple[Counter | None,
                                                                           str | None]:
    """This rank's GPU as an energy counter (millijoules since the driver loaded; Volta and
    later), or None and the reason."""
    try:
        handle, _ = nvml_handle(nvml, torch_index, uuid)
        nvml.nvmlDeviceGetTotalEnergyConsumption(handle)
    except LookupError as exc:
        return None, str(exc)
    except Exception as exc:  # noqa: BLE001 - NVMLError_NotSupported before Volta, ...
        return None, f"NVML total-energy counter of GPU {torch_index}: {nvml_error(exc)}"

    def read() -> float:
        return nvml.nvmlDeviceGetTotalEnergyConsumption(handle) / 1e3

    return Counter(f"gpu{torch_index}", GPU, read), None


def torch_uuid(torch_index: int) -> str | None:
    import torch

    uuid = getattr(torch.cuda.get_device_properties(torch_index), "uuid", None)
    return None if uuid is None else str(uuid)


# ---------------------------------------------------------------- the meter

@dataclass
class Meter:
    """Readings of this rank's counters at the edges of each timed window."""

    counters: list[Counter]
    unavailable: dict[str, str] = field(default_factory=dict)  # GPU/CPU -> why not measured
    windows: list[list[float]] = field(default_factory=list)  # per window, joules per counter
    _start: list[float] | None = None

    def start(self) -> None:
        """Just before a window's clock starts."""
        self._start = [c.read() for c in self.counters] if self.counters else None

    def stop(self) -> None:
        """Just after a window's clock stopped."""
        if self._start is None:
            return
        now = [c.read() for c in self.counters]
        self.windows.append([delta(a, b, c.wrap) for a, b, c in
                             zip(self._start, now, self.counters, strict=True)])
        self._start = None

    def result(self) -> dict[str, Any]:
        """What this rank sends back (plain values)."""
        return {"counters": [{"name": c.name, "kind": c.kind} for c in self.counters],
                "joules": self.windows, "unavailable": dict(self.unavailable)}


def open_meter(device_type: str, torch_index: int, local_rank: int,
               powercap: Path = POWERCAP) -> Meter:
    """This rank's meter: its GPU on CUDA; the node's CPU packages on local rank 0."""
    counters: list[Counter] = []
    unavailable: dict[str, str] = {}
    if device_type == "cuda":
        nvml, why = load_nvml()
        counter = None
        if nvml is not None:
            try:
                uuid = torch_uuid(torch_index)
            except Exception:  # noqa: BLE001 - an old torch without the property
                uuid = None
            counter, why = nvml_counter(nvml, torch_index, uuid)
        if counter is None:
            unavailable[GPU] = why or "not readable"
        else:
            counters.append(counter)
    else:
        unavailable[GPU] = "a CPU run: no GPU"
    if local_rank == 0:
        packages, why = rapl_counters(powercap)
        counters += packages
        if why:
            unavailable[CPU] = why
    return Meter(counters, unavailable)


# ---------------------------------------------------------------- record fields (pure)

def record_fields(per_rank: Sequence[dict] | None, window_seconds: Sequence[Sequence[float]],
                  images_per_window: int) -> dict[str, Any]:
    """joules_per_image (all components, all workers, per image of the timed windows),
    mean_watts_per_worker (that energy over all ranks' window seconds) and `energy` (by
    component, per rank, what was not measured and why). per_rank: each rank's
    Meter.result(), None from a worker that sent none (an older worker)."""
    if not per_rank:
        return {"joules_per_image": None, "mean_watts_per_worker": None,
                "energy": {"scope": SCOPE, "components": {}, "unavailable": {
                    "all": "this run's workers sent no energy readings"}}}
    by_kind: dict[str, float] = {}
    per_rank_joules = []
    unavailable: dict[str, str] = {}
    windows = len(window_seconds[0]) if window_seconds else 0
    for rank, result in enumerate(per_rank):
        total = 0.0
        for i, counter in enumerate(result.get("counters", [])):
            values = [w[i] for w in result.get("joules", [])]
            if len(values) != windows:
                unavailable.setdefault(counter["kind"], f"rank {rank}: {len(values)} readings "
                                                        f"for {windows} windows")
                continue
            joules = float(sum(values))
            by_kind[counter["kind"]] = by_kind.get(counter["kind"], 0.0) + joules
            total += joules
        per_rank_joules.append(total)
        for kind, why in (result.get("unavailable") or {}).items():
            unavailable.setdefault(kind, why)
    energy: dict[str, Any] = {"scope": SCOPE, "components": by_kind,
                              "unavailable": {k: v for k, v in unavailable.items()
                                              if k not in by_kind}}
    partial = sorted(k for k in unavailable if k in by_kind)
    if partial:  # measured on some ranks only: the total is short by the others
        energy["partial"] = {k: unavailable[k] for k in partial}
    if not by_kind:
        return {"joules_per_image": None, "mean_watts_per_worker": None, "energy": energy}
    total = sum(by_kind.values())
    images = images_per_window * windows
    seconds = sum(sum(rank) for rank in window_seconds)
    energy["per_rank_joules"] = per_rank_joules
    mean_window = seconds / max(1, sum(len(rank) for rank in window_seconds))
    if GPU in by_kind and mean_window < COARSE_WINDOW:
        energy["note"] = (f"windows of {mean_window:.2g} s: NVML's energy counter moves every "
                          f"20-100 ms on recent GPUs, so a window's GPU energy is known to "
                          f"about {min(100.0, 10.0 / mean_window):.0f}%; longer windows "
                          "(--iters) read it better")
    return {"joules_per_image": total / images if images else None,
            "mean_watts_per_worker": total / seconds if seconds > 0 else None,
            "energy": energy}


def not_measured_text(record: dict) -> str:
    """Why a record has no energy, in words ("" when it has some)."""
    if record.get("joules_per_image") is not None:
        return ""
    energy = record.get("energy")
    if not isinstance(energy, dict):
        return "not recorded (written before scalebench measured energy)"
    reasons = energy.get("unavailable") or {}
    return "; ".join(f"{kind}: {why}" for kind, why in reasons.items()) or "not measured"


def row_fields(records: Sequence[dict]) -> dict[str, Any]:
    """A summary row's energy from its ok launches: the mean joules per image and watts per
    worker over the launches that measured any, images per joule, what was measured
    ("gpu+cpu") and, where nothing was, why."""
    measured = [r for r in records if r.get("joules_per_image")]
    if not measured:
        reasons = list(dict.fromkeys(not_measured_text(r) for r in records))
        return {"joules_per_image": None, "images_per_joule": None,
                "mean_watts_per_worker": None,
                "energy_measured": "not measured: " + "; ".join(reasons)}
    joules = sum(r["joules_per_image"] for r in measured) / len(measured)
    watts = [r["mean_watts_per_worker"] for r in measured
             if r.get("mean_watts_per_worker") is not None]
    kinds = sorted({k for r in measured for k in (r.get("energy") or {}).get("components", {})})
    partial = sorted({k for r in measured for k in (r.get("energy") or {}).get("partial", {})})
    return {"joules_per_image": joules, "images_per_joule": 1.0 / joules,
            "mean_watts_per_worker": sum(watts) / len(watts) if watts else None,
            "energy_measured": "+".join(kinds)
            + (f" (partial: {', '.join(partial)} not on every rank)" if partial else "")
            + (f"; {len(measured)} of {len(records)} launches" if len(measured) < len(records)
               else "")}
