"""tune.md and the self-contained tune.html from tune.json's document: per cell the verdict
(default against the confirmed winner, with its interval), the response over the main knob
(every candidate's paired ratio to the default with its interval), what was dropped when and
why, what the framework reported for its settings, and the launches."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from scalebench.report.html import CSS, esc, image_tag

HEADER = ("candidate", "status", "slots", "vs default (95% CI)", "mean images/s", "why")


def pct(value: float | None) -> str:
    return "-" if value is None else f"{(value - 1) * 100:+.1f}%"


def interval(summary: dict[str, Any]) -> str:
    if summary.get("ratio") is None:
        return "-"
    if summary.get("low") is None:
        return pct(summary["ratio"])
    return f"{pct(summary['ratio'])} [{pct(summary['low'])}, {pct(summary['high'])}]"


def candidate_rows(cell: dict[str, Any]) -> list[list[str]]:
    rows = []
    for c in cell["candidates"]:
        why = (c.get("dropped", {}).get("reason") or c.get("failed") or
               ("the default" if c["default"] else ""))
        rows.append([c["name"] + (" (default)" if c["default"] else ""), c["status"],
                     str(c["vs_default"]["slots"]), interval(c["vs_default"]),
                     "-" if c["mean"] is None else f"{c['mean']:.2f}", why])
    return rows


def confirmation_line(cell: dict[str, Any]) -> str:
    conf = cell.get("confirmation")
    if conf is None:
        return "Not confirmed (the tune was interrupted)."
    if conf["winner"] == cell["default"]:
        return "No candidate led the default after the race: nothing to confirm."
    ratios = ", ".join(pct(r) for r in conf["ratios"])
    span = ("" if conf["low"] is None else
            f" [{pct(conf['low'])}, {pct(conf['high'])}]")
    samples = conf.get("samples", "paired launches")
    each = "per pair" if samples == "pairs of launches" else "per launch"
    return (f"Confirmation of {conf['winner']} against the default over {len(conf['ratios'])} "
            f"fresh {samples}: {pct(conf['ratio'])}{span} ({each}: {ratios}); "
            f"{'significant' if conf['significant'] else 'not beyond noise'}.")


def response_png(cell: dict[str, Any]) -> bytes | None:
    """Ratio to the default per candidate, grouped by the main knob's value, with intervals."""
    from scalebench.report import plotting

    main = cell.get("main_knob")
    points = [c for c in cell["candidates"] if c["vs_default"]["ratio"] is not None]
    if not main or not points:
        return None
    others = sorted({label_without(c["settings"], main) for c in points})
    fig, [ax] = plotting.panels(1, 6.0, 3.4)
    values = sorted({c["settings"][main] for c in points}, key=lambda v: (str(type(v)), v))
    for index, rest in enumerate(others):
        xs, ys, lo, hi = [], [], [], []
        for c in points:
            if label_without(c["settings"], main) != rest:
                continue
            s = c["vs_default"]
            x = values.index(c["settings"][main]) + (index - (len(others) - 1) / 2) * 0.08
            xs.append(x)
            ys.append((s["ratio"] - 1) * 100)
            lo.append(0 if s["low"] is None else (s["ratio"] - s["low"]) * 100)
            hi.append(0 if s["high"] is None else (s["high"] - s["ratio"]) * 100)
        ax.errorbar(xs, ys, yerr=[lo, hi], fmt="o", capsize=3, label=rest or main)
    ax.axhline(0, color="#1d1d1f", lw=1)
    ax.set_xticks(range(len(values)), [str(v) for v in values])
    ax.set_xlabel(main)
    ax.set_ylabel("images/s vs default (%)")
    ax.set_title(plotting.title(f"{cell['cell']}: response over {main} (95% CI, paired)"),
                 fontsize=9)
    if len(others) > 1:
        ax.legend(fontsize=7)
    return plotting.png_bytes(fig)


def label_without(settings: dict[str, Any], main: str) -> str:
    return ",".join(f"{k}={v}" for k, v in settings.items() if k != main)


def cell_lines(cell: dict[str, Any]) -> list[str]:
    lines = [f"**{cell['verdict']}**",
             f"Knobs: {', '.join(k['option'] for k in cell['knobs'])}; candidates compared "
             f"{cell['interleaving']}; the race stopped: {cell['stopped'] or 'interrupted'}; "
             f"{len(cell['launches'])} launches in {cell['seconds']:.0f} s, "
             f"{cell['steps']} training steps per worker.",
             confirmation_line(cell)]
    lines += [f"Finding: {f}" for f in cell["findings"]]
    return lines


def read_back_lines(cell: dict[str, Any]) -> list[str]:
    out = []
    for c in cell["candidates"]:
        if c.get("read_back"):
            seen = c["read_back"][0] if c["read_back"] else {}
            text = ", ".join(f"{k}={v}" for k, v in seen.items())
            out.append(f"{c['name']}: rank 0 reports {text}")
    return out


def markdown(doc: dict[str, Any], pngs: dict[str, str]) -> str:
    parts = ["# Tuning", "",
             f"Budget {doc['budget_seconds']:.0f} s, seed {doc['seed']}"
             + (", interrupted: partial results" if doc["interrupted"] else "") + ".", ""]
    for cell in doc["cells"]:
        parts += [f"## {cell['cell']}", ""]
        for line in cell_lines(cell):
            parts += [line, ""]
        if cell["cell"] in pngs:
            parts += [f"![response of {cell['cell']}]({pngs[cell['cell']]})", ""]
        parts += ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
        parts += ["| " + " | ".join(r) + " |" for r in candidate_rows(cell)]
        parts.append("")
        read_back = read_back_lines(cell)
        if read_back:
            parts += ["Settings as the framework reports them:", ""]
            parts += [f"- {line}" for line in read_back]
            parts.append("")
    return "\n".join(parts)


def html(doc: dict[str, Any], pngs: dict[str, bytes]) -> str:
    def para(text: str) -> str:
        return "<p>" + re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", esc(text)) + "</p>"

    parts = ["<h1>Tuning</h1>",
             para(f"Budget {doc['budget_seconds']:.0f} s, seed {doc['seed']}"
                  + (", interrupted: partial results" if doc["interrupted"] else "") + ".")]
    for cell in doc["cells"]:
        parts.append(f"<h2>{esc(cell['cell'])}</h2>")
        parts += [para(line) for line in cell_lines(cell)]
        if cell["cell"] in pngs:
            parts.append(f"<figure>{image_tag(pngs[cell['cell']], 'response')}</figure>")
        head = "".join(f"<th>{esc(h)}</th>" for h in HEADER)
        body = "".join("<tr>" + "".join(f"<td>{esc(v)}</td>" for v in row) + "</tr>"
                       for row in candidate_rows(cell))
        parts.append(f"<table><tr>{head}</tr>{body}</table>")
        read_back = read_back_lines(cell)
        if read_back:
            parts.append("<ul>" + "".join(f"<li>{esc(x)}</li>" for x in read_back) + "</ul>")
    return (f"<!doctype html><html><head><meta charset=\"utf-8\"><title>Tuning</title>"
            f"<style>{CSS}</style></head><body>{''.join(parts)}</body></html>\n")


def write(doc: dict[str, Any], out_dir: Path) -> list[Path]:
    pngs = {}
    for cell in doc["cells"]:
        png = response_png(cell)
        if png:
            pngs[cell["cell"]] = png
    from scalebench.report import plotting

    return plotting.write_pages(out_dir, "tune", pngs, lambda names: markdown(doc, names),
                                lambda figures: html(doc, figures))
