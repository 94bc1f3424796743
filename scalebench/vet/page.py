"""vet.md and vet.html from vet.json's document: the verdicts, a bar chart of the per-node
figures with the median and the threshold drawn, a heatmap of the pair matrix, the figures as
tables. The HTML page is self-contained (figures inline as base64 PNG)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from scalebench.report.html import CSS, esc, image_tag
from scalebench.vet.verdict import rate_text

BARS = ("compute", "matmul", "network")
TITLES = {"compute": "compute probe (images/s)", "matmul": "matmul probe (FLOP/s)",
          "network": "median busbw over its pairs (B/s)"}


def _units(doc: dict) -> list[tuple[str, dict]]:
    """(label, device) per measured device, in node order."""
    out = []
    for node, info in doc["nodes"].items():
        devices = info.get("devices", [])
        for d in devices:
            out.append((node if len(devices) == 1 else f"{node}/{d['index']}", d))
    return out


def bars_png(doc: dict) -> bytes | None:
    """One panel per figure kind: a bar per node (or device), the median and the threshold."""
    from scalebench.report import plotting

    units = _units(doc)
    if not units:
        return None
    panels_of = {"compute": [(label, d["compute_median"], d.get("compute_check"))
                             for label, d in units],
                 "matmul": [(label, d["matmul_median"], d.get("matmul_check"))
                            for label, d in units],
                 "network": [(node, info["network_check"]["figure"], info["network_check"])
                             for node, info in doc["nodes"].items() if info.get("network_check")]}
    kinds = [k for k in BARS if panels_of[k]]
    fig, axes = plotting.panels(len(kinds), 4.2, 3.0)
    threshold = doc["settings"]["threshold_fraction"]
    for ax, kind in zip(axes, kinds, strict=True):
        rows = panels_of[kind]
        values = [v or 0.0 for _, v, _ in rows]
        colors = ["#c0392b" if (c or {}).get("slow") else "#4a7ebb" for _, _, c in rows]
        ax.bar([label for label, _, _ in rows], values, color=colors)
        reference = next((c["reference"] for _, _, c in rows if c), None)
        if reference:
            ax.axhline(reference, color="#1d1d1f", lw=1, label="median")
            ax.axhline(reference * (1 - threshold), color="#c0392b", lw=1, ls="--",
                       label=f"median - {100 * threshold:.0f}%")
            ax.legend(fontsize=7, loc="lower right")
        ax.set_title(plotting.title(TITLES[kind]), fontsize=9)
        ax.tick_params(axis="x", labelsize=7, rotation=45)
    return plotting.png_bytes(fig)


def heatmap_png(doc: dict) -> bytes | None:
    """The pair matrix: median busbw of every pair (GB/s), slow links outlined."""
    from scalebench.report import plotting

    pairs = [p for p in doc["pairs"] if p.get("busbw_median")]
    if not pairs or len(doc["nodes"]) > 64:  # beyond that the tables say it, not a grid
        return None
    import numpy as np

    nodes = list(doc["nodes"])
    index = {n: i for i, n in enumerate(nodes)}
    grid = np.full((len(nodes), len(nodes)), np.nan)
    for p in pairs:
        a, b = (index[n] for n in p["nodes"])
        grid[a, b] = grid[b, a] = p["busbw_median"] / 1e9
    fig, [ax] = plotting.panels(1, max(3.5, 0.55 * len(nodes) + 2), max(3.0, 0.5 * len(nodes)
                                                                        + 1.5))
    image = ax.imshow(grid, cmap="viridis")
    fig.colorbar(image, ax=ax, label="busbw GB/s")
    ax.set_xticks(range(len(nodes)), nodes, rotation=45, fontsize=7)
    ax.set_yticks(range(len(nodes)), nodes, fontsize=7)
    if len(nodes) <= 16:
        for p in pairs:
            a, b = (index[n] for n in p["nodes"])
            for x, y in ((a, b), (b, a)):
                ax.text(y, x, f"{grid[x, y]:.2g}", ha="center", va="center", fontsize=7,
                        color="white" if (p.get("check") or {}).get("slow") else "black")
    ax.set_title("allreduce busbw per pair (median of repeats)", fontsize=9)
    return plotting.png_bytes(fig)


def _spread(values: Sequence[float], kind: str) -> str:
    if not values:
        return "-"
    return f"{rate_text(min(values), kind)} - {rate_text(max(values), kind)}"


def node_rows(doc: dict) -> list[list[str]]:
    rows = []
    for label, d in _units(doc):
        node = label.split("/")[0]
        network = doc["nodes"][node].get("network_check")
        info = doc["nodes"][node]
        sustained = d.get("sustained_median")
        rows.append([label, info.get("leaf") or "-", str(info.get("hostname") or "-"),
                     d["name"], rate_text(d["compute_median"], "compute"),
                     _spread(d["compute_images_per_sec"], "compute"),
                     rate_text(d["matmul_median"], "matmul"),
                     rate_text(sustained, "sustained") if sustained else "-",
                     rate_text(network["figure"], "network") if network else "-",
                     _partners(info)])
    for node, why in doc.get("unreachable", {}).items():
        rows.append([node, doc["nodes"][node].get("leaf") or "-", "-", "-",
                     f"unreachable: {why}", "-", "-", "-", "-", "-"])
    return rows


def _partners(info: dict) -> str:
    return " ".join(f"{p['node']} ({p['round']})" for p in info.get("partners", [])) or "-"


def schedule_lines(doc: dict) -> list[str]:
    """The schedule run: why, and who met whom in each round."""
    sched = doc.get("schedule") or {}
    if not sched:
        return []
    topo = doc.get("topology")
    lines = [f"{sched['why']}; {sched['network_rounds']} network rounds in all."]
    if topo:
        lines.append(f"Topology from {topo['source']}: " + "; ".join(
            f"{leaf}: {', '.join(nodes)}" for leaf, nodes in topo["leaves"].items()) + ".")
    for i, r in enumerate(sched["rounds"] + sched["retest_rounds"], start=1):
        kind = "retest " if i > len(sched["rounds"]) else ""
        lines.append(f"{kind}round {i}: " + ", ".join(f"{a}-{b}" for a, b in r))
    return lines


NODE_HEADER = ["node", "leaf", "host", "device", "compute (median)", "compute repeats",
               "matmul (median)", "sustained (median)", "network (median of pairs)",
               "partners (round)"]
PAIR_HEADER = ["pair", "round", "busbw (median)", "repeats", "slow"]


def pair_rows(doc: dict) -> list[list[str]]:
    return [[f"{p['nodes'][0]}-{p['nodes'][1]}", str(p["round"]),
             rate_text(p["busbw_median"], "link") if p.get("busbw_median") else "not measured",
             _spread(p["busbw_bytes_per_sec"], "link"),
             "yes" if (p.get("check") or {}).get("slow") else ""] for p in doc["pairs"]]


def verdict_lines(doc: dict) -> list[str]:
    lines = []
    if doc["status"] != "ok":
        lines.append(f"The vetting did not finish: {doc['error']}. No node list from it.")
    for v in doc["verdicts"]:
        what = "cordoned" if v["cordon"] else "kept"
        decided = ""
        if v.get("pairs"):
            decided = " Decided by " + ", ".join(
                f"{a}-{b} (round {r})" for (a, b), r in zip(v["pairs"], v["rounds"],
                                                            strict=True)) + "."
        elif v["kind"] in ("slow compute node",):
            decided = " Decided by the node probes."
        lines.append(f"**{v['kind']}: {', '.join(v['nodes'])}** ({what}): {v['because']}."
                     + decided)
    if doc["status"] == "ok" and doc["decided"] and not doc["verdicts"]:
        lines.append("No slow node and no slow link.")
    lines += [f"Note: {note}." for note in doc["notes"]]
    return lines


def summary(doc: dict) -> list[str]:
    s, a = doc["settings"], doc["allocation"]
    return [f"Slurm job {a['job_id']}, nodes {a['nodelist']}; {doc['probing']['reason']}.",
            f"Compute probe: {s['model']} training step, batch {s['batch_size']}, "
            f"{s['precision']}, {s['iters']} steps per window; {s['repeats']} repeats; "
            f"threshold {s['threshold']:g}% below the median and {s['z']:g} robust sd of noise.",
            f"Vetted: {', '.join(doc['vetted']) or 'none'}. Cordoned: "
            f"{', '.join(doc['cordoned']) or 'none'}. Faults injected: "
            f"{doc['faults'] or 'none'}. Took {doc['wall_seconds']:.0f} s."]


def markdown(doc: dict, figures: dict[str, str]) -> str:
    out = [f"# Node vetting {doc['id']}", "", *summary(doc), "", "## Verdicts", ""]
    out += [f"- {line}" for line in verdict_lines(doc)] + [""]
    if schedule_lines(doc):
        out += ["## Schedule", "", *[f"- {line}" for line in schedule_lines(doc)], ""]
    for name, alt in (("bars", "per-node figures"), ("heatmap", "pair matrix")):
        if name in figures:
            out += [f"![{alt}]({figures[name]})", ""]
    out += ["## Nodes", "", _md_table(NODE_HEADER, node_rows(doc)), ""]
    if doc["pairs"]:
        out += ["## Pairs", "", _md_table(PAIR_HEADER, pair_rows(doc)), ""]
    out += ["## Rule", "", doc["rule"], ""]
    return "\n".join(out)


def _md_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _html_table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def html(doc: dict, pngs: dict[str, bytes]) -> str:
    import re

    def para(text: str) -> str:
        return "<p>" + re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", esc(text)) + "</p>"

    parts = [f"<h1>Node vetting {esc(doc['id'])}</h1>", *map(para, summary(doc)),
             "<h2>Verdicts</h2>", *map(para, verdict_lines(doc))]
    if schedule_lines(doc):
        parts += ["<h2>Schedule</h2>", *map(para, schedule_lines(doc))]
    for name, alt in (("bars", "per-node figures"), ("heatmap", "pair matrix")):
        if name in pngs:
            parts.append(f"<figure>{image_tag(pngs[name], alt)}</figure>")
    parts += ["<h2>Nodes</h2>", _html_table(NODE_HEADER, node_rows(doc))]
    if doc["pairs"]:
        parts += ["<h2>Pairs</h2>", _html_table(PAIR_HEADER, pair_rows(doc))]
    parts += ["<h2>Rule</h2>", f"<pre>{esc(doc['rule'])}</pre>"]
    return (f"<!doctype html><html><head><meta charset=\"utf-8\"><title>{esc(doc['id'])}"
            f"</title><style>{CSS}</style></head><body>{''.join(parts)}</body></html>\n")


def write(doc: dict[str, Any], out_dir: Path) -> list[Path]:
    """vet.md (with its PNGs beside it) and the self-contained vet.html."""
    pngs = {name: png for name, png in (("bars", bars_png(doc)), ("heatmap", heatmap_png(doc)))
            if png}
    from scalebench.report import plotting

    return plotting.write_pages(out_dir, "vet", pngs, lambda names: markdown(doc, names),
                                lambda figures: html(doc, figures))
