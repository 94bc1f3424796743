"""history.html: self-contained, escaped, and loaded in headless Chromium (skipped without it)."""

from __future__ import annotations

import html
import re

import pytest

from scalebench import cli
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
