"""scalebench gate CURRENT --store STORE [--branch main] [--points 10] [--threshold 5]
[--alpha 0.01] [--metric ...] [--min-launches K] [--any-testbed] [--markdown FILE]
[--comment FILE]

Exit codes: 0 the gate passed; 1 it failed: a regression against the pooled sweeps, a run that
failed or timed out, a configuration with no sweep of its testbed (without --any-testbed), or
one with fewer than K launches on either side; 2 bad input (UserError: a results folder with no
runs, an empty store, a branch with no sweeps).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from scalebench.commands.compare import load_side, write_markdown
from scalebench.spec import fields
from scalebench.spec.errors import UserError
from scalebench.tracking import accepted, gate, history, store


def register(sub) -> None:
    p = sub.add_parser("gate", help="PR gate: judge a results set against the pooled last sweeps "
                       "of a branch in the history (exit 1 on a regression)")
    p.add_argument("current", help="current results.jsonl or sweep output folder")
    p.add_argument("--store", required=True,
                   help="history store written by `history add`: a JSONL file or git:REPO#BRANCH")
    p.add_argument("--branch", default="main",
                   help="the branch whose sweeps are the baseline (default main; rows recorded "
                   "without a branch count for any)")
    p.add_argument("--points", default=str(gate.POINTS),
                   help=f"sweeps pooled per configuration (default {gate.POINTS}); a change "
                   "point inside them limits the pool to the sweeps after it")
    p.add_argument("--threshold", type=float, default=5.0,
                   help="percent a metric must worsen by, besides being significant (default 5)")
    p.add_argument("--alpha", type=float, default=gate.ALPHA,
                   help="significance level a PR: the chance that an unchanged PR fails on a "
                   "regression (Holm over its rows judged at the sweep level; a row with fewer "
                   f"than 3 sweeps pooled is judged at it alone; default {gate.ALPHA:g})")
    p.add_argument("--metric", default="throughput,efficiency",
                   help="comma list: throughput,efficiency (default both)")
    p.add_argument("--min-launches", default="1",
                   help="refuse to judge (and fail the gate on) configurations with fewer ok "
                   "launches than this on either side (default 1)")
    p.add_argument("--any-testbed", action="store_true",
                   help="pool sweeps of other testbeds too (default: only the current run's "
                   "testbed; a configuration with none fails)")
    p.add_argument("--markdown", help="also write the table as markdown (for a CI job summary); "
                   "it is appended to $GITHUB_STEP_SUMMARY whenever that is set")
    p.add_argument("--comment", help="write a PR comment body here when the gate fails (first "
                   f"line {gate.MARKER}, to update one comment in place); nothing when it passes")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    points = fields.integer("--points", args.points, 1)
    min_launches = fields.integer("--min-launches", args.min_launches, 1)
    current, invalid = load_side(args.current, "current")
    entries, problems = store.open_store(args.store).entries()
    for problem in problems:
        print(f"warning: {problem}", file=sys.stderr)
    rows, accepts = history.split_entries(entries)
    outcome = gate.judge(current, rows, args.branch, points, args.threshold, args.alpha,
                         min_launches, args.any_testbed, args.metric,
                         accepted.from_entries(accepts), store_label=args.store,
                         current_label=args.current, invalid=invalid)
    print(gate.render_text(outcome))
    write_markdown(args.markdown, lambda: gate.render_markdown(outcome))
    body = gate.comment(outcome)
    if args.comment and body is not None:
        path = Path(args.comment)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(body, encoding="utf-8")
        except OSError as exc:
            raise UserError(f"--comment: cannot write {str(path)!r}: {exc.strerror}") from exc
        print(f"wrote {path}")
    elif args.comment:
        print(f"gate passed: no comment written to {args.comment}")
    return outcome.exit_code
