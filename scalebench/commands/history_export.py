"""scalebench history export --store STORE --format bmf|gab|otava|csv --out PATH: the store's
rows for the tools teams already run (tracking/export; docs/ci-history.md, "Exports")."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path

from scalebench.tracking import export


def register(actions, store_help: str, load: Callable[[str], list[dict]]) -> None:
    """Adds `export` to the `history` actions; `load` reads the rows of a --store text."""
    e = actions.add_parser("export", help="write the store for Bencher (bmf), "
                           "github-action-benchmark (gab), Apache Otava (otava) or as plain CSV")
    e.add_argument("--store", required=True, help=store_help)
    e.add_argument("--format", required=True,
                   help="; ".join(f"{name}: {f.description} (--out: a {f.out})"
                                  for name, f in export.FORMATS.items()))
    e.add_argument("--out", required=True, help="the folder (bmf, gab, otava) or file (csv) to "
                   "write")
    e.add_argument("--repo-url", default=_default_repo_url(),
                   help="gab: the repository its page links commits under (default: "
                   "$GITHUB_SERVER_URL/$GITHUB_REPOSITORY when both are set)")
    e.set_defaults(run=lambda args: run_export(args, load))


def _default_repo_url() -> str:
    server, repo = os.environ.get("GITHUB_SERVER_URL"), os.environ.get("GITHUB_REPOSITORY")
    return f"{server.rstrip('/')}/{repo}" if server and repo else ""


def run_export(args: argparse.Namespace, load: Callable[[str], list[dict]]) -> int:
    export.get(args.format)  # a bad name fails before the store is read
    written = export.export(load(args.store), args.format, Path(args.out),
                            export.Options(repo_url=args.repo_url))
    for path in written:
        print(f"wrote {path}")
    return 0
