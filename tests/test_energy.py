"""Energy: the RAPL and NVML readers on recorded inputs, the meter at the window edges, the
record and summary fields, and what a record says where nothing is readable (this machine)."""

from __future__ import annotations

from pathlib import Path

import pytest

from scalebench.hardware import energy
from scalebench.worker import measure
from scalebench.worker.comm import SingleProcessComm

# Recorded from a two-socket Xeon's /sys/class/powercap (values as the kernel prints them).
RAPL = {
    "intel-rapl:0": {"name": "package-0", "energy_uj": "261888567812",
                     "max_energy_range_uj": "262143328850"},
    "intel-rapl:0:0": {"name": "dram", "energy_uj": "47004443232",
                       "max_energy_range_uj": "65712999613"},
    "intel-rapl:1": {"name": "package-1", "energy_uj": "118345087114",
                     "max_energy_range_uj": "262143328850"},
    "intel-rapl:1:0": {"name": "dram", "energy_uj": "30999146398",
                       "max_energy_range_uj": "65712999613"},
    "intel-rapl-mmio:0": {"name": "package-0", "energy_uj": "1", "max_energy_range_uj": "2"},
}


def powercap(root: Path, zones: dict = RAPL) -> Path:
    for zone, files in zones.items():
        (root / zone).mkdir(parents=True)
        for name, text in files.items():
            (root / zone / name).write_text(text + "\n")
    return root


def test_rapl_reads_the_package_zones_only_in_joules(tmp_path):
    counters, why = energy.rapl_counters(powercap(tmp_path))
    assert why is None
    assert [(c.name, c.kind) for c in counters] == [("package-0", "cpu"), ("package-1", "cpu")]
    assert counters[0].read() == pytest.approx(261888.567812)
    assert counters[0].wrap == pytest.approx(262143.32885)
    (tmp_path / "intel-rapl:0" / "energy_uj").write_text("261988567812\n")
    assert counters[0].read() == pytest.approx(261988.567812)


def test_a_counter_that_wrapped_gives_the_energy_across_the_wrap():
    wrap = 262143.32885
    assert energy.delta(262000.0, 1.0, wrap) == pytest.approx(1.0 + wrap - 262000.0)
    assert energy.delta(10.0, 12.5, wrap) == pytest.approx(2.5)


def test_without_powercap_the_reason_is_recorded(tmp_path):
    counters, why = energy.rapl_counters(tmp_path / "absent")
    assert counters == [] and "no RAPL driver" in why
    (tmp_path / "empty").mkdir()
    assert "no RAPL package zone" in energy.rapl_counters(tmp_path / "empty")[1]
    zones = {"intel-rapl:0": {"name": "package-0", "energy_uj": "x"}}
    assert "unreadable" in energy.rapl_counters(powercap(tmp_path / "bad", zones))[1]


@pytest.mark.skipif(Path("/sys/class/powercap").exists(), reason="this machine has RAPL")
def test_this_machine_has_no_powercap_and_the_meter_says_why():
    meter = energy.open_meter("cpu", 0, local_rank=0)
    assert meter.counters == []
    assert meter.unavailable == {"gpu": "a CPU run: no GPU",
                                 "cpu": "no /sys/class/powercap on this machine (no RAPL "
                                        "driver: a VM, or not an x86 host)"}
    meter.start()
    meter.stop()
    assert meter.result()["joules"] == []


class FakeNvml:
    """pynvml's calls as NVML answered them on one H100 (total energy in millijoules)."""

    class NVMLError_NotSupported(Exception):  # noqa: N801 - pynvml's name
        pass

    def __init__(self, readings, supported=True):
        self.readings, self.supported, self.asked = list(readings), supported, []

    def nvmlDeviceGetHandleByUUID(self, uuid):  # noqa: N802 - pynvml's name
        self.asked.append(uuid)
        return "handle-" + uuid

    def nvmlDeviceGetHandleByIndex(self, index):  # noqa: N802
        return f"handle-{index}"

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):  # noqa: N802
        if not self.supported:
            raise self.NVMLError_NotSupported("Not Supported")
        return self.readings.pop(0)


def test_nvml_counter_finds_the_gpu_by_uuid_and_reads_joules():
    nvml = FakeNvml([5_372_180_361, 5_372_180_361, 5_372_830_361])
    counter, why = energy.nvml_counter(nvml, 0, "8e2e6a3e-60f1-1b2c-0c37-5b3fd7cbb2e5")
    assert why is None and counter.kind == "gpu"
    assert nvml.asked == ["GPU-8e2e6a3e-60f1-1b2c-0c37-5b3fd7cbb2e5"]
    before = counter.read()
    assert counter.read() - before == pytest.approx(650.0)  # 650,000 mJ


def test_nvml_counter_says_why_it_cannot_read(monkeypatch):
    counter, why = energy.nvml_counter(FakeNvml([], supported=False), 1, None)
    assert counter is None
    assert why == "NVML total-energy counter of GPU 1: NVMLError_NotSupported: Not Supported"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    counter, why = energy.nvml_counter(FakeNvml([1]), 0, None)
    assert counter is None and "CUDA_VISIBLE_DEVICES" in why


def test_nvml_without_a_driver_says_why():
    nvml, why = energy.load_nvml()
    if nvml is not None:
        pytest.skip("this machine has an NVIDIA driver")
    assert why.startswith(("nvidia-ml-py is not installed", "NVML did not initialise"))


class Ticks:
    """A counter that moves by a known amount per read, and logs when it is read."""

    def __init__(self, log: list, step: float):
        self.log, self.value, self.step = log, 0.0, step

    def __call__(self) -> float:
        self.log.append("energy")
        self.value += self.step
        return self.value


def test_the_meter_reads_at_the_window_edges_never_inside():
    log: list[str] = []
    meter = energy.Meter([energy.Counter("gpu0", "gpu", Ticks(log, 2.0))])

    def clock() -> float:
        log.append("clock")
        return float(len(log))

    def step() -> None:
        log.append("step")

    windows = measure.timed_windows(step, 2, 3, SingleProcessComm(), FakeDevice(), clock, meter)
    assert len(windows.seconds) == 2
    one = ["energy", "clock", "step", "step", "step", "clock", "energy"]
    assert log == one + one
    assert meter.result()["joules"] == [[2.0], [2.0]]


class FakeDevice:
    type = "cpu"


def test_record_fields_add_every_rank_and_component():
    ranks = [{"counters": [{"name": "gpu0", "kind": "gpu"}, {"name": "package-0", "kind": "cpu"}],
              "joules": [[300.0, 100.0], [310.0, 90.0]], "unavailable": {}},
             {"counters": [{"name": "gpu1", "kind": "gpu"}], "joules": [[290.0], [300.0]],
              "unavailable": {}}]
    windows = [[1.0, 1.0], [1.0, 1.0]]
    fields = energy.record_fields(ranks, windows, images_per_window=128)
    assert fields["joules_per_image"] == pytest.approx(1390.0 / 256)
    assert fields["mean_watts_per_worker"] == pytest.approx(1390.0 / 4.0)
    assert fields["energy"]["components"] == {"gpu": 1200.0, "cpu": 190.0}
    assert fields["energy"]["per_rank_joules"] == [800.0, 590.0]
    assert "not MLPerf Power" in fields["energy"]["scope"]


def test_record_fields_without_any_reading_say_why():
    ranks = [{"counters": [], "joules": [],
              "unavailable": {"gpu": "a CPU run: no GPU", "cpu": "no /sys/class/powercap"}}]
    fields = energy.record_fields(ranks, [[1.0]], 8)
    assert fields["joules_per_image"] is None and fields["mean_watts_per_worker"] is None
    assert energy.not_measured_text(fields) == "gpu: a CPU run: no GPU; cpu: no /sys/class/powercap"
    assert energy.not_measured_text({}) == \
        "not recorded (written before scalebench measured energy)"


def test_a_component_missing_on_some_ranks_is_marked_partial():
    ranks = [{"counters": [{"name": "gpu0", "kind": "gpu"}], "joules": [[10.0]],
              "unavailable": {}},
             {"counters": [], "joules": [], "unavailable": {"gpu": "Not Supported"}}]
    fields = energy.record_fields(ranks, [[1.0], [1.0]], 8)
    assert fields["energy"]["partial"] == {"gpu": "Not Supported"}
    row = energy.row_fields([{**fields, "status": "ok"}])
    assert "partial: gpu" in row["energy_measured"]


def test_row_fields_average_launches_and_old_records_still_read():
    launches = [{"joules_per_image": 2.0, "mean_watts_per_worker": 300.0,
                 "energy": {"components": {"gpu": 1.0}}},
                {"joules_per_image": 4.0, "mean_watts_per_worker": 500.0,
                 "energy": {"components": {"gpu": 1.0, "cpu": 1.0}}}]
    row = energy.row_fields(launches)
    assert row["joules_per_image"] == 3.0 and row["images_per_joule"] == pytest.approx(1 / 3)
    assert row["mean_watts_per_worker"] == 400.0 and row["energy_measured"] == "cpu+gpu"
    old = energy.row_fields([{"status": "ok"}])
    assert old["images_per_joule"] is None
    assert old["energy_measured"] == ("not measured: not recorded (written before scalebench "
                                      "measured energy)")


def test_short_gpu_windows_carry_a_note_on_the_counter_resolution():
    ranks = [{"counters": [{"name": "gpu0", "kind": "gpu"}], "joules": [[150.0], [152.0]],
              "unavailable": {}}]
    fields = energy.record_fields(ranks, [[0.5, 0.5]], 64)
    assert "about 20%" in fields["energy"]["note"]
    assert "note" not in energy.record_fields(ranks, [[3.0, 3.0]], 64)["energy"]


def test_summary_csv_and_both_reports_show_images_per_joule_next_to_efficiency(tmp_path):
    import pandas as pd

    from scalebench import report
    from tests.conftest import fake_record

    def measured(world: int, joules: float) -> dict:
        return fake_record(world_size=world, joules_per_image=joules,
                           mean_watts_per_worker=250.0,
                           energy={"scope": energy.SCOPE, "components": {"gpu": 1.0},
                                   "unavailable": {}},
                           worker_placement=[{"host": "gpu1", "cpus": "0-15",
                                              "numa_nodes": [0]}] * world)

    report.write_all([measured(1, 2.0), measured(2, 2.5)], [], tmp_path)
    csv = pd.read_csv(tmp_path / "summary.csv")
    assert list(csv["images_per_joule"]) == [0.5, 0.4]
    assert list(csv["energy_measured"]) == ["gpu", "gpu"]
    md, page = (tmp_path / "report.md").read_text(), (tmp_path / "report.html").read_text()
    for text in (md, page):
        assert "Energy (component energy, not MLPerf Power)" in text
        assert "images per joule" in text and "watts per worker" in text
        assert "Worker rank 0 on gpu1: CPUs 0-15, NUMA 0 (2 runs)" in text
    assert "| ddp | 2 | 0.4 | 2.5 | 250 |" in md


def test_old_records_and_a_cpu_machine_say_why_there_is_no_energy(tmp_path):
    from scalebench import report
    from tests.conftest import fake_record

    report.write_all([fake_record()], [], tmp_path)
    md = (tmp_path / "report.md").read_text()
    assert ("No run here measured energy: not recorded (written before scalebench measured "
            "energy).") in md
    cpu = fake_record(joules_per_image=None, mean_watts_per_worker=None,
                      energy={"scope": energy.SCOPE, "components": {},
                              "unavailable": {"gpu": "a CPU run: no GPU"}})
    report.write_all([cpu], [], tmp_path)
    assert "No run here measured energy: gpu: a CPU run: no GPU." in \
        (tmp_path / "report.md").read_text()
