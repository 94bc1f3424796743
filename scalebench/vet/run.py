"""`scalebench vet` as a plain function: node probes (a failing step split in halves until the
node that fails is found: unreachable) -> the schedule over the reachable nodes -> pair probes
-> verdict -> retests of the suspects -> verdict -> vet.json, the node lists, vet.md, vet.html.
Each probe is a Slurm step through the executor, all into one results.jsonl."""

from __future__ import annotations

import os
import re
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from scalebench.hardware import devices, envinfo
from scalebench.running import executor
from scalebench.running.progress import Progress
from scalebench.slurm import allocation
from scalebench.slurm.allocation import Allocation, compress_hostlist
from scalebench.spec.errors import UserError
from scalebench.vet import files, plan, topology, verdict
from scalebench.vet import schedule as schedule_mod
from scalebench.vet.options import VetOptions

OUTSIDE = ("allocation: `scalebench vet` measures the nodes of a Slurm allocation (salloc or "
           "sbatch), but SLURM_JOB_ID is not set; run it inside one")


@dataclass
class VetOutcome:
    vetting: files.Vetting
    document: dict[str, Any]
    outputs: list[Path] = field(default_factory=list)
    ok: bool = True  # every probe ran
    interrupted: bool = False


def current_allocation() -> Allocation:
    if not (os.environ.get(allocation.JOB_VAR) or os.environ.get("SLURM_JOBID")):
        raise UserError(OUTSIDE)
    return allocation.current()


def figures_of(records: Sequence[dict], nodes: Sequence[str],
               leaf_of: Mapping[str, str] | None = None,
               unreachable: Mapping[str, str] | None = None,
               retest_from: int = 0) -> verdict.Figures:
    compute, matmul, sustained, pairs, rounds = {}, {}, {}, {}, {}
    for r in records:
        if r.get("status") != "ok":
            continue
        for u in r.get("units", []):
            unit = (u["node"], int(u["device_index"]))
            compute[unit] = u["compute_images_per_sec"]
            matmul[unit] = u["matmul_flops_per_sec"]
            if u.get("sustained_flops_per_sec"):
                sustained[unit] = u["sustained_flops_per_sec"]
        for p in r.get("pairs", []):
            if p["busbw_bytes_per_sec"]:
                pairs[tuple(p["nodes"])] = p["busbw_bytes_per_sec"]
                rounds[tuple(p["nodes"])] = p["round"]
    return verdict.Figures(tuple(nodes), compute, matmul, pairs, sustained, rounds,
                           dict(leaf_of or {}), dict(unreachable or {}), retest_from)


def _check_dict(check: verdict.Check) -> dict[str, Any]:
    return {"figure": check.figure, "reference": check.reference, "ratio": check.ratio,
            "spread": check.spread, "between": check.between, "allowed": check.allowed,
            "slow": check.slow}


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


@dataclass
class Course:
    """What the vetting ran: its schedule, its retests, who could not be probed, what failed."""

    schedule: schedule_mod.Schedule
    tree: topology.Topology | None = None
    retests: list[list[tuple[str, str]]] = field(default_factory=list)
    unreachable: dict[str, str] = field(default_factory=dict)  # node -> why
    failures: list[str] = field(default_factory=list)  # steps whose failure sank the vetting

    def schedule_dict(self) -> dict[str, Any]:
        first = [[list(p) for p in r] for r in self.schedule.rounds]
        return {"kind": self.schedule.kind, "why": self.schedule.why, "rounds": first,
                "retest_rounds": [[list(p) for p in r] for r in self.retests],
                "network_rounds": len(first) + len(self.retests)}


def document(options: VetOptions, alloc: Allocation, share: plan.Sharing, records: list[dict],
             decision: verdict.Decision, vet_id: str, wall: float, env: dict,
             course: Course) -> dict[str, Any]:
    """Everything vet.json holds."""
    checks = decision.checks
    nodes: dict[str, dict] = {n: {"host": share_host(share, n), "devices": []}
                              for n in alloc.nodes}
    leaf_of = course.tree.leaf_of() if course.tree else {}
    for node, leaf in leaf_of.items():
        nodes[node]["leaf"] = leaf
    for node, why in course.unreachable.items():
        nodes[node]["unreachable"] = why
    pairs: list[dict] = []
    steps = []
    for r in records:
        steps.append({"probe": r["probe"], "status": r["status"], "run_id": r["run_id"],
                      "nodes": r["slurm_nodes"],
                      "step": (r.get("scheduler") or {}).get("step"), "error": r.get("error")})
        for u in r.get("units", []):
            unit = (u["node"], int(u["device_index"]))
            nodes.setdefault(u["node"], {"host": u["hostname"], "devices": []})
            nodes[u["node"]].update(hostname=u["hostname"], machine=u["machine"])
            sustained = u.get("sustained_flops_per_sec") or []
            nodes[u["node"]]["devices"].append({
                "index": unit[1], "name": u["device_name"], "threads": u["threads"],
                "slowdown_injected": u["slowdown"],
                "compute_images_per_sec": u["compute_images_per_sec"],
                "compute_median": _median(u["compute_images_per_sec"]),
                "matmul_flops_per_sec": u["matmul_flops_per_sec"],
                "matmul_median": _median(u["matmul_flops_per_sec"]),
                "sustained_flops_per_sec": sustained, "sustained_median": _median(sustained),
                "compute_check": _check_or_none(checks.get(verdict.COMPUTE, {}).get(unit)),
                "matmul_check": _check_or_none(checks.get(verdict.MATMUL, {}).get(unit)),
                "sustained_check": _check_or_none(checks.get(verdict.SUSTAINED, {}).get(unit)),
                "combined_check": _check_or_none(checks.get(verdict.NODE, {}).get(unit))})
        for p in r.get("pairs", []):
            key = tuple(p["nodes"])
            pairs.append({**p, "busbw_median": _median(p["busbw_bytes_per_sec"]),
                          "check": _check_or_none(checks.get(verdict.LINK, {}).get(key))})
    for node, check in checks.get(verdict.NETWORK, {}).items():
        nodes[node]["network_check"] = _check_dict(check)
    net = verdict.network_series(alloc.nodes, {tuple(p["nodes"]): p["busbw_bytes_per_sec"]
                                               for p in pairs if p["busbw_bytes_per_sec"]})
    for node, series in net.items():
        nodes[node]["network_busbw"] = series
    for info in nodes.values():
        info["partners"] = []
    for p in pairs:
        a, b = p["nodes"]
        nodes[a]["partners"].append({"node": b, "round": p["round"]})
        nodes[b]["partners"].append({"node": a, "round": p["round"]})
    machines = {}
    for node, info in nodes.items():
        if info.get("machine"):
            machines.setdefault(info["machine"], []).append(node)
    notes = list(decision.notes)
    if share.together and any(len(n) > 1 for n in machines.values()):
        notes.append("the probes found nodes on one machine (the same boot id: " + "; ".join(
            compress_hostlist(n) for n in machines.values() if len(n) > 1) + ") although "
            "Slurm names different hosts: they were probed at once, so their figures contend")
    ok = not course.failures
    cordoned = decision.cordoned if ok else {}
    return {
        "format": files.FORMAT, "version": files.VERSION, "id": vet_id,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "status": "ok" if ok else "failed", "error": "; ".join(course.failures) or None,
        "allocation": {"job_id": alloc.job_id, "nodes": list(alloc.nodes),
                       "nodelist": compress_hostlist(alloc.nodes),
                       "cpus_per_node": list(alloc.cpus_per_node),
                       "gpus_per_node": alloc.gpus_per_node, "partition": alloc.partition},
        "settings": {**{k: v for k, v in options.__dict__.items()
                        if k not in ("node_slowdown", "link_delay", "probe_kill")},
                     "threshold_fraction": options.threshold / 100, "z": verdict.Z,
                     "z_few": verdict.Z_FEW, "min_nodes": verdict.MIN_NODES},
        "faults": options.faults(),
        "probing": {"together": share.together, "reason": share.reason,
                    "hosts": {h: list(n) for h, n in share.hosts.items()}},
        "topology": course.tree.as_dict() if course.tree else None,
        "schedule": course.schedule_dict(),
        "rule": verdict.__doc__.strip(),
        "nodes": nodes, "pairs": pairs,
        "decided": decision.decided,
        "verdicts": [{"kind": v.kind, "nodes": list(v.nodes), "cordon": v.cordon,
                      "because": v.because, "pairs": [list(p) for p in v.pairs],
                      "rounds": list(v.rounds), "switches": list(v.switches)}
                     for v in decision.verdicts],
        "notes": notes,
        "unreachable": dict(course.unreachable),
        "vetted": decision.vetted(alloc.nodes) if ok else [],
        "cordoned": cordoned,
        "steps": steps, "wall_seconds": wall, "env": env,
    }


def share_host(share: plan.Sharing, node: str) -> str | None:
    return next((h for h, nodes in share.hosts.items() if node in nodes), None)


def _check_or_none(check: verdict.Check | None) -> dict | None:
    return None if check is None else _check_dict(check)


class Steps:
    """Runs the vetting's jobs one step at a time through the executor, into one results file."""

    def __init__(self, device: devices.DeviceInfo, out_dir: Path, stream: TextIO,
                 live: bool | None):
        self.device, self.out_dir, self.stream, self.live = device, out_dir, stream, live
        self.records: list[dict] = []
        self.interrupted = False

    def run(self, job) -> dict | None:
        from scalebench.frameworks import ddp

        if self.interrupted:
            return None
        done = executor.execute([job], self.device, self.out_dir, lambda name: ddp.Options(),
                                fresh_file=not self.records,
                                progress=Progress(1, stream=self.stream, live=self.live))
        self.records += done.records
        self.interrupted = done.interrupted
        return done.records[-1] if done.records else None


# srun names the task that failed first; the others it ended itself (--kill-on-bad-exit) say
# "Terminated"
FIRST_FAILED = re.compile(r"^srun: error: (\S+): tasks? [\d,\-]+: (?!Terminated)", re.M)


def first_failed(record: dict, out_dir: Path, nodes: Sequence[str]) -> str | None:
    """The node srun says a task failed on first (not one it ended itself), or None."""
    try:
        text = (out_dir / "runs" / record["run_id"] / "stderr.log").read_text(errors="replace")
    except OSError:
        text = record.get("stderr_tail") or ""
    for match in FIRST_FAILED.finditer(text):
        if match.group(1) in nodes:
            return match.group(1)
    return None


def isolate(steps: Steps, make_job, failed: dict, nodes: Sequence[str], run_id: str
            ) -> dict[str, str]:
    """The nodes of a failed node step whose probe fails alone on them: node -> why. The node
    srun names first is tried alone first; if none is named, or it passes alone, the nodes are
    split in halves, each its own step, down to single nodes (a hang: 2 log2(N) steps)."""
    if len(nodes) == 1:
        return {nodes[0]: f"its node probe {failed['status']} on it alone: {failed['error']}"}
    named = first_failed(failed, steps.out_dir, nodes)
    if named:
        alone = steps.run(make_job([named], f"{run_id}-{named}"))
        if alone is not None and alone["status"] != "ok":
            return isolate(steps, make_job, alone, [named], run_id)
    out: dict[str, str] = {}
    half = (len(nodes) + 1) // 2
    for part, tag in ((nodes[:half], "a"), (nodes[half:], "b")):
        record = steps.run(make_job(part, f"{run_id}{tag}"))
        if record is not None and record["status"] != "ok":
            out.update(isolate(steps, make_job, record, part, f"{run_id}{tag}"))
    return out


def probe_nodes(steps: Steps, make_job, nodes: Sequence[str], run_id: str
                ) -> tuple[dict[str, str], str | None]:
    """The node probes of all nodes in one step; where it fails, the nodes that fail alone are
    found (isolate) and the others probed again in one step, so that every node's figures come
    from one step. (node -> why unreachable, why the node probes failed as a whole or None)."""
    unreachable: dict[str, str] = {}
    left = list(nodes)
    for attempt in range(len(nodes)):
        record = steps.run(make_job(left, f"{run_id}{attempt or ''}"))
        if record is None or record["status"] == "ok":
            return unreachable, None
        found = isolate(steps, make_job, record, left, f"{run_id}{attempt or ''}")
        if not found:
            return unreachable, (f"node probes {record['status']} on {len(left)} nodes, while "
                                 f"every part passed alone: {record['error']}")
        unreachable.update(found)
        left = [n for n in left if n not in found]
        if not left:
            return unreachable, "no node could be probed"
    return unreachable, None


def rounds_text(rounds: Sequence[Sequence[tuple[str, str]]], first: int = 1) -> list[str]:
    """'round 1: sb1-sb2 sb3-sb4', one line a round."""
    return [f"round {first + i}: " + " ".join(f"{a}-{b}" for a, b in r)
            for i, r in enumerate(rounds)]


def run_vet(options: VetOptions, out_dir: Path, stream: TextIO | None = None,
            live: bool | None = None) -> VetOutcome:
    """Probe every node, then the pairs of the schedule, then retests; write the files."""
    from scalebench.vet import page

    stream = stream or sys.stdout
    alloc = current_allocation()
    plan.check_faults(options, alloc.nodes)
    tree = plan.topology_for(options, alloc.nodes)
    plan.pair_schedule(options, alloc.nodes, tree)  # bad options fail before any step
    device = devices.resolve(options.device)
    share = plan.sharing(plan.node_hosts(alloc.nodes))
    stamp = time.strftime("%Y%m%d-%H%M%S")
    vet_id = f"vet-{alloc.job_id}-{stamp}"
    out_dir = Path(out_dir)

    def node_job(nodes: Sequence[str], run_id: str):
        return plan.node_job(options, alloc, device, share, nodes, run_id)

    node_job(alloc.nodes, "check")  # the probe's settings checked before any step
    stream.write(f"vet {vet_id}: {len(alloc.nodes)} nodes ({compress_hostlist(alloc.nodes)}) "
                 f"of Slurm job {alloc.job_id}, {share.reason}; node probes, then pairs; "
                 f"{options.repeats} repeats each"
                 + (f"; topology from {tree.source}: {len(tree.leaves)} leaf switches"
                    if tree else "") + "\n")
    if options.faults():
        stream.write(f"vet: fault injection on: {options.faults()}\n")
    stream.flush()
    start = time.monotonic()
    steps = Steps(device, out_dir, stream, live)
    unreachable, failed = probe_nodes(steps, node_job, list(alloc.nodes), f"vet-{stamp}-nodes")
    for node, why in unreachable.items():
        stream.write(f"vet: {node} unreachable ({why}); the vetting goes on without it\n")
    reachable = [n for n in alloc.nodes if n not in unreachable]
    reach_tree = topology.for_nodes(tree, reachable) if tree else None
    course = Course(plan.pair_schedule(options, reachable, reach_tree), reach_tree,
                    unreachable=unreachable, failures=[failed] if failed else [])
    stream.write(f"vet: schedule: {course.schedule.why}\n")
    for line in rounds_text(course.schedule.rounds):
        stream.write(f"vet:   {line}\n")
    stream.flush()
    leaf_of = reach_tree.leaf_of() if reach_tree else {}
    if course.schedule.rounds and not course.failures:
        pairs = steps.run(plan.pair_job(options, alloc, device, share, reachable,
                                        course.schedule.rounds, 1, f"vet-{stamp}-pairs"))
        if pairs is not None and pairs["status"] != "ok":
            course.failures.append(f"pair probes {pairs['status']}: {pairs.get('error')}")
    figures = figures_of(steps.records, alloc.nodes, leaf_of, unreachable)
    decision = verdict.decide(figures, options.threshold / 100)
    if decision.suspects and not course.failures and not steps.interrupted:
        busy = {n for v in decision.verdicts for n in v.nodes}
        good = [n for n in reachable if n not in busy and n not in decision.suspects]
        course.retests = schedule_mod.retests(list(decision.suspects), good, figures.pairs,
                                              leaf_of)
        if course.retests:
            first = len(course.schedule.rounds) + 1
            stream.write(f"vet: retests of {', '.join(decision.suspects)} against nodes known "
                         "good:\n")
            for line in rounds_text(course.retests, first):
                stream.write(f"vet:   {line}\n")
            stream.flush()
            more = steps.run(plan.pair_job(options, alloc, device, share, reachable,
                                           course.retests, first, f"vet-{stamp}-retests"))
            if more is not None and more["status"] != "ok":
                course.failures.append(f"retest pair probes {more['status']}: "
                                       f"{more.get('error')}")
            figures = figures_of(steps.records, alloc.nodes, leaf_of, unreachable, first)
            decision = verdict.decide(figures, options.threshold / 100)
    if steps.interrupted:
        course.failures.append("interrupted")
    wall = time.monotonic() - start
    env = envinfo.collect(device.device, device.backend)
    doc = document(options, alloc, share, steps.records, decision, vet_id, wall, env, course)
    outputs = files.write(doc, out_dir)
    outputs += page.write(doc, out_dir)
    vetting = files.vetting_of(doc, str(outputs[0].resolve()))
    return VetOutcome(vetting, doc, outputs, ok=doc["status"] == "ok",
                      interrupted=steps.interrupted)


def summary_lines(doc: dict[str, Any]) -> list[str]:
    """What the command prints at the end: verdicts, notes, the lists."""
    lines = []
    if doc["status"] != "ok":
        lines.append(f"vet: FAILED - {doc['error']}")
    for v in doc["verdicts"]:
        action = "cordoned" if v["cordon"] else "kept"
        lines.append(f"  {v['kind']}: {', '.join(v['nodes'])} ({action}) - {v['because']}")
    for note in doc["notes"]:
        lines.append(f"  note: {note}")
    if doc["status"] == "ok":
        if doc["decided"] and not doc["verdicts"]:
            lines.append("  no slow node or link")
        lines.append(f"vetted: {compress_hostlist(doc['vetted']) or '(none)'}; cordoned: "
                     f"{compress_hostlist(list(doc['cordoned'])) or '(none)'}")
    return lines
