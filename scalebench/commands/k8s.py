"""scalebench k8s render|emit|collect|watch: a sweep as Kubernetes operator jobs
(docs/kubernetes.md).

render: one validated manifest per framework x node count; emit (inside a pod): the records of
a sweep folder as SCALEBENCH_RESULT lines; collect: those lines from logs into a results.jsonl;
watch: follow one job to its end. `sweep --launcher k8s` (commands/k8s_sweep.py) does all of
it for a whole sweep.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from scalebench.commands.k8s_sweep import add_api_flags, add_target_flags, render_values, target_from_args
from scalebench.commands.sweep import pod_sweep_values
from scalebench.k8s import plan as k8s_plan
from scalebench.k8s import results as k8s_results
from scalebench.spec import config, fields
from scalebench.spec.errors import UserError


def register(sub) -> None:
    p = sub.add_parser("k8s", help="run a sweep on Kubernetes: render operator jobs (MPIJob, "
                       "TrainJob/PyTorchJob, RayJob), read their results back from logs")
    verbs = p.add_subparsers(dest="k8s_command", required=True, parser_class=type(p))
    r = verbs.add_parser("render", help="one manifest per framework x node count, validated "
                         "against the operators' CRDs")
    r.add_argument("workload", nargs="?", help="workload TOML file (default: the defaults)")
    add_target_flags(r)
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
    w = verbs.add_parser("watch", help="follow one operator job to its end, printing its state "
                         "changes; exit 0 succeeded, 1 failed or still running at --timeout")
    w.add_argument("job", help="KIND/NAME: mpijob/NAME, trainjob/NAME, pytorchjob/NAME or "
                   "rayjob/NAME")
    w.add_argument("--namespace", default="default", help="namespace of the job")
    add_api_flags(w)
    w.add_argument("--timeout", default="86400", help="seconds to follow it (default a day); "
                   "the job is left as it is")
    w.set_defaults(run=run_watch)


def run_render(args: argparse.Namespace) -> int:
    from scalebench.k8s import render as k8s_render

    values = config.load_workload(args.workload) if args.workload else {"name": "default"}
    text = Path(args.workload).read_text() if args.workload else ""
    target = target_from_args(args, str(values.get("name", "default")))
    rendered = render_values(values, text, target, pod_sweep_values)
    out = Path(args.out or f"k8s/{target.run_name}")
    out.mkdir(parents=True, exist_ok=True)
    for one in rendered:
        (out / one.file_name).write_text(k8s_render.to_yaml(one.manifest))
        print(f"wrote {out / one.file_name}: {one.manifest['kind']} "
              f"{one.manifest['metadata']['name']}, deadline {one.launch.deadline_seconds} s")
    print(f"sweep id {target.sweep_id}; validated against the "
          f"{', '.join(sorted({r.manifest['kind'] for r in rendered}))} CRDs; apply with: "
          f"kubectl apply -f {out}")
    return 0


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


def run_watch(args: argparse.Namespace) -> int:
    from scalebench.k8s import api, watch

    manifest = job_manifest(args.job, args.namespace)
    timeout = fields.number("timeout", args.timeout, 0)
    poll = fields.number("k8s_poll", args.k8s_poll or "10", 0)
    name = f"{manifest['kind']} {manifest['metadata']['name']}"

    def report(state) -> None:
        print(f"{time.strftime('%H:%M:%S')} {name}: {state.phase} ({watch.words(state)})",
              flush=True)

    with api.connect(args.k8s_api) as client:
        outcome = watch.watch(client, manifest, timeout, poll, delete=False, on_state=report)
    print(f"{name}: {outcome.status}" + (f": {outcome.error}" if outcome.error else ""))
    return 0 if outcome.status == "ok" else 1


def job_manifest(job: str, namespace: str) -> dict:
    """KIND/NAME (kind in any case, singular or plural) as the manifest the watcher reads."""
    from scalebench.k8s import api

    kind_text, _, name = job.partition("/")
    kinds = {k.lower(): k for k in api.PLURALS} | {p: k for k, p in api.PLURALS.items()}
    kind = kinds.get(kind_text.lower())
    if kind is None or not name:
        allowed = ", ".join(k.lower() for k in api.PLURALS)
        raise UserError(f"job: KIND/NAME with KIND one of {allowed}, got {job!r}")
    k8s_plan.check_label("namespace", namespace, k8s_plan.NAMESPACE, "an RFC 1123 label")
    return {"apiVersion": api.API_VERSIONS[kind], "kind": kind,
            "metadata": {"name": name, "namespace": namespace}}
