"""Accepted changes: a person's word, kept in the store itself, that a change between commits A
and B is known (`history accept A..B --reason TEXT [--config ...]`).

An entry is {"history_version": 1, "kind": "accepted", "id", "from": A, "to": B, "reason",
"configs": [...], "accepted_at"}; its id is a hash of the range, the reason and the
configurations, so accepting the same thing twice adds it once. A change found by `history
detect` (commits C..D: the last measured before it, the first at the new level) is accepted when
A was measured no later than C and B no earlier than D (each commit's time: its first point in
the store), and the entry names the change's configuration: each --config text is a set of words
that must all appear in the series' title (e.g. "ddp x2" names "resnet101 fp32 b32 224px cpu
weak ddp x2"); an entry with none names every configuration. Pure: no I/O.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from scalebench.spec.errors import UserError
from scalebench.tracking import history

KIND = history.ACCEPTED


@dataclass(frozen=True)
class Accepted:
    id: str
    start: str  # "from": a commit measured before the change (or its first)
    end: str  # "to": a commit at the new level
    reason: str
    configs: tuple[str, ...] = ()
    accepted_at: str = ""

    @property
    def range(self) -> str:
        return f"{self.start}..{self.end}"

    def names(self, title: str) -> bool:
        """Whether it speaks of the series with this title (no configs: of every series)."""
        return not self.configs or any(config_matches(c, title) for c in self.configs)

    def covers(self, before: str | None, after: str | None, title: str,
               order: Mapping[str, datetime]) -> bool:
        """Whether a change from commit `before` (the last at the old level) to `after` (the
        first at the new one) in series `title` lies within this range."""
        times = [order.get(c) for c in (self.start, self.end, before, after)]
        if any(t is None for t in times) or not self.names(title):
            return False
        start, end, first, last = times
        return start <= first and last <= end

    @property
    def text(self) -> str:
        return f"accepted {self.range}: {self.reason}" + \
            (f" ({'; '.join(self.configs)})" if self.configs else "")


def config_matches(config: str, title: str) -> bool:
    return set(config.split()) <= set(title.split())


def parse_range(text: str) -> tuple[str, str]:
    """'A..B' -> (A, B)."""
    parts = (text or "").split("..")
    if len(parts) != 2 or not all(p.strip() for p in parts):
        raise UserError(f"range {text!r}: expected A..B, two commits as `history detect` shows "
                        "them (the last before the change, the first at the new level)")
    return parts[0].strip(), parts[1].strip()


def commit_order(rows: Iterable[dict]) -> dict[str, datetime]:
    """Each commit of the run rows -> when it was first measured."""
    out: dict[str, datetime] = {}
    for row in rows:
        commit = row.get("commit")
        if commit:
            when = history._when(row)  # the time history orders its points by
            out[commit] = min(out.get(commit, when), when)
    return out


def resolve(commit: str, order: Mapping[str, datetime]) -> str:
    """A commit of the store as the user wrote it (whole, or a prefix only one commit has)."""
    if commit in order:
        return commit
    found = [c for c in order if c.startswith(commit)]
    if len(found) == 1:
        return found[0]
    if found:
        raise UserError(f"range: commit {commit!r} is the start of {len(found)} commits of the "
                        f"store ({', '.join(sorted(found)[:3])}, ...); give more of it")
    raise UserError(f"range: commit {commit!r} names no point of the store ({len(order)} "
                    "commits measured); give commits as `history detect` shows them")


def series_title(row: dict) -> str:
    """The title `history detect` gives a row's series."""
    return f"{history.panel_title(history.panel_key(row))} " \
        f"{history.line_label(history.line_key(row))}"


def entry(range_text: str, reason: str, configs: Sequence[str], rows: Sequence[dict],
          now: str) -> dict:
    """A new accepted-change entry, checked against the store's run rows: both ends name
    measured commits, A no later than B, every --config names a series, and some point of the
    named series lies within the range. UserError (exit 2) otherwise."""
    if not (reason or "").strip():
        raise UserError("--reason: say why the change is accepted (a non-empty text)")
    configs = tuple(dict.fromkeys(c.strip() for c in configs if c and c.strip()))
    order = commit_order(rows)
    if not order:
        raise UserError("range: the store holds no run with a commit; nothing to accept")
    start, end = (resolve(c, order) for c in parse_range(range_text))
    if order[start] > order[end]:
        raise UserError(f"range {range_text!r}: {start} was measured after {end}; give A..B "
                        "with A the earlier commit")
    titles = sorted({series_title(r) for r in rows if r.get("status") == "ok"})
    for c in configs:
        if not any(config_matches(c, t) for t in titles):
            raise UserError(f"--config {c!r}: names no configuration of the store; its series "
                            f"are: {'; '.join(titles[:8])}" + ("; ..." if len(titles) > 8 else ""))
    probe = Accepted("", start, end, reason, configs)
    inside = [r for r in rows if r.get("status") == "ok" and r.get("commit") in order
              and order[start] <= order[r["commit"]] <= order[end] and probe.names(series_title(r))]
    if not inside:
        raise UserError(f"range {range_text!r}: names no point of "
                        + ("the configurations given" if configs else "the store"))
    basis = json.dumps([start, end, reason.strip(), sorted(configs)])
    return {"history_version": history.HISTORY_VERSION, "kind": KIND,
            "id": "accepted-" + hashlib.sha256(basis.encode()).hexdigest()[:16],
            "from": start, "to": end, "reason": reason.strip(), "configs": list(configs),
            "accepted_at": now}


def from_entries(entries: Iterable[dict]) -> tuple[Accepted, ...]:
    """The accepted changes among a store's entries (other kinds ignored)."""
    return tuple(Accepted(str(e.get("id")), str(e.get("from")), str(e.get("to")),
                          str(e.get("reason") or ""), tuple(str(c) for c in e.get("configs") or ()),
                          str(e.get("accepted_at") or ""))
                 for e in entries if e.get("kind") == KIND)


def covering(accepted: Sequence[Accepted], before: str | None, after: str | None, title: str,
             order: Mapping[str, datetime]) -> Accepted | None:
    """The first entry that accepts a change from `before` to `after` in series `title`."""
    return next((a for a in accepted if a.covers(before, after, title, order)), None)
