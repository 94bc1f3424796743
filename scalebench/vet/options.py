"""What a vetting measures and how: VetOptions, from `scalebench vet`'s flags or a workload's
[vet] table (then the sweep's batch, image size, precision and device fill what it leaves out).
Every bad value is one UserError naming the field; checks against the allocation (unknown node
names) come when the allocation is known (plan.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from scalebench.models import workloads
from scalebench.spec import fields, units
from scalebench.spec.errors import UserError
from scalebench.vet.schedule import DEFAULT_ROUNDS
from scalebench.vet.schedule import MODES as PAIRS

PRECISIONS = ("fp32", "bf16", "fp16")
DEVICES = ("auto", "cpu", "cuda")
DEFAULT_MODEL = "resnet101"
# One large message per pair: nccl-tests' bandwidth end on CUDA; gloo on CPU moves ~GB/s.
DEFAULT_ALLREDUCE = {"cuda": 64 * 2**20, "cpu": 16 * 2**20}
DEFAULT_MATMUL = {"cuda": 8192, "cpu": 1024}
# The sustained GEMM: long enough for clocks and temperatures to settle (MegaScale found short
# GEMMs missed stragglers that sustained load showed); seconds per node.
DEFAULT_SUSTAINED = {"cuda": 30.0, "cpu": 3.0}


@dataclass(frozen=True)
class VetOptions:
    model: str = DEFAULT_MODEL
    image_size: int | None = None  # None: the model's native size
    batch_size: int = 32  # images per step of the compute probe
    precision: str = "fp32"
    device: str = "auto"
    repeats: int = 7
    threshold: float = 10.0  # percent below the median
    warmup: int = 2  # untimed compute steps before the first window
    iters: int = 5  # compute steps per window
    matmul_size: int | None = None  # None: DEFAULT_MATMUL for the device
    matmul_iters: int = 10
    allreduce_size: int | None = None  # bytes; None: DEFAULT_ALLREDUCE for the device
    allreduce_iters: int = 5
    timeout: float = 900.0  # seconds per probe step
    sustained: float | None = None  # seconds of sustained GEMM; None: DEFAULT_SUSTAINED
    pairs: str = "auto"  # auto, all (the tournament) or few (the constant schedule)
    rounds: int = DEFAULT_ROUNDS  # rounds of the constant schedule, before retests
    topology: str | None = None  # a file in topology.conf syntax; None: Slurm's own, if any
    node_slowdown: tuple[tuple[str, float], ...] = ()  # fault injection: (node, fraction)
    link_delay: tuple[tuple[str, str, float], ...] = ()  # fault injection: (a, b, seconds)
    probe_kill: tuple[str, ...] = ()  # fault injection: nodes whose node probe kills itself

    def faults(self) -> dict[str, Any]:
        from scalebench.tasks.vet import injected_faults

        return injected_faults(self.node_slowdown, self.link_delay, self.probe_kill)


def node_slowdown(value: Any) -> tuple[tuple[str, float], ...]:
    """NODE:FRACTION[,NODE:FRACTION...] -> ((node, fraction), ...); 0.5: 1.5x as long."""
    out = []
    for item in fields.as_list("inject_node_slowdown", value):
        node, sep, fraction = str(item).rpartition(":")
        try:
            if not sep or not node:
                raise ValueError
            number = float(fraction)
        except ValueError:
            raise UserError(f"inject_node_slowdown: expected NODE:FRACTION, e.g. sb3:0.5 (its "
                            f"compute takes 1.5x as long), got {item!r}") from None
        if not number > 0:
            raise UserError(f"inject_node_slowdown: the fraction must be > 0, got {item!r}")
        out.append((node, number))
    return tuple(out)


def link_delay(value: Any) -> tuple[tuple[str, str, float], ...]:
    """NODEA:NODEB:SECONDS[,...] -> ((a, b, seconds), ...): sleep after each collective."""
    out = []
    for item in fields.as_list("inject_link_delay", value):
        parts = str(item).split(":")
        try:
            if len(parts) != 3 or not parts[0] or not parts[1]:
                raise ValueError
            seconds = float(parts[2])
        except ValueError:
            raise UserError(f"inject_link_delay: expected NODEA:NODEB:SECONDS, e.g. "
                            f"sb1:sb2:0.01, got {item!r}") from None
        if parts[0] == parts[1] or not seconds > 0:
            raise UserError(f"inject_link_delay: two different nodes and seconds > 0, got "
                            f"{item!r}")
        out.append((parts[0], parts[1], seconds))
    return tuple(out)


def threshold(value: Any) -> float:
    try:
        if isinstance(value, bool):
            raise ValueError
        number = float(value)
    except (TypeError, ValueError):
        raise UserError(f"threshold: expected a percentage between 0 and 100, got {value!r}"
                        ) from None
    if not 0 < number < 100:
        raise UserError(f"threshold: expected a percentage between 0 and 100 (exclusive), got "
                        f"{number:g}")
    return number


def probe_kill(value: Any) -> tuple[str, ...]:
    """NODE[,NODE...]: the node probe on those nodes kills itself (SIGKILL) as it starts."""
    nodes = tuple(str(v).strip() for v in fields.as_list("inject_probe_kill", value))
    if not nodes or not all(nodes):
        raise UserError(f"inject_probe_kill: expected Slurm node names, e.g. sb3, got {value!r}")
    return nodes


PARSERS: dict[str, Any] = {
    "model": lambda v: fields.choice("model", v, tuple(workloads.MODELS)),
    "image_size": lambda v: fields.integer("image_size", v, 1),
    "batch_size": lambda v: fields.integer("batch_size", v, 1),
    "precision": lambda v: fields.choice("precision", v, PRECISIONS),
    "device": lambda v: fields.choice("device", v, DEVICES),
    "repeats": lambda v: fields.integer("repeats", v, 2),
    "threshold": threshold,
    "warmup": lambda v: fields.integer("warmup", v, 0),
    "iters": lambda v: fields.integer("iters", v, 1),
    "matmul_size": lambda v: fields.integer("matmul_size", v, 1),
    "matmul_iters": lambda v: fields.integer("matmul_iters", v, 1),
    "allreduce_size": lambda v: _size(v),
    "allreduce_iters": lambda v: fields.integer("allreduce_iters", v, 1),
    "timeout": lambda v: fields.number("timeout", v, 0),
    "sustained": lambda v: fields.number("sustained", v, 0),
    "pairs": lambda v: fields.choice("pairs", v, PAIRS),
    "rounds": lambda v: fields.integer("rounds", v, 1),
    "topology": lambda v: fields.text("topology", v),
    "inject_probe_kill": probe_kill,
    "inject_node_slowdown": node_slowdown,
    "inject_link_delay": link_delay,
}
_FIELD = {"inject_node_slowdown": "node_slowdown", "inject_link_delay": "link_delay",
          "inject_probe_kill": "probe_kill"}


def _size(value: Any) -> int:
    size = units.parse_size(str(value), "allreduce_size")
    if size <= 0 or size % 4:
        raise UserError(f"allreduce_size: a positive whole number of float32 elements (a "
                        f"multiple of 4 bytes), got {value!r}")
    return size


def build(values: Mapping[str, Any], base: VetOptions | None = None) -> VetOptions:
    """Validated options from flags or a [vet] table (None values: left as in base)."""
    given: dict[str, Any] = {}
    for key, value in values.items():
        if key not in PARSERS:
            raise UserError(f"vet.{key}: unknown option; allowed: {', '.join(PARSERS)}")
        if value is not None:
            given[_FIELD.get(key, key)] = PARSERS[key](value)
    options = replace(base or VetOptions(), **given)
    workloads.check_input(options.model, options.image_size
                          or workloads.get_info(options.model).native_image_size,
                          options.batch_size)
    return options


def from_workload(value: Any, sweep) -> VetOptions | None:
    """The sweep's `vet` key: false/absent -> None; true or a table -> the options, with the
    sweep's batch size, image size, first precision, device and first model where the table
    says nothing."""
    if value is None or value is False:
        return None
    if value is True:
        value = {}
    if not isinstance(value, Mapping):
        raise UserError(f"vet: expected true, false or a table of vetting options, got {value!r}")
    base = VetOptions(model=sweep.models[0], image_size=sweep.image_size,
                      batch_size=sweep.batch_size, precision=sweep.precision[0],
                      device=sweep.device)
    return build(value, base)
