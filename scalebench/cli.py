"""Distributed-training scaling benchmarks: Horovod, Ray Train and PyTorch DDP side by side.

Parsing only. Each subcommand lives in scalebench/commands/<name>.py with register(subparsers)
and run(args) -> exit code; tests call the run functions directly.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from scalebench import __version__
from scalebench.spec.errors import UserError

COMMANDS = ["sweep", "report", "list", "env", "allreduce", "predict", "compare", "gate",
            "history", "slurm-script", "vet", "tune", "k8s"]


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2 (argparse would print the usage block too)
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="scalebench", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"scalebench {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for name in COMMANDS:
        importlib.import_module(f"scalebench.commands.{name.replace('-', '_')}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.run(args) or 0)
    except UserError as exc:
        print(f"scalebench {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("scalebench: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
