"""history.html's efficiency charts: one inline SVG per model x framework (a history panel and a
framework), a line per worker count (and per step options or faults), efficiency against time,
each point's 95% interval, and each change of a line as a band over its commit range (red: a
regression, green: an improvement, grey and struck: accepted) with the change and the commits
written over it. Below each chart, its changes as a table. Plain SVG and HTML: no script, no
external reference; every string from the store goes through `esc`.

A chart holding a regression carries the class `has-regression`, each change row `regression`
or `not-regression`: the page's "regressions only" switch (CSS over a checkbox) hides the rest.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from scalebench.report.format import pct
from scalebench.report.html import esc
from scalebench.tracking import history
from scalebench.tracking import history_changes as hc

WIDTH, HEIGHT = 900, 300
LEFT, RIGHT, TOP, BOTTOM = 56, 190, 34, 40  # plot margins: the legend sits on the right
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf",
          "#bcbd22", "#7f7f7f", "#d62728")
CSS = """
.chart{margin:1rem 0 1.6rem}.chart svg{max-width:100%;height:auto;border:1px solid #eee}
.chart svg text{font:12px system-ui,sans-serif;fill:#333}.chart svg .axis{stroke:#888}
.chart svg .grid{stroke:#eee}.chart svg .band-regression{fill:#d62728;fill-opacity:.16}
.chart svg .band-improvement{fill:#2ca02c;fill-opacity:.16}
.chart svg .band-accepted{fill:#999;fill-opacity:.18}.chart svg .mark-accepted{fill:#666}
.chart svg .mark-regression{fill:#a11}.chart svg .mark-improvement{fill:#1e6b1e}
.switch{display:inline-block;margin:.3rem 0 .6rem;font-weight:600}
#only-regressions:checked ~ .chart:not(.has-regression){display:none}
#only-regressions:checked ~ .chart tr.not-regression{display:none}
#only-regressions:checked ~ table tr.not-regression{display:none}
"""


@dataclass(frozen=True)
class Chart:
    title: str  # the panel and the framework: "inception_v3 fp32 b2 75px cpu weak — ddp"
    series: tuple[hc.SeriesChanges, ...]  # efficiency series, one per line

    @property
    def changes(self) -> list[hc.Change]:
        return [c for s in self.series for c in s.changes]

    @property
    def has_regression(self) -> bool:
        return any(c.verdict == "regression" for c in self.changes)


def charts(found: hc.Changes) -> list[Chart]:
    """The efficiency series grouped by panel and framework, in the order detect lists them."""
    groups: dict[tuple, list[hc.SeriesChanges]] = {}
    for s in found.series:
        if s.metric == "efficiency" and s.points:
            groups.setdefault((s.panel, s.line[0]), []).append(s)
    return [Chart(f"{history.panel_title(panel)} — {framework}",
                  tuple(sorted(members, key=lambda s: (s.line[1] or 0, str(s.line[2:])))))
            for (panel, framework), members in groups.items()]


def line_name(line: tuple) -> str:
    """A line within a model x framework chart: "x4", "x8 (2 nodes) [fp16_allreduce]"."""
    _framework, workers, nodes, *label = line
    return (f"x{workers}" + (f" ({nodes} nodes)" if nodes and nodes > 1 else "")
            + (f" [{label[0]}]" if label else ""))


def accepted_text(c: hc.Change) -> str:
    """The accepted range and its reason (history accept), "" when no one accepted it."""
    return "" if c.accepted is None else c.accepted.text


class _Scale:
    def __init__(self, times: Sequence[datetime], values: Sequence[float]):
        self.t0, self.t1 = min(times).timestamp(), max(times).timestamp()
        low, high = min(values), max(values)
        pad = max((high - low) * 0.08, abs(high) * 0.01, 0.5)
        self.y0, self.y1 = low - pad, high + pad

    def x(self, when: datetime) -> float:
        span = self.t1 - self.t0
        frac = 0.5 if span <= 0 else (when.timestamp() - self.t0) / span
        return LEFT + frac * (WIDTH - LEFT - RIGHT)

    def y(self, value: float) -> float:
        return TOP + (self.y1 - value) / (self.y1 - self.y0) * (HEIGHT - TOP - BOTTOM)

    def ticks(self) -> list[float]:
        """Round values (1, 2 or 5 times a power of ten apart) inside the axis."""
        rough = (self.y1 - self.y0) / 5
        power = 10 ** math.floor(math.log10(rough))
        step = next(m * power for m in (1, 2, 5, 10) if m * power >= rough)
        first = math.ceil(self.y0 / step)
        return [k * step for k in range(first, math.floor(self.y1 / step) + 1)]


def _bounds(p: history.Point) -> tuple[float, float, float]:
    s = p.summary
    low = s.ci_low if s.ci_low is not None else s.mean
    high = s.ci_high if s.ci_high is not None else s.mean
    return 100 * s.mean, 100 * low, 100 * high


def _axes(scale: _Scale, times: Sequence[datetime]) -> list[str]:
    out = [f'<line class="axis" x1="{LEFT}" y1="{HEIGHT - BOTTOM}" x2="{WIDTH - RIGHT}" '
           f'y2="{HEIGHT - BOTTOM}"/>',
           f'<line class="axis" x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{HEIGHT - BOTTOM}"/>',
           f'<text x="12" y="{(TOP + HEIGHT - BOTTOM) / 2:.0f}" transform="rotate(-90 12 '
           f'{(TOP + HEIGHT - BOTTOM) / 2:.0f})" text-anchor="middle">efficiency (%)</text>']
    for value in scale.ticks():
        y = scale.y(value)
        out += [f'<line class="grid" x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}"/>',
                f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{value:g}</text>']
    first, last = min(times), max(times)
    ticks = [first] if first == last else [first + (last - first) * k / 3 for k in range(4)]
    for when in ticks:
        out.append(f'<text x="{scale.x(when):.1f}" y="{HEIGHT - BOTTOM + 16}" '
                   f'text-anchor="middle">{esc(when.strftime("%Y-%m-%d %H:%M"))}</text>')
    return out


def _band(c: hc.Change, scale: _Scale, slot: int) -> list[str]:
    """The change's commit range as a band from the last point before it to the first at the
    new level, labelled above the plot (slot: how many labels sit above it already)."""
    points = c.series.points
    x0, x1 = scale.x(points[c.point.index - 1].when), scale.x(points[c.point.stop].when)
    kind = "accepted" if accepted_text(c) else c.verdict
    words = (f"{line_name(c.series.line)}: {c.verdict} of {hc.change_text(c.point)} at "
             f"{c.commit_range}" + (f"; {accepted_text(c)}" if accepted_text(c) else ""))
    label = (f"{'✓ ' if kind == 'accepted' else ''}{c.point.change_pct:+.0f}% "
             f"{line_name(c.series.line)} {c.commit_range}")
    y = TOP - 6 - 13 * (slot % 2)
    return [f'<g class="change {esc(kind)}"><title>{esc(words)}</title>',
            f'<rect class="band-{esc(kind)}" x="{x0:.1f}" y="{TOP}" width="{max(x1 - x0, 3):.1f}" '
            f'height="{HEIGHT - TOP - BOTTOM}"/>',
            f'<text class="mark-{esc(kind)}" x="{(x0 + x1) / 2:.1f}" y="{y}" '
            f'text-anchor="middle"'
            + (' text-decoration="line-through"' if kind == "accepted" else "")
            + f">{esc(label)}</text></g>"]


def _line(s: hc.SeriesChanges, scale: _Scale, color: str, row: int) -> list[str]:
    coords = [(scale.x(p.when), *(scale.y(v) for v in _bounds(p))) for p in s.points]
    out = [f'<g class="line" data-workers="{esc(s.line[1])}">',
           f'<polyline fill="none" stroke="{color}" stroke-width="2" points="'
           + " ".join(f"{x:.1f},{y:.1f}" for x, y, _, _ in coords) + '"/>']
    for p, (x, y, low, high) in zip(s.points, coords, strict=True):
        mean, lo, hi = _bounds(p)
        tip = (f"{line_name(s.line)} {mean:.1f}% [{lo:.1f}, {hi:.1f}] at "
               f"{p.when.isoformat()}, commit {p.commit or 'unknown'}")
        out += [f'<line x1="{x:.1f}" y1="{low:.1f}" x2="{x:.1f}" y2="{high:.1f}" '
                f'stroke="{color}"/>',
                f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{color}">'
                f"<title>{esc(tip)}</title></circle>"]
    ly = TOP + 14 + 18 * row
    out += [f'<line x1="{WIDTH - RIGHT + 14}" y1="{ly - 4}" x2="{WIDTH - RIGHT + 34}" '
            f'y2="{ly - 4}" stroke="{color}" stroke-width="2"/>',
            f'<text x="{WIDTH - RIGHT + 40}" y="{ly}">{esc(line_name(s.line))}</text></g>']
    return out


def svg(chart: Chart) -> str:
    times = [p.when for s in chart.series for p in s.points]
    values = [v for s in chart.series for p in s.points for v in _bounds(p)]
    scale = _Scale(times, values)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
             f'width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="{esc(chart.title)}">',
             *_axes(scale, times)]
    for slot, c in enumerate(chart.changes):
        parts += _band(c, scale, slot)
    for row, s in enumerate(chart.series):
        parts += _line(s, scale, COLORS[row % len(COLORS)], row)
    parts.append("</svg>")
    return "\n".join(parts)


def _table(chart: Chart) -> str:
    if not chart.changes:
        return '<p class="muted not-regression">No change in these lines.</p>'
    rows = []
    for c in chart.changes:
        kind = "regression" if c.verdict == "regression" else "not-regression"
        verdict = (f"accepted {c.verdict}" if accepted_text(c) else c.verdict) + \
            (" (new)" if c.new and c.verdict == "regression" and not accepted_text(c) else "")
        rows.append(f'<tr class="{kind}"><td>{esc(verdict)}</td>'
                    f"<td>{esc(line_name(c.series.line))}</td><td>{esc(c.commit_range)}</td>"
                    f'<td class="num">{esc(hc.change_text(c.point))}</td>'
                    f"<td>{esc(pct(c.point.before.summary.mean))} → "
                    f"{esc(pct(c.point.after.summary.mean))}</td>"
                    f"<td>{esc(accepted_text(c) or '–')}</td></tr>")
    return ("<table><thead><tr><th>verdict</th><th>workers</th><th>commits</th><th>change</th>"
            "<th>level</th><th>accepted</th></tr></thead><tbody>" + "".join(rows)
            + "</tbody></table>")


def section(found: hc.Changes) -> str:
    """The charts with the "regressions only" switch before them (its CSS acts on siblings)."""
    drawn = charts(found)
    if not drawn:
        return "<p>No efficiency series: the store holds no multi-worker run with its " \
               "one-worker baseline.</p>"
    out = ['<p class="sub">Scaling efficiency per sweep with its 95% interval, one line per '
           "worker count; a band marks each change over its commit range (red: regression, "
           "green: improvement, grey and struck through: accepted).</p>"]
    for chart in drawn:
        out.append(f'<figure class="chart{" has-regression" if chart.has_regression else ""}">'
                   f"<figcaption><b>{esc(chart.title)}</b></figcaption>{svg(chart)}"
                   f"{_table(chart)}</figure>")
    return "\n".join(out)
