"""Regression gate: match the runs of two results sets and judge each change.

Pure functions return verdicts (`compare`); separate functions render them as text or markdown
(`render_text`, `render_markdown`). A regression needs both: worse by more than the threshold
and a significant difference (stats.difference_of: Mann-Whitney U where the sample sizes let it
reach alpha, otherwise non-overlapping (1 - alpha) intervals). The test runs on per-process
means when both sides have two or more ok launches of the configuration, else on trials; the
verdict says which, and how many processes and trials stand behind it.

Runs match by identity.config_key. Efficiency samples pair each launch of an N-worker run with
the same launch of the same side's efficiency baseline, and trial i with trial i
(aggregate.efficiency_samples), so they carry the baseline's uncertainty. The baseline is
identity.baseline_key: the one-worker run of the same framework and options with the same
per-worker batch under weak scaling, the same global batch under strong scaling.

Besides regressions, the gate fails (exit 1) on a configuration that was ok in the baseline and
whose current run failed or timed out (verdict `failed`, the reason quoted; `allow_missing`
makes it `missing`, a note, as a skipped run always is), and with `min_launches` K >= 2 on a
configuration either side launched fewer than K times (verdict `refused`: not judged). Notes
carry what a reader must not miss: the runs' warnings (skipped fp16 steps, injected faults),
that a verdict from one launch on either side holds within those processes only, and when a
framework's own one-worker baseline is much slower than the best one (which flatters its
efficiency).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from scalebench.analysis import aggregate, stats
from scalebench.hardware import topology
from scalebench.hardware.envinfo import HARDWARE_FIELDS
from scalebench.spec import identity
from scalebench.spec.errors import UserError

# Settings outside the configuration key that still change the numbers: a row notes when they
# differ. (Which records are the same configuration is identity.config_key's answer.)
# `step`: the step rules (e.g. the one-worker step unwrapped); `math`: the fp32 math measured.
SETTING_FIELDS = ("warmup", "iters", "threads_per_worker", "aux_logits", "options", "step", "math")
METRICS = ("throughput", "efficiency")
VERDICTS = ("regression", "failed", "refused", "improvement", "unchanged", "new", "missing")
GATING = ("regression", "failed", "refused")  # verdicts that fail the gate (exit 1)
BROKEN = ("failed", "timeout")  # statuses that are a failure; "skipped" is not
RunIndex = dict[tuple, aggregate.Runs]  # configuration key -> its runs


def index_runs(records: Iterable[dict]) -> RunIndex:
    """Train records by configuration key (aggregate.group_runs)."""
    return aggregate.group_runs(records)


def _not_ok(what: str, side: aggregate.Runs) -> tuple[None, str, bool]:
    r = side.last
    return (None, f"{what} {r['status']}: {r.get('error') or 'no reason recorded'}",
            r["status"] in BROKEN)


def metric_samples(metric: str, key: tuple, runs: RunIndex
                   ) -> tuple[stats.Samples | None, str, bool]:
    """(samples, reason when there are none, whether that reason is a run that failed or timed
    out) for one configuration on one side."""
    side = runs.get(key)
    if side is None:
        return None, "not in this results set", False
    if not side.ok:
        return _not_ok("run", side)
    if metric == "throughput":
        return side.samples(), "", False
    one = runs.get(identity.baseline_key(side.newest_ok))
    if one is None:
        return None, "no ok one-worker run to take efficiency against", False
    if not one.ok:
        return _not_ok("its one-worker run", one)
    return (aggregate.efficiency_samples(side, one, identity.key_dict(key)["world_size"]), "",
            False)


def as_samples(values: Sequence[float] | stats.Samples) -> stats.Samples:
    """Bare values are the trials of one process."""
    return values if isinstance(values, stats.Samples) else stats.Samples.of_trials(values)


@dataclass(frozen=True)
class Judgement:
    verdict: str  # regression | improvement | unchanged
    change_pct: float
    difference: stats.Difference
    reason: str


def judge(baseline: Sequence[float] | stats.Samples, current: Sequence[float] | stats.Samples,
          threshold: float, alpha: float) -> Judgement:
    """The rule, for higher-is-better samples: a change beyond the threshold that is significant.
    The change is between the means on the samples the test used (stats.common_basis)."""
    base, cur = as_samples(baseline), as_samples(current)
    diff = stats.difference_of(base, cur, alpha)
    b, c = base.summary(diff.basis), cur.summary(diff.basis)
    change = 100.0 * (c.mean - b.mean) / b.mean
    beyond = abs(change) > threshold
    if beyond and diff.significant:
        verdict = "regression" if change < 0 else "improvement"
        reason = f"{change:+.1f}% beyond {threshold:g}% and significant"
    elif beyond:
        verdict, reason = "unchanged", f"{change:+.1f}% beyond {threshold:g}% but not significant"
    else:
        verdict, reason = "unchanged", f"within {threshold:g}%"
    return Judgement(verdict, change, diff, reason)


@dataclass(frozen=True)
class Verdict:
    metric: str
    key: tuple  # identity.config_key
    verdict: str  # one of VERDICTS
    baseline: stats.Summary | None
    current: stats.Summary | None
    change_pct: float | None
    test: str  # stats.MANN_WHITNEY | stats.intervals_test(alpha) | stats.NO_TEST, "" new/missing
    p_value: float | None
    reason: str
    notes: tuple[str, ...] = ()
    basis: str = ""  # stats.PROCESSES | stats.TRIALS: the samples the test ran on

    @property
    def config(self) -> str:
        return identity.describe(self.key)


def _mixed_settings(label: str, side: aggregate.Runs) -> list[str]:
    """Settings the ok launches of one side disagree on (they are pooled all the same)."""
    out = []
    for f in SETTING_FIELDS + ("trials",):
        values = {repr(r.get(f)) for r in side.ok if r.get(f) != {}}
        if len(values) > 1:
            out.append(f"{label} launches differ in {f}: {', '.join(sorted(values))}")
    return out


def _setting_notes(key: tuple, base: RunIndex, cur: RunIndex) -> tuple[str, ...]:
    b, c = base[key].newest_ok, cur[key].newest_ok
    notes = _mixed_settings("baseline", base[key]) + _mixed_settings("current", cur[key])
    for f in SETTING_FIELDS:
        # an empty step or math dict says no more than a record written before the field
        old, new = b.get(f) if b.get(f) != {} else None, c.get(f) if c.get(f) != {} else None
        if old != new:
            notes.append(f"{f} differs: {old!r} -> {new!r}")
    if b.get("trials") != c.get("trials"):
        notes.append(f"trials {b.get('trials')} -> {c.get('trials')}")
    if base[key].processes != cur[key].processes:
        notes.append(f"processes {base[key].processes} -> {cur[key].processes}")
    for label, side in (("baseline", base[key]), ("current", cur[key])):
        if side.launches_text:
            notes.append(f"{label}: {side.launches_text}")
    return tuple(notes)


def _sided(baseline: Sequence[str], current: Sequence[str], what: str = "") -> list[str]:
    """Notes of the two sides, each naming its side ("baseline and current" when both say it)."""
    out = []
    for text in dict.fromkeys(list(baseline) + list(current)):
        where = ("baseline and current" if text in baseline and text in current
                 else "baseline" if text in baseline else "current")
        out.append(f"{where}{what}: {text}")
    return out


def warning_notes(keys: Sequence[tuple], base: RunIndex, cur: RunIndex) -> tuple[str, ...]:
    """The runs' warnings (aggregate.run_warnings: injected faults, skipped fp16 steps, a diverged
    loss, launches that failed) of these configurations on each side; a one-worker baseline
    among them is named as such."""
    notes: list[str] = []
    for key in keys:
        sides = [aggregate.run_warnings(side[key]) if key in side else [] for side in (base, cur)]
        notes += _sided(*sides, what="" if key == keys[0] else " one-worker run")
    return tuple(notes)


def slow_baseline(key: tuple, runs: RunIndex) -> str:
    """For an efficiency row of one side: when the framework's own one-worker run is more than
    aggregate.SLOW_BASELINE slower than the best one-worker run of any framework (the best that
    aggregate.summary_rows takes efficiency_vs_best against), that in words, with the efficiency
    against the best; "" otherwise."""
    side = runs.get(key)
    one = runs.get(identity.baseline_key(side.newest_ok)) if side and side.ok else None
    if one is None or not one.ok:
        return ""
    best = aggregate.best_one_worker({k: r for k, r in runs.items() if r.ok}).get(
        identity.best_baseline_key(one.newest_ok))
    if best is None:
        return ""
    own, best_mean = aggregate.mean_throughput(one), aggregate.mean_throughput(runs[best])
    if own >= (1 - aggregate.SLOW_BASELINE) * best_mean:
        return ""
    k = identity.key_dict(key)
    vs_best = aggregate.mean_throughput(side) / (k["world_size"] * best_mean)
    return (f"{k['framework']}'s own one-worker run ({own:.4g} images/s) is "
            f"{100 * (1 - own / best_mean):.0f}% slower than the best one "
            f"({identity.key_dict(best)['framework']}, {best_mean:.4g} images/s), which flatters "
            f"its efficiency; against the best one-worker run it is {100 * vs_best:.1f}%")


def caveat(j: Judgement, baseline: stats.Samples, current: stats.Samples, about: str) -> str:
    """For a change judged significant from one launch on either side: that it holds within
    those processes only (stats.within_processes_text); "" otherwise."""
    if j.verdict not in ("regression", "improvement"):
        return ""
    return stats.within_processes_text(baseline, current, about)


def baseline_moved(key: tuple, base: RunIndex, cur: RunIndex, threshold: float, alpha: float
                   ) -> str | None:
    """When an efficiency change comes from the one-worker baseline while the N-worker
    throughput held: that, in words; else None."""
    one = identity.baseline_key(cur[key].newest_ok)
    if one not in base or one not in cur or not base[one].ok or not cur[one].ok:
        return None
    n = judge(base[key].samples(), cur[key].samples(), threshold, alpha)
    b = judge(base[one].samples(), cur[one].samples(), threshold, alpha)
    if n.verdict != "unchanged" or b.verdict == "unchanged":
        return None
    workers = identity.key_dict(key)["world_size"]
    return (f"the one-worker baseline's throughput moved ({b.change_pct:+.1f}%, significant) "
            f"while the {workers}-worker throughput did not ({n.change_pct:+.1f}%): the "
            "efficiency changed because its baseline did")


def compare_metric(metric: str, base: RunIndex, cur: RunIndex, threshold: float, alpha: float,
                   allow_missing: bool = False, min_launches: int = 1) -> list[Verdict]:
    verdicts = []
    for key in sorted(set(base) | set(cur), key=lambda k: tuple(str(v) for v in k)):
        if metric == "efficiency" and identity.key_dict(key)["world_size"] == 1:
            continue  # a one-worker run is its own reference: efficiency 1 by definition
        b, b_why, _ = metric_samples(metric, key, base)
        c, c_why, broken = metric_samples(metric, key, cur)
        if b is None and c is None:
            continue  # neither side has anything to say about this row
        if b is None:
            verdicts.append(Verdict(metric, key, "new", None, c.summary(), None, "", None,
                                    f"baseline: {b_why}; current {c.describe()}"))
            continue
        if c is None:
            verdict = "failed" if broken and not allow_missing else "missing"
            verdicts.append(Verdict(metric, key, verdict, b.summary(), None, None, "",
                                    None, f"current: {c_why}; baseline {b.describe()}"))
            continue
        keys = (key,) if metric == "throughput" else \
            (key, identity.baseline_key(cur[key].newest_ok))
        notes = warning_notes(keys, base, cur) + _setting_notes(key, base, cur)
        if metric == "efficiency":
            notes += tuple(_sided(*[[t] if t else [] for t in (slow_baseline(key, base),
                                                               slow_baseline(key, cur))]))
        if min(b.processes, c.processes) < min_launches:
            verdicts.append(Verdict(
                metric, key, "refused", b.summary(), c.summary(), None, "", None,
                f"not judged: {b.processes} vs {c.processes} launches, fewer than "
                f"--min-launches {min_launches}", notes))
            continue
        j = judge(b, c, threshold, alpha)
        within = caveat(j, b, c, "the code")
        notes = (within,) + notes if within else notes
        if metric == "efficiency" and j.verdict in ("regression", "improvement"):
            moved = baseline_moved(key, base, cur, threshold, alpha)
            notes = (moved,) + notes if moved else notes
        d = j.difference
        verdicts.append(Verdict(metric, key, j.verdict, b.summary(d.basis), c.summary(d.basis),
                                j.change_pct, d.test, d.p_value,
                                f"{j.reason}; {d.reason}; {d.samples}", notes, d.basis))
    return verdicts


def _env_values(records: Iterable[dict], field_name: str) -> list[str]:
    values = {str((r.get("env") or {}).get(field_name)) for r in records
              if r.get("kind") == "train" and r.get("status") == "ok"}
    return sorted(values)


def environment_warnings(baseline: list[dict], current: list[dict]) -> list[str]:
    """Hardware and version fields (envinfo.HARDWARE_FIELDS) that differ, in words."""
    warnings = []
    for f in HARDWARE_FIELDS:
        b, c = _env_values(baseline, f), _env_values(current, f)
        if len(b) > 1:
            warnings.append(f"baseline mixes {f}: {', '.join(b)}")
        if len(c) > 1:
            warnings.append(f"current mixes {f}: {', '.join(c)}")
        if b and c and b != c:
            warnings.append(f"{f} differs: baseline {', '.join(b)} vs current {', '.join(c)}")
    return warnings + topology_warnings(baseline, current)


def _topologies(records: Iterable[dict]) -> list[str]:
    return sorted({topology.signature((r.get("env") or {}).get("topology")) for r in records
                   if r.get("kind") == "train" and r.get("status") == "ok"})


def topology_warnings(baseline: list[dict], current: list[dict]) -> list[str]:
    """The two sides measured on different topologies (GPU links, NICs and their rates, NUMA:
    topology.signature), in words; records written before topology was recorded are not
    compared."""
    b, c = _topologies(baseline), _topologies(current)
    if not topology.differ(" | ".join(b), " | ".join(c)):
        return []
    return [f"topology differs: baseline {' | '.join(b)} vs current {' | '.join(c)}"]


def sweep_warnings(records: Iterable[dict], label: str) -> list[str]:
    """A side whose train records come from more than one sweep (sweep_id) pools launches of
    different sweeps into one configuration: that, in words."""
    ids = sorted({r["sweep_id"] for r in records
                  if r.get("kind") == "train" and r.get("sweep_id")})
    if len(ids) < 2:
        return []
    return [f"{label} holds the runs of {len(ids)} sweeps ({', '.join(ids)}); launches of one "
            "configuration from different sweeps are pooled"]


SEVERITY = {v: i for i, v in enumerate(VERDICTS)}


@dataclass(frozen=True)
class Comparison:
    verdicts: tuple[Verdict, ...]
    env_warnings: tuple[str, ...]
    threshold: float
    alpha: float
    metrics: tuple[str, ...]
    baseline_label: str = "baseline"
    current_label: str = "current"
    input_warnings: tuple[str, ...] = field(default=())
    min_launches: int = 1

    @property
    def regressions(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.verdict == "regression"]

    @property
    def gating(self) -> list[Verdict]:
        """Every verdict that fails the gate: regressions, runs that failed where the baseline's
        were ok, configurations refused for too few launches."""
        return [v for v in self.verdicts if v.verdict in GATING]

    def count(self, verdict: str) -> int:
        return sum(1 for v in self.verdicts if v.verdict == verdict)

    @property
    def exit_code(self) -> int:
        return 1 if self.gating else 0


def parse_metrics(text: str | Sequence[str]) -> tuple[str, ...]:
    items = [m.strip() for m in (text.split(",") if isinstance(text, str) else text) if m.strip()]
    for m in items:
        if m not in METRICS:
            raise UserError(f"--metric: unknown metric {m!r}; allowed: {', '.join(METRICS)}")
    if not items:
        raise UserError(f"--metric: needs at least one of: {', '.join(METRICS)}")
    return tuple(dict.fromkeys(items))


def check_settings(threshold: float, alpha: float, min_launches: int = 1) -> None:
    if not math.isfinite(threshold) or threshold < 0:
        raise UserError(f"--threshold: must be a percentage >= 0, not {threshold:g}")
    if not 0 < alpha < 1:
        raise UserError(f"--alpha: must lie between 0 and 1, not {alpha:g}")
    if isinstance(min_launches, bool) or not isinstance(min_launches, int) or min_launches < 1:
        raise UserError(f"--min-launches: expected an integer >= 1, got {min_launches!r}")


def compare(baseline: list[dict], current: list[dict], threshold: float = 5.0, alpha: float = 0.05,
            metrics: Sequence[str] = METRICS, baseline_label: str = "baseline",
            current_label: str = "current", input_warnings: Sequence[str] = (),
            allow_missing: bool = False, min_launches: int = 1) -> Comparison:
    """Verdicts for every configuration in either set, for each metric; nothing is printed.
    allow_missing: a current run that failed or timed out is `missing`, not `failed`.
    min_launches: configurations with fewer ok launches on either side are `refused`."""
    check_settings(threshold, alpha, min_launches)
    metrics = parse_metrics(metrics)
    base, cur = index_runs(baseline), index_runs(current)
    if not base:
        raise UserError(f"{baseline_label}: no train records to compare")
    if not cur:
        raise UserError(f"{current_label}: no train records to compare")
    if not set(base) & set(cur):
        raise UserError(
            f"no configuration appears in both {baseline_label} and {current_label}; nothing to "
            f"compare (baseline: {'; '.join(sorted({identity.describe(k) for k in base}))}; current: "
            f"{'; '.join(sorted({identity.describe(k) for k in cur}))})")
    verdicts: list[Verdict] = []
    for metric in metrics:
        verdicts += compare_metric(metric, base, cur, threshold, alpha, allow_missing,
                                   min_launches)
    verdicts.sort(key=lambda v: SEVERITY[v.verdict])  # stable: key order within a verdict
    warnings = (tuple(input_warnings) + tuple(sweep_warnings(baseline, "baseline"))
                + tuple(sweep_warnings(current, "current")))
    return Comparison(tuple(verdicts), tuple(environment_warnings(baseline, current)), threshold,
                      alpha, metrics, baseline_label, current_label, warnings, min_launches)


# ---------------------------------------------------------------- rendering (separate from judging)

def _value(metric: str, s: stats.Summary | None) -> str:
    if s is None:
        return "–"
    if metric == "efficiency":
        text = f"{100 * s.mean:.1f}%"
        if s.ci_low is not None:
            text += f" [{100 * s.ci_low:.1f}–{100 * s.ci_high:.1f}]"
    else:
        text = f"{s.mean:.4g}"
        if s.ci_low is not None:
            text += f" [{s.ci_low:.4g}–{s.ci_high:.4g}]"
    if s.noisy:
        text += " noisy"
    return text


def _test(v: Verdict) -> str:
    if not v.test:
        return "–"
    if v.p_value is not None:
        return f"{v.test} p={v.p_value:.3g}"
    return v.test


def _cells(v: Verdict) -> list[str]:
    change = "–" if v.change_pct is None else f"{v.change_pct:+.1f}%"
    return [v.verdict.upper() if v.verdict in GATING else v.verdict, v.metric, v.config,
            _value(v.metric, v.baseline), _value(v.metric, v.current), change, _test(v),
            "; ".join((v.reason,) + v.notes)]


HEADER = ["verdict", "metric", "configuration", "baseline", "current", "change", "test", "why"]


GATING_WORDS = {"regression": ("regression", "regressions"),
                "failed": ("run failed (ok in the baseline)", "runs failed (ok in the baseline)"),
                "refused": ("row with too few launches", "rows with too few launches")}


def summary_line(c: Comparison) -> str:
    counts = ", ".join(f"{v}: {c.count(v)}" for v in VERDICTS if c.count(v))
    failing = [f"{c.count(v)} {GATING_WORDS[v][c.count(v) != 1]}" for v in GATING if c.count(v)]
    outcome = f"FAILED: {', '.join(failing)}" if failing else "passed: no regression"
    settings = f"threshold {c.threshold:g}%, alpha {c.alpha:g}" + \
        (f", min launches {c.min_launches}" if c.min_launches > 1 else "")
    return f"{outcome} ({counts}; {settings})"


def render_text(c: Comparison) -> str:
    lines = [f"scalebench compare: {c.baseline_label} -> {c.current_label} "
             f"(metrics {', '.join(c.metrics)}; threshold {c.threshold:g}%, alpha {c.alpha:g})"]
    lines += [f"warning: {w}" for w in c.input_warnings]
    if c.env_warnings:
        lines.append("WARNING: the environments differ; changes may come from the environment, "
                     "not the code:")
        lines += [f"  {w}" for w in c.env_warnings]
    rows = [HEADER] + [_cells(v) for v in c.verdicts]
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADER) - 1)]
    for r in rows:
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=False))
                     + "  " + r[-1])
    lines.append(summary_line(c))
    for v in c.gating:
        what = f"{v.change_pct:+.1f}% ({_test(v)})" if v.verdict == "regression" else v.reason
        lines.append(f"  {v.verdict}: {v.metric} of {v.config}: {what}")
    return "\n".join(lines)


def _md(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_markdown(c: Comparison) -> str:
    lines = ["## scalebench compare", "",
             f"**{_md(summary_line(c))}**", "",
             f"Baseline `{_md(c.baseline_label)}`, current `{_md(c.current_label)}`. A regression "
             f"is worse by more than {c.threshold:g}% *and* significant (Mann-Whitney U at alpha "
             f"{c.alpha:g} where the sample counts allow it, else non-overlapping "
             f"{stats.intervals_test(c.alpha)}), on per-process means where both sides have two "
             "or more launches of a configuration, else on trials. A run ok in the baseline that "
             "failed or timed out in the current set fails the gate too"
             + (f", and so does a configuration with fewer than {c.min_launches} launches on "
                "either side" if c.min_launches > 1 else "") + ".",
             ""]
    if c.env_warnings:
        lines += ["> **Warning: the environments differ**; changes may come from the environment:",
                  ">"] + [f"> - {_md(w)}" for w in c.env_warnings] + [""]
    if c.input_warnings:
        lines += [f"- input: {_md(w)}" for w in c.input_warnings] + [""]
    lines += ["| " + " | ".join(HEADER) + " |", "|---|---|---|---:|---:|---:|---|---|"]
    for v in c.verdicts:
        cells = _cells(v)
        if v.verdict in GATING:
            cells[0] = f"**{cells[0]}**"
        lines.append("| " + " | ".join(_md(x) for x in cells) + " |")
    lines.append("")
    return "\n".join(lines)
