"""The GPU check's two scripts on this machine: a bundle made by scripts/gpu-bundle.sh (for this
Python) installs offline into a fresh private environment that imports scalebench, and
`gpu-check.sh --device cpu` runs every step end to end under a small budget and writes the
check's files. Both need the package index once, to make the bundle (pip's cache serves later
runs); without it they skip, saying so."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
VERSION = f"{sys.version_info[0]}.{sys.version_info[1]}"
NO_NETWORK = {"https_proxy": "http://127.0.0.1:9", "http_proxy": "http://127.0.0.1:9",
              "HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9"}


def session_folder(name: str, tmp_path_factory) -> Path:
    """A folder in the suite's cache (scripts/test.sh keeps one for both of its parts), so that
    the serial part's check finds what the parallel part made; else in this run's temp."""
    cache = os.environ.get("SCALEBENCH_TEST_CACHE")
    if not cache:
        return tmp_path_factory.mktemp(name)
    folder = Path(cache) / name
    folder.mkdir(exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    folder = session_folder("gpu-bundle", tmp_path_factory)
    made = folder / ".made"  # a whole bundle, checked below, by an earlier part of the suite
    if made.is_file():
        return folder
    done = subprocess.run(["bash", "scripts/gpu-bundle.sh", str(folder), "--python-version",
                           VERSION, "--no-ray"], cwd=REPO, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PIP": f"{sys.executable} -m pip"})
    if done.returncode != 0 and ("Could not find" in done.stderr or "connection" in
                                 done.stderr.lower() or "resolve" in done.stderr.lower()):
        pytest.skip(f"the package index is not reachable: {done.stderr.strip()[-300:]}")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "MiB" in done.stdout and "Ray: not requested" in done.stdout
    made.write_text(done.stdout)
    return folder


@pytest.fixture(scope="module")
def shared_work(tmp_path_factory) -> Path:
    """One private environment for the install-only test and the check after it, as on a GPU
    visit: the check then finds the bundle's wheels installed (gpu-check.sh's stamp)."""
    return session_folder("gpu-check-shared", tmp_path_factory)


def check_env(tmp_path: Path) -> dict:
    return {**os.environ, **NO_NETWORK, "PYTHON": sys.executable,
            "SCALEBENCH_CHECK_WORK": str(tmp_path / "work"), "PYTHONPATH": str(REPO)}


@pytest.mark.slow
def test_the_bundle_installs_offline_and_scalebench_imports(bundle, shared_work):
    wheels = sorted(p.name.split("-")[0].lower() for p in (bundle / "wheels").glob("*.whl"))
    assert {"ruptures", "nvidia_ml_py", "pip", "setuptools", "psutil"} <= set(wheels)
    assert (bundle / "horovod-0.28.1.tar.gz").is_file()
    manifest = (bundle / "manifest.txt").read_text()
    assert f"python={VERSION}" in manifest
    done = subprocess.run(["bash", "scripts/gpu-check.sh", str(bundle), "--install-only",
                           "--horovod-box", "0"], cwd=REPO, capture_output=True, text=True,
                          timeout=300, env=check_env(shared_work))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Horovod: not built: --horovod-box 0" in done.stdout
    private = shared_work / "work" / f"env-py{VERSION}" / "bin" / "python"
    probe = subprocess.run([str(private), "-c", "import json, pynvml, ruptures, scalebench, torch;"
                            "print(json.dumps([pynvml.__file__, ruptures.__file__, "
                            "scalebench.__file__, torch.__file__]))"],
                           capture_output=True, text=True, timeout=120,
                           env={**os.environ, "PYTHONPATH": str(REPO)})
    assert probe.returncode == 0, probe.stderr
    nvml, rupt, ours, torch_file = json.loads(probe.stdout)
    private_site = str(shared_work / "work")
    assert nvml.startswith(private_site) and rupt.startswith(private_site)  # the bundle's
    assert ours.startswith(str(REPO))
    assert not torch_file.startswith(private_site)  # the machine's torch, never replaced


def test_bad_arguments_are_one_line_and_exit_2(tmp_path):
    for argv, field in ((["nowhere", str(tmp_path)], "BUNDLE"),
                        ([str(tmp_path), str(tmp_path)], "BUNDLE")):
        done = subprocess.run(["bash", "scripts/gpu-check.sh", *argv], cwd=REPO,
                              capture_output=True, text=True, timeout=30)
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
        assert field in done.stderr
    (tmp_path / "wheels").mkdir()
    done = subprocess.run(["bash", "scripts/gpu-check.sh", str(tmp_path), str(tmp_path / "o"),
                           "--device", "tpu"], cwd=REPO, capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 2 and "--device: cuda or cpu, not 'tpu'" in done.stderr
    if shutil.which("nvidia-smi") is None:
        done = subprocess.run(["bash", "scripts/gpu-check.sh", str(tmp_path), str(tmp_path / "o")],
                              cwd=REPO, capture_output=True, text=True, timeout=30)
        assert done.returncode == 2 and "--device cuda: nvidia-smi lists no GPU" in done.stderr
    done = subprocess.run(["bash", "scripts/gpu-bundle.sh", str(tmp_path), "--limit-mib", "x"],
                          cwd=REPO, capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and "--limit-mib" in done.stderr


@pytest.mark.slow
@pytest.mark.serial  # its budget is wall time: other tests on the same cores would eat it
def test_gpu_check_on_the_cpu_runs_every_step_and_writes_the_files(bundle, shared_work, tmp_path):
    # 75 s: the DDP step (its estimate 28 s, 17-23 s run) must start and finish however slow
    # the hour. In a slow hour the install and the environment step took 29 s (10-11 s in a
    # normal one), which at 75 s still leaves the step 31 s (15 s are kept for the report); in
    # the suite the install is the parallel part's (the stamp), and the environment step alone
    # takes 2-3 s. The later steps run or are skipped with the reason as the time left allows.
    # Run beside the other tests instead, with 120 s, its DDP step (17 s alone) was stopped at
    # the deadline after 74 s (AMD EPYC, 2 cores): it stays in the serial part.
    budget = 75
    out = tmp_path / "out"
    stamp = shared_work / "work" / f"env-py{VERSION}" / ".bundle-wheels"
    installed_before = stamp.is_file()  # by the install-only test, where it ran first
    start = time.monotonic()
    done = subprocess.run(["bash", "scripts/gpu-check.sh", str(bundle), str(out), "--device",
                           "cpu", "--budget", str(budget), "--horovod-box", "0"], cwd=REPO,
                          capture_output=True, text=True, timeout=400,
                          env={**check_env(shared_work), "SCALEBENCH_PEAK_SECONDS": "0.1"})
    seconds = time.monotonic() - start
    build_log = (out / "build.log").read_text()
    # the same bundle's wheels are not installed twice; a first install leaves the stamp
    assert ("the bundle's wheels are already installed" in build_log) == installed_before
    assert stamp.is_file()
    text = (out / "summary.md").read_text()
    statuses = [line.split(" | ")[1] for line in text.split("## Steps")[1].split("\n\n")[1]
                .splitlines()[2:] if line.startswith("| ")]
    # the exit status says what the table says: 1 a step failed, 4 one skipped for time, 0 all ok
    want = 1 if "failed" in statuses else 4 if "skipped" in statuses else 0
    assert done.returncode == want, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"Exit status {want}:" in text
    files = sorted(p.name for p in out.iterdir())
    assert len(files) <= 8 and {"summary.md", "results.jsonl", "env.json", "check.log",
                                "build.log"} <= set(files), files
    text = (out / "summary.md").read_text()
    assert text.startswith("# scalebench GPU check") and "## Steps" in text
    assert "| environment and topology | ok |" in text
    assert "| ddp fp32 and bf16 | ok |" in text, text
    assert "Horovod: not built: --horovod-box 0" in text
    if not Path("/sys/class/powercap").exists():
        assert "Energy not measured: gpu: a CPU run: no GPU; cpu: no /sys/class/powercap" in text
    assert "NUMA: " in text and "NICs: " in text
    # the budget held: every step either ran or was skipped with the reason
    assert seconds < budget + 30, seconds  # the budget, the report past its deadline
    for line in text.splitlines():
        if line.startswith("| ") and "| skipped |" in line:
            assert "s left" in line or "not" in line
    records = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    train = [r for r in records if r.get("kind") == "train" and r["status"] == "ok"]
    assert {r["model"] for r in train} == {"resnet101"}  # one model on a CPU
    from scalebench.hardware.envinfo import cpu_cores

    for r in train:  # the default thread policy in a real run (no --threads-per-worker here)
        assert r["threads_per_worker"] == max(1, cpu_cores() // r["world_size"])
        assert r["threads_measured"] == [r["threads_per_worker"]] * r["world_size"]
    for r in train:  # a CPU sweep's records carry topology and say why energy is not measured
        topo = r["env"]["topology"]
        assert topo["numa_nodes"] and "nics" in topo
        assert r["worker_placement"][0]["cpus"]
        if r["joules_per_image"] is None:
            assert r["energy"]["unavailable"]["gpu"] == "a CPU run: no GPU"
    print(f"gpu-check --device cpu: {seconds:.0f} s")


def load_check_script():
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_check", REPO / "scripts" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_summary_of_a_gpu_check_reads_alone(tmp_path):
    """summary.md from the records a one-H100 check would leave (recorded shapes, no GPU)."""
    from scalebench.hardware import topology
    from tests.conftest import fake_record

    gc = load_check_script()
    out, bundle = tmp_path / "out", tmp_path / "bundle"
    out.mkdir()
    bundle.mkdir()
    (bundle / "manifest.txt").write_text("python=3.12\nray=not included: Ray 2.60.0's wheels "
                                         "are 130 MiB, the folder would be 139 MiB (limit 60)\n")
    topo = {"gpu_matrix": topology.parse_topo_matrix(
        (REPO / "tests/data/topology/h100-pcie-single.txt").read_text()),
        "numa_nodes": [{"node": 0, "cpus": "0-15"}], "nics": [], "rdma": []}
    env = {"accelerator_model": "NVIDIA H100 80GB HBM3", "hostname": "gpu1", "torch": "2.11.0",
           "cuda": "13.0", "nccl": "2.27.7", "python": "3.12.3", "topology": topo}
    (out / "env.json").write_text(json.dumps(env))
    run = fake_record(model="resnet101", device="cuda", precision="bf16", image_size=224,
                      tf32="on", math={"cudnn_allow_tf32": True, "matmul_precision": "high"},
                      mfu=0.31, mfu_datasheet=0.27, peak_flops=8.6e14,
                      peak_method="GEMM probe", datasheet_peak_flops=9.895e14,
                      joules_per_image=0.42, mean_watts_per_worker=610.0,
                      energy={"components": {"gpu": 1.0}})
    vet_record = {"kind": "vet", "status": "ok", "units": [
        {"node": "gpu1", "device_index": 0, "device_name": "NVIDIA H100 80GB HBM3",
         "compute_images_per_sec": [1450.0, 1460.0, 1440.0],
         "matmul_flops_per_sec": [6.1e14, 6.2e14, 6.0e14]}]}
    check = gc.Check(out, tmp_path / "work", "cuda", time.time() + 100, out / "check.log")
    check.steps = [gc.StepResult("environment and topology", "ok", 4.0),
                   gc.StepResult("horovod fp16", "skipped", 0.0, "about 80 s needed, 12 s left")]
    text = gc.summary(check, [run, vet_record], time.time() - 300, bundle,
                      "skipped: the build did not finish within its time box of 144 s")
    assert text.startswith("# scalebench GPU check: NVIDIA H100 80GB HBM3")
    assert "| horovod fp16 | skipped | 0 | about 80 s needed, 12 s left |" in text
    assert "Horovod: skipped: the build did not finish within its time box of 144 s" in text
    assert "Ray: not checked, not included: Ray 2.60.0's wheels are 130 MiB" in text
    assert ("| resnet101 | 224 | ddp | bf16 (tf32 on) | TF32 | 10.0 | 31.0% | 27.0% | 0.42 | "
            "610 |") in text
    assert "Energy measured (gpu): component energy of the timed windows, not MLPerf Power." in text
    assert "- bf16 (tf32 on): measured 860 TFLOP/s (GEMM probe); datasheet 989.5 TFLOP/s" in text
    assert "- gpu1 device 0 (NVIDIA H100 80GB HBM3): compute 1.45e+03 images/s (median of 3), " \
           "GEMM 610 TFLOP/s" in text
    assert "- GPU interconnect: one GPU" in text


def test_an_install_that_fails_still_leaves_a_summary(tmp_path):
    bundle = tmp_path / "bundle"
    (bundle / "wheels").mkdir(parents=True)  # no pip wheel, nothing to install
    done = subprocess.run(["bash", "scripts/gpu-check.sh", str(bundle), str(tmp_path / "out"),
                           "--device", "cpu"], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env=check_env(tmp_path))
    assert done.returncode == 1, done.stderr
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert summary.startswith("# scalebench GPU check: stopped before measuring")
    assert "pip could not be installed from the bundle" in summary


def _cmake4(folder: Path) -> Path:
    """A CMake 4 from the package index, installed into a throwaway folder: its bin/."""
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                           "--target", str(folder), "cmake>=4,<5"], capture_output=True, text=True,
                          timeout=300)
    if done.returncode != 0:
        pytest.skip(f"no CMake 4 from the package index: {done.stderr.strip()[-300:]}")
    return folder / "cmake" / "data" / "bin"


@pytest.mark.slow
def test_horovod_configures_under_cmake_4(tmp_path):
    """CMake 4 refuses Horovod's bundled gloo (cmake_minimum_required 2.8.12) unless the policy
    minimum is set; install_horovod.sh sets it. The configure step runs exactly as setup.py
    runs it, on the patched source, with the script's whole build environment."""
    bin_dir = _cmake4(tmp_path / "cmake4")
    venv = Path(sys.executable).parent.parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
           "SCALEBENCH_CACHE": str(tmp_path / "cache")}
    env.pop("CMAKE_POLICY_VERSION_MINIMUM", None)
    done = subprocess.run(["bash", "scripts/install_horovod.sh", str(venv), "--configure-only"],
                          cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    if done.returncode != 0 and "pip download failed" in done.stderr:
        pytest.skip(f"Horovod's source is not reachable: {done.stderr.strip()[-300:]}")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "configure step passed with cmake version 4." in done.stdout, done.stdout


FAILING_SETUP = '''import sys
print("-- Configuring Horovod (a build made to fail by the test)")
print("horovod/common/ops/nccl_operations.cc:17:10: fatal error: nccl.h: No such file or directory")
print("compilation terminated.")
sys.exit(1)
'''


def _failing_sdist(folder: Path) -> Path:
    """Horovod's name and the two lines install_horovod.sh patches, and a build that fails the
    way a missing header fails it."""
    import tarfile

    src = folder / "src" / "horovod-0.28.1"
    (src / "horovod" / "torch").mkdir(parents=True)
    (src / "CMakeLists.txt").write_text("set(CMAKE_CXX_STANDARD 14)\n")
    (src / "horovod" / "torch" / "CMakeLists.txt").write_text("    set(CMAKE_CXX_STANDARD 14)\n")
    (src / "setup.py").write_text(FAILING_SETUP)
    path = folder / "horovod-0.28.1.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        tar.add(src, arcname="horovod-0.28.1")
    return path


@pytest.mark.slow
def test_a_failed_horovod_build_shows_its_cause_and_fails_the_check(bundle, tmp_path):
    """A build that fails: summary.md names the first error, build.log holds the build's own
    log, and the exit status is 3 (ran, but Horovod did not), not 0."""
    broken = tmp_path / "bundle"
    broken.mkdir()
    for item in bundle.iterdir():
        if not item.name.startswith("horovod-"):
            (broken / item.name).symlink_to(item)
    _failing_sdist(tmp_path / "sdist").rename(broken / "horovod-0.28.1.tar.gz")
    out = tmp_path / "out"
    env = {**check_env(tmp_path), "SCALEBENCH_CACHE": str(tmp_path / "cache"),
           "SCALEBENCH_HOROVOD_FLAVOUR": "cpu"}
    done = subprocess.run(["bash", "scripts/gpu-check.sh", str(broken), str(out), "--device", "cpu",
                           "--budget", "30", "--horovod-box", "60"], cwd=REPO, capture_output=True,
                          text=True, timeout=300, env=env)
    assert done.returncode == 3, done.stdout[-3000:] + done.stderr[-3000:]
    text = (out / "summary.md").read_text()
    assert "Horovod: skipped: the build failed (exit 1): horovod: error: build failed" in text, text
    assert "### Why Horovod did not build" in text
    assert "fatal error: nccl.h: No such file or directory" in text.split("## Results")[0]
    assert "Exit status 3: Horovod was planned but did not build" in text
    log = (out / "build.log").read_text()
    assert "a build made to fail by the test" in log  # the build's own log, not only its tail


def test_exit_status_tells_all_ran_from_horovod_missing_from_skipped():
    gc = load_check_script()
    ok, skipped = gc.StepResult("a", "ok", 1.0), gc.StepResult("b", "skipped", 0.0, "no time")
    failed = gc.StepResult("c", "failed", 1.0)
    assert gc.exit_status([ok], "built in 90 s: NCCL True") == 0
    assert gc.exit_status([ok], "not built: --horovod-box 0") == 0  # never planned
    assert gc.exit_status([ok, skipped], "installed from the cache in 3 s") == 4
    assert gc.exit_status([ok, skipped], "skipped: the build failed (exit 1)") == 3
    assert gc.exit_status([ok, failed, skipped], "skipped: the build failed (exit 1)") == 1


def test_a_step_the_deadline_stops_is_skipped_for_time_not_failed(tmp_path):
    """A sweep that started with the time its estimate asked for and met the deadline with no
    run done (CPU fp16, far slower than the first sweep's calibration, did: it read 'failed',
    exit status 1, though nothing went wrong) is skipped for want of time: exit status 4."""
    gc = load_check_script()
    check = gc.Check(tmp_path, tmp_path / "work", "cpu", time.time() + 100, tmp_path / "log")
    check.run = lambda *args, **kwargs: (124, "(stopped at the deadline)")
    step = gc.run_sweep(check, gc.Sweep("ddp fp16", ("ddp",), ("fp16",), "on"))
    assert step.status == "skipped" and step.note.startswith("stopped at the deadline after ")
    assert "s needed, " in step.note and " s left at its start" in step.note
    assert gc.exit_status([gc.StepResult("a", "ok", 1.0), step], "not built: --horovod-box 0") == 4
    check.run = lambda *args, **kwargs: (2, "Traceback ...")  # a sweep that broke still fails
    assert gc.run_sweep(check, gc.Sweep("ddp fp16", ("ddp",), ("fp16",), "on")).status == "failed"


def test_horovod_is_measured_however_gpu_check_sh_got_it_installed():
    """Every line gpu-check.sh writes for an importable Horovod plans Horovod's steps; the
    two-command visit's "already installed (by --install-only)" once planned none (the
    rehearsal's steps table had no Horovod row, and nothing said why)."""
    gc = load_check_script()
    for line in ("built in 300 s: NCCL True, Gloo True, CUDA True",
                 "installed from the cache in 4 s: NCCL True, Gloo True, CUDA True",
                 "already installed (by --install-only) in 6 s: NCCL True, Gloo True, CUDA True"):
        assert gc.horovod_ready(line), line
    for line in ("not built: --horovod-box 0", "not attempted",
                 "skipped: the build failed (exit 1): see build.log (log: build.log)"):
        assert not gc.horovod_ready(line), line


def imported_by_the_cli(modules: tuple[str, ...]) -> list[str]:
    """Which of `modules` building the CLI's parser (every command registered) imports."""
    code = ("import sys, scalebench.cli; scalebench.cli.build_parser(); "
            f"print(sorted(m for m in {modules!r} if m in sys.modules))")
    probe = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                           timeout=120)
    assert probe.returncode == 0, probe.stderr
    return eval(probe.stdout)  # a list of names printed by the probe above


def test_the_cli_needs_nothing_a_bare_gpu_machine_lacks():
    """The GPU machines hold no jsonschema, Ray or Horovod (the bundle brings ruptures and
    Horovod's build): importing the CLI with every command must not pull them in (the rehearsal
    found `scalebench env` failing on k8s's jsonschema)."""
    assert imported_by_the_cli(("jsonschema", "yaml", "ray", "horovod", "kubernetes")) == []


def test_the_cli_starts_without_plotting_or_training_libraries():
    """Every `scalebench` command starts by building the whole parser: matplotlib (pyplot took
    about 1 s of CPU of each start, 1.45 s in all against 0.45 s now), pandas and torch load
    only in the commands that use them."""
    assert imported_by_the_cli(("matplotlib", "pandas", "torch", "scipy")) == []
