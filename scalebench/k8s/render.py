"""Manifests of a launch plan, a pure function: Horovod as an MPIJob (kubeflow.org/v2beta1),
DDP as a TrainJob (trainer.kubeflow.org/v1alpha1, Trainer 2.3) or a PyTorchJob
(kubeflow.org/v1), Ray Train as a RayJob (ray.io/v1).

Every pod that runs a sweep runs the same shell script: write the workload from the
environment, `scalebench sweep` it, then (in the pod that holds the records) `scalebench k8s
emit`, which prints one `SCALEBENCH_RESULT {json}` line per record for clusters without a
shared volume. Every job gets GPU limits, an in-memory /dev/shm, the results volume at
/results, a deadline from the sweep's timeout and labels with the sweep and run ids.
"""

from __future__ import annotations

import shlex
from typing import Any

import yaml

from scalebench.k8s.plan import RESULTS_MOUNT, WORKLOAD_FILE, Launch, Plan

GPU = "nvidia.com/gpu"
LABEL_PREFIX = "scalebench"
WORKLOAD_VAR = "SCALEBENCH_WORKLOAD"
SHM = "dshm"
RESULTS = "results"
PATCH_MANAGER = "scalebench/k8s-render"


def labels(plan: Plan, launch: Launch) -> dict[str, str]:
    return {f"{LABEL_PREFIX}/sweep-id": plan.target.sweep_id,
            f"{LABEL_PREFIX}/run": launch.name,
            f"{LABEL_PREFIX}/framework": launch.framework,
            f"{LABEL_PREFIX}/nodes": str(launch.nodes)}


def pod_script(launch: Launch, start_sshd: bool = False) -> str:
    """The shell script of the pod(s) that run the sweep; exits with the sweep's status."""
    def arg(a: str) -> str:
        return f'"{a}"' if "$" in a else shlex.quote(a)

    sweep = " ".join(["scalebench", "sweep", WORKLOAD_FILE, *map(arg, launch.sweep_args)])
    emit = f"scalebench k8s emit {shlex.quote(launch.out)}"
    lines = ["set -u", f'printf "%s\\n" "${WORKLOAD_VAR}" > {WORKLOAD_FILE}']
    if start_sshd:
        # horovodrun reaches every host of the hostfile over SSH, this pod's own name included
        lines.append("/usr/sbin/sshd")
    lines += ["status=0", f"{sweep} || status=$?"]
    emit_line = f'{emit} || {{ rc=$?; [ "$status" -ne 0 ] || status=$rc; }}'
    if launch.rank_var:
        emit_line = f'if [ "${{{launch.rank_var}:-0}}" = 0 ]; then {emit_line}; fi'
    lines += [emit_line, 'exit "$status"']
    return "\n".join(lines) + "\n"


def _env(plan: Plan, launch: Launch) -> list[dict[str, str]]:
    return [{"name": WORKLOAD_VAR, "value": plan.workload_text},
            {"name": "PYTHONUNBUFFERED", "value": "1"},
            *({"name": k, "value": v} for k, v in launch.env)]


def _volumes(plan: Plan) -> list[dict[str, Any]]:
    pvc = plan.target.results_pvc
    return [{"name": SHM, "emptyDir": {"medium": "Memory"}},
            {"name": RESULTS, **({"persistentVolumeClaim": {"claimName": pvc}} if pvc
                                 else {"emptyDir": {}})}]


def _mounts() -> list[dict[str, str]]:
    return [{"name": SHM, "mountPath": "/dev/shm"}, {"name": RESULTS, "mountPath": RESULTS_MOUNT}]


def _gpus(count: int) -> dict[str, Any]:
    return {"limits": {GPU: count}}


def _metadata(plan: Plan, launch: Launch) -> dict[str, Any]:
    return {"name": launch.name, "namespace": plan.target.namespace,
            "labels": labels(plan, launch)}


def _container(plan: Plan, launch: Launch, name: str, gpus: int, script: str | None,
               command: list[str] | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": name, "image": plan.target.image}
    if script is not None:
        container["command"] = ["sh", "-c", script]
        container["env"] = _env(plan, launch)
    elif command is not None:
        container["command"] = command
    if gpus:
        container["resources"] = _gpus(gpus)
    container["volumeMounts"] = _mounts()
    return container


def _pod(plan: Plan, launch: Launch, containers: list[dict]) -> dict[str, Any]:
    return {"metadata": {"labels": labels(plan, launch)},
            "spec": {"restartPolicy": "Never", "containers": containers,
                     "volumes": _volumes(plan)}}


def mpijob(plan: Plan, launch: Launch) -> dict[str, Any]:
    """The launcher runs the sweep and is also a worker (runLauncherAsWorker): the sweep checks
    the GPU it measures on before it launches anything, so it must see one."""
    gpus = plan.target.gpus_per_node
    launcher = _container(plan, launch, "launcher", gpus, pod_script(launch, start_sshd=True))
    replicas: dict[str, Any] = {"Launcher": {"replicas": 1, "restartPolicy": "Never",
                                             "template": _pod(plan, launch, [launcher])}}
    if launch.nodes > 1:
        worker = _container(plan, launch, "worker", gpus, None, ["/usr/sbin/sshd", "-De"])
        replicas["Worker"] = {"replicas": launch.nodes - 1, "restartPolicy": "Never",
                              "template": _pod(plan, launch, [worker])}
    return {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
            "metadata": _metadata(plan, launch),
            "spec": {"slotsPerWorker": gpus, "runLauncherAsWorker": True,
                     "launcherCreationPolicy": "WaitForWorkersReady",
                     "mpiImplementation": "OpenMPI",
                     "runPolicy": {"cleanPodPolicy": "Running", "backoffLimit": 0,
                                   "activeDeadlineSeconds": launch.deadline_seconds,
                                   "ttlSecondsAfterFinished": plan.target.ttl_seconds},
                     "mpiReplicaSpecs": replicas}}


def trainjob(plan: Plan, launch: Launch) -> dict[str, Any]:
    """Trainer 2.3: the torch-distributed runtime, numProcPerNode an integer, volumes through
    runtimePatches (the node container's env stays in spec.trainer.env)."""
    gpus = plan.target.gpus_per_node
    pod = {"metadata": {"labels": labels(plan, launch)},
           "spec": {"volumes": _volumes(plan),
                    "containers": [{"name": "node", "volumeMounts": _mounts()}]}}
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": _metadata(plan, launch),
            "spec": {"runtimeRef": {"apiGroup": "trainer.kubeflow.org",
                                    "kind": "ClusterTrainingRuntime", "name": "torch-distributed"},
                     "activeDeadlineSeconds": launch.deadline_seconds,
                     "trainer": {"image": plan.target.image,
                                 "command": ["sh", "-c", pod_script(launch)],
                                 "env": _env(plan, launch), "numNodes": launch.nodes,
                                 "numProcPerNode": gpus, "resourcesPerNode": _gpus(gpus)},
                     "runtimePatches": [{"manager": PATCH_MANAGER, "trainingRuntimeSpec": {
                         "template": {"spec": {"replicatedJobs": [{"name": "node", "template": {
                             "spec": {"template": pod}}}]}}}}]}}


def pytorchjob(plan: Plan, launch: Launch) -> dict[str, Any]:
    """Kubeflow Trainer v1's PyTorchJob: a Master and nodes - 1 Workers, container `pytorch`."""
    gpus = plan.target.gpus_per_node
    replica = {"restartPolicy": "Never", "template": _pod(plan, launch, [
        _container(plan, launch, "pytorch", gpus, pod_script(launch))])}
    replicas: dict[str, Any] = {"Master": {"replicas": 1, **replica}}
    if launch.nodes > 1:
        replicas["Worker"] = {"replicas": launch.nodes - 1, **replica}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": _metadata(plan, launch),
            "spec": {"nprocPerNode": str(gpus),
                     "runPolicy": {"cleanPodPolicy": "None", "backoffLimit": 0,
                                   "activeDeadlineSeconds": launch.deadline_seconds,
                                   "ttlSecondsAfterFinished": plan.target.ttl_seconds},
                     "pytorchReplicaSpecs": replicas}}


def rayjob(plan: Plan, launch: Launch) -> dict[str, Any]:
    """The head is the first GPU node (the sweep on it checks the GPU before it launches), the
    other nodes one worker group; the cluster goes away when the job ends."""
    gpus = plan.target.gpus_per_node
    env = {e["name"]: e["value"] for e in _env(plan, launch)}
    head = _container(plan, launch, "ray-head", gpus, None)
    cluster: dict[str, Any] = {"headGroupSpec": {"rayStartParams": {},
                                                 "template": _pod(plan, launch, [head])}}
    if launch.nodes > 1:
        worker = _container(plan, launch, "ray-worker", gpus, None)
        count = launch.nodes - 1
        cluster["workerGroupSpecs"] = [{"groupName": "gpu", "replicas": count,
                                        "minReplicas": count, "maxReplicas": count,
                                        "rayStartParams": {},
                                        "template": _pod(plan, launch, [worker])}]
    for group in [cluster["headGroupSpec"], *cluster.get("workerGroupSpecs", [])]:
        del group["template"]["spec"]["restartPolicy"]  # KubeRay manages its pods' restarts
    return {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": _metadata(plan, launch),
            "spec": {"entrypoint": shlex.join(["sh", "-c", pod_script(launch)]),
                     "runtimeEnvYAML": to_yaml({"env_vars": env}),
                     "shutdownAfterJobFinishes": True,
                     "ttlSecondsAfterFinished": plan.target.ttl_seconds,
                     "activeDeadlineSeconds": launch.deadline_seconds, "backoffLimit": 0,
                     "rayClusterSpec": cluster}}


def manifest(plan: Plan, launch: Launch) -> dict[str, Any]:
    if launch.framework == "horovod":
        return mpijob(plan, launch)
    if launch.framework == "ray":
        return rayjob(plan, launch)
    if launch.framework == "ddp":
        return trainjob(plan, launch) if plan.target.ddp_kind == "trainjob" else pytorchjob(plan, launch)
    raise ValueError(f"no Kubernetes job for framework {launch.framework!r}")


def manifests(plan: Plan) -> list[dict[str, Any]]:
    return [manifest(plan, launch) for launch in plan.launches]


def to_yaml(manifest: dict[str, Any]) -> str:
    """One manifest as YAML; multi-line strings (the pod script, the workload) as blocks."""
    return yaml.dump(manifest, Dumper=_BlockDumper, sort_keys=False, width=100)


class _BlockDumper(yaml.SafeDumper):
    pass


def _str(dumper: yaml.SafeDumper, value: str):
    style = "|" if "\n" in value else None  # PyYAML quotes it where a block cannot hold it
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _str)
