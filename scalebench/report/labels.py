"""Runs and series in words, shared by the report model, its tables and figures."""

from __future__ import annotations

from collections.abc import Sequence

from scalebench.spec import identity

MODEL_NAMES = {"inception_v3": "Inception V3", "resnet101": "ResNet-101", "vgg16": "VGG-16"}


def step_label(row: dict) -> str:
    """The step options that differ from the framework's defaults: a summary row carries them
    as "step_label"; a record's are read from its options."""
    return row["step_label"] if "step_label" in row else identity.step_label(row)


def _with_step(label: str, row: dict) -> str:
    """The label with the step options and the injected faults, when there are any."""
    extra = ", ".join(x for x in (step_label(row), identity.faults_label(row)) if x)
    return f"{label} ({extra})" if extra else label


def framework_label(row: dict) -> str:
    """framework [(step options)], e.g. "horovod (fp16_allreduce)"."""
    return _with_step(row["framework"], row)


def series_label(row: dict) -> str:
    """framework [precision if not fp32] [(step options)], e.g. "horovod fp16 (fp16_allreduce)"."""
    label = row["framework"] if row["precision"] == "fp32" else \
        f"{row['framework']} {row['precision']}"
    return _with_step(label, row)


def workers_label(row: dict) -> str:
    return str(row["world_size"]) + (f" ({row['nodes']} nodes)" if row["nodes"] > 1 else "")


def run_label(row: dict) -> str:
    return f"{row['model']} {series_label(row)} x{row['world_size']}"


def group_title(key: Sequence, precision: str | None = None) -> str:
    """A series in words; precision: its label in words (analysis.precision_label)."""
    g = dict(zip(identity.SERIES_FIELDS, key, strict=True))
    per = "per worker" if g["scaling"] == "weak" else "in total"
    return (f"{MODEL_NAMES.get(g['model'], g['model'])} — batch {g['scaling_batch']} {per}, "
            f"{g['image_size']} px, {g['device_kind']}, {g['scaling']} scaling, {g['data']} data, "
            f"{precision or g['precision']}" + (f", TF32 {g['tf32']}" if g["tf32"] else ""))
