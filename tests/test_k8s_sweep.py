"""`scalebench sweep --launcher k8s` and `scalebench k8s watch` against the loopback server that
plays the operators' documented states (tests/k8s_loopback.py): jobs created, watched, their
records read from the fake pods' logs or a results folder, failed and timed-out jobs recorded
with the operator's words, Ctrl-C and timeouts deleting the job. No training runs: the records
are fake_record's. Nothing here proves scheduling, pod DNS, NCCL, volumes or image pulls."""

from __future__ import annotations

import json

import pytest

from scalebench import cli
from scalebench.k8s import results as k8s_results
from scalebench.records import results
from tests.conftest import fake_record
from tests.k8s_loopback import INTERRUPT, LoopbackOperators

SWEEP = ["sweep", "--launcher", "k8s", "--models", "inception_v3", "--image-size", "75",
         "--precision", "fp32",
         "--workers", "1,2", "--warmup", "2", "--iters", "1", "--trials", "1", "--timeout", "5",
         "--image", "registry.example/scalebench:0.1.0", "--gpus-per-node", "2", "--nodes", "1",
         "--run-name", "bench", "--no-report", "--quiet"]
FAST = ["--k8s-poll", "0.02", "--k8s-pending-timeout", "0.3"]
RUNNING = {"conditions": [{"type": "Created", "status": "True"},
                          {"type": "Running", "status": "True"}]}


def pod_log(framework: str, *, noise: str = "NCCL INFO Bootstrap") -> str:
    """What the pod that holds a launch's records prints: its own output, then each record."""
    lines = [noise]
    for i, workers in enumerate((1, 2), start=1):
        record = fake_record(framework=framework, world_size=workers, device="cuda",
                             backend="nccl", sweep_id="pod-sweep", images_per_sec_ci95=[9.8, 10.2],
                             run_id=f"{i:03d}-{framework}-inception_v3-w{workers}-fp32")
        lines.append(k8s_results.PREFIX + json.dumps(record))
    return "\n".join(lines) + "\n"


def sweep(server: LoopbackOperators, tmp_path, *extra: str) -> tuple[int, list[dict]]:
    code = cli.main([*SWEEP, *extra, *FAST, "--k8s-api", server.url, "--out", str(tmp_path)])
    path = tmp_path / results.RESULTS_FILE
    return code, (results.load([path])[0] if path.is_file() else [])


def test_ok_failed_and_stuck_jobs_each_end_as_records(tmp_path, capsys):
    statuses = {
        "bench-ddp-1n": [{}, {"jobsStatus": [{"name": "node", "active": 1}]},
                         {"conditions": [{"type": "Complete", "status": "True",
                                          "reason": "JobsCompleted"}]}],
        "bench-horovod-1n": [{"conditions": [{"type": "Created", "status": "True"}]}, RUNNING,
                             {"conditions": [{"type": "Failed", "status": "True",
                                              "reason": "MPIJobFailed",
                                              "message": "launcher exited with 1"}]}],
        "bench-ray-1n": [{"jobDeploymentStatus": "Initializing"}],
    }
    logs = {"bench-ddp-1n": {"bench-ddp-1n-node-0-0": pod_log("ddp")},
            "bench-horovod-1n": {"bench-horovod-1n-launcher": "ssh: Could not resolve hostname "
                                 "bench-horovod-1n-worker-0\n"}}
    with LoopbackOperators(statuses, logs=logs) as server:
        code, records = sweep(server, tmp_path, "--frameworks", "ddp,horovod,ray")
    out = capsys.readouterr().out
    assert code == 0
    by = {(r["framework"], r["world_size"]): r for r in records}
    assert len(records) == 6 and len({r["sweep_id"] for r in records}) == 1
    assert records[0]["sweep_id"] != "pod-sweep"
    for w in (1, 2):
        ok = by["ddp", w]
        assert ok["status"] == "ok" and ok["launcher"] == "k8s"
        assert ok["scheduler"]["k8s"]["name"] == "bench-ddp-1n"
        assert ok["scheduler"]["k8s"]["pod_sweep_id"] == "pod-sweep"
        failed = by["horovod", w]
        assert failed["status"] == "failed" and failed["launcher"] == "k8s"
        assert "MPIJob bench-horovod-1n failed: MPIJobFailed: launcher exited with 1" in (
            failed["error"])
        assert "Could not resolve hostname" in failed["stderr_tail"]
        assert failed["run_id"] == f"{w:03d}-horovod-inception_v3-w{w}-fp32"
        stuck = by["ray", w]
        assert stuck["status"] == "timeout"
        assert "still pending after 0.3 s (Initializing)" in stuck["error"]
    assert server.deleted == {"bench-ray-1n"}  # only the timed-out job; the others keep their TTL
    assert [m for m, p in server.requests if m == "POST"] == ["POST"] * 3
    assert "[1-2/6]" in out and "4 runs after this" in out and "2 of 6 runs ok" in out
    assert "deleted RayJob bench-ray-1n" in out


def test_a_job_that_succeeds_without_a_record_of_a_run_records_it_failed(tmp_path):
    done = [{"conditions": [{"type": "Complete", "status": "True"}]}]
    one = pod_log("ddp").splitlines()
    logs = {"bench-ddp-1n": {"pod-0": "\n".join(one[:2] + ["SCALEBENCH_RESULT {broken"])}}
    with LoopbackOperators(default=done, logs=logs) as server:
        code, records = sweep(server, tmp_path, "--frameworks", "ddp")
    assert code == 0 and [r["status"] for r in records] == ["ok", "failed"]
    assert "succeeded but no record of this run came back" in records[1]["error"]
    assert "pod-0: line 3: JSONDecodeError" in records[1]["error"]


def test_records_are_read_from_a_mounted_results_volume(tmp_path):
    volume = tmp_path / "volume"
    job_dir = volume / "bench" / "bench-ddp-1n"
    job_dir.mkdir(parents=True)
    for line in pod_log("ddp").splitlines()[1:]:
        results.append(job_dir / results.RESULTS_FILE, json.loads(line.split(" ", 1)[1]))
    done = [{"conditions": [{"type": "Complete", "status": "True"}]}]
    with LoopbackOperators(default=done) as server:  # no pod logs at all
        code, records = sweep(server, tmp_path / "out", "--frameworks", "ddp",
                              "--results-pvc", "results", "--k8s-results-dir", str(volume))
    assert code == 0 and [r["status"] for r in records] == ["ok", "ok"]


def test_ctrl_c_deletes_the_running_job_and_keeps_what_was_recorded(tmp_path, capsys):
    done = [{"conditions": [{"type": "Complete", "status": "True"}]}]
    statuses = {"bench-ddp-1n": done, "bench-horovod-1n": [RUNNING, INTERRUPT, RUNNING]}
    logs = {"bench-ddp-1n": {"pod-0": pod_log("ddp")}}
    with LoopbackOperators(statuses, logs=logs) as server:
        code, records = sweep(server, tmp_path, "--frameworks", "ddp,horovod")
    assert code == 130
    assert server.deleted == {"bench-horovod-1n"}
    assert [(r["framework"], r["status"]) for r in records] == [("ddp", "ok"), ("ddp", "ok")]
    assert "interrupted: the running job was deleted" in capsys.readouterr().out


def test_dry_run_prints_validated_manifests_and_creates_nothing(tmp_path, capsys):
    with LoopbackOperators() as server:
        code, records = sweep(server, tmp_path, "--frameworks", "ddp,horovod", "--dry-run")
    out = capsys.readouterr().out
    assert code == 0 and records == [] and server.requests == []
    assert "kind: TrainJob" in out and "kind: MPIJob" in out and out.count("\n---\n") == 2
    assert "dry run: 2 jobs" in out and "nothing created" in out
    assert 'iters = "1"' in out  # the sweep's flags reach the pods through their workload


@pytest.mark.parametrize("argv, field", [
    (["--gpus-per-node", ""], "gpus_per_node: required"),
    (["--workers", "3"], "workers: 3 workers need 2 nodes of 2 GPUs and do not fill them"),
    (["--nodes", "1,2"], "nodes: no worker count of the sweep runs on 2 nodes"),
    (["--image", "registry.example/scalebench"], "image: give a tag or a digest"),
    (["--namespace", "Perf_Team"], "namespace: 'Perf_Team' is not an RFC 1123 label"),
    (["--run-name", "9lives"], "run_name: '9lives' is not an RFC 1035 label"),
    (["--ddp-kind", "mpijob"], "ddp_kind: one of trainjob, pytorchjob"),
    (["--resume"], "resume: not with launcher k8s"),
    (["--nnodes", "2"], "ddp.nnodes: set by the k8s launcher"),
    (["--launcher", "local"], "image: only with --launcher k8s"),
])
def test_bad_input_is_one_line_naming_the_field_and_exit_2(argv, field, tmp_path, capsys):
    code = cli.main([*SWEEP, "--frameworks", "ddp", "--dry-run", *argv, "--out",
                     str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and field in err and "\n" not in err and "Traceback" not in err


@pytest.mark.parametrize("statuses, code, last", [
    ([RUNNING, {"conditions": [{"type": "Succeeded", "status": "True"}]}], 0, "mpijob: ok"),
    ([RUNNING, {"conditions": [{"type": "Failed", "status": "True", "reason": "MPIJobFailed",
                                "message": "launcher exited with 1"}]}], 1,
     "failed: MPIJob one failed: MPIJobFailed: launcher exited with 1"),
    ([RUNNING], 1, "still running after 0.1 s"),
])
def test_k8s_watch_follows_one_job_and_leaves_it(statuses, code, last, capsys):
    with LoopbackOperators(default=statuses) as server, server.client() as client:
        client.create({"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
                       "metadata": {"name": "one", "namespace": "perf"}})
        got = cli.main(["k8s", "watch", "mpijob/one", "--namespace", "perf", "--k8s-api",
                        server.url, "--k8s-poll", "0.02", "--timeout", "0.1"])
    out = capsys.readouterr().out
    assert got == code and not server.deleted
    assert "MPIJob one: running (Running)" in out
    assert last.replace("mpijob: ", "MPIJob one: ") in out.splitlines()[-1]


def test_k8s_watch_refuses_an_unknown_kind(capsys):
    assert cli.main(["k8s", "watch", "deployment/web"]) == 2
    assert "job: KIND/NAME with KIND one of mpijob, trainjob, pytorchjob, rayjob" in (
        capsys.readouterr().err)
