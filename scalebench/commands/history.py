"""scalebench history add RESULTS... --store FILE | history plot --store FILE --out DIR
| history detect --store FILE [--metric ...] [--alpha] [--min-magnitude PCT] [--last K]
[--markdown FILE]

detect's exit codes: 0 no new regression, 1 a regression (a step or a gradual change) that ends
among the last K points, 2 bad input (UserError).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from scalebench.commands.compare import write_markdown
from scalebench.records import results
from scalebench.spec.errors import UserError
from scalebench.tracking import changepoints, history, history_changes


def _detect_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--alpha", type=float, default=changepoints.ALPHA,
                   help="significance level a change must reach against the series' "
                   "correlated noise "
                   f"(default {changepoints.ALPHA:g})")
    p.add_argument("--min-magnitude", type=float, default=changepoints.MIN_MAGNITUDE,
                   help="percent the level must move by to count as a change "
                   f"(default {changepoints.MIN_MAGNITUDE:g})")
    p.add_argument("--last", type=int, default=history_changes.LAST,
                   help="a regression that ends among the last K points is new (fails "
                   f"detect; default {history_changes.LAST})")


def register(sub) -> None:
    p = sub.add_parser("history", help="keep results over time, find changes, draw trends")
    actions = p.add_subparsers(dest="action", required=True, parser_class=type(p))
    a = actions.add_parser("add", help="append the runs of results files to a history store")
    a.add_argument("inputs", nargs="+", help="results.jsonl files or sweep output folders")
    a.add_argument("--store", required=True, help="history store (JSONL; created if missing)")
    a.add_argument("--commit", help="git commit the runs measured (default: the one each run "
                   "recorded)")
    a.set_defaults(run=run_add)
    d = actions.add_parser("detect", help="changes (steps and gradual changes) per "
                           "configuration, with the commit range of each (exit 1 on a new "
                           "regression)")
    d.add_argument("--store", required=True, help="history store written by `history add`")
    d.add_argument("--metric", default="throughput,efficiency",
                   help="comma list: throughput,efficiency (default both)")
    _detect_options(d)
    d.add_argument("--markdown", help="also write the table as markdown (for a CI job summary); "
                   "it is appended to $GITHUB_STEP_SUMMARY whenever that is set")
    d.set_defaults(run=run_detect)
    q = actions.add_parser("plot", help="trend figures per configuration with their change "
                           "points, and history.html")
    q.add_argument("--store", required=True, help="history store written by `history add`")
    q.add_argument("--out", required=True, help="output folder for history-<metric>.png and "
                   "history.html")
    _detect_options(q)
    q.add_argument("--point-to-point", action="store_true",
                   help="also mark (and list) each point compare would call a regression "
                   "against the previous point")
    q.add_argument("--threshold", type=float, default=5.0,
                   help="percent, as in compare, for --point-to-point (default 5)")
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


def _load(store: str) -> list[dict]:
    rows, problems = history.load_store(Path(store))
    for problem in problems:
        print(f"warning: {problem}", file=sys.stderr)
    return rows


def run_detect(args: argparse.Namespace) -> int:
    history_changes.check_settings(args.alpha, args.min_magnitude, args.last)
    rows = _load(args.store)
    found = history_changes.find(rows, args.metric, args.alpha, args.min_magnitude, args.last,
                                 label=args.store)
    if not found.series:
        raise UserError(f"history store {args.store!r} holds no successful run to judge")
    print(history_changes.render_text(found))
    write_markdown(args.markdown, lambda: history_changes.render_markdown(found))
    return found.exit_code


def run_plot(args: argparse.Namespace) -> int:
    from scalebench.report import history_page

    history_changes.check_settings(args.alpha, args.min_magnitude, args.last)
    rows = _load(args.store)
    found = history_changes.find(rows, alpha=args.alpha, min_magnitude=args.min_magnitude,
                                 last=args.last, label=args.store)
    detections = {m: history_changes.by_line(found, m) for m in found.metrics}
    written, marks = history.plot(rows, Path(args.out), args.threshold, args.alpha, detections,
                                  point_marks=args.point_to_point)
    if not written:
        print(f"no successful runs in {args.store}; nothing to draw")
    for path in written:
        print(f"wrote {path}")
    print(f"wrote {history_page.write(found, Path(args.out), written)}")
    for change in found.changes:
        print(f"change: {change.series.metric} of {change.series.title}: {change.headline} "
              f"({'new; ' if change.new else ''}{history_changes.test_text(change)})")
    for metric, panel, line, point in marks:
        where = (f"{metric} of {history.panel_title(panel)} {history.line_label(line)} "
                 f"at {point.when.isoformat()} (commit {point.commit or 'unknown'}"
                 + (f", sweep {point.sweep_id}" if point.sweep_id else "") + ")")
        j = point.judgement if args.point_to_point else None
        change = "" if j is None else (f"{j.change_pct:+.1f}% vs the previous point ({j.verdict}; "
                                       f"{j.difference.test}, {j.difference.samples})")
        if j is not None and j.verdict == "regression":
            print(f"regression: {where}: {'; '.join((change,) + point.notes)}")
        elif point.notes:
            print(f"note: {where}: {'; '.join(((change,) if change else ()) + point.notes)}")
    return 0
