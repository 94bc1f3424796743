"""scalebench env: the environment fingerprint every record carries, and the settings that
make numbers unstable (hardware/stability.py: `stability` in the JSON, its warnings and what
could not be read on stderr)."""

from __future__ import annotations

import argparse
import json
import sys

from scalebench.hardware import devices, envinfo, stability


def register(sub) -> None:
    p = sub.add_parser("env", help="print the environment fingerprint as JSON")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    info = devices.resolve(args.device)
    env = envinfo.collect(info.device, info.backend)
    env["stability"] = stability.collect()
    print(json.dumps(env, indent=2))
    for line in stability.lines(env["stability"]):
        print(line, file=sys.stderr)
    return 0
