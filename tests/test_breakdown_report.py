"""Where the efficiency went, in the reports: the breakdown table, the waterfall and bounds
figures, the verdict, the link share and the extrapolation check (fabricated records, numbers by
hand). The same on a real 1 -> 2 worker CPU sweep with --with-allreduce is in tests/test_ddp.py,
beside the other test that reads that shared sweep."""

from __future__ import annotations

import base64
import html
import re

import pytest

from scalebench import report
from scalebench.analysis import scaling_model
from scalebench.report import html as html_report
from scalebench.report import markdown
from tests.conftest import fake_record, reference_records
from tests.test_breakdown import two_worker_record
from tests.test_report_html import records_for_report

PARAMS = 23834568  # fake_record's inception_v3 without the aux head
GIVEN = scaling_model.Link(1e9, 0.0, "given")


def sweep_records(framework: str = "ddp", one: float = 10.0, **fields) -> list[dict]:
    """A 1 -> 2 worker sweep of one framework with no-sync windows at 2 workers: ideal 20
    images/s, measured 8 (40%); contention 0, input wait 20%, straggler 30%, exposed
    communication 10% of ideal, 0.1 s per step (test_breakdown's numbers)."""
    return [fake_record((one,) * 3, framework=framework, world_size=1, **fields),
            two_worker_record(framework=framework, **fields)]


def md_section(text: str) -> str:
    return text.split("## Where the efficiency went")[1].split("\n## ")[0]


def html_section(text: str) -> str:
    return text.split('id="breakdown"')[1].split("<h2 ")[0]


def written(tmp_path, records, link=None) -> tuple[list, str, str]:
    paths = report.write_all(records, [], tmp_path, link)
    return paths, (tmp_path / "report.md").read_text(), (tmp_path / "report.html").read_text()


# ---------------------------------------------------------------- the extrapolation check

def test_extrapolation_check_prints_the_model_error_in_points(tmp_path):
    records = sweep_records() + reference_records("allreduce")
    _, md, page = written(tmp_path, records)
    model = report.build(records, [])
    [series] = model.losses.series
    [check] = series.checks
    assert check.checked and check.row["world_size"] == 2
    assert check.predicted == pytest.approx((check.low + check.high) / 2)
    assert check.error_points == pytest.approx(100 * (0.4 - check.predicted))
    assert "fit over 3 sizes" in check.link  # the sweep's own allreduce records
    error = f"{check.error_points:+.1f} points"
    assert re.search(r"\| model error \|", md_section(md))
    assert f"| {error} |" in md_section(md)
    assert f"{error}</td>" in html_section(page)


def test_extrapolation_check_by_hand_with_a_given_link():
    model = report.build(sweep_records(), [], GIVEN)
    [check] = model.losses.series[0].checks
    # one worker: 2 images / 10 images/s = 0.2 s; forward 0.2/3, backward 0.4/3;
    # allreduce: ring factor 1 at 2 workers x 4 bytes x params / 1e9 B/s
    allreduce = 4 * PARAMS / 1e9
    no_overlap = 0.2 / (0.2 + allreduce)
    full_overlap = 0.2 / (0.2 / 3 + max(0.4 / 3, allreduce))
    assert check.low == pytest.approx(no_overlap) and check.high == pytest.approx(full_overlap)
    assert check.predicted == pytest.approx((no_overlap + full_overlap) / 2)
    assert check.error_points == pytest.approx(100 * (0.4 - (no_overlap + full_overlap) / 2))
    assert check.where == "below the no-overlap bound"
    md = markdown.render(model, {})
    assert f"| {100 * (0.4 - (no_overlap + full_overlap) / 2):+.1f} points |" in md


def test_no_allreduce_measurement_is_not_checked():
    model = report.build(sweep_records(), [])
    md, page = markdown.render(model, {}), html_report.page(model, {})
    text = ("inception_v3 ddp x2: not checked: no allreduce measurement for ddp on cpu "
            "(--with-allreduce measures it)")
    assert text in md_section(md) and html.escape(text) in html_section(page)
    assert "| model error |" not in md
    assert "link share not checked: no allreduce measurement for ddp on cpu" in md


# ---------------------------------------------------------------- distance to the limit

def test_link_share_from_the_records_parameters_and_the_link():
    model = report.build(sweep_records(), [], GIVEN)
    [share] = model.losses.series[0].shares
    # 0.1 s exposed per step; a ring allreduce of 4 x params bytes in 0.1 s needs
    # 4 x params / 0.1 B/s of bus bandwidth, against the given 1e9
    assert share.share == pytest.approx(4 * PARAMS / 0.1 / 1e9)
    assert f"communication ran at {share.share:.0%} of this link's given allreduce bandwidth" \
        in share.text
    fp16 = report.build(sweep_records("horovod", options={"fp16_allreduce": True}), [], GIVEN)
    assert fp16.losses.series[0].shares[0].share == pytest.approx(share.share / 2)


def test_link_share_says_measured_for_a_fitted_link():
    model = report.build(sweep_records() + reference_records("allreduce"), [])
    [share] = model.losses.series[0].shares
    assert "of this link's measured allreduce bandwidth" in share.text
    assert "ddp allreduce, 2 workers, fit over 3 sizes" in share.text


# ---------------------------------------------------------------- both renderers, figures

def test_breakdown_section_is_the_same_in_both_reports(tmp_path):
    records = sweep_records() + reference_records("allreduce")
    _, md, page = written(tmp_path, records)
    md, page = md_section(md), html.unescape(html_section(page))
    model = report.build(records, [])
    [series] = model.losses.series
    [row] = series.rows
    expected = [series.title, series.verdict, *(s.text for s in series.shares),
                "Distance to the limit", "Extrapolation check",
                "40.0%", "0.0%", "10.0%", "30.0%", "20.0%",  # efficiency and the four parts
                "100", "150", "50"]  # ms per step: communication, straggler, input wait
    for text in expected:
        assert text in md, text
        assert text in page, text
    assert row["largest_loss"] == "straggler" and "straggler / imbalance" in md


def test_waterfall_and_bounds_figures_are_written_and_embedded(tmp_path):
    records = sweep_records() + reference_records("allreduce")
    paths, md, page = written(tmp_path, records)
    names = [p.name for p in paths]
    assert names == ["summary.csv", "breakdown.csv", "efficiency.png", "throughput.png", "waterfall.png",
                     "bounds.png", "report.md", "report.html"]
    for name in ("waterfall", "bounds"):
        assert (tmp_path / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"![{name}]({name}.png)" in md_section(md)
        match = re.search(rf'<figure id="fig-{name}"><img src="data:image/png;base64,([^"]+)"',
                          html_section(page))
        assert match and base64.b64decode(match.group(1))[:4] == b"\x89PNG"
    figures_md = md.split("## Figures")[1].split("\n## ")[0]
    figures_html = page.split('id="figures"')[1].split("<h2 ")[0]
    assert "waterfall" not in figures_md and "fig-waterfall" not in figures_html
    assert "efficiency.png" in figures_md and "fig-efficiency" in figures_html


def test_bounds_figure_needs_a_link(tmp_path):
    paths, md, _ = written(tmp_path, sweep_records())
    assert [p.name for p in paths if p.suffix == ".png"] == ["efficiency.png", "throughput.png",
                                                             "waterfall.png"]
    assert "bounds.png" not in md


def test_old_records_have_no_breakdown_numbers(tmp_path):
    paths, md, page = written(tmp_path, records_for_report())
    assert "waterfall.png" not in [p.name for p in paths]
    for section in (md_section(md), html_section(page)):
        assert "No breakdown: none of the multi-worker runs has no-sync windows" in section
        assert "exposed comm." not in section and "Verdict" not in section
        assert "Distance to the limit:" not in section
        assert "inception_v3 ddp x2: not checked: no allreduce measurement" in \
            html.unescape(section)


def test_a_run_without_windows_next_to_runs_with_them_is_named(tmp_path):
    records = sweep_records() + [fake_record((9.0,) * 3, framework="horovod", world_size=1),
                                 fake_record((15.0,) * 3, framework="horovod", world_size=2)]
    model = report.build(records, [])
    [series] = model.losses.series
    assert series.missing == ("inception_v3 horovod x2: recorded without no-sync windows "
                              "(before the breakdown existed, or with --no-breakdown)",)
    assert "- no breakdown: inception_v3 horovod x2: recorded without" in \
        markdown.render(model, {})


def test_no_multi_worker_runs_nothing_to_break_down():
    model = report.build([fake_record()], [])
    assert "No multi-worker runs: nothing to break down." in markdown.render(model, {})


# ---------------------------------------------------------------- the verdict

def test_verdict_ranks_what_a_user_gets_and_names_a_slow_baseline():
    # horovod: same windows, a slower one-worker run -> the same 8 images/s is 50% of its own
    # ideal; it delivers no more than ddp, and its own baseline flatters it
    records = sweep_records() + sweep_records("horovod", one=8.0)
    model = report.build(records, [])
    [series] = model.losses.series
    assert series.verdict.startswith(
        "At 2 workers, ranked by the throughput they deliver: ddp 8 images/s, 40% of its own "
        "ideal, largest loss straggler / imbalance (30% of ideal); horovod 8 images/s, 50% of "
        "its own ideal (40% against the best one-worker run, ddp)")
    note = ("horovod's own one-worker run (8 images/s) is 20% slower than the best one-worker "
            "run (ddp, 10 images/s), which flatters its own efficiency: 50% against its own run, "
            "40% against the best")
    assert note in series.verdict
    for text in (markdown.render(model, {}), html.unescape(html_report.page(model, {}))):
        assert "Verdict:" in text and "ranked by the throughput they deliver" in text
