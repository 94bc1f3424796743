"""`history export`: each format checked against its own published definition, not through our
own reader, with values worked out here from the fabricated trials (95% Student-t intervals over
the per-launch means).

- BMF: Bencher's JSON schema (https://bencher.dev/bmf.json, vendored in tests/data with its
  provenance) where jsonschema is installed, and always the rules of its reference page
  (bencher.dev/docs/reference/bencher-metric-format: benchmark -> measure -> {value, optional
  lower_value, upper_value}; names up to 1024 and 64 characters); `bencher run --backdate`
  takes seconds since the epoch, `--hash` a full git hash (its CLI's run options).
- github-action-benchmark: the custom tools' input as its README documents it and its
  src/extract.ts parses it (an array of {name, unit, value, optional range and extra}); data.js
  as its src/write.ts reads and writes it ("window.BENCHMARK_DATA = " then JSON: lastUpdate,
  repoUrl, entries: suite -> [{commit: {author, committer, id, message, timestamp, url}, date,
  tool, benches}]), run as a script in node where node is installed.
- Apache Otava: docs/CSV.md and its CsvImporter: a header, the test's time column, attribute
  and metric columns by name, every row as long as the header and every metric cell a float.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import re
import shutil
import statistics
import subprocess
from datetime import datetime, timezone
from pathlib import Path

import pytest
from scipy import stats as scipy_stats

from scalebench import cli
from scalebench.tracking import history
from tests.conftest import REPO, fake_record, launches, write_records

SCHEMA = REPO / "tests" / "data" / "bencher-bmf.schema.json"
CONFIGS = ("inception_v3 ddp x1 fp32 b2 75px cpu weak", "inception_v3 ddp x2 fp32 b2 75px cpu weak")
W1 = ((10.0, 10.2, 9.8), (10.4, 10.6, 10.5))  # two launches of three trials
W2 = ((18.0, 18.4, 18.2), (19.4, 19.0, 19.2))
GAB_TOOLS = ("cargo", "go", "benchmarkjs", "benchmarkluau", "pytest", "googlecpp", "catch2",
             "julia", "jmh", "benchmarkdotnet", "customBiggerIsBetter", "customSmallerIsBetter")


def sha(k: int) -> str:
    return hashlib.sha1(f"commit {k}".encode()).hexdigest()


def sweep_records(k: int, w2_ok: bool = True) -> list[dict]:
    """Sweep k: ddp at 1 and 2 workers, two launches each, scaled by 1 - k/100."""
    f = 1 - k / 100
    common = {"sweep_id": f"s{k}", "env": {"git_commit": sha(k)}}
    ones = launches([[f * t for t in trials] for trials in W1], hour=k, **common)
    if not w2_ok:
        return ones + [fake_record(world_size=2, status="failed", error="it broke",
                                   timestamp=f"2026-01-01T{k:02d}:30:00+0000", **common)]
    return ones + launches([[f * t for t in trials] for trials in W2], hour=k, world_size=2,
                           **common)


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """Four sweeps on branch main (the last without the 2-worker run) and an accepted change."""
    path = tmp_path_factory.mktemp("export") / "history.jsonl"
    rows = [dict(r, branch="main") for k in range(4)
            for r in history.rows_from_records(sweep_records(k, w2_ok=k < 3))]
    accepted = {"history_version": 1, "kind": "accepted", "id": "a1", "from": sha(0),
                "to": sha(1), "reason": "known", "configs": []}
    path.write_text("".join(json.dumps(r) + "\n" for r in rows + [accepted]))
    return path


def export(store: Path | str, fmt: str, out: Path, *extra: str) -> Path:
    assert cli.main(["history", "export", "--store", str(store), "--format", fmt,
                     "--out", str(out), *extra]) == 0
    return out


def interval(values: list[float]) -> tuple[float, float, float]:
    """Mean and 95% interval, worked out here (not by scalebench.analysis.stats): Student-t on
    the log scale (images/s and efficiency are positive), mean x exp(-+half)."""
    mean = statistics.fmean(values)
    half = scipy_stats.t.ppf(0.975, len(values) - 1) * statistics.stdev(
        math.log(v) for v in values) / math.sqrt(len(values))
    return mean, mean * math.exp(-half), mean * math.exp(half)


def expected(k: int) -> dict[str, dict[str, tuple[float, float, float]]]:
    f = 1 - k / 100
    ones = [f * statistics.fmean(t) for t in W1]
    twos = [f * statistics.fmean(t) for t in W2]
    return {CONFIGS[0]: {"throughput": interval(ones)},
            CONFIGS[1]: {"throughput": interval(twos),
                         "efficiency": interval([100 * n / (2 * o) for n, o in zip(twos, ones,
                                                                                   strict=True)])}}


# ---------------------------------------------------------------- Bencher (BMF)

def check_bmf(report: object) -> None:
    """The reference page's rules, independent of jsonschema."""
    assert isinstance(report, dict) and report
    for benchmark, measures in report.items():
        assert isinstance(benchmark, str) and 0 < len(benchmark) <= 1024
        assert isinstance(measures, dict) and measures
        for measure, metric in measures.items():
            assert isinstance(measure, str) and 0 < len(measure) <= 64
            assert set(metric) <= {"value", "lower_value", "upper_value"} and "value" in metric
            assert all(isinstance(v, float) and math.isfinite(v) for v in metric.values())
            assert metric.get("lower_value", metric["value"]) <= metric["value"] \
                <= metric.get("upper_value", metric["value"])


def test_bmf_is_one_report_per_sweep_by_bencher_s_definition(store, tmp_path):
    out = export(store, "bmf", tmp_path / "bmf")
    index = json.loads((out / "index.json").read_text())
    assert [e["sweep_id"] for e in index] == ["s0", "s1", "s2", "s3"]
    validator = None
    try:
        import jsonschema

        validator = jsonschema.Draft7Validator(json.loads(SCHEMA.read_text()))
    except ImportError:
        pass
    for k, entry in enumerate(index):
        report = json.loads((out / entry["file"]).read_text())
        check_bmf(report)
        if validator is not None:
            validator.validate(report)
        want = expected(k) if k < 3 else {CONFIGS[0]: expected(k)[CONFIGS[0]]}
        assert sorted(report) == sorted(want)
        for config, measures in want.items():
            assert sorted(report[config]) == sorted(measures)
            for measure, (mean, low, high) in measures.items():
                got = report[config][measure]
                assert (got["value"], got["lower_value"], got["upper_value"]) == pytest.approx(
                    (mean, low, high), rel=1e-9)
        first = datetime(2026, 1, 1, k, 1, tzinfo=timezone.utc)  # launch 1 of the sweep
        assert entry["backdate"] == int(first.timestamp()) and entry["commit"] == sha(k)
        assert entry["branch"] == "main"


def test_bmf_import_script_backdates_each_report_in_order(store, tmp_path):
    out = export(store, "bmf", tmp_path / "bmf")
    script = (out / "import.sh").read_text()
    assert subprocess.run(["sh", "-n", str(out / "import.sh")]).returncode == 0
    runs = [line for line in script.splitlines() if line.startswith("bencher run")]
    index = json.loads((out / "index.json").read_text())
    assert len(runs) == len(index)
    for line, entry in zip(runs, index, strict=True):
        assert f"--file {entry['file']} --backdate {entry['backdate']} --hash {entry['commit']} " \
               "--branch main" in line
        assert line.startswith("bencher run --adapter json ")


def test_bmf_leaves_out_a_hash_bencher_would_refuse_and_replaces_an_earlier_export(store,
                                                                                   tmp_path):
    export(store, "bmf", tmp_path / "bmf")  # four sweeps
    small = tmp_path / "h.jsonl"
    rows = history.rows_from_records(sweep_records(0), commit="not-a-sha; rm -rf x")
    small.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = export(small, "bmf", tmp_path / "bmf")
    (line,) = [x for x in (out / "import.sh").read_text().splitlines()
               if x.startswith("bencher run")]
    assert "--hash" not in line and "rm -rf" not in line and "--branch" not in line
    assert sorted(p.name for p in out.iterdir()) == ["0001-s0.json", "import.sh", "index.json"]


# ---------------------------------------------------------------- github-action-benchmark

def check_bench(bench: object) -> None:
    """One BenchmarkResult as the action's README and src/extract.ts define it."""
    assert isinstance(bench, dict) and {"name", "unit", "value"} <= set(bench) \
        <= {"name", "unit", "value", "range", "extra"}
    assert isinstance(bench["name"], str) and isinstance(bench["unit"], str)
    assert isinstance(bench["value"], float) and math.isfinite(bench["value"])
    assert all(isinstance(bench[k], str) for k in ("range", "extra") if k in bench)


def test_gab_custom_json_per_sweep_and_data_js_by_the_action_s_definition(store, tmp_path):
    out = export(store, "gab", tmp_path / "gab", "--repo-url", "https://github.com/o/r")
    files = sorted(out.glob("*.json"))
    assert len(files) == 4
    first = json.loads(files[0].read_text())
    assert isinstance(first, list)
    for bench in first:
        check_bench(bench)
    mean, low, high = expected(0)[CONFIGS[1]]["efficiency"]
    eff = next(b for b in first if b["name"] == f"{CONFIGS[1]} efficiency")
    assert eff["unit"] == "%" and eff["value"] == pytest.approx(mean, rel=1e-9)
    assert eff["range"] == f"± {(high - low) / 2:.4g}"

    text = (out / "data.js").read_text()
    prefix = "window.BENCHMARK_DATA = "
    assert text.startswith(prefix)
    data = json.loads(text[len(prefix):])  # what the action's loadDataJs does
    assert set(data) == {"lastUpdate", "repoUrl", "entries"} and data["repoUrl"] == \
        "https://github.com/o/r"
    (suite,) = data["entries"].values()
    assert len(suite) == 4 and data["lastUpdate"] == max(e["date"] for e in suite)
    for k, entry in enumerate(suite):
        assert set(entry) == {"commit", "date", "tool", "benches"}
        assert entry["tool"] in GAB_TOOLS and isinstance(entry["date"], int)
        commit = entry["commit"]
        assert {"author", "committer", "id", "message", "url"} <= set(commit)
        assert commit["id"] == sha(k) and commit["url"] == f"https://github.com/o/r/commit/{sha(k)}"
        assert isinstance(commit["committer"]["username"], str)  # the page's tooltip reads it
        for bench in entry["benches"]:
            check_bench(bench)
    assert [b["name"] for b in suite[0]["benches"]] == [b["name"] for b in first]


@pytest.mark.skipif(shutil.which("node") is None, reason="node not installed")
def test_gab_data_js_runs_as_the_page_s_script(store, tmp_path):
    out = export(store, "gab", tmp_path / "gab")
    probe = ("const vm = require('vm'); const fs = require('fs'); const window = {};"
             "vm.runInNewContext(fs.readFileSync(process.argv[1], 'utf8'), {window});"
             "const d = window.BENCHMARK_DATA; const names = new Set();"
             "for (const e of Object.values(d.entries).flat()) for (const b of e.benches) "
             "names.add(b.name);"
             "console.log(JSON.stringify({suites: Object.keys(d.entries), names: [...names]}));")
    proc = subprocess.run(["node", "-e", probe, str(out / "data.js")], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout)
    assert found["suites"] == ["scalebench"]
    assert sorted(found["names"]) == sorted(f"{c} {m}" for c, ms in expected(0).items()
                                            for m in ms)


# ---------------------------------------------------------------- Apache Otava

def otava_read(folder: Path, test: dict) -> dict[str, list]:
    """A test's series read by the rules of Otava's CsvImporter (docs/CSV.md)."""
    with open(folder / test["file"], newline="") as fh:
        reader = csv.reader(fh, delimiter=",", quotechar='"')
        headers = next(reader)
        columns = {name: conf["column"] for name, conf in test["metrics"].items()}
        for c in [test["time_column"], *test["attributes"], *columns.values()]:
            assert c in headers, c
        out: dict[str, list] = {"time": [], **{n: [] for n in columns}}
        for row in reader:
            assert len(row) == len(headers)
            out["time"].append(datetime.strptime(row[headers.index(test["time_column"])],
                                                 "%Y-%m-%d %H:%M:%S %z"))
            for name, c in columns.items():
                out[name].append(float(row[headers.index(c)]))  # an empty cell would fail here
    assert out["time"] == sorted(out["time"])
    return out


def test_otava_csv_and_config_by_otava_s_reader(store, tmp_path):
    yaml = pytest.importorskip("yaml", reason="PyYAML not installed")
    out = export(store, "otava", tmp_path / "otava")
    tests = yaml.safe_load((out / "otava.yaml").read_text())["tests"]
    # the 2-worker configuration missed the last sweep: its columns get a file of their own
    assert sorted(tests) == ["scalebench", "scalebench-2"]
    for test in tests.values():
        assert test["type"] == "csv" and test["attributes"] == ["commit", "sweep"]
        assert all(conf["direction"] == 1 for conf in test["metrics"].values())
    full = otava_read(out, tests["scalebench"])
    assert list(full) == ["time", f"{CONFIGS[0]} throughput"] and len(full["time"]) == 4
    part = otava_read(out, tests["scalebench-2"])
    assert len(part["time"]) == 3
    for k in range(3):
        assert part[f"{CONFIGS[1]} efficiency"][k] == pytest.approx(
            expected(k)[CONFIGS[1]]["efficiency"][0], rel=1e-12)
    header = (out / "scalebench.csv").read_text().splitlines()[0]
    assert header.split(",")[:4] == ["time", "commit", "sweep", "branch"]


# ---------------------------------------------------------------- plain CSV, bad input

def test_csv_is_one_row_per_run(store, tmp_path):
    out = export(store, "csv", tmp_path / "runs.csv")
    with open(out, newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 4 * 2 + 3 * 2 + 1  # launches of 1 and 2 workers, one failed run
    failed = [r for r in rows if r["status"] == "failed"]
    assert len(failed) == 1 and failed[0]["error"] == "it broke" and failed[0]["sweep_id"] == "s3"
    first = rows[0]
    assert first["configuration"] == CONFIGS[0] and first["commit"] == sha(0)
    assert float(first["images_per_sec"]) == pytest.approx(statistics.fmean(W1[0]))
    assert {r["branch"] for r in rows} == {"main"}


def test_unknown_format_is_one_line_and_exit_2(store, tmp_path, capsys):
    code = cli.main(["history", "export", "--store", str(store), "--format", "xml",
                     "--out", str(tmp_path / "x")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert re.search(r"--format: unknown format 'xml'; one of bmf, gab, otava, csv$", err)
    assert not (tmp_path / "x").exists()


def test_a_store_with_no_successful_run_is_one_line_and_exit_2(tmp_path, capsys):
    store = tmp_path / "h.jsonl"
    store.write_text(json.dumps(history.rows_from_records(
        [fake_record(status="failed", error="x")])[0]) + "\n")
    assert cli.main(["history", "export", "--store", str(store), "--format", "bmf",
                     "--out", str(tmp_path / "o")]) == 2
    assert "holds no successful run to export" in capsys.readouterr().err


def test_export_reads_a_git_store_without_a_working_tree_of_the_user_s(tmp_path, monkeypatch):
    monkeypatch.setenv("SCALEBENCH_CACHE", str(tmp_path / "cache"))
    repo = tmp_path / "h.git"
    subprocess.run(["git", "init", "--quiet", "--bare", str(repo)], check=True)
    where = f"git:{repo}#scalebench-history"
    for k in range(2):
        results = write_records(tmp_path / f"r{k}" / "results.jsonl", sweep_records(k))
        assert cli.main(["history", "add", str(results), "--store", where, "--branch",
                         "main"]) == 0
    out = export(where, "gab", tmp_path / "gab")
    (suite,) = json.loads((out / "data.js").read_text()[len("window.BENCHMARK_DATA = "):]
                          )["entries"].values()
    assert [e["commit"]["id"] for e in suite] == [sha(0), sha(1)]
    assert not list(tmp_path.glob("*.jsonl"))  # nothing checked out beside the user's files
