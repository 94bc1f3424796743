"""scalebench history add RESULTS... --store FILE | history plot --store FILE --out DIR"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from scalebench import history, results
from scalebench.errors import UserError


def register(sub) -> None:
    p = sub.add_parser("history", help="keep results over time and draw their trends")
    actions = p.add_subparsers(dest="action", required=True, parser_class=type(p))
    a = actions.add_parser("add", help="append the runs of results files to a history store")
    a.add_argument("inputs", nargs="+", help="results.jsonl files or sweep output folders")
    a.add_argument("--store", required=True, help="history store (JSONL; created if missing)")
    a.add_argument("--commit", help="git commit the runs measured (default: the one each run "
                   "recorded)")
    a.set_defaults(run=run_add)
    q = actions.add_parser("plot", help="trend figures per configuration, regressions marked")
    q.add_argument("--store", required=True, help="history store written by `history add`")
    q.add_argument("--out", required=True, help="output folder for history-<metric>.png")
    q.add_argument("--threshold", type=float, default=5.0,
                   help="percent, as in compare (default 5)")
    q.add_argument("--alpha", type=float, default=0.05, help="as in compare (default 0.05)")
    q.set_defaults(run=run_plot)


def run_add(args: argparse.Namespace) -> int:
    paths = results.resolve_inputs(args.inputs)
    records, problems = results.load(paths)
    for problem in problems:
        print(f"warning: {problem}", file=sys.stderr)
    if not any(r.get("kind") == "train" for r in records):
        raise UserError(f"no valid run record in {', '.join(str(p) for p in paths)}")
    added, present = history.add(Path(args.store), records, args.commit,
                                 source=", ".join(str(p) for p in paths))
    print(f"added {added} run{'s' if added != 1 else ''} to {args.store}"
          + (f" ({present} already there)" if present else ""))
    return 0


def run_plot(args: argparse.Namespace) -> int:
    rows, problems = history.load_store(Path(args.store))
    for problem in problems:
        print(f"warning: {problem}", file=sys.stderr)
    written, found = history.plot(rows, Path(args.out), args.threshold, args.alpha)
    if not written:
        print(f"no successful runs in {args.store}; nothing to draw")
    for path in written:
        print(f"wrote {path}")
    for metric, panel, line, point in found:
        where = (f"{metric} of {history.panel_title(panel)} {history.line_label(line)} "
                 f"at {point.when.isoformat()} (commit {point.commit or 'unknown'}"
                 + (f", sweep {point.sweep_id}" if point.sweep_id else "") + ")")
        j = point.judgement
        change = "" if j is None else (f"{j.change_pct:+.1f}% vs the previous point ({j.verdict}; "
                                       f"{j.difference.test}, {j.difference.samples})")
        if j is not None and j.verdict == "regression":
            print(f"regression: {where}: {'; '.join((change,) + point.notes)}")
        else:
            print(f"note: {where}: {'; '.join(((change,) if change else ()) + point.notes)}")
    return 0
