"""The report model: built once, rendered as report.md and report.html with the same sections."""

from __future__ import annotations

import html
import re

import pytest

from scalebench import report
from scalebench.analysis import aggregate, stats
from scalebench.report import html as html_report
from scalebench.report import markdown, tables
from scalebench.report.format import interval, num, pct, pct_interval
from scalebench.report.model import series_label
from tests.conftest import fake_record, reference_records
from tests.test_report_html import records_for_report

ALL_TITLES = ["Throughput and scaling efficiency", "Figures", "Horovod's published points",
              "Framework vs framework", "At their best", "Distance to the compute limit (MFU)",
              "Energy (component energy, not MLPerf Power)",
              "Where the efficiency went", "Scaling model", "Allreduce",
              "Failed, timed-out, invalid and skipped runs", "Environment", "Method"]


def md_sections(text: str) -> list[str]:
    return re.findall(r"^## (.+)$", text, re.M)


def html_sections(text: str) -> list[str]:
    return [html.unescape(t) for t in re.findall(r"<h2 id=\"[^\"]+\">(.+?)</h2>", text)]


@pytest.mark.parametrize("problems", [[], ["results.jsonl:3: not JSON"]])
def test_markdown_and_html_carry_the_same_sections(tmp_path, problems):
    model = report.build(records_for_report() + reference_records(), problems)
    titles = [s.title for s in model.sections]
    assert titles == (["Input problems"] if problems else []) + ALL_TITLES
    report.write_all(records_for_report() + reference_records(), problems, tmp_path)
    assert md_sections((tmp_path / "report.md").read_text()) == titles
    assert html_sections((tmp_path / "report.html").read_text()) == titles


def test_sections_stay_when_there_is_nothing_to_put_in_them(tmp_path):
    report.write_all([fake_record(status="failed", error="boom")], [], tmp_path)
    md, page = (tmp_path / "report.md").read_text(), (tmp_path / "report.html").read_text()
    assert md_sections(md) == html_sections(page) == ALL_TITLES
    for text in (md, page):
        assert "No successful runs." in text and "No multi-worker runs: nothing to model." in text
        assert "No allreduce records among the inputs" in text and "boom" in text
        assert "no MFU." in text


def test_summary_rows_are_computed_once_per_write_all(tmp_path, monkeypatch):
    calls = []
    original = aggregate.summary_rows

    def counted(records):
        calls.append(len(records))
        return original(records)

    monkeypatch.setattr(aggregate, "summary_rows", counted)
    written = report.write_all(reference_records(), [], tmp_path)
    assert calls == [9]
    assert [p.name for p in written] == ["summary.csv", "breakdown.csv", "efficiency.png",
                                         "throughput.png", "report.md", "report.html"]


def test_each_difference_is_decided_once(tmp_path, monkeypatch):
    calls = []
    original = stats.difference

    def counted(a, b, alpha=0.05, **kwargs):
        calls.append(alpha)
        return original(a, b, alpha, **kwargs)

    monkeypatch.setattr(stats, "difference", counted)
    report.write_all(reference_records(), [], tmp_path)
    # ddp, horovod and horovod with fp16 compression at 1 and at 2 workers: two slower each
    assert len(calls) == 4


def test_step_options_make_their_own_series():
    model = report.build(reference_records("train"), [])
    assert len(model.groups) == 1
    group = model.groups[0]
    assert group.labels == ("ddp", "horovod", "horovod (fp16_allreduce)")
    assert len(group.rows) == 6
    compared = [series_label(c.row) for c in model.comparisons[0].entries]
    assert sorted(compared) == sorted(group.labels * 2)
    md = markdown.render(model, {})
    assert "| inception_v3 | horovod (fp16_allreduce) | fp32 | 2 |" in md
    assert "horovod (fp16_allreduce)" in html_report.page(model, {})


def test_labels_carry_precision_and_step_options():
    row = {"framework": "horovod", "precision": "fp16", "step_label": "fp16_allreduce"}
    assert series_label(row) == "horovod fp16 (fp16_allreduce)"
    assert series_label({**row, "precision": "fp32", "step_label": ""}) == "horovod"


def test_scaling_model_and_allreduce_in_both_reports(tmp_path):
    report.write_all(reference_records(), [], tmp_path)
    md, page = (tmp_path / "report.md").read_text(), (tmp_path / "report.html").read_text()
    model_md = md.split("## Scaling model")[1].split("## Allreduce")[0]
    model_html = page.split('id="scaling-model"')[1].split('id="allreduce"')[0]
    for section in (model_md, model_html):
        assert "below-model" in section  # ddp x2: 48% against a no-overlap bound of 73%
        assert "ddp allreduce, 2 workers, fit over 3 sizes" in section
        assert "no allreduce measurement for horovod on cpu" in section
    assert '<span class="gauge"' in model_html and "`" in model_md
    allreduce_md = md.split("## Allreduce")[1].split("## Failed")[0]
    allreduce_html = page.split('id="allreduce"')[1].split('id="problems"')[0]
    for section in (allreduce_md, allreduce_html):
        for size in ("64 KiB", "1 MiB", "8 MiB"):
            assert size in section


def test_a_given_link_models_every_multi_worker_run():
    from scalebench.analysis import scaling_model

    link = scaling_model.Link(1e9, 5e-6, "given")
    model = report.build(reference_records("train"), [], link)
    assert len(model.modelled) == 3 and all(m.modelled for m in model.modelled)
    fp16 = [m for m in model.modelled if m.row["step_label"] == "fp16_allreduce"]
    assert fp16 and fp16[0].entry["fp16_allreduce"] is True
    assert len(tables.scaling_model_table(model).rows) == 3


def test_format_helpers():
    assert num(None) == num(float("nan")) == "–"
    assert num(19.0) == "19" and num(0.1234, ".2f", 100, "%") == "12.34%"
    assert pct(0.95) == "95.0%"
    assert interval(1.0, 2.0) == "1–2" and interval(None, 2.0, missing="none") == "none"
    assert pct_interval(0.41, 0.559) == "41.0–55.9%"


# ---------------------------------------------------------------- repeats, TF32, wrapper, warnings

def rich_records() -> list[dict]:
    """DDP on CUDA with TF32 in use: 3 launches at one worker (which also timed the DDP-wrapped
    step), one launch at two workers with a warning, and a failed third launch."""
    from tests.conftest import launches

    cuda = {"device": "cuda", "env": {"device_kind": "NVIDIA H200", "backend": "nccl"},
            "math": {"cudnn_allow_tf32": True, "matmul_precision": "highest"}}
    one = launches([(100.0, 101.0, 99.0), (110.0, 111.0, 109.0), (90.0, 91.0, 89.0)], **cuda)
    for r, wrapped in zip(one, (90.0, 99.0, 81.0), strict=True):
        r.update(trial_wrapped_images_per_sec=[wrapped] * 3, wrapped_images_per_sec=wrapped,
                 wrapper_overhead=1 - wrapped / r["images_per_sec"])
    two = launches([(180.0, 181.0, 179.0), (182.0, 183.0, 181.0)], world_size=2, **cuda)
    two[0]["warnings"] = ["fp16: GradScaler skipped 3 of 10 timed steps"]
    failed = {**fake_record(world_size=2, status="failed", error="NCCL watchdog timeout", **cuda),
              "repeat": 3, "repeats": 3}
    two[1]["repeats"] = 3
    return one + two + [failed]


def test_rows_say_which_samples_and_how_many_launches():
    model = report.build(rich_records(), [])
    rows = {r["world_size"]: r for r in model.rows}
    assert rows[1]["samples_text"] == "3 processes (3 trials each)"
    assert rows[2]["launches_text"] == "2 of 3 launches ok"
    md, page = markdown.render(model, {}), html_report.page(model, {})
    for text in (md, page):
        assert "3 processes (3 trials each)" in text and "2 of 3 launches ok" in text
        assert ("from per-process means for 2 runs (two or more launches), from trials for "
                "0 runs") in text
        assert "3 launches of each configuration" in text
    # launch means 100, 110, 90: 10% apart, though each launch is tight inside
    assert ("1 of 2 runs vary by more than 5% from launch to launch: inception_v3 ddp x1, "
            "3 processes (3 trials each)") in model.noisy_text


def test_tf32_shows_in_the_precision_label():
    model = report.build(rich_records(), [])
    md = markdown.render(model, {})
    assert "| inception_v3 | ddp | fp32 (TF32) | 2 |" in md
    assert model.groups[0].title.endswith("fp32 (TF32)")
    assert "fp32 (TF32)" in html_report.page(model, {})
    cpu = report.build([fake_record()], [])
    assert "| inception_v3 | ddp | fp32 | 1 |" in markdown.render(cpu, {})


def test_ddp_wrapper_overhead_in_both_reports():
    model = report.build(rich_records(), [])
    [row] = model.wrapper
    assert row["wrapped_images_per_sec"] == pytest.approx(90.0)
    assert row["wrapper_overhead"] == pytest.approx(0.1)
    md = markdown.render(model, {}).split("## Framework vs framework")[1]
    page = html_report.page(model, {}).split('id="frameworks"')[1]
    for section in (md, page):
        assert "DDP&#x27;s wrapper at one worker" in section or \
            "DDP's wrapper at one worker" in section
        assert "10.0%" in section and "90" in section


def test_run_warnings_next_to_the_runs_in_both_reports(tmp_path):
    report.write_all(rich_records(), [], tmp_path)
    md, page = (tmp_path / "report.md").read_text(), (tmp_path / "report.html").read_text()
    headline_md = md.split("## Throughput and scaling efficiency")[1].split("## Figures")[0]
    headline_html = page.split('id="headline"')[1].split('id="figures"')[0]
    for section in (headline_md, headline_html):
        assert "inception_v3 ddp x2: launch 1: fp16: GradScaler skipped 3 of 10 timed steps" \
            in section
        assert "launch 3 failed: NCCL watchdog timeout" in section


def test_framework_verdict_from_one_launch_each_says_it_holds_within_them():
    # issue 22, case 10: "ddp slower, significant" from 1 process vs 1 process overclaims
    from tests.conftest import launches

    fast, slow = (10.0, 10.2, 9.8, 10.1, 9.9), (8.0, 8.2, 7.8, 8.1, 7.9)
    one = [fake_record(fast, framework="horovod"), fake_record(slow)]
    [entry] = [e for e in report.build(one, []).comparisons[0].entries if not e.fastest]
    assert entry.verdict == (
        "slower, significant (Mann-Whitney U); on trials: 5 trials (1 process) vs 5 trials "
        "(1 process); 1 launch vs 1 launch: this holds within these processes only; run "
        "--repeats 2 or more for a verdict about the frameworks")
    assert "verdict about the frameworks" in markdown.render(report.build(one, []), {})
    three = (launches([fast, fast, fast], framework="horovod")
             + launches([slow, tuple(v + 0.1 for v in slow), tuple(v - 0.1 for v in slow)]))
    [entry] = [e for e in report.build(three, []).comparisons[0].entries if not e.fastest]
    assert entry.difference.significant and "within these processes" not in entry.verdict


def test_a_faulted_run_is_labelled_and_warned_about_in_the_report(tmp_path):
    # issue 22, case 8
    faults = {"step_delay": {"rank": 1, "seconds": 0.3}}
    records = [fake_record(), fake_record((19.0, 19.2, 18.8), world_size=2),
               fake_record(faults=faults), fake_record((12.0, 12.2, 11.8), world_size=2,
                                                       faults=faults)]
    report.write_all(records, [], tmp_path)
    md = (tmp_path / "report.md").read_text()
    headline = md.split("## Throughput and scaling efficiency")[1].split("## Figures")[0]
    assert "ddp (faults: step delay 0.3 s on rank 1)" in headline
    assert ("inception_v3 ddp (faults: step delay 0.3 s on rank 1) x2: injected faults: step "
            "delay 0.3 s on rank 1 (a fault test, not a measurement of the framework)") in headline


def test_an_interval_too_noisy_to_bound_reads_the_same_in_every_table_and_verdict():
    from scalebench.analysis import compare
    from scalebench.report.format import with_interval

    slow = [fake_record((9.8, 10.5, 0.584)), fake_record((19.0, 19.4, 18.8), world_size=2)]
    why = "too noisy to bound (1 of 3 trials 17x slower)"
    assert interval(None, None, too_noisy="1 of 3 trials 17x slower") == why
    assert pct_interval(None, None, too_noisy="x") == "too noisy to bound (x)"
    assert with_interval(0.5, 0.4, 0.6, percent=True) == "50.0% [40.0–60.0%]"
    assert with_interval(6.9613, None, None, False, "1 of 3 trials 17x slower") == f"6.961 [{why}]"
    md = markdown.render(report.build(slow, []), {})
    assert f"| 6.96 | {why} |" in md
    assert "too noisy to bound (the one-worker run: 1 of 3 trials 17x slower)" in md
    page = html_report.page(report.build(slow, []), {})
    assert html.escape(why) in page
    text = compare.render_text(compare.compare(slow, slow))
    assert f"6.961 [{why}]" in text and "-6.7" not in text and "-15" not in text
