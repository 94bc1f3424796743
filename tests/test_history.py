"""scalebench history add / plot: the store, its version, trends and regression marks."""

from __future__ import annotations

import json

import pytest

from scalebench import cli
from scalebench.tracking import history
from tests.conftest import fake_record, read_records, variant, write_records

TIGHT = {1: (10.0, 10.1, 9.9), 2: (19.0, 19.2, 18.8)}


def sweep_at(hour: int, factor: float = 1.0, commit: str = "c0") -> list[dict]:
    return [fake_record(tuple(v * factor for v in TIGHT[w]), world_size=w,
                        timestamp=f"2026-01-01T{hour:02d}:00:00+0000", env={"git_commit": commit})
            for w in (1, 2)]


def main(capsys, *argv) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def assert_png_drawn(path):
    import matplotlib.image as mpimg

    pixels = mpimg.imread(path)
    assert pixels.shape[0] > 100 and pixels.shape[1] > 100
    assert pixels[..., :3].std() > 0.01  # not one flat colour


def test_add_writes_versioned_rows_once(tmp_path, capsys):
    results = write_records(tmp_path / "run1" / "results.jsonl", sweep_at(1, commit="aaa"))
    store = tmp_path / "store" / "history.jsonl"
    code, out, _ = main(capsys, "history", "add", str(results.parent), "--store", str(store))
    assert code == 0 and "added 2 runs" in out
    rows = read_records(store)
    assert [r["history_version"] for r in rows] == [history.HISTORY_VERSION] * 2
    assert {r["commit"] for r in rows} == {"aaa"}
    assert rows[0]["env"]["hostname"] == "node-a"
    one, two = sorted(rows, key=lambda r: r["world_size"])
    assert one["efficiency"] is None
    # 2 workers: trials / (2 x mean of the one-worker trials, 10.0)
    assert two["trial_efficiency"] == pytest.approx([0.95, 0.96, 0.94])
    code, out, _ = main(capsys, "history", "add", str(results), "--store", str(store),
                        "--commit", "bbb")
    assert code == 0 and "added 0 runs" in out and "2 already there" in out
    assert len(read_records(store)) == 2


def test_commit_option_overrides_the_recorded_one(tmp_path, capsys):
    results = write_records(tmp_path / "r.jsonl", sweep_at(1, commit="aaa"))
    store = tmp_path / "h.jsonl"
    main(capsys, "history", "add", str(results), "--store", str(store), "--commit", "feed42")
    assert {r["commit"] for r in read_records(store)} == {"feed42"}


def test_failed_runs_are_kept_but_not_drawn(tmp_path):
    store = tmp_path / "h.jsonl"
    history.add(store, sweep_at(1) + [fake_record(world_size=4, status="timeout",
                                                  error="timed out after 900 s")])
    rows, problems = history.load_store(store)
    assert problems == [] and [r["status"] for r in rows] == ["ok", "ok", "timeout"]
    assert sum(len(points) for lines in history.trends(rows, "throughput").values()
               for points in lines.values()) == 2


def test_unknown_store_version_exits_2(tmp_path, capsys):
    store = tmp_path / "h.jsonl"
    store.write_text(json.dumps({"history_version": 7, "id": "x"}) + "\n")
    code, _, err = main(capsys, "history", "plot", "--store", str(store), "--out", str(tmp_path))
    assert code == 2 and "history_version 7" in err and "reads version 1" in err
    code, _, err = main(capsys, "history", "plot", "--store", str(tmp_path / "none.jsonl"),
                        "--out", str(tmp_path))
    assert code == 2 and "does not exist" in err


def test_malformed_store_line_is_reported_and_skipped(tmp_path):
    store = tmp_path / "h.jsonl"
    history.add(store, sweep_at(1))
    with open(store, "a") as fh:
        fh.write("{broken\n")
    rows, problems = history.load_store(store)
    assert len(rows) == 2 and len(problems) == 1 and ":3: skipped: malformed JSON" in problems[0]


def test_plot_marks_regressions_against_the_previous_point(tmp_path, capsys):
    store = tmp_path / "h.jsonl"
    for i, (hour, factor) in enumerate([(1, 1.0), (2, 1.01), (3, 0.8), (4, 0.8)]):
        history.add(store, sweep_at(hour, factor, commit=f"c{i}"))
    code, out, _ = main(capsys, "history", "plot", "--store", str(store), "--out",
                        str(tmp_path / "plots"), "--point-to-point")
    assert code == 0
    for metric in ("throughput", "efficiency"):
        assert f"wrote {tmp_path / 'plots' / f'history-{metric}.png'}" in out
        assert_png_drawn(tmp_path / "plots" / f"history-{metric}.png")
    marks = [line for line in out.splitlines() if line.startswith("regression:")]
    # only the step from c1 to c2, at 1 and 2 workers; efficiency did not move
    assert len(marks) == 2 and all("throughput" in m and "commit c2" in m for m in marks)
    assert all("-20.8%" in m for m in marks)  # 0.8 / 1.01 - 1
    rows, _ = history.load_store(store)
    tr = history.trends(rows, "throughput")
    (lines,) = tr.values()
    verdicts = [p.judgement.verdict if p.judgement else None for p in lines[("ddp", 1, 1)]]
    assert verdicts == [None, "unchanged", "regression", "unchanged"]


def test_history_of_the_reference_runs(tiny_sweep, tmp_path, capsys):
    records = read_records(tiny_sweep)
    later = write_records(tmp_path / "later.jsonl", variant(records, 0.8, seconds_later=3600))
    store = tmp_path / "history.jsonl"
    assert main(capsys, "history", "add", str(tiny_sweep.parent), "--store", str(store))[0] == 0
    code, out, _ = main(capsys, "history", "add", str(later), "--store", str(store),
                        "--commit", "next")
    assert code == 0 and "added 2 runs" in out
    rows = read_records(store)
    assert len(rows) == 4 and rows[0]["commit"] == records[0]["env"]["git_commit"]
    code, out, _ = main(capsys, "history", "plot", "--store", str(store), "--out", str(tmp_path),
                        "--point-to-point")
    assert code == 0
    assert_png_drawn(tmp_path / "history-throughput.png")
    assert_png_drawn(tmp_path / "history-efficiency.png")
    # whatever this machine's noise, the marks are exactly compare's verdicts on the same data
    from scalebench.analysis import compare

    c = compare.compare(records, read_records(later), metrics="throughput")
    assert out.count("regression:") == len(c.regressions)


def test_step_options_draw_their_own_lines(tmp_path):
    store = tmp_path / "h.jsonl"
    records = [fake_record(TIGHT[w], framework="horovod", world_size=w, options=options)
               for w in (1, 2) for options in ({}, {"fp16_allreduce": True})]
    history.add(store, records)
    rows, _ = history.load_store(store)
    assert {r["step_options"] for r in rows} == {"{}", '{"fp16_allreduce": true}'}
    (lines,) = history.trends(rows, "throughput").values()  # one panel: one scaling series
    assert set(lines) == {("horovod", 1, 1), ("horovod", 2, 1),
                          ("horovod", 1, 1, "fp16_allreduce"), ("horovod", 2, 1, "fp16_allreduce")}
    assert history.line_label(("horovod", 2, 1, "fp16_allreduce")) == "horovod [fp16_allreduce] x2"
    eff = history.trends(rows, "efficiency")
    assert set(next(iter(eff.values()))) == {("horovod", 2, 1), ("horovod", 2, 1, "fp16_allreduce")}


def test_rows_without_step_options_or_global_batch_still_read(tmp_path):
    # rows written before step options joined the key: no step_options, options, global_batch
    store = tmp_path / "h.jsonl"
    history.add(store, sweep_at(1))
    rows = []
    for row in read_records(store):
        for name in ("step_options", "options", "global_batch"):
            row.pop(name)
        rows.append(row)
    (lines,) = history.trends(rows, "throughput").values()
    assert set(lines) == {("ddp", 1, 1), ("ddp", 2, 1)}
    # the same records added again are recognised by their ids
    store.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert history.add(store, sweep_at(1)) == (0, 2)


def test_history_of_the_whole_reference_set(tmp_path):
    from tests.conftest import reference_records

    store = tmp_path / "h.jsonl"
    assert history.add(store, reference_records()) == (6, 0)  # train records only
    rows, _ = history.load_store(store)
    (lines,) = history.trends(rows, "throughput").values()
    assert sorted(history.line_label(line) for line in lines) == [
        "ddp x1", "ddp x2", "horovod [fp16_allreduce] x1", "horovod [fp16_allreduce] x2",
        "horovod x1", "horovod x2"]


# ---------------------------------------------------------------- repeats

def repeated_sweep(hour: int, seed: int, commit: str, means_1, means_2) -> list[dict]:
    from tests.conftest import launches

    env = {"env": {"git_commit": commit}}
    return (launches([(m - 0.1, m, m + 0.1) for m in means_1], seed, hour, **env)
            + launches([(m - 0.1, m, m + 0.1) for m in means_2], seed, hour, world_size=2,
                       **env))


def test_the_launches_of_one_sweep_are_one_point(tmp_path):
    store = tmp_path / "h.jsonl"
    history.add(store, repeated_sweep(1, 11, "c1", (10.0, 11.0, 9.0), (19.0, 20.9, 17.1)))
    history.add(store, repeated_sweep(2, 22, "c2", (8.0, 8.8, 7.2), (15.2, 16.7, 13.7)))
    rows, _ = history.load_store(store)
    assert len(rows) == 12 and {r["repeats"] for r in rows} == {3}
    (lines,) = history.trends(rows, "throughput").values()
    points = lines[("ddp", 1, 1)]
    assert [p.commit for p in points] == ["c1", "c2"]  # not one point per launch
    assert points[0].samples.processes == 3 and points[0].summary.mean == pytest.approx(10.0)
    judged = points[1].judgement
    assert judged.difference.basis == "processes" and judged.change_pct == pytest.approx(-20.0)
    assert "3 processes (3 trials each)" in judged.difference.samples


def test_history_efficiency_pairs_the_same_launch(tmp_path):
    store = tmp_path / "h.jsonl"
    history.add(store, repeated_sweep(1, 11, "c1", (10.0, 11.0), (19.0, 19.8)))
    rows, _ = history.load_store(store)
    two = sorted((r for r in rows if r["world_size"] == 2), key=lambda r: r["repeat"])
    assert [r["efficiency"] for r in two] == pytest.approx([0.95, 0.9])
    # trial i against trial i of the same one-worker launch
    assert two[1]["efficiency_samples"] == pytest.approx([19.7 / 21.8, 19.8 / 22.0, 19.9 / 22.2])
    (lines,) = history.trends(rows, "efficiency").values()
    [point] = lines[("ddp", 2, 1)]
    assert point.samples.process_values == pytest.approx((0.95, 0.9))


# ---------------------------------------------------------------- one number, one answer

def three_days(with_ids: bool = True) -> list[dict]:
    """Three sweeps with --repeats 3 and the same fixed --seed: day 1 at commit A (18 images/s),
    day 2 at commit A again, 30% slower, day 3 at commit B, as slow as day 2."""
    from tests.conftest import launches

    records = []
    for day, commit, factor in ((1, "A", 1.0), (2, "A", 0.7), (3, "B", 0.7)):
        means = [factor * m for m in (18.0, 18.1, 17.9)]
        ids = {"sweep_id": f"2026010{day}T000000-{day:08x}"} if with_ids else {}
        records += launches([(m - 0.05, m, m + 0.05) for m in means], order_seed=5, hour=day,
                            env={"git_commit": commit}, **ids)
    return records


@pytest.mark.parametrize("with_ids", [True, False], ids=["sweep ids", "older records"])
def test_each_sweep_is_its_own_point(tmp_path, capsys, with_ids):
    # issue 22, case 3: a point is one sweep, not (commit, seed, repeats)
    store = tmp_path / "h.jsonl"
    history.add(store, three_days(with_ids))
    rows, _ = history.load_store(store)
    (lines,) = history.trends(rows, "throughput").values()
    points = lines[("ddp", 1, 1)]
    assert [p.commit for p in points] == ["A", "A", "B"]
    assert [p.samples.processes for p in points] == [3, 3, 3]
    assert [p.judgement.verdict if p.judgement else None for p in points] == [
        None, "regression", "unchanged"]
    assert points[1].judgement.change_pct == pytest.approx(-30.0)
    code, out, _ = main(capsys, "history", "plot", "--store", str(store), "--out", str(tmp_path),
                        "--point-to-point")
    [mark] = [line for line in out.splitlines() if line.startswith("regression:")]
    assert "(commit A" in mark and "-30.0% vs the previous point" in mark
    assert ("sweep 20260102T000000-00000002" in mark) == with_ids


def test_rows_keep_sweep_id_warnings_and_faults(tmp_path, capsys):
    # issue 22, case 8: faults draw their own line, labelled; warnings reach the verdicts
    store = tmp_path / "h.jsonl"
    warning = "3 fp16 steps in the timed windows were skipped by the gradient scaler"
    faults = {"step_delay": {"rank": 1, "seconds": 0.3}}
    history.add(store, sweep_at(1) + [fake_record(TIGHT[2], world_size=2, faults=faults,
                                                  timestamp="2026-01-01T01:00:00+0000")])
    history.add(store, [fake_record(tuple(1.3 * v for v in TIGHT[1]), warnings=[warning],
                                    sweep_id="s2", timestamp="2026-01-01T02:00:00+0000")])
    rows, _ = history.load_store(store)
    assert [r["sweep_id"] for r in rows] == [None, None, None, "s2"]
    (lines,) = history.trends(rows, "throughput").values()
    label = "faults: step delay 0.3 s on rank 1"
    assert set(lines) == {("ddp", 1, 1), ("ddp", 2, 1), ("ddp", 2, 1, label)}
    assert history.line_label(("ddp", 2, 1, label)) == f"ddp [{label}] x2"
    faster = lines[("ddp", 1, 1)][1]
    assert faster.judgement.verdict == "improvement" and faster.warnings == (warning,)
    code, out, _ = main(capsys, "history", "plot", "--store", str(store), "--out", str(tmp_path),
                        "--point-to-point")
    [note] = [line for line in out.splitlines() if line.startswith("note:")]
    assert "(commit abc123, sweep s2)" in note and "(improvement;" in note and warning in note


def test_history_pairs_efficiency_launches_as_compare_does(tmp_path):
    # a 2-worker launch whose one-worker launch failed has no efficiency (compare leaves the
    # pair out too); it was paired with another launch's one-worker run
    from scalebench.analysis import aggregate, compare

    records = repeated_sweep(1, 11, "c1", (10.0, 11.0, 9.0), (19.0, 20.9, 17.1))
    records[2] = {**fake_record(status="failed", error="killed"), "repeat": 3, "repeats": 3}
    rows = history.rows_from_records(records)
    two = sorted((r for r in rows if r["world_size"] == 2), key=lambda r: r["repeat"])
    assert [r["efficiency"] for r in two] == pytest.approx([0.95, 0.95, None])
    runs = compare.index_runs(records)
    keys = {r.newest_ok["world_size"]: k for k, r in runs.items() if r.ok}
    paired = aggregate.efficiency_samples(runs[keys[2]], runs[keys[1]], 2)
    assert paired.process_values == pytest.approx([r["efficiency"] for r in two[:2]])
