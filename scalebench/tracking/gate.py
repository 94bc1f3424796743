"""The PR gate: a results set against the pooled launches of the last N sweeps of a branch in the
history, per configuration, with compare's rules (analysis/compare.compare_metric: worse by more
than the threshold *and* significant, a failed run fails, --min-launches refuses).

One sweep is one noisy point; N of them pooled (every launch of each) give a baseline whose
spread holds the sweep-to-sweep noise, so that an unchanged PR is judged against the level the
branch really has, not against one draw of it. Per configuration of the current set:

- the pool: the history's ok rows of that configuration on the branch (rows without a branch
  count for any), grouped into sweeps (history.sweep_groups), of the current run's testbed only
  (hardware/testbed.py: one definition, shown in every row). Sweeps exist but none of this
  testbed: the row is `untested` and fails the gate (--any-testbed pools the others). No sweep
  of the configuration at all: `new`, as compare has it.
- the window: the last N of those sweeps. A change point in the configuration's series
  (history_changes.find: steps and gradual changes, accepted ones too) whose new level starts
  inside the window limits the pool to the sweeps from there on: the level after it is the
  baseline.
- the verdict: compare.compare_metric over the pooled rows (each launch of each pooled sweep a
  process of the baseline; efficiency paired within each sweep, as history took it) and the
  current records. A current run that failed or timed out fails even with no history.

The history does not keep every setting of a run (warm-up, iterations, threads): the pooled
rows take the current run's, so compare notes no difference there that the history cannot
show. Nothing here reads or writes files.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

from scalebench.analysis import aggregate, compare
from scalebench.hardware import testbed
from scalebench.report.format import interval, num, pct, pct_interval
from scalebench.spec import identity
from scalebench.spec.errors import UserError
from scalebench.tracking import accepted, history, history_changes

POINTS = 10  # sweeps pooled by default
UNTESTED = "untested"  # no sweep of the current run's testbed in the history: fails the gate
GATING = compare.GATING + (UNTESTED,)
ORDER = {v: i for i, v in enumerate(compare.VERDICTS[:compare.VERDICTS.index("refused") + 1]
                                    + (UNTESTED,)
                                    + compare.VERDICTS[compare.VERDICTS.index("refused") + 1:])}
MARKER = "<!-- scalebench-gate -->"  # first line of a PR comment body: a workflow finds it by this
REPEAT_STRIDE = 100_000  # a pooled launch's repeat index: sweep x stride + its repeat in the sweep


@dataclass(frozen=True)
class Pool:
    """The history behind one configuration's rows."""

    sweeps: tuple[tuple[dict, ...], ...]  # the pooled sweeps' ok rows, oldest first
    note: str = ""  # why the pool is what it is (a change point cut it, other testbeds pooled)
    untested: str = ""  # non-empty: no sweep of this testbed, the row is not judged (why)

    @property
    def commits(self) -> list[str]:
        return [short(s[0].get("commit")) for s in self.sweeps]

    @property
    def text(self) -> str:
        """e.g. "8 sweeps: 1a2b3c4 5d6e7f8 ..." (the commits pooled, oldest first)."""
        n = len(self.sweeps)
        return f"{n} sweep{'s' if n != 1 else ''}: {' '.join(self.commits)}" if n else "none"


@dataclass(frozen=True)
class Row:
    verdict: compare.Verdict
    testbed: str  # the current run's testbed, in words
    pool: Pool | None  # None: the configuration has no history (a `new` row)


@dataclass(frozen=True)
class Gate:
    rows: tuple[Row, ...]
    branch: str
    points: int
    threshold: float
    alpha: float
    min_launches: int
    metrics: tuple[str, ...]
    store_label: str = "history"
    current_label: str = "current"
    env_warnings: tuple[str, ...] = ()
    input_warnings: tuple[str, ...] = ()
    any_testbed: bool = False

    @property
    def gating(self) -> list[Row]:
        return [r for r in self.rows if r.verdict.verdict in GATING]

    def count(self, verdict: str) -> int:
        return sum(1 for r in self.rows if r.verdict.verdict == verdict)

    @property
    def exit_code(self) -> int:
        return 1 if self.gating else 0


def short(commit: str | None) -> str:
    if not commit:
        return "unknown"
    return commit[:7] + ("-dirty" if commit.endswith("-dirty") else "")


def check_settings(points: int, branch: str) -> None:
    if isinstance(points, bool) or not isinstance(points, int) or points < 1:
        raise UserError(f"--points: expected a number of sweeps >= 1, got {points!r}")
    if not (branch or "").strip():
        raise UserError("--branch: give the branch whose sweeps are the baseline (e.g. main)")


def branch_rows(rows: Sequence[dict], branch: str) -> list[dict]:
    """The run rows of the branch (rows without a branch count for any); a UserError naming the
    branches the store has when none is of this one."""
    if not rows:
        raise UserError("the history store holds no run rows; add main's sweeps to it with "
                        "`scalebench history add RESULTS --store STORE`")
    mine = [r for r in rows if r.get("branch") in (None, "", branch)]
    if not mine:
        names = sorted({str(r.get("branch")) for r in rows})
        raise UserError(f"--branch {branch!r}: the history store holds no sweep of it (its "
                        f"branches: {', '.join(names)})")
    return mine


def _time(sweep: Sequence[dict]):
    return min(history._when(r) for r in sweep)  # the time history orders its points by


def _sweeps(rows: Sequence[dict]) -> list[tuple[dict, ...]]:
    return sorted((tuple(g) for g in history.sweep_groups(rows)), key=_time)


def _cut(sweeps: list[tuple[dict, ...]], window: list[tuple[dict, ...]], metrics: Sequence[str],
         accepts: Sequence[accepted.Accepted]) -> tuple[list[tuple[dict, ...]], str]:
    """The window from the newest change point whose new level starts inside it (of either
    metric's series), and the note that says so."""
    found = history_changes.find([r for s in sweeps for r in s], metrics, accepts=accepts)
    start, latest = _time(window[0]), None
    for change in found.changes:
        at = change.series.points[change.point.stop].when
        if at > start and (latest is None or at > latest[0]):
            latest = (at, change)
    if latest is None:
        return window, ""
    at, change = latest
    kept = [s for s in window if _time(s) >= at]
    what = f"{change.series.metric} {change.verdict} of " \
        f"{history_changes.change_text(change.point)} at {change.commit_range}"
    accepted_text = f"; {change.accepted.text}" if change.accepted else ""
    return kept, (f"pool limited to the {len(kept)} sweep{'s' if len(kept) != 1 else ''} since "
                  f"the {what}{accepted_text}")


def pool_of(key: tuple, rows: Sequence[dict], bed: testbed.Testbed, points: int,
            any_testbed: bool, metrics: Sequence[str], accepts: Sequence[accepted.Accepted]
            ) -> Pool | None:
    """The pooled sweeps of one configuration (rows: the branch's); None when the history has
    no ok row of it."""
    mine = [r for r in rows if r.get("status") == "ok" and identity.config_key(r) == key]
    if not mine:
        return None
    sweeps = _sweeps(mine)
    same = [s for s in sweeps if bed.matches(testbed.of(s[0].get("env")))]
    others = sorted({testbed.of(s[0].get("env")).label for s in sweeps if s not in same})
    if not same and not any_testbed:
        return Pool((), untested=f"not judged: no sweep of this testbed in the history "
                    f"({len(sweeps)} sweep{'s' if len(sweeps) != 1 else ''} of this "
                    f"configuration ran on: {'; '.join(others)}); --any-testbed pools them")
    series = sweeps if any_testbed else same
    window = series[-points:]
    kept, note = _cut(series, window, metrics, accepts)
    if any_testbed and others:
        note = "; ".join(x for x in (note, f"--any-testbed: pooled with sweeps of "
                                           f"{'; '.join(others)}") if x)
    return Pool(tuple(kept), note)


def _records(pools: dict[tuple, Pool], settings: dict[tuple, dict]) -> list[dict]:
    """The pooled rows as train records for compare: each launch of each sweep a process of its
    own (repeat = sweep index x REPEAT_STRIDE + its repeat, the sweep index shared by every
    configuration, so efficiency pairs a launch with its own sweep's one-worker launch). The
    settings the history does not keep are the current run's (settings[key])."""
    names: dict[str, int] = {}
    out = []
    for key, pool in pools.items():
        for sweep in pool.sweeps:
            for row in sweep:
                ident = str(row.get("sweep_id") or f"{row.get('commit')}|{row.get('order_seed')}")
                index = names.setdefault(ident, len(names) + 1)
                trials = row.get("trial_images_per_sec") or []
                out.append({**row, **settings.get(key, {}), "kind": "train",
                            "repeat": index * REPEAT_STRIDE + aggregate.repeat_of(row),
                            "repeats": 1, "trials": len(trials)})
    return out


def _settings(runs: aggregate.Runs) -> dict:
    r = runs.newest_ok or runs.last
    return {f: r.get(f) for f in compare.SETTING_FIELDS if f in r}


def _row_verdicts(metrics: Sequence[str], key: tuple, verdict: str, cur: compare.RunIndex,
                  reason: str) -> list[compare.Verdict]:
    out = []
    for metric in metrics:
        if metric == "efficiency" and identity.key_dict(key)["world_size"] == 1:
            continue
        c, _, _ = compare.metric_samples(metric, key, cur)
        out.append(compare.Verdict(metric, key, verdict, None,
                                   c.summary() if c is not None else None, None, "", None, reason))
    return out


def testbeds(cur: compare.RunIndex) -> dict[tuple, testbed.Testbed]:
    """Each current configuration's testbed (of its newest ok run, else its last)."""
    return {k: testbed.of((runs.newest_ok or runs.last).get("env")) for k, runs in cur.items()}


def pools(current: list[dict], rows: Sequence[dict], branch: str = "main", points: int = POINTS,
          any_testbed: bool = False, metrics: Sequence[str] = compare.METRICS,
          accepts: Sequence[accepted.Accepted] = ()) -> dict[tuple, Pool | None]:
    """Each current configuration's pool (None: no history of it); judge's first half, which
    two results sets of the same configurations and testbed can share."""
    check_settings(points, branch)
    metrics = compare.parse_metrics(metrics)
    cur = compare.index_runs(current)
    mine = branch_rows(rows, branch)
    beds = testbeds(cur)
    return {k: pool_of(k, mine, beds[k], points, any_testbed, metrics, accepts) for k in cur}


def judge(current: list[dict], rows: Sequence[dict], branch: str = "main", points: int = POINTS,
          threshold: float = 5.0, alpha: float = 0.05, min_launches: int = 1,
          any_testbed: bool = False, metrics: Sequence[str] = compare.METRICS,
          accepts: Sequence[accepted.Accepted] = (), store_label: str = "history",
          current_label: str = "current", input_warnings: Sequence[str] = (),
          pooled: dict[tuple, Pool | None] | None = None, invalid: Sequence = ()) -> Gate:
    """The gate's verdicts; nothing is printed. rows: the store's run rows; accepts: its
    accepted changes (shown where they cut a pool); pooled: pools() of the same arguments,
    when already taken; invalid: the current side's invalid records (results.load), each an
    `invalid` row that fails the gate, as in compare."""
    compare.check_settings(threshold, alpha, min_launches)
    check_settings(points, branch)
    metrics = compare.parse_metrics(metrics)
    cur = compare.index_runs(current)
    if not cur:
        raise UserError(f"{current_label}: no train records to judge")
    mine = branch_rows(rows, branch)
    beds = testbeds(cur)
    chosen = pooled if pooled is not None else \
        pools(current, rows, branch, points, any_testbed, metrics, accepts)
    if all(p is None for p in chosen.values()):
        have = sorted({identity.describe(identity.config_key(r)) for r in mine})
        raise UserError(f"no configuration of {current_label} has a sweep on branch {branch!r} "
                        f"of the history (history: {'; '.join(have[:6])}"
                        + ("; ..." if len(have) > 6 else "") + "; current: "
                        + "; ".join(sorted(identity.describe(k) for k in cur)) + ")")
    judged = {k: p for k, p in chosen.items() if p is not None and not p.untested}
    baseline = _records(judged, {k: _settings(cur[k]) for k in judged})
    base = compare.index_runs(baseline)
    bad_cur = compare.index_invalid(invalid)
    verdicts: list[compare.Verdict] = compare.unidentified_verdicts({}, bad_cur)
    for metric in metrics:
        verdicts += compare.compare_metric(metric, base, cur, threshold, alpha, False,
                                           min_launches, {}, bad_cur)
    verdicts = [v for v in verdicts if chosen.get(v.key) is None or not chosen[v.key].untested]
    for key, pool in chosen.items():
        if pool is not None and pool.untested:
            verdicts += _row_verdicts(metrics, key, UNTESTED, cur, pool.untested)
    for key, runs in cur.items():  # a failed run fails, with history or without
        if runs.ok or runs.last.get("status") not in compare.BROKEN:
            continue
        why = f"current: run {runs.last['status']}: {runs.last.get('error') or 'no reason recorded'}"
        had = {v.metric: v for v in verdicts if v.key == key}
        verdicts = [v for v in verdicts if v.key != key] + [
            dataclasses.replace(had[m.metric], verdict="failed", reason=why, current=None)
            if m.metric in had else m for m in _row_verdicts(metrics, key, "failed", cur, why)]
    out = [Row(v, beds[v.key].label if v.key in beds else "", chosen.get(v.key)) for v in verdicts]
    out.sort(key=lambda r: (ORDER.get(r.verdict.verdict, len(ORDER)),
                            tuple(str(x) for x in r.verdict.key), r.verdict.metric))
    return Gate(tuple(out), branch, points, threshold, alpha, min_launches, metrics, store_label,
                current_label, tuple(compare.environment_warnings(baseline, current))
                if baseline else (), tuple(input_warnings), any_testbed)


# ---------------------------------------------------------------- rendering (separate from judging)

def value_text(metric: str, s) -> str:
    if s is None:
        return "–"
    if metric == "efficiency":
        text = pct(s.mean) + ("" if s.ci_low is None else f" [{pct_interval(s.ci_low, s.ci_high)}]")
    else:
        text = num(s.mean, ".4g") + ("" if s.ci_low is None else
                                     f" [{interval(s.ci_low, s.ci_high, '.4g')}]")
    return text + (" noisy" if s.noisy else "")


HEADER = ["verdict", "metric", "configuration", "testbed", "pooled", "baseline", "current",
          "change", "test", "why"]


def cells(r: Row) -> list[str]:
    v = r.verdict
    change = "–" if v.change_pct is None or math.isnan(v.change_pct) else f"{v.change_pct:+.1f}%"
    test = "–" if not v.test else (f"{v.test} p={v.p_value:.3g}" if v.p_value is not None
                                   else v.test)
    why = [v.reason, *v.notes] + ([r.pool.note] if r.pool is not None and r.pool.note else [])
    return [v.verdict.upper() if v.verdict in GATING else v.verdict, v.metric, v.config,
            r.testbed, r.pool.text if r.pool is not None else "none", value_text(v.metric, v.baseline),
            value_text(v.metric, v.current), change, test, "; ".join(x for x in why if x)]


WORDS = {"regression": ("regression", "regressions"),
         "failed": ("failed run", "failed runs"),
         "invalid": ("invalid record row", "invalid record rows"),
         "refused": ("row with too few launches", "rows with too few launches"),
         UNTESTED: ("row with no sweep of its testbed", "rows with no sweep of their testbed")}


def summary_line(g: Gate) -> str:
    verdicts = sorted({r.verdict.verdict for r in g.rows}, key=lambda v: ORDER.get(v, len(ORDER)))
    counts = ", ".join(f"{v}: {g.count(v)}" for v in verdicts)
    failing = [f"{g.count(v)} {WORDS.get(v, (v, v))[g.count(v) != 1]}" for v in verdicts
               if v in GATING]
    outcome = f"FAILED: {', '.join(failing)}" if failing else "passed: no regression"
    settings = (f"branch {g.branch}, last {g.points} sweep{'s' if g.points != 1 else ''}; "
                f"threshold {g.threshold:g}%, alpha {g.alpha:g}"
                + (f", min launches {g.min_launches}" if g.min_launches > 1 else "")
                + (", any testbed" if g.any_testbed else ""))
    return f"{outcome} ({counts}; {settings})"


def render_text(g: Gate) -> str:
    lines = [f"scalebench gate: {g.current_label} against the last {g.points} sweeps of "
             f"{g.branch} in {g.store_label} (metrics {', '.join(g.metrics)})"]
    lines += [f"warning: {w}" for w in g.input_warnings]
    if g.env_warnings:
        lines.append("WARNING: the environments differ; changes may come from the environment, "
                     "not the code:")
        lines += [f"  {w}" for w in g.env_warnings]
    rows = [HEADER] + [cells(r) for r in g.rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADER) - 1)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[-1]
              for r in rows]
    lines.append(summary_line(g))
    for r in g.gating:
        v = r.verdict
        what = f"{v.change_pct:+.1f}%" if v.verdict == "regression" else v.reason
        lines.append(f"  {v.verdict}: {v.metric} of {v.config}: {what}")
    return "\n".join(lines)


def _md(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_markdown(g: Gate) -> str:
    lines = ["## scalebench gate", "", f"**{_md(summary_line(g))}**", "",
             f"Current `{_md(g.current_label)}` against the pooled launches of the last "
             f"{g.points} sweeps of `{_md(g.branch)}` in `{_md(g.store_label)}`, per "
             "configuration, on the same testbed only"
             + (" (here: any testbed)" if g.any_testbed else "")
             + "; a change point inside that window limits the pool to the sweeps after it. A "
             f"regression is worse by more than {g.threshold:g}% *and* significant at alpha "
             f"{g.alpha:g} (compare's rules); a failed run and a configuration with no sweep of "
             "its testbed fail the gate too.", ""]
    if g.env_warnings:
        lines += ["> **Warning: the environments differ**; changes may come from the environment:",
                  ">"] + [f"> - {_md(w)}" for w in g.env_warnings] + [""]
    lines += [f"- input: {_md(w)}" for w in g.input_warnings] + ([""] if g.input_warnings else [])
    lines += ["| " + " | ".join(HEADER) + " |", "|---|---|---|---|---|---:|---:|---:|---|---|"]
    for r in g.rows:
        row = cells(r)
        if r.verdict.verdict in GATING:
            row[0] = f"**{row[0]}**"
        lines.append("| " + " | ".join(_md(x) for x in row) + " |")
    lines.append("")
    return "\n".join(lines)


def comment(g: Gate) -> str | None:
    """A PR comment body when something fails the gate (MARKER first, for a workflow to update
    one comment in place); None when it passed."""
    if not g.gating:
        return None
    return MARKER + "\n" + render_markdown(g)
