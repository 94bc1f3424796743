"""The topology a number was measured on: how the GPUs connect (the `nvidia-smi topo -m`
matrix, NVLink), the NICs and their rates (InfiniBand and RoCE devices, Ethernet speeds), the
NUMA nodes, each GPU's PCIe generation and width, and each worker's CPU affinity.

Node-level facts (`collect`) go into every record's environment (`env["topology"]`); a
worker's own placement (`worker_placement`: host, CPUs it may run on, their NUMA nodes) is
measured inside the worker and recorded per rank (`worker_placement`). Parsers are pure and
take the text or the sysfs root, so they are tested on recorded outputs. A fact that cannot
be read is recorded with the reason, never guessed.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import socket
import subprocess
from pathlib import Path
from typing import Any

NET = Path("/sys/class/net")
INFINIBAND = Path("/sys/class/infiniband")
NODES = Path("/sys/devices/system/node")
# Multi-word column headers of `nvidia-smi topo -m` (older drivers print only the first).
AFFINITY_COLUMNS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
ARPHRD = {1: "Ethernet", 32: "InfiniBand"}  # /sys/class/net/*/type
UNKNOWN = "not recorded"  # the signature of a record written before topology was recorded


# ---------------------------------------------------------------- CPU lists

def expand_cpus(text: str) -> list[int]:
    """"0-3,8,10-11" -> [0, 1, 2, 3, 8, 10, 11]; an empty or unreadable list -> []."""
    out: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        low, _, high = part.partition("-")
        try:
            out += range(int(low), int(high or low) + 1)
        except ValueError:
            return []
    return out


def compress_cpus(cpus: list[int] | set[int]) -> str:
    """[0, 1, 2, 3, 8] -> "0-3,8"."""
    ordered = sorted(set(cpus))
    parts, start = [], None
    for i, cpu in enumerate(ordered):
        if start is None:
            start = cpu
        if i + 1 == len(ordered) or ordered[i + 1] != cpu + 1:
            parts.append(str(start) if start == cpu else f"{start}-{cpu}")
            start = None
    return ",".join(parts)


# ---------------------------------------------------------------- nvidia-smi topo -m

def parse_topo_matrix(text: str) -> dict[str, Any]:
    """The matrix `nvidia-smi topo -m` prints: the devices (GPUs and NICs) as columns, the link
    type of each pair (X, NV#, PIX, PXB, PHB, NODE, SYS; SOC on old drivers), each GPU's CPU
    and NUMA affinity, and the NIC legend (NIC0 -> mlx5_0) of newer drivers. Raises
    ValueError on text that holds no matrix."""
    lines = [line.rstrip() for line in text.splitlines()]
    header_at = next((i for i, line in enumerate(lines)
                      if re.match(r"^\s+GPU0(\s|$)", line)), None)
    if header_at is None:
        raise ValueError("no matrix header (a line starting with GPU0)")
    header = lines[header_at]
    for name in AFFINITY_COLUMNS:
        header = header.replace(name, name.replace(" ", "_"))
    columns = header.split()
    devices = [c for c in columns if c.replace("_", " ") not in AFFINITY_COLUMNS]
    extra = [c.replace("_", " ") for c in columns if c.replace("_", " ") in AFFINITY_COLUMNS]
    links: dict[str, dict[str, str]] = {}
    affinity: dict[str, dict[str, str]] = {}
    for line in lines[header_at + 1:]:
        cells = line.split()
        if not cells or cells[0].rstrip(":") in ("Legend", "NIC"):
            break
        name, values = cells[0], cells[1:]
        if len(values) < len(devices):
            break
        links[name] = {d: v for d, v in zip(devices, values, strict=False) if d != name}
        rest = values[len(devices):]
        if rest:
            affinity[name] = dict(zip(extra, rest, strict=False))
    if not links:
        raise ValueError("a matrix header with no rows")
    legend = dict(re.findall(r"^\s*(NIC\d+):\s*(\S+)\s*$", text, re.MULTILINE))
    return {"devices": devices, "links": links, "affinity": affinity, "nic_names": legend}


def gpu_links(matrix: dict[str, Any]) -> dict[str, int]:
    """Link type -> number of GPU pairs connected that way."""
    gpus = [d for d in matrix["devices"] if d.startswith("GPU")]
    counts: dict[str, int] = {}
    for i, a in enumerate(gpus):
        for b in gpus[i + 1:]:
            kind = matrix["links"].get(a, {}).get(b)
            if kind:
                counts[kind] = counts.get(kind, 0) + 1
    return counts


def nearest_nic(matrix: dict[str, Any]) -> dict[str, str]:
    """Each GPU's closest NIC in the matrix's order of distance (PIX best, SYS worst), named
    by the legend where there is one: GPU -> "mlx5_0 (PIX)"."""
    rank = {k: i for i, k in enumerate(("PIX", "PXB", "PHB", "NODE", "SOC", "SYS"))}
    nics = [d for d in matrix["devices"] if not d.startswith("GPU")]
    out = {}
    for gpu, row in matrix["links"].items():
        if not gpu.startswith("GPU") or not nics:
            continue
        best = min(nics, key=lambda n: rank.get(row.get(n, "SYS"), len(rank)))
        out[gpu] = f"{matrix['nic_names'].get(best, best)} ({row.get(best)})"
    return out


def run_topo_matrix(timeout: float = 20.0) -> tuple[dict[str, Any] | None, str | None]:
    """`nvidia-smi topo -m` on this machine, parsed; or None and the reason."""
    if shutil.which("nvidia-smi") is None:
        return None, "no nvidia-smi on this machine"
    try:
        out = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True,
                             timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"nvidia-smi topo -m: {exc}"
    if out.returncode != 0:
        return None, f"nvidia-smi topo -m exited {out.returncode}: {out.stderr.strip()[:200]}"
    try:
        return parse_topo_matrix(out.stdout), None
    except ValueError as exc:
        return None, f"nvidia-smi topo -m: {exc}"


# ---------------------------------------------------------------- NICs, NUMA (sysfs)

def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except (OSError, ValueError):
        return None


def infiniband_devices(root: Path = INFINIBAND) -> list[dict[str, Any]]:
    """Every port of every RDMA device: InfiniBand, or RoCE when its link layer is Ethernet;
    the rate as the kernel words it ("400 Gb/sec (4X NDR)")."""
    out = []
    for dev in sorted(root.glob("*")) if root.is_dir() else ():
        netdevs = sorted(p.name for p in (dev / "device" / "net").glob("*"))
        for port in sorted((dev / "ports").glob("*"), key=lambda p: p.name):
            layer = _read(port / "link_layer") or "unknown"
            state = (_read(port / "state") or "").split(":")[-1].strip() or None
            out.append({"name": dev.name, "port": int(port.name) if port.name.isdigit()
                        else port.name, "kind": "RoCE" if layer == "Ethernet" else layer,
                        "rate": _read(port / "rate"), "state": state, "netdev": netdevs})
    return out


def net_interfaces(root: Path = NET) -> list[dict[str, Any]]:
    """Physical network interfaces (those with a device behind them: no loopback, bridges,
    veth or ifb) with their link speed (Mb/s; None where the driver reports none, as virtio
    does) and state."""
    out = []
    for iface in sorted(root.glob("*")) if root.is_dir() else ():
        if not (iface / "device").exists():
            continue
        kind = ARPHRD.get(int(_read(iface / "type") or 0), f"type {_read(iface / 'type')}")
        speed = _read(iface / "speed")
        mbps = int(speed) if speed and speed.lstrip("-").isdigit() and int(speed) > 0 else None
        driver = iface / "device" / "driver"
        out.append({"name": iface.name, "kind": kind, "speed_mbps": mbps,
                    "state": _read(iface / "operstate"),
                    "driver": os.path.basename(os.readlink(driver)) if driver.is_symlink()
                    else None})
    return out


def numa_nodes(root: Path = NODES) -> list[dict[str, Any]]:
    """NUMA node -> its CPUs ("0-51"); [] where the kernel shows none."""
    out = []
    for node in sorted(root.glob("node[0-9]*"), key=lambda p: int(p.name[4:])) \
            if root.is_dir() else ():
        out.append({"node": int(node.name[4:]), "cpus": _read(node / "cpulist") or ""})
    return out


# ---------------------------------------------------------------- GPUs (NVML)

def nvml_gpus(nvml: Any) -> list[dict[str, Any]]:
    """Every GPU NVML sees (NVML's order, not CUDA_VISIBLE_DEVICES'): name, PCI bus id, PCIe
    generation and width (current, which drops at idle, and maximum) and active NVLinks."""
    def ask(call, *args):
        try:
            value = call(*args)
        except Exception:  # noqa: BLE001 - NVMLError_NotSupported on some parts
            return None
        return value.decode() if isinstance(value, bytes) else value

    out = []
    for index in range(nvml.nvmlDeviceGetCount()):
        h = nvml.nvmlDeviceGetHandleByIndex(index)
        pci = ask(nvml.nvmlDeviceGetPciInfo, h)
        bus = getattr(pci, "busId", None)
        links = 0
        for link in range(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18)):
            state = ask(nvml.nvmlDeviceGetNvLinkState, h, link)
            if state is None:
                break
            links += 1 if state else 0
        out.append({"index": index, "name": ask(nvml.nvmlDeviceGetName, h),
                    "pci_bus_id": bus.decode() if isinstance(bus, bytes) else bus,
                    "pcie_gen": ask(nvml.nvmlDeviceGetCurrPcieLinkGeneration, h),
                    "pcie_gen_max": ask(nvml.nvmlDeviceGetMaxPcieLinkGeneration, h),
                    "pcie_width": ask(nvml.nvmlDeviceGetCurrPcieLinkWidth, h),
                    "pcie_width_max": ask(nvml.nvmlDeviceGetMaxPcieLinkWidth, h),
                    "nvlinks_active": links})
    return out


# ---------------------------------------------------------------- this node, this worker

@functools.cache
def collect() -> dict[str, Any]:
    """This node's topology (cached: it does not change while scalebench runs)."""
    from scalebench.hardware import energy

    out: dict[str, Any] = {"numa_nodes": numa_nodes(), "nics": net_interfaces(),
                           "rdma": infiniband_devices(), "unavailable": {}}
    matrix, why = run_topo_matrix()
    if matrix is None:
        out["unavailable"]["gpu_matrix"] = why
    else:
        out["gpu_matrix"] = matrix
    if shutil.which("nvidia-smi") is None:
        out["unavailable"]["gpus"] = "no nvidia-smi on this machine: no NVIDIA GPU"
        return out
    nvml, why = energy.load_nvml()
    if nvml is None:
        out["unavailable"]["gpus"] = why
    else:
        out["gpus"] = nvml_gpus(nvml)
    return out


def worker_placement(gpu_index: int | None) -> dict[str, Any]:
    """Where this worker runs: its host, the CPUs it may run on, their NUMA nodes, and its GPU
    (torch's index and PCI bus id)."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except AttributeError:
        cpus = list(range(os.cpu_count() or 1))
    nodes = sorted(n["node"] for n in numa_nodes() if set(expand_cpus(n["cpus"])) & set(cpus))
    out: dict[str, Any] = {"host": socket.gethostname(), "cpus": compress_cpus(cpus),
                           "numa_nodes": nodes}
    if gpu_index is not None:
        import torch

        props = torch.cuda.get_device_properties(gpu_index)
        bus = getattr(props, "pci_bus_id", None)
        out["gpu"] = {"index": gpu_index, "pci_bus_id": bus}
    return out


# ---------------------------------------------------------------- in words, and compared

def _rate(nic: dict[str, Any]) -> str:
    if nic.get("rate"):
        return re.sub(r"\s*Gb/sec", " Gb/s", nic["rate"])
    if nic.get("speed_mbps"):
        return f"{nic['speed_mbps'] / 1000:g} Gb/s"
    return "speed not reported"


def describe(topology: dict[str, Any] | None) -> list[str]:
    """The topology in a few lines (report, summary, compare)."""
    if not isinstance(topology, dict):
        return ["not recorded (written before scalebench recorded topology)"]
    lines = []
    gpus = topology.get("gpus") or []
    if gpus:
        parts = []
        for g in gpus:
            pcie = (f"PCIe Gen{g.get('pcie_gen_max')} x{g.get('pcie_width_max')} max, "
                    f"Gen{g.get('pcie_gen')} x{g.get('pcie_width')} now")
            parts.append(f"GPU{g['index']} {g.get('name')} ({pcie}; "
                         f"{g.get('nvlinks_active', 0)} NVLinks active)")
        lines.append("GPUs: " + "; ".join(parts))
    matrix = topology.get("gpu_matrix")
    if matrix:
        links = gpu_links(matrix)
        lines.append("GPU interconnect: " + (", ".join(f"{k} between {n} pair{'s' * (n != 1)}"
                                                       for k, n in sorted(links.items()))
                                             or "one GPU"))
        near = nearest_nic(matrix)
        if near:
            lines.append("Nearest NIC: " + ", ".join(f"{g} {n}" for g, n in near.items()))
    nics = [f"{n['name']} {n['kind']} {_rate(n)}" + (f" ({n['state']})" if n.get("state") else "")
            for n in (topology.get("rdma") or []) + (topology.get("nics") or [])]
    lines.append("NICs: " + ("; ".join(nics) or "none found"))
    numa = topology.get("numa_nodes") or []
    lines.append(f"NUMA: {len(numa)} node{'s' * (len(numa) != 1)}" +
                 (" (" + "; ".join(f"{n['node']}: CPUs {n['cpus']}" for n in numa) + ")"
                  if numa else ""))
    for what, why in (topology.get("unavailable") or {}).items():
        lines.append(f"{what}: not read ({why})")
    return lines


def signature(topology: dict[str, Any] | None) -> str:
    """What must match for two runs' scaling to be compared as on the same topology: GPU
    models, maximum PCIe link, NVLinks, the GPU link types, the NICs with their rates, the NUMA
    layout. Leaves out what moves by itself (the current PCIe generation drops at idle)."""
    if not isinstance(topology, dict):
        return UNKNOWN
    parts = []
    for g in topology.get("gpus") or []:
        parts.append(f"{g.get('name')} Gen{g.get('pcie_gen_max')}x{g.get('pcie_width_max')} "
                     f"NVL{g.get('nvlinks_active', 0)}")
    if topology.get("gpu_matrix"):
        parts.append("links " + ",".join(f"{k}x{n}" for k, n in
                                        sorted(gpu_links(topology["gpu_matrix"]).items())))
    parts += [f"{n['name']} {n['kind']} {_rate(n)}"
              for n in (topology.get("rdma") or []) + (topology.get("nics") or [])]
    parts.append(f"NUMA {len(topology.get('numa_nodes') or [])}")
    return "; ".join(parts)


def differ(a: str, b: str) -> bool:
    """Two signatures (or " | "-joined sets of them) that are both known and differ."""
    known = [x for x in (a, b) if x and x != UNKNOWN]
    return len(known) == 2 and a != b


def placement_lines(per_rank: list[dict] | None) -> list[str]:
    """Each worker's CPU affinity and NUMA nodes in words, one line per rank."""
    out = []
    for rank, p in enumerate(per_rank or []):
        if not isinstance(p, dict):
            continue
        gpu = f", GPU {p['gpu']['index']} ({p['gpu'].get('pci_bus_id')})" if p.get("gpu") else ""
        out.append(f"rank {rank} on {p.get('host')}: CPUs {p.get('cpus')}, NUMA "
                   f"{','.join(map(str, p.get('numa_nodes') or [])) or '?'}{gpu}")
    return out
