"""Settings that make numbers unstable, read before anything runs (`scalebench env`, the GPU
check): the CPU frequency governor and turbo/boost; per NVIDIA GPU, persistence mode, the
application clocks and the power limit against their defaults. A reading that is not there
(no cpufreq in a VM, no nvidia-ml-py, a query the GPU refuses) is said as missing, never
raised. pyperf's `system show` and Google Benchmark's "CPU scaling is enabled" warning check
the same CPU settings.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scalebench.hardware import cpu_load, energy, gpu_state

SYSFS_CPU = cpu_load.CPUFREQ
NVML_FEATURE_ENABLED = 1


def cpu_settings(root: Path = SYSFS_CPU) -> tuple[dict[str, Any], list[str], dict[str, str]]:
    """(settings, warnings, missing) of the CPUs."""
    settings: dict[str, Any] = {}
    warnings: list[str] = []
    missing: dict[str, str] = {}
    found = cpu_load.governors(root)
    if found:
        settings["cpu_governor"] = found
        moving = {g: n for g, n in found.items() if g != "performance"}
        if moving:
            warnings.append("CPU frequency governor " + ", ".join(
                f"{g} on {n} CPU{'s' if n != 1 else ''}" for g, n in moving.items())
                + ": the clock follows the load, so numbers move with it (performance holds it)")
    else:
        missing["cpu_governor"] = (f"no {root}/cpu*/cpufreq/scaling_governor (no cpufreq "
                                   "driver: a VM or container, where the host sets the clock)")
    turbo = _turbo(root)
    if turbo is None:
        missing["turbo"] = "no intel_pstate/no_turbo or cpufreq/boost file"
    else:
        settings["turbo"] = turbo
        if turbo:
            warnings.append("turbo/boost is on: the clock depends on temperature and on how "
                            "many cores are busy, so runs at different worker counts run at "
                            "different clocks")
    return settings, warnings, missing


def _turbo(root: Path) -> bool | None:
    for path, on_when in ((root / "intel_pstate" / "no_turbo", "0"),
                          (root / "cpufreq" / "boost", "1")):
        try:
            return path.read_text().strip() == on_when
        except OSError:
            continue
    return None


def gpu_settings(nvml: Any) -> tuple[dict[str, Any], list[str], dict[str, str]]:
    """(settings, warnings, missing) of every GPU NVML sees."""
    count, why = gpu_state.query(nvml.nvmlDeviceGetCount)
    if count is None:
        return {}, [], {"gpus": f"NVML device count: {why}"}
    settings: dict[str, Any] = {}
    warnings: list[str] = []
    missing: dict[str, str] = {}
    for i in range(int(count)):
        handle, why = gpu_state.query(nvml.nvmlDeviceGetHandleByIndex, i)
        if handle is None:
            missing[f"gpu{i}"] = why or "no handle"
            continue
        one: dict[str, Any] = {}

        def read(name: str, call: Any, *args: Any, index: int = i, into: dict = one) -> Any:
            value, why = gpu_state.query(call, *args)
            if value is None:
                missing[f"gpu{index} {name}"] = why or "not readable"
            else:
                into[name] = value
            return value

        mode = read("persistence_mode", nvml.nvmlDeviceGetPersistenceMode, handle)
        if mode is not None:
            one["persistence_mode"] = "on" if mode == NVML_FEATURE_ENABLED else "off"
            if mode != NVML_FEATURE_ENABLED:
                warnings.append(f"GPU {i}: persistence mode off: the driver may unload between "
                                "runs, and the first run after it pays the start-up")
        app = read("app_sm_mhz", nvml.nvmlDeviceGetApplicationsClock, handle,
                   gpu_state.NVML_CLOCK_SM)
        default = read("default_app_sm_mhz", nvml.nvmlDeviceGetDefaultApplicationsClock,
                       handle, gpu_state.NVML_CLOCK_SM)
        if app is not None and default is not None and app != default:
            warnings.append(f"GPU {i}: application SM clock set to {app:,} MHz (default "
                            f"{default:,} MHz)")
        limit = read("power_limit_w", nvml.nvmlDeviceGetPowerManagementLimit, handle)
        base = read("default_power_limit_w", nvml.nvmlDeviceGetPowerManagementDefaultLimit,
                    handle)
        for key in ("power_limit_w", "default_power_limit_w"):
            if key in one:
                one[key] = one[key] / 1000.0
        if limit is not None and base is not None and limit < base:
            warnings.append(f"GPU {i}: power limit {limit / 1000:,.0f} W, below its default "
                            f"{base / 1000:,.0f} W: the software power cap throttles sooner")
        reasons, why = gpu_state.event_reasons(nvml, handle)
        if reasons is not None:
            one["clock_event_reasons_now"] = gpu_state.reason_names(reasons)
            hot = gpu_state.disturbing_names(reasons)
            if hot:
                warnings.append(f"GPU {i}: clocks held down now, before any run: "
                                + ", ".join(gpu_state.reason_words(r) for r in hot))
        else:
            missing[f"gpu{i} clock event reasons"] = why or "not readable"
        settings[f"gpu{i}"] = one
    return settings, warnings, missing


def collect(root: Path = SYSFS_CPU, nvml: Any = None, why_no_nvml: str | None = None
            ) -> dict[str, Any]:
    """Every setting that can make numbers unstable: {"settings", "warnings", "missing"}.
    nvml: an initialised pynvml (None: loaded here, lazily; missing said when it cannot be)."""
    settings, warnings, missing = cpu_settings(root)
    if nvml is None and why_no_nvml is None:
        nvml, why_no_nvml = energy.load_nvml()
    if nvml is None:
        missing["gpu"] = f"GPU settings not read: {why_no_nvml}"
    else:
        g_settings, g_warnings, g_missing = gpu_settings(nvml)
        settings.update(g_settings)
        warnings += g_warnings
        missing.update(g_missing)
    return {"settings": settings, "warnings": warnings, "missing": missing}


def lines(found: dict[str, Any]) -> list[str]:
    """The warnings and what could not be read, one line each (no braces: the GPU check
    reads `scalebench env`'s JSON out of its output)."""
    return [f"unstable: {w}" for w in found.get("warnings") or ()] + \
        [f"not read: {k}: {v}" for k, v in (found.get("missing") or {}).items()]
