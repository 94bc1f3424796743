"""`scalebench sweep --launcher k8s` (experimental): the sweep's flags for Kubernetes, what they
refuse, and the call into running/k8s_sweep.py (or, with --dry-run, the manifests it would
create, validated)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from scalebench.hardware.devices import DeviceInfo
from scalebench.k8s import plan as k8s_plan
from scalebench.records.schema import new_sweep_id
from scalebench.spec import config, fields, toml_text
from scalebench.spec.config import SweepSpec
from scalebench.spec.errors import UserError
from scalebench.tasks import train

CUDA = DeviceInfo("cuda", "nccl", 1, 1)  # what the pods' sweeps run on, for checks made here

# flag dest -> the flag, for the "only with --launcher k8s" refusal
K8S_FLAGS = {"image": "--image", "gpus_per_node": "--gpus-per-node", "nodes": "--nodes",
             "namespace": "--namespace", "results_pvc": "--results-pvc",
             "ddp_kind": "--ddp-kind", "run_name": "--run-name", "ttl": "--ttl",
             "k8s_api": "--k8s-api", "k8s_poll": "--k8s-poll",
             "k8s_pending_timeout": "--k8s-pending-timeout",
             "k8s_results_dir": "--k8s-results-dir", "dry_run": "--dry-run"}
# What the k8s launcher sets for every job itself, or cannot carry into the pods.
REFUSED = {"resume": "each launch is one job; run the launches still missing with --nodes",
           "vet_file": "vetting places runs on the nodes of a Slurm allocation",
           "tuned": "the tuned file is not in the pods; not supported yet"}
SET_PER_JOB = (("ddp", "nnodes"), ("ddp", "node_rank"), ("ddp", "rdzv_endpoint"),
               ("horovod", "hosts"), ("horovod", "hostfile"), ("ray", "address"))


def add_target_flags(p) -> None:
    """What a sweep asks of the cluster (`k8s render` and `sweep --launcher k8s`)."""
    p.add_argument("--image", help="container image with scalebench, pinned: NAME:TAG or "
                   "NAME@sha256:...; required")
    p.add_argument("--gpus-per-node", help="GPUs per node (one worker each); required")
    p.add_argument("--nodes", help="comma list of node counts, e.g. 1,2,4; required")
    p.add_argument("--namespace", help="namespace of the jobs (default: default)")
    p.add_argument("--results-pvc", help="a ReadWriteMany PersistentVolumeClaim mounted at "
                   "/results in every pod (needed by Horovod and Ray on several nodes); "
                   "without it, an emptyDir and the records come back through the logs")
    p.add_argument("--ddp-kind", help="trainjob (Kubeflow Trainer v2, default) or pytorchjob "
                   "(Trainer v1)")
    p.add_argument("--run-name", help="prefix of the job names (default: the workload's name)")
    p.add_argument("--ttl", help="seconds a finished job and its pods are kept (default 3600)")


def add_api_flags(p) -> None:
    p.add_argument("--k8s-api", help="the API server's URL, e.g. http://127.0.0.1:8001 under "
                   "`kubectl proxy` (default: the in-cluster service account, else the "
                   "kubeconfig's current context)")
    p.add_argument("--k8s-poll", help="seconds between status reads (default 10)")


def target_from_args(args: argparse.Namespace, workload_name: str) -> k8s_plan.Target:
    for field, example in (("image", "--image registry.example/scalebench:0.1.0"),
                           ("gpus_per_node", "--gpus-per-node 8"), ("nodes", "--nodes 1,2,4")):
        if not getattr(args, field):
            raise UserError(f"{field}: required with Kubernetes, e.g. {example}")
    nodes = tuple(sorted(set(fields.workers(args.nodes, "nodes"))))
    return k8s_plan.Target(
        image=args.image, gpus_per_node=fields.integer("gpus_per_node", args.gpus_per_node, 1),
        nodes=nodes, run_name=args.run_name or k8s_plan.default_run_name(workload_name),
        sweep_id=new_sweep_id(), namespace=args.namespace or "default",
        results_pvc=args.results_pvc, ddp_kind=args.ddp_kind or "trainjob",
        ttl_seconds=fields.integer("ttl", args.ttl or "3600", 0))


@dataclass(frozen=True)
class Rendered:
    launch: k8s_plan.Launch
    manifest: dict
    pod_spec: SweepSpec  # the sweep its pods run, as they will parse it

    @property
    def file_name(self) -> str:
        return f"{self.launch.name}.yaml"


def render_values(values: dict, text: str, target: k8s_plan.Target,
                  pod_values_of: Callable[[dict, list[str]], dict]) -> list[Rendered]:
    """Every launch's manifest and its pods' sweep; each pod's command line is checked by the
    sweep's own parser (pod_values_of: commands.sweep.pod_sweep_values) and validation, and
    each manifest by the operators' CRDs, before
    anything is written or applied."""
    # yaml and jsonschema only here: every other command (a sweep on a bare GPU machine among
    # them) imports this module and must not need them
    from scalebench.k8s import render as k8s_render
    from scalebench.k8s import validate

    launch_plan = k8s_plan.plan(values, text, target)
    rendered = []
    for launch in launch_plan.launches:
        pod_spec = config.build_spec(pod_values_of(values, launch.sample_args()))
        train.check_warmup(pod_spec.warmup, CUDA)
        manifest = k8s_render.manifest(launch_plan, launch)
        validate.check(manifest)
        rendered.append(Rendered(launch, manifest, pod_spec))
    return rendered


def add_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("Kubernetes (--launcher k8s, experimental: docs/kubernetes.md)")
    add_target_flags(g)
    add_api_flags(g)
    g.add_argument("--k8s-pending-timeout", help="seconds a job may take to start running "
                   "(image pulls, scheduling) before it is deleted and its runs recorded as "
                   "timeout (default 900)")
    g.add_argument("--k8s-results-dir", help="a local mount of --results-pvc: records are read "
                   "from it instead of the pods' logs")
    g.add_argument("--dry-run", action="store_true", default=None,
                   help="print the validated manifests it would create; create nothing")


def refuse_flags(args: argparse.Namespace, launcher: str) -> None:
    """Kubernetes flags with another launcher: one line naming the first of them."""
    given = [flag for dest, flag in K8S_FLAGS.items() if getattr(args, dest, None)]
    if given:
        raise UserError(f"{given[0].lstrip('-').replace('-', '_')}: only with --launcher k8s "
                        f"(launcher {launcher} takes none of {', '.join(K8S_FLAGS.values())})")


def pod_workload(values: dict) -> dict:
    """The sweep's values as its pods get them (each job's flags add the rest)."""
    for key, why in REFUSED.items():
        if values.get(key):
            raise UserError(f"{key}: not with launcher k8s ({why})")
    if values.get("vet"):
        raise UserError(f"vet: not with launcher k8s ({REFUSED['vet_file']})")
    for section, key in SET_PER_JOB:
        if (values.get(section) or {}).get(key) is not None:
            raise UserError(f"{section}.{key}: set by the k8s launcher for each job from "
                            "--nodes and the operator; drop it")
    return {k: v for k, v in values.items() if k not in ("out", "launcher", "resume")}


def run(args: argparse.Namespace, values: dict,
        pod_values_of: Callable[[dict, list[str]], dict]):
    """The sweep's outcome (None after --dry-run)."""
    pod_values = pod_workload(values)
    spec = config.build_spec(values)  # every field checked as for any launcher
    target = target_from_args(args, str(values.get("name", "default")))
    rendered = render_values(pod_values, toml_text.workload(pod_values), target, pod_values_of)
    if args.dry_run:
        dry_run(rendered, target)
        return None
    from scalebench.running import k8s_sweep

    cluster = k8s_sweep.Cluster(
        api_url=args.k8s_api,
        results_dir=Path(args.k8s_results_dir) if args.k8s_results_dir else None,
        poll_seconds=fields.number("k8s_poll", args.k8s_poll or "10", 0),
        pending_seconds=fields.number("k8s_pending_timeout",
                                      args.k8s_pending_timeout or str(k8s_sweep.STARTUP_SECONDS),
                                      0))
    submissions = [k8s_sweep.Submission(r.launch, r.manifest,
                                        k8s_sweep.pod_jobs(r.launch, r.pod_spec), target.image)
                   for r in rendered]
    print(f"sweep {target.sweep_id} on Kubernetes (experimental): {len(submissions)} jobs, "
          f"{sum(len(s.jobs) for s in submissions)} runs")
    progress = None
    if spec.quiet:
        from scalebench.running.progress import Progress

        progress = Progress(sum(len(s.jobs) for s in submissions), live=False)
    return k8s_sweep.run_k8s_sweep(submissions, Path(spec.out), target.sweep_id, cluster,
                                   report=spec.report, progress=progress)


def dry_run(rendered: list[Rendered], target: k8s_plan.Target) -> None:
    from scalebench.k8s import render as k8s_render

    for one in rendered:
        print(f"# {one.file_name}: {one.manifest['kind']} {one.launch.name}, "
              f"{one.launch.deadline_seconds} s deadline")
        print(k8s_render.to_yaml(one.manifest), end="")
        print("---")
    print(f"# dry run: {len(rendered)} jobs of sweep {target.sweep_id} validated against the "
          f"{', '.join(sorted({r.manifest['kind'] for r in rendered}))} CRDs; nothing created")
