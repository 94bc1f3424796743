"""Topology: `nvidia-smi topo -m` parsed from recorded outputs, NICs, NUMA and the GPUs' PCIe
links from recorded sysfs trees and NVML answers, this machine's own, and the warnings compare
and history give when two runs' topologies differ."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from scalebench.analysis import compare
from scalebench.hardware import topology
from scalebench.tracking import history

DATA = Path(__file__).parent / "data" / "topology"


def matrix(name: str) -> dict:
    return topology.parse_topo_matrix((DATA / f"{name}.txt").read_text())


def test_dgx1_matrix_in_the_old_format_with_nic_names_as_columns():
    m = matrix("dgx1-v100")
    assert m["devices"][:8] == [f"GPU{i}" for i in range(8)]
    assert m["devices"][8:] == ["mlx5_0", "mlx5_2", "mlx5_1", "mlx5_3"]
    assert m["links"]["GPU0"]["GPU3"] == "NV2" and m["links"]["GPU0"]["GPU5"] == "SOC"
    assert m["links"]["mlx5_0"]["GPU0"] == "PIX"
    assert topology.gpu_links(m) == {"NV1": 8, "NV2": 8, "SOC": 12}  # the hybrid cube mesh
    assert m["affinity"]["GPU4"] == {"CPU Affinity": "20-39,60-79"}
    assert topology.nearest_nic(m)["GPU6"] == "mlx5_3 (PIX)"


def test_dgx_h100_matrix_with_nic_legend_and_numa_columns():
    m = matrix("dgx-h100")
    assert topology.gpu_links(m) == {"NV18": 28}
    assert m["nic_names"] == {"NIC0": "mlx5_0", "NIC1": "mlx5_3", "NIC2": "mlx5_4",
                              "NIC3": "mlx5_5"}
    assert m["affinity"]["GPU5"] == {"CPU Affinity": "56-111,168-223", "NUMA Affinity": "1",
                                     "GPU NUMA ID": "N/A"}
    assert topology.nearest_nic(m)["GPU2"] == "mlx5_3 (PXB)"


def test_one_pcie_gpu_has_no_gpu_pair():
    m = matrix("h100-pcie-single")
    assert topology.gpu_links(m) == {}
    assert m["affinity"]["GPU0"]["CPU Affinity"] == "0-15"
    lines = topology.describe({"gpu_matrix": m, "numa_nodes": [], "nics": []})
    assert "GPU interconnect: one GPU" in lines and "Nearest NIC: GPU0 mlx5_0 (SYS)" in lines


def test_text_without_a_matrix_is_refused():
    with pytest.raises(ValueError, match="no matrix header"):
        topology.parse_topo_matrix("NVIDIA-SMI has failed because it couldn't communicate")


def sysfs(root: Path, tree: dict) -> Path:
    for path, value in tree.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(value, tuple):  # a symlink
            os.symlink(value[0], target)
        else:
            target.write_text(value + "\n")
    return root


def test_nics_from_recorded_sysfs(tmp_path):
    # An InfiniBand HCA, a RoCE port (Ethernet link layer) and two netdevs, one virtual.
    ib = sysfs(tmp_path / "ib", {
        "mlx5_0/ports/1/rate": "400 Gb/sec (4X NDR)", "mlx5_0/ports/1/link_layer": "InfiniBand",
        "mlx5_0/ports/1/state": "4: ACTIVE", "mlx5_0/device/net/ibp24s0/type": "32",
        "mlx5_1/ports/1/rate": "200 Gb/sec (4X HDR)", "mlx5_1/ports/1/link_layer": "Ethernet",
        "mlx5_1/ports/1/state": "1: DOWN"})
    (tmp_path / "dev").mkdir()
    (tmp_path / "drivers" / "mlx5_core").mkdir(parents=True)
    net = sysfs(tmp_path / "net", {
        "ens1f0/type": "1", "ens1f0/speed": "100000", "ens1f0/operstate": "up",
        "ens1f0/device": (str(tmp_path / "dev"),),
        "docker0/type": "1", "docker0/speed": "-1", "docker0/operstate": "down"})
    os.symlink(tmp_path / "drivers" / "mlx5_core", tmp_path / "dev" / "driver")
    rdma = topology.infiniband_devices(ib)
    assert rdma == [{"name": "mlx5_0", "port": 1, "kind": "InfiniBand",
                     "rate": "400 Gb/sec (4X NDR)", "state": "ACTIVE", "netdev": ["ibp24s0"]},
                    {"name": "mlx5_1", "port": 1, "kind": "RoCE", "rate": "200 Gb/sec (4X HDR)",
                     "state": "DOWN", "netdev": []}]
    nics = topology.net_interfaces(net)
    assert nics == [{"name": "ens1f0", "kind": "Ethernet", "speed_mbps": 100000, "state": "up",
                     "driver": "mlx5_core"}]
    lines = topology.describe({"rdma": rdma, "nics": nics, "numa_nodes": []})
    assert lines[0] == ("NICs: mlx5_0 InfiniBand 400 Gb/s (4X NDR) (ACTIVE); mlx5_1 RoCE "
                        "200 Gb/s (4X HDR) (DOWN); ens1f0 Ethernet 100 Gb/s (up)")


def test_numa_nodes_and_cpu_lists(tmp_path):
    root = sysfs(tmp_path, {"node0/cpulist": "0-55,112-167", "node1/cpulist": "56-111,168-223",
                            "node10/cpulist": ""})
    assert [n["node"] for n in topology.numa_nodes(root)] == [0, 1, 10]
    assert topology.expand_cpus("0-3,8,10-11") == [0, 1, 2, 3, 8, 10, 11]
    assert topology.compress_cpus([11, 0, 1, 2, 3, 8, 10]) == "0-3,8,10-11"
    assert topology.expand_cpus("") == []


class Pci:
    busId = b"00000000:18:00.0"  # noqa: N815 - NVML's field


class FakeNvml:
    """NVML's answers on a one-GPU H100 PCIe machine (no NVLink: NotSupported per link)."""

    NVML_NVLINK_MAX_LINKS = 18

    def nvmlDeviceGetCount(self):  # noqa: N802 - pynvml's names
        return 1

    def nvmlDeviceGetHandleByIndex(self, i):  # noqa: N802
        return i

    def nvmlDeviceGetPciInfo(self, h):  # noqa: N802
        return Pci()

    def nvmlDeviceGetName(self, h):  # noqa: N802
        return b"NVIDIA H100 PCIe"

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h):  # noqa: N802
        return 1  # idle: the link trains down

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h):  # noqa: N802
        return 5

    def nvmlDeviceGetCurrPcieLinkWidth(self, h):  # noqa: N802
        return 16

    def nvmlDeviceGetMaxPcieLinkWidth(self, h):  # noqa: N802
        return 16

    def nvmlDeviceGetNvLinkState(self, h, link):  # noqa: N802
        raise RuntimeError("Not Supported")


def test_gpus_from_nvml_and_the_signature_ignores_the_idle_link():
    gpus = topology.nvml_gpus(FakeNvml())
    assert gpus == [{"index": 0, "name": "NVIDIA H100 PCIe", "pci_bus_id": "00000000:18:00.0",
                     "pcie_gen": 1, "pcie_gen_max": 5, "pcie_width": 16, "pcie_width_max": 16,
                     "nvlinks_active": 0}]
    busy = [{**gpus[0], "pcie_gen": 5}]
    assert topology.signature({"gpus": gpus}) == topology.signature({"gpus": busy})
    assert "PCIe Gen5 x16 max, Gen1 x16 now" in topology.describe({"gpus": gpus})[0]


def test_this_machine_has_numa_and_nics_and_says_why_it_has_no_gpu_matrix():
    here = topology.collect()
    assert here["numa_nodes"] and all(topology.expand_cpus(n["cpus"]) for n in here["numa_nodes"])
    if not here.get("gpu_matrix"):
        assert here["unavailable"]["gpu_matrix"]
    placement = topology.worker_placement(None)
    assert set(topology.expand_cpus(placement["cpus"])) == os.sched_getaffinity(0)
    assert placement["numa_nodes"]


def record(topo: dict | None) -> dict:
    env = {} if topo is None else {"topology": topo}
    return {"kind": "train", "status": "ok", "env": env}


def test_compare_warns_when_the_topology_differs_and_not_for_old_records():
    nvlink = {"gpu_matrix": matrix("dgx-h100"), "numa_nodes": [{"node": 0, "cpus": "0-1"}]}
    pcie = {"gpu_matrix": matrix("h100-pcie-single"), "numa_nodes": [{"node": 0, "cpus": "0-1"}]}
    [warning] = compare.topology_warnings([record(nvlink)], [record(pcie)])
    assert warning.startswith("topology differs: baseline ") and "NV18x28" in warning
    assert compare.topology_warnings([record(nvlink)], [record(nvlink)]) == []
    assert compare.topology_warnings([record(None)], [record(pcie)]) == []


def test_history_notes_a_point_on_another_topology():
    one = {"numa_nodes": [{"node": 0, "cpus": "0-1"}], "nics": []}
    two = {**one, "nics": [{"name": "ib0", "kind": "InfiniBand", "rate": "400 Gb/sec"}]}
    rows = []
    for day, topo in ((1, one), (2, one), (3, two)):
        rows.append({"history_version": 1, "status": "ok", "framework": "ddp",
                     "model": "resnet101", "world_size": 1, "nodes": 1, "batch_size": 4,
                     "global_batch": 4, "image_size": 64, "precision": "fp32", "device": "cpu",
                     "scaling": "weak", "data": "synthetic", "step_options": "{}",
                     "timestamp": f"2026-12-0{day}T10:00:00+0000", "commit": f"c{day}",
                     "sweep_id": f"s{day}", "trial_images_per_sec": [10.0, 10.1, 9.9],
                     "env": {"topology": topo}})
    [points] = history.trends(rows, "throughput")[history.panel_key(rows[0])].values()
    assert [bool(p.topology_note) for p in points] == [False, False, True]
    assert "ib0 InfiniBand 400 Gb/s" in points[2].notes[0]


def test_the_report_environment_shows_the_topology_in_words(tmp_path):
    from scalebench import report
    from tests.conftest import fake_record

    topo = {"gpu_matrix": matrix("dgx-h100"), "numa_nodes": [{"node": 0, "cpus": "0-55"}],
            "nics": [], "rdma": [{"name": "mlx5_0", "kind": "InfiniBand",
                                  "rate": "400 Gb/sec (4X NDR)", "state": "ACTIVE"}]}
    report.write_all([fake_record(env={"topology": topo})], [], tmp_path)
    md = (tmp_path / "report.md").read_text()
    assert "GPU interconnect: NV18 between 28 pairs" in md
    assert "NICs: mlx5_0 InfiniBand 400 Gb/s (4X NDR) (ACTIVE)" in md
    assert "'links'" not in md  # not the raw dict


def test_history_detect_notes_a_change_across_which_the_topology_changed():
    from scalebench.tracking import history_changes

    one = {"numa_nodes": [{"node": 0, "cpus": "0-1"}], "nics": []}
    two = {**one, "nics": [{"name": "ib0", "kind": "InfiniBand", "rate": "400 Gb/sec"}]}
    rows = []
    for day in range(1, 11):
        level, topo = (10.0, one) if day <= 5 else (7.0, two)
        rows.append({"history_version": 1, "status": "ok", "framework": "ddp",
                     "model": "resnet101", "world_size": 1, "nodes": 1, "batch_size": 4,
                     "global_batch": 4, "image_size": 64, "precision": "fp32", "device": "cpu",
                     "scaling": "weak", "data": "synthetic", "step_options": "{}",
                     "timestamp": f"2026-12-{day:02d}T10:00:00+0000", "commit": f"c{day}",
                     "sweep_id": f"s{day}",
                     "trial_images_per_sec": [level * (1 + d) for d in (0.0, 0.01, -0.01)],
                     "env": {"topology": topo}})
    changes = history_changes.find(rows, metrics=("throughput",))
    [change] = changes.changes
    assert "ib0 InfiniBand 400 Gb/s" in change.topology_note
    assert "note: throughput of" in history_changes.render_text(changes)
    assert change.topology_note in history_changes.render_markdown(changes)
