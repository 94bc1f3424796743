"""The PR gate: a results set against the last N sweeps of a branch in the history, per
configuration, with compare's rule (worse by more than the threshold *and* significant; a failed
run, an invalid record, an untested configuration fail; --min-launches refuses), the
significance judged at the sweep level.

One sweep is one noisy point; N of them give a baseline that holds the sweep-to-sweep noise, so
that an unchanged PR is judged against the level the branch really has, not against one draw of
it. Per configuration of the current set:

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
  current records gives every row's kind (failed, invalid, refused, new, judged) and notes. A
  judged row with MIN_SWEEPS or more pooled sweeps is then decided by sweep_test: each sweep one
  value (its launches' mean), the current sweep's value against the pool's prediction under
  AR(1) noise between sweeps; the change is against the pool's mean, and "significant" is
  Holm's step-down over every such row of the PR at alpha, so that alpha bounds the chance that
  an unchanged PR fails, not that one row does. With fewer pooled sweeps there is no
  sweep-to-sweep variance: the row keeps compare's launch-level verdict at alpha (a row, not
  corrected over the PR) and says so. A current run that failed or timed out fails even with no
  history.

Why not compare's rule on the pooled launches: a sweep's launches share that sweep's noise, so
tested as independent samples against the pool, an unchanged sweep that sits a few percent low
is "significant" (benchmarks/ci_gate.py measured 4% of unchanged rows and 29% of unchanged PRs
failing that way).

The history does not keep every setting of a run (warm-up, iterations, threads): the pooled
rows take the current run's, so compare notes no difference there that the history cannot
show. Nothing here reads or writes files.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from scalebench.analysis import aggregate, compare, stats
from scalebench.hardware import testbed
from scalebench.report.format import interval, pct_interval, with_interval
from scalebench.spec import identity
from scalebench.spec.errors import UserError
from scalebench.tracking import accepted, history, history_changes, sweep_test

_md = compare.md_cell  # one escaping for every markdown table

POINTS = 10  # sweeps pooled by default
ALPHA = 0.01  # the chance that an unchanged PR fails on a regression (Holm over its rows)
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
    prediction: sweep_test.Prediction | None = None  # the sweep-level test's figures
    tail: float = 0.0  # the prediction interval's share in each tail (alpha / rows tested)


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
    family: int = 0  # rows judged at the sweep level (Holm's family)

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
          threshold: float = 5.0, alpha: float = ALPHA, min_launches: int = 1,
          any_testbed: bool = False, metrics: Sequence[str] = compare.METRICS,
          accepts: Sequence[accepted.Accepted] = (), store_label: str = "history",
          current_label: str = "current", input_warnings: Sequence[str] = (),
          pooled: dict[tuple, Pool | None] | None = None, invalid: Sequence = ()) -> Gate:
    """The gate's verdicts; nothing is printed. alpha: per PR (Holm over the rows judged at
    the sweep level); rows: the store's run rows; accepts: its
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
    verdicts, predictions, tail = _sweep_level(verdicts, judged, base, cur, threshold, alpha)
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
    out = [Row(v, beds[v.key].label if v.key in beds else "", chosen.get(v.key),
               predictions.get((v.metric, v.key)), tail) for v in verdicts]
    out.sort(key=lambda r: (ORDER.get(r.verdict.verdict, len(ORDER)),
                            tuple(str(x) for x in r.verdict.key), r.verdict.metric))
    return Gate(tuple(out), branch, points, threshold, alpha, min_launches, metrics, store_label,
                current_label, tuple(compare.environment_warnings(baseline, current))
                if baseline else (), tuple(input_warnings), any_testbed, len(predictions))


JUDGED = ("regression", "improvement", "unchanged")  # the verdicts of a row compare could test


def sweep_values(metric: str, pool: Pool) -> list[list[float]]:
    """Each pooled sweep's per-launch values of the metric (oldest first; a sweep without
    one left out): throughput a launch's mean, efficiency its ratio paired within the sweep."""
    out = []
    for sweep in pool.sweeps:
        if metric == "throughput":
            values = [r["images_per_sec"] if r.get("images_per_sec") is not None
                      else statistics.fmean(r[aggregate.TRIALS_FIELD]) for r in sweep
                      if r.get("images_per_sec") is not None or r.get(aggregate.TRIALS_FIELD)]
        else:
            values = [r["efficiency"] for r in sweep if r.get("efficiency") is not None]
        if values:
            out.append([float(v) for v in values])
    return out


def _launch_level_notes(v: compare.Verdict, base: compare.RunIndex, cur: compare.RunIndex,
                        threshold: float, alpha: float) -> set[str]:
    """The notes compare added about its own launch-level judgement (one launch's caveat, a
    moved one-worker baseline), which a sweep-level verdict replaces."""
    if v.verdict not in ("regression", "improvement"):
        return set()
    b, _, _ = compare.metric_samples(v.metric, v.key, base)
    c, _, _ = compare.metric_samples(v.metric, v.key, cur)
    out = {stats.within_processes_text(b, c, "the code")} if b is not None and c is not None \
        else set()
    if v.metric == "efficiency":
        out.add(compare.baseline_moved(v.key, base, cur, threshold, alpha))
    return {x for x in out if x}


def _sweep_level(verdicts: list[compare.Verdict], pools: dict[tuple, Pool],
                 base: compare.RunIndex, cur: compare.RunIndex, threshold: float, alpha: float
                 ) -> tuple[list[compare.Verdict], dict[tuple, sweep_test.Prediction], float]:
    """The judged rows whose pool has MIN_SWEEPS sweeps, decided by the sweep-level prediction
    test (Holm over them at alpha); the others keep compare's verdict with a note that says why.
    Returns (verdicts, (metric, key) -> prediction, the prediction interval's tail)."""
    tested: dict[int, sweep_test.Prediction] = {}
    means: dict[int, list[float]] = {}  # each pooled sweep's value, for the baseline's summary
    out = list(verdicts)
    for i, v in enumerate(verdicts):
        if v.verdict not in JUDGED or v.key not in pools:
            continue
        values = sweep_values(v.metric, pools[v.key])
        c, _, _ = compare.metric_samples(v.metric, v.key, cur)
        if len(values) >= sweep_test.MIN_SWEEPS and c is not None:
            tested[i] = sweep_test.predict(values, c.process_values)
            means[i] = [statistics.fmean(s) for s in values]
            continue
        n = len(values)
        out[i] = dataclasses.replace(v, notes=(
            f"{n} sweep{'s' if n != 1 else ''} pooled: too few for a sweep-to-sweep variance "
            f"(needs {sweep_test.MIN_SWEEPS}); compare's launch-level rule at alpha {alpha:g} "
            "for this row, not corrected over the PR",) + v.notes)
    if not tested:
        return out, {}, 0.0
    index = list(tested)
    lower = sweep_test.holm([tested[i].p_lower for i in index])
    upper = sweep_test.holm([tested[i].p_upper for i in index])
    k = len(index)
    for i, low, up in zip(index, lower, upper, strict=True):
        v, pred = verdicts[i], tested[i]
        change = 100.0 * (pred.current - pred.pool_mean) / pred.pool_mean
        worse = change < 0
        p, adjusted = (pred.p_lower, low) if worse else (pred.p_upper, up)
        beyond, significant = abs(change) > threshold, adjusted < alpha
        if beyond and significant:
            verdict = "regression" if worse else "improvement"
            why = f"{change:+.1f}% beyond {threshold:g}% and significant"
        elif beyond:
            verdict, why = "unchanged", f"{change:+.1f}% beyond {threshold:g}% but not significant"
        else:
            verdict, why = "unchanged", f"within {threshold:g}%"
        test = (f"{sweep_test.TEST}: t = {pred.t:.3g} on {pred.df} df, one-sided p = {p:.3g}, "
                f"Holm over {k} row{'s' if k != 1 else ''}: {adjusted:.3g} vs alpha {alpha:g} "
                f"a PR; {pred.sweeps} sweeps against the current one of {pred.launches} "
                f"launch{'es' if pred.launches != 1 else ''} ({pred.phi_text})")
        dropped = _launch_level_notes(v, base, cur, threshold, alpha)
        baseline = stats.Summary(pred.sweeps, pred.pool_mean, statistics.median(means[i]),
                                 statistics.stdev(means[i]), None, None)
        c, _, _ = compare.metric_samples(v.metric, v.key, cur)
        out[i] = dataclasses.replace(
            v, verdict=verdict, baseline=baseline, current=c.summary(stats.PROCESSES),
            change_pct=change, test=sweep_test.TEST, p_value=adjusted, reason=f"{why}; {test}",
            notes=tuple(n for n in v.notes if n not in dropped), basis="sweeps")
    return out, {(verdicts[i].metric, verdicts[i].key): tested[i] for i in index}, alpha / k


# ---------------------------------------------------------------- rendering (separate from judging)

def value_text(metric: str, s) -> str:
    if s is None:
        return "–"
    text = with_interval(s.mean, s.ci_low, s.ci_high, metric == "efficiency", s.too_noisy)
    return text + (" noisy" if s.noisy else "")


HEADER = ["verdict", "metric", "configuration", "testbed", "pooled", "baseline", "current",
          "change", "test", "prediction", "why"]


def prediction_text(r: Row) -> str:
    """The sweep-level test's figures: phi used and the current value's prediction interval
    (alpha / rows tested in each tail: Holm's first step); "–" for a row it did not judge."""
    pred = r.prediction
    if pred is None:
        return "–"
    low, high = pred.interval(r.tail)
    span = pct_interval(low, high) if r.verdict.metric == "efficiency" else \
        interval(low, high, ".4g")
    return f"{pred.phi_text}; {100 * (1 - 2 * r.tail):.4g}% interval [{span}]"


def cells(r: Row) -> list[str]:
    v = r.verdict
    change = "–" if v.change_pct is None or math.isnan(v.change_pct) else f"{v.change_pct:+.1f}%"
    if not v.test:
        test = "–"
    elif r.prediction is not None:
        test = f"{v.test} Holm p={v.p_value:.3g}"
    else:
        test = f"{v.test} p={v.p_value:.3g}" if v.p_value is not None else v.test
    why = [v.reason, *v.notes] + ([r.pool.note] if r.pool is not None and r.pool.note else [])
    return [v.verdict.upper() if v.verdict in GATING else v.verdict, v.metric, v.config,
            r.testbed, r.pool.text if r.pool is not None else "none", value_text(v.metric, v.baseline),
            value_text(v.metric, v.current), change, test, prediction_text(r),
            "; ".join(x for x in why if x)]


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
                f"threshold {g.threshold:g}%, alpha {g.alpha:g} a PR"
                + (f" (Holm over {g.family} sweep-level row{'s' if g.family != 1 else ''})"
                   if g.family else "")
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
    lines += compare.aligned([HEADER] + [cells(r) for r in g.rows])
    lines.append(summary_line(g))
    for r in g.gating:
        v = r.verdict
        what = f"{v.change_pct:+.1f}%" if v.verdict == "regression" else v.reason
        lines.append(f"  {v.verdict}: {v.metric} of {v.config}: {what}")
    return "\n".join(lines)


def render_markdown(g: Gate) -> str:
    lines = ["## scalebench gate", "", f"**{_md(summary_line(g))}**", "",
             f"Current `{_md(g.current_label)}` against the last {g.points} sweeps of "
             f"`{_md(g.branch)}` in `{_md(g.store_label)}`, per configuration, on the same "
             "testbed only" + (" (here: any testbed)" if g.any_testbed else "")
             + "; a change point inside that window limits the pool to the sweeps after it. "
             "Each sweep is one value (its launches' mean); the current one is judged against "
             "the pooled sweeps' prediction under AR(1) noise between sweeps. A regression is "
             f"worse than the pool's mean by more than {g.threshold:g}% *and* significant, "
             f"Holm over the PR's rows at alpha {g.alpha:g} (the chance that an unchanged PR "
             f"fails); with fewer than {sweep_test.MIN_SWEEPS} sweeps pooled a row falls back "
             "to compare's launch-level rule. A failed run, an invalid record and a "
             "configuration with no sweep of its testbed fail the gate too.", ""]
    if g.env_warnings:
        lines += ["> **Warning: the environments differ**; changes may come from the environment:",
                  ">"] + [f"> - {_md(w)}" for w in g.env_warnings] + [""]
    lines += [f"- input: {_md(w)}" for w in g.input_warnings] + ([""] if g.input_warnings else [])
    lines += ["| " + " | ".join(HEADER) + " |", "|---|---|---|---|---|---:|---:|---:|---|---|---|"]
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
