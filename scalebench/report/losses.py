"""Where the efficiency went: the report's breakdown section, computed once with the ReportModel.

Per scaling series (identity.series_key):
  - breakdown.rows: the ideal N x one-worker throughput split into the per-worker batch
    effect (strong scaling), contention, exposed communication, straggler and input wait, next
    to the measured efficiency;
  - breakdown.verdict: the frameworks at the largest worker count ranked by the throughput a
    user gets, what limits each, and a slow own one-worker baseline named;
  - distance to the limit: for each run with a breakdown, the share of the link's allreduce
    bandwidth its exposed communication ran at (breakdown.link_share; gradient bytes from the
    record's parameter count and fp16_allreduce option, the link the scaling model uses), and
    the scaling model's bounds with the measured point and the no-sync point (the bounds figure);
  - the extrapolation check: per line (framework, precision, step options), the scaling
    model's prediction at its largest measured worker count, made from the one-worker run and
    the link only (the midpoint of the no-overlap and full-overlap bounds), against the
    measurement, with the error in percentage points.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from scalebench.analysis import breakdown, scaling_model
from scalebench.report.format import num
from scalebench.report.labels import group_title, run_label, series_label
from scalebench.spec import identity
from scalebench.spec.units import format_bandwidth

Chooser = Callable[[dict], scaling_model.Link | None]
# The losses in the waterfall's order, from ideal down to the measured throughput; the
# per-worker batch effect only for strong-scaling series (SeriesLosses.components).
WATERFALL = ("batch_effect", "contention", "communication", "straggler", "input_wait")
NO_WINDOWS = ("recorded without no-sync windows (before the breakdown existed, or with "
              "--no-breakdown)")
NO_BASELINE = "no one-worker run of this configuration to take the ideal from"


@dataclass(frozen=True)
class Share:
    """A breakdown row's exposed communication against the link: `text` says it in words."""

    row: dict
    share: float | None  # breakdown.link_share; None when not computed
    text: str


@dataclass(frozen=True)
class Limit:
    """A breakdown row between the scaling model's bounds (model_rows entry)."""

    row: dict  # breakdown row
    entry: dict  # scaling_model.model_rows entry, modelled

    @property
    def no_overlap(self) -> float:
        return self.entry["efficiency_no_overlap"]

    @property
    def full_overlap(self) -> float:
        return self.entry["efficiency_full_overlap"]

    @property
    def measured(self) -> float:
        return self.row["efficiency"]

    @property
    def without_communication(self) -> float:
        """The efficiency had no communication been exposed: the slowest rank's no-sync step."""
        return self.row["efficiency"] + self.row["communication"]


@dataclass(frozen=True)
class Check:
    """The extrapolation check of one line at its largest measured worker count."""

    row: dict  # summary row
    entry: dict  # scaling_model.model_rows entry

    @property
    def checked(self) -> bool:
        return self.entry["verdict"] != scaling_model.NOT_MODELLED

    @property
    def low(self) -> float:
        return self.entry["efficiency_no_overlap"]

    @property
    def high(self) -> float:
        return self.entry["efficiency_full_overlap"]

    @property
    def predicted(self) -> float:
        """The one number called the prediction: the midpoint of the two bounds."""
        return (self.low + self.high) / 2

    @property
    def measured(self) -> float:
        return self.row["efficiency"]

    @property
    def error_points(self) -> float:
        """measured - predicted, in percentage points."""
        return 100 * (self.measured - self.predicted)

    @property
    def one_worker_images_per_sec(self) -> float:
        return self.row["baseline_images_per_sec"]

    @property
    def where(self) -> str:
        """Where the measurement lies against the bounds (its point, not its interval)."""
        if self.measured < self.low:
            return "below the no-overlap bound"
        if self.measured > self.high:
            return "above the full-overlap bound"
        return "between the bounds"

    @property
    def link(self) -> str:
        return scaling_model.Link(self.entry["link_bandwidth"], self.entry["link_step_latency"],
                                  self.entry["link_source"]).describe()

    @property
    def not_checked_text(self) -> str:
        reason = self.entry["verdict_text"]
        if reason.startswith("no allreduce measurement"):
            reason = no_allreduce(self.row)
        return f"{run_label(self.row)}: not checked: {reason}"


@dataclass(frozen=True)
class SeriesLosses:
    key: tuple
    title: str
    rows: tuple[dict, ...]  # breakdown.rows of this series, by workers, then line
    verdict: str  # breakdown.verdict; "" without rows
    missing: tuple[str, ...]  # multi-worker runs without a breakdown, each with why
    shares: tuple[Share, ...]
    limits: tuple[Limit, ...]
    checks: tuple[Check, ...]  # one per line, at its largest measured worker count

    @property
    def components(self) -> tuple[str, ...]:
        """The parts the table and the waterfall show: the per-worker batch effect only where a
        run scaled strongly (weak scaling keeps the per-worker batch: it is 0)."""
        strong = any(r.get("scaling") == "strong" for r in self.rows)
        return tuple(n for n in WATERFALL if n != "batch_effect" or strong)


@dataclass(frozen=True)
class Losses:
    series: tuple[SeriesLosses, ...]  # series with multi-worker runs

    @property
    def rows(self) -> tuple[dict, ...]:
        return tuple(r for s in self.series for r in s.rows)

    @property
    def limits(self) -> tuple[Limit, ...]:
        return tuple(x for s in self.series for x in s.limits)

    @property
    def empty_text(self) -> str:
        """What to say when nothing has a breakdown ("" when something has)."""
        if not self.series:
            return "No multi-worker runs: nothing to break down."
        if not self.rows:
            return ("No breakdown: none of the multi-worker runs has no-sync windows and a "
                    "one-worker run (results recorded before the breakdown existed, or with "
                    "--no-breakdown).")
        return ""


def no_allreduce(row: dict) -> str:
    return (f"no allreduce measurement for {row['framework']} on {row['device']} "
            "(--with-allreduce measures it)")


# ---------------------------------------------------------------- building it

def build(records: Sequence[dict], rows: Sequence[dict], modelled: Sequence[tuple[dict, dict]],
          choose: Chooser, link_measured: bool) -> Losses:
    """rows: aggregate.summary_rows; modelled: (multi-worker summary row, model_rows entry);
    choose: the scaling model's link for a row; link_measured: whether links come from
    allreduce records (else a link was given)."""
    entries = {identity.config_key(row): entry for row, entry in modelled}
    parts = breakdown.rows(records)
    out = []
    for key in dict.fromkeys(identity.series_key(r) for r in rows if r["world_size"] > 1):
        members = [r for r in rows if identity.series_key(r) == key]
        found = tuple(sorted((r for r in parts if r["series"] == key),
                             key=lambda r: (r["world_size"], r["nodes"], series_label(r))))
        have = {r["key"] for r in found}
        multi = [r for r in members if r["world_size"] > 1]
        precision = " / ".join(dict.fromkeys(r["precision_label"] for r in members))
        out.append(SeriesLosses(
            key=key, title=group_title(key, precision), rows=found,
            verdict=breakdown.verdict(found),
            missing=tuple(f"{run_label(r)}: "
                          f"{NO_BASELINE if r['efficiency'] is None else NO_WINDOWS}"
                          for r in multi if identity.config_key(r) not in have),
            shares=tuple(_share(r, choose(r), link_measured) for r in found),
            limits=tuple(Limit(r, entries[r["key"]]) for r in found
                         if entries.get(r["key"], {}).get("verdict")
                         not in (None, scaling_model.NOT_MODELLED)),
            checks=_checks(multi, entries)))
    return Losses(tuple(sorted(out, key=lambda s: tuple(str(v) for v in s.key))))


def gradient_bytes(row: dict) -> int:
    """The gradients one step averages: the record's parameter count, fp32 or fp16 as its
    fp16_allreduce option says."""
    return scaling_model.gradient_bytes(int(row["params"]),
                                        bool((row.get("options") or {}).get("fp16_allreduce")))


def _share(row: dict, link: scaling_model.Link | None, measured: bool) -> Share:
    label = run_label(row)
    if link is None:
        return Share(row, None, f"{label}: link share not checked: {no_allreduce(row)}")
    if not row.get("params"):
        return Share(row, None, f"{label}: link share not checked: the record has no parameter "
                                "count")
    grad = gradient_bytes(row)
    seconds = row["communication_seconds_per_step"]
    share = breakdown.link_share(row, link.bandwidth, grad)
    if share is None:
        return Share(row, None, f"{label}: no communication exposed ({seconds * 1e3:.3g} ms per "
                                "step): the synced step was no slower than the unsynced one")
    kind = "measured" if measured else "given"
    needed = share * link.bandwidth
    beyond = ("; above 100%: part of the allreduce was hidden behind the backward pass"
              if share > 1 else "")
    return Share(row, share, (
        f"{label}: {seconds * 1e3:.3g} ms of exposed communication per step for "
        f"{num(grad, '.3g', 1e-6)} MB of gradients needs {format_bandwidth(needed)} of bus bandwidth: "
        f"communication ran at {share:.0%} of this link's {kind} allreduce bandwidth "
        f"({format_bandwidth(link.bandwidth)}{'; ' + link.source if measured else ''}){beyond}."))


def _checks(multi: Sequence[dict], entries: dict[tuple, dict]) -> tuple[Check, ...]:
    """Each line's run at its largest measured worker count (most nodes first on a tie)."""
    top: dict[str, dict] = {}
    for r in multi:
        best = top.get(series_label(r))
        if best is None or (r["world_size"], r["nodes"]) > (best["world_size"], best["nodes"]):
            top[series_label(r)] = r
    return tuple(Check(r, entries[identity.config_key(r)])
                 for _, r in sorted(top.items()) if identity.config_key(r) in entries)
