"""The watcher against a loopback HTTP server that plays the operators' documented states
(127.0.0.1 only, a bounded number of requests, stops by itself). It proves the client's HTTP
and state handling, not a cluster: no scheduling, pods, DNS, NCCL or volumes are involved."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from scalebench.k8s import validate, watch

MAX_REQUESTS = 200


class OperatorDouble:
    """Plays one job's status sequence: each GET returns the next status (the last repeats);
    POST creates, DELETE records the deletion and makes later GETs 404."""

    def __init__(self, statuses: list[dict]):
        self.statuses = statuses
        self.requests: list[tuple[str, str]] = []
        self.deleted = False
        double = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _answer(self, code: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _handle(self) -> None:
                double.requests.append((self.command, self.path))
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                if len(double.requests) > MAX_REQUESTS:
                    self._answer(503, {"message": "request budget spent"})
                    threading.Thread(target=double.server.shutdown, daemon=True).start()
                elif self.command == "POST":
                    self._answer(201, body)
                elif self.command == "DELETE":
                    double.deleted = True
                    self._answer(200, {"kind": "Status", "status": "Success"})
                elif double.deleted:
                    self._answer(404, {"kind": "Status", "message": "not found"})
                else:
                    gets = sum(1 for m, _ in double.requests if m == "GET")
                    status = double.statuses[min(gets, len(double.statuses)) - 1]
                    self._answer(200, {"metadata": {"name": "job"}, "status": status})

            do_GET = do_POST = do_DELETE = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> watch.Client:
        self.thread.start()
        return watch.Client(f"http://127.0.0.1:{self.server.server_address[1]}", timeout=5)

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


def manifest(kind: str) -> dict:
    api = {"MPIJob": "kubeflow.org/v2beta1", "TrainJob": "trainer.kubeflow.org/v1alpha1",
           "PyTorchJob": "kubeflow.org/v1", "RayJob": "ray.io/v1"}[kind]
    return {"apiVersion": api, "kind": kind, "metadata": {"name": "bench", "namespace": "perf"}}


def cond(*types: str, message: str = "", reason: str = "") -> dict:
    return {"conditions": [{"type": t, "status": "True", "message": message, "reason": reason}
                           for t in types]}


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def run(kind: str, statuses: list[dict], deadline: float = 100.0):
    clock = FakeClock()
    double = OperatorDouble(statuses)
    with double as client:
        client.create(manifest(kind))
        outcome = watch.watch(client, manifest(kind), deadline, poll_seconds=10, clock=clock,
                              sleep=clock.sleep)
    return outcome, double


@pytest.mark.parametrize("kind, done", [("MPIJob", "Succeeded"), ("PyTorchJob", "Succeeded")])
def test_conditions_created_running_succeeded_end_ok(kind, done):
    outcome, double = run(kind, [{}, cond("Created"), cond("Created", "Running"),
                                 cond("Created", "Running", done)])
    assert outcome.status == "ok" and outcome.polls == 4 and outcome.state.phase == "succeeded"
    plural = watch.PLURALS[kind]
    assert double.requests[0][0] == "POST" and double.requests[0][1].endswith(f"/perf/{plural}")
    assert double.requests[1] == ("GET", double.requests[1][1])
    assert double.requests[1][1].endswith(f"/namespaces/perf/{plural}/bench")
    assert not double.deleted


def test_a_failed_mpijob_carries_the_operators_reason_and_message():
    outcome, double = run("MPIJob", [cond("Created"), cond("Created", "Failed", reason=
                                                           "MPIJobFailed", message="launcher "
                                                           "exited with 1: Could not resolve "
                                                           "hostname")])
    assert outcome.status == "failed"
    assert "MPIJobFailed: launcher exited with 1: Could not resolve hostname" in outcome.error
    assert not double.deleted


def test_trainjob_complete_and_failed():
    ok, _ = run("TrainJob", [{}, {"jobsStatus": [{"name": "node", "active": 2}]},
                             cond("Complete", reason="JobsCompleted")])
    assert ok.status == "ok" and ok.polls == 3
    failed, _ = run("TrainJob", [{"jobsStatus": [{"name": "node", "ready": 1}]},
                                 cond("Failed", reason="DeadlineExceeded",
                                      message="trainjob exceeded its deadline")])
    assert failed.status == "failed" and "DeadlineExceeded: trainjob exceeded" in failed.error


def test_stuck_pending_past_the_deadline_is_deleted_and_recorded_as_timeout():
    outcome, double = run("MPIJob", [cond("Created")], deadline=35)
    assert outcome.status == "timeout" and double.deleted
    assert "still pending after 35 s (Created)" in outcome.error
    assert outcome.polls == 5  # at 0, 10, 20, 30 and 35 s
    assert double.requests[-1][0] == "DELETE"


@pytest.mark.parametrize("statuses, status, words", [
    ([{"jobDeploymentStatus": "Initializing"}, {"jobDeploymentStatus": "Running",
                                               "jobStatus": "RUNNING"},
      {"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED"}], "ok", None),
    ([{"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"},
      {"jobDeploymentStatus": "Complete", "jobStatus": "FAILED",
       "message": "Job entrypoint command failed with exit code 1"}], "failed",
     "Complete/FAILED: Job entrypoint command failed with exit code 1"),
    ([{"jobDeploymentStatus": "Initializing"},
      {"jobDeploymentStatus": "Failed", "reason": "PreRunningDeadlineExceeded",
       "message": "the RayJob did not start in time"}], "failed",
     "Failed (PreRunningDeadlineExceeded): the RayJob did not start in time"),
    ([{"jobDeploymentStatus": "Initializing"}], "timeout", "still pending after 100 s "
                                                           "(Initializing)"),
])
def test_rayjob_deployment_and_job_status(statuses, status, words):
    outcome, double = run("RayJob", statuses)
    assert outcome.status == status
    if words:
        assert words in outcome.error
    assert double.deleted == (status == "timeout")


def test_a_job_deleted_by_someone_else_fails_with_its_last_state():
    clock = FakeClock()
    double = OperatorDouble([cond("Created", "Running")])
    with double as client:
        first = watch.state("MPIJob", client.get(manifest("MPIJob")))
        client.delete(manifest("MPIJob"))
        outcome = watch.watch(client, manifest("MPIJob"), 100, clock=clock, sleep=clock.sleep)
    assert first.phase == "running"
    assert outcome.status == "failed" and "was deleted before it ended" in outcome.error


def test_an_unreachable_api_fails_after_a_few_tries():
    clock = FakeClock()
    double = OperatorDouble([{}])
    with double as client:
        pass  # server stopped: nothing listens on its port any more
    outcome = watch.watch(client, manifest("TrainJob"), 1000, clock=clock, sleep=clock.sleep,
                          max_api_errors=3)
    assert outcome.status == "failed" and "did not answer" in outcome.error and outcome.polls == 3


def go_constants(path: str, type_name: str) -> set[str]:
    text = (validate.VENDOR / "types" / path).read_text()
    return set(re.findall(rf"\w+\s+{type_name}\s*=\s*\"([^\"]*)\"", text))


def test_every_documented_state_has_a_phase():
    """The states the vendored Go types define, each read to a phase the loop acts on."""
    deployments = go_constants("kuberay_rayjob_types.go", "JobDeploymentStatus")
    jobs = go_constants("kuberay_rayjob_types.go", "JobStatus")
    assert {"Initializing", "Running", "Complete", "Failed", "ValidationFailed"} <= deployments
    for deployment in deployments:
        for job in jobs:
            found = watch.state("RayJob", {"status": {"jobDeploymentStatus": deployment,
                                                      "jobStatus": job}})
            assert found.phase in watch.PHASES
            if deployment in ("", "Initializing", "Waiting", "Suspended"):
                assert found.phase == "pending"
    for condition in go_constants("mpi-operator_v2beta1_types.go", "JobConditionType"):
        found = watch.state("MPIJob", {"status": cond(condition)})
        expected = {"Succeeded": "succeeded", "Failed": "failed", "Running": "running"}
        assert found.phase == expected.get(condition, "pending"), condition
