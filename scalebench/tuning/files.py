"""The tune's files: tune.json (every candidate, its paired samples, when and why it was
dropped, the confirmation, the settings read back), tuned.toml (one table per cell that
`scalebench sweep --tuned` reads; its reader and format version: spec/tuned.py), and the
pages (page.py)."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from scalebench.records import atomic
from scalebench.spec.toml_text import toml_value
from scalebench.spec.tuned import FORMAT_VERSION, TUNED_TOML
from scalebench.tuning.race import ConfirmPlan, ratio_interval

TUNE_JSON = "tune.json"


def paired_summary(race, name: str) -> dict[str, Any]:
    """A candidate's ratio to the default over its paired slots: geometric mean and a 95%
    Student-t interval of the mean log ratio (slots treated as independent: adjacent windows
    share the machine's drift, which the pairing cancels)."""
    diffs = race.paired(name, race.default)
    if not diffs:
        return {"slots": 0, "ratio": None, "low": None, "high": None}
    ratio, low, high = ratio_interval(diffs)
    return {"slots": len(diffs), "ratio": ratio, "low": low, "high": high}


def cell_document(result) -> dict[str, Any]:
    cell, race = result.cell, result.race
    dropped = {d.candidate: d for d in race.dropped}
    candidates = []
    predicted = race.predicted()
    for c in race.candidates:
        values = [s[c.name] for s in race.slots if c.name in s]
        entry = {**c.to_dict(), "values": values,
                 "mean": sum(values) / len(values) if values else None,
                 "vs_default": paired_summary(race, c.name),
                 # the knobs' additive model, the race's pick (race.Race.predicted)
                 "predicted_vs_default": (math.exp(predicted[c.name])
                                          if c.name in predicted else None),
                 "status": ("failed" if c.name in race.failed else
                            "dropped" if c.name in dropped else "survived"),
                 "read_back": result.read_back.get(c.name)}
        if c.name in dropped:
            d = dropped[c.name]
            entry["dropped"] = {"after_slots": d.slot, "leader": d.leader, "ratio": d.ratio,
                                "p_value": d.p_value, "threshold": d.threshold,
                                "reason": d.reason()}
        if c.name in race.failed:
            entry["failed"] = race.failed[c.name]
        candidates.append(entry)
    conf = result.confirmation
    winner = result.winner
    return {
        "cell": cell.name, "framework": cell.framework, "model": cell.model,
        "workers": cell.workers, "nodes": cell.nodes,
        "interleaving": "windows inside each launch" if cell.in_launch else
        "launches in interleaved rounds",
        "knobs": [{"option": k.option, "values": list(k.values), "default": k.default,
                   "why": k.why} for k in cell.knobs],
        "main_knob": cell.knobs[0].option if cell.knobs else None,
        "default": race.default, "candidates": candidates, "slots": race.slots,
        "launches": result.launches, "stopped": result.stopped,
        "steps": sum(launch["steps"] for launch in result.launches),
        "best_in_race": race.best(),
        "confirmation": None if conf is None else {
            "winner": conf.winner, "ratios": list(conf.ratios), "ratio": conf.ratio,
            "low": None if math.isnan(conf.low) else conf.low,
            "high": None if math.isnan(conf.high) else conf.high,
            "significant": conf.significant, "samples": conf.unit,
            "slots": result.confirm_slots,
            "plan": None if result.confirm_plan is None else plan_document(
                result.confirm_plan, cell.in_launch)},
        "window_steps": cell.window_steps,
        "winner": winner,
        "winner_settings": dict(race.candidate(winner).settings),
        "verdict": verdict(result),
        "findings": result.findings, "seconds": result.seconds,
    }


def plan_document(plan: ConfirmPlan, in_launch: bool) -> dict[str, Any]:
    """The planned confirmation in launches and paired slots: inside a launch a slot is a round
    of both candidates; across launches it is a pair of launches (the plan counts pairs)."""
    return {"launches": plan.launches if in_launch else 2 * plan.launches,
            "paired_slots": plan.launches * plan.rounds,
            "rounds_per_launch": plan.rounds if in_launch else None,
            "planned_seconds": plan.seconds}


def verdict(result) -> str:
    conf = result.confirmation
    name = result.cell.name
    if conf is None:
        return f"{name}: not finished ({result.stopped or 'interrupted'})"
    return f"{name}: {conf.words()}"


def document(outcome) -> dict[str, Any]:
    return {"format_version": FORMAT_VERSION, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "budget_seconds": outcome.budget_seconds, "seed": outcome.seed,
            "interrupted": outcome.interrupted, "results": "results.jsonl",
            "cells": [cell_document(r) for r in outcome.cells]}


def tuned_toml(doc: dict[str, Any]) -> str:
    """One [[cell]] per cell: its framework, model and workers and the winning options (empty
    where the default was kept: a sweep then adds no tuned run for it)."""
    lines = ["# Written by `scalebench tune`; read by `scalebench sweep --tuned FILE` (or",
             "# `tuned = \"FILE\"` in a workload's [sweep]). Each cell's options are the winner",
             "# confirmed against the default; none where no candidate beat it beyond noise.",
             f"format_version = {FORMAT_VERSION}", ""]
    for cell in doc["cells"]:
        lines += ["[[cell]]", f'framework = "{cell["framework"]}"',
                  f'model = "{cell["model"]}"', f"workers = {cell['workers']}",
                  f"verdict = {toml_value(cell['verdict'])}"]
        options = cell["winner_settings"] if cell["winner"] != cell["default"] else {}
        lines.append("[cell.options]")
        lines += [f"{k} = {toml_value(v)}" for k, v in options.items()]
        lines.append("")
    return "\n".join(lines)


def write_all(outcome) -> list[Path]:
    from scalebench.tuning import page

    doc = document(outcome)
    out = outcome.out_dir
    atomic.write_json(out / TUNE_JSON, doc)
    atomic.write_text(out / TUNED_TOML, tuned_toml(doc))
    return [out / TUNE_JSON, out / TUNED_TOML, *page.write(doc, out)]
