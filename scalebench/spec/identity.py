"""Which records are the same configuration, which run is a run's efficiency baseline, and which
planned run is already done (--resume). Every other module asks here.

A train configuration is: framework, model, workers, nodes, per-worker batch, image size,
precision, device kind, scaling, data, the framework options that change the timed step
(frameworks.step_options: Horovod fp16 compression, fusion threshold, cycle time, timeline; DDP
bucket size; Ray placement), and the TF32 setting when one was given (`tf32` "on" or "off";
absent or "default" is PyTorch's default and adds nothing, so keys of older records stay as they
were), and the injected faults when there are any (`faults`, e.g. a step delay on one rank: a
test of the breakdown, never pooled with clean runs; absent or empty adds nothing). Two records
that differ only in a step option, the TF32 setting or their faults are two rows. Repeats
(separate launches of one configuration) share a key.

Efficiency baselines: weak scaling keeps the per-worker batch, so the baseline of an N-worker run
is the one-worker run with the same per-worker batch; strong scaling keeps the global batch, so
it is the one-worker run whose batch is the whole global batch.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from scalebench import frameworks

# The fields of a train configuration key, in order; "step_options" is a canonical JSON text.
CONFIG_FIELDS = ("framework", "model", "world_size", "nodes", "batch_size", "image_size",
                 "precision", "device_kind", "scaling", "data", "step_options", "tf32", "faults")
# A scaling series: the configuration without what varies along it (framework, workers, nodes)
# and with the batch that scaling holds fixed.
SERIES_FIELDS = ("model", "scaling_batch", "image_size", "precision", "device_kind", "scaling",
                 "data", "tf32")
# Planned-run identity for --resume: the resolved device, every option as given.
RESUME_FIELDS = ("kind", "framework", "model", "world_size", "nodes", "batch_size", "image_size",
                 "precision", "device", "scaling", "data")


def device_kind(record: Mapping[str, Any]) -> str | None:
    """The accelerator model on GPUs, "cpu" on CPUs (from the record's environment; a summary
    or history row carries it as its own field)."""
    return ((record.get("env") or {}).get("device_kind") or record.get("device_kind")
            or record.get("device"))


def tf32_setting(record: Mapping[str, Any]) -> str | None:
    """The TF32 setting a run was given ("on", "off"); None for PyTorch's default or a record
    written before the setting existed."""
    value = record.get("tf32")
    return None if value in (None, "default") else str(value)


def faults_text(record: Mapping[str, Any]) -> str | None:
    """The record's injected faults as canonical JSON; None for a clean run (no `faults`, or
    an empty one) and for a summary row or history row of one, which carry this text."""
    value = record.get("faults")
    if not value:
        return None
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def faults_label(record: Mapping[str, Any]) -> str:
    """The injected faults in words, e.g. "faults: input delay 0.2 s, step delay 0.3 s on rank
    1" ("" for a clean run)."""
    text = faults_text(record)
    if text is None:
        return ""
    parts = []
    for name, value in json.loads(text).items():
        if name == "step_delay" and isinstance(value, dict):
            parts.append(f"step delay {value.get('seconds'):g} s on rank {value.get('rank')}")
        elif name == "input_delay_seconds":
            parts.append(f"input delay {value:g} s")
        else:
            parts.append(f"{name}={value}")
    return "faults: " + ", ".join(parts)


def step_options(record: Mapping[str, Any]) -> dict[str, Any]:
    """The record's step-changing options that differ from the framework's defaults: a record
    that gives an option its default value (fp16_allreduce false) is the same configuration
    as one that leaves it out."""
    framework = record.get("framework")
    defaults = frameworks.default_step_options(framework)
    return {name: value for name, value in
            frameworks.step_options(framework, record.get("options")).items()
            if defaults.get(name) != value}


def step_options_text(record: Mapping[str, Any]) -> str:
    """step_options as canonical JSON ("{}" when none is set)."""
    return json.dumps(step_options(record), sort_keys=True, default=str)


def _label(options: Mapping[str, Any]) -> str:
    return ", ".join(name if value is True else f"{name}={value}"
                     for name, value in sorted(options.items()))


def step_label(record: Mapping[str, Any]) -> str:
    """Short words for the step options that differ from the framework's defaults, e.g.
    "fp16_allreduce, fusion_threshold_mb=32" ("" when none is set)."""
    return _label(step_options(record))


def scaling_batch(record: Mapping[str, Any]) -> Any:
    """The batch that scaling holds fixed: per worker (weak) or in total (strong)."""
    return record.get("global_batch") if record.get("scaling") == "strong" else \
        record.get("batch_size")


def _key(record: Mapping[str, Any], fields: Sequence[str], **derived: Any) -> tuple:
    """The values of `fields`, with the device kind, the TF32 setting, the faults and `derived`
    worked out rather than read (older records lack them)."""
    values = {**record, "device_kind": device_kind(record), "tf32": tf32_setting(record),
              "faults": faults_text(record), **derived}
    return tuple(values.get(f) for f in fields)


def config_key(record: Mapping[str, Any]) -> tuple:
    """The configuration of a train record (or summary row): values of CONFIG_FIELDS."""
    return _key(record, CONFIG_FIELDS, step_options=step_options_text(record))


def key_dict(key: Sequence) -> dict[str, Any]:
    """A configuration key as {field: value}."""
    return dict(zip(CONFIG_FIELDS, key, strict=True))


def with_changes(key: Sequence, **changes: Any) -> tuple:
    """The key with some fields replaced."""
    values = key_dict(key)
    values.update(changes)
    return tuple(values[f] for f in CONFIG_FIELDS)


def baseline_key(record: Mapping[str, Any], world_size: int = 1) -> tuple:
    """The configuration key of this run's efficiency baseline: the same framework and options
    on one node at `world_size` workers (1: the one-worker baseline; a full node's worker count
    for per-node efficiency), with the per-worker batch that keeps the scaled batch fixed."""
    batch = record.get("batch_size")
    if record.get("scaling") == "strong":
        batch = record.get("global_batch") // world_size
    return with_changes(config_key(record), world_size=world_size, nodes=1, batch_size=batch)


def untuned_baseline_key(record: Mapping[str, Any]) -> tuple:
    """baseline_key with the framework's communication knobs (Framework.knobs: what `scalebench
    tune` sets) left at their defaults. One worker runs the plain step, with no framework
    communication (worker/measure.py), so a tuned run's one-worker step is its default's: a
    tuned row without a one-worker run of its own takes the default's as its baseline."""
    framework = record.get("framework")
    knobs = ({k.option for k in frameworks.get(framework).knobs}
             if framework in frameworks.names() else set())
    kept = {k: v for k, v in step_options(record).items() if k not in knobs}
    return with_changes(baseline_key(record),
                        step_options=json.dumps(kept, sort_keys=True, default=str))


def best_baseline_key(record: Mapping[str, Any]) -> tuple:
    """baseline_key with framework and step options left open (None): the one-worker runs of
    every framework that efficiency_vs_best chooses from."""
    return with_changes(baseline_key(record), framework=None, step_options=None)


def series_key(record: Mapping[str, Any]) -> tuple:
    """Runs along one scaling curve, across frameworks: values of SERIES_FIELDS."""
    return _key(record, SERIES_FIELDS, scaling_batch=scaling_batch(record))


def line_key(record: Mapping[str, Any]) -> tuple:
    """One line within a series: the framework, its step options and its faults."""
    return (record.get("framework"), step_options_text(record), faults_text(record))


def describe(key: Sequence) -> str:
    """A configuration key in words, e.g. "vgg16 horovod x2 fp32 b2 75px cpu weak"."""
    k = key_dict(key)
    nodes = f" {k['nodes']} nodes" if k["nodes"] and k["nodes"] > 1 else ""
    extra = _label(json.loads(k["step_options"] or "{}"))
    faults = faults_label(k)
    return (f"{k['model']} {k['framework']} x{k['world_size']}{nodes} {k['precision']} "
            f"b{k['batch_size']} {k['image_size']}px {k['device_kind']} {k['scaling']}"
            + ("" if k["data"] == "synthetic" else f" {k['data']}")
            + (f" tf32 {k['tf32']}" if k["tf32"] else "")
            + (f" [{extra}]" if extra else "") + (f" [{faults}]" if faults else ""))


def resume_key(record: Mapping[str, Any]) -> tuple:
    """A planned run and the record it left share this key (kind, resolved device, every
    option as given, the repeat index where there is one, and a TF32 setting other than the
    default, and injected faults where there are any: a clean run never stands for a faulted
    one, nor the other way round)."""
    options = json.dumps(record.get("options") or {}, sort_keys=True, default=str)
    tf32, faults = tf32_setting(record), faults_text(record)
    return tuple(record.get(f) for f in RESUME_FIELDS) + (
        record.get("size_bytes"), record.get("dtype"), record.get("repeat") or 1, options) + \
        ((tf32,) if tf32 else ()) + ((("faults", faults),) if faults else ())


def allreduce_point_key(record: Mapping[str, Any]) -> tuple:
    """One allreduce measurement point: framework, workers, nodes, dtype, device, size."""
    return (record["framework"], record["world_size"], record["nodes"], record["dtype"],
            record["device"], device_kind(record), record["size_bytes"])
