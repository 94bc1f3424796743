"""scalebench k8s render|emit|collect: a sweep as Kubernetes operator jobs (docs/kubernetes.md).

render: one validated manifest per framework x node count; emit (inside a pod): the records of
a sweep folder as SCALEBENCH_RESULT lines; collect: those lines from logs into a results.jsonl.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from scalebench.k8s import plan as k8s_plan
from scalebench.k8s import results as k8s_results
from scalebench.records.schema import new_sweep_id
from scalebench.spec import config, fields
from scalebench.spec.errors import UserError


def register(sub) -> None:
    p = sub.add_parser("k8s", help="run a sweep on Kubernetes: render operator jobs (MPIJob, "
                       "TrainJob/PyTorchJob, RayJob), read their results back from logs")
    verbs = p.add_subparsers(dest="k8s_command", required=True, parser_class=type(p))
    r = verbs.add_parser("render", help="one manifest per framework x node count, validated "
                         "against the operators' CRDs")
    r.add_argument("workload", nargs="?", help="workload TOML file (default: the defaults)")
    r.add_argument("--image", required=True, help="container image with scalebench, pinned: "
                   "NAME:TAG or NAME@sha256:...")
    r.add_argument("--gpus-per-node", help="GPUs per node (one worker each); required")
    r.add_argument("--nodes", required=True, help="comma list of node counts, e.g. 1,2,4")
    r.add_argument("--namespace", default="default", help="namespace of the jobs")
    r.add_argument("--results-pvc", help="a ReadWriteMany PersistentVolumeClaim mounted at "
                   "/results in every pod (needed by Horovod and Ray on several nodes); "
                   "without it, an emptyDir and the records come back through the logs")
    r.add_argument("--ddp-kind", default="trainjob", help="trainjob (Kubeflow Trainer v2, "
                   "default) or pytorchjob (Trainer v1)")
    r.add_argument("--run-name", help="prefix of the job names (default: the workload's name)")
    r.add_argument("--ttl", default="3600", help="seconds a finished job and its pods are kept")
    r.add_argument("--out", help="folder for the manifests (default k8s/<run name>)")
    r.set_defaults(run=run_render)
    e = verbs.add_parser("emit", help="(inside a pod) print each record of a sweep folder as a "
                         "SCALEBENCH_RESULT line")
    e.add_argument("out", help="the sweep's output folder")
    e.set_defaults(run=run_emit)
    c = verbs.add_parser("collect", help="SCALEBENCH_RESULT lines of pod logs into a results "
                         "folder (then `scalebench report` it)")
    c.add_argument("logs", nargs="+", help="log files (`kubectl logs ... > FILE`), - for stdin")
    c.add_argument("--out", required=True, help="results folder to append to")
    c.set_defaults(run=run_collect)


def target_from_args(args: argparse.Namespace, workload_name: str) -> k8s_plan.Target:
    if not args.gpus_per_node:
        raise UserError("gpus_per_node: required (GPUs per node, one worker each), e.g. "
                        "--gpus-per-node 8")
    nodes = tuple(sorted(set(fields.workers(args.nodes, "nodes"))))
    return k8s_plan.Target(
        image=args.image, gpus_per_node=fields.integer("gpus_per_node", args.gpus_per_node, 1),
        nodes=nodes, run_name=args.run_name or k8s_plan.default_run_name(workload_name),
        sweep_id=new_sweep_id(), namespace=args.namespace, results_pvc=args.results_pvc,
        ddp_kind=args.ddp_kind, ttl_seconds=fields.integer("ttl", args.ttl, 0))


def pod_sweep_values(workload: str, sweep_args: list[str]) -> dict:
    """What a pod's `scalebench sweep WORKLOAD ARGS` asks, parsed by the sweep's own parser."""
    from scalebench.commands import sweep as sweep_command

    parser = argparse.ArgumentParser(prog="scalebench")
    sweep_command.register(parser.add_subparsers())
    return sweep_command.values_from_args(parser.parse_args(["sweep", workload, *sweep_args]))


def render_workload(workload: str | None,
                    args: argparse.Namespace) -> tuple[k8s_plan.Target, list[tuple[Path, dict]]]:
    """The target and (file name, manifest) of every launch; each pod's command line is checked by the sweep's
    own parser and validation, and each manifest by the operators' CRDs, before anything is
    written."""
    # yaml and jsonschema only for render: every other command (a sweep on a bare GPU machine
    # among them) imports this module and must not need them
    from scalebench.k8s import render as k8s_render
    from scalebench.k8s import validate

    values = config.load_workload(workload) if workload else {"name": "default"}
    text = Path(workload).read_text() if workload else ""
    target = target_from_args(args, str(values.get("name", "default")))
    launch_plan = k8s_plan.plan(values, text, target)
    rendered = []
    for launch in launch_plan.launches:
        if workload:
            config.build_spec(pod_sweep_values(workload, launch.sample_args()))
        manifest = k8s_render.manifest(launch_plan, launch)
        validate.check(manifest)
        rendered.append((Path(f"{launch.name}.yaml"), manifest))
    return target, rendered


def run_render(args: argparse.Namespace) -> int:
    from scalebench.k8s import render as k8s_render

    target, rendered = render_workload(args.workload, args)
    out = Path(args.out or f"k8s/{target.run_name}")
    out.mkdir(parents=True, exist_ok=True)
    for name, manifest in rendered:
        (out / name).write_text(k8s_render.to_yaml(manifest))
        spec = manifest["spec"]
        print(f"wrote {out / name}: {manifest['kind']} {manifest['metadata']['name']}, "
              f"deadline {_deadline(spec)} s")
    print(f"sweep id {target.sweep_id}; validated against the "
          f"{', '.join(sorted({m['kind'] for _, m in rendered}))} CRDs; apply with: "
          f"kubectl apply -f {out}")
    return 0


def _deadline(spec: dict) -> int:
    return spec.get("activeDeadlineSeconds") or spec["runPolicy"]["activeDeadlineSeconds"]


def run_emit(args: argparse.Namespace) -> int:
    for line in k8s_results.result_lines(Path(args.out)):
        print(line)
    return 0


def run_collect(args: argparse.Namespace) -> int:
    records, problems = [], []
    for name in args.logs:
        if name == "-":
            text = sys.stdin.read()
        else:
            try:
                text = Path(name).read_text(errors="replace")
            except OSError as exc:
                raise UserError(f"logs: cannot read {name!r}: {exc.strerror}") from None
        found, bad = k8s_results.parse(text.splitlines())
        records += found
        problems += [f"{name}: {p}" for p in bad]
    for problem in problems:
        print(f"skipped {problem}", file=sys.stderr)
    added = k8s_results.collect(records, Path(args.out))
    print(f"{len(records)} records found, {added} new in {Path(args.out) / 'results.jsonl'}")
    return 1 if problems and not records else 0
