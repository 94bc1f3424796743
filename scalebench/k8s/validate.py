"""Strict, offline validation of a manifest against the vendored CRD of its kind.

The CRDs as published accept unknown fields (their object schemas list properties but do not
refuse others), so a misspelt field would pass. Every object schema that lists properties gets
`additionalProperties: false` here (x-kubernetes-preserve-unknown-fields ones keep their
freedom). What the API server checks outside the CRD's openAPIV3Schema is checked by hand: the
CEL rules that matter (names within 63 characters, positive process counts), and core
Kubernetes' own rules for the fields the schemas leave open (object metadata, label syntax,
container, volume and environment names, volume mounts that name a volume of the pod).
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from scalebench.spec.errors import UserError

VENDOR = Path(__file__).resolve().parent / "vendor"

# (apiVersion, kind) -> the vendored CRD file (PROVENANCE.tsv: the release each comes from)
CRDS = {
    ("kubeflow.org/v2beta1", "MPIJob"): "kubeflow.org_mpijobs.yaml",
    ("trainer.kubeflow.org/v1alpha1", "TrainJob"): "trainer.kubeflow.org_trainjobs.yaml",
    ("trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime"):
        "trainer.kubeflow.org_clustertrainingruntimes.yaml",
    ("kubeflow.org/v1", "PyTorchJob"): "kubeflow.org_pytorchjobs.yaml",
    ("ray.io/v1", "RayJob"): "ray.io_rayjobs.yaml",
}

# Core Kubernetes' name rules (k8s.io/apimachinery/pkg/util/validation).
DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
LABEL_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
ENV_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")
OBJECT_META = ("name", "namespace", "labels", "annotations", "generateName", "finalizers",
               "ownerReferences")


# libyaml's loader where PyYAML has it: the 1.4 MB RayJob CRD in 0.5 s instead of about 10 s
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml_documents(text: str) -> list[dict]:
    """The non-empty documents of a YAML stream."""
    return [d for d in yaml.load_all(text, Loader=_LOADER) if d is not None]


def strict(schema: Any) -> Any:
    """A copy of an openAPIV3Schema that refuses fields it does not list."""
    schema = copy.deepcopy(schema)
    _close(schema)
    return schema


def _close(node: Any) -> None:
    if not isinstance(node, dict):
        return
    if ("properties" in node and "additionalProperties" not in node
            and not node.get("x-kubernetes-preserve-unknown-fields")):
        node["additionalProperties"] = False
    for child in node.get("properties", {}).values():
        _close(child)
    for key in ("items", "additionalProperties"):
        _close(node.get(key))
    for key in ("anyOf", "allOf", "oneOf"):
        for child in node.get(key, ()):
            _close(child)


@functools.cache
def crd_schema(api_version: str, kind: str) -> dict:
    """The strict openAPIV3Schema of one kind at one version (read once per process)."""
    name = CRDS.get((api_version, kind))
    if name is None:
        known = ", ".join(f"{k} ({v})" for v, k in CRDS)
        raise UserError(f"kind: {kind} {api_version} has no vendored CRD; known: {known}")
    crd = load_yaml_documents((VENDOR / name).read_text())[0]
    group, _, version = api_version.partition("/")
    if crd["spec"]["group"] != group or crd["spec"]["names"]["kind"] != kind:
        raise ValueError(f"{name} defines {crd['spec']['names']['kind']} in {crd['spec']['group']}")
    for entry in crd["spec"]["versions"]:
        if entry["name"] == version:
            return strict(entry["schema"]["openAPIV3Schema"])
    raise ValueError(f"{name} has no version {version}")


def problems(manifest: Any) -> list[str]:
    """Everything wrong with one manifest, each as `path: what` (empty: it is valid)."""
    if not isinstance(manifest, dict):
        return [f"manifest: expected a mapping, got {type(manifest).__name__}"]
    api_version, kind = manifest.get("apiVersion"), manifest.get("kind")
    if (api_version, kind) not in CRDS:
        known = ", ".join(f"{k} {v}" for v, k in CRDS)
        return [f"apiVersion/kind: {kind} {api_version} is not one this validator knows ({known})"]
    validator = jsonschema.Draft7Validator(crd_schema(api_version, kind))
    found = [f"{_path(error.absolute_path)}: {error.message}"
             for error in validator.iter_errors(manifest)]
    found += _metadata_problems(manifest.get("metadata"))
    found += _pod_problems(manifest)
    found += KIND_CHECKS[kind](manifest.get("spec") or {})
    return sorted(set(found))


def check(manifest: dict) -> None:
    """Raise a one-line UserError naming the first problem (render's own output must pass)."""
    found = problems(manifest)
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        name = (manifest.get("metadata") or {}).get("name")
        raise UserError(f"{manifest.get('kind')} {name}: {found[0]}{more}")


def _path(parts) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top)"


def _metadata_problems(meta: Any) -> list[str]:
    if not isinstance(meta, dict):
        return ["metadata: required, with a name"]
    found = [f"metadata.{key}: not an ObjectMeta field" for key in meta if key not in OBJECT_META]
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        found.append("metadata.name: required")
    elif len(name) > 63 or not DNS1035_LABEL.fullmatch(name):
        found.append(f"metadata.name: {name!r} is not an RFC 1035 label (lower-case letters, "
                     "digits and '-', starting with a letter, at most 63 characters)")
    namespace = meta.get("namespace")
    if namespace is not None and (not isinstance(namespace, str) or len(namespace) > 63
                                  or not DNS1123_LABEL.fullmatch(namespace)):
        found.append(f"metadata.namespace: {namespace!r} is not an RFC 1123 label")
    return found + _label_problems("metadata.labels", meta.get("labels"))


def _label_problems(where: str, labels: Any) -> list[str]:
    if labels is None:
        return []
    if not isinstance(labels, dict):
        return [f"{where}: expected a mapping"]
    found = []
    for key, value in labels.items():
        prefix, _, name = key.rpartition("/")
        if (prefix and (len(prefix) > 253 or not DNS1123_SUBDOMAIN.fullmatch(prefix))) \
                or len(name) > 63 or not LABEL_NAME.fullmatch(name):
            found.append(f"{where}: key {key!r} is not a label key ([prefix/]name, name at most "
                         "63 characters of letters, digits, '-', '_', '.')")
        if not isinstance(value, str) or len(value) > 63 \
                or (value and not LABEL_NAME.fullmatch(value)):
            found.append(f"{where}.{key}: value {value!r} is not a label value (at most 63 "
                         "characters of letters, digits, '-', '_', '.', alphanumeric at both ends)")
    return found


def pod_specs(node: Any, path: str = "") -> Iterator[tuple[str, dict]]:
    """(path, pod spec) for every pod spec inside a manifest (a mapping with containers)."""
    if isinstance(node, dict):
        if isinstance(node.get("containers"), list):
            yield path, node
        for key, child in node.items():
            yield from pod_specs(child, f"{path}.{key}" if path else key)
    elif isinstance(node, list):
        for i, child in enumerate(node):
            yield from pod_specs(child, f"{path}[{i}]")


def _pod_problems(manifest: dict) -> list[str]:
    found = []
    for path, pod in pod_specs(manifest.get("spec"), "spec"):
        volumes = [v.get("name") for v in pod.get("volumes") or [] if isinstance(v, dict)]
        found += [f"{path}.volumes: {name!r} is not an RFC 1123 label" for name in volumes
                  if not isinstance(name, str) or not DNS1123_LABEL.fullmatch(name)]
        found += [f"{path}.volumes: {name!r} twice" for name in set(volumes)
                  if volumes.count(name) > 1]
        names = []
        for group in ("initContainers", "containers"):
            for i, container in enumerate(pod.get(group) or []):
                if not isinstance(container, dict):
                    continue
                where = f"{path}.{group}[{i}]"
                name = container.get("name")
                names.append(name)
                if not isinstance(name, str) or len(name) > 63 \
                        or not DNS1123_LABEL.fullmatch(name):
                    found.append(f"{where}.name: {name!r} is not an RFC 1123 label")
                for env in container.get("env") or []:
                    if isinstance(env, dict) and not ENV_NAME.fullmatch(str(env.get("name"))):
                        found.append(f"{where}.env: {env.get('name')!r} is not a variable name")
                for mount in container.get("volumeMounts") or []:
                    if isinstance(mount, dict) and mount.get("name") not in volumes:
                        found.append(f"{where}.volumeMounts: {mount.get('name')!r} names no "
                                     f"volume of the pod ({', '.join(map(str, volumes)) or 'none'})")
        found += [f"{path}.containers: {name!r} twice" for name in set(names)
                  if names.count(name) > 1]
    for path, meta in _template_metadata(manifest.get("spec"), "spec"):
        found += _label_problems(f"{path}.labels", meta.get("labels"))
    return found


def _template_metadata(node: Any, path: str) -> Iterator[tuple[str, dict]]:
    if isinstance(node, dict):
        for key, child in node.items():
            where = f"{path}.{key}"
            if key == "template" and isinstance(child, dict) and isinstance(child.get("metadata"),
                                                                            dict):
                yield f"{where}.metadata", child["metadata"]
            yield from _template_metadata(child, where)
    elif isinstance(node, list):
        for i, child in enumerate(node):
            yield from _template_metadata(child, f"{path}[{i}]")


def _positive(where: str, value: Any) -> list[str]:
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        return []
    return [f"{where}: {value!r} must be a positive count"]


def _mpijob(spec: dict) -> list[str]:
    found = _positive("spec.slotsPerWorker", spec.get("slotsPerWorker"))
    replicas = spec.get("mpiReplicaSpecs") or {}
    found += [f"spec.mpiReplicaSpecs.{key}: not a replica type (Launcher, Worker)"
              for key in replicas if key not in ("Launcher", "Worker")]
    launcher = replicas.get("Launcher")
    if not isinstance(launcher, dict):
        return found + ["spec.mpiReplicaSpecs.Launcher: required"]
    if launcher.get("replicas", 1) != 1:
        found.append(f"spec.mpiReplicaSpecs.Launcher.replicas: must be 1, got "
                     f"{launcher.get('replicas')!r}")
    worker = replicas.get("Worker") or {}
    found += _positive("spec.mpiReplicaSpecs.Worker.replicas", worker.get("replicas"))
    hosts = (worker.get("replicas", 0) if isinstance(worker.get("replicas", 0), int) else 0) \
        + (1 if spec.get("runLauncherAsWorker") else 0)
    slots = spec.get("slotsPerWorker", 1) if isinstance(spec.get("slotsPerWorker", 1), int) else 1
    for i, container in enumerate(_containers(launcher)):
        command = [str(a) for a in (container.get("command") or []) + (container.get("args") or [])]
        for flag in ("-np", "-n"):
            if flag in command[:-1] and command[command.index(flag) + 1].isdigit():
                np = int(command[command.index(flag) + 1])
                if np > hosts * slots:
                    found.append(f"spec.mpiReplicaSpecs.Launcher.template.spec.containers[{i}]: "
                                 f"{flag} {np} is more than workers x slotsPerWorker "
                                 f"({hosts} x {slots})")
    return found


def _trainjob(spec: dict) -> list[str]:
    trainer = spec.get("trainer") or {}
    found = _positive("spec.trainer.numNodes", trainer.get("numNodes"))
    found += _positive("spec.trainer.numProcPerNode", trainer.get("numProcPerNode"))
    # Trainer's webhook: a runtime patch may not set env of the containers it manages (their
    # env goes in spec.trainer.env).
    for i, patch in enumerate(spec.get("runtimePatches") or []):
        for path, pod in pod_specs(patch, f"spec.runtimePatches[{i}]"):
            for container in pod.get("containers") or []:
                if container.get("name") in ("node", "dataset-initializer", "model-initializer") \
                        and container.get("env"):
                    found.append(f"{path}.containers: env of {container['name']!r} belongs in "
                                 "spec.trainer.env")
    return found


def _pytorchjob(spec: dict) -> list[str]:
    replicas = spec.get("pytorchReplicaSpecs") or {}
    found = [f"spec.pytorchReplicaSpecs.{key}: not a replica type (Master, Worker)"
             for key in replicas if key not in ("Master", "Worker")]
    for key, replica in replicas.items():
        if not isinstance(replica, dict):
            continue
        found += _positive(f"spec.pytorchReplicaSpecs.{key}.replicas", replica.get("replicas"))
        if "pytorch" not in [c.get("name") for c in _containers(replica)]:
            found.append(f"spec.pytorchReplicaSpecs.{key}: the training container must be "
                         "named 'pytorch' (the operator finds it by that name)")
    nproc = spec.get("nprocPerNode")
    if nproc is not None and nproc not in ("auto", "cpu", "gpu") \
            and not (str(nproc).isdigit() and int(nproc) >= 1):
        found.append(f"spec.nprocPerNode: {nproc!r} must be a positive count, auto, cpu or gpu")
    return found


def _rayjob(spec: dict) -> list[str]:
    found = []
    for i, group in enumerate((spec.get("rayClusterSpec") or {}).get("workerGroupSpecs") or []):
        low, count, high = (group.get("minReplicas", 0), group.get("replicas"),
                            group.get("maxReplicas"))
        if isinstance(count, int) and ((isinstance(low, int) and count < low)
                                       or (isinstance(high, int) and count > high)):
            found.append(f"spec.rayClusterSpec.workerGroupSpecs[{i}].replicas: {count} is outside "
                         f"minReplicas..maxReplicas ({low}..{high})")
    return found


def _containers(replica: dict) -> list[dict]:
    return [c for c in ((replica.get("template") or {}).get("spec") or {}).get("containers") or []
            if isinstance(c, dict)]


KIND_CHECKS = {"MPIJob": _mpijob, "TrainJob": _trainjob, "PyTorchJob": _pytorchjob,
               "RayJob": _rayjob, "ClusterTrainingRuntime": lambda spec: []}
