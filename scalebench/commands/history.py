"""scalebench history add RESULTS... --store STORE [--branch B] | history plot --store STORE
--out DIR | history detect --store STORE [--metric ...] [--alpha] [--min-magnitude PCT]
[--last K] [--markdown FILE] | history prune --store STORE --keep-days N | --keep-points N
| history accept A..B --reason TEXT [--config WORDS ...] --store STORE
| history export --store STORE --format bmf|gab|otava|csv --out PATH (history_export.py)

STORE is a JSONL file or git:REPO#BRANCH (tracking/store.py).

detect's exit codes: 0 no new regression, 1 a regression (a step or a gradual change) that ends
among the last K points, 2 bad input (UserError).
add's exit codes: 0 every record added, 2 an invalid record (records.validity; each named with
file, line and reason, the valid rows added all the same) or bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from scalebench.commands import history_accept, history_export
from scalebench.commands.compare import write_markdown
from scalebench.records import results
from scalebench.spec.errors import UserError
from scalebench.tracking import accepted, branch, changepoints, history, history_changes, prune, store

STORE_HELP = "history store written by `history add`: a JSONL file or git:REPO#BRANCH"


def _push_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--push-timeout", type=float, default=store.PUSH_TIMEOUT,
                   help="seconds a git store retries a rejected push before it gives up, "
                   f"keeping the rows for the next add (default {store.PUSH_TIMEOUT:g})")


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
    a.add_argument("--store", required=True, help="history store: a JSONL file (created if "
                   "missing) or git:REPO#BRANCH (the branch created on first add)")
    a.add_argument("--commit", help="git commit the runs measured (default: the one each run "
                   "recorded)")
    a.add_argument("--branch", help="branch the runs measured (default: the CI's branch "
                   "variable, else the current git branch; rows without one count for any)")
    _push_option(a)
    a.set_defaults(run=run_add)
    d = actions.add_parser("detect", help="changes (steps and gradual changes) per "
                           "configuration, with the commit range of each (exit 1 on a new "
                           "regression)")
    d.add_argument("--store", required=True, help=STORE_HELP)
    d.add_argument("--metric", default="throughput,efficiency",
                   help="comma list: throughput,efficiency (default both)")
    _detect_options(d)
    d.add_argument("--markdown", help="also write the table as markdown (for a CI job summary); "
                   "it is appended to $GITHUB_STEP_SUMMARY whenever that is set")
    d.set_defaults(run=run_detect)
    q = actions.add_parser("plot", help="trend figures per configuration with their change "
                           "points, and history.html")
    q.add_argument("--store", required=True, help=STORE_HELP)
    q.add_argument("--out", required=True, help="output folder for history-<metric>.png and "
                   "history.html")
    _detect_options(q)
    q.add_argument("--point-to-point", action="store_true",
                   help="also mark (and list) each point compare would call a regression "
                   "against the previous point")
    q.add_argument("--threshold", type=float, default=5.0,
                   help="percent, as in compare, for --point-to-point (default 5)")
    q.set_defaults(run=run_plot)
    r = actions.add_parser("prune", help="bound a history store: keep the last N sweeps of each "
                           "configuration and/or every row of the last N days")
    r.add_argument("--store", required=True, help=STORE_HELP)
    r.add_argument("--keep-days", type=float, help="keep every run row measured in the last N "
                   "days")
    r.add_argument("--keep-points", type=int, help="keep the last N sweeps of each "
                   "configuration line")
    r.add_argument("--dry-run", action="store_true", help="say what it would remove, remove "
                   "nothing")
    _push_option(r)
    r.set_defaults(run=run_prune)
    history_export.register(actions, STORE_HELP, _load)
    history_accept.register(actions, STORE_HELP)


def run_add(args: argparse.Namespace) -> int:
    paths = results.resolve_inputs(args.inputs)
    records, invalid = results.load(paths)
    for item in invalid:  # a broken measurement, named; the valid rows are still added
        print(f"error: {item}", file=sys.stderr)
    if not any(r.get("kind") == "train" for r in records):
        raise UserError(f"no valid run record in {', '.join(str(p) for p in paths)}"
                        + (f" ({len(invalid)} invalid, named above)" if invalid else ""))
    added, present = history.add(_writable(args), records,
                                 args.commit, source=", ".join(str(p) for p in paths),
                                 branch=branch.measured_branch(args.branch))
    print(f"added {added} run{'s' if added != 1 else ''} to {args.store}"
          + (f" ({present} already there)" if present else ""))
    if invalid:
        print(f"scalebench history add: error: {len(invalid)} invalid record"
              f"{'s' if len(invalid) != 1 else ''} not added (named above); exit 2",
              file=sys.stderr)
        return 2
    return 0


def _writable(args: argparse.Namespace) -> store.Store:
    if not args.push_timeout > 0:
        raise UserError(f"--push-timeout {args.push_timeout:g}: give a positive number of seconds")
    return store.open_store(args.store, args.push_timeout)


def run_prune(args: argparse.Namespace) -> int:
    prune.check(args.keep_days, args.keep_points)
    target = _writable(args)
    entries, problems = target.entries()
    for problem in problems:
        print(f"warning: {problem}", file=sys.stderr)
    plan = prune.plan(entries, args.keep_days, args.keep_points)
    stay = f"{len(plan.keep)} of {len(entries)} entries stay"
    if not (plan.removed or plan.removed_accepted):
        print(f"nothing to remove from {args.store}; {stay}")
    elif args.dry_run:
        print(f"would remove {plan.summary} from {args.store}; {stay}")
    else:
        target.rewrite(plan.keep, f"prune: {plan.summary}")
        print(f"removed {plan.summary} from {args.store}; {stay}")
    return 0


def _load(text: str) -> list[dict]:
    """The run rows of the store `--store TEXT` names (accepted changes left out)."""
    rows, problems = history.load_store(store.open_store(text))
    for problem in problems:
        print(f"warning: {problem}", file=sys.stderr)
    return rows


def _load_accepted(text: str) -> tuple[list[dict], tuple[accepted.Accepted, ...]]:
    """The run rows and the accepted changes (history accept) of the store."""
    entries, problems = store.open_store(text).entries()
    for problem in problems:
        print(f"warning: {problem}", file=sys.stderr)
    rows, accepts = history.split_entries(entries)
    return rows, accepted.from_entries(accepts)


def run_detect(args: argparse.Namespace) -> int:
    history_changes.check_settings(args.alpha, args.min_magnitude, args.last)
    rows, accepts = _load_accepted(args.store)
    found = history_changes.find(rows, args.metric, args.alpha, args.min_magnitude, args.last,
                                 label=args.store, accepts=accepts)
    if not found.series:
        raise UserError(f"history store {args.store!r} holds no successful run to judge")
    print(history_changes.render_text(found))
    write_markdown(args.markdown, lambda: history_changes.render_markdown(found))
    return found.exit_code


def run_plot(args: argparse.Namespace) -> int:
    from scalebench.report import history_page

    history_changes.check_settings(args.alpha, args.min_magnitude, args.last)
    rows, accepts = _load_accepted(args.store)
    found = history_changes.find(rows, alpha=args.alpha, min_magnitude=args.min_magnitude,
                                 last=args.last, label=args.store, accepts=accepts)
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
