"""Records through pod logs: `scalebench k8s emit` in the pod, `scalebench k8s collect` from
`kubectl logs` output (with its --prefix and the frameworks' own lines around them)."""

from __future__ import annotations

import json

from scalebench import cli
from scalebench.k8s import results as k8s_results
from scalebench.records import results
from tests.conftest import fake_record


def sweep_folder(tmp_path, records):
    out = tmp_path / "pod-results"
    out.mkdir()
    for record in records:
        results.append(out / results.RESULTS_FILE, record)
    return out


def test_emit_then_collect_gives_back_every_record(tmp_path, capsys):
    records = [fake_record(world_size=w, sweep_id="s1") for w in (1, 2)]
    records.append(fake_record(world_size=4, status="timeout", error="no result within 900 s",
                               sweep_id="s1"))
    out = sweep_folder(tmp_path, records)
    assert cli.main(["k8s", "emit", str(out)]) == 0
    emitted = capsys.readouterr().out.splitlines()
    assert len(emitted) == 3 and all(line.startswith(k8s_results.PREFIX) for line in emitted)
    # what `kubectl logs --prefix` gives: the pod's other output, a prefix on each line
    log = tmp_path / "launcher.log"
    log.write_text("\n".join(["[pod/bench-launcher/launcher] NCCL INFO Bootstrap",
                              *(f"[pod/bench-launcher/launcher] {line}" for line in emitted),
                              "[pod/bench-launcher/launcher] SCALEBENCH_RESULT {not json"]) + "\n")
    collected = tmp_path / "collected"
    assert cli.main(["k8s", "collect", str(log), "--out", str(collected)]) == 0
    captured = capsys.readouterr()
    assert "3 records found, 3 new" in captured.out
    assert "line 5: JSONDecodeError" in captured.err
    back, invalid = results.load([collected])
    assert invalid == [] and back == records
    # a log read twice adds nothing
    assert cli.main(["k8s", "collect", str(log), "--out", str(collected)]) == 0
    assert "3 records found, 0 new" in capsys.readouterr().out
    assert len(results.load([collected])[0]) == 3


def test_a_record_that_fails_validation_is_named_not_appended(tmp_path):
    good = fake_record(sweep_id="s2")
    bad = {**good, "status": "exploded", "run_id": "x"}
    lines = [k8s_results.PREFIX + json.dumps(good), "noise",
             k8s_results.PREFIX + json.dumps(bad), k8s_results.PREFIX + "[1, 2]"]
    found, problems = k8s_results.parse(lines)
    assert found == [good]
    assert [p.split(":")[0] for p in problems] == ["line 3", "line 4"]
    assert "status 'exploded'" in problems[0]


def test_emit_without_records_is_one_line_and_exit_2(tmp_path, capsys):
    assert cli.main(["k8s", "emit", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "holds no results.jsonl" in err and "\n" not in err
