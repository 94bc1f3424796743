"""Each test file's time in a suite run against its budget (tests/budgets.toml), worst first.

    python scripts/suite_budget.py [REPORT_DIR] [--budgets tests/budgets.toml]

REPORT_DIR holds the JUnit XML files scripts/test.sh writes (parallel.xml, serial.xml; default
.test-report). A file's time is the sum of its tests' durations (set-up, call and tear-down, as
pytest reports them), so in the parallel part it is CPU-shared time, not wall time: the budgets
say so. Beside it, the file's CPU seconds (the cpu_seconds property tests/conftest.py records:
the test process and the children it reaped), which hardly move with what shares the cores.
Exit 0 when every file is within its budget, 1 when one is over (the table says which),
2 when the report or the budgets cannot be read.
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

import tomllib

REPO = Path(__file__).resolve().parent.parent
PARTS = ("parallel", "serial")


def file_of(testcase: ET.Element) -> str:
    """tests/test_x.py from a JUnit test case (classname tests.test_x or tests.test_x.Class)."""
    parts = (testcase.get("classname") or "").split(".")
    names = [p for p in parts if p.startswith("test_")]
    return f"tests/{names[0]}.py" if names else ".".join(parts) or "?"


def durations(report: Path, what: str = "time") -> dict[str, dict[str, float]]:
    """part -> file -> seconds, from the report folder's JUnit files: the tests' durations
    (what="time") or their recorded CPU seconds (what="cpu")."""
    out: dict[str, dict[str, float]] = {}
    for part in PARTS:
        path = report / f"{part}.xml"
        if not path.is_file():
            continue
        try:
            root = ET.parse(path).getroot()
        except ET.ParseError as exc:
            raise SystemExit(f"suite_budget: {path}: not JUnit XML ({exc})") from None
        files: dict[str, float] = defaultdict(float)
        for case in root.iter("testcase"):
            if what == "time":
                files[file_of(case)] += float(case.get("time") or 0.0)
                continue
            for prop in case.iter("property"):
                if prop.get("name") == "cpu_seconds":
                    files[file_of(case)] += float(prop.get("value") or 0.0)
        out[part] = dict(files)
    if not out:
        raise SystemExit(f"suite_budget: no parallel.xml or serial.xml in {report}; run "
                         "scripts/test.sh (make test) first")
    return out


def load_budgets(path: Path) -> dict[str, dict[str, float]]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise SystemExit(f"suite_budget: --budgets {path}: {exc}") from None
    return {part: {f: float(s) for f, s in (data.get(part) or {}).items()} for part in PARTS}


def table(measured: dict[str, dict[str, float]], budgets: dict[str, dict[str, float]],
          cpu: dict[str, dict[str, float]] | None = None) -> tuple[list[str], int]:
    cpu = cpu or {}
    rows = []
    for part in PARTS:
        for name in set(measured.get(part, {})) | set(budgets.get(part, {})):
            seconds = measured.get(part, {}).get(name)
            budget = budgets.get(part, {}).get(name)
            rows.append((part, name, seconds, budget))
    # worst first: the most over budget (a file without a budget counts as over by all its
    # time); files with a budget that did not run, last
    rows.sort(key=lambda r: (r[2] is None, -((r[2] or 0.0) - (r[3] if r[3] is not None else 0.0))))
    lines = [f"{'part':<9} {'file':<44} {'seconds':>8} {'budget':>7} {'left':>9} {'cpu s':>7}"]
    over = 0
    for part, name, seconds, budget in rows:
        used = cpu.get(part, {}).get(name)
        used_text = f"{used:>7.1f}" if used is not None else f"{'-':>7}"
        if seconds is None:
            lines.append(f"{part:<9} {name:<44} {'-':>8} {budget:>7.0f} {'(not run)':>9}")
            continue
        if budget is None:
            over += 1
            lines.append(f"{part:<9} {name:<44} {seconds:>8.1f} {'none':>7} {'NO BUDGET':>9} "
                         f"{used_text}")
            continue
        left = budget - seconds
        over += left < 0
        lines.append(f"{part:<9} {name:<44} {seconds:>8.1f} {budget:>7.0f} {left:>9.1f} "
                     f"{used_text}" + ("  OVER" if left < 0 else ""))
    for part in PARTS:
        if part in measured:
            spent = sum(measured[part].values())
            budget = sum(budgets[part].values())
            used = sum(cpu.get(part, {}).values())
            lines.append(f"{part} part: {spent:.0f} s of test time, budgets {budget:.0f} s; "
                         f"{used:.0f} CPU seconds recorded")
    return lines, over


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("report", nargs="?", type=Path, default=REPO / ".test-report")
    p.add_argument("--budgets", type=Path, default=REPO / "tests" / "budgets.toml")
    a = p.parse_args(argv)
    try:
        lines, over = table(durations(a.report), load_budgets(a.budgets),
                            durations(a.report, "cpu"))
    except SystemExit as exc:
        print(exc, file=sys.stderr)
        return 2
    print("\n".join(lines))
    if over:
        print(f"suite_budget: {over} file(s) over budget or without one")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
