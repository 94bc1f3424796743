"""SweepSpec (what the user asked for) and RunSpec (one launch), workload files, validation.

Every bad value becomes one UserError naming the field and the allowed values.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomllib

from scalebench import workloads
from scalebench.errors import UserError

FRAMEWORKS = ("ddp", "horovod", "ray")
PRECISIONS = ("fp32", "bf16", "fp16")
DEVICES = ("auto", "cpu", "cuda")
SCALINGS = ("weak", "strong")
PLACEMENTS = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")


@dataclass(frozen=True)
class DDPOptions:
    nnodes: int = 1
    node_rank: int = 0
    rdzv_endpoint: str | None = None  # HOST:PORT of node 0, needed when nnodes > 1


@dataclass(frozen=True)
class HorovodOptions:
    hosts: str | None = None  # "host1:4,host2:4", passed to horovodrun -H
    hostfile: str | None = None
    fp16_allreduce: bool = False
    fusion_threshold_mb: float | None = None
    cycle_time_ms: float | None = None
    timeline: bool = False


@dataclass(frozen=True)
class RayOptions:
    address: str | None = None  # None: embedded local cluster; "auto", "HOST:PORT", "ray://HOST:PORT"
    placement: str = "PACK"


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
    ddp: DDPOptions = field(default_factory=DDPOptions)
    horovod: HorovodOptions = field(default_factory=HorovodOptions)
    ray: RayOptions = field(default_factory=RayOptions)


@dataclass(frozen=True)
class RunSpec:
    """Everything one launch needs; serialised whole to the workers (never via argv fragments)."""

    run_id: str
    framework: str
    model: str
    world_size: int
    nodes: int
    batch_size: int  # per worker
    global_batch: int
    image_size: int
    aux_logits: bool
    precision: str
    device: str  # resolved: cpu or cuda
    backend: str  # gloo or nccl
    scaling: str
    data: str
    warmup: int
    iters: int
    trials: int
    timeout: float
    threads_per_worker: int
    loader_workers: int
    params: int
    options: dict[str, Any]  # the chosen framework's options, recorded as given
    kind: str = "train"  # worker task (worker_io.TASKS); other tasks bring their own spec type

    def key(self) -> tuple:
        """Identity of a configuration, used by --resume."""
        return run_key(dataclasses.asdict(self))

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> RunSpec:
        return cls(**json.loads(text))


KEY_FIELDS = ("framework", "model", "world_size", "nodes", "batch_size", "image_size",
              "precision", "device", "scaling", "data")


def run_key(record: dict) -> tuple:
    options = json.dumps(record.get("options") or {}, sort_keys=True)
    return tuple(record.get(f) for f in KEY_FIELDS) + (options,)


# ---------------------------------------------------------------- parsing and validation

def _choices(name: str, values: Any, allowed: tuple[str, ...]) -> tuple[str, ...]:
    values = _as_list(name, values)
    for v in values:
        if v not in allowed:
            raise UserError(f"{name}: unknown value {v!r}; allowed: {', '.join(allowed)}")
    if not values:
        raise UserError(f"{name}: needs at least one of: {', '.join(allowed)}")
    return tuple(dict.fromkeys(values))


def _as_list(name: str, value: Any) -> list:
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, (list, tuple)):
        return list(value)
    raise UserError(f"{name}: expected a list or comma-separated string, got {value!r}")


def _int(name: str, value: Any, minimum: int) -> int:
    try:
        if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
            raise ValueError
        number = int(value)
    except (TypeError, ValueError):
        raise UserError(f"{name}: expected an integer >= {minimum}, got {value!r}") from None
    if number < minimum:
        raise UserError(f"{name}: expected an integer >= {minimum}, got {number}")
    return number


def _float(name: str, value: Any, minimum: float) -> float:
    try:
        if isinstance(value, bool):
            raise ValueError
        number = float(value)
    except (TypeError, ValueError):
        raise UserError(f"{name}: expected a number > {minimum:g}, got {value!r}") from None
    if not number > minimum:
        raise UserError(f"{name}: expected a number > {minimum:g}, got {number:g}")
    return number


def _bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    raise UserError(f"{name}: expected true or false, got {value!r}")


def _str(name: str, value: Any) -> str:
    if isinstance(value, str) and value:
        return value
    raise UserError(f"{name}: expected a non-empty string, got {value!r}")


def _workers(value: Any) -> tuple[int, ...]:
    items = _as_list("workers", value)
    workers = tuple(sorted(dict.fromkeys(_int("workers", w, 1) for w in items)))
    if not workers:
        raise UserError("workers: expected one or more integers >= 1, e.g. 1,2,4")
    return workers


def _data(value: Any) -> str:
    text = _str("data", value)
    if text == "synthetic":
        return text
    if text.startswith("imagefolder:") and len(text) > len("imagefolder:"):
        path = Path(text.split(":", 1)[1]).expanduser()
        if not path.is_dir():
            raise UserError(f"data: image folder {str(path)!r} does not exist")
        return f"imagefolder:{path.resolve()}"
    raise UserError(f"data: unknown value {text!r}; allowed: synthetic, imagefolder:PATH")


def _endpoint(name: str, value: Any) -> str:
    text = _str(name, value)
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UserError(f"{name}: expected HOST:PORT, got {text!r}")
    return text


_TOP_FIELDS: dict[str, Any] = {
    "name": lambda v: _str("name", v),
    "models": lambda v: _choices("models", v, tuple(workloads.MODELS)),
    "frameworks": lambda v: _choices("frameworks", v, FRAMEWORKS),
    "workers": _workers,
    "batch_size": lambda v: _int("batch_size", v, 1),
    "image_size": lambda v: _int("image_size", v, 1),
    "precision": lambda v: _choices("precision", v, PRECISIONS),
    "warmup": lambda v: _int("warmup", v, 0),
    "iters": lambda v: _int("iters", v, 1),
    "trials": lambda v: _int("trials", v, 1),
    "timeout": lambda v: _float("timeout", v, 0),
    "device": lambda v: _choices("device", [v] if isinstance(v, str) else v, DEVICES)[0],
    "scaling": lambda v: _choices("scaling", [v] if isinstance(v, str) else v, SCALINGS)[0],
    "data": _data,
    "loader_workers": lambda v: _int("loader_workers", v, 0),
    "threads_per_worker": lambda v: _int("threads_per_worker", v, 1),
    "out": lambda v: _str("out", v),
    "resume": lambda v: _bool("resume", v),
    "quiet": lambda v: _bool("quiet", v),
}

_SECTION_FIELDS: dict[str, dict[str, Any]] = {
    "ddp": {
        "nnodes": lambda v: _int("ddp.nnodes", v, 1),
        "node_rank": lambda v: _int("ddp.node_rank", v, 0),
        "rdzv_endpoint": lambda v: _endpoint("ddp.rdzv_endpoint", v),
    },
    "horovod": {
        "hosts": lambda v: _hosts(v),
        "hostfile": lambda v: _str("horovod.hostfile", v),
        "fp16_allreduce": lambda v: _bool("horovod.fp16_allreduce", v),
        "fusion_threshold_mb": lambda v: _float("horovod.fusion_threshold_mb", v, -1e-9),
        "cycle_time_ms": lambda v: _float("horovod.cycle_time_ms", v, 0),
        "timeline": lambda v: _bool("horovod.timeline", v),
    },
    "ray": {
        "address": lambda v: _str("ray.address", v),
        "placement": lambda v: _choices(
            "ray.placement", [v.upper()] if isinstance(v, str) else v, PLACEMENTS)[0],
    },
}
_SECTION_TYPES = {"ddp": DDPOptions, "horovod": HorovodOptions, "ray": RayOptions}


def _hosts(value: Any) -> str:
    text = _str("horovod.hosts", value)
    for item in text.split(","):
        host, sep, slots = item.partition(":")
        if not host or not sep or not slots.isdigit() or int(slots) < 1:
            raise UserError(
                f"horovod.hosts: expected HOST:SLOTS[,HOST:SLOTS...], e.g. h1:4,h2:4, got {text!r}"
            )
    return text


def build_spec(values: dict[str, Any]) -> SweepSpec:
    """Validate a flat-or-sectioned mapping (workload file merged with CLI flags) into a SweepSpec.

    Unknown keys are errors: a misspelt option silently ignored would mislead a benchmark.
    """
    top: dict[str, Any] = {}
    sections: dict[str, dict[str, Any]] = {s: {} for s in _SECTION_FIELDS}
    for key, value in values.items():
        if key in _SECTION_FIELDS:
            if not isinstance(value, dict):
                raise UserError(f"{key}: expected a table of options")
            for sub, subvalue in value.items():
                parsers = _SECTION_FIELDS[key]
                if sub not in parsers:
                    raise UserError(
                        f"{key}.{sub}: unknown option; allowed: {', '.join(parsers)}"
                    )
                if subvalue is not None:
                    sections[key][sub] = parsers[sub](subvalue)
        elif key in _TOP_FIELDS:
            if value is not None:
                top[key] = _TOP_FIELDS[key](value)
        else:
            allowed = ", ".join([*_TOP_FIELDS, *(f"[{s}]" for s in _SECTION_FIELDS)])
            raise UserError(f"{key}: unknown option; allowed: {allowed}")
    spec = SweepSpec(
        **top, **{s: _SECTION_TYPES[s](**sections[s]) for s in _SECTION_FIELDS}
    )
    _check_consistency(spec)
    return spec


def _check_consistency(spec: SweepSpec) -> None:
    ddp = spec.ddp
    if ddp.node_rank >= ddp.nnodes:
        raise UserError(f"ddp.node_rank: must be below ddp.nnodes ({ddp.nnodes}), got {ddp.node_rank}")
    if ddp.nnodes > 1:
        if ddp.rdzv_endpoint is None:
            raise UserError("ddp.rdzv_endpoint: required when ddp.nnodes > 1 (HOST:PORT of node 0)")
        for w in spec.workers or ():
            if w % ddp.nnodes:
                raise UserError(
                    f"workers: {w} is not a multiple of ddp.nnodes ({ddp.nnodes}); every node runs "
                    "the same number of workers"
                )
    if spec.horovod.hosts and spec.horovod.hostfile:
        raise UserError("horovod.hosts: give either hosts or hostfile, not both")


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
        if key not in _SECTION_FIELDS:
            allowed = ", ".join(["[sweep]", *(f"[{s}]" for s in _SECTION_FIELDS)])
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
