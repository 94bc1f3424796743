"""The report's content, computed once: `build(records, problems)` -> ReportModel.

report.md and report.html are two renderers of this one object and carry the same sections
(`ReportModel.sections`). Everything numeric or decided (efficiencies, scaling-model bounds,
which framework is significantly slower, where the efficiency went: report.losses) is settled
here; renderers only format and escape.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from scalebench.analysis import aggregate, disturbance, scaling_model, stats
from scalebench.records.results import Problem
from scalebench.records.validity import Invalid
from scalebench.report import best as best_model
from scalebench.report import energy as energy_model
from scalebench.report import losses as losses_model
from scalebench.report import mfu as mfu_model
from scalebench.report.format import pct, plural
from scalebench.report.labels import MODEL_NAMES, group_title, run_label, series_label
from scalebench.report.labels import framework_label as framework_label  # re-exported
from scalebench.report.labels import step_label as step_label  # re-exported
from scalebench.report.labels import workers_label as workers_label  # re-exported
from scalebench.spec import identity, units

TITLE = "scalebench report"
# Horovod's published efficiencies at 512 GPUs (fp32).
PUBLISHED_HOROVOD = {"inception_v3": 0.90, "resnet101": 0.90, "vgg16": 0.68}
PUBLISHED_WORKERS = 512
PUBLISHED_SETUP = ("128 servers x 4 Pascal GPUs, 25 Gbit/s RoCE, batch 64 per GPU, "
                   "synthetic data (Sergeev and Del Balso, 2018)")
SUPERLINEAR = 1.10  # efficiency above this is worth a word of explanation
STATUSES = ("ok", "failed", "timeout", "skipped")


@dataclass(frozen=True)
class Section:
    """One section of both reports. Paragraphs are plain text; **x** marks bold."""

    key: str  # anchor in the HTML page
    title: str
    paragraphs: tuple[str, ...] = ()


WRAPPER_TITLE = "DDP's wrapper at one worker"
WRAPPER_TEXT = ("The one-worker step timed plainly and timed with the model wrapped in "
                "DistributedDataParallel (bucket copies, a one-rank allreduce), as PyTorch's DDP "
                "benchmark reports \"no ddp\" against DDP on one GPU. Efficiency is taken "
                "against the plain step; the overhead is 1 - wrapped / unwrapped.")

INPUT_PROBLEMS, HEADLINE, FIGURES, PUBLISHED, FRAMEWORKS, BREAKDOWN, SCALING_MODEL, ALLREDUCE, \
    PROBLEMS, ENVIRONMENT, METHOD = (
        "input-problems", "headline", "figures", "published", "frameworks", "breakdown",
        "scaling-model", "allreduce", "problems", "environment", "method")
BREAKDOWN_TITLE = "Where the efficiency went"
BREAKDOWN_TEXT = (
    "The ideal is N × the same configuration's one-worker throughput. Each multi-worker run also "
    "timed windows of the same step without gradient synchronisation and the time each rank "
    "waited for batches; differences of measured throughputs split the gap to ideal into "
    "**shared-host contention** (the compute-only throughput at N below ideal), **exposed "
    "communication** (the slowest rank's synced step against its unsynced one), **straggler** "
    "(the slowest rank against the median rank) and **input wait** (blocked on the input "
    "pipeline); under strong scaling, the **per-worker batch effect** (each worker's smaller "
    "batch: N × the one-worker run at the per-worker batch against ideal) is its own part, or "
    "is named as not separable from contention when the sweep has no such one-worker run. "
    "Every throughput is the same kind of mean as the headline's: the mean over trials of "
    "each trial's images per second, so identical windows give a part of exactly 0. With the "
    "measured efficiency the parts add up to 100% of ideal; noise shows as a small negative "
    "part. A row uses the launches behind the headline's row that have no-sync windows, each "
    "against the same round's one-worker launch, and says how many; its efficiency and "
    "interval are the headline's paired ones, the parts' intervals are 95% over launches (none "
    "with one launch). The verdict ranks the frameworks by the throughput they deliver at the "
    "largest worker count and names a framework whose own one-worker run is more than "
    f"{aggregate.SLOW_BASELINE:.0%} slower than the best one, since that flatters its own "
    "efficiency.",
    "**Distance to the limit**: the bus bandwidth a ring allreduce of the run's gradients (its "
    "parameter count, fp32 or fp16 as its options say) would need to take exactly the exposed "
    "communication time, as a share of the link's allreduce bandwidth fitted from the allreduce "
    "records of the same framework (`--with-allreduce`). Above 100%, part of the allreduce was "
    "hidden behind the backward pass; below, the exposed communication ran slower than the "
    "link allows.",
    "**Extrapolation check**: the scaling model's prediction for the largest worker count "
    "measured, made only from the one-worker run and the allreduce measurements: the midpoint "
    "of its no-overlap and full-overlap bounds (both shown). Model error = measured − "
    "predicted efficiency, in percentage points.")


def sections(has_input_problems: bool, alpha: float) -> tuple[Section, ...]:
    """Every section of the report, in order; input problems only when there are some."""
    noisy = f"{stats.NOISY_REL_STD:.0%}"
    return tuple(s for s in (
        Section(INPUT_PROBLEMS, "Input problems") if has_input_problems else None,
        Section(HEADLINE, "Throughput and scaling efficiency"),
        Section(FIGURES, "Figures"),
        Section(PUBLISHED, "Horovod's published points", (
            "Horovod's published scaling efficiencies, drawn as dotted red lines on the "
            f"efficiency figure for reference. Their hardware: {PUBLISHED_SETUP}. A different "
            "cluster, network and worker count: a reference point, not a target.",)),
        Section(FRAMEWORKS, "Framework vs framework", (
            "At each worker count, every framework against the fastest one. Whether a gap is real "
            "is decided on per-process means where both runs were launched two or more times, "
            "else on their trials: Mann-Whitney U (two-sided, alpha "
            f"{alpha:g}) where the sample counts let it reach significance, else non-overlapping "
            f"{stats.intervals_test(alpha)}.",)),
        Section(best_model.KEY, best_model.TITLE, best_model.TEXT),
        Section(mfu_model.KEY, mfu_model.TITLE, mfu_model.TEXT),
        Section(energy_model.KEY, energy_model.TITLE, energy_model.TEXT),
        Section(BREAKDOWN, BREAKDOWN_TITLE, BREAKDOWN_TEXT),
        Section(SCALING_MODEL, "Scaling model", (
            "Bounds on efficiency from each run's one-worker step time and a ring allreduce of "
            "its gradients over the measured link: no overlap = compute + allreduce, full "
            "overlap = forward + max(backward, allreduce), backward = 2 x forward "
            "(docs/scaling-model.md).",)),
        Section(ALLREDUCE, "Allreduce", (
            "Each framework's own allreduce per message size: algbw = bytes / time, busbw = "
            "algbw x 2(N-1)/N (as nccl-tests). Warm-up, trials and 95% intervals as for the "
            "training runs; a trial's time is the slowest rank's.",)),
        Section(PROBLEMS, "Failed, timed-out, invalid and skipped runs"),
        Section(ENVIRONMENT, "Environment"),
        Section(METHOD, "Method", (
            "**Weak scaling** (the default): each worker keeps the same batch, so the global "
            "batch grows with the number of workers, as in Horovod's and TensorFlow's "
            "benchmarks. **Strong scaling**: the global batch is fixed and split across the "
            "workers, so each worker gets less work as workers are added.",
            "Every framework runs the same training step on the same synthetic data with the same "
            "model code. Each run first does untimed **warm-up** steps (memory allocation, "
            "autotuning, caches), then several **trials**: timed windows of a fixed number of "
            "steps. Each window starts after a device sync and a barrier on all workers and ends "
            "with a device sync. A trial's throughput is all workers' images divided by the "
            "slowest worker's window time, so a straggler counts.",
            "The **95% interval** is a Student-t confidence interval of the mean: it says how well "
            "the mean throughput is known, not how much single trials spread. When a "
            "configuration was launched two or more times (`--repeats`, each launch a separate "
            "process), the samples are the per-process means, one per launch, because trials "
            "inside one process share its placement, clocks and allocator state; with one launch "
            "they are its trials. Each run says which samples stand behind it. Few samples "
            "give wide intervals. Images/s and efficiency are never below zero, and neither is "
            "their interval: it is taken on the log scale (the Student-t spread of the samples' "
            "logarithms around the value), and where its ends would lie more than 10 times "
            "apart, or a sample is not above zero, the report says **too noisy to bound** and "
            "why (\"1 of 3 trials 17x slower\") instead of giving bounds. "
            "Efficiency is paired: each launch of an N-worker run against the "
            "same round's launch of its one-worker run (trial i against trial i with one "
            "launch), so drift that moves both alike cancels; its value is the mean of the "
            "per-launch ratios and its interval that of the paired samples' log ratios, the same "
            "in the tables, the figures, the breakdown, the scaling model's verdict and compare.",
            "**Efficiency** = throughput(N) / (N × throughput(1)): 100% is perfect linear "
            "scaling. It is taken against the same framework's one-worker run and, in \"vs best "
            "1-worker\", against the fastest one-worker run of any framework, which keeps a slow "
            "single-worker baseline from flattering a framework; the headline names a framework "
            f"whose own one-worker run is more than {aggregate.SLOW_BASELINE:.0%} slower than "
            "the best. A run is flagged **noisy** when "
            f"the standard deviation of its samples (trials, or launches) exceeds {noisy} of its "
            "mean; treat its numbers with care, or re-run with more trials or launches.",
            "A run is flagged **disturbed**, with the cause, when during its timed windows other "
            "processes or the hypervisor (steal time) took at least "
            f"{disturbance.OTHER_CORES:g} of a CPU on the node, or a GPU was throttled (power cap, "
            "thermal or hardware slowdown) or shared with another process; read at the edges of "
            "every window, never inside it (docs/disturbance.md). A row whose one-worker "
            "baseline was disturbed says so too: its efficiency carries that run's loss.",
            "At one worker every framework times the plain, unwrapped step; DDP's one-worker run "
            "also times the DDP-wrapped step, and the difference is shown as the wrapper's "
            "overhead. **fp32 (TF32)** marks CUDA runs whose fp32 convolutions or matrix "
            "products ran in TF32, as measured in the worker; runs with different TF32 settings "
            "are different configurations.")),
    ) if s is not None)


# ---------------------------------------------------------------- notes on a row (both renderers)

def spread_words(row: dict) -> str:
    """What a row's noise is measured across."""
    return "from launch to launch" if row.get("samples_basis") == stats.PROCESSES \
        else "from trial to trial"


def flags(row: dict) -> list[tuple[str, str, str]]:
    """(kind, text, explanation) for what a reader should notice about a summary row."""
    out = []
    if row.get("launches_text"):
        out.append(("launches", row["launches_text"],
                    "some launches of this configuration did not finish; the numbers come from "
                    "the others"))
    if row["noisy"]:
        out.append(("noisy", f"noisy ({pct(row['rel_std'])})",
                    f"standard deviation {spread_words(row)} above {stats.NOISY_REL_STD:.0%} of "
                    f"the mean ({row.get('samples_text', '')})"))
    if row.get("warnings"):
        out.append(("warning", plural(len(row["warnings"]), "warning"), "; ".join(row["warnings"])))
    if row["efficiency"] is not None and row["efficiency"] > SUPERLINEAR:
        out.append(("superlinear", "superlinear",
                    "more than linear: the one-worker run was slower per worker than this one"))
    out += disturbed_flags(row)
    return out


def disturbed_flags(row: dict) -> list[tuple[str, str, str]]:
    """The cause beside the flags: what disturbed this row's windows, and its efficiency's
    one-worker run's (aggregate.summary_rows: disturbance, baseline_disturbance)."""
    out = []
    if row.get("disturbed"):
        out.append(("disturbed", f"disturbed: {row['disturbance']}",
                    "other work on the node or GPU during the timed windows "
                    "(docs/disturbance.md); re-run on a quiet machine or with --strict"))
    if row.get("baseline_disturbance"):
        out.append(("disturbed", f"baseline disturbed: {row['baseline_disturbance']}",
                    "the one-worker run this row's efficiency is taken against was disturbed"))
    return out


# ---------------------------------------------------------------- the model's parts

@dataclass(frozen=True)
class Group:
    """One scaling series (identity.series_key) across frameworks and worker counts."""

    key: tuple
    title: str
    labels: tuple[str, ...]  # one line per framework x precision x step options
    rows: tuple[dict, ...]  # summary rows, by workers then label
    headline: str = ""  # group_headline: the lines ranked at the largest worker count


@dataclass(frozen=True)
class Compared:
    row: dict
    vs_fastest: float  # throughput / the fastest's at the same worker count
    difference: stats.Difference | None  # to the fastest; None for the fastest itself
    caveat: str = ""  # a significant gap from one launch on either side holds within them only

    @property
    def fastest(self) -> bool:
        return self.difference is None

    @property
    def verdict(self) -> str:
        if self.difference is None:
            return "fastest"
        d = self.difference
        return (f"slower, significant ({d.test})" if d.significant
                else f"not distinguishable ({d.test})") + f"; {d.samples}" + \
            (f"; {self.caveat}" if self.caveat else "")


@dataclass(frozen=True)
class Comparison:
    group: Group
    entries: tuple[Compared, ...]  # per worker count with two or more lines, fastest first


@dataclass(frozen=True)
class PublishedPoint:
    model: str
    efficiency: float
    workers: int
    measured_workers: int | None  # the largest worker count measured here, if any
    measured: tuple[tuple[str, float], ...]  # (series label, efficiency) at measured_workers

    @property
    def name(self) -> str:
        return MODEL_NAMES.get(self.model, self.model)


@dataclass(frozen=True)
class Modelled:
    """A multi-worker summary row and its scaling_model.model_rows entry."""

    row: dict
    entry: dict

    @property
    def modelled(self) -> bool:
        return self.entry["verdict"] != scaling_model.NOT_MODELLED

    @property
    def link(self) -> str:
        if "link_bandwidth" not in self.entry:
            return ""
        return scaling_model.Link(self.entry["link_bandwidth"], self.entry["link_step_latency"],
                                  self.entry["link_source"]).describe()


@dataclass(frozen=True)
class Failure:
    run: str
    framework: str
    what: str  # the model, or the allreduce message size
    workers: str
    status: str
    reason: str
    stderr_tail: str


@dataclass(frozen=True)
class Environment:
    values: dict
    runs: tuple[str, ...]


@dataclass(frozen=True)
class Environments:
    envs: tuple[Environment, ...]
    fields: tuple[str, ...]  # every field of any environment, in first-seen order
    differing: frozenset[str]
    vettings: tuple[str, ...] = ()  # which nodes a vetting left out, one line per vetting
    placements: tuple[str, ...] = ()  # each worker's CPU affinity, once per distinct line

    @property
    def differing_text(self) -> str:
        """What to say when the runs did not share one environment ("" when they did)."""
        if len(self.envs) < 2:
            return ""
        return (f"Fields that differ are highlighted: {', '.join(sorted(self.differing))}. "
                "Numbers measured in different environments are not directly comparable.")


@dataclass(frozen=True)
class ReportModel:
    title: str
    sections: tuple[Section, ...]
    input_problems: tuple[str, ...]
    record_count: int
    counts: dict[str, int]  # status -> records
    rows: tuple[dict, ...]  # aggregate.summary_rows, computed once
    groups: tuple[Group, ...]
    noisy: tuple[dict, ...]
    published: tuple[PublishedPoint, ...]
    comparisons: tuple[Comparison, ...]
    modelled: tuple[Modelled, ...]
    allreduce: tuple[dict, ...]  # newest ok point per framework x workers x size
    failures: tuple[Failure, ...]
    environments: Environments
    settings: tuple[tuple[str, int, int, int, int], ...]  # (scaling, warmup, trials, iters,
    # repeats) used
    wrapper: tuple[dict, ...] = ()  # one-worker rows that also timed the DDP-wrapped step
    losses: losses_model.Losses = losses_model.Losses(())  # where the efficiency went
    best: tuple[best_model.Cell, ...] = ()  # each framework at its defaults and tuned

    @property
    def counts_text(self) -> str:
        return f"{self.record_count} records: " + ", ".join(
            f"{n} {s}" for s, n in self.counts.items() if n)

    @property
    def noisy_text(self) -> str:
        """The noisy runs, grouped by what they vary across, each with the processes and
        trials behind it."""
        parts = []
        for words in ("from trial to trial", "from launch to launch"):
            runs = [r for r in self.noisy if spread_words(r) == words]
            if runs:
                parts.append(f"{len(runs)} of {len(self.rows)} runs vary by more than "
                             f"{stats.NOISY_REL_STD:.0%} {words}: "
                             + "; ".join(f"{run_label(r)}, {r['samples_text']}" for r in runs))
        return ". ".join(parts) + "."

    @property
    def basis_text(self) -> str:
        """Which samples the rows' statistics came from."""
        counts = {b: sum(1 for r in self.rows if r.get("samples_basis") == b)
                  for b in (stats.PROCESSES, stats.TRIALS)}
        if not self.rows:
            return ""
        return ("Intervals, noise flags and tests in this report: from per-process means for "
                f"{plural(counts[stats.PROCESSES], 'run')} (two or more launches), from trials "
                f"for {plural(counts[stats.TRIALS], 'run')} (one launch).")

    @property
    def only_one_framework_text(self) -> str:
        ran = sorted({series_label(r) for r in self.rows})
        return (f"Only one framework ran at each worker count ({', '.join(ran) or 'none'}); "
                "nothing to compare side by side.")

    @property
    def settings_text(self) -> str:
        if not self.settings:
            return ""
        return "This report: " + "; ".join(
            f"{s} scaling, {plural(w, 'warm-up step')}, {plural(t, 'trial')} of {plural(i, 'step')}"
            + (f", {k} launches of each configuration" if k > 1 else "")
            for s, w, t, i, k in self.settings) + "."


# ---------------------------------------------------------------- building it

def build(records: list[dict], problems: Sequence[Problem | str], link: scaling_model.Link | None = None,
          alpha: float = 0.05, title: str = TITLE) -> ReportModel:
    """Everything the reports show; aggregate.summary_rows is called exactly once."""
    rows = aggregate.summary_rows(records)
    groups = _groups(rows)
    choose = _chooser(records, link)
    modelled = _modelled(rows, choose)
    return ReportModel(
        title=title,
        sections=sections(bool(problems), alpha),
        input_problems=tuple(str(p) for p in problems),
        record_count=len(records) + sum(1 for p in problems if isinstance(p, Invalid)),
        counts={**{s: sum(1 for r in records if r.get("status") == s) for s in STATUSES},
                "invalid": sum(1 for p in problems if isinstance(p, Invalid))},
        rows=tuple(rows),
        groups=groups,
        noisy=tuple(r for r in rows if r["noisy"]),
        published=_published(rows),
        comparisons=_comparisons(groups, alpha),
        modelled=modelled,
        allreduce=tuple(aggregate.latest_allreduce_points(records)),
        failures=_failures(records) + _invalid(problems),
        environments=_environments(records),
        settings=tuple(sorted({(r["scaling"], r["warmup"], r["trials"], r["iters"],
                                r.get("repeats") or 1)
                               for row in rows for r in row["records"]})),
        wrapper=tuple(r for r in rows if r.get("wrapped_images_per_sec") is not None),
        losses=losses_model.build(records, rows, [(x.row, x.entry) for x in modelled], choose,
                             link_measured=link is None),
        best=best_model.build(rows, alpha),
    )


def _line_order(row: dict) -> tuple:
    return (row["world_size"], row["nodes"], series_label(row))


def group_headline(rows: Sequence[dict]) -> str:
    """At a series' largest worker count (one node count), the lines ranked by the throughput
    they deliver, with efficiency against the best one-worker run; and each line there whose
    own one-worker run is much slower than the best one (aggregate.slow_baseline_note). "" with
    nothing to rank or name."""
    multi = [r for r in rows if r["world_size"] > 1]
    if not multi:
        return ""
    top = max((r["world_size"], r["nodes"]) for r in multi)
    at_top = sorted((r for r in multi if (r["world_size"], r["nodes"]) == top),
                    key=lambda r: (-r["images_per_sec"], series_label(r)))
    parts = []
    if len(at_top) > 1:
        def said(r: dict) -> str:
            vs_best = "" if r["efficiency_vs_best"] is None else \
                f" ({r['efficiency_vs_best']:.0%} of ideal against the best one-worker run)"
            return f"{series_label(r)} {r['images_per_sec']:.3g} images/s{vs_best}"
        parts.append(f"At {plural(at_top[0]['world_size'], 'worker')}"
                     + (f" on {at_top[0]['nodes']} nodes" if at_top[0]["nodes"] > 1 else "")
                     + f", ranked by the throughput they deliver: "
                     f"{'; '.join(said(r) for r in at_top)}.")
    parts += [note + "." for note in map(aggregate.slow_baseline_note, at_top) if note]
    return " ".join(parts)


def _groups(rows: list[dict]) -> tuple[Group, ...]:
    by_key: dict[tuple, list[dict]] = {}
    for r in rows:
        by_key.setdefault(identity.series_key(r), []).append(r)
    return tuple(
        Group(key, group_title(key, " / ".join(dict.fromkeys(r["precision_label"]
                                                             for r in members))),
              tuple(sorted({series_label(r) for r in members})),
              tuple(sorted(members, key=_line_order)), group_headline(members))
        for key, members in sorted(by_key.items(), key=lambda kv: tuple(str(v) for v in kv[0])))


def _comparisons(groups: Sequence[Group], alpha: float) -> tuple[Comparison, ...]:
    out = []
    for group in groups:
        per_workers: dict[tuple, list[dict]] = {}
        for r in group.rows:
            per_workers.setdefault((r["world_size"], r["nodes"]), []).append(r)
        entries: list[Compared] = []
        for _, members in sorted(per_workers.items()):
            if len({series_label(r) for r in members}) < 2:
                continue
            members = sorted(members, key=lambda r: -r["images_per_sec"])
            fastest = members[0]
            for r in members:
                difference = None if r is fastest else \
                    stats.difference_of(fastest["samples"], r["samples"], alpha)
                caveat = stats.within_processes_text(fastest["samples"], r["samples"],
                                                     "the frameworks") \
                    if difference is not None and difference.significant else ""
                entries.append(Compared(r, r["images_per_sec"] / fastest["images_per_sec"],
                                        difference, caveat))
        if entries:
            out.append(Comparison(group, tuple(entries)))
    return tuple(out)


def _published(rows: list[dict]) -> tuple[PublishedPoint, ...]:
    out = []
    for model, value in sorted(PUBLISHED_HOROVOD.items()):
        here = [r for r in rows if r["model"] == model and r["efficiency"] is not None
                and r["world_size"] > 1]
        top = max((r["world_size"] for r in here), default=None)
        measured = tuple((series_label(r), r["efficiency"])
                         for r in sorted(here, key=series_label) if r["world_size"] == top)
        out.append(PublishedPoint(model, value, PUBLISHED_WORKERS, top, measured))
    return tuple(out)


def _chooser(records: list[dict], link: scaling_model.Link | None) -> losses_model.Chooser:
    """The scaling model's link for a row: the given one, else fitted from the allreduce
    records among `records` (scaling_model.link_chooser)."""
    if link is not None:
        return lambda row: link
    return scaling_model.link_chooser(scaling_model.links_from_allreduce(records))


def _modelled(rows: list[dict], choose: losses_model.Chooser) -> tuple[Modelled, ...]:
    multi = [r for r in rows if r["world_size"] > 1]
    # One row at a time, so each bound stays paired with the row it belongs to.
    return tuple(Modelled(r, scaling_model.model_rows([r], choose)[0]) for r in multi)


SUPERSEDED = "; this launch also has an ok record, which the tables use"


def _what(r: dict) -> str:
    """The model a record ran, or the allreduce message size it measured."""
    size = r.get("size_bytes")
    return r.get("model") or (f"allreduce {units.format_size(size)}"
                              if r.get("kind") == "allreduce" and isinstance(size, int) else "")


def _failures(records: list[dict]) -> tuple[Failure, ...]:
    """Every record that is not ok; a train launch that also has an ok record (run again, e.g.
    with --resume) says so."""
    ok = {(key, k) for key, runs in aggregate.group_runs(records).items() for k in runs.by_repeat()}
    out = []
    for r in records:
        if r.get("status") == "ok":
            continue
        what = _what(r)
        again = r.get("kind") == "train" and \
            (identity.config_key(r), aggregate.repeat_of(r)) in ok
        out.append(Failure(str(r.get("run_id", r.get("kind"))), str(r.get("framework") or ""),
                           str(what), str(r.get("world_size", "")), str(r.get("status")),
                           str(r.get("error") or "no reason recorded") + (SUPERSEDED if again
                                                                         else ""),
                           str(r.get("stderr_tail") or "")))
    return tuple(out)


def _invalid(problems: Sequence[Problem | str]) -> tuple[Failure, ...]:
    """Every invalid record (records.validity), as a broken run beside the failed ones: what
    could be read of it, and where and why it is invalid."""
    out = []
    for p in problems:
        if not isinstance(p, Invalid):
            continue
        r = p.record or {}
        out.append(Failure(str(r.get("run_id") or p.where), str(r.get("framework") or ""),
                           str(_what(r)), str(r.get("world_size", "")), "invalid",
                           f"{p.where}: {p.reason}", ""))
    return tuple(out)


def _environments(records: list[dict]) -> Environments:
    envs: list[tuple[dict, list[str]]] = []
    for r in records:
        env, run = r.get("env") or {}, str(r.get("run_id", r.get("kind")))
        for known, runs in envs:
            if known == env:
                if run not in runs:
                    runs.append(run)
                break
        else:
            envs.append((env, [run]))
    fields = tuple(dict.fromkeys(k for env, _ in envs for k in env))
    differing = frozenset(k for k in fields if len({repr(env.get(k)) for env, _ in envs}) > 1)
    return Environments(tuple(Environment(env, tuple(runs)) for env, runs in envs), fields,
                        differing, _vettings(records), _placements(records))


def _placements(records: list[dict]) -> tuple[str, ...]:
    """Where the workers ran (topology.placement_lines), each distinct line once with the
    number of runs it held for."""
    from scalebench.hardware.topology import placement_lines

    seen: dict[str, int] = {}
    for r in records:
        for line in placement_lines(r.get("worker_placement")):
            seen[line] = seen.get(line, 0) + 1
    return tuple(f"Worker {line} ({plural(n, 'run')})" for line, n in seen.items())


def _vettings(records: list[dict]) -> tuple[str, ...]:
    """'Vetting V (Slurm job J) left out sb3 (slow compute node: ...); runs on sb[1-2,4].'"""
    from scalebench.slurm.allocation import compress_hostlist

    seen: dict[str, dict] = {}
    for r in records:
        if isinstance(r.get("vetting"), dict):
            seen.setdefault(str(r["vetting"].get("id")), r["vetting"])
    lines = []
    for vet_id, v in seen.items():
        excluded = v.get("excluded") or {}
        left = ("; ".join(f"{node} ({why})" for node, why in excluded.items())
                if excluded else "no node")
        lines.append(f"Vetting {vet_id} (Slurm job {v.get('job_id')}) left out {left}; runs "
                     f"placed on {compress_hostlist(v.get('vetted') or []) or 'no node'}.")
    return tuple(lines)

