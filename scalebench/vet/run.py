"""`scalebench vet` as a plain function: plan -> executor (Slurm steps) -> figures -> verdict ->
vet.json, the node lists, vet.md and vet.html."""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from scalebench.hardware import devices, envinfo
from scalebench.running import executor
from scalebench.running.progress import Progress
from scalebench.slurm import allocation
from scalebench.slurm.allocation import Allocation, compress_hostlist
from scalebench.spec.errors import UserError
from scalebench.vet import files, plan, verdict
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


def figures_of(records: Sequence[dict], nodes: Sequence[str]) -> verdict.Figures:
    compute, matmul, pairs = {}, {}, {}
    for r in records:
        if r.get("status") != "ok":
            continue
        for u in r.get("units", []):
            unit = (u["node"], int(u["device_index"]))
            compute[unit] = u["compute_images_per_sec"]
            matmul[unit] = u["matmul_flops_per_sec"]
        for p in r.get("pairs", []):
            if p["busbw_bytes_per_sec"]:
                pairs[tuple(p["nodes"])] = p["busbw_bytes_per_sec"]
    return verdict.Figures(tuple(nodes), compute, matmul, pairs)


def _check_dict(check: verdict.Check) -> dict[str, Any]:
    return {"figure": check.figure, "reference": check.reference, "ratio": check.ratio,
            "spread": check.spread, "between": check.between, "allowed": check.allowed,
            "slow": check.slow}


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def document(options: VetOptions, alloc: Allocation, share: plan.Sharing, records: list[dict],
             decision: verdict.Decision, vet_id: str, wall: float, env: dict) -> dict[str, Any]:
    """Everything vet.json holds."""
    checks = decision.checks
    nodes: dict[str, dict] = {n: {"host": share_host(share, n), "devices": []}
                              for n in alloc.nodes}
    pairs: list[dict] = []
    steps, failures = [], []
    for r in records:
        steps.append({"probe": r["probe"], "status": r["status"], "run_id": r["run_id"],
                      "step": (r.get("scheduler") or {}).get("step"), "error": r.get("error")})
        if r["status"] != "ok":
            failures.append(f"{r['probe']} probes {r['status']}: {r.get('error')}")
        for u in r.get("units", []):
            unit = (u["node"], int(u["device_index"]))
            nodes.setdefault(u["node"], {"host": u["hostname"], "devices": []})
            nodes[u["node"]].update(hostname=u["hostname"], machine=u["machine"])
            nodes[u["node"]]["devices"].append({
                "index": unit[1], "name": u["device_name"], "threads": u["threads"],
                "slowdown_injected": u["slowdown"],
                "compute_images_per_sec": u["compute_images_per_sec"],
                "compute_median": _median(u["compute_images_per_sec"]),
                "matmul_flops_per_sec": u["matmul_flops_per_sec"],
                "matmul_median": _median(u["matmul_flops_per_sec"]),
                "compute_check": _check_or_none(checks.get(verdict.COMPUTE, {}).get(unit)),
                "matmul_check": _check_or_none(checks.get(verdict.MATMUL, {}).get(unit))})
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
    machines = {}
    for node, info in nodes.items():
        if info.get("machine"):
            machines.setdefault(info["machine"], []).append(node)
    notes = list(decision.notes)
    if share.together and any(len(n) > 1 for n in machines.values()):
        notes.append("the probes found nodes on one machine (the same boot id: " + "; ".join(
            compress_hostlist(n) for n in machines.values() if len(n) > 1) + ") although "
            "Slurm names different hosts: they were probed at once, so their figures contend")
    ok = not failures
    cordoned = decision.cordoned if ok else {}
    return {
        "format": files.FORMAT, "version": files.VERSION, "id": vet_id,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "status": "ok" if ok else "failed", "error": "; ".join(failures) or None,
        "allocation": {"job_id": alloc.job_id, "nodes": list(alloc.nodes),
                       "nodelist": compress_hostlist(alloc.nodes),
                       "cpus_per_node": list(alloc.cpus_per_node),
                       "gpus_per_node": alloc.gpus_per_node, "partition": alloc.partition},
        "settings": {**{k: v for k, v in options.__dict__.items()
                        if k not in ("node_slowdown", "link_delay")},
                     "threshold_fraction": options.threshold / 100, "z": verdict.Z,
                     "min_nodes": verdict.MIN_NODES},
        "faults": options.faults(),
        "probing": {"together": share.together, "reason": share.reason,
                    "hosts": {h: list(n) for h, n in share.hosts.items()}},
        "rule": verdict.__doc__.strip(),
        "nodes": nodes, "pairs": pairs,
        "decided": decision.decided,
        "verdicts": [{"kind": v.kind, "nodes": list(v.nodes), "cordon": v.cordon,
                      "because": v.because} for v in decision.verdicts],
        "notes": notes,
        "vetted": decision.vetted(alloc.nodes) if ok else [],
        "cordoned": cordoned,
        "steps": steps, "wall_seconds": wall, "env": env,
    }


def share_host(share: plan.Sharing, node: str) -> str | None:
    return next((h for h, nodes in share.hosts.items() if node in nodes), None)


def _check_or_none(check: verdict.Check | None) -> dict | None:
    return None if check is None else _check_dict(check)


def run_vet(options: VetOptions, out_dir: Path, stream: TextIO | None = None,
            live: bool | None = None) -> VetOutcome:
    """Measure every node and pair of the allocation this runs in; write the files."""
    from scalebench.frameworks import ddp
    from scalebench.vet import page

    stream = stream or sys.stdout
    alloc = current_allocation()
    plan.check_faults(options, alloc.nodes)
    device = devices.resolve(options.device)
    share = plan.sharing(plan.node_hosts(alloc.nodes))
    stamp = time.strftime("%Y%m%d-%H%M%S")
    jobs = plan.plan(options, alloc, device, share, stamp)
    vet_id = f"vet-{alloc.job_id}-{stamp}"
    out_dir = Path(out_dir)
    pairs = sum(len(r) for j in jobs[1:] for r in j.task.rounds)
    stream.write(f"vet {vet_id}: {len(alloc.nodes)} nodes ({compress_hostlist(alloc.nodes)}) "
                 f"of Slurm job {alloc.job_id}, {share.reason}; {len(jobs)} steps: node probes"
                 + (f", {pairs} pairs in {len(jobs[1].task.rounds)} rounds" if pairs else "")
                 + f", {options.repeats} repeats each\n")
    if options.faults():
        stream.write(f"vet: fault injection on: {options.faults()}\n")
    stream.flush()
    start = time.monotonic()
    done = executor.execute(jobs, device, out_dir, lambda name: ddp.Options(),
                            progress=Progress(len(jobs), stream=stream, live=live))
    wall = time.monotonic() - start
    figures = figures_of(done.records, alloc.nodes)
    decision = verdict.decide(figures, options.threshold / 100)
    env = envinfo.collect(device.device, device.backend)
    doc = document(options, alloc, share, done.records, decision, vet_id, wall, env)
    outputs = files.write(doc, out_dir)
    outputs += page.write(doc, out_dir)
    vetting = files.vetting_of(doc, str(outputs[0].resolve()))
    return VetOutcome(vetting, doc, outputs, ok=doc["status"] == "ok",
                      interrupted=done.interrupted)


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
