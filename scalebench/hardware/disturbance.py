"""The disturbance watcher: what else the node and this rank's GPU did during each timed window,
read at the window's edges (worker/measure.py: after the barrier, before the clock starts;
after the clock stops), never inside it.

Per node (local rank 0): the node's CPU time (/proc/stat: busy, steal, total), the CPU time of
the benchmark's own processes and of every other process (cpu_load), the CPU frequency
governor. Per rank on CUDA: its GPU's clock event reasons, SM clock, temperature, power and
other compute processes (gpu_state, through NVML). Each window keeps plain numbers; the
judgement (what counts as disturbed, in words) is analysis/disturbance.py's. Each reading's own
cost (seconds spent at the edges) is kept too, to show it does not move the numbers.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass, field
from typing import Any

from scalebench.hardware import cpu_load, energy, gpu_state

TOP = 5  # other processes kept per window, by CPU time


@dataclass
class NodeCpu:
    """The node's CPU at window edges (local rank 0 only: one reader per node)."""

    own: cpu_load.OwnProcesses
    cpus: int
    windows: list[dict] = field(default_factory=list)
    _start: tuple[cpu_load.NodeTimes, dict[int, cpu_load.Proc]] | None = None
    _labels: dict[tuple[int, int], str] = field(default_factory=dict)

    def label(self, p: cpu_load.Proc) -> str:
        key = (p.pid, p.start)
        if key not in self._labels:
            self._labels[key] = cpu_load.label(p)
        return self._labels[key]

    def start(self) -> None:
        self._start = (cpu_load.node_times(), cpu_load.processes())

    def stop(self) -> None:
        if self._start is None:
            return
        times, procs = cpu_load.node_times(), cpu_load.processes()
        before_times, before = self._start
        self._start = None
        own = self.own.of(procs)
        own_ticks, other_ticks = 0, 0
        others: dict[str, list[int]] = {}  # name -> [ticks, processes]
        for pid, p in procs.items():
            was = before.get(pid)
            ticks = p.ticks - was.ticks if was is not None and was.start == p.start else p.ticks
            if ticks <= 0:
                continue
            if pid in own:
                own_ticks += ticks
            else:
                other_ticks += ticks
                entry = others.setdefault(self.label(p), [0, 0])
                entry[0] += ticks
                entry[1] += 1
        node = times.minus(before_times)
        top = sorted(others.items(), key=lambda kv: -kv[1][0])[:TOP]
        self.windows.append({"total": node.total, "busy": node.busy, "steal": node.steal,
                             "own": own_ticks, "other": other_ticks,
                             "other_processes": sum(n for _, n in others.values()),
                             "top": [[name, t, n] for name, (t, n) in top]})


@dataclass
class Watcher:
    """This rank's disturbance readers; start() and stop() frame each timed window."""

    node: NodeCpu | None
    gpu: gpu_state.GpuState | None
    unavailable: dict[str, str] = field(default_factory=dict)  # what was not read, and why
    governors: dict[str, int] = field(default_factory=dict)
    edge_seconds: list[float] = field(default_factory=list)  # each window's reading cost
    _cost: float = 0.0

    def start(self) -> None:
        began = time.perf_counter()
        for reader in (self.node, self.gpu):
            if reader is not None:
                reader.start()
        self._cost = time.perf_counter() - began

    def stop(self) -> None:
        began = time.perf_counter()
        for reader in (self.node, self.gpu):
            if reader is not None:
                reader.stop()
        self.edge_seconds.append(self._cost + time.perf_counter() - began)

    def result(self) -> dict[str, Any]:
        """What this rank sends back (plain values)."""
        return {"host": socket.gethostname(),
                "cpu": None if self.node is None else {
                    "cpus": self.node.cpus, "ticks_per_second": cpu_load.ticks_per_second(),
                    "windows": self.node.windows, "governors": self.governors},
                "gpu": None if self.gpu is None else self.gpu.result(),
                "unavailable": dict(self.unavailable), "edge_seconds": self.edge_seconds}


def open_node() -> tuple[NodeCpu | None, str | None]:
    """The node's CPU reader, or None and why /proc cannot serve one."""
    try:
        cpu_load.node_times()
        own = cpu_load.own_processes()
        own.of(cpu_load.processes())  # classify what runs now, before any window
    except (OSError, ValueError) as exc:
        return None, f"/proc/stat not readable ({exc}): not a Linux node"
    return NodeCpu(own, cpu_load.cpu_count()), None


def open_gpu(torch_index: int) -> tuple[gpu_state.GpuState | None, str | None]:
    """This rank's GPU state reader through NVML, or None and why not."""
    nvml, why = energy.load_nvml()
    if nvml is None:
        return None, why
    try:
        uuid = energy.torch_uuid(torch_index)
    except Exception:  # noqa: BLE001 - an old torch without the property
        uuid = None
    try:
        handle, _ = energy.nvml_handle(nvml, torch_index, uuid)
    except LookupError as exc:
        return None, str(exc)
    except Exception as exc:  # noqa: BLE001 - an NVMLError
        return None, f"NVML handle of GPU {torch_index}: {energy.nvml_error(exc)}"
    own = cpu_load.own_processes()

    def own_pids(pids: list[int]) -> set[int]:
        # every rank asks at every window's end (its own process is always on its GPU): the
        # pids' lineage, not a scan of /proc
        mine = own.of(cpu_load.lineage(pids))
        return {p for p in pids if p in mine}

    return gpu_state.open_state(nvml, handle, own_pids), None


def open_watcher(device_type: str, torch_index: int, local_rank: int) -> Watcher:
    """This rank's watcher: its GPU on CUDA (NVML); the node's CPU on local rank 0."""
    unavailable: dict[str, str] = {}
    node, gpu = None, None
    if local_rank == 0:
        node, why = open_node()
        if why:
            unavailable["cpu"] = why
    if device_type == "cuda":
        gpu, why = open_gpu(torch_index)
        if why:
            unavailable["gpu"] = why
    watcher = Watcher(node, gpu, unavailable)
    if node is not None:
        watcher.governors = cpu_load.governors()
    return watcher
