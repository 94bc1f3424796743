"""Results over time: a JSONL store with one row per run, and trend figures per configuration.

Each row carries its own format version (`history_version`), the git commit the run measured,
the run's environment, its launch (`repeat` of `repeats`, `order_seed`), its per-trial
throughputs and (when the same results set holds the one-worker run) its efficiency against the
same launch of that run: `efficiency` (ratio of the means), `efficiency_samples` (trial i against
trial i, so they carry the baseline's variation) and `trial_efficiency` (each trial against the
one-worker launch's mean, kept as rows always had it). The launches of one sweep are one point
of a trend, judged on per-process values as compare judges them: rows of one `sweep_id` (the
records' own, kept by --resume); rows written before sweep ids, by commit, order seed and repeat
count, a new sweep starting wherever a repeat index comes round again. Rows keep the records'
warnings (skipped fp16 steps, a diverged loss) and faults (a configuration of its own, drawn as
its own line); a point carries its rows' warnings as notes. `plot` draws one PNG per metric:
given changes (history_changes), the flat stretches between them with their means and the slopes
of gradual changes; optionally each point that compare would call a regression against the
previous point of the same configuration.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from scalebench import frameworks
from scalebench.analysis import aggregate, compare, disturbance, stats
from scalebench.hardware import topology
from scalebench.records import validity
from scalebench.spec import identity
from scalebench.spec.errors import UserError
from scalebench.tracking import store, store_file

HISTORY_VERSION = store.HISTORY_VERSION  # the format and its history: tracking/store.py
METRICS = compare.METRICS


def _row_id(record: dict) -> str:
    key = identity.key_dict(identity.config_key(record))
    # fields at their defaults leave the id rows had before they joined the key
    if key["step_options"] == "{}":
        del key["step_options"]
    if key["tf32"] is None:
        del key["tf32"]
    if key["faults"] is None:
        del key["faults"]
    basis = json.dumps([list(key.values()), record.get("timestamp"),
                        (record.get("env") or {}).get("hostname"), record.get("run_id"),
                        record.get("status"), record.get("trial_images_per_sec")],
                       sort_keys=True, default=str)
    return hashlib.sha256(basis.encode()).hexdigest()[:16]


def _partner(record: dict, same: aggregate.Runs, one: aggregate.Runs) -> dict | None:
    """The one-worker launch a counted launch pairs with, as aggregate.efficiency_samples pairs
    them (so compare and history take the same pairs): the same repeat index where the two
    share any, else the same position in repeat order; None when it has no partner."""
    n, base = same.by_repeat(), one.by_repeat()
    if set(n) & set(base):
        return base.get(aggregate.repeat_of(record))
    pairs = dict(zip((id(r) for r in same.ok), one.ok, strict=False))
    return pairs.get(id(record))


def _efficiency(record: dict, runs: compare.RunIndex) -> dict:
    """A counted launch's efficiency fields against the launch of its one-worker run it pairs
    with (_partner); {} when there is none."""
    key = identity.config_key(record)
    same, one = runs.get(key), runs.get(identity.baseline_key(record))
    if record["world_size"] == 1 or same is None or not any(r is record for r in same.ok) \
            or one is None or not one.ok:
        return {}
    base = _partner(record, same, one)
    if base is None:
        return {}
    trials, base_trials = record["trial_images_per_sec"], base["trial_images_per_sec"]
    paired = stats.paired_efficiency([(trials, base_trials)], record["world_size"])
    base_mean = stats.summarize(base_trials).mean
    return {"efficiency": paired.process_values[0], "efficiency_samples": list(paired.trials),
            "trial_efficiency": stats.efficiency_samples(trials, record["world_size"], base_mean)}


def rows_from_records(records: list[dict], commit: str | None = None, source: str = "",
                      branch: str | None = None) -> list[dict]:
    """One history row per train record; efficiency is taken within the same results set.
    branch: the branch the sweep measured (None: it counts for any branch)."""
    runs = compare.index_runs(records)
    added_at = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    rows = []
    for r in records:
        if r.get("kind") != "train":
            continue
        key = identity.config_key(r)
        env = r.get("env") or {}
        row = {
            "history_version": HISTORY_VERSION,
            "id": _row_id(r),
            "added_at": added_at,
            "timestamp": r.get("timestamp"),
            "commit": commit or env.get("git_commit"),
            "branch": branch,
            "source": source,
            "run_id": r.get("run_id"),
            **identity.key_dict(key),
            "global_batch": r.get("global_batch"),
            "options": frameworks.step_options(r.get("framework"), r.get("options")),
            "repeat": aggregate.repeat_of(r), "repeats": r.get("repeats") or 1,
            "order_seed": r.get("order_seed"), "sweep_id": r.get("sweep_id"),
            "status": r.get("status"),
            "error": r.get("error"),
            "trial_images_per_sec": None, "images_per_sec": None,
            "trial_efficiency": None, "efficiency_samples": None, "efficiency": None,
            "warnings": [str(w) for w in r.get("warnings") or ()],
            "env": env,
        }
        if disturbance.recorded(r):  # "" quiet; absent: written before it was read
            row["disturbance"] = disturbance.record_text(r)
        if r.get("status") == "ok":
            row["trial_images_per_sec"] = list(r["trial_images_per_sec"])
            row["images_per_sec"] = stats.summarize(r["trial_images_per_sec"]).mean
            row.update(_efficiency(r, runs))
        rows.append(row)
    return rows


ACCEPTED = "accepted"  # the kind of an accepted-change entry (history accept): not a run


def split_entries(entries: list[dict]) -> tuple[list[dict], list[dict]]:
    """(run rows, accepted-change entries) of a store's entries, each in store order."""
    accepted = [e for e in entries if e.get("kind") == ACCEPTED]
    return [e for e in entries if e.get("kind") != ACCEPTED], accepted


def load_store(path: Path | store.Store) -> tuple[list[dict], list[str]]:
    """Run rows of the store (accepted-change entries left out); unknown format versions are
    refused, malformed lines reported."""
    where = store_file.FileStore(path) if isinstance(path, Path) else path
    entries, problems = where.entries()
    return split_entries(entries)[0], problems


def add(where: Path | store.Store, records: list[dict], commit: str | None = None,
        source: str = "", branch: str | None = None) -> tuple[int, int]:
    """Add rows for records not yet in the store (by row id). Returns (added, already there)."""
    target = store_file.FileStore(where) if isinstance(where, Path) else where
    rows = rows_from_records(records, commit, source, branch)
    return target.add_entries(rows, add_message(rows))


def add_message(rows: list[dict]) -> str:
    """A git store's commit message for added rows: the sweeps and the commits they measured."""
    sweeps = sorted({str(r["sweep_id"]) for r in rows if r.get("sweep_id")})
    commits = sorted({str(r["commit"]) for r in rows if r.get("commit")})
    return (f"history add: {len(rows)} run{'s' if len(rows) != 1 else ''}; "
            f"sweep {', '.join(sweeps) or 'unknown'}; commit {', '.join(commits) or 'unknown'}")


# ---------------------------------------------------------------- trends

@dataclass(frozen=True)
class Point:
    when: datetime
    commit: str | None
    samples: stats.Samples  # the launches of one sweep (one process for a single launch)
    judgement: compare.Judgement | None  # against the previous point of the same line
    sweep_id: str | None = None
    warnings: tuple[str, ...] = ()  # its rows' warnings (skipped fp16 steps, a diverged loss)
    caveat: str = ""  # a judged change from one launch on either side holds within them only
    topology: str = ""  # its rows' topology (topology.signature), " | " between several
    topology_note: str = ""  # the topology differs from the previous point's: that, in words
    disturbed: tuple[str, ...] = ()  # its rows' disturbances (analysis/disturbance.py)

    @property
    def notes(self) -> tuple[str, ...]:
        """What a verdict on this point must say besides the change."""
        return ((self.caveat,) if self.caveat else ()) + \
            ((self.topology_note,) if self.topology_note else ()) + self.warnings

    @property
    def summary(self) -> stats.Summary:
        return self.samples.summary()


def _when(row: dict) -> datetime:
    for text in (row.get("timestamp"), row.get("added_at")):
        try:
            return _stamp(text)
        except (TypeError, ValueError):
            continue
    return datetime.fromtimestamp(0).astimezone()


def _stamp(text: str) -> datetime:
    """A record's time, %Y-%m-%dT%H:%M:%S%z; that exact shape through fromisoformat, which reads
    it about 100 times faster than strptime (pruning a large store reads every row's)."""
    if len(text) == 24 and text[10] == "T" and text[19] in "+-":
        return datetime.fromisoformat(text)
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S%z")


def row_time(row: dict) -> datetime:
    """When a row was measured: its timestamp, else when it was added (epoch without either)."""
    return _when(row)


def panel_key(row: dict) -> tuple:
    """A trend panel: one scaling series (identity.series_key). Rows written before
    `global_batch` was kept get per-worker batch x workers."""
    if row.get("global_batch") is None and row.get("batch_size") is not None:
        row = {**row, "global_batch": row["batch_size"] * (row.get("world_size") or 1)}
    return identity.series_key(row)


def line_key(row: dict) -> tuple:
    """A line within a panel: (framework, workers, nodes), and in words as a fourth item the
    step options that differ from the framework's defaults and the injected faults, if any."""
    label = ", ".join(x for x in (identity.step_label(row), identity.faults_label(row)) if x)
    return (row.get("framework"), row.get("world_size"), row.get("nodes")) + \
        ((label,) if label else ())


def sweep_groups(rows: Iterable[dict]) -> list[list[dict]]:
    """The rows of one line, grouped into sweeps: one group per `sweep_id`. A row written
    before sweep ids joins the open group of its (commit, order seed, repeat count) when it has
    K >= 2 launches and its repeat index is not yet in that group (in time order: a sweep has
    each launch once); else it starts a sweep of its own."""
    groups: dict[tuple, list[dict]] = {}
    open_group: dict[tuple, tuple] = {}
    for row in sorted(rows, key=_when):  # stable: store order for equal times
        if row.get("sweep_id"):
            groups.setdefault(("id", row["sweep_id"]), []).append(row)
            continue
        if (row.get("repeats") or 1) < 2 or row.get("order_seed") is None:
            groups[("row", id(row))] = [row]
            continue
        launch = (row.get("commit"), row.get("order_seed"), row.get("repeats"))
        current = open_group.get(launch)
        if current is None or any(aggregate.repeat_of(r) == aggregate.repeat_of(row)
                                  for r in groups[current]):
            current = open_group[launch] = ("launches", id(row))
        groups.setdefault(current, []).append(row)
    return list(groups.values())


def _check_values(rows: list[dict], metric: str, panel: tuple, line: tuple) -> None:
    """A missing, NaN, infinite, zero or negative value in a point's rows (records.validity's
    rule for a measured value) is a UserError naming the series (metric and configuration) and
    the point (commit, sweep): no trend or change is drawn through a broken measurement."""
    for row in rows:
        if metric == "throughput":
            fields = ("trial_images_per_sec",)
        else:
            fields = ("efficiency_samples",) if row.get("efficiency_samples") else \
                ("trial_efficiency",)
        values = [(f, v) for f in fields for v in row.get(f) or ()]
        if metric == "efficiency" and row.get("efficiency") is not None:
            values.append(("efficiency", row["efficiency"]))
        for field, value in values:
            if not validity.is_positive(value):
                where = (f"commit {row.get('commit') or 'unknown'}"
                         + (f", sweep {row['sweep_id']}" if row.get("sweep_id") else "")
                         + f", {row.get('timestamp') or row.get('added_at') or 'no time'}")
                raise UserError(f"history store: {metric} of {panel_title(panel)} "
                                f"{line_label(line)} at {where}: {field} holds {value!r}, not a "
                                "finite number above 0; remove or correct that row")


def _samples(rows: list[dict], metric: str) -> stats.Samples:
    """One point's samples: each row is one launch (process)."""
    if metric == "throughput":
        return stats.Samples.of_processes([row["trial_images_per_sec"] for row in rows])
    per_row = [row.get("efficiency_samples") or row["trial_efficiency"] for row in rows]
    values = [row["efficiency"] if row.get("efficiency") is not None
              else stats.summarize(samples).mean for row, samples in zip(rows, per_row,
                                                                         strict=True)]
    return stats.Samples(tuple(float(v) for s in per_row for v in s), tuple(values),
                         tuple(len(s) for s in per_row))


def trends(rows: Iterable[dict], metric: str, threshold: float = 5.0, alpha: float = 0.05
           ) -> dict[tuple, dict[tuple, list[Point]]]:
    """panel key -> line key -> points in time order, each judged against the one before."""
    fields = ("trial_images_per_sec",) if metric == "throughput" else \
        ("efficiency_samples", "trial_efficiency")
    series: dict[tuple, dict[tuple, list[dict]]] = {}
    for row in rows:
        if row.get("status") != "ok" or not any(row.get(f) for f in fields):
            continue
        series.setdefault(panel_key(row), {}).setdefault(line_key(row), []).append(row)
    out: dict[tuple, dict[tuple, list[Point]]] = {}
    for panel, lines in series.items():
        for line, members_of_line in lines.items():
            # stable: store order for equal times
            items = sorted(((min(_when(r) for r in members), members)
                            for members in sweep_groups(members_of_line)), key=lambda x: x[0])
            points: list[Point] = []
            for when, members in items:
                _check_values(members, metric, panel, line)
                samples = _samples(members, metric)
                judged, caveat = None, ""
                if points:
                    judged = compare.judge(points[-1].samples, samples, threshold, alpha)
                    caveat = compare.caveat(judged, points[-1].samples, samples, "the code")
                shape = _topology(members)
                moved = points and topology.differ(points[-1].topology, shape)
                points.append(Point(when, members[0].get("commit"), samples, judged,
                                    members[0].get("sweep_id"), _warnings(members), caveat,
                                    shape, topology_change(points[-1].topology, shape)
                                    if moved else "", _disturbed(members)))
            out.setdefault(panel, {})[line] = points
    return out


def _disturbed(rows: list[dict]) -> tuple[str, ...]:
    """The rows' disturbances in words, each naming its launch when the point has several."""
    several = len(rows) > 1
    return tuple((f"launch {aggregate.repeat_of(r)}: " if several else "") + r["disturbance"]
                 for r in rows if r.get("disturbance"))


def _topology(rows: list[dict]) -> str:
    return " | ".join(sorted({topology.signature((r.get("env") or {}).get("topology"))
                              for r in rows}))


def topology_change(before: str, after: str) -> str:
    """A point measured on another topology than the one before it, in words."""
    return f"topology differs from the previous point: {before} -> {after}"


def _warnings(rows: list[dict]) -> tuple[str, ...]:
    """The rows' warnings, each naming its launch when the point has several."""
    several = len(rows) > 1
    return tuple((f"launch {aggregate.repeat_of(r)}: " if several else "") + w
                 for r in rows for w in r.get("warnings") or ())


def regressions(tr: dict[tuple, dict[tuple, list[Point]]]) -> list[tuple[tuple, tuple, Point]]:
    return [(panel, line, p) for panel, lines in tr.items() for line, points in lines.items()
            for p in points if p.judgement is not None and p.judgement.verdict == "regression"]


def warned(tr: dict[tuple, dict[tuple, list[Point]]]) -> list[tuple[tuple, tuple, Point]]:
    """Points whose rows carry warnings and that are not regressions (those say it already)."""
    return [(panel, line, p) for panel, lines in tr.items() for line, points in lines.items()
            for p in points if p.warnings
            and (p.judgement is None or p.judgement.verdict != "regression")]


def panel_title(panel: tuple) -> str:
    p = dict(zip(identity.SERIES_FIELDS, panel, strict=True))
    batch = f"b{p['scaling_batch']}" + (" global" if p["scaling"] == "strong" else "")
    return (f"{p['model']} {p['precision']} {batch} {p['image_size']}px "
            f"{p['device_kind']} {p['scaling']}"
            + ("" if p["data"] in (None, "synthetic") else f" {p['data']}")
            + (f" tf32 {p['tf32']}" if p["tf32"] else ""))


def line_label(line: tuple) -> str:
    framework, workers, nodes, *label = line
    return (f"{framework}" + (f" [{label[0]}]" if label else "") + f" x{workers}"
            + (f" ({nodes} nodes)" if nodes and nodes > 1 else ""))


def _draw_segments(ax, points: list[Point], detection, scale: float, color, labelled: bool) -> bool:
    """Each flat stretch's mean as a dashed level over its points; a step as a triangle between
    the two points it lies between; a gradual change as a dashed slope from the last point at
    the old level to the first at the new one, its triangle half-way. True once a change
    carries the legend label."""
    xs = [p.when for p in points]
    for seg in detection.segments:
        ax.hlines(scale * seg.summary.mean, xs[seg.start], xs[seg.stop - 1], colors=[color],
                  linestyles="dashed", linewidth=1.5, alpha=0.8)
    for c in detection.change_points:
        x0, x1 = xs[c.index - 1], xs[c.stop]
        y0, y1 = scale * c.before.summary.mean, scale * c.after.summary.mean
        if c.gradual:
            ax.plot([x0, x1], [y0, y1], color=color, linestyle="dashed", linewidth=1.5,
                    alpha=0.8)
        at, y = x0 + (x1 - x0) / 2, (y0 + y1) / 2 if c.gradual else y1
        ax.plot([at], [y], marker="v" if c.change_pct < 0 else "^", markersize=12,
                color="tab:red" if c.change_pct < 0 else "tab:green", linestyle="none",
                label=None if labelled else "change")
        ax.annotate(f"{c.change_pct:+.0f}%" + (" gradual" if c.gradual else ""), (at, y),
                    textcoords="offset points", xytext=(6, 6), fontsize="small")
        labelled = True
    return labelled


def plot_metric(tr: dict[tuple, dict[tuple, list[Point]]], metric: str, path: Path,
                detections: dict | None = None, point_marks: bool = True) -> Path | None:
    """detections: (panel, line) -> changepoints.Detection, drawn as stretches and changes;
    point_marks: also mark each point judged a regression against the previous one."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not tr:
        return None
    scale = 100.0 if metric == "efficiency" else 1.0
    panels = sorted(tr.items(), key=lambda kv: tuple(str(v) for v in kv[0]))
    fig, axes = plt.subplots(len(panels), 1, figsize=(9, 3.6 * len(panels)), squeeze=False)
    for ax, (panel, lines) in zip(axes[:, 0], panels, strict=True):
        marked = changed = False
        for line, points in sorted(lines.items(), key=lambda kv: tuple(str(v) for v in kv[0])):
            xs = [p.when for p in points]
            ys = [scale * p.summary.mean for p in points]
            lows = [scale * (p.summary.mean - p.summary.ci_low) if p.summary.ci_low is not None
                    else 0.0 for p in points]
            highs = [scale * (p.summary.ci_high - p.summary.mean) if p.summary.ci_high is not None
                     else 0.0 for p in points]
            drawn = ax.errorbar(xs, ys, yerr=[lows, highs], marker="o", capsize=3,
                                label=line_label(line))
            detection = (detections or {}).get((panel, line))
            if detection is not None:
                changed = _draw_segments(ax, points, detection, scale, drawn.lines[0].get_color(),
                                         changed)
            for p, y in zip(points, ys, strict=True):
                if point_marks and p.judgement is not None and p.judgement.verdict == "regression":
                    ax.plot([p.when], [y], marker="X", markersize=14, color="tab:red",
                            linestyle="none", label=None if marked else "regression vs previous")
                    ax.annotate(f"{p.judgement.change_pct:+.0f}%", (p.when, y),
                                textcoords="offset points", xytext=(6, -14), color="tab:red",
                                fontsize="small")
                    marked = True
        ax.set_title(panel_title(panel))
        ax.set_ylabel("scaling efficiency (%)" if metric == "efficiency"
                      else "images / second (all workers)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
        for label in ax.get_xticklabels():
            label.set_rotation(20)
            label.set_horizontalalignment("right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plot(rows: list[dict], out_dir: Path, threshold: float = 5.0, alpha: float = 0.05,
         detections: dict[str, dict] | None = None, point_marks: bool = True
         ) -> tuple[list[Path], list[tuple[str, tuple, tuple, Point]]]:
    """history-throughput.png and history-efficiency.png (where there is data), and every point
    judged a regression against the previous one, then every other point with warnings, as
    (metric, panel, line, point). detections: metric -> (panel, line) ->
    changepoints.Detection, drawn on the figures."""
    compare.check_settings(threshold, alpha)
    written, found, noted = [], [], []
    for metric in METRICS:
        tr = trends(rows, metric, threshold, alpha)
        path = plot_metric(tr, metric, out_dir / f"history-{metric}.png",
                           (detections or {}).get(metric), point_marks)
        if path is not None:
            written.append(path)
        found += [(metric, panel, line, p) for panel, line, p in regressions(tr)]
        noted += [(metric, panel, line, p) for panel, line, p in warned(tr)]
    return written, found + noted
