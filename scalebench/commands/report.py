"""scalebench report DIR_OR_JSONL... [--out DIR]"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from scalebench import report
from scalebench.analysis import scaling_model as sm
from scalebench.records import results
from scalebench.spec import units


def register(sub) -> None:
    p = sub.add_parser("report", help="summary.csv, figures, report.md and report.html from "
                       "results files")
    p.add_argument("inputs", nargs="+", help="results.jsonl files or sweep output folders")
    p.add_argument("--out", help="output folder (default: the first input's folder)")
    p.add_argument("--bandwidth", help="link bandwidth for the scaling model, "
                   f"{units.BANDWIDTH_HELP} (default: fitted from allreduce records among the "
                   "inputs)")
    p.add_argument("--latency", default=f"{sm.DEFAULT_STEP_LATENCY * 1e6:g}us",
                   help="ring-step latency with --bandwidth (default 5us)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    paths = results.resolve_inputs(args.inputs)
    records, problems = results.load(paths)
    for problem in problems:
        print(f"warning: {problem}", file=sys.stderr)
    out = Path(args.out) if args.out else paths[0].parent
    link = None
    if args.bandwidth is not None:
        link = sm.Link(units.parse_bandwidth(args.bandwidth), units.parse_duration(args.latency),
                       "given")
    for path in report.write_all(records, problems, out, link):
        print(f"wrote {path}")
    return 0
