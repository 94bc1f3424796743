"""Slurm as a launcher: allocation parsing, placement, srun commands and Slurm's verdicts (fast),
then real Slurm clusters on this machine (slow): the sbatch file of `slurm-script` running all
three frameworks as job steps on two slurmd nodes, a step past its time limit, a scancel'd step
and an impossible request on one node.

The slow tests start their own private clusters with scripts/slurm_local.sh (own munge key,
ports and state in a temporary folder) and skip, saying why, where that cannot work.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from scalebench.slurm import allocation, script, steps, task
from scalebench.slurm.allocation import Allocation, Placement
from scalebench.spec import config
from scalebench.spec.errors import UserError
from tests.conftest import REPO, TINY, cli_env, flags, read_records

PY = sys.executable
FAST = {**TINY, "timeout": 300}

# ------------------------------------------------------------------ allocation, placement


def test_hostlists_and_counts_expand_as_scontrol_does():
    assert allocation.expand_hostlist("gpu[01-03,07],login1") == [
        "gpu01", "gpu02", "gpu03", "gpu07", "login1"]
    assert allocation.expand_hostlist("rack[1-2]-n[8-9]") == [
        "rack1-n8", "rack1-n9", "rack2-n8", "rack2-n9"]
    assert allocation.expand_hostlist("vm") == ["vm"]
    assert allocation.expand_counts("2(x3),1") == [2, 2, 2, 1]
    assert allocation.expand_counts("48") == [48]


SBATCH_ENV = {"SLURM_JOB_ID": "4711", "SLURM_JOB_NODELIST": "gpu[01-02]",
              "SLURM_JOB_CPUS_PER_NODE": "64(x2)", "SLURM_GPUS_ON_NODE": "8",
              "SLURM_NTASKS": "16", "SLURM_NTASKS_PER_NODE": "8",
              "SLURM_JOB_PARTITION": "gpu"}


def test_allocation_from_sbatch_environment():
    alloc = allocation.from_env(SBATCH_ENV)
    assert alloc == Allocation("4711", ("gpu01", "gpu02"), (64, 64), 8, 16, 8, "gpu")
    # GPUs: one worker each; a run fills a node before it takes the next
    assert alloc.place(4, "cuda") == Placement(("gpu01",), 4, 16, 4)
    assert alloc.place(16, "cuda") == Placement(("gpu01", "gpu02"), 8, 8, 8)
    assert alloc.place(16, "cuda", threads=2).cpus_per_task == 2


def test_salloc_without_tasks_counts_cpus():
    alloc = allocation.from_env({"SLURM_JOB_ID": "5", "SLURM_JOB_NODELIST": "n[1-2]",
                                 "SLURM_JOB_CPUS_PER_NODE": "4,2"}, ask_scontrol=False)
    assert alloc.cpus_per_node == (4, 2) and alloc.ntasks is None
    assert alloc.place(2, "cpu") == Placement(("n1",), 2, 2, 0)  # one worker per CPU
    assert alloc.place(4, "cpu") == Placement(("n1", "n2"), 2, 1, 0)  # the smaller node decides


@pytest.mark.parametrize("world,device,threads,message", [
    (32, "cuda", None, "workers: 32 workers need 32 tasks, Slurm job 4711 (2 nodes x 64 CPUs, "
                       "8 GPUs, 16 tasks) has 16"),
    (9, "cuda", None, "workers: 9 workers do not split evenly over the 2 nodes they need"),
    (8, "cuda", 16, "threads_per_worker: 8 workers x 16 threads need 128 CPUs per node"),
])
def test_requests_the_allocation_cannot_hold_are_one_line_errors(world, device, threads, message):
    with pytest.raises(UserError) as err:
        allocation.from_env(SBATCH_ENV).place(world, device, threads)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_cuda_without_gpus_and_too_many_nodes():
    alloc = allocation.from_env({"SLURM_JOB_ID": "6", "SLURM_JOB_NODELIST": "a",
                                 "SLURM_JOB_CPUS_PER_NODE": "2"}, ask_scontrol=False)
    with pytest.raises(UserError, match="a CUDA run needs GPUs and Slurm job 6 .* has none"):
        alloc.place(1, "cuda")
    with pytest.raises(UserError, match="4 workers need 2 nodes of 2 .* has 1"):
        alloc.place(4, "cpu")


def test_outside_an_allocation_is_a_clear_error():
    with pytest.raises(UserError, match="runs inside a Slurm allocation"):
        allocation.from_env({})
    env = {k: v for k, v in cli_env().items() if not k.startswith("SLURM_")}
    proc = subprocess.run([PY, "-m", "scalebench", "sweep", "--launcher", "slurm", "--frameworks",
                           "ddp", "--workers", "1", "--out", "/nonexistent/never"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "SLURM_JOB_ID is not set" in proc.stderr


def test_launch_spec_takes_nodes_threads_and_launcher_from_the_allocation(monkeypatch):
    from scalebench.hardware import devices
    from scalebench.tasks import train

    env = {"SLURM_JOB_ID": "77", "SLURM_JOB_NODELIST": "c[1-2]",
           "SLURM_JOB_CPUS_PER_NODE": "8(x2)", "SLURM_NTASKS_PER_NODE": "4"}
    for key in list(os.environ):
        if key.startswith("SLURM_"):
            monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    sweep = config.build_spec({"frameworks": "ddp", "workers": [2, 8], "launcher": "slurm"})
    device = devices.resolve("cpu")
    one, two = (train.launch_spec(sweep, "ddp", w, device) for w in (2, 8))
    assert (one.nodes, one.threads_per_worker, one.launcher) == (1, 4, "slurm")
    assert (two.nodes, two.threads_per_worker) == (2, 2)
    manual = config.build_spec({"frameworks": "ddp", "launcher": "slurm",
                                "ddp": {"nnodes": 2, "rdzv_endpoint": "h:1"}})
    with pytest.raises(UserError, match="ddp.nnodes: not used with launcher slurm"):
        train.launch_spec(manual, "ddp", 2, device)


# ------------------------------------------------------------------ steps, tasks, verdicts


def test_srun_command_and_environment():
    placement = Placement(("n1", "n2"), 4, 2, 4)
    cmd = steps.srun_command(placement, ["python", "-m", "w"], name="run-1",
                             info_path=Path("/r/slurm-step.json"), time_limit=90)
    assert cmd[0] == "srun"
    for arg in ("--nodes=2", "--ntasks=8", "--ntasks-per-node=4", "--nodelist=n1,n2",
                "--cpus-per-task=2", "--kill-on-bad-exit=1", "--time=2", "--gpus-per-node=4",
                "--job-name=run-1"):
        assert arg in cmd
    assert cmd[cmd.index("scalebench.slurm.task") - 1:] == [
        "-m", "scalebench.slurm.task", "/r/slurm-step.json", "--", "python", "-m", "w"]
    env = steps.srun_env({"SLURM_JOB_ID": "1", "SLURM_NTASKS": "16", "SLURM_CPUS_PER_TASK": "8",
                          "PYTHONPATH": "x"})
    assert env == {"SLURM_JOB_ID": "1", "PYTHONPATH": "x"}  # the run's geometry wins
    assert steps.time_limit_minutes(60) == 1 and steps.time_limit_minutes(61) == 2


def test_task_environment_for_torch():
    env = {"SLURM_PROCID": "5", "SLURM_STEP_NUM_TASKS": "8", "SLURM_NODEID": "1",
           "SLURM_LOCALID": "1", "SLURM_STEP_TASKS_PER_NODE": "4(x2)",
           "SLURM_STEP_NODELIST": "n[1-2]", "SLURM_JOB_ID": "9", "SLURM_STEP_ID": "3"}
    assert task.torch_env(env, "10.0.0.1", 29500) == {
        "RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4",
        "GROUP_RANK": "1", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}
    info = task.step_info(env)
    assert (info["job_id"], info["step_id"], info["nodes"]) == ("9", "3", ["n1", "n2"])


def test_horovod_slots_follow_slurm_ranks_node_by_node():
    pytest.importorskip("horovod.runner")
    from horovod.runner.common.util.hosts import HostInfo, get_host_assignments

    from scalebench.frameworks.horovod.slurm_worker import interface_to, slot_env

    plan = get_host_assignments([HostInfo("n1", 2), HostInfo("n2", 2)], 4)
    # srun --distribution=block --ntasks-per-node=2: ranks 0,1 on n1 and 2,3 on n2, as here
    assert [(s.hostname, s.local_rank, s.cross_rank) for s in plan] == [
        ("n1", 0, 0), ("n1", 1, 0), ("n2", 0, 1), ("n2", 1, 1)]
    assert slot_env(vars(plan[3])) == {
        "HOROVOD_HOSTNAME": "n2", "HOROVOD_RANK": "3", "HOROVOD_SIZE": "4",
        "HOROVOD_LOCAL_RANK": "1", "HOROVOD_LOCAL_SIZE": "2", "HOROVOD_CROSS_RANK": "1",
        "HOROVOD_CROSS_SIZE": "2"}
    assert interface_to("127.0.0.1") == "lo"


# What slurmstepd and srun print (Slurm 22.05), as seen on the test cluster.
TIME_LIMIT = """slurmstepd-vm: error: *** STEP 6.0 ON vm CANCELLED AT 2026-12-03T05:10:37 DUE TO \
TIME LIMIT ***
srun: error: vm: task 0: Exited with exit code 143
srun: launch/slurm: _step_signal: Terminating StepId=6.0"""
SCANCEL = """srun: Job step aborted: Waiting up to 7 seconds for job step to finish.
slurmstepd-vm: error: *** STEP 6.1 ON vm CANCELLED AT 2026-12-03T05:11:10 ***
srun: error: vm: task 0: Killed"""
BAD_EXIT = """boom
srun: error: vm: task 1: Exited with exit code 3
srun: launch/slurm: _step_signal: Terminating StepId=6.2
slurmstepd-vm: error: *** STEP 6.2 ON vm CANCELLED AT 2026-12-03T05:11:10 ***
srun: error: vm: task 0: Terminated
srun: Force Terminated StepId=6.2"""
PREEMPTED = "slurmstepd: error: *** JOB 8 ON n1 CANCELLED AT 2026-01-01T00:00:00 DUE TO PREEMPTION ***"


def test_verdicts_from_the_steps_stderr():
    assert steps.verdict_from_text(TIME_LIMIT).state == "TIMEOUT"
    cancelled = steps.verdict_from_text(SCANCEL)
    assert (cancelled.state, cancelled.reason, cancelled.bad_exit) == (
        "CANCELLED", "scancel or an administrator", "")
    bad = steps.verdict_from_text(BAD_EXIT)
    assert bad.state is None and bad.bad_exit == "task 1 on vm exited with code 3"
    assert steps.verdict_from_text(PREEMPTED).reason == "preemption"
    assert steps.verdict_from_text("srun: error: Unable to create step for job 5: More "
                                   "processors requested than permitted").state == "FAILED"
    assert steps.verdict_from_text("all fine").state is None


# ------------------------------------------------------------------ slurm-script


def write_workload(path: Path, **sweep) -> Path:
    lines = ["[sweep]"] + [f"{k} = {json.dumps(v)}" for k, v in sweep.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_slurm_script_writes_a_ready_batch_file(tmp_path):
    workload = write_workload(tmp_path / "gpus.toml", models=["resnet101"])
    proc = subprocess.run(
        [PY, "-m", "scalebench", "slurm-script", str(workload), "--nodes", "2", "--gpus-per-node",
         "8", "--partition", "gpu", "--time", "02:00:00", "--script", str(tmp_path / "job.sh"),
         "--sweep-args", "--iters 5 --quiet"],
        capture_output=True, text=True, env=cli_env(), cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    text = (tmp_path / "job.sh").read_text()
    for line in ("#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=8", "#SBATCH --gpus-per-node=8",
                 "#SBATCH --partition=gpu", "#SBATCH --time=02:00:00", "#SBATCH --exclusive"):
        assert line in text.splitlines()
    assert "--launcher slurm" in text and "--workers 1,2,4,8,16" in text and "--iters 5" in text
    # the report is written once, by the line after the sweep
    assert "--no-report" in text and text.count("-m scalebench report ") == 1
    assert f"-m scalebench report {tmp_path / 'results' / 'gpus-slurm'}" in text
    assert (tmp_path / "results" / "gpus-slurm").is_dir()  # sbatch opens its output there
    assert script.default_workers(1, 1) == (1,)


@pytest.mark.parametrize("args,message", [
    (["--nodes", "0"], "nodes: expected an integer >= 1, got 0"),
    (["--nodes", "1", "--time", "2h"], "time: expected MINUTES"),
    (["--nodes", "1", "--gpus-per-node", "8", "--sweep-args", "--workers 1,16"],
     "workers: 16 workers need 2 nodes of 8 (one per GPU), the job (1 node x 8 GPUs) has 1"),
    (["--nodes", "1", "--sweep-args", "--no-such 1"], "sweep-args: not a `scalebench sweep` flag"),
    (["--nodes", "1", "--sweep-args", "--frameworks mpi"], "frameworks: unknown value 'mpi'"),
])
def test_slurm_script_refuses_bad_input_in_one_line(tmp_path, args, message):
    workload = write_workload(tmp_path / "w.toml", models=["vgg16"])
    proc = subprocess.run([PY, "-m", "scalebench", "slurm-script", str(workload), *args,
                           "--script", str(tmp_path / "x.sh")],
                          capture_output=True, text=True, env=cli_env(), cwd=tmp_path, timeout=120)
    assert proc.returncode == 2
    assert message in proc.stderr and proc.stderr.count("\n") == 1
    assert not (tmp_path / "x.sh").exists()


# ------------------------------------------------------------------ real Slurm


def _start_cluster(nodes: int, leaves: int = 0):
    missing = [t for t in ("munged", "slurmctld", "slurmd", "srun", "sbatch", "salloc")
               if shutil.which(t) is None]
    if missing:
        pytest.skip(f"Slurm is not installed ({', '.join(missing)} missing; "
                    "scripts/setup_slurm.sh installs it)")
    if os.geteuid() != 0:
        pytest.skip("slurmd needs root to start tasks; run the Slurm tests as root")
    top = Path(tempfile.mkdtemp(prefix="scalebench-slurm-"))
    top.chmod(0o755)  # munged's socket folder must be reachable by everyone
    base = top / "cluster"
    proc = subprocess.run(["bash", str(REPO / "scripts" / "slurm_local.sh"), "start", str(base),
                           str(nodes), str(leaves)], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        shutil.rmtree(top, ignore_errors=True)
        pytest.skip(f"cannot start a {nodes}-node Slurm cluster here: "
                    f"{proc.stderr.strip().splitlines()[-1:] or proc.returncode}")
    return base


def _stop_cluster(base: Path) -> None:
    subprocess.run(["bash", str(REPO / "scripts" / "slurm_local.sh"), "stop", str(base)],
                   capture_output=True, timeout=120)
    shutil.rmtree(base.parent, ignore_errors=True)


@pytest.fixture(scope="module")
def one_node():
    base = _start_cluster(1)
    yield base / "slurm.conf"
    _stop_cluster(base)


@pytest.fixture(scope="module")
def two_nodes():
    base = _start_cluster(2)
    yield base / "slurm.conf"
    _stop_cluster(base)


def slurm_env(conf: Path) -> dict[str, str]:
    env = {k: v for k, v in cli_env().items() if not k.startswith("SLURM_")}
    env["SLURM_CONF"] = str(conf)
    return env


def sweep_args(out: Path, *args: str, **overrides) -> list[str]:
    cmd = [PY, "-m", "scalebench", "sweep", "--launcher", "slurm", "--models", "inception_v3",
           "--out", str(out), "--quiet", "--no-breakdown", *flags({**FAST, **overrides})]
    return cmd + list(args)


def squeue(conf: Path, *args: str) -> str:
    return subprocess.run(["squeue", "-h", *args], capture_output=True, text=True,
                          env=slurm_env(conf), timeout=30).stdout


def queue_drained(conf: Path, seconds: float = 60) -> str:
    """squeue's lines once the queue is empty, or what is still in it after `seconds`: a job
    whose salloc or sbatch has returned may still be completing (state CG) while slurmd
    reports its end to slurmctld."""
    deadline = time.monotonic() + seconds
    while (left := squeue(conf)) and time.monotonic() < deadline:
        time.sleep(0.5)
    return left


def cluster_state(conf: Path) -> str:
    """What the private cluster says about itself: for the message of a failing test."""
    env = slurm_env(conf)
    parts = []
    for cmd in (["sinfo", "-N", "-o", "%N %T %C %E"], ["squeue", "-o", "%i %T %R %j"]):
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=30)
        parts.append(" ".join(cmd) + ":\n" + proc.stdout + proc.stderr)
    for log in sorted((conf.parent / "log").glob("slurm*.log")):
        parts.append(f"{log.name}:\n" + "\n".join(log.read_text().splitlines()[-15:]))
    return "\n".join(parts)


def leftovers(text: str) -> list[str]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            line = " ".join(proc.info["cmdline"] or [])
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        if text in line and "pytest" not in line:
            found.append(line[:200])
    return found


def framework_ok(name: str) -> bool:
    from scalebench import frameworks

    return frameworks.get(name).available()[0]


@pytest.mark.slow
def test_sbatch_script_runs_all_frameworks_as_steps_on_two_nodes_and_reports(two_nodes, tmp_path):
    """The batch file of `slurm-script` on two slurmd nodes of one CPU each: every framework at
    2 workers (one per node), each run its own job step. One-node placement (1 worker) is the
    time-limit test's first run and the placement unit tests'; 1-worker runs here cost a
    minute (Ray's most) and checked nothing those do not."""
    workload = write_workload(tmp_path / "tiny.toml", models=["inception_v3"],
                              frameworks=["ddp", "horovod", "ray"], workers=[2],
                              **{k: v for k, v in FAST.items()}, breakdown=False)
    env = slurm_env(two_nodes)
    made = subprocess.run([PY, "-m", "scalebench", "slurm-script", str(workload), "--nodes", "2",
                           "--ntasks-per-node", "1", "--time", "20", "--script", "tiny.sbatch",
                           "--sweep-args=--quiet"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert made.returncode == 0, made.stderr
    submitted = subprocess.run(["sbatch", "--parsable", "--wait", "tiny.sbatch"],
                               capture_output=True, text=True, env=env, cwd=tmp_path, timeout=900)
    out = tmp_path / "results" / "tiny-slurm"
    log = "".join(p.read_text() for p in out.glob("slurm-*.out"))
    assert submitted.returncode == 0, submitted.stderr + log
    job_id = submitted.stdout.strip().split(";")[0]
    records = read_records(out / "results.jsonl")
    assert [(r["framework"], r["world_size"]) for r in records] == [
        (f, 2) for f in ("ddp", "horovod", "ray")]
    step_ids = set()
    for r in records:
        if not framework_ok(r["framework"]):
            assert r["status"] == "skipped"
            continue
        assert r["status"] == "ok", (r["framework"], r["error"], log)
        assert r["launcher"] == "slurm" and r["threads_per_worker"] == 1
        assert r["nodes"] == r["world_size"]  # Horovod's cross_size, Ray's node ids: 2 hosts
        s = r["scheduler"]
        assert s["name"] == "slurm" and s["job_id"] == job_id and s["state"] == "COMPLETED"
        assert s["step"] == f"{job_id}.{s['step_id']}"
        step_ids.add(s["step_id"])
        if r["framework"] == "ray":  # the Ray cluster spans the allocation; the driver, sb1
            assert s["nodes"] == ["sb1", "sb2"] and s["driver_nodes"] == ["sb1"]
            assert len(s["ray_steps"]) == 2
        else:
            assert s["nodes"] == ["sb1", "sb2"][:r["world_size"]]
    ran = [r for r in records if r["status"] == "ok"]
    assert len(step_ids) == len(ran)  # every run its own step
    # every launch was a step whose tasks ran this checkout's scalebench.slurm.task
    runs = list((out / "runs").iterdir())
    assert runs and all((run / "slurm-step.json").is_file() for run in runs)
    assert (out / "report.html").stat().st_size > 1000 and (out / "summary.csv").is_file()
    assert f"Slurm job {job_id} on sb[1-2]" in log
    assert not queue_drained(two_nodes) and not leftovers(str(out))


@pytest.mark.slow
def test_time_limit_is_timeout_and_scancel_is_failed_and_the_sweep_goes_on(one_node, tmp_path):
    out = tmp_path / "limits"
    env = slurm_env(one_node)
    # two runs that would train for ever: the first is scancel'd, the second hits the step's
    # time limit (the 60 s timeout: 1 minute; Slurm checks about every 30 s). A second of
    # input wait per batch: they wait out the limit asleep, leaving the cores to other tests.
    sweep = subprocess.Popen(["salloc", "--ntasks=2", "--quiet",
                              *sweep_args(out, "--frameworks", "ddp", "--workers", "1,2",
                                          "--inject-input-delay", "1", iters=1000000,
                                          timeout=60)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        first = out / "runs"
        deadline = time.time() + 120
        info = None
        while time.time() < deadline and info is None:
            found = sorted(first.glob("*/slurm-step.json"))
            info = steps.read_info(found[0]) if found else None
            time.sleep(0.5)
        if info is None:
            state = cluster_state(one_node)
            sweep.kill()
            pytest.fail("the first step never started\n" + state + "\nsweep's stderr:\n"
                        + sweep.communicate(timeout=30)[1][-3000:])
        time.sleep(3)
        subprocess.run(["scancel", f"{info['job_id']}.{info['step_id']}"], env=env, check=True,
                       timeout=30)
        stdout, stderr = sweep.communicate(timeout=400)
    finally:
        if sweep.poll() is None:
            sweep.kill()
    assert sweep.returncode == 0, stderr
    cancelled, limited = read_records(out / "results.jsonl")
    assert cancelled["status"] == "failed" and cancelled["world_size"] == 1
    step = f"{info['job_id']}.{info['step_id']}"
    # Without accounting the verdict is read from the step's stderr, where slurmstepd writes
    # "*** STEP ... CANCELLED ..."; that line can be missing when srun exits first (once in
    # three fresh-clone runs here, under the suite's load): the record then says what srun said,
    # a killed task, and not that Slurm cancelled it.
    if cancelled["scheduler"]["state"] == "CANCELLED":
        assert cancelled["error"] == f"Slurm cancelled step {step} (scancel or an administrator)"
    else:
        assert cancelled["scheduler"]["state"] == "FAILED"
        assert cancelled["error"].startswith("srun exited with code 137: "), cancelled["error"]
        assert "Killed" in cancelled["error"]
    assert limited["status"] == "timeout" and limited["world_size"] == 2
    assert limited["error"].startswith(f"Slurm ended step {info['job_id']}.")
    assert "at its time limit (1 min" in limited["error"]
    assert limited["scheduler"]["state"] == "TIMEOUT"
    assert not queue_drained(one_node) and not leftovers(str(out))


@pytest.mark.slow
def test_a_request_the_allocation_cannot_hold_launches_nothing(one_node, tmp_path):
    out = tmp_path / "toobig"
    try:
        proc = subprocess.run(["salloc", "--ntasks=2", "--quiet",
                               *sweep_args(out, "--frameworks", "ddp", "--workers", "1,4")],
                              capture_output=True, text=True, env=slurm_env(one_node), timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail("salloc did not return within 120 s\n" + cluster_state(one_node))
    assert proc.returncode == 2
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("scalebench sweep: error: workers: 4 workers need 4 tasks, Slurm job ")
    assert line.endswith("(1 node x 2 CPUs, 2 tasks) has 2")
    assert not (out / "runs").exists() and not (out / "results.jsonl").exists()
