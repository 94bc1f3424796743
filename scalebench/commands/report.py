"""scalebench report DIR_OR_JSONL... [--out DIR]"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from scalebench import report, results


def register(sub) -> None:
    p = sub.add_parser("report", help="summary.csv, figures and report from results files")
    p.add_argument("inputs", nargs="+", help="results.jsonl files or sweep output folders")
    p.add_argument("--out", help="output folder (default: the first input's folder)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    paths = results.resolve_inputs(args.inputs)
    records, problems = results.load(paths)
    for problem in problems:
        print(f"warning: {problem}", file=sys.stderr)
    out = Path(args.out) if args.out else paths[0].parent
    for path in report.write_all(records, problems, out):
        print(f"wrote {path}")
    return 0
