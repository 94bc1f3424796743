"""What a vetting leaves in its folder and what a sweep reads back: vet.json (every figure with
its repeats, the verdicts, the allocation, the environment), vetted-nodes.txt and
cordoned-nodes.txt (one Slurm host list on one line each, an empty file when none, as vetnode
writes them), and the Vetting a sweep places its runs by."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scalebench.records import atomic
from scalebench.slurm.allocation import Allocation, compress_hostlist
from scalebench.spec.errors import UserError

VET_FILE = "vet.json"
VETTED_FILE = "vetted-nodes.txt"
CORDONED_FILE = "cordoned-nodes.txt"
FORMAT = "scalebench-vet"
VERSION = 1


@dataclass(frozen=True)
class Vetting:
    """Which nodes of a Slurm job a sweep may use, and why the others not."""

    id: str
    job_id: str
    nodes: tuple[str, ...]
    vetted: tuple[str, ...]
    cordoned: Mapping[str, str] = field(default_factory=dict)  # node -> why
    path: str | None = None  # its vet.json
    decided: bool = True  # False: too few nodes for a verdict (all kept)

    def record_field(self) -> dict[str, Any]:
        """What every record of a sweep placed by this vetting carries as `vetting`."""
        return {"id": self.id, "job_id": self.job_id, "file": self.path,
                "vetted": list(self.vetted), "excluded": dict(self.cordoned)}

    def excluded_text(self) -> str:
        if not self.cordoned:
            return "no node cordoned"
        return "; ".join(f"{node} cordoned ({why.split(':')[0]})"
                         for node, why in self.cordoned.items())


def write(document: dict[str, Any], out_dir: Path) -> list[Path]:
    """vet.json and the two node lists."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / VET_FILE, out_dir / VETTED_FILE, out_dir / CORDONED_FILE]
    atomic.write_text(paths[0], json.dumps(document, indent=1, allow_nan=False, default=str) + "\n")
    for path, nodes in ((paths[1], document["vetted"]), (paths[2], list(document["cordoned"]))):
        atomic.write_text(path, compress_hostlist(nodes) + "\n" if nodes else "")
    return paths


def vetting_of(document: Mapping[str, Any], path: str | None) -> Vetting:
    return Vetting(id=document["id"], job_id=str(document["allocation"]["job_id"]),
                   nodes=tuple(document["allocation"]["nodes"]),
                   vetted=tuple(document["vetted"]), cordoned=dict(document["cordoned"]),
                   path=path, decided=bool(document.get("decided", True)))


def load(path: str | os.PathLike, alloc: Allocation) -> Vetting:
    """An earlier vetting of this same Slurm job (--vet-file), or a UserError saying why not."""
    p = Path(path)
    if p.is_dir():
        p = p / VET_FILE
    try:
        document = json.loads(p.read_text())
    except OSError:
        raise UserError(f"vet_file: {str(path)!r} is neither a vet.json nor a folder holding "
                        "one") from None
    except json.JSONDecodeError as exc:
        raise UserError(f"vet_file: {p} is not valid JSON ({exc.msg})") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise UserError(f"vet_file: {p} is not a `scalebench vet` file")
    if document.get("version") != VERSION:
        raise UserError(f"vet_file: {p} has version {document.get('version')!r}; this "
                        f"scalebench reads version {VERSION}: vet again (--vet)")
    if document.get("status") != "ok":
        raise UserError(f"vet_file: the vetting in {p} did not finish ({document.get('error')})"
                        "; vet again (--vet)")
    vetting = vetting_of(document, str(p.resolve()))
    if vetting.job_id != alloc.job_id:
        raise UserError(f"vet_file: {p} vetted Slurm job {vetting.job_id}, this is job "
                        f"{alloc.job_id}: a vetting holds for the nodes of its own job; vet "
                        "again (--vet)")
    missing = [n for n in vetting.vetted if n not in alloc.nodes]
    if missing:
        raise UserError(f"vet_file: vetted nodes {', '.join(missing)} are not in "
                        f"{alloc.describe()}")
    return vetting
