"""Framework option flags for the commands that launch runs (sweep, allreduce): each framework
package declares its own (Framework.flags); this module only adds them to a parser and reads
them back into {table: {field: value}}."""

from __future__ import annotations

import argparse

from scalebench import frameworks


def _dest(framework: str, field: str) -> str:
    return f"{framework}__{field}"


def add_framework_flags(p: argparse.ArgumentParser, training: bool = True) -> None:
    """Every framework's flags; training-only knobs when training is True."""
    for name in frameworks.names():
        adapter = frameworks.get(name)
        group = p.add_argument_group(adapter.title or name)
        for flag in adapter.flags:
            if flag.training_only and not training:
                continue
            if flag.switch:
                group.add_argument(flag.flag, dest=_dest(name, flag.field), action="store_true",
                                   default=None, help=flag.help)
            else:
                group.add_argument(flag.flag, dest=_dest(name, flag.field), help=flag.help)


def section_values(args: argparse.Namespace) -> dict[str, dict]:
    """{table: {field: value}} for the flags this command has (None where not given)."""
    values: dict[str, dict] = {}
    for name in frameworks.names():
        for flag in frameworks.get(name).flags:
            dest = _dest(name, flag.field)
            if hasattr(args, dest):
                values.setdefault(name, {})[flag.field] = getattr(args, dest)
    return values
