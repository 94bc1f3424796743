"""Whether a run was disturbed, and by what, in words and figures: the judgement over the
readings hardware/disturbance.py took at the edges of every timed window. Pure: no I/O.

A window is disturbed when, during it (docs/disturbance.md justifies each threshold):
- other processes (not the benchmark's own) used at least OTHER_CORES of a CPU on the node
  on average, and at least MIN_TICKS clock ticks (so a tick of rounding is never a cause);
- the hypervisor stole at least OTHER_CORES of a CPU (steal time), and MIN_TICKS ticks;
- a GPU had a disturbing clock event reason active at either edge (gpu_state.DISTURBING:
  power cap, thermal and hardware slowdowns, power brake, sync boost);
- another process had a compute context on a rank's GPU.
A record is disturbed when any of its windows is. Its `disturbance` field says by what in
words (`causes`), with the figures behind them, per node and per GPU, and which windows.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from typing import Any

from scalebench.hardware import gpu_state

OTHER_CORES = 0.2  # other processes' (or steal) CPU time, in CPUs, averaged over a window
MIN_TICKS = 3  # and at least this many clock ticks of it (30 ms at Linux's USER_HZ of 100)
FIELD = "disturbance"
COLUMNS = ("disturbed", "disturbance", "baseline_disturbance")  # summary.csv
NOT_RECORDED = "not recorded (written before scalebench read disturbances)"
THRESHOLDS = {"other_cores": OTHER_CORES, "min_ticks": MIN_TICKS,
              "gpu_reasons": gpu_state.reason_names(gpu_state.DISTURBING),
              "gpu_other_processes": True}


def pct(share: float) -> str:
    return f"{100 * share:.0f}%"


def in_windows(k: int, n: int) -> str:
    return f"in {k} of {n} windows" if k < n else f"in all {n} windows" if n > 1 else ""


# ---------------------------------------------------------------- the node's CPU

def cpu_flags(cpu: dict) -> list[tuple[bool, bool]]:
    """Per window: (other processes took at least OTHER_CORES, steal did)."""
    cpus = cpu.get("cpus") or 1
    out = []
    for w in cpu.get("windows") or ():
        total = w.get("total") or 0

        def heavy(ticks: int, total: int = total) -> bool:
            return ticks >= MIN_TICKS and total > 0 and ticks / total * cpus >= OTHER_CORES

        out.append((heavy(w.get("other", 0)), heavy(w.get("steal", 0))))
    return out


def cpu_windows(cpu: dict) -> list[bool]:
    """Per window: whether other processes or steal took at least OTHER_CORES."""
    return [a or b for a, b in cpu_flags(cpu)]


def cpu_node(host: str, cpu: dict, several_nodes: bool) -> tuple[dict, list[str]]:
    """A node's figures over its windows and the causes in words."""
    windows = cpu.get("windows") or []
    flags = cpu_flags(cpu)
    total = sum(w.get("total", 0) for w in windows)

    def share(ticks: int) -> float:
        return ticks / total if total > 0 else 0.0

    other, steal = sum(w.get("other", 0) for w in windows), sum(w.get("steal", 0) for w in windows)
    names: dict[str, int] = {}
    for w in windows:
        for name, ticks, _ in w.get("top") or ():
            names[name] = names.get(name, 0) + ticks
    top = sorted(names.items(), key=lambda kv: -kv[1])
    by_other = [w for w, (o, _) in zip(windows, flags, strict=True) if o]
    by_steal = sum(1 for _, s in flags if s)
    figures = {"host": host, "cpus": cpu.get("cpus"), "other_share": share(other),
               "other_cores": share(other) * (cpu.get("cpus") or 1),
               "own_share": share(sum(w.get("own", 0) for w in windows)),
               "steal_share": share(steal), "top": [[name, share(t)] for name, t in top],
               "windows_disturbed": sum(1 for o, s in flags if o or s),
               "governors": cpu.get("governors") or {}}
    causes = []
    n = len(flags)
    where = f" on {host}" if several_nodes else ""
    if by_other:
        count = max(w.get("other_processes", 0) for w in by_other)
        lead = f" (top: {top[0][0]} {pct(share(top[0][1]))})" if top else ""
        causes.append(" ".join(x for x in (
            f"{pct(share(other))} of the node's CPU time{where} during the windows went to "
            f"{count} other process{'es' if count != 1 else ''}{lead}",
            in_windows(len(by_other), n)) if x))
    if by_steal:
        causes.append(" ".join(x for x in (
            f"{pct(share(steal))} of the node's CPU time{where} during the windows was stolen "
            "by the hypervisor (steal time)", in_windows(by_steal, n)) if x))
    return figures, causes


# ---------------------------------------------------------------- a rank's GPU

def gpu_flags(gpu: dict) -> list[bool]:
    """Per window: a disturbing clock event reason, or another compute process."""
    return [bool((w.get("reasons") or 0) & gpu_state.DISTURBING) or bool(w.get("others"))
            for w in gpu.get("windows") or ()]


def _median(values: Iterable[Any]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def gpu_rank(rank: int, gpu: dict) -> tuple[dict, list[str]]:
    windows = gpu.get("windows") or []
    name = f"GPU {gpu.get('gpu')}"
    counts: dict[str, int] = {}
    for w in windows:
        for reason in gpu_state.disturbing_names(w.get("reasons") or 0):
            counts[reason] = counts.get(reason, 0) + 1
    throttled = [w for w in windows if (w.get("reasons") or 0) & gpu_state.DISTURBING]
    shared = [w for w in windows if w.get("others")]
    others = sorted({p for w in shared for p in w["others"]})
    figures = {"rank": rank, "gpu": gpu.get("gpu"), "reasons": counts,
               "windows_throttled": len(throttled), "windows_shared": len(shared),
               "sm_mhz": _median(w.get("sm_mhz") for w in (throttled or windows)),
               "sm_max_mhz": gpu.get("sm_max_mhz"),
               "temp_c": _median(w.get("temp_c") for w in windows),
               "power_w": _median(w.get("power_w") for w in windows),
               "power_limit_w": gpu.get("power_limit_w"), "other_pids": others,
               "refused": gpu.get("refused") or {}}
    causes = []
    n = len(windows)
    if throttled:
        by = " and ".join(gpu_state.reason_words(r) for r in sorted(counts, key=lambda r: -counts[r]))
        text = f"{name} throttled by {by} in {len(throttled)} of {n} windows"
        if figures["sm_mhz"] is not None and figures["sm_max_mhz"]:
            text += f", SM clock {figures['sm_mhz']:,.0f} of {figures['sm_max_mhz']:,} MHz"
        extra = []
        if figures["temp_c"] is not None:
            extra.append(f"{figures['temp_c']:.0f} °C")
        if figures["power_w"] is not None and figures["power_limit_w"]:
            extra.append(f"{figures['power_w']:,.0f} of {figures['power_limit_w']:,.0f} W")
        causes.append(text + (f" ({', '.join(extra)})" if extra else ""))
    if shared:
        who = "another process" if len(others) == 1 else f"{len(others)} other processes"
        causes.append(" ".join(x for x in (f"{who} used {name}",
                                           in_windows(len(shared), n)) if x))
    return figures, causes


# ---------------------------------------------------------------- a record

def record_fields(per_rank: Sequence[dict | None] | None, trials: int) -> dict[str, Any]:
    """The record's `disturbance` field from each rank's watcher result (None: a worker that
    sent none)."""
    results = [r for r in per_rank or () if r]
    if not results:
        return {FIELD: {"disturbed": False, "causes": [], "windows": [False] * trials,
                        "nodes": [], "gpus": [], "thresholds": THRESHOLDS,
                        "unavailable": {"all": "this run's workers sent no disturbance readings"}}}
    windows = [False] * trials
    causes: list[str] = []
    nodes, gpus = [], []
    unavailable: dict[str, str] = {}
    hosts = {r.get("host") for r in results if r.get("cpu")}
    for rank, result in enumerate(per_rank or ()):
        if not result:
            continue
        for kind, why in (result.get("unavailable") or {}).items():
            unavailable.setdefault(kind, why)
        flags: list[bool] = []
        if result.get("cpu"):
            figures, said = cpu_node(str(result.get("host")), result["cpu"], len(hosts) > 1)
            nodes.append(figures)
            causes += said
            flags = cpu_windows(result["cpu"])
        if result.get("gpu"):
            figures, said = gpu_rank(rank, result["gpu"])
            gpus.append(figures)
            causes += said
            flags = [a or b for a, b in zip(flags or [False] * trials, gpu_flags(result["gpu"]),
                                            strict=False)]
        for i, hit in enumerate(flags[:trials]):
            windows[i] = windows[i] or hit
    costs = [s for r in results for s in r.get("edge_seconds") or ()]
    return {FIELD: {"disturbed": any(windows), "causes": list(dict.fromkeys(causes)),
                    "windows": windows, "nodes": nodes, "gpus": gpus,
                    "thresholds": THRESHOLDS, "unavailable": unavailable,
                    "edge_seconds_max": max(costs) if costs else None,
                    "edge_seconds_mean": statistics.fmean(costs) if costs else None}}


def is_disturbed(record: dict) -> bool:
    d = record.get(FIELD)
    return isinstance(d, dict) and bool(d.get("disturbed"))


def recorded(record: dict) -> bool:
    return isinstance(record.get(FIELD), dict)


def record_text(record: dict) -> str | None:
    """A record's causes in words; "" when it was not disturbed; None when not recorded."""
    if not recorded(record):
        return None
    return "; ".join(record[FIELD].get("causes") or ()) if is_disturbed(record) else ""


# ---------------------------------------------------------------- rows of several launches

def launches_text(records: Sequence[dict]) -> str:
    """The disturbed launches among records, in words ("" when none was)."""
    hit = [r for r in records if is_disturbed(r)]
    if not hit:
        return ""
    if len(records) == 1:
        return record_text(hit[0]) or "disturbed"
    return f"{len(hit)} of {len(records)} launches disturbed: " + "; ".join(
        f"launch {r.get('repeat') or 1}: {record_text(r)}" for r in hit)


def row_fields(records: Sequence[dict]) -> dict[str, Any]:
    """`disturbed` (True, False, or None where no launch recorded it) and `disturbance`."""
    if not any(recorded(r) for r in records):
        return {"disturbed": None, "disturbance": NOT_RECORDED}
    text = launches_text(records)
    return {"disturbed": bool(text), "disturbance": text}


def clean(records: Sequence[dict]) -> tuple[dict, ...]:
    """The launches no disturbance touched (records without readings count as undisturbed)."""
    return tuple(r for r in records if not is_disturbed(r))
