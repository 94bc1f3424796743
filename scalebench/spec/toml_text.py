"""Values as TOML text: tuned.toml's cells (tuning/files.py) and the workload a Kubernetes pod
runs, written from the merged workload file and flags (commands/k8s_sweep.py)."""

from __future__ import annotations

from typing import Any


def toml_value(value: Any) -> str:
    """One TOML value: a boolean, a number, a string, or an array of them."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(float(value)) if isinstance(value, float) else str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    text = str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{text}"'


def workload(values: dict[str, Any]) -> str:
    """A workload file of values as config.load_workload reads them: the top-level keys in
    [sweep], each table (a framework's options) as its own table; None values left out."""
    lines = ["[sweep]"]
    lines += [f"{key} = {toml_value(v)}" for key, v in values.items()
              if v is not None and not isinstance(v, dict)]
    for table, entries in values.items():
        if isinstance(entries, dict):
            lines += ["", f"[{table}]"]
            lines += [f"{key} = {toml_value(v)}" for key, v in entries.items() if v is not None]
    return "\n".join(lines) + "\n"
