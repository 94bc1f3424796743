"""report.html: content, escaping, self-containment, and a real headless-Chromium check."""

from __future__ import annotations

import base64
import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from scalebench import cli, report
from scalebench.report import html as html_report
from tests.conftest import fake_record, read_records, write_records

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="headless Chromium not installed (Debian: apt-get install -y chromium;"
    " .ci/run installs it)")

XSS_HOST = "<img src=x onerror=\"document.documentElement.setAttribute('data-pwned','host')\">"
XSS_ERROR = "<script>document.documentElement.setAttribute('data-pwned','error')</script> & more"
XSS_TAIL = "</pre></details><script>document.title='pwned'</script>"


def records_for_report() -> list[dict]:
    """ddp and horovod at 1 and 2 workers, one noisy run, failures with hostile strings, two envs."""
    other_env = {"hostname": XSS_HOST, "torch": "2.15.0"}
    return [
        fake_record((10.0, 10.1, 9.9), world_size=1),
        fake_record((19.0, 19.2, 18.8), world_size=2),
        fake_record((9.0, 9.1, 8.9), framework="horovod", world_size=1, env=other_env),
        fake_record((12.0, 17.0, 14.0), framework="horovod", world_size=2, env=other_env),
        fake_record(framework="ray", world_size=2, status="failed", error=XSS_ERROR,
                    stderr_tail=XSS_TAIL),
        fake_record(framework="ray", world_size=4, status="skipped",
                    error="ray not installed: pip install 'scalebench[ray]'"),
    ]


@pytest.fixture(scope="module")
def html_page(tmp_path_factory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("html-report")
    written = report.write_all(records_for_report(), [], out)
    page = out / "report.html"
    assert page in written and (out / "report.md") in written
    return page, page.read_text(encoding="utf-8")


def test_sections_and_headline(html_page):
    _, text = html_page
    for heading in ("Throughput and scaling efficiency", "Figures", "Framework vs framework",
                    "Failed, timed-out, invalid and skipped runs", "Environment", "Method",
                    "Horovod's published points"):
        assert heading in text, heading
    assert "Inception V3 — batch 2 per worker, 75 px, cpu, weak scaling" in text
    assert "19 img/s" in text and "95% CI 18.5–19.5" in text  # mean 19, t-interval +-0.497
    assert "efficiency 95.0%" in text and "vs best 1-worker: 95.0% (ddp)" in text
    assert "vs best 1-worker: 71.7% (ddp)" in text  # horovod x2: 14.33 / (2 x ddp's 10.0)


def test_noisy_runs_are_flagged(html_page):
    _, text = html_page
    # horovod x2 trials 12, 17, 14: std 2.52 = 17.6% of the mean 14.33
    assert "noisy (17.6%)" in text
    assert "1 of 4 runs vary by more than 5% from trial to trial: inception_v3 horovod x2" in text


def test_published_reference_and_its_hardware(html_page):
    _, text = html_page
    assert "128 servers x 4 Pascal GPUs" in text and "25 Gbit/s RoCE" in text
    assert "batch 64 per GPU" in text and "synthetic data" in text
    for model, value in (("Inception V3", "90.0%"), ("ResNet-101", "90.0%"), ("VGG-16", "68.0%")):
        assert re.search(rf"<td>{model}</td><td class=\"num\">{value}</td><td class=\"num\">512",
                         text), model


def test_framework_comparison_at_each_worker_count(html_page):
    _, text = html_page
    section = text.split('id="frameworks"')[1].split('id="problems"')[0]
    assert section.count("fastest</span>") == 2  # ddp at 1 and at 2 workers
    assert "slower, significant (95% intervals)" in section  # horovod x1: 9.0 vs 10.0, tight
    assert "not distinguishable (95% intervals)" in section  # horovod x2: noisy
    assert "0.75×" in section  # 14.33 / 19.0


def test_failures_environment_and_method(html_page):
    _, text = html_page
    problems = text.split('id="problems"')[1].split('id="environment"')[0]
    assert "failed" in problems and "skipped" in problems and "pip install" in problems
    env = text.split('id="environment"')[1].split('id="method"')[0]
    assert "2 different environments" in env and '<span class="diff">torch</span>' in env
    method = text.split('id="method"')[1]
    assert "Weak scaling" in method and "Strong scaling" in method and "warm-up" in method
    assert "Student-t" in method and "1 warm-up step, 3 trials of 1 step" in method


def test_every_result_string_is_escaped(html_page):
    _, text = html_page
    for hostile in (XSS_HOST, XSS_ERROR, XSS_TAIL):
        assert hostile not in text
        assert html.escape(hostile, quote=True) in text
    assert "<script" not in text.lower()
    assert "data-pwned" not in text.replace("&#x27;data-pwned&#x27;", "")


def test_self_contained(html_page):
    _, text = html_page
    sources = re.findall(r'<img src="([^"]+)"', text)
    assert len(sources) == 2  # efficiency and throughput
    for src in sources:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    assert not re.search(r'(src|href)="(?!data:|#)', text)  # nothing fetched from anywhere
    assert "@import" not in text and "url(" not in text
    assert "efficiency.png" not in text and "throughput.png" not in text


def test_report_command_writes_html(tmp_path, capsys):
    results = write_records(tmp_path / "sweep" / "results.jsonl", records_for_report())
    out = tmp_path / "out"
    assert cli.main(["report", str(results.parent), "--out", str(out)]) == 0
    assert f"wrote {out / 'report.html'}" in capsys.readouterr().out
    assert (out / "report.md").is_file()


def test_no_successful_runs_still_renders(tmp_path):
    report.write_all([fake_record(status="failed", error="boom")], [], tmp_path)
    text = (tmp_path / "report.html").read_text()
    assert "No successful runs." in text and "boom" in text


def test_records_of_other_kinds_do_not_break_the_reports(tmp_path):
    other = {"kind": "calibration", "status": "ok", "run_id": "ar-1", "env": {"hostname": "h"}}
    written = report.write_all([fake_record(), other], [], tmp_path)
    assert tmp_path / "report.html" in written
    assert "ar-1" in (tmp_path / "report.html").read_text()  # listed with its environment


def test_only_one_framework_says_so():
    text = html_report.page(report.build([fake_record(world_size=1), fake_record(world_size=2)], []), {})
    assert "Only one framework ran at each worker count (ddp)" in text


# ---------------------------------------------------------------- a real browser

CHECK_SCRIPT = """<script>(function () {
  var errors = [];
  window.addEventListener('error', function (e) {
    var t = e.target;
    errors.push(t && t.tagName ? 'resource failed: ' + t.tagName : 'script error: ' + e.message);
  }, true);
  window.addEventListener('load', function () {
    var images = Array.prototype.map.call(document.images, function (i) {
      return {width: i.naturalWidth, height: i.naturalHeight, complete: i.complete, alt: i.alt};
    });
    var marker = document.createElement('pre');
    marker.id = 'sb-browser-check';
    marker.textContent = JSON.stringify({images: images, errors: errors, title: document.title,
      scripts: document.scripts.length,
      pwned: document.documentElement.getAttribute('data-pwned')});
    document.body.appendChild(marker);
  });
})();</script>"""


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    profile = tmp_path / f"chromium-profile-{len(list(tmp_path.glob('chromium-profile-*')))}"
    return subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
         "--no-first-run", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", f"--user-data-dir={profile}", *args],
        capture_output=True, text=True, timeout=180)


def browser_check(page: Path, tmp_path: Path) -> dict:
    """Load a copy of the page with a probe script in headless Chromium; the probe's findings.

    The copy lies in another folder than the report's PNG files: the page must not need them.
    """
    text = page.read_text(encoding="utf-8")
    probe = tmp_path / "probe.html"
    probe.write_text(text.replace('<meta charset="utf-8">',
                                  '<meta charset="utf-8">' + CHECK_SCRIPT, 1), encoding="utf-8")
    proc = chromium(tmp_path, "--virtual-time-budget=10000", "--dump-dom", probe.as_uri())
    match = re.search(r'<pre id="sb-browser-check">(.*?)</pre>', proc.stdout, re.S)
    assert match, f"no probe result; chromium rc {proc.returncode}: {proc.stderr[-2000:]}"
    return json.loads(html.unescape(match.group(1)))


def assert_figures_loaded(found: dict, names: tuple[str, ...] = ("efficiency", "throughput")
                          ) -> None:
    assert found["errors"] == []
    assert [i["alt"] for i in found["images"]] == [f"{n} figure" for n in names], found["images"]
    for image in found["images"]:
        assert image["complete"] and image["width"] >= 400 and image["height"] >= 200, image
    assert found["scripts"] == 1  # the probe itself: the report runs none
    assert found["pwned"] is None and found["title"] == "scalebench report"


def assert_screenshot(page: Path, tmp_path: Path) -> Path:
    import matplotlib.image as mpimg

    shot = tmp_path / "report.png"
    proc = chromium(tmp_path, f"--screenshot={shot}", "--window-size=1200,2000", page.as_uri())
    assert shot.is_file(), proc.stderr[-2000:]
    pixels = mpimg.imread(shot)[..., :3]
    assert pixels.shape[:2] == (2000, 1200)
    ink = (pixels.mean(axis=2) < 0.9).mean()  # share of pixels that are not (near) white
    assert 0.01 < ink < 0.9, ink
    assert pixels.std() > 0.05
    return shot


@needs_chromium
def test_browser_loads_figures_and_runs_nothing_hostile(html_page, tmp_path):
    page, _ = html_page
    assert_figures_loaded(browser_check(page, tmp_path))
    assert_screenshot(page, tmp_path)


@needs_chromium
@pytest.mark.slow
def test_browser_on_a_real_sweep_report(tiny_sweep, tmp_path):
    page = tiny_sweep.parent / "report.html"  # written by the sweep itself
    assert page.is_file()
    found = browser_check(page, tmp_path)
    assert_figures_loaded(found)
    text = page.read_text(encoding="utf-8")
    for r in read_records(tiny_sweep):
        assert html.escape(r["env"]["hostname"]) in text
    assert_screenshot(page, tmp_path)


@needs_chromium
def test_browser_shows_the_mfu_table_and_figure(tmp_path):
    from tests.test_mfu import mfu_record

    records = [mfu_record((10.0,) * 3), mfu_record((16.0,) * 3, world_size=2)]
    report.write_all(records, [], tmp_path / "report")
    page = tmp_path / "report" / "report.html"
    assert_figures_loaded(browser_check(page, tmp_path), ("efficiency", "throughput", "mfu"))
    section = page.read_text(encoding="utf-8").split('id="mfu"')[1].split("<h2 ")[0]
    assert '<td class="num">80.0%</td>' in section  # MFU at 2 workers: 24 of 30 GFLOP/s
    assert_screenshot(page, tmp_path)
