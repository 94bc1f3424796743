"""compare under strong scaling: the efficiency baseline is the one-worker run with the same
global batch (identity.baseline_key), so a fallen efficiency is caught.

Before identity, compare looked for a one-worker run with the 2-worker run's per-worker batch
(4), found none, and gave no efficiency verdict at all."""

from __future__ import annotations

import pytest

from scalebench import cli
from scalebench.analysis import compare
from scalebench.spec import identity
from tests.conftest import fake_record, write_records

ONE = (10.0, 10.05, 9.95, 10.02, 9.98)  # 5 tight trials (~0.5% spread)
TWO = (18.0, 18.09, 17.91, 18.04, 17.96)  # efficiency 0.9


def strong_pair(one=ONE, two=TWO) -> list[dict]:
    """1 worker with batch 8, 2 workers with batch 4: global batch 8 both times."""
    return [fake_record(one, world_size=1, scaling="strong", batch_size=8, global_batch=8),
            fake_record(two, world_size=2, scaling="strong", batch_size=4, global_batch=8)]


def scaled(trials, factor):
    return tuple(v * factor for v in trials)


@pytest.mark.parametrize("current", [
    strong_pair(two=scaled(TWO, 0.7)),  # the 2-worker run lost 30%
    strong_pair(one=scaled(ONE, 1 / 0.7)),  # the one-worker run sped up; 2 workers did not
], ids=["two-workers-slower", "one-worker-faster"])
def test_strong_scaling_efficiency_drop_fails_compare(tmp_path, capsys, current):
    base = write_records(tmp_path / "base.jsonl", strong_pair())
    cur = write_records(tmp_path / "cur.jsonl", current)
    code = cli.main(["compare", str(base), str(cur)])
    out = capsys.readouterr().out
    assert code == 1, out
    rows = [line for line in out.splitlines() if line.split()[:2] == ["REGRESSION", "efficiency"]]
    assert len(rows) == 1 and "inception_v3 ddp x2 fp32 b4 75px cpu strong" in rows[0], out
    assert "regression: efficiency of inception_v3 ddp x2" in out
    [v] = [v for v in compare.compare(strong_pair(), current).verdicts if v.metric == "efficiency"]
    assert v.verdict == "regression" and v.change_pct == pytest.approx(-30.0)
    assert v.test == "Mann-Whitney U"
    assert v.baseline.mean == pytest.approx(0.9)


def test_strong_scaling_efficiency_alone_is_judged(tmp_path, capsys):
    base = write_records(tmp_path / "base.jsonl", strong_pair())
    cur = write_records(tmp_path / "cur.jsonl", strong_pair(one=scaled(ONE, 1 / 0.7)))
    assert cli.main(["compare", str(base), str(cur), "--metric", "efficiency"]) == 1
    assert "FAILED: 1 regression" in capsys.readouterr().out


def test_unchanged_strong_scaling_passes():
    c = compare.compare(strong_pair(), strong_pair(two=scaled(TWO, 0.99)))
    assert {(v.metric, identity.key_dict(v.key)["world_size"]): v.verdict
            for v in c.verdicts} == {("throughput", 1): "unchanged",
                                     ("throughput", 2): "unchanged",
                                     ("efficiency", 2): "unchanged"}


def test_strong_and_weak_runs_are_not_each_others_baseline():
    # a weak 2-worker run with batch 4 per worker has no one-worker weak run: no efficiency,
    # even though a strong one-worker run with batch 4 exists
    weak_two = fake_record(TWO, world_size=2, batch_size=4, global_batch=8)
    strong_one = fake_record(ONE, world_size=1, scaling="strong", batch_size=4, global_batch=4)
    c = compare.compare([weak_two, strong_one], [weak_two, strong_one])
    assert [v.metric for v in c.verdicts] == ["throughput", "throughput"]
