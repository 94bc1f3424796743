"""A small client loop over the operators' status fields: apply a job, poll it to its end,
delete it on the deadline or Ctrl-C, and say why it ended in the operator's own words.

It speaks plain HTTP to the Kubernetes API, as `kubectl proxy` serves it (authentication stays
with kubectl), and is tested against a loopback server that plays the operators' states. What
each operator reports, from the Go types vendored beside the CRDs:

- MPIJob (MPI Operator v2beta1) and PyTorchJob (Trainer v1): conditions Created, Running,
  Restarting, Suspended, Succeeded, Failed;
- TrainJob (Trainer v2): conditions Suspended, Complete, Failed, with jobsStatus counts;
- RayJob (KubeRay v1): no conditions; jobDeploymentStatus (Initializing, Running, Complete,
  Failed, ValidationFailed, ...) with the Ray job's jobStatus (PENDING, RUNNING, SUCCEEDED,
  FAILED, STOPPED), a reason and a message.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

PLURALS = {"MPIJob": "mpijobs", "TrainJob": "trainjobs", "PyTorchJob": "pytorchjobs",
           "RayJob": "rayjobs"}
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


class ApiError(Exception):
    def __init__(self, status: int | None, text: str):
        super().__init__(f"HTTP {status}: {text}" if status else text)
        self.status = status


class Client:
    """The custom-objects part of the Kubernetes REST API, over plain HTTP."""

    def __init__(self, base_url: str, timeout: float = 10.0):
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout

    def path(self, manifest: dict, with_name: bool = True) -> str:
        group, _, version = manifest["apiVersion"].partition("/")
        meta = manifest["metadata"]
        path = (f"/apis/{group}/{version}/namespaces/{meta.get('namespace', 'default')}/"
                f"{PLURALS[manifest['kind']]}")
        return f"{path}/{meta['name']}" if with_name else path

    def request(self, method: str, path: str, body: dict | None = None) -> dict:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base_url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json",
                                              "Accept": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return json.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as exc:
            text = exc.read().decode(errors="replace")
            try:
                text = json.loads(text).get("message", text)
            except (ValueError, AttributeError):
                pass
            raise ApiError(exc.code, text[:300]) from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise ApiError(None, f"{self.base_url}: {exc}") from None

    def create(self, manifest: dict) -> dict:
        return self.request("POST", self.path(manifest, with_name=False), manifest)

    def get(self, manifest: dict) -> dict:
        return self.request("GET", self.path(manifest))

    def delete(self, manifest: dict) -> dict:
        # Foreground: the job's pods go with it, not left behind by an orphaning delete
        return self.request("DELETE", self.path(manifest),
                            {"kind": "DeleteOptions", "apiVersion": "v1",
                             "propagationPolicy": "Foreground"})


def watch(client: Client, manifest: dict, deadline_seconds: float, poll_seconds: float = 10.0,
          *, clock: Callable[[], float] = time.monotonic,
          sleep: Callable[[float], None] = time.sleep, max_api_errors: int = 5) -> Outcome:
    """Poll a created job until the operator says it ended, or delete it at the deadline (or on
    Ctrl-C, then re-raised). The outcome carries the operator's reason and message."""
    kind = manifest["kind"]
    name = f"{kind} {manifest['metadata']['name']}"
    end = clock() + deadline_seconds
    last, polls, errors = State("pending"), 0, 0
    try:
        while True:
            polls += 1
            try:
                last = state(kind, client.get(manifest))
                errors = 0
            except ApiError as exc:
                if exc.status == 404:
                    return Outcome("failed", last, f"{name} was deleted before it ended "
                                   f"(last seen: {_words(last)})", polls)
                errors += 1
                if errors >= max_api_errors:
                    return Outcome("failed", last, f"the API did not answer for {name} "
                                   f"{errors} times in a row: {exc}", polls)
            if last.phase == "succeeded":
                return Outcome("ok", last, None, polls)
            if last.phase == "failed":
                return Outcome("failed", last, f"{name} failed: {_words(last)}", polls)
            if clock() >= end:
                _delete_quietly(client, manifest)
                return Outcome("timeout", last, f"{name} still {last.phase} after "
                               f"{deadline_seconds:g} s ({_words(last)}); deleted it", polls)
            sleep(max(0.0, min(poll_seconds, end - clock())))
    except KeyboardInterrupt:
        _delete_quietly(client, manifest)
        raise


def _words(s: State) -> str:
    text = s.reason or s.phase
    return f"{text}: {s.message}" if s.message else text


def _delete_quietly(client: Client, manifest: dict) -> None:
    try:
        client.delete(manifest)
    except ApiError:
        pass  # already gone, or the API is down: the job's own deadline still ends it
