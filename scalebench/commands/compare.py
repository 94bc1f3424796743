"""scalebench compare BASELINE CURRENT [--threshold 5] [--alpha 0.05] [--metric ...]
[--allow-missing | --require-all] [--min-launches K] [--markdown FILE]

Exit codes: 0 the gate passed; 1 it failed: a regression, a run that failed or timed out where
the baseline's was ok (unless --allow-missing), an invalid record on either side
(records.validity), a configuration with fewer than K launches on either side (--min-launches
K), or with --require-all a configuration of the baseline missing from the current side; 2 bad
input (UserError).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

from scalebench.analysis import compare
from scalebench.records import results
from scalebench.spec import fields
from scalebench.spec.errors import UserError


def register(sub) -> None:
    p = sub.add_parser("compare", help="regression gate: compare two results sets (exit 1 on a "
                       "regression)")
    p.add_argument("baseline", help="baseline results.jsonl or sweep output folder")
    p.add_argument("current", help="current results.jsonl or sweep output folder")
    p.add_argument("--threshold", type=float, default=5.0,
                   help="percent a metric must worsen by, besides being significant (default 5)")
    p.add_argument("--alpha", type=float, default=0.05,
                   help="significance level of the test, on per-process means where both sides "
                   "have two or more launches of a configuration, else on trials (default 0.05)")
    p.add_argument("--metric", default="throughput,efficiency",
                   help="comma list: throughput,efficiency (default both)")
    p.add_argument("--allow-missing", action="store_true",
                   help="a configuration ok in the baseline whose current run failed or timed out "
                   "is reported as missing instead of failing the gate")
    p.add_argument("--require-all", action="store_true",
                   help="fail the gate on a configuration of the baseline that is missing from "
                   "the current set (a sweep that lost configurations), instead of only naming it")
    p.add_argument("--min-launches", default="1",
                   help="refuse to judge (and fail the gate on) configurations with fewer ok "
                   "launches than this on either side; 2 or more asks for verdicts on "
                   "per-process means (default 1: judge on trials too)")
    p.add_argument("--markdown", help="also write the table as markdown (for a CI job summary); "
                   "it is appended to $GITHUB_STEP_SUMMARY whenever that is set")
    p.set_defaults(run=run)


def load_side(raw: str, label: str) -> tuple[list[dict], list[results.Invalid]]:
    """Valid and invalid records of one side (compare.compare takes both); a side with no
    valid train record is bad input (exit 2)."""
    paths = results.resolve_inputs([raw])
    records, invalid = results.load(paths)
    if not any(r.get("kind") == "train" for r in records):
        why = "; ".join(str(p) for p in invalid[:3]) or "the file is empty"
        raise UserError(f"{label} {raw!r} holds no valid run record ({why})")
    return records, invalid


def run(args: argparse.Namespace) -> int:
    min_launches = fields.integer("--min-launches", args.min_launches, 1)
    compare.check_settings(args.threshold, args.alpha, min_launches)
    metrics = compare.parse_metrics(args.metric)
    baseline, invalid_b = load_side(args.baseline, "baseline")
    current, invalid_c = load_side(args.current, "current")
    outcome = compare.compare(baseline, current, args.threshold, args.alpha, metrics,
                              baseline_label=args.baseline, current_label=args.current,
                              allow_missing=args.allow_missing, min_launches=min_launches,
                              invalid_baseline=invalid_b, invalid_current=invalid_c,
                              require_all=args.require_all)
    print(compare.render_text(outcome))
    write_markdown(args.markdown, lambda: compare.render_markdown(outcome))
    return outcome.exit_code


def write_markdown(path_text: str | None, render: Callable[[], str]) -> None:
    """The markdown to --markdown's file (a UserError when it cannot be written) and appended to
    $GITHUB_STEP_SUMMARY when that is set (a warning when it cannot be)."""
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if not path_text and not summary:
        return
    markdown = render()
    if path_text:
        path = Path(path_text)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(markdown, encoding="utf-8")
        except OSError as exc:
            raise UserError(f"--markdown: cannot write {str(path)!r}: {exc.strerror}") from exc
        print(f"wrote {path}")
    if summary:
        try:
            with open(summary, "a", encoding="utf-8") as fh:
                fh.write(markdown + "\n")
        except OSError as exc:
            print(f"warning: cannot append to GITHUB_STEP_SUMMARY {summary!r}: {exc.strerror}",
                  file=sys.stderr)
