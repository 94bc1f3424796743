"""history.html: the trend figures and the changes of a history store as one
self-contained page, in report.html's look (its CSS and helpers; figures as base64 PNG, the
efficiency charts per model x framework as inline SVG (history_charts), no script, no network).
A "regressions only" switch (a checkbox read by CSS alone) hides the charts without a
regression and every change that is not one. Every string from the store (commits,
configurations) goes through `esc`."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from scalebench.report import history_charts
from scalebench.report.html import CSS, esc, image_tag, raw_table
from scalebench.tracking import history_changes as hc

TITLE = "scalebench history"
CAPTIONS = {
    "history-throughput": "Images per second (all workers) per sweep, with 95% intervals; "
                          "dashed: the mean of each flat stretch between changes, and a slope "
                          "across each gradual change; triangles: changes (down: regression, "
                          "up: improvement).",
    "history-efficiency": "Scaling efficiency per sweep against the same launch of the "
                          "one-worker run, with 95% intervals; dashed: stretch means and the "
                          "slopes of gradual changes; triangles: changes.",
}
SECTIONS = (("changes", "Changes"), ("charts", "Efficiency by model and framework"),
            ("figures", "Trends"), ("series", "Series"), ("method", "Method"))
SWITCH = ('<input type="checkbox" id="only-regressions">'
          '<label class="switch" for="only-regressions"> regressions only</label>')


def _verdict(c: hc.Change) -> str:
    if c.accepted is not None:
        return f'<span class="badge" title="{esc(c.accepted.text)}">accepted {esc(c.verdict)}</span>'
    if c.verdict == "regression":
        css = "bad" if c.new else "noisy"
        return f'<span class="badge {css}">{esc(c.verdict)}{" (new)" if c.new else ""}</span>'
    return f'<span class="badge good">{esc(c.verdict)}</span>'


def _changes(c: hc.Changes) -> str:
    if not c.changes:
        return "<p>No change in any series.</p>"
    rows = []
    for x in c.changes:
        cells = [esc(v) for v in hc.cells(x)]
        cells[0] = _verdict(x)
        rows.append(cells)
    kinds = ["regression" if x.verdict == "regression" else "not-regression" for x in c.changes]
    return raw_table(hc.HEADER, rows, frozenset({6, 7, 8}), row_classes=kinds)


def _figures(figures: Mapping[str, bytes]) -> str:
    if not figures:
        return "<p>No figures: no successful runs in the store.</p>"
    return "\n".join(f'<figure id="fig-{esc(name)}">{image_tag(png, name + " figure")}'
                     f"<figcaption>{esc(CAPTIONS.get(name, name))}</figcaption></figure>"
                     for name, png in figures.items())


def _series(c: hc.Changes) -> str:
    rows = []
    for s in c.series:
        latest = s.detection.segments[-1] if s.detection.segments else None
        rows.append([esc(s.metric), esc(s.title), esc(len(s.points)),
                     esc(len(s.detection.change_points)),
                     esc(hc.value_text(s.metric, latest)) if latest else "–",
                     esc(s.detection.too_short or hc.noise_text(s.detection))])
    return raw_table(["metric", "configuration", "points", "changes", "latest level",
                      "noise"], rows, frozenset({2, 3, 4}))


def _method(c: hc.Changes) -> str:
    return (f"<p>A point is one sweep. {esc(hc.METHOD)} A change holds at alpha "
            f"{esc(f'{c.alpha:g}')} when it moves the level by at least "
            f"{esc(f'{c.min_magnitude:g}')}%. A regression that ends among the last "
            f"{esc(c.last)} points is new and fails <code>history detect</code>. Commits A..B: "
            "the last commit measured before the change and the first at the new level (of a "
            "gradual change: every commit it took).</p>")


def page(c: hc.Changes, figures: Mapping[str, bytes]) -> str:
    """figures: name -> PNG bytes, embedded as base64."""
    failed = bool(c.new_regressions)
    summary = (f'<p><span class="badge {"bad" if failed else "good"}">'
               f'{"regression" if failed else "passed"}</span> {esc(hc.summary_line(c))}</p>')
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f"<title>{TITLE}</title><style>{CSS}{history_charts.CSS}</style></head><body>",
             f"<h1>{TITLE}</h1>", f'<p class="sub">{esc(c.label)}</p>', summary,
             "<nav>" + "".join(f'<a href="#{key}">{title}</a>' for key, title in SECTIONS)
             + "</nav>", SWITCH]
    bodies = {"changes": _changes(c), "charts": history_charts.section(c),
              "figures": _figures(figures), "series": _series(c), "method": _method(c)}
    for key, title in SECTIONS:
        parts += [f'<h2 id="{key}">{title}</h2>', bodies[key]]
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def write(c: hc.Changes, out_dir: Path, figure_paths: list[Path]) -> Path:
    """history.html next to the figures it embeds."""
    figures = {p.stem: p.read_bytes() for p in figure_paths}
    path = out_dir / "history.html"
    out_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(page(c, figures), encoding="utf-8")
    return path
