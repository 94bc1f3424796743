"""What every launch needs, whatever the task: the typed LaunchSpec, and the Job sent whole to
the workers (launch spec + the task's own spec), serialised as one JSON object."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class LaunchSpec:
    """How a run is launched: shared by every task and received by every framework adapter."""

    framework: str
    world_size: int
    nodes: int
    device: str  # resolved: cpu or cuda
    backend: str  # gloo or nccl
    timeout: float  # seconds before the whole run is killed and recorded as timeout
    threads_per_worker: int
    options: Any  # the framework's frozen options dataclass (frameworks.<name>.Options)
    launcher: str = "local"  # local (the framework's own launcher) or slurm (job steps)
    # Slurm: the allocation's nodes this run may take, in order (empty: all of them; after a
    # vetting, the vetted ones) and at most this many workers on one node (None: as many as
    # the node holds).
    slurm_nodes: tuple[str, ...] = ()
    max_per_node: int | None = None
    unplaced: str | None = None  # why the plan cannot place the run: it is recorded skipped

    def __post_init__(self):
        object.__setattr__(self, "slurm_nodes", tuple(self.slurm_nodes))
        if self.world_size < 1 or self.nodes < 1 or self.threads_per_worker < 1:
            raise ValueError("world_size, nodes and threads_per_worker must be >= 1")
        if not dataclasses.is_dataclass(self.options):
            raise TypeError(f"options must be the framework's options dataclass, not "
                            f"{type(self.options).__name__}")

    @property
    def workers_per_node(self) -> int:
        return -(-self.world_size // self.nodes)

    def options_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self.options)

    def to_dict(self) -> dict[str, Any]:
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        values["options"] = self.options_dict()
        return values

    @classmethod
    def from_dict(cls, values: dict[str, Any], options_type: type) -> LaunchSpec:
        """`options_type`: the framework's options dataclass (the caller looks it up in the
        framework registry, so that this module depends on no registry)."""
        return cls(**{**values, "options": options_type(**values["options"])})


@dataclass(frozen=True)
class GroupPlace:
    """A configuration's place in a grouped launch (several configurations, one launch)."""

    group_id: str
    position: int  # 1-based
    size: int


@dataclass(frozen=True)
class Job:
    """One launch of one task: what the workers receive (never as argv fragments)."""

    run_id: str
    kind: str  # the task (tasks.get(kind))
    launch: LaunchSpec
    task: Any  # the task's frozen spec dataclass
    repeat: int = 1  # which of `repeats` separate launches of this configuration
    repeats: int = 1
    order_seed: int | None = None  # the seed that shuffled the framework order of the rounds
    group: GroupPlace | None = None  # where this job ran inside a grouped launch
    run_dir: str | None = None  # the run folder (absolute), set at launch: workers' artifacts

    def __post_init__(self):
        # Each task's spec names its kind (tasks/<kind>.py), so a mismatch is caught here
        # without looking up the task registry (which would make this module depend on it).
        expected = getattr(type(self.task), "kind", None)
        if expected != self.kind:
            raise ValueError(f"a {self.kind} job needs the {self.kind} task's spec, not "
                             f"{type(self.task).__name__} (the spec of {expected})")

    def to_json(self) -> str:
        return json.dumps({"run_id": self.run_id, "kind": self.kind,
                           "launch": self.launch.to_dict(),
                           "task": dataclasses.asdict(self.task),
                           "repeat": self.repeat, "repeats": self.repeats,
                           "order_seed": self.order_seed,
                           "group": None if self.group is None else
                           dataclasses.asdict(self.group), "run_dir": self.run_dir})

    @classmethod
    def from_dict(cls, data: dict[str, Any], launch: LaunchSpec, task: Any) -> Job:
        """The inverse of to_json's object, with its launch and task spec already decoded
        (tasks.job_from_json looks up the registries that decode them)."""
        return cls(data["run_id"], data["kind"], launch, task, data.get("repeat", 1),
                   data.get("repeats", 1), data.get("order_seed"),
                   GroupPlace(**data["group"]) if data.get("group") else None,
                   data.get("run_dir"))
