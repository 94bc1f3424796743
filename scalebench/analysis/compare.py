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

A broken measurement is never an absent one. An invalid record (records.validity: a line that
does not parse, a missing field, a non-finite or non-positive value, a count that disagrees with
its samples) on the current side is a verdict of its own, `invalid`, naming file, line and
reason, for its configuration (and for the efficiency rows that take it as their one-worker run),
or as "an unidentifiable record" where its configuration cannot be read; it fails the gate like a
failed run. On the baseline side it refuses the rows it belongs to (`refused`: not judged against
garbage), which fails the gate too. A configuration of the baseline that the current side lacks
stays `missing` and passes, but the summary counts and names the missing configurations, and
`require_all` fails the gate on them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from scalebench.analysis import aggregate, disturbance, stats
from scalebench.hardware import topology
from scalebench.hardware.envinfo import HARDWARE_FIELDS
from scalebench.records.validity import Invalid
from scalebench.spec import identity
from scalebench.spec.errors import UserError

# Settings outside the configuration key that still change the numbers: a row notes when they
# differ. (Which records are the same configuration is identity.config_key's answer.)
# `step`: the step rules (e.g. the one-worker step unwrapped); `math`: the fp32 math measured.
SETTING_FIELDS = ("warmup", "iters", "threads_per_worker", "aux_logits", "options", "step", "math")
METRICS = ("throughput", "efficiency")
VERDICTS = ("regression", "failed", "invalid", "refused", "improvement", "unchanged", "new",
            "missing")
GATING = ("regression", "failed", "invalid", "refused")  # verdicts that fail the gate (exit 1)
ALL_METRICS = "all"  # the metric of an invalid record whose configuration cannot be read
BROKEN = ("failed", "timeout")  # statuses that are a failure; "skipped" is not
RunIndex = dict[tuple, aggregate.Runs]  # configuration key -> its runs
InvalidIndex = dict[tuple | None, list[Invalid]]  # configuration key (None: unknown) -> records


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
    diff = stats.difference_of(base, cur, alpha, ("baseline", "current"))
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
        return identity.describe(self.key) if self.key else "an unidentifiable record"


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


def disturbed_notes(keys: Sequence[tuple], base: RunIndex, cur: RunIndex) -> list[str]:
    """Each side's disturbed launches of these configurations (analysis/disturbance.py), named
    with the cause; a one-worker baseline among them as such."""
    out = []
    for key in keys:
        for label, side in (("baseline", base), ("current", cur)):
            text = disturbance.launches_text(side[key].ok) if key in side else ""
            if text:
                out.append(f"{label}{'' if key == keys[0] else ' one-worker run'} disturbed: "
                           f"{text}")
    return out


def _undisturbed(runs: RunIndex, keys: Sequence[tuple]) -> RunIndex:
    """The index with only the undisturbed ok launches of these configurations."""
    out = dict(runs)
    for key in keys:
        if key in runs and runs[key].ok:
            ok = disturbance.clean(runs[key].ok)
            out[key] = dataclasses.replace(runs[key], ok=ok, newest_ok=ok[-1] if ok else None)
    return out


def only_disturbed(metric: str, key: tuple, keys: Sequence[tuple], base: RunIndex,
                   cur: RunIndex, j: Judgement, threshold: float, alpha: float) -> str:
    """A regression or improvement that the undisturbed launches alone do not show: that, in
    words ("" when they show it too, or nothing was disturbed)."""
    if j.verdict not in ("regression", "improvement") or not any(
            disturbance.is_disturbed(r) for side in (base, cur) for k in keys if k in side
            for r in side[k].ok):
        return ""
    b, _, _ = metric_samples(metric, key, _undisturbed(base, keys))
    c, _, _ = metric_samples(metric, key, _undisturbed(cur, keys))
    if b is None or c is None:
        return (f"only disturbed samples show this {j.verdict}: the "
                f"{'baseline' if b is None else 'current'} side has no undisturbed launch")
    clean = judge(b, c, threshold, alpha)
    if clean.verdict == j.verdict:
        return ""
    return (f"only disturbed samples show this {j.verdict}: without the disturbed launches it "
            f"is {clean.verdict} ({clean.reason})")


def is_train(invalid: Invalid) -> bool:
    """Whether an invalid record may be a train record: compare judges those (a line that did
    not parse, or a record of kind train or of no readable kind)."""
    return invalid.record is None or invalid.record.get("kind") in ("train", None)


def index_invalid(invalid: Iterable[Invalid]) -> InvalidIndex:
    """Invalid train records by configuration key (None: the configuration cannot be read)."""
    out: InvalidIndex = {}
    for item in invalid:
        if is_train(item):
            out.setdefault(item.key, []).append(item)
    return out


def _one_worker_key(key: tuple, runs: Sequence[RunIndex], bad: Sequence[InvalidIndex]
                    ) -> tuple | None:
    """The key of the one-worker run an efficiency row of `key` is taken against, read from
    any record of the configuration, valid or not."""
    for side in runs:
        if key in side:
            return identity.baseline_key(side[key].last)
    return next((i.baseline_key for side in bad for i in side.get(key, ())
                 if i.baseline_key is not None), None)


def _named(label: str, key: tuple, found: Sequence[tuple[tuple, Invalid]]) -> str:
    return "; ".join(f"{label}{'' if k == key else ' one-worker run'}: invalid record "
                     f"{i.where}: {i.reason}" for k, i in found)


def invalid_verdict(metric: str, key: tuple, base: RunIndex, cur: RunIndex,
                    bad_base: InvalidIndex, bad_cur: InvalidIndex) -> Verdict | None:
    """The row of a configuration that an invalid record touches (its own, or for efficiency its
    one-worker run's): `invalid` when one is on the current side, `refused` when only the
    baseline has one; None when none does."""
    related = [key]
    if metric == "efficiency":
        one = _one_worker_key(key, (cur, base), (bad_cur, bad_base))
        related += [one] if one is not None and one != key else []
    found_b = [(k, i) for k in related for i in bad_base.get(k, ())]
    found_c = [(k, i) for k in related for i in bad_cur.get(k, ())]
    if not found_b and not found_c:
        return None
    b, _, _ = metric_samples(metric, key, base)
    c, _, _ = metric_samples(metric, key, cur)
    b_sum = b.summary() if b is not None else None
    if found_c:
        reason = "; ".join(x for x in (_named("current", key, found_c),
                                       _named("baseline", key, found_b)) if x)
        return Verdict(metric, key, "invalid", b_sum, None, None, "", None,
                       f"{reason}: a broken measurement fails the gate")
    return Verdict(metric, key, "refused", b_sum, c.summary() if c is not None else None, None,
                   "", None, f"{_named('baseline', key, found_b)}: not judged against a broken "
                   "measurement")


def unidentified_verdicts(bad_base: InvalidIndex, bad_cur: InvalidIndex) -> list[Verdict]:
    """One row per invalid record whose configuration cannot be read (a line cut short, say):
    `invalid` on the current side, `refused` on the baseline side; both fail the gate."""
    rows = [Verdict(ALL_METRICS, (), "invalid", None, None, None, "", None,
                    f"current: invalid record {i.where}: {i.reason}: its configuration "
                    "cannot be read, so any row may stand on a broken measurement")
            for i in bad_cur.get(None, ())]
    return rows + [Verdict(ALL_METRICS, (), "refused", None, None, None, "", None,
                           f"baseline: invalid record {i.where}: {i.reason}: its "
                           "configuration cannot be read, so any row may be judged against a "
                           "broken measurement")
                   for i in bad_base.get(None, ())]


def compare_metric(metric: str, base: RunIndex, cur: RunIndex, threshold: float, alpha: float,
                   allow_missing: bool = False, min_launches: int = 1,
                   bad_base: InvalidIndex | None = None, bad_cur: InvalidIndex | None = None
                   ) -> list[Verdict]:
    """The verdicts of one metric for every configuration of either side (invalid records
    included: index_invalid)."""
    bad_base, bad_cur = bad_base or {}, bad_cur or {}
    verdicts = []
    keys = set(base) | set(cur) | {k for k in (*bad_base, *bad_cur) if k is not None}
    for key in sorted(keys, key=lambda k: tuple(str(v) for v in k)):
        if metric == "efficiency" and identity.key_dict(key)["world_size"] == 1:
            continue  # a one-worker run is its own reference: efficiency 1 by definition
        broken = invalid_verdict(metric, key, base, cur, bad_base, bad_cur)
        if broken is not None:
            verdicts.append(broken)
            continue
        b, b_why, _ = metric_samples(metric, key, base)
        c, c_why, failed = metric_samples(metric, key, cur)
        if b is None and c is None:
            continue  # neither side has anything to say about this row
        if b is None:
            verdicts.append(Verdict(metric, key, "new", None, c.summary(), None, "", None,
                                    f"baseline: {b_why}; current {c.describe()}"))
            continue
        if c is None:
            verdict = "failed" if failed and not allow_missing else "missing"
            unread = len(bad_cur.get(None, ()))
            notes = (f"current holds {unread} invalid record{'s' if unread != 1 else ''} whose "
                     "configuration cannot be read; this one may be among them",) if unread else ()
            verdicts.append(Verdict(metric, key, verdict, b.summary(), None, None, "",
                                    None, f"current: {c_why}; baseline {b.describe()}", notes))
            continue
        keys = (key,) if metric == "throughput" else \
            (key, identity.baseline_key(cur[key].newest_ok))
        notes = warning_notes(keys, base, cur) + tuple(disturbed_notes(keys, base, cur)) + \
            _setting_notes(key, base, cur)
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
        shown_by = only_disturbed(metric, key, keys, base, cur, j, threshold, alpha)
        within = caveat(j, b, c, "the code")
        notes = (within,) + notes if within else notes
        if metric == "efficiency" and j.verdict in ("regression", "improvement"):
            moved = baseline_moved(key, base, cur, threshold, alpha)
            notes = (moved,) + notes if moved else notes
        d = j.difference
        verdicts.append(Verdict(metric, key, j.verdict, b.summary(d.basis), c.summary(d.basis),
                                j.change_pct, d.test, d.p_value,
                                (f"{shown_by}; " if shown_by else "")
                                + f"{j.reason}; {d.reason}; {d.samples}", notes, d.basis))
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
    require_all: bool = False  # a missing configuration fails the gate too

    @property
    def regressions(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.verdict == "regression"]

    @property
    def gating_verdicts(self) -> tuple[str, ...]:
        return GATING + (("missing",) if self.require_all else ())

    @property
    def gating(self) -> list[Verdict]:
        """Every verdict that fails the gate: regressions, runs that failed where the baseline's
        were ok, invalid records, refused rows (too few launches, an invalid baseline record),
        and with require_all missing configurations."""
        return [v for v in self.verdicts if v.verdict in self.gating_verdicts]

    @property
    def missing(self) -> list[str]:
        """The configurations the current side lacks, in words, each once: those with a missing
        throughput row (an efficiency row is also missing where only its one-worker run is),
        or without throughput among the metrics, a missing efficiency row."""
        metric = "throughput" if "throughput" in self.metrics else "efficiency"
        return list(dict.fromkeys(v.config for v in self.verdicts
                                  if v.verdict == "missing" and v.metric == metric))

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
            allow_missing: bool = False, min_launches: int = 1,
            invalid_baseline: Sequence[Invalid] = (), invalid_current: Sequence[Invalid] = (),
            require_all: bool = False) -> Comparison:
    """Verdicts for every configuration in either set, for each metric; nothing is printed.
    allow_missing: a current run that failed or timed out is `missing`, not `failed`.
    min_launches: configurations with fewer ok launches on either side are `refused`.
    invalid_baseline / invalid_current: each side's invalid records (results.load's second
    value): `refused` / `invalid` rows, never absences. require_all: `missing` fails the gate."""
    check_settings(threshold, alpha, min_launches)
    if allow_missing and require_all:
        raise UserError("--allow-missing and --require-all contradict each other: one lets a "
                        "configuration be missing, the other fails on it; give one of them")
    metrics = parse_metrics(metrics)
    base, cur = index_runs(baseline), index_runs(current)
    bad_base, bad_cur = index_invalid(invalid_baseline), index_invalid(invalid_current)
    for label, runs, bad in ((baseline_label, base, bad_base), (current_label, cur, bad_cur)):
        if not runs and not bad:
            raise UserError(f"{label}: no train records to compare")
    shared = (set(base) | set(bad_base)) & (set(cur) | set(bad_cur)) - {None}
    if not shared and not (bad_base.get(None) or bad_cur.get(None)):
        raise UserError(
            f"no configuration appears in both {baseline_label} and {current_label}; nothing to "
            f"compare (baseline: {'; '.join(sorted({identity.describe(k) for k in base}))}; current: "
            f"{'; '.join(sorted({identity.describe(k) for k in cur}))})")
    verdicts: list[Verdict] = unidentified_verdicts(bad_base, bad_cur)
    for metric in metrics:
        verdicts += compare_metric(metric, base, cur, threshold, alpha, allow_missing,
                                   min_launches, bad_base, bad_cur)
    verdicts.sort(key=lambda v: SEVERITY[v.verdict])  # stable: key order within a verdict
    others = [f"{label}: {i}" for label, side in (("baseline", invalid_baseline),
                                                   ("current", invalid_current))
              for i in side if not is_train(i)]
    warnings = (tuple(input_warnings) + tuple(others) + tuple(sweep_warnings(baseline, "baseline"))
                + tuple(sweep_warnings(current, "current")))
    return Comparison(tuple(verdicts), tuple(environment_warnings(baseline, current)), threshold,
                      alpha, metrics, baseline_label, current_label, warnings, min_launches,
                      require_all)


# ---------------------------------------------------------------- rendering (separate from judging)

def _value(metric: str, s: stats.Summary | None) -> str:
    from scalebench.report.format import with_interval  # rendering only: the report is heavy

    if s is None:
        return "–"
    text = with_interval(s.mean, s.ci_low, s.ci_high, metric == "efficiency", s.too_noisy)
    if s.noisy:
        text += " noisy"
    return text


def _test(v: Verdict) -> str:
    if not v.test:
        return "–"
    if v.p_value is not None:
        return f"{v.test} p={v.p_value:.3g}"
    return v.test


def _cells(v: Verdict, gating: Sequence[str] = GATING) -> list[str]:
    change = "–" if v.change_pct is None else f"{v.change_pct:+.1f}%"
    return [v.verdict.upper() if v.verdict in gating else v.verdict, v.metric, v.config,
            _value(v.metric, v.baseline), _value(v.metric, v.current), change, _test(v),
            "; ".join((v.reason,) + v.notes)]


HEADER = ["verdict", "metric", "configuration", "baseline", "current", "change", "test", "why"]


GATING_WORDS = {"regression": ("regression", "regressions"),
                "failed": ("run failed (ok in the baseline)", "runs failed (ok in the baseline)"),
                "invalid": ("row on an invalid record", "rows on invalid records"),
                "missing": ("row missing (--require-all)", "rows missing (--require-all)")}


def _refused_words(c: Comparison) -> tuple[str, str]:
    """What the refused rows were refused for: too few launches, an invalid baseline record."""
    refused = [v.reason for v in c.verdicts if v.verdict == "refused"]
    why = [w for w, hit in (("too few launches", any(r.startswith("not judged:") for r in refused)),
                            ("an invalid baseline record",
                             any("invalid record" in r for r in refused))) if hit]
    if why == ["too few launches"]:
        return "row with too few launches", "rows with too few launches"
    text = " or ".join(why)
    return f"row refused ({text})", f"rows refused ({text})"


def missing_head(c: Comparison) -> str:
    """How many configurations of the baseline the current side lacks, and what the gate does
    about them ("" when none is missing)."""
    n = len(c.missing)
    if not n:
        return ""
    verb = "fails" if c.require_all else "allowed; --require-all fails"
    return (f"{n} configuration{'s' if n != 1 else ''} missing from {c.current_label} "
            f"({verb} on {'it' if n == 1 else 'them'})")


def missing_text(c: Comparison) -> str:
    """missing_head with the configurations named ("" when none is missing)."""
    return f"{missing_head(c)}: {'; '.join(c.missing)}" if c.missing else ""


def summary_line(c: Comparison) -> str:
    counts = ", ".join(f"{v}: {c.count(v)}" for v in VERDICTS if c.count(v))
    words = {**GATING_WORDS, "refused": _refused_words(c)}
    failing = [f"{c.count(v)} {words[v][c.count(v) != 1]}" for v in c.gating_verdicts
               if c.count(v)]
    outcome = f"FAILED: {', '.join(failing)}" if failing else "passed: no regression"
    settings = f"threshold {c.threshold:g}%, alpha {c.alpha:g}" + \
        (f", min launches {c.min_launches}" if c.min_launches > 1 else "") + \
        (", --require-all" if c.require_all else "")
    missing = missing_text(c)
    return f"{outcome} ({counts}; {settings})" + (f"; {missing}" if missing else "")


def aligned(rows: list[list[str]]) -> list[str]:
    """Text table lines: every column padded to its widest cell but the last, which runs on
    (compare, gate and history detect print their tables so)."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=False)) + "  " + r[-1]
            for r in rows]


def render_text(c: Comparison) -> str:
    lines = [f"scalebench compare: {c.baseline_label} -> {c.current_label} "
             f"(metrics {', '.join(c.metrics)}; threshold {c.threshold:g}%, alpha {c.alpha:g})"]
    lines += [f"warning: {w}" for w in c.input_warnings]
    if c.env_warnings:
        lines.append("WARNING: the environments differ; changes may come from the environment, "
                     "not the code:")
        lines += [f"  {w}" for w in c.env_warnings]
    lines += aligned([HEADER] + [_cells(v, c.gating_verdicts) for v in c.verdicts])
    lines.append(summary_line(c))
    for v in c.gating:
        what = f"{v.change_pct:+.1f}% ({_test(v)})" if v.verdict == "regression" else v.reason
        lines.append(f"  {v.verdict}: {v.metric + ' of ' if v.key else ''}{v.config}: {what}")
    return "\n".join(lines)


def md_cell(text: object) -> str:
    """Text made safe for one markdown table cell (compare, gate and history detect share it)."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_markdown(c: Comparison) -> str:
    lines = ["## scalebench compare", "",
             f"**{md_cell(summary_line(c))}**", "",
             f"Baseline `{md_cell(c.baseline_label)}`, current `{md_cell(c.current_label)}`. A regression "
             f"is worse by more than {c.threshold:g}% *and* significant (Mann-Whitney U at alpha "
             f"{c.alpha:g} where the sample counts allow it, else non-overlapping "
             f"{stats.intervals_test(c.alpha)}), on per-process means where both sides have two "
             "or more launches of a configuration, else on trials. A run ok in the baseline that "
             "failed or timed out in the current set fails the gate too, and so does an invalid "
             "record (a line cut short, a missing field, a non-finite or non-positive value, a "
             "count that disagrees with its samples) on either side"
             + (f", and a configuration with fewer than {c.min_launches} launches on either side"
                if c.min_launches > 1 else "")
             + (", and a configuration of the baseline missing from the current set"
                if c.require_all else "") + ".",
             ""]
    if c.env_warnings:
        lines += ["> **Warning: the environments differ**; changes may come from the environment:",
                  ">"] + [f"> - {md_cell(w)}" for w in c.env_warnings] + [""]
    if c.input_warnings:
        lines += [f"- input: {md_cell(w)}" for w in c.input_warnings] + [""]
    if c.missing:
        lines += [f"**{md_cell(missing_head(c))}:**", ""] + \
            [f"- {md_cell(name)}" for name in c.missing] + [""]
    lines += ["| " + " | ".join(HEADER) + " |", "|---|---|---|---:|---:|---:|---|---|"]
    for v in c.verdicts:
        cells = _cells(v, c.gating_verdicts)
        if v.verdict in c.gating_verdicts:
            cells[0] = f"**{cells[0]}**"
        lines.append("| " + " | ".join(md_cell(x) for x in cells) + " |")
    lines.append("")
    return "\n".join(lines)
