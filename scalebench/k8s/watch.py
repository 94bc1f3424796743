"""A small client loop over the operators' status fields: apply a job, poll it to its end,
delete it on the deadline or Ctrl-C, and say why it ended in the operator's own words.

It talks to the API through api.Client (the official Python client) and is tested against a
loopback server that plays the operators' states. What each operator reports, from the Go types
vendored beside the CRDs:

- MPIJob (MPI Operator v2beta1) and PyTorchJob (Trainer v1): conditions Created, Running,
  Restarting, Suspended, Succeeded, Failed;
- TrainJob (Trainer v2): conditions Suspended, Complete, Failed, with jobsStatus counts;
- RayJob (KubeRay v1): no conditions; jobDeploymentStatus (Initializing, Running, Complete,
  Failed, ValidationFailed, ...) with the Ray job's jobStatus (PENDING, RUNNING, SUCCEEDED,
  FAILED, STOPPED), a reason and a message.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from scalebench.k8s.api import ApiError, Client

PHASES = ("pending", "running", "succeeded", "failed")
RAY_PENDING = ("", "New", "Initializing", "Waiting", "Retrying", "Suspending", "Suspended")
RAY_FAILED = ("Failed", "ValidationFailed")


@dataclass(frozen=True)
class State:
    phase: str  # pending, running, succeeded or failed
    reason: str = ""  # the operator's word for it (a condition, a deployment status)
    message: str = ""


@dataclass(frozen=True)
class Outcome:
    status: str  # ok, failed or timeout (what a record says)
    state: State
    error: str | None = None
    polls: int = 0


def _true_conditions(status: dict) -> dict[str, dict]:
    return {c.get("type"): c for c in status.get("conditions") or [] if c.get("status") == "True"}


def _from_conditions(status: dict, done: str) -> State | None:
    true = _true_conditions(status)
    for kind, phase in (("Failed", "failed"), (done, "succeeded")):
        if kind in true:
            c = true[kind]
            return State(phase, c.get("reason") or kind, c.get("message") or "")
    return None


def state(kind: str, obj: dict[str, Any]) -> State:
    """Where a job stands, from its status alone (pure)."""
    status = obj.get("status") or {}
    if kind in ("MPIJob", "PyTorchJob"):
        found = _from_conditions(status, "Succeeded")
        if found:
            return found
        true = _true_conditions(status)
        if "Running" in true:
            return State("running", "Running", true["Running"].get("message") or "")
        for word in ("Suspended", "Restarting", "Created"):
            if word in true:
                return State("pending", word, true[word].get("message") or "")
        return State("pending", "", "")
    if kind == "TrainJob":
        found = _from_conditions(status, "Complete")
        if found:
            return found
        if "Suspended" in _true_conditions(status):
            return State("pending", "Suspended")
        jobs = status.get("jobsStatus") or []
        if any((j.get("active") or 0) + (j.get("ready") or 0) > 0 for j in jobs):
            return State("running", "Active")
        return State("pending", "")
    if kind == "RayJob":
        deployment = status.get("jobDeploymentStatus") or ""
        job = status.get("jobStatus") or ""
        words = f"{deployment}/{job}" if job else deployment
        message = status.get("message") or ""
        if deployment in RAY_FAILED:
            return State("failed", f"{words} ({status['reason']})" if status.get("reason")
                         else words, message)
        if deployment == "Complete":
            return State("succeeded" if job == "SUCCEEDED" else "failed", words, message)
        if deployment == "Running":
            return State("running", words, message)
        return State("pending", words, message)
    raise ValueError(f"no status reading for kind {kind!r}")


def watch(client: Client, manifest: dict, deadline_seconds: float, poll_seconds: float = 10.0,
          *, pending_seconds: float | None = None, delete: bool = True,
          on_state: Callable[[State], None] | None = None,
          clock: Callable[[], float] = time.monotonic,
          sleep: Callable[[float], None] = time.sleep, max_api_errors: int = 5) -> Outcome:
    """Poll a created job until the operator says it ended, or end it as a timeout at the
    deadline, or earlier when it has not started running within pending_seconds (a job no node
    can take, a RayJob stuck in Initializing). delete: delete the job at a timeout and on
    Ctrl-C (re-raised). on_state: called with each new state. The outcome carries the
    operator's reason and message."""
    kind = manifest["kind"]
    name = f"{kind} {manifest['metadata']['name']}"
    start = clock()
    end = start + deadline_seconds
    pending_end = end if pending_seconds is None else min(end, start + pending_seconds)
    last, polls, errors, started = State("pending"), 0, 0, False
    seen: State | None = None
    try:
        while True:
            polls += 1
            try:
                last = state(kind, client.get(manifest))
                errors = 0
                if last != seen and on_state is not None:
                    on_state(last)
                seen = last
            except ApiError as exc:
                if exc.status == 404:
                    return Outcome("failed", last, f"{name} was deleted before it ended "
                                   f"(last seen: {words(last)})", polls)
                errors += 1
                if errors >= max_api_errors:
                    return Outcome("failed", last, f"the API did not answer for {name} "
                                   f"{errors} times in a row: {exc}", polls)
            started = started or last.phase != "pending"
            if last.phase == "succeeded":
                return Outcome("ok", last, None, polls)
            if last.phase == "failed":
                return Outcome("failed", last, f"{name} failed: {words(last)}", polls)
            limit = end if started else pending_end
            if clock() >= limit:
                waited = limit - start
                if delete:
                    delete_quietly(client, manifest)
                return Outcome("timeout", last, f"{name} still {last.phase} after {waited:g} s "
                               f"({words(last)})" + ("; deleted it" if delete else ""), polls)
            sleep(max(0.0, min(poll_seconds, limit - clock())))
    except KeyboardInterrupt:
        if delete:
            delete_quietly(client, manifest)
        raise


def words(s: State) -> str:
    text = s.reason or s.phase
    return f"{text}: {s.message}" if s.message else text


def delete_quietly(client: Client, manifest: dict) -> None:
    try:
        client.delete(manifest)
    except ApiError:
        pass  # already gone, or the API is down: the job's own deadline still ends it
