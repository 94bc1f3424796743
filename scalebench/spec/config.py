"""SweepSpec (what the user asked for), workload files, CLI-flag merging, validation.

Every bad value becomes one UserError naming the field and the allowed values. Framework
options are declared by each framework package (its Options dataclass and [table]); this module
only routes a workload file's [ddp], [horovod], [ray] tables to them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomllib

from scalebench import frameworks
from scalebench.models import workloads
from scalebench.spec import fields, tuned
from scalebench.spec.errors import UserError

PRECISIONS = ("fp32", "bf16", "fp16")
DEVICES = ("auto", "cpu", "cuda")
SCALINGS = ("weak", "strong")
TF32_MODES = ("default", "on", "off")
LAUNCHERS = ("local", "slurm", "k8s")
LAUNCH_MODES = ("grouped", "isolated")


@dataclass(frozen=True)
class SweepSpec:
    models: tuple[str, ...] = tuple(workloads.MODELS)
    frameworks: tuple[str, ...] = ("ddp",)
    workers: tuple[int, ...] | None = None  # None: 1..(GPUs or cores) in powers of two
    batch_size: int = 32
    image_size: int | None = None  # None: each model's native size (224, 299 for Inception V3)
    precision: tuple[str, ...] = ("fp32",)
    warmup: int = 5
    iters: int = 10
    trials: int = 5
    timeout: float = 900.0
    device: str = "auto"
    scaling: str = "weak"
    data: str = "synthetic"
    loader_workers: int = 2
    threads_per_worker: int | None = None  # None: max(1, cores // workers-on-this-node)
    out: str = "results/default"
    resume: bool = False
    quiet: bool = False
    name: str = "default"
    repeats: int = 1  # separate launches of every configuration, interleaved round by round
    seed: int | None = None  # shuffles the framework order within a round; None: from the clock
    tf32: str = "default"  # CUDA fp32 math: PyTorch's default, TF32 on, or TF32 off
    launcher: str = "local"  # local: each framework's own launcher; slurm: job steps; k8s: operator jobs
    launch: str = "grouped"  # grouped: configurations sharing a launch run in one; isolated
    breakdown: bool = True  # no-sync windows at N > 1 workers for the scaling-loss breakdown
    with_allreduce: bool = False  # measure each framework's allreduce first (link for the model)
    profile: bool = False  # a torch.profiler trace of one window on rank 0 per run
    report: bool = True  # summary, figures and reports after the runs (else records only)
    strict: bool = False  # a disturbed run runs once more (analysis/disturbance.py); both kept
    vet: Any = None  # vet.options.VetOptions: vet the allocation first, run on vetted nodes
    vet_file: str | None = None  # an earlier vetting (vet.json) of this Slurm job to place by
    # cells `scalebench tune` tuned (spec/tuned.py): each also runs with its winning options
    tuned: tuple[Any, ...] = ()
    # Fault injection, off by default (tests of the breakdown): a delay after every step on one
    # rank, and a delay before every batch on all ranks.
    fault_rank: int | None = None
    fault_step_delay: float = 0.0
    fault_input_delay: float = 0.0
    # framework name -> its Options (frameworks.<name>.Options); absent: the defaults
    framework_options: Mapping[str, Any] = field(default_factory=dict)

    def options(self, framework: str) -> Any:
        """The typed options of one framework (its defaults when none were given)."""
        given = self.framework_options.get(framework)
        return given if given is not None else frameworks.get(framework).options_type()


_TOP_FIELDS: dict[str, Any] = {
    "name": lambda v: fields.text("name", v),
    "models": lambda v: fields.choices("models", v, tuple(workloads.MODELS)),
    "frameworks": lambda v: fields.choices("frameworks", v, tuple(frameworks.names())),
    "workers": fields.workers,
    "batch_size": lambda v: fields.integer("batch_size", v, 1),
    "image_size": lambda v: fields.integer("image_size", v, 1),
    "precision": lambda v: fields.choices("precision", v, PRECISIONS),
    "warmup": lambda v: fields.integer("warmup", v, 0),
    "iters": lambda v: fields.integer("iters", v, 1),
    "trials": lambda v: fields.integer("trials", v, 1),
    "timeout": lambda v: fields.number("timeout", v, 0),
    "device": lambda v: fields.choice("device", v, DEVICES),
    "scaling": lambda v: fields.choice("scaling", v, SCALINGS),
    "data": fields.data_source,
    "loader_workers": lambda v: fields.integer("loader_workers", v, 0),
    "threads_per_worker": lambda v: fields.integer("threads_per_worker", v, 1),
    "out": lambda v: fields.text("out", v),
    "resume": lambda v: fields.boolean("resume", v),
    "quiet": lambda v: fields.boolean("quiet", v),
    "repeats": lambda v: fields.integer("repeats", v, 1),
    "seed": lambda v: fields.integer("seed", v, 0),
    "tf32": lambda v: fields.choice("tf32", v, TF32_MODES),
    "launcher": lambda v: fields.choice("launcher", v, LAUNCHERS),
    "launch": lambda v: fields.choice("launch", v, LAUNCH_MODES),
    "breakdown": lambda v: fields.boolean("breakdown", v),
    "with_allreduce": lambda v: fields.boolean("with_allreduce", v),
    "profile": lambda v: fields.boolean("profile", v),
    "report": lambda v: fields.boolean("report", v),
    "strict": lambda v: fields.boolean("strict", v),
    "vet_file": lambda v: fields.text("vet_file", v),
    "tuned": lambda v: tuned.load(fields.text("tuned", v)),
    "inject_step_delay": lambda v: _step_delay(v),
    "inject_input_delay": lambda v: fields.number("inject_input_delay", v, 0),
}


def _step_delay(value: Any) -> tuple[int, float]:
    """RANK:SECONDS -> (rank, seconds)."""
    text = fields.text("inject_step_delay", value)
    rank, sep, seconds = text.partition(":")
    try:
        if not sep:
            raise ValueError
        parsed = (int(rank), float(seconds))
    except ValueError:
        raise UserError(f"inject_step_delay: expected RANK:SECONDS, e.g. 1:0.05, got {text!r}"
                        ) from None
    if parsed[0] < 0 or not parsed[1] > 0:
        raise UserError(f"inject_step_delay: expected a rank >= 0 and seconds > 0, got {text!r}")
    return parsed


def _section_table(name: str) -> Mapping[str, Any]:
    return frameworks.get(name).table


def build_spec(values: dict[str, Any]) -> SweepSpec:
    """Validate a flat-or-sectioned mapping (workload file merged with CLI flags) into a SweepSpec.

    Unknown keys are errors: a misspelt option silently ignored would mislead a benchmark.
    """
    top: dict[str, Any] = {}
    sections: dict[str, dict[str, Any]] = {s: {} for s in frameworks.names()}
    for key, value in values.items():
        if key == "vet":
            continue  # needs the sweep's other fields (below)
        if key in sections:
            if not isinstance(value, dict):
                raise UserError(f"{key}: expected a table of options")
            for sub, subvalue in value.items():
                parsers = _section_table(key)
                if sub not in parsers:
                    raise UserError(
                        f"{key}.{sub}: unknown option; allowed: {', '.join(parsers)}"
                    )
                if subvalue is not None:
                    sections[key][sub] = parsers[sub](subvalue)
        elif key in _TOP_FIELDS:
            if value is not None:
                top[key] = _TOP_FIELDS[key](value)
                if key == "inject_step_delay":
                    top["fault_rank"], top["fault_step_delay"] = top.pop(key)
                elif key == "inject_input_delay":
                    top["fault_input_delay"] = top.pop(key)
        else:
            allowed = ", ".join([*_TOP_FIELDS, "vet", *(f"[{s}]" for s in sections)])
            raise UserError(f"{key}: unknown option; allowed: {allowed}")
    options = {name: frameworks.get(name).options_type(**given)
               for name, given in sections.items()}
    spec = SweepSpec(**top, framework_options=options)
    for name, opts in options.items():
        frameworks.get(name).check_options(opts, spec.workers)
    return _with_vetting(spec, values.get("vet"))


def _with_vetting(spec: SweepSpec, value: Any) -> SweepSpec:
    """The `vet` key (true or a [vet] table) and vet_file: only where runs go on Slurm nodes."""
    from dataclasses import replace

    from scalebench.vet import options as vet_options

    vet = vet_options.from_workload(value, spec)
    if vet is None and spec.vet_file is None:
        return spec
    name = "vet" if vet is not None else "vet_file"
    if vet is not None and spec.vet_file is not None:
        raise UserError("vet_file: give vet (vet the allocation now) or vet_file (an earlier "
                        "vetting of this job), not both")
    if spec.launcher != "slurm":
        raise UserError(f"{name}: vetting places runs on the nodes of a Slurm allocation; use "
                        "it with launcher slurm")
    return replace(spec, vet=vet)


def load_workload(path: str | os.PathLike) -> dict[str, Any]:
    """Read a workload TOML file into a mapping for build_spec (not yet validated)."""
    p = Path(path)
    if not p.is_file():
        raise UserError(f"workload: file {str(p)!r} not found")
    try:
        data = tomllib.loads(p.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"workload: {p}: not valid TOML ({exc})") from None
    sweep = data.pop("sweep", {})
    if not isinstance(sweep, dict):
        raise UserError(f"workload: {p}: [sweep] must be a table")
    for key in data:
        if key not in (*frameworks.names(), "vet"):
            allowed = ", ".join(["[sweep]", *(f"[{s}]" for s in frameworks.names()), "[vet]"])
            raise UserError(f"{key}: unknown table in {p}; allowed: {allowed}")
    values = dict(sweep)
    values.setdefault("name", p.stem)
    values.update(data)
    return values


def merge(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """CLI flags override the workload file; section tables merge key by key."""
    merged = {k: (dict(v) if isinstance(v, dict) else v) for k, v in base.items()}
    for key, value in overrides.items():
        if value is None:
            continue
        if isinstance(value, dict):
            merged.setdefault(key, {})
            merged[key].update({k: v for k, v in value.items() if v is not None})
        else:
            merged[key] = value
    return merged
