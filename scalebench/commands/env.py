"""scalebench env: the environment fingerprint every record carries."""

from __future__ import annotations

import argparse
import json

from scalebench.hardware import devices, envinfo


def register(sub) -> None:
    p = sub.add_parser("env", help="print the environment fingerprint as JSON")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    info = devices.resolve(args.device)
    print(json.dumps(envinfo.collect(info.device, info.backend), indent=2))
    return 0
