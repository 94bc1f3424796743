"""history.html: self-contained, escaped, and loaded in headless Chromium (skipped without it)."""

from __future__ import annotations

import html
import json
import random
import re
import shutil

import pytest

from scalebench import cli
from scalebench.tracking import accepted, history
from tests.conftest import fake_record
from tests.test_changepoints import add_series
from tests.test_report_html import assert_screenshot, browser_check, needs_chromium

HOSTILE = "<script>document.title='pwned'</script>"


@pytest.fixture(scope="module")
def history_page(tmp_path_factory):
    out = tmp_path_factory.mktemp("history-page")
    store = add_series(out / "h.jsonl", [1.0] * 6 + [0.85] * 6, commit_prefix=HOSTILE)
    assert cli.main(["history", "plot", "--store", str(store), "--out", str(out / "plots"),
                     "--last", "6"]) == 0
    page = out / "plots" / "history.html"
    return page, page.read_text(encoding="utf-8")


def test_page_holds_the_changes_and_both_figures(history_page):
    _, text = history_page
    for heading in ("Changes", "Trends", "Series", "Method"):
        assert f">{heading}</h2>" in text
    changes = text.split('id="changes"')[1].split('id="figures"')[0]
    commits = html.escape(f"{HOSTILE}c5..{HOSTILE}c6", quote=True)
    assert changes.count("regression (new)") == 2 and changes.count(commits) == 2
    assert "FAILED: 2 new regressions among the last 6 points" in text
    sources = re.findall(r'<img src="([^"]+)"', text)
    assert len(sources) == 2 and all(s.startswith("data:image/png;base64,") for s in sources)
    assert not re.search(r'(src|href)="(?!data:|#)', text)


def test_strings_from_the_store_are_escaped(history_page):
    _, text = history_page
    assert HOSTILE not in text and html.escape(HOSTILE, quote=True) in text
    assert "<script" not in text.lower()


@needs_chromium
def test_browser_loads_the_history_page(history_page, tmp_path):
    page, _ = history_page
    found = browser_check(page, tmp_path)
    assert found["errors"] == [] and found["scripts"] == 1  # the probe only
    assert found["title"] == "scalebench history" and found["pwned"] is None
    assert len(found["images"]) == 2
    for image in found["images"]:
        assert image["complete"] and image["width"] >= 400 and image["height"] >= 200, image
    assert_screenshot(page, tmp_path)


# ---------------------------------------------------------------- efficiency charts per model x framework

CHART_PROBE = """<script>
window.addEventListener('load', function () {
  var charts = function () {
    return Array.prototype.map.call(document.querySelectorAll('figure.chart'), function (f) {
      return {title: f.querySelector('figcaption').textContent,
              shown: getComputedStyle(f).display !== 'none',
              width: f.querySelector('svg').getBoundingClientRect().width,
              lines: f.querySelectorAll('polyline').length,
              bands: f.querySelectorAll('g.change').length};
    });
  };
  var rows = function () {
    return Array.prototype.filter.call(document.querySelectorAll('#changes ~ table tr.regression,'
      + '#changes ~ table tr.not-regression'), function (r) {
        return getComputedStyle(r).display !== 'none'; }).length;
  };
  var before = {charts: charts(), rows: rows()};
  document.getElementById('only-regressions').checked = true;
  var after = {charts: charts(), rows: rows()};
  var marker = document.createElement('pre');
  marker.id = 'sb-chart-check';
  marker.textContent = JSON.stringify({before: before, after: after,
    external: performance.getEntriesByType('resource').length});
  document.body.appendChild(marker);
});
</script>"""


def efficiency_store(path, sweeps: int = 12, drop_at: int = 6):
    """ddp at 1, 2 and 4 workers and horovod at 1 and 2, a sweep a day; from sweep `drop_at` on,
    ddp's 4-worker run is 15% slower (an efficiency regression of that line only) and
    horovod's 2-worker run 12% faster (an improvement); from sweep 3 on ddp's 2-worker run is
    10% slower, and that change is accepted."""
    rng = random.Random(3)
    for k in range(sweeps):
        records = []
        for framework, workers in (("ddp", (1, 2, 4)), ("horovod", (1, 2))):
            for w in workers:
                moved = k >= drop_at and (framework, w) in (("ddp", 4), ("horovod", 2))
                mean = 10.0 * w * (0.8 if w > 1 else 1.0) * (
                    (0.85 if framework == "ddp" else 1.12) if moved else 1.0) * (
                    0.9 if (framework, w) == ("ddp", 2) and k >= 3 else 1.0)
                records.append(fake_record(
                    tuple(mean * (1 + rng.gauss(0, 0.004)) for _ in range(3)), framework=framework,
                    world_size=w, env={"git_commit": f"c{k}"}, sweep_id=f"s{k}",
                    timestamp=f"2026-02-{k + 1:02d}T00:00:00+0000"))
        history.add(path, records)
    rows, _ = history.load_store(path)
    with open(path, "a") as fh:
        fh.write(json.dumps(accepted.entry("c2..c3", "new default bucket size", ["ddp x2"], rows,
                                           "2026-02-20T00:00:00+0000")) + "\n")
    return path


@pytest.fixture(scope="module")
def chart_page(tmp_path_factory):
    out = tmp_path_factory.mktemp("history-charts")
    store = efficiency_store(out / "h.jsonl")
    assert cli.main(["history", "plot", "--store", str(store), "--out", str(out / "plots"),
                     "--last", "6"]) in (0, 1)
    page = out / "plots" / "history.html"
    return page, page.read_text(encoding="utf-8")


def test_one_efficiency_chart_per_model_and_framework_with_a_line_per_worker_count(chart_page):
    _, text = chart_page
    charts = text.split('id="charts"')[1].split('id="figures"')[0]
    figures = re.findall(r'<figure class="chart( has-regression)?">(.*?)</figure>', charts, re.S)
    titles = [re.search(r"<figcaption><b>(.*?)</b>", body).group(1) for _, body in figures]
    assert [t.split(" — ")[1] for t in titles] == ["ddp", "horovod"]
    (ddp_flag, ddp), (horovod_flag, horovod) = figures
    assert ddp_flag and not horovod_flag
    assert re.findall(r'data-workers="(\d+)"', ddp) == ["2", "4"]
    assert re.findall(r'data-workers="(\d+)"', horovod) == ["2"]
    # the 4-worker line's step, as a band over its commit range, named in the chart's table
    (band,) = re.findall(r'<g class="change regression"><title>(.*?)</title>', ddp)
    assert band.startswith("x4: regression of -15") and band.endswith("at c5..c6")
    assert '<tr class="regression"><td>regression (new)</td><td>x4</td><td>c5..c6</td>' in ddp
    # the 2-worker line's accepted step: grey, struck through, with the reason
    (band,) = re.findall(r'<g class="change accepted"><title>(.*?)</title>', ddp)
    assert band.startswith("x2: regression of -10") and band.endswith(
        "at c2..c3; accepted c2..c3: new default bucket size (ddp x2)")
    assert re.search(r'text-decoration="line-through">✓ -10% x2 c2..c3</text>', ddp)
    assert '<tr class="regression"><td>accepted regression</td><td>x2</td><td>c2..c3</td>' in ddp
    changes = text.split('id="changes"')[1].split('id="charts"')[0]
    assert changes.count('title="accepted c2..c3: new default bucket size (ddp x2)">accepted '
                         "regression</span>") == 2  # throughput and efficiency
    assert '<tr class="not-regression"><td>improvement</td><td>x2</td><td>c5..c6</td>' in horovod
    assert not re.search(r'(src|href)="(?!data:|#)', text)


@needs_chromium
def test_browser_draws_the_charts_and_the_regressions_only_switch_hides_the_rest(chart_page,
                                                                                 tmp_path):
    from tests.test_report_html import chromium

    page, text = chart_page
    probe = tmp_path / "probe.html"
    probe.write_text(text.replace('<meta charset="utf-8">', '<meta charset="utf-8">' + CHART_PROBE,
                                  1), encoding="utf-8")
    proc = chromium(tmp_path, "--virtual-time-budget=5000", "--dump-dom", probe.as_uri())
    match = re.search(r'<pre id="sb-chart-check">(.*?)</pre>', proc.stdout, re.S)
    assert match, proc.stderr[-2000:]
    found = json.loads(html.unescape(match.group(1)))
    assert found["external"] == 0  # nothing fetched: the page holds everything it shows
    before, after = found["before"], found["after"]
    assert [(c["shown"], c["lines"], c["bands"]) for c in before["charts"]] == [
        (True, 2, 2), (True, 1, 1)]
    assert all(c["width"] >= 600 for c in before["charts"])
    assert [c["shown"] for c in after["charts"]] == [True, False]
    # the changes table: the regressions of ddp x4 and the accepted ones of ddp x2 (throughput
    # and efficiency each) stay, horovod's improvements go
    assert (before["rows"], after["rows"]) == (6, 4)
    shot = assert_screenshot(page, tmp_path)
    shutil.copy(shot, page.parent / "history-screenshot.png")
