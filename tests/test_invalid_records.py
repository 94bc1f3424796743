"""An invalid record never passes a gate (issue 46): compare, `history add` and the report treat
a broken measurement (records.validity) as a failure, never as an absence; a configuration the
current side lacks is counted and named, and `--require-all` fails on it.

Fabricated records only: the baseline and current sets hold a DDP run at 1 and 2 workers
(tests/conftest.py fake_record); one kind of invalid value at a time goes into the 2-worker
record of one side.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from scalebench import cli, report
from scalebench.analysis import compare
from scalebench.records import results
from scalebench.spec import identity
from tests.conftest import REFERENCE, fake_record

TRIALS = {1: (10.0, 10.1, 9.9), 2: (19.0, 19.2, 18.8), 4: (36.0, 36.4, 35.6)}


def sweep(world_sizes=(1, 2)) -> list[dict]:
    # a JSON round trip: every list its own object (fake_record repeats one rank's windows)
    return [json.loads(json.dumps(fake_record(TRIALS[w], world_size=w))) for w in world_sizes]


def _set(path: str, value):
    def change(record: dict) -> None:
        *head, last = path.split(".")
        target = record
        for part in head:
            target = target[int(part)] if isinstance(target, list) else target[part]
        if isinstance(target, list):
            target[int(last)] = value
        else:
            target[last] = value
    return change


# kind -> (how the 2-worker record is broken, the reason every reader names)
KINDS = {
    "nan": (_set("trial_images_per_sec.1", math.nan),
            "trial_images_per_sec has a non-positive or non-finite value (nan)"),
    "inf": (_set("images_per_sec", math.inf), "images_per_sec is inf, not a positive finite number"),
    "zero": (_set("per_rank_images_per_sec.0", 0.0),
             "per_rank_images_per_sec has a non-positive or non-finite value (0.0)"),
    "negative": (_set("window_seconds.1.0", -0.5),
                 "window_seconds[1] has a non-positive or non-finite value (-0.5)"),
    "missing field": (lambda r: r.pop("trial_images_per_sec"),
                      "missing field 'trial_images_per_sec'"),
    "world size": (lambda r: r.update(per_rank_images_per_sec=r["per_rank_images_per_sec"][:1]),
                   "per_rank_images_per_sec does not have one value per rank: 1 for world_size 2"),
    "trial count": (_set("trials", 4),
                    "trial_images_per_sec does not have one value per trial: 3 for 4 trials"),
    "truncated": (None, "malformed JSON"),
}


def write(path: Path, kind: str | None = None, world_sizes=(1, 2)) -> Path:
    """A results file of sweep(); `kind` breaks its 2-worker record (the file's last line)."""
    lines = []
    for record in sweep(world_sizes):
        text = json.dumps(record)  # NaN and Infinity as Python writes them
        if kind is not None and record["world_size"] == 2:
            change, _ = KINDS[kind]
            if change is None:
                text = text[:len(text) // 2]  # a crash cut the last line short
            else:
                change(record)
                text = json.dumps(record)
        lines.append(text + "\n")
    path.write_text("".join(lines))
    return path


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def rows(c: compare.Comparison) -> dict[tuple[str, int | None], str]:
    return {(v.metric, identity.key_dict(v.key)["world_size"] if v.key else None): v.verdict
            for v in c.verdicts}


def judged(base: Path, cur: Path, **options) -> compare.Comparison:
    """compare's own functions on the two files, as a gate built on them calls them."""
    (b, bad_b), (c, bad_c) = results.load([base]), results.load([cur])
    return compare.compare(b, c, invalid_baseline=bad_b, invalid_current=bad_c, **options)


@pytest.mark.parametrize("kind", KINDS)
def test_invalid_current_record_fails_the_gate(tmp_path, capsys, kind):
    base, cur = write(tmp_path / "base.jsonl"), write(tmp_path / "cur.jsonl", kind)
    reason = KINDS[kind][1]
    c = judged(base, cur)
    assert c.exit_code == 1
    if kind == "truncated":  # its configuration cannot be read: a row of its own
        assert rows(c) == {("all", None): "invalid", ("throughput", 1): "unchanged",
                           ("throughput", 2): "missing", ("efficiency", 2): "missing"}
        assert "may be among them" in " ".join(n for v in c.verdicts for n in v.notes)
    else:
        assert rows(c) == {("throughput", 1): "unchanged", ("throughput", 2): "invalid",
                           ("efficiency", 2): "invalid"}
    code, out, err = run(capsys, "compare", str(base), str(cur))
    assert code == 1, out + err
    assert f"{cur}:2: {reason}" in out and "INVALID" in out
    assert "FAILED: 2 rows on invalid records" in out or "FAILED: 1 row on an invalid record" in out


@pytest.mark.parametrize("kind", KINDS)
def test_invalid_baseline_record_refuses_its_row(tmp_path, capsys, kind):
    base, cur = write(tmp_path / "base.jsonl", kind), write(tmp_path / "cur.jsonl")
    c = judged(base, cur)
    assert c.exit_code == 1
    if kind == "truncated":
        assert rows(c) == {("all", None): "refused", ("throughput", 1): "unchanged",
                           ("throughput", 2): "new", ("efficiency", 2): "new"}
    else:  # the row is not judged against garbage
        assert rows(c) == {("throughput", 1): "unchanged", ("throughput", 2): "refused",
                           ("efficiency", 2): "refused"}
    code, out, err = run(capsys, "compare", str(base), str(cur))
    assert code == 1, out + err
    assert f"baseline: invalid record {base}:2: {KINDS[kind][1]}" in out
    assert "rows refused (an invalid baseline record)" in out or \
        "row refused (an invalid baseline record)" in out


@pytest.mark.parametrize("kind", KINDS)
def test_history_add_adds_the_valid_rows_and_exits_2(tmp_path, capsys, kind):
    store = tmp_path / "history.jsonl"
    bad = write(tmp_path / "cur.jsonl", kind)
    code, out, err = run(capsys, "history", "add", str(bad), "--store", str(store))
    assert code == 2
    assert "added 1 run to" in out  # the valid one-worker run
    assert f"{bad}:2: invalid record: {KINDS[kind][1]}" in err
    assert "1 invalid record not added" in err
    # the valid run is in the store: adding it again adds nothing
    code, out, _ = run(capsys, "history", "add", str(write(tmp_path / "ok.jsonl", world_sizes=(1,))),
                       "--store", str(store))
    assert code == 0 and "added 0 runs" in out and "(1 already there)" in out


def test_an_invalid_one_worker_run_breaks_the_efficiency_it_anchors(tmp_path):
    base = write(tmp_path / "base.jsonl")
    records = sweep()
    lines = [json.dumps({**records[0], "images_per_sec": -1.0}), json.dumps(records[1])]
    cur = tmp_path / "cur.jsonl"
    cur.write_text("\n".join(lines) + "\n")
    c = judged(base, cur)
    assert rows(c) == {("throughput", 1): "invalid", ("throughput", 2): "unchanged",
                       ("efficiency", 2): "invalid"}
    [eff] = [v for v in c.verdicts if v.metric == "efficiency"]
    assert eff.reason.startswith(f"current one-worker run: invalid record {cur}:1: images_per_sec")


def test_an_invalid_record_of_another_kind_is_only_a_warning(tmp_path, capsys):
    base, cur = write(tmp_path / "base.jsonl"), write(tmp_path / "cur.jsonl")
    with open(cur, "a") as fh:
        fh.write(json.dumps({"schema_version": 1, "kind": "allreduce", "status": "ok"}) + "\n")
    code, out, _ = run(capsys, "compare", str(base), str(cur))
    assert code == 0 and f"warning: current: {cur}:3: invalid record: missing field" in out


def test_missing_configurations_are_counted_named_and_fail_with_require_all(tmp_path, capsys):
    base = write(tmp_path / "base.jsonl", world_sizes=(1, 2, 4))
    cur = write(tmp_path / "cur.jsonl")
    x4 = identity.describe(identity.config_key(sweep((4,))[0]))
    code, out, _ = run(capsys, "compare", str(base), str(cur), "--markdown",
                       str(tmp_path / "c.md"))
    assert code == 0
    summary = next(line for line in out.splitlines() if line.startswith("passed"))
    assert f"1 configuration missing from {cur} (allowed; --require-all fails on it): {x4}" in summary
    markdown = (tmp_path / "c.md").read_text()
    assert f"**1 configuration missing from {cur}" in markdown and f"- {x4}" in markdown
    code, out, _ = run(capsys, "compare", str(base), str(cur), "--require-all")
    assert code == 1 and "FAILED: 2 rows missing (--require-all)" in out
    assert f"1 configuration missing from {cur} (fails on it): {x4}" in out
    assert "MISSING" in out
    code, _, err = run(capsys, "compare", str(base), str(cur), "--require-all", "--allow-missing")
    assert code == 2 and "contradict" in err and len(err.strip().splitlines()) == 1


def test_the_report_lists_invalid_records_beside_failed_runs(tmp_path):
    from scalebench.report import markdown

    path = write(tmp_path / "results.jsonl", "nan")
    with open(path, "a") as fh:
        fh.write(json.dumps(fake_record(world_size=4, status="failed", error="rank 3: boom")) + "\n")
    records, invalid = results.load([path])
    model = report.build(records, invalid)
    assert [(f.status, f.workers) for f in model.failures] == [("failed", "4"), ("invalid", "2")]
    text = markdown.render(model, {})
    assert f"{path}:2: {KINDS['nan'][1]}" in text and "rank 3: boom" in text
    assert "1 invalid" in model.counts_text


def test_every_record_written_or_committed_stays_valid():
    # the value rules must not turn a real measurement into an invalid one
    records, invalid = results.load([REFERENCE])
    assert records and not invalid


@pytest.mark.parametrize("bad", [0.0, -19.0, math.nan])
def test_history_detect_rejects_a_bad_value_already_in_a_store(tmp_path, capsys, bad):
    store = tmp_path / "history.jsonl"
    code, _, _ = run(capsys, "history", "add", str(write(tmp_path / "ok.jsonl")), "--store",
                     str(store))
    assert code == 0
    rows = [json.loads(line) for line in store.read_text().splitlines()]
    rows[-1]["trial_images_per_sec"][1] = bad  # a row written by hand or by an older scalebench
    store.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, _, err = run(capsys, "history", "detect", "--store", str(store))
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"trial_images_per_sec holds {bad!r}, not a finite number above 0" in err
