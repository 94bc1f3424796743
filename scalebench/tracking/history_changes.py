"""Changes in a history store: every configuration series of every metric (history.trends,
the history's own keys) through changepoints.detect, with the commit range of each change (a
step or a gradual change) and whether it is new (it ends among the last K points). `history
detect`, `history plot` and history.html all read this one result; rendering as text and
markdown is separate from finding.

Both metrics are higher-is-better: a decrease is a regression, an increase an improvement.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from scalebench.analysis import compare
from scalebench.hardware import topology
from scalebench.hardware.topology import UNKNOWN
from scalebench.report.format import with_interval
from scalebench.spec.errors import UserError
from scalebench.tracking import accepted, changepoints, history

_md = compare.md_cell  # one escaping for every markdown table

LAST = 5  # a regression that ends among the last LAST points is new: it fails the gate
METHOD = ("A change is a step or a gradual change (a slide over several points) of a series' "
          "level between two flat stretches. Neighbouring points are not independent: the "
          "noise is fitted as AR(1) (each point carries part of the one before), and a change "
          "holds only when the difference of the levels on either side stands out from that "
          "correlated noise (a t-test with its standard error). A level that wanders within its "
          "noise is no change. Percentages are against |the level before|.")


@dataclass(frozen=True)
class Change:
    series: SeriesChanges
    point: changepoints.ChangePoint
    accepted: accepted.Accepted | None = None  # the entry that says it is known (history accept)

    @property
    def verdict(self) -> str:
        return "regression" if self.point.change_pct < 0 else "improvement"

    @property
    def commit_before(self) -> str:
        return self.series.points[self.point.index - 1].commit or "unknown"

    @property
    def commit_after(self) -> str:
        """The first commit at the new level (of a gradual change: where it ends)."""
        return self.series.points[self.point.stop].commit or "unknown"

    @property
    def commit_range(self) -> str:
        """git's A..B: the commits after the last one measured before, up to the first at the
        new level (a gradual change: every commit it took)."""
        return f"{self.commit_before}..{self.commit_after}"

    @property
    def when(self) -> str:
        """When it was first seen: the first point that moved."""
        return self.series.points[self.point.index].when.isoformat()

    @property
    def new(self) -> bool:
        """It ends among the last K points."""
        return self.point.stop >= len(self.series.points) - self.series.last

    @property
    def shape(self) -> str:
        p = self.point
        return f"gradual, {p.stop - p.index + 1} points" if p.gradual else "step"

    @property
    def headline(self) -> str:
        """"gradual regression of -19.0% over c01..c08" or "regression of -10.0% at c04..c05"."""
        p = self.point
        return (f"{'gradual ' if p.gradual else ''}{self.verdict} of {change_text(p)} "
                f"{'over' if p.gradual else 'at'} {self.commit_range}")

    @property
    def only_disturbed(self) -> bool:
        """Every point at one of the two levels was disturbed: only disturbed samples show it."""
        p, points = self.point, self.series.points
        return any(all(x.disturbed for x in side) for side in (
            points[p.before.start:p.before.stop], points[p.after.start:p.after.stop]))

    @property
    def disturbed_note(self) -> str:
        """The disturbed points either side of the change, named with their cause ("" when
        none was)."""
        p, points = self.point, self.series.points
        parts = []
        for label, side in (("before", points[p.before.start:p.before.stop]),
                            ("after", points[p.after.start:p.after.stop])):
            hit = [x for x in side if x.disturbed]
            if hit:
                parts.append(f"{len(hit)} of {len(side)} points {label} disturbed ("
                             + "; ".join(f"{x.sweep_id or x.commit or 'a point'}: "
                                         f"{'; '.join(x.disturbed)}" for x in hit[:2])
                             + ("; ..." if len(hit) > 2 else "") + ")")
        if not parts:
            return ""
        lead = f"only disturbed points show this {self.verdict}: " if self.only_disturbed else ""
        return lead + "; ".join(parts)

    @property
    def topology_note(self) -> str:
        """The points either side of the change were measured on different topologies (a
        change of hardware, not of code, may explain it): that, in words; "" otherwise."""
        before = {p.topology for p in self.series.points[:self.point.index]} - {UNKNOWN}
        after = {p.topology for p in self.series.points[self.point.index:]} - {UNKNOWN}
        if not topology.differ(" | ".join(sorted(before)), " | ".join(sorted(after))):
            return ""
        return history.topology_change(" | ".join(sorted(before)), " | ".join(sorted(after))
                                       ).replace("the previous point", "before the change")


@dataclass(frozen=True)
class SeriesChanges:
    metric: str
    panel: tuple
    line: tuple
    points: tuple[history.Point, ...]
    detection: changepoints.Detection
    last: int
    acceptance: tuple[accepted.Accepted | None, ...] = ()  # per change point: who accepted it

    @property
    def title(self) -> str:
        return f"{history.panel_title(self.panel)} {history.line_label(self.line)}"

    @property
    def changes(self) -> list[Change]:
        marks = self.acceptance or (None,) * len(self.detection.change_points)
        return [Change(self, c, a) for c, a in zip(self.detection.change_points, marks,
                                                   strict=True)]


@dataclass(frozen=True)
class Changes:
    series: tuple[SeriesChanges, ...]
    metrics: tuple[str, ...]
    alpha: float
    min_magnitude: float
    last: int
    label: str = "history"

    @property
    def changes(self) -> list[Change]:
        return [c for s in self.series for c in s.changes]

    @property
    def new_regressions(self) -> list[Change]:
        """Regressions among the last K points that no one accepted: they fail detect."""
        return [c for c in self.changes if c.verdict == "regression" and c.new and not c.accepted]

    @property
    def accepted(self) -> list[Change]:
        return [c for c in self.changes if c.accepted]

    @property
    def too_short(self) -> list[SeriesChanges]:
        return [s for s in self.series if s.detection.too_short]

    @property
    def exit_code(self) -> int:
        return 1 if self.new_regressions else 0


def check_settings(alpha: float, min_magnitude: float, last: int) -> None:
    if not 0 < alpha < 1:
        raise UserError(f"--alpha: must lie between 0 and 1, not {alpha:g}")
    if not math.isfinite(min_magnitude) or min_magnitude < 0:
        raise UserError(f"--min-magnitude: must be a percentage >= 0, not {min_magnitude:g}")
    if last < 1:
        raise UserError(f"--last: must be a number of points >= 1, not {last}")


def noise_text(d: changepoints.Detection) -> str:
    """The noise a series' changes were judged against, in words."""
    n = d.noise
    if n is None or not d.segments:
        return ""
    level = abs(d.segments[0].summary.mean)
    sd = f"{100 * n.sd / level:.1f}%" if level else f"{n.sd:.3g}"
    drift = (f"{100 * d.drift / level:+.2f}%" if level else f"{d.drift:+.3g}") if d.drift else ""
    return (f"noise {sd} a point, neighbour correlation {n.phi:.2f}"
            + (" (raised to the spread of launches)" if n.floor else "")
            + (f"; a drift of {drift} a point, taken out" if drift else ""))


def series_values(points: Sequence[history.Point]) -> list[tuple[float, ...]]:
    """Per point, its per-launch values (a single launch: its mean over trials)."""
    return [p.samples.process_values for p in points]


def find(rows: Iterable[dict], metrics: Sequence[str] = compare.METRICS,
         alpha: float = changepoints.ALPHA, min_magnitude: float = changepoints.MIN_MAGNITUDE,
         last: int = LAST, label: str = "history", accepts: Sequence[accepted.Accepted] = ()
         ) -> Changes:
    """Change points of every series of each metric; nothing is printed. accepts: the store's
    accepted changes (accepted.from_entries); a change within one is shown, never new."""
    check_settings(alpha, min_magnitude, last)
    metrics = compare.parse_metrics(metrics)
    rows = list(rows)
    order = accepted.commit_order(rows) if accepts else {}
    found = []
    for metric in metrics:
        tr = history.trends(rows, metric)
        for panel in sorted(tr, key=lambda k: tuple(str(v) for v in k)):
            lines = tr[panel]
            for line in sorted(lines, key=lambda k: tuple(str(v) for v in k)):
                points = tuple(lines[line])
                try:
                    detection = changepoints.detect(series_values(points), alpha, min_magnitude)
                except changepoints.BadValue as exc:  # history.trends refuses these first
                    p = points[exc.point]
                    raise UserError(
                        f"history store: {metric} of {history.panel_title(panel)} "
                        f"{history.line_label(line)} at commit {p.commit or 'unknown'}"
                        + (f", sweep {p.sweep_id}" if p.sweep_id else "")
                        + f": value {exc.value!r} is not a finite number") from None
                series = SeriesChanges(metric, panel, line, points, detection, last)
                if accepts:
                    series = SeriesChanges(metric, panel, line, points, detection, last, tuple(
                        accepted.covering(accepts, c.commit_before, c.commit_after, series.title,
                                          order) for c in series.changes))
                found.append(series)
    return Changes(tuple(found), metrics, alpha, min_magnitude, last, label)


def by_line(changes: Changes, metric: str) -> dict[tuple, changepoints.Detection]:
    """(panel, line) -> detection, for history.plot_metric."""
    return {(s.panel, s.line): s.detection for s in changes.series if s.metric == metric}


# ---------------------------------------------------------------- rendering (separate from finding)

def value_text(metric: str, s: changepoints.Segment) -> str:
    m = s.summary
    return with_interval(m.mean, m.ci_low, m.ci_high, metric == "efficiency", m.too_noisy)


def test_text(c: Change) -> str:
    d = c.point.difference
    return f"{d.test} p={d.p_value:.3g}" if d.p_value is not None else d.test


def change_text(p: changepoints.ChangePoint) -> str:
    """"-19.0% [-23.1, -14.9]": the change and its interval, and how the percentage was taken
    where the level before is not positive."""
    low, high = p.ci_pct
    ci = "" if math.isnan(low) else f" [{low:+.1f}, {high:+.1f}]"
    return f"{p.change_pct:+.1f}%{ci}" + (f" ({p.basis})" if p.basis else "")


def cells(c: Change) -> list[str]:
    p = c.point
    verdict = f"accepted {c.verdict}" if c.accepted else \
        c.verdict.upper() if c.verdict == "regression" else c.verdict
    if c.only_disturbed:
        verdict += " (only disturbed points)"
    return [verdict, "new" if c.new else "old", c.series.metric, c.series.title, c.commit_range, c.shape,
            f"{value_text(c.series.metric, p.before)} ({p.before.points} pts)",
            f"{value_text(c.series.metric, p.after)} ({p.after.points} pts)",
            change_text(p), test_text(c)]


HEADER = ["verdict", "status", "metric", "configuration", "commits", "shape", "before", "after",
          "change", "test"]


def summary_line(c: Changes) -> str:
    found = c.changes
    regressions = sum(1 for x in found if x.verdict == "regression")
    gradual = sum(1 for x in found if x.point.gradual)
    counts = (f"{len(c.series)} series, {len(found)} change{'s' if len(found) != 1 else ''}"
              f" ({regressions} regression{'s' if regressions != 1 else ''}, "
              f"{len(found) - regressions} improvement{'s' if len(found) - regressions != 1 else ''}"
              + (f"; {gradual} gradual" if gradual else "") + ")"
              + (f", {len(c.too_short)} too short" if c.too_short else ""))
    counts += f", {len(c.accepted)} accepted" if c.accepted else ""
    new = len(c.new_regressions)
    outcome = (f"FAILED: {new} new regression{'s' if new != 1 else ''} among the last {c.last} "
               "points" if new else f"passed: no regression among the last {c.last} points")
    return f"{outcome} ({counts}; alpha {c.alpha:g}, min magnitude {c.min_magnitude:g}%)"


def _table_rows(c: Changes) -> list[list[str]]:
    return [cells(x) for x in c.changes]


def render_text(c: Changes) -> str:
    lines = [f"scalebench history detect: {c.label} (metrics {', '.join(c.metrics)}; alpha "
             f"{c.alpha:g}, min magnitude {c.min_magnitude:g}%, new = among the last {c.last} "
             "points)"]
    for s in c.series:
        if s.detection.too_short:
            lines.append(f"  {s.metric} of {s.title}: {s.detection.too_short}")
        else:
            k = len(s.detection.change_points)
            lines.append(f"  {s.metric} of {s.title}: {len(s.points)} points, {k} change"
                         f"{'s' if k != 1 else ''} ({noise_text(s.detection)})")
    rows = _table_rows(c)
    if rows:
        lines += compare.aligned([HEADER] + rows)
    lines.append(summary_line(c))
    for x in c.new_regressions:
        lines.append(f"  {x.series.metric} of {x.series.title}: {x.headline} (first seen "
                     f"{x.when}; {test_text(x)})")
    lines += [f"  note: {x.series.metric} of {x.series.title} at {x.commit_range}: "
              f"{x.topology_note}" for x in c.changes if x.topology_note]
    lines += [f"  note: {x.series.metric} of {x.series.title} at {x.commit_range}: "
              f"{x.disturbed_note}" for x in c.changes if x.disturbed_note]
    lines += [f"  {x.series.metric} of {x.series.title} at {x.commit_range}: {x.accepted.text}"
              for x in c.accepted]
    return "\n".join(lines)


def render_markdown(c: Changes) -> str:
    lines = ["## scalebench history detect", "", f"**{_md(summary_line(c))}**", "",
             f"Store `{_md(c.label)}`. {_md(METHOD)} A change holds at alpha {c.alpha:g} "
             f"when it moves the level by at least {c.min_magnitude:g}%. *new*: it ends among "
             f"the last {c.last} points.", ""]
    rows = _table_rows(c)
    if rows:
        lines += ["| " + " | ".join(HEADER) + " |", "|---|---|---|---|---|---|---:|---:|---:|---|"]
        for x, cells_ in zip(c.changes, rows, strict=True):
            if x.verdict == "regression" and x.new:
                cells_[0] = f"**{cells_[0]}**"
            lines.append("| " + " | ".join(_md(v) for v in cells_) + " |")
    else:
        lines.append("No change in any series.")
    notes = [f"- {_md(x.series.title)} at {_md(x.commit_range)}: {_md(x.topology_note)}"
             for x in c.changes if x.topology_note]
    notes += [f"- {_md(x.series.metric)} of {_md(x.series.title)} at {_md(x.commit_range)}: "
              f"{_md(x.disturbed_note)}" for x in c.changes if x.disturbed_note]
    notes += [f"- {_md(x.series.metric)} of {_md(x.series.title)} at {_md(x.commit_range)}: "
              f"{_md(x.accepted.text)}" for x in c.accepted]
    if notes:
        lines += ["", *notes]
    if c.too_short:
        lines += [""] + [f"- {_md(s.metric)} of {_md(s.title)}: {_md(s.detection.too_short)}"
                         for s in c.too_short]
    lines.append("")
    return "\n".join(lines)
