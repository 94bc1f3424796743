"""scalebench history accept A..B --reason TEXT [--config WORDS ...] --store STORE: record in the
store that a change between commits A and B is known (tracking/accepted.py; docs/ci-history.md,
"Accepted changes"). `history detect` then shows it as accepted and never fails on it."""

from __future__ import annotations

import argparse
import time

from scalebench.tracking import accepted, history, store


def register(actions, store_help: str) -> None:
    """Adds `accept` to the `history` actions."""
    a = actions.add_parser("accept", help="record that a change between two commits is known: "
                           "detect shows it as accepted and does not fail on it")
    a.add_argument("range", help="A..B: the commits `history detect` shows for the change (the "
                   "last measured before it, the first at the new level), or a wider range")
    a.add_argument("--reason", required=True, help="why the change is accepted (kept in the store)")
    a.add_argument("--config", action="append", default=[],
                   help="only the series whose title has all these words (e.g. \"ddp x2\"); "
                   "repeat for several; default every configuration")
    a.add_argument("--store", required=True, help=store_help)
    a.set_defaults(run=run_accept)


def run_accept(args: argparse.Namespace) -> int:
    where = store.open_store(args.store)
    entries, _ = where.entries()
    rows, _ = history.split_entries(entries)
    new = accepted.entry(args.range, args.reason, args.config, rows,
                         time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    added, _ = where.add_entries([new], f"history accept {new['from']}..{new['to']}: "
                                 f"{new['reason']}")
    what = f"{new['from']}..{new['to']}" + (f" ({'; '.join(new['configs'])})"
                                           if new["configs"] else "")
    print(f"accepted {what} in {args.store}" if added else
          f"{what} was already accepted with this reason in {args.store}")
    return 0
