"""Disturbance: the NVML readers on recorded values (a fake pynvml module object: every clock
event reason bit, no GPU, a GPU that refuses the queries), the judgement's words, the CPU
readers for real (a CPU-burning child of this test, named), and where the cause is shown
(report flag, summary columns, compare, history detect, sweep --strict, scalebench env)."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from scalebench.analysis import aggregate, compare, disturbance
from scalebench.hardware import cpu_load, gpu_state, stability
from scalebench.hardware import disturbance as watch
from scalebench.records import results
from tests.conftest import fake_record

# ---------------------------------------------------------------- NVML, recorded values


class NVMLError(Exception):
    pass


def fake_nvml(masks=(0x4, 0x4), sm=1410, refuse=(), procs=()):
    """A pynvml stand-in returning recorded values; names in refuse raise as NVML does."""
    masks = list(masks)

    def call(name, value):
        def f(*args):
            if name in refuse:
                raise NVMLError(f"{name}: Not Supported")
            return value() if callable(value) else value
        return f

    return SimpleNamespace(
        nvmlDeviceGetCurrentClocksEventReasons=call("reasons", lambda: masks.pop(0)),
        nvmlDeviceGetClockInfo=call("clock", sm),
        nvmlDeviceGetMaxClockInfo=call("max_clock", 1980),
        nvmlDeviceGetTemperature=call("temperature", 83),
        nvmlDeviceGetPowerUsage=call("power", 698_000),
        nvmlDeviceGetEnforcedPowerLimit=call("limit", 700_000),
        nvmlDeviceGetComputeRunningProcesses=call("procs", [SimpleNamespace(pid=p)
                                                           for p in procs]),
        nvmlDeviceGetIndex=call("index", 2),
        nvmlDeviceGetCount=call("count", 1),
        nvmlDeviceGetHandleByIndex=call("handle", "h0"),
        nvmlDeviceGetPersistenceMode=call("persistence", 0),
        nvmlDeviceGetApplicationsClock=call("app", 1410),
        nvmlDeviceGetDefaultApplicationsClock=call("default_app", 1980),
        nvmlDeviceGetPowerManagementLimit=call("pm_limit", 300_000),
        nvmlDeviceGetPowerManagementDefaultLimit=call("pm_default", 700_000))


def test_waiting_for_a_quiet_machine_reads_one_window_at_least_and_stops_at_the_limit():
    """cpu_load.wait_until_quiet: a threshold nothing meets waits out its limit (whole windows),
    one everything meets returns after the first window; the busy fraction is a fraction."""
    busy, waited = cpu_load.wait_until_quiet(0.15, busy_below=-1.0, window=0.05)
    assert 0.0 <= busy <= 1.0 and waited >= 0.15
    busy, waited = cpu_load.wait_until_quiet(60.0, busy_below=2.0, window=0.05)
    assert 0.0 <= busy <= 1.0 and 0.05 <= waited < 1.0


def test_every_clock_event_reason_bit_is_named():
    names = {bit: gpu_state.reason_names(bit) for bit in gpu_state.REASONS}
    assert names == {0x1: ["gpu_idle"], 0x2: ["applications_clocks_setting"],
                     0x4: ["sw_power_cap"], 0x8: ["hw_slowdown"], 0x10: ["sync_boost"],
                     0x20: ["sw_thermal_slowdown"], 0x40: ["hw_thermal_slowdown"],
                     0x80: ["hw_power_brake_slowdown"], 0x100: ["display_clock_setting"]}
    assert gpu_state.reason_names(0x1FF) == [n for [n] in names.values()]
    assert gpu_state.reason_names(0x4 | 0x400) == ["sw_power_cap", "bit 0x400"]
    # idle, application clocks and display clock are states or settings, not a disturbance
    assert gpu_state.disturbing_names(0x1 | 0x2 | 0x100) == []
    assert gpu_state.disturbing_names(0x1FF) == ["sw_power_cap", "hw_slowdown", "sync_boost",
                                                "sw_thermal_slowdown", "hw_thermal_slowdown",
                                                "hw_power_brake_slowdown"]


def gpu_windows(nvml, masks_per_window, own=lambda pids: set()):
    state = gpu_state.open_state(nvml, "h0", own)
    for _ in masks_per_window:
        state.start()
        state.stop()
    return state.result()


def test_a_throttled_gpu_in_words_and_figures():
    # 5 windows, the power cap active at an edge of 4 (two readings a window)
    masks = [0x1, 0x4, 0x1, 0x4, 0x1, 0x4, 0x4, 0x4, 0x1, 0x1]
    result = gpu_windows(fake_nvml(masks), range(5))
    assert [w["reasons"] for w in result["windows"]] == [5, 5, 5, 4, 1]
    fields = disturbance.record_fields([{"host": "n1", "cpu": None, "gpu": result}], 5)
    d = fields["disturbance"]
    assert d["disturbed"] and d["windows"] == [True, True, True, True, False]
    assert d["causes"] == ["GPU 2 throttled by the software power cap in 4 of 5 windows, SM "
                           "clock 1,410 of 1,980 MHz (83 °C, 698 of 700 W)"]


def test_another_process_on_the_gpu():
    mine = os.getpid()
    result = gpu_windows(fake_nvml([0x1] * 4, procs=(mine, 4242)), range(2),
                         own=lambda pids: {mine})
    assert [w["others"] for w in result["windows"]] == [[4242], [4242]]
    d = disturbance.record_fields([{"host": "n1", "gpu": result}], 2)["disturbance"]
    assert d["causes"] == ["another process used GPU 2 in all 2 windows"]


def test_a_gpu_that_refuses_every_query_is_said_never_raised():
    refuse = ("reasons", "clock", "max_clock", "temperature", "power", "limit", "procs", "index")
    result = gpu_windows(fake_nvml(refuse=refuse), range(2))
    assert result["windows"] == [{"reasons": None, "sm_mhz": None, "temp_c": None,
                                  "power_w": None, "others": None}] * 2
    assert set(result["refused"]) == {"clock event reasons", "SM clock", "temperature", "power",
                                      "compute processes", "maximum SM clock", "power limit"}
    assert "Not Supported" in result["refused"]["SM clock"]
    d = disturbance.record_fields([{"host": "n1", "gpu": result}], 2)["disturbance"]
    assert not d["disturbed"] and d["gpus"][0]["refused"] == result["refused"]


def test_no_gpu_no_nvml(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # nvidia-ml-py not installed
    gpu, why = watch.open_gpu(0)
    assert gpu is None and "nvidia-ml-py is not installed" in why
    w = watch.open_watcher("cuda", 0, local_rank=1)
    assert w.gpu is None and "nvidia-ml-py" in w.result()["unavailable"]["gpu"]
    found = stability.collect(nvml=None, why_no_nvml=why)
    assert found["missing"]["gpu"].startswith("GPU settings not read: nvidia-ml-py")


def test_unstable_gpu_and_cpu_settings(tmp_path):
    for cpu, gov in ((0, "powersave"), (1, "performance")):
        (tmp_path / f"cpu{cpu}" / "cpufreq").mkdir(parents=True)
        (tmp_path / f"cpu{cpu}" / "cpufreq" / "scaling_governor").write_text(gov + "\n")
    (tmp_path / "intel_pstate").mkdir()
    (tmp_path / "intel_pstate" / "no_turbo").write_text("0\n")
    found = stability.collect(tmp_path, fake_nvml([0x4]))
    assert found["settings"]["cpu_governor"] == {"performance": 1, "powersave": 1}
    assert found["settings"]["gpu0"]["persistence_mode"] == "off"
    text = "\n".join(stability.lines(found))
    for words in ("governor powersave on 1 CPU", "turbo/boost is on", "persistence mode off",
                  "application SM clock set to 1,410 MHz (default 1,980 MHz)",
                  "power limit 300 W, below its default 700 W", "the software power cap"):
        assert words in text
    assert "{" not in text and "}" not in text  # the GPU check cuts env's JSON by its braces
    refused = stability.collect(tmp_path / "none", fake_nvml(refuse=("persistence", "app")))
    assert "gpu0 persistence_mode" in refused["missing"] and "cpu_governor" in refused["missing"]


# ---------------------------------------------------------------- the CPU readers, for real

HOG = ("import ctypes, time\n"
       "ctypes.CDLL(None).prctl(15, b'sbtesthog', 0, 0, 0)\n"  # PR_SET_NAME: its comm
       "end = time.time() + 30\n"
       "while time.time() < end: pass\n")


def busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_a_cpu_hog_beside_the_windows_is_named():
    ctypes.CDLL(None)  # the hog names itself through libc's prctl (Linux)
    hog = subprocess.Popen([sys.executable, "-c", HOG])
    try:
        time.sleep(0.3)
        # the test's own process is the benchmark here; the hog is a child but not its own
        own = cpu_load.OwnProcesses({os.getpid()}, None)
        own._known[(hog.pid, cpu_load.processes()[hog.pid].start)] = False
        node = watch.NodeCpu(own, cpu_load.cpu_count())
        w = watch.Watcher(node, None)
        for _ in range(3):
            w.start()
            busy(0.4)
            w.stop()
    finally:
        hog.kill()
        hog.wait()
    result = w.result()
    windows = result["cpu"]["windows"]
    assert all(win["own"] > 0 for win in windows)  # this process's busy loop
    d = disturbance.record_fields([result], 3)["disturbance"]
    assert d["disturbed"], d
    assert any(name == "sbtesthog" for name, _ in d["nodes"][0]["top"])
    assert "other process" in d["causes"][0] and "sbtesthog" in " ".join(
        name for name, _ in d["nodes"][0]["top"][:3])
    assert max(result["edge_seconds"]) < 0.5  # the readings' cost, kept per window


def test_the_benchmarks_own_tree_is_not_another_process():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
    try:
        procs = cpu_load.processes()
        assert child.pid in cpu_load.OwnProcesses({os.getpid()}, None).of(procs)
        assert child.pid not in cpu_load.OwnProcesses({1}, None).of({child.pid: procs[child.pid]})
    finally:
        child.kill()
        child.wait()


def test_proc_stat_lines():
    times = cpu_load.parse_stat("cpu  10 1 5 100 4 1 2 7 0 0\ncpu0 1 1 1 1 1 1 1 1\n")
    assert times == cpu_load.NodeTimes(busy=19, idle=104, steal=7, total=130)
    p = cpu_load.parse_pid_stat(b"42 (cc1 (plus)) R 7 1 1 0 -1 0 0 0 0 0 300 20 0 0 20 0 1 0 "
                                b"555 0 0")
    assert (p.pid, p.ppid, p.name, p.ticks, p.start) == (42, 7, "cc1 (plus)", 320, 555)


# ---------------------------------------------------------------- the judgement's words

def cpu_result(windows: int, other: int, steal: int = 0) -> dict:
    return {"host": "n1", "edge_seconds": [0.002] * windows, "cpu": {
        "cpus": 2, "windows": [{"total": 200, "busy": 190, "steal": steal, "own": 100,
                                "other": other, "other_processes": 3,
                                "top": [["cc1plus", int(other * 0.82), 2], ["as", 5, 1]]}
                               for _ in range(windows)]}}


def test_cpu_causes_and_thresholds():
    d = disturbance.record_fields([cpu_result(5, 76)], 5)["disturbance"]
    assert d["causes"] == ["38% of the node's CPU time during the windows went to 3 other "
                           "processes (top: cc1plus 31%) in all 5 windows"]
    assert d["edge_seconds_max"] == 0.002
    # 0.2 of a CPU is the line: 19 of 200 ticks on 2 CPUs is 0.19 of one
    assert not disturbance.record_fields([cpu_result(2, 19)], 2)["disturbance"]["disturbed"]
    assert disturbance.record_fields([cpu_result(2, 20)], 2)["disturbance"]["disturbed"]
    stolen = disturbance.record_fields([cpu_result(2, 0, steal=40)], 2)["disturbance"]
    assert stolen["causes"] == ["20% of the node's CPU time during the windows was stolen by "
                                "the hypervisor (steal time) in all 2 windows"]
    old = disturbance.record_fields(None, 3)["disturbance"]
    assert not old["disturbed"] and "no disturbance readings" in old["unavailable"]["all"]


# ---------------------------------------------------------------- where it is shown

def disturbed(record: dict, cause: str = "38% of the node's CPU time during the windows went to "
              "3 other processes (top: cc1plus 31%)") -> dict:
    record["disturbance"] = {"disturbed": True, "causes": [cause],
                             "windows": [True] * record["trials"]}
    results.validate(record)
    return record


def test_version_one_records_still_read():
    r = fake_record(schema_version=1)
    results.validate(r)
    assert disturbance.record_text(r) is None
    assert disturbance.row_fields([r]) == {"disturbed": None,
                                           "disturbance": disturbance.NOT_RECORDED}


def test_report_flag_and_summary_columns():
    from scalebench.report import model

    one = disturbed(fake_record((10.0, 10.1, 9.9)))
    two = fake_record((19.0, 19.2, 18.8), world_size=2, disturbance={"disturbed": False})
    rows = model.build([one, two], []).rows
    by_workers = {r["world_size"]: r for r in rows}
    kinds = {r["world_size"]: [f for f in model.flags(r) if f[0] == "disturbed"] for r in rows}
    assert kinds[1][0][1].startswith("disturbed: 38% of the node's CPU time")
    assert kinds[2][0][1].startswith("baseline disturbed: 38%")
    assert by_workers[2]["disturbed"] is False
    csv = aggregate.csv_rows(rows)
    assert set(disturbance.COLUMNS) <= set(csv[0])
    assert csv[1]["baseline_disturbance"].startswith("38% of the node's CPU time")


def test_compare_names_the_disturbed_side_and_what_only_it_shows():
    base = [fake_record((10.0, 10.1, 9.9, 10.05, 9.95))]
    slow = disturbed(fake_record((6.0, 6.1, 5.9, 6.05, 5.95)))
    c = compare.compare(base, [slow], metrics=["throughput"])
    v = c.verdicts[0]
    assert v.verdict == "regression"
    assert v.reason.startswith("only disturbed samples show this regression: the current side "
                               "has no undisturbed launch")
    assert any(n.startswith("current disturbed: 38%") for n in v.notes)
    # a regression the undisturbed launches show as well is not said to be disturbed
    quiet = [dict(fake_record((6.0, 6.1, 5.9), repeat=k, repeats=3), run_id=f"r{k}")
             for k in (1, 2)]
    both = quiet + [disturbed(fake_record((5.0, 5.1, 4.9), repeat=3, repeats=3))]
    base3 = [fake_record((10.0, 10.1, 9.9), repeat=k, repeats=3) for k in (1, 2, 3)]
    v = compare.compare(base3, both, metrics=["throughput"]).verdicts[0]
    assert v.verdict == "regression" and not v.reason.startswith("only disturbed")
    assert any("1 of 3 launches disturbed" in n for n in v.notes)


def test_history_detect_marks_a_change_only_disturbed_points_show():
    from scalebench.tracking import history, history_changes

    records = []
    for i in range(10):
        r = fake_record(tuple(x * (0.6 if i >= 6 else 1.0) for x in (10.0, 10.1, 9.9)),
                        timestamp=f"2026-01-{i + 1:02d}T00:00:00+0000", sweep_id=f"s{i}",
                        env={"git_commit": f"c{i:02d}"})
        records.append(disturbed(r) if i >= 6 else r)
    rows = [row for r in records for row in history.rows_from_records([r])]
    found = history_changes.find(rows, metrics=["throughput"])
    change = found.changes[0]
    assert change.only_disturbed and change.disturbed_note.startswith(
        "only disturbed points show this regression: 4 of 4 points after disturbed (s6: 38%")
    text = history_changes.render_text(found)
    assert "(only disturbed points)" in text and "note: throughput of" in text


def test_strict_reruns_a_disturbed_run_once():
    from scalebench.running import executor

    runner = executor._Runner(None, {}, None, SimpleNamespace(note=lambda text: None, total=1),
                              None, "sweep", strict=True)
    ran = []
    runner.run_alone = lambda job: ran.append(job)
    job = SimpleNamespace(run_id="001-ddp", group=None)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(executor.dataclasses, "replace",
                   lambda j, **kw: SimpleNamespace(**{**vars(j), **kw}))
        runner.rerun_disturbed([job], [disturbed(fake_record(run_id="001-ddp"))])
        runner.rerun_disturbed([job], [fake_record(run_id="001-ddp")])  # quiet: not again
        again = disturbed(fake_record(run_id="001-ddp-again"), "x")
        again["rerun_of"] = "001-ddp"
        runner.rerun_disturbed([SimpleNamespace(run_id="001-ddp-again", group=None)], [again])
    assert [j.run_id for j in ran] == ["001-ddp-again"]
    assert runner.reruns == {"001-ddp-again": "001-ddp"}
