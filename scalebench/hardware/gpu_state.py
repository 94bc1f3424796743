"""What an NVIDIA GPU was doing at the edges of a timed window, through NVML (nvidia-ml-py,
imported lazily by energy.load_nvml): the clock event reasons active (NVML's "clocks throttle
reasons", renamed "clocks event reasons" in recent drivers), the SM clock against its maximum,
the temperature, the power draw against the enforced limit, and the other compute processes on
the GPU. Every query may be refused (a GPU that does not support it, a container without the
permission): a refused query is recorded as such, never raised.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from scalebench.hardware.energy import nvml_error

# NVML's clock event reason bits (nvml.h, nvmlClocksEventReason*), each with a name and words.
REASONS: dict[int, tuple[str, str]] = {
    0x1: ("gpu_idle", "GPU idle"),
    0x2: ("applications_clocks_setting", "the application clocks setting"),
    0x4: ("sw_power_cap", "the software power cap"),
    0x8: ("hw_slowdown", "a hardware slowdown"),
    0x10: ("sync_boost", "sync boost (a GPU of its sync group is slower)"),
    0x20: ("sw_thermal_slowdown", "a software thermal slowdown"),
    0x40: ("hw_thermal_slowdown", "a hardware thermal slowdown"),
    0x80: ("hw_power_brake_slowdown", "the hardware power brake"),
    0x100: ("display_clock_setting", "the display clock setting"),
}
# Reasons that slow a busy GPU below the clock it would otherwise run at. Idle, the
# application clocks and the display clock are settings or states, not a disturbance
# (scalebench env reports the application clocks before a sweep).
DISTURBING = 0x4 | 0x8 | 0x10 | 0x20 | 0x40 | 0x80
NVML_CLOCK_SM = 1
NVML_TEMPERATURE_GPU = 0


def reason_names(mask: int) -> list[str]:
    """Every bit set in mask by name; a bit NVML added after this list as "bit 0x...". """
    names = [name for bit, (name, _) in REASONS.items() if mask & bit]
    unknown = mask & ~sum(REASONS)
    bit = 1
    while unknown >= bit:
        if unknown & bit:
            names.append(f"bit {bit:#x}")
        bit <<= 1
    return names


def reason_words(name: str) -> str:
    for known, words in REASONS.values():
        if known == name:
            return words
    return f"clock event reason {name}"


def disturbing_names(mask: int) -> list[str]:
    return reason_names(mask & DISTURBING)


def query(call: Callable[..., Any], *args: Any) -> tuple[Any, str | None]:
    """(value, None) or (None, why NVML refused)."""
    try:
        return call(*args), None
    except Exception as exc:  # noqa: BLE001 - NVMLError_NotSupported, NoPermission, ...
        return None, nvml_error(exc)


def event_reasons(nvml: Any, handle: Any) -> tuple[int | None, str | None]:
    """The active clock event reasons (bitmask); the older name where the newer is absent."""
    call = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
        getattr(nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None)
    if call is None:
        return None, "this nvidia-ml-py has no clock event reasons query"
    value, why = query(call, handle)
    return (None, why) if value is None else (int(value), None)


@dataclass
class GpuState:
    """One GPU's readings at window edges: start() reads the reasons, stop() the reasons, the
    SM clock, temperature, power and the compute processes."""

    nvml: Any
    handle: Any
    index: int  # NVML's index (nvidia-smi's numbering)
    own: Callable[[list[int]], set[int]]  # which of these pids are the benchmark's own
    sm_max_mhz: int | None = None
    power_limit_w: float | None = None
    refused: dict[str, str] = field(default_factory=dict)  # query -> why NVML refused it
    windows: list[dict] = field(default_factory=list)
    _start_mask: int | None = None

    def _note(self, name: str, why: str | None) -> None:
        if why:
            self.refused.setdefault(name, why)

    def start(self) -> None:
        self._start_mask, why = event_reasons(self.nvml, self.handle)
        self._note("clock event reasons", why)

    def stop(self) -> None:
        n, h = self.nvml, self.handle
        mask, why = event_reasons(n, h)
        self._note("clock event reasons", why)
        masks = [m for m in (self._start_mask, mask) if m is not None]
        sm, why = query(n.nvmlDeviceGetClockInfo, h, NVML_CLOCK_SM)
        self._note("SM clock", why)
        temp, why = query(n.nvmlDeviceGetTemperature, h, NVML_TEMPERATURE_GPU)
        self._note("temperature", why)
        milliwatts, why = query(n.nvmlDeviceGetPowerUsage, h)
        self._note("power", why)
        procs, why = query(n.nvmlDeviceGetComputeRunningProcesses, h)
        self._note("compute processes", why)
        pids = [int(p.pid) for p in procs or ()]
        own = self.own(pids) if pids else set()
        self.windows.append({
            "reasons": None if not masks else masks[0] | (masks[-1] if len(masks) > 1 else 0),
            "sm_mhz": None if sm is None else int(sm),
            "temp_c": None if temp is None else int(temp),
            "power_w": None if milliwatts is None else milliwatts / 1000.0,
            "others": None if procs is None else sorted(p for p in pids if p not in own),
        })
        self._start_mask = None

    def result(self) -> dict[str, Any]:
        return {"gpu": self.index, "sm_max_mhz": self.sm_max_mhz,
                "power_limit_w": self.power_limit_w, "windows": self.windows,
                "refused": dict(self.refused)}


def open_state(nvml: Any, handle: Any, own: Callable[[list[int]], set[int]]) -> GpuState:
    """A GPU's state reader; the limits (maximum SM clock, enforced power limit) read once."""
    index, _ = query(nvml.nvmlDeviceGetIndex, handle)
    state = GpuState(nvml, handle, -1 if index is None else int(index), own)
    sm_max, why = query(nvml.nvmlDeviceGetMaxClockInfo, handle, NVML_CLOCK_SM)
    state._note("maximum SM clock", why)
    limit, why = query(nvml.nvmlDeviceGetEnforcedPowerLimit, handle)
    state._note("power limit", why)
    state.sm_max_mhz = None if sm_max is None else int(sm_max)
    state.power_limit_w = None if limit is None else limit / 1000.0
    return state
