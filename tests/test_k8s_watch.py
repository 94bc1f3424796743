"""The watcher against a loopback HTTP server that plays the operators' documented states
(127.0.0.1 only, a bounded number of requests, stops by itself). It proves the client's HTTP
and state handling, not a cluster: no scheduling, pods, DNS, NCCL or volumes are involved."""

from __future__ import annotations

import re

import pytest

from scalebench.k8s import api, validate, watch
from tests.k8s_loopback import LoopbackOperators


def manifest(kind: str) -> dict:
    return {"apiVersion": api.API_VERSIONS[kind], "kind": kind,
            "metadata": {"name": "bench", "namespace": "perf"}}


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


class Double:
    """One job on the loopback server, seen as the old single-job double: requests, deleted."""

    def __init__(self, server: LoopbackOperators):
        self.requests = server.requests
        self.deleted = "bench" in server.deleted


def run(kind: str, statuses: list[dict], deadline: float = 100.0, **options):
    clock = FakeClock()
    with LoopbackOperators(default=statuses) as server, server.client() as client:
        client.create(manifest(kind))
        outcome = watch.watch(client, manifest(kind), deadline, poll_seconds=10, clock=clock,
                              sleep=clock.sleep, **options)
    return outcome, Double(server)


@pytest.mark.parametrize("kind, done", [("MPIJob", "Succeeded"), ("PyTorchJob", "Succeeded")])
def test_conditions_created_running_succeeded_end_ok(kind, done):
    outcome, double = run(kind, [{}, cond("Created"), cond("Created", "Running"),
                                 cond("Created", "Running", done)])
    assert outcome.status == "ok" and outcome.polls == 4 and outcome.state.phase == "succeeded"
    plural = api.PLURALS[kind]
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
    with LoopbackOperators(default=[cond("Created", "Running")]) as server, \
            server.client() as client:
        client.create(manifest("MPIJob"))
        first = watch.state("MPIJob", client.get(manifest("MPIJob")))
        client.delete(manifest("MPIJob"))
        outcome = watch.watch(client, manifest("MPIJob"), 100, clock=clock, sleep=clock.sleep)
    assert first.phase == "running"
    assert outcome.status == "failed" and "was deleted before it ended" in outcome.error


def test_an_unreachable_api_fails_after_a_few_tries():
    clock = FakeClock()
    with LoopbackOperators() as server:
        client = server.client()  # server stopped below: nothing listens on its port any more
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


def test_a_job_that_never_starts_ends_at_the_pending_limit_and_states_are_reported_once():
    seen = []
    outcome, double = run("RayJob", [{"jobDeploymentStatus": "Initializing"}], deadline=1000,
                          pending_seconds=25, on_state=seen.append)
    assert outcome.status == "timeout" and double.deleted
    assert "still pending after 25 s (Initializing)" in outcome.error
    assert [s.reason for s in seen] == ["Initializing"]


def test_the_pending_limit_stops_counting_once_the_job_runs():
    running = cond("Created", "Running")
    outcome, double = run("MPIJob", [cond("Created"), running, running, running,
                                     cond("Created", "Running", "Succeeded")],
                          deadline=1000, pending_seconds=15)
    assert outcome.status == "ok" and not double.deleted


def test_watching_without_delete_leaves_the_job():
    outcome, double = run("MPIJob", [cond("Created")], deadline=20, delete=False)
    assert outcome.status == "timeout" and not double.deleted
    assert "deleted" not in outcome.error
