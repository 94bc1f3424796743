"""The parts of the Kubernetes API the k8s launcher uses, through the official Python client
(the `kubernetes` package): create, read and delete an operator's job (CustomObjectsApi), list
its pods and read their logs (CoreV1Api).

Imported only by the k8s launcher and the k8s commands that talk to a cluster: the client is
not needed anywhere else (a sweep on a bare GPU machine must not import it).
"""

from __future__ import annotations

import json
from typing import Any

from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import OpenApiException
from urllib3.exceptions import HTTPError

from scalebench.spec.errors import UserError

PLURALS = {"MPIJob": "mpijobs", "TrainJob": "trainjobs", "PyTorchJob": "pytorchjobs",
           "RayJob": "rayjobs"}
API_VERSIONS = {"MPIJob": "kubeflow.org/v2beta1", "TrainJob": "trainer.kubeflow.org/v1alpha1",
                "PyTorchJob": "kubeflow.org/v1", "RayJob": "ray.io/v1"}
LOG_TAIL_LINES = 20  # per pod, for a failed run's stderr_tail


class ApiError(Exception):
    def __init__(self, status: int | None, text: str):
        super().__init__(f"HTTP {status}: {text}" if status else text)
        self.status = status


def _api_error(exc: Exception, where: str) -> ApiError:
    if isinstance(exc, OpenApiException):
        status = getattr(exc, "status", None)
        text = getattr(exc, "body", None) or getattr(exc, "reason", None) or str(exc)
        try:
            text = json.loads(text).get("message", text)
        except (ValueError, TypeError, AttributeError):
            pass
        return ApiError(status, str(text)[:300])
    return ApiError(None, f"{where}: {type(exc).__name__}: {exc}"[:300])


class Client:
    """One connection to an API server; every failure is an ApiError."""

    def __init__(self, configuration: k8s_client.Configuration, timeout: float = 10.0):
        # No urllib3 retries: the watch loop counts failed polls itself.
        configuration.retries = 0
        self.host = configuration.host
        self.timeout = timeout
        self.api = k8s_client.ApiClient(configuration)
        self.custom = k8s_client.CustomObjectsApi(self.api)
        self.core = k8s_client.CoreV1Api(self.api)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.api.close()

    def _call(self, method, *args, **kwargs) -> Any:
        try:
            return method(*args, _request_timeout=self.timeout, **kwargs)
        except (OpenApiException, HTTPError, OSError, ValueError) as exc:
            raise _api_error(exc, self.host) from None

    @staticmethod
    def _where(manifest: dict) -> tuple[str, str, str, str]:
        group, _, version = manifest["apiVersion"].partition("/")
        namespace = manifest["metadata"].get("namespace", "default")
        return group, version, namespace, PLURALS[manifest["kind"]]

    def create(self, manifest: dict) -> dict:
        return self._call(self.custom.create_namespaced_custom_object, *self._where(manifest),
                          manifest)

    def get(self, manifest: dict) -> dict:
        return self._call(self.custom.get_namespaced_custom_object, *self._where(manifest),
                          manifest["metadata"]["name"])

    def delete(self, manifest: dict) -> dict:
        # Foreground: the job's pods go with it, not left behind by an orphaning delete
        return self._call(self.custom.delete_namespaced_custom_object, *self._where(manifest),
                          manifest["metadata"]["name"], propagation_policy="Foreground")

    def pods(self, namespace: str, label_selector: str) -> list[dict]:
        """The pods with these labels, as the API's JSON (no model classes in between)."""
        response = self._call(self.core.list_namespaced_pod, namespace,
                              label_selector=label_selector, _preload_content=False)
        raw = response.data
        try:
            return list(json.loads(raw).get("items") or []) if raw else []
        except (ValueError, AttributeError) as exc:
            raise ApiError(None, f"{self.host}: pod list is not JSON: {exc}") from None

    def log(self, namespace: str, pod: str, container: str | None = None) -> str:
        """A container's whole log as text. Read raw: the client would parse a log that happens
        to be valid JSON and hand back its Python repr."""
        response = self._call(self.core.read_namespaced_pod_log, pod, namespace,
                              container=container, _preload_content=False)
        raw = response.data or b""
        return raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)

    def job_logs(self, manifest: dict, label: str) -> dict[str, str]:
        """Every container log of a job's pods (found by the job's own `label`): pod/container
        -> text. A pod whose log cannot be read (not started, already gone) is left out."""
        namespace = manifest["metadata"].get("namespace", "default")
        selector = f"{label}={manifest['metadata']['name']}"
        logs = {}
        for pod in self.pods(namespace, selector):
            name = pod.get("metadata", {}).get("name", "")
            containers = [c.get("name") for c in pod.get("spec", {}).get("containers") or []]
            for container in containers if len(containers) > 1 else [None]:
                try:
                    text = self.log(namespace, name, container)
                except ApiError:
                    continue
                logs[f"{name}/{container}" if container else name] = text
        return logs


def connect(api_url: str | None = None, context: str | None = None,
            timeout: float = 10.0) -> Client:
    """A client for api_url (e.g. `kubectl proxy`'s http://127.0.0.1:8001), else the pod's own
    service account when running inside a cluster, else the kubeconfig (its current context, or
    `context`)."""
    configuration = k8s_client.Configuration()
    if api_url:
        if not api_url.startswith(("http://", "https://")):
            raise UserError(f"k8s_api: a URL (http://HOST:PORT or https://...), got {api_url!r}")
        configuration.host = api_url.rstrip("/")
        return Client(configuration, timeout)
    try:
        k8s_config.load_incluster_config(client_configuration=configuration)
    except k8s_config.ConfigException:
        try:
            k8s_config.load_kube_config(context=context, client_configuration=configuration)
        except (k8s_config.ConfigException, OSError, TypeError, ValueError) as exc:
            raise UserError(f"k8s_api: no in-cluster service account and no usable kubeconfig "
                            f"({exc}); give --k8s-api URL (e.g. run `kubectl proxy` and give "
                            "http://127.0.0.1:8001)") from None
    return Client(configuration, timeout)


def log_tail(logs: dict[str, str], lines: int = LOG_TAIL_LINES, limit: int = 4000) -> str | None:
    """The last lines of each pod's log, each line prefixed with its pod (a failed run's
    stderr_tail); None when no log was read."""
    out = []
    for where, text in logs.items():
        out += [f"[{where}] {line}" for line in text.splitlines()[-lines:]]
    return "\n".join(out)[-limit:] if out else None
