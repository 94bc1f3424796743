"""scripts/suite_budget.py: each test file's time in a suite run against its budget, worst first,
read from the JUnit XML scripts/test.sh writes; and tests/budgets.toml names every test file."""

from __future__ import annotations

import importlib.util
import sys

import tomllib

from tests.conftest import REPO


def load():
    spec = importlib.util.spec_from_file_location("suite_budget", REPO / "scripts" / "suite_budget.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["suite_budget"] = module
    spec.loader.exec_module(module)
    return module


def junit(cases: list[tuple]) -> str:
    """Test cases (classname, name, time[, cpu_seconds]) as pytest's JUnit XML writes them."""
    def case(c, n, t, cpu=None):
        props = ("" if cpu is None else
                 f'<properties><property name="cpu_seconds" value="{cpu}"/></properties>')
        return f'<testcase classname="{c}" name="{n}" time="{t}">{props}</testcase>'
    body = "".join(case(*c) for c in cases)
    return f'<?xml version="1.0"?><testsuites><testsuite name="pytest">{body}</testsuite></testsuites>'


def test_files_are_summed_and_listed_worst_first_with_the_exit_status(tmp_path, capsys):
    sb = load()
    report = tmp_path / "report"
    report.mkdir()
    (report / "parallel.xml").write_text(junit([
        ("tests.test_a", "test_one", 10.0, 6.5), ("tests.test_a", "test_two", 15.5, 2.25),
        ("tests.test_b.TestThing", "test_x", 3.0), ("tests.test_new", "test_y", 4.0)]))
    (report / "serial.xml").write_text(junit([("tests.test_c", "test_z", 50.0)]))
    budgets = tmp_path / "budgets.toml"
    budgets.write_text('[parallel]\n"tests/test_a.py" = 20\n"tests/test_b.py" = 10\n'
                       '"tests/test_gone.py" = 5\n[serial]\n"tests/test_c.py" = 60\n')
    assert sb.main([str(report), "--budgets", str(budgets)]) == 1
    lines = capsys.readouterr().out.splitlines()
    table = [line.split() for line in lines[1:] if line.split()[1].startswith("tests/")]
    # over budget first (test_a by 5.5 s), then the file without a budget, then the rest
    assert [row[1] for row in table] == ["tests/test_a.py", "tests/test_new.py", "tests/test_b.py",
                                         "tests/test_c.py", "tests/test_gone.py"]
    assert table[0][2:] == ["25.5", "20", "-5.5", "8.8", "OVER"]  # its CPU seconds summed
    assert table[1][3:] == ["none", "NO", "BUDGET", "-"]  # no CPU seconds recorded
    assert "(not" in table[-1]
    assert "suite_budget: 2 file(s) over budget or without one" in lines[-1]


def test_a_missing_report_is_exit_2_in_one_line(tmp_path, capsys):
    sb = load()
    assert sb.main([str(tmp_path), "--budgets", str(REPO / "tests" / "budgets.toml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no parallel.xml or serial.xml" in err[0]


def test_the_budgets_name_every_test_file_and_sum_within_the_goal():
    data = tomllib.loads((REPO / "tests" / "budgets.toml").read_text())
    named = {name for part in ("parallel", "serial") for name in data[part]}
    files = {f"tests/{p.name}" for p in (REPO / "tests").glob("test_*.py")}
    # every file has a budget (in the part its tests run in; in both where they run in both),
    # and no budget is left for a file that is gone
    assert named == files, (sorted(files - named), sorted(named - files))
    assert data["goal_seconds"] == 900
    # the parallel part's budgets are test seconds shared over the workers, the serial part's
    # are wall seconds: with the workers' measured speed-up the two must fit the goal
    wall = sum(data["parallel"].values()) / data["parallel_speedup"] + sum(data["serial"].values())
    assert wall <= data["goal_seconds"], wall
