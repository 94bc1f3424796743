"""Which leaf switch each node hangs off: Slurm's tree topology, read from `scontrol show
topology` (TopologyPlugin=topology/tree) or from a file in topology.conf syntax (--topology).

Both are lines of KEY=VALUE words, one switch a line: `SwitchName=s0 Nodes=sb[1-4]` for a leaf,
`SwitchName=top Switches=s[0-1]` above them (scontrol adds Level= and LinkSpeed=, and lists the
nodes under upper switches too; a leaf is a switch with Nodes= and neither Switches= nor a
Level above 0). `#` starts a comment. Every bad line or gap is one UserError naming the field
`topology`.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from scalebench.slurm.allocation import expand_hostlist
from scalebench.spec.errors import UserError


@dataclass(frozen=True)
class Topology:
    leaves: Mapping[str, tuple[str, ...]]  # leaf switch -> its nodes, in the order given
    source: str  # the file, or "scontrol show topology"

    def leaf_of(self) -> dict[str, str]:
        return {node: leaf for leaf, nodes in self.leaves.items() for node in nodes}

    def as_dict(self) -> dict:
        return {"source": self.source, "leaves": {k: list(v) for k, v in self.leaves.items()}}


def parse(text: str, source: str) -> Topology:
    """Leaf switches from topology.conf or `scontrol show topology` text."""
    leaves: dict[str, tuple[str, ...]] = {}
    seen_switches: set[str] = set()
    where: dict[str, str] = {}  # node -> leaf that named it
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        words = {}
        for word in line.split():
            key, sep, value = word.partition("=")
            if not sep or not key:
                raise UserError(f"topology: {source} line {number}: expected KEY=VALUE words "
                                f"(SwitchName=, Nodes=, Switches=), got {word!r}")
            words[key.lower()] = value
        name = words.get("switchname")
        if not name:
            raise UserError(f"topology: {source} line {number}: every line names a switch "
                            f"(SwitchName=NAME Nodes=HOSTLIST), got {line!r}")
        if name in seen_switches:
            raise UserError(f"topology: {source} line {number}: switch {name!r} named twice")
        seen_switches.add(name)
        level = words.get("level", "0")
        if "nodes" not in words or "switches" in words or level not in ("", "0"):
            continue  # a switch above the leaves
        try:
            nodes = expand_hostlist(words["nodes"])
        except ValueError as exc:
            raise UserError(f"topology: {source} line {number}: {exc}") from None
        for node in nodes:
            if node in where:
                raise UserError(f"topology: node {node!r} named twice ({source}: leaf switches "
                                f"{where[node]!r} and {name!r})")
            where[node] = name
        leaves[name] = tuple(nodes)
    return Topology(leaves, source)


def for_nodes(topology: Topology, nodes: Sequence[str]) -> Topology:
    """The leaves restricted to the allocation's nodes (in its order), every node covered."""
    leaf_of = topology.leaf_of()
    missing = [node for node in nodes if node not in leaf_of]
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5
                                          else "")
        raise UserError(f"topology: {topology.source} does not cover the allocation: {shown} "
                        "in no leaf switch")
    leaves = {leaf: tuple(n for n in nodes if leaf_of[n] == leaf) for leaf in topology.leaves}
    return Topology({k: v for k, v in leaves.items() if v}, topology.source)


def read_file(path: str) -> Topology:
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"topology: cannot read {path!r} ({exc.__class__.__name__}); give a "
                        "file in topology.conf syntax") from None
    topology = parse(text, path)
    if not topology.leaves:
        raise UserError(f"topology: {path} names no leaf switch (SwitchName=NAME Nodes=HOSTLIST)")
    return topology


def from_slurm() -> Topology | None:
    """Slurm's own tree topology, None where it has none (another plugin, or no scontrol)."""
    try:
        proc = subprocess.run(["scontrol", "show", "topology"], capture_output=True, text=True,
                              timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0 or "SwitchName=" not in proc.stdout:
        return None
    try:
        topology = parse(proc.stdout, "scontrol show topology")
    except UserError:
        return None
    return topology if topology.leaves else None
