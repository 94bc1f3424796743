"""Records through pod logs, for clusters without a shared results volume.

In the pod that holds a launch's records, `scalebench k8s emit OUT` prints each record of
OUT/results.jsonl as one line `SCALEBENCH_RESULT {json}` after the sweep; `scalebench k8s
collect LOG...` reads such lines back out of `kubectl logs` output (its --prefix included),
validates them as the results store does and appends the new ones to a results.jsonl.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path

from scalebench.records import results
from scalebench.spec.errors import UserError

PREFIX = "SCALEBENCH_RESULT "


def result_lines(out_dir: Path) -> Iterator[str]:
    """One line per record of a sweep folder, as the file holds it (no record is re-encoded)."""
    path = Path(out_dir) / results.RESULTS_FILE
    if not path.is_file():
        raise UserError(f"out: {str(out_dir)!r} holds no {results.RESULTS_FILE} (did the sweep "
                        "record any run?)")
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield PREFIX + line.strip()


def parse(lines: Iterable[str]) -> tuple[list[dict], list[str]]:
    """The valid records of SCALEBENCH_RESULT lines anywhere in a log, and one problem per bad
    line (`line N: reason`); other lines are the pods' own output and are skipped."""
    records, problems = [], []
    for number, line in enumerate(lines, start=1):
        at = line.find(PREFIX)
        if at < 0:
            continue
        try:
            record = json.loads(line[at + len(PREFIX):])
            if not isinstance(record, dict):
                raise results.RecordError("not a JSON object")
            results.validate(record)
        except (ValueError, results.RecordError) as exc:
            problems.append(f"line {number}: {type(exc).__name__}: {exc}"[:300])
            continue
        records.append(record)
    return records, problems


def key(record: dict) -> tuple:
    """What makes a record the same one when a log is read twice."""
    return record.get("sweep_id"), record.get("run_id"), record.get("timestamp")


def collect(records: Iterable[dict], out_dir: Path) -> int:
    """Append the records OUT/results.jsonl does not hold yet (a log read twice adds nothing);
    returns how many were added."""
    path = Path(out_dir) / results.RESULTS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    seen = set()
    if path.is_file():
        with open(path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                try:
                    seen.add(key(json.loads(line)))
                except ValueError:
                    continue
    added = 0
    for record in records:
        if key(record) not in seen:
            results.append(path, record)
            seen.add(key(record))
            added += 1
    return added
