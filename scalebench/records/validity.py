"""What makes a record invalid, defined once for every writer and reader.

A record is invalid when its line is not a JSON object (a line cut short by a crash, say), when a
field is missing or has the wrong type (records.schema.check_fields), when a value that must be
a positive number is not (NaN, inf, 0 or negative), or when a count disagrees with its samples
(`trials` against the trial values, `world_size` against the per-rank values). The tasks declare
which of their fields these rules cover (tasks/<kind>.check_record, through the checks here);
results.validate applies them to every record built and read, and results.load hands back each
invalid line as an `Invalid`: file, line, reason and, where the line parsed, the record itself,
so that its configuration can be named.

An invalid record is a broken measurement, never an absent one: compare fails the gate on it
(verdict `invalid`) or refuses the baseline row it belongs to, `history add` adds the valid rows
and exits 2, and the report lists it beside failed and timed-out runs.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from scalebench.records.schema import RecordError
from scalebench.spec import identity

# The fields a train record's configuration is read from (identity.config_key); an invalid
# record without all of them cannot be told apart from another configuration.
IDENTIFYING = ("framework", "model", "world_size", "nodes", "batch_size", "image_size",
               "precision", "scaling", "data")


def is_positive(value: Any) -> bool:
    """A finite number above 0 (a bool is not a number here)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value) and value > 0


def check_positive(record: dict[str, Any], names: Sequence[str]) -> None:
    """Each named field that is present and not None is a positive finite number."""
    for name in names:
        value = record.get(name)
        if value is not None and not is_positive(value):
            raise RecordError(f"{name} is {value!r}, not a positive finite number")


def check_values(name: str, values: Sequence[Any], count: int | None = None, per: str = "trial"
                 ) -> None:
    """One positive finite number per `per` (count of them, when given)."""
    if count is not None and len(values) != count:
        raise RecordError(f"{name} does not have one value per {per}: {len(values)} for "
                          f"{count} {per}s")
    for value in values:
        if not is_positive(value):
            raise RecordError(f"{name} has a non-positive or non-finite value ({value!r})")


def check_per_rank(name: str, values: Sequence[Any], world_size: int,
                   trials: int | None = None) -> None:
    """One entry per rank: a positive number, or (trials given) a list of one per trial."""
    if len(values) != world_size:
        raise RecordError(f"{name} does not have one value per rank: {len(values)} for "
                          f"world_size {world_size}")
    if trials is None:
        check_values(name, values, per="rank")
        return
    for rank, windows in enumerate(values):
        if not isinstance(windows, list):
            raise RecordError(f"{name}[{rank}] is not a list of one value per trial")
        check_values(f"{name}[{rank}]", windows, trials)


def parse_line(text: str) -> dict[str, Any]:
    """One results line as a record (not yet validated); RecordError when it is not a JSON
    object. NaN and Infinity parse, as Python writes them: the value rules reject them."""
    try:
        record = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RecordError(f"malformed JSON ({exc.msg}): a line cut short or not a record") \
            from None
    if not isinstance(record, dict):
        raise RecordError("not a JSON object")
    return record


@dataclass(frozen=True)
class Invalid:
    """An invalid line of a results file: where, why, and the record when the line parsed."""

    path: str
    line: int
    reason: str
    record: dict[str, Any] | None = field(default=None, compare=False, repr=False)

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    def __str__(self) -> str:
        return f"{self.where}: invalid record: {self.reason}"

    @property
    def key(self) -> tuple | None:
        """identity.config_key of a train record whose identifying fields survived; else None
        (a line that did not parse, another kind, identity fields missing or mistyped)."""
        r = self.record
        if r is None or r.get("kind") != "train" or any(r.get(f) is None for f in IDENTIFYING):
            return None
        try:
            return identity.config_key(r)
        except (KeyError, TypeError, ValueError, AttributeError):
            return None

    @property
    def baseline_key(self) -> tuple | None:
        """The key of the one-worker run this record's efficiency is taken against (None as
        for `key`)."""
        if self.key is None:
            return None
        try:
            return identity.baseline_key(self.record)
        except (KeyError, TypeError, ValueError, AttributeError):
            return None

    @property
    def what(self) -> str:
        """The configuration in words, or that it cannot be told."""
        return identity.describe(self.key) if self.key is not None else \
            f"an unidentifiable record ({self.where})"
