"""What every framework adapter provides, and what a launch returns."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scalebench.records.schema import STATUSES

if TYPE_CHECKING:
    from scalebench.spec.launch import Job

MIB = 2**20


@dataclass(frozen=True)
class LaunchOutcome:
    status: str  # ok | failed | timeout (skipped is decided before launch)
    result: dict[str, Any] | None  # the task's worker result from rank 0
    error: str | None = None
    stderr_tail: str | None = None
    launch_unix: float | None = None
    nodes: int | None = None  # where the framework knows better than the plan
    artifacts: dict[str, str] = field(default_factory=dict)  # e.g. a timeline's path
    scheduler: dict[str, Any] = field(default_factory=dict)  # e.g. Slurm job/step ids, nodes

    def __post_init__(self):
        if self.status not in STATUSES[:3]:
            raise ValueError(f"bad launch status {self.status!r}")
        if self.status == "ok" and self.result is None:
            raise ValueError("an ok launch needs a result")


@dataclass(frozen=True)
class Knob:
    """A step option `scalebench tune` may search: its grid of candidate values (the default
    always among them) and whether it can change between windows of one launch (a re-wrap of
    the model) or only between launches (read once when the framework starts)."""

    option: str  # the Options field
    values: tuple[Any, ...]  # the search grid, the default included
    default: Any  # the value the framework uses when the option is not given
    in_launch: bool
    parse: Callable[[str], Any] = float  # one value as given on the command line
    multi_node: bool = False  # only where a cell spans more than one node
    why: str = ""

    def __post_init__(self):
        if self.default not in self.values:
            raise ValueError(f"knob {self.option}: the grid {self.values} lacks the default")


@dataclass(frozen=True)
class Flag:
    """One command-line flag for one framework option (the workload table's key is `field`)."""

    flag: str
    field: str
    help: str
    switch: bool = False  # store_true
    training_only: bool = False  # changes the training step; meaningless for allreduce


class Framework:
    """One framework adapter; each lives in its own package (frameworks/<name>/)."""

    name: str = ""
    title: str = ""  # the heading of its flags in --help
    options_type: type = object  # the frozen options dataclass
    table: Mapping[str, Callable[[Any], Any]] = {}  # workload-file key -> parser
    flags: tuple[Flag, ...] = ()
    # Options that change the timed step: part of a configuration's identity (identity.py).
    step_options: tuple[str, ...] = ()
    # What `scalebench tune` searches (tuning/knobs.py); every knob is also a step option.
    knobs: tuple[Knob, ...] = ()
    default_bucket_bytes: int = 25 * MIB
    bucket_option: str | None = None  # the option (in MiB) that sets the message size

    def bucket_bytes(self, options: dict) -> int:
        """Gradient bytes per allreduce message (DDP bucket, Horovod fusion buffer)."""
        mb = options.get(self.bucket_option) if self.bucket_option else None
        return self.default_bucket_bytes if mb is None else int(mb * MIB)

    def check_options(self, options: Any, workers: tuple[int, ...] | None) -> None:
        """Consistency of the options with each other and with the worker counts (UserError)."""

    def available(self) -> tuple[bool, str]:
        """(True, version) or (False, reason and the command that fixes it)."""
        raise NotImplementedError

    def slurm_problem(self, options: Any) -> str | None:
        """Why these options cannot run as Slurm job steps (None: they can)."""
        return None

    def unavailable_for(self, job: Job) -> str | None:
        """Why this framework cannot run this job here although it is installed (e.g. a
        Horovod without NCCL asked for CUDA), with the fix; None when it can."""
        return None

    def environment(self) -> dict[str, Any]:
        """Facts about this framework's build that every record's environment carries."""
        return {}

    def fixed_nodes(self, options: Any) -> int:
        """Nodes every run spans whatever its worker count (multi-node DDP)."""
        return 1

    def planned_nodes(self, options: Any, world_size: int) -> int:
        return 1

    def open_session(self, options: Any, device: str, out_dir: Path) -> None:
        """Called once before the first run of this framework in a sweep."""

    def close_session(self) -> None:
        """Called once at the end of the sweep, also on error or Ctrl-C."""

    def suspend(self) -> None:
        """Another framework's run comes next: release what an idle session holds
        (Ray's embedded cluster would take CPU time from that run's measurement)."""

    def launch(self, job: Job, run_dir: Path) -> LaunchOutcome:
        raise NotImplementedError

    def records_here(self, options: Any) -> bool:
        """False on nodes other than the one that writes results (multi-node launches)."""
        return True


class Sessions:
    """The framework sessions of one sweep: opened on first use, idle ones suspended while
    another framework runs, all closed at the end (also on error or Ctrl-C)."""

    def __init__(self, options_for: Callable[[str], Any], device: str, out_dir: Path):
        self.options_for = options_for
        self.device = device
        self.out_dir = out_dir
        self.opened: dict[str, Framework] = {}

    def activate(self, adapter: Framework) -> None:
        if adapter.name not in self.opened:
            adapter.open_session(self.options_for(adapter.name), self.device, self.out_dir)
            self.opened[adapter.name] = adapter
        for name, other in self.opened.items():
            if name != adapter.name:
                other.suspend()

    def close_all(self) -> None:
        for adapter in self.opened.values():
            adapter.close_session()
