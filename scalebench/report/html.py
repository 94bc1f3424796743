"""report.html: the ReportModel as one self-contained page (inline CSS, figures as base64 PNG, no
script, no network). Every string from results (hostnames, errors, stderr, paths, versions)
goes through `esc`."""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Callable, Mapping
from pathlib import Path

from scalebench.report import best, energy, mfu, tables
from scalebench.report import model as m
from scalebench.report.figures import CAPTIONS, of_section
from scalebench.report.format import interval, num, pct, pct_interval
from scalebench.report.tables import Cell, Details, Gauge, Mark, Table

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:2rem auto;
max-width:1150px;padding:0 1rem;color:#1d1d1f;line-height:1.45}
h1{margin-bottom:.2rem}h2{border-bottom:1px solid #ddd;padding-bottom:.2rem;margin-top:2.2rem}
table{border-collapse:collapse;margin:.6rem 0 1.2rem;font-size:.92rem}
th,td{border:1px solid #d0d0d0;padding:.3rem .55rem;vertical-align:top;text-align:left}
th{background:#f3f4f6}td.num{text-align:right;font-variant-numeric:tabular-nums}
.ips{font-weight:600;font-size:1.02rem}.sub{color:#555;font-size:.85rem}
.badge{display:inline-block;border-radius:3px;padding:0 .35rem;font-size:.78rem;font-weight:600}
.noisy{background:#fff3cd;color:#7a5200}.bad{background:#fde2e1;color:#8a1c13}
.good{background:#e3f5e1;color:#1e5f1a}.diff{background:#fff3cd}
.gauge{display:inline-block;position:relative;width:120px;height:10px;background:#eee;
margin-top:.35rem}.gauge .range{position:absolute;top:0;height:100%;background:#a8c7fa}
.gauge .point{position:absolute;top:-3px;width:3px;height:16px;background:#1d1d1f}
figure{margin:1rem 0}figure img{max-width:100%;height:auto;border:1px solid #eee}
figcaption{color:#444;font-size:.9rem;max-width:900px}
pre{white-space:pre-wrap;word-break:break-word;background:#f7f7f7;padding:.5rem;font-size:.8rem}
nav a{margin-right:.9rem}.muted{color:#666}
"""
NO_INTERVAL = "no interval (one trial)"


def esc(value: object) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def paragraph(text: str) -> str:
    """Plain text with **bold** marks -> one <p>."""
    return "<p>" + re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", esc(text)) + "</p>"


def image_tag(png: bytes, alt: str) -> str:
    data = base64.b64encode(png).decode("ascii")
    return f'<img src="data:image/png;base64,{data}" alt="{esc(alt)}">'


def mark(c: Mark) -> str:
    title = f' title="{esc(c.title)}"' if c.title else ""
    return f'<span class="{esc(c.css)}"{title}>{esc(c.text)}</span>'


def gauge(g: Gauge) -> str:
    def at(x: float) -> float:
        return min(100.0, max(0.0, 100 * x))
    low, high = at(g.low), at(g.high)
    return (f'<span class="gauge" title="bounds {pct(g.low)}–{pct(g.high)}, measured '
            f'{pct(g.value)}"><span class="range" style="left:{low:.1f}%;width:{high - low:.1f}%">'
            f'</span><span class="point" style="left:{at(g.value):.1f}%"></span></span>')


def cell(c: Cell) -> str:
    if isinstance(c, tuple):
        return "".join(cell(x) for x in c)
    if isinstance(c, Mark):
        return mark(c)
    if isinstance(c, Gauge):
        return gauge(c)
    if isinstance(c, Details):
        return (f"<div>{esc(c.text)}</div><details><summary>{esc(c.summary)}</summary>"
                f"<pre>{esc(c.more)}</pre></details>")
    return esc(c)


def table(t: Table) -> str:
    return raw_table(t.header, [[cell(c) for c in row] for row in t.rows], t.num_cols)


def raw_table(header: tuple[str, ...] | list[str], rows: list[list[str]],
              num_cols: frozenset[int] = frozenset(), row_classes: list[str] | None = None
              ) -> str:
    """Cells are HTML already; header cells are escaped here. row_classes: a CSS class per row."""
    out = ["<table><thead><tr>" + "".join(f"<th>{esc(h)}</th>" for h in header) + "</tr></thead>",
           "<tbody>"]
    for n, row in enumerate(rows):
        css = f' class="{esc(row_classes[n])}"' if row_classes else ""
        out.append(f"<tr{css}>" + "".join(f'<td class="num">{c}</td>' if i in num_cols else f"<td>{c}</td>"
                                    for i, c in enumerate(row)) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


# ---------------------------------------------------------------- sections

def headline_cell(r: dict) -> str:
    throughput_ci = interval(r["ci95_low"], r["ci95_high"], missing=NO_INTERVAL,
                             too_noisy=r.get("ci95_too_noisy", ""))
    parts = [f'<div class="ips">{num(r["images_per_sec"])} img/s</div>',
             f'<div class="sub">95% CI {esc(throughput_ci)}'
             "</div>", f'<div class="sub">from {esc(tables.samples_cell(r))}</div>']
    if r["efficiency"] is not None:
        eci = pct_interval(r["efficiency_ci95_low"], r["efficiency_ci95_high"], missing="",
                           too_noisy=r.get("efficiency_ci95_too_noisy", ""))
        eci = f" ({esc(eci)})" if eci else ""
        parts.append(f'<div>efficiency {pct(r["efficiency"])}<span class="sub">{eci}</span></div>')
    else:
        parts.append('<div class="sub">efficiency: no one-worker run</div>')
    if r["efficiency_vs_best"] is not None:
        parts.append(f'<div class="sub">vs best 1-worker: {pct(r["efficiency_vs_best"])} '
                     f'({esc(r["best_one_worker_framework"])})</div>')
    return "".join(parts) + cell(tables.flag_marks(r))


def _input_problems(model: m.ReportModel, figures: Mapping[str, bytes]) -> str:
    return "<ul>" + "".join(f"<li>{esc(p)}</li>" for p in model.input_problems) + "</ul>"


def _headline(model: m.ReportModel, figures: Mapping[str, bytes]) -> str:
    if not model.rows:
        return "<p>No successful runs.</p>"
    out = []
    if model.noisy:
        out.append(f'<p><span class="badge noisy">{len(model.noisy)} noisy</span> '
                   f"{esc(model.noisy_text)}</p>")
    for group in model.groups:
        by_cell = {(m.workers_label(r), m.series_label(r)): r for r in group.rows}
        workers = list(dict.fromkeys(m.workers_label(r) for r in group.rows))
        body = [[esc(w)] + [headline_cell(by_cell[(w, label)]) if (w, label) in by_cell
                            else '<span class="muted">not run</span>' for label in group.labels]
                for w in workers]
        out += [f"<h3>{esc(group.title)}</h3>",
                *([paragraph(group.headline)] if group.headline else []),
                raw_table(["workers", *group.labels], body)]
        warnings = tables.warning_lines(group)
        if warnings:
            out.append('<p><span class="badge bad">warnings</span></p><ul>'
                       + "".join(f"<li>{esc(w)}</li>" for w in warnings) + "</ul>")
    return "\n".join(out)


def figure_tags(figures: Mapping[str, bytes]) -> str:
    return "\n".join(f'<figure id="fig-{esc(name)}">{image_tag(png, name + " figure")}'
                     f"<figcaption>{esc(CAPTIONS.get(name, name))}</figcaption></figure>"
                     for name, png in figures.items())


def _figures(model: m.ReportModel, figures: Mapping[str, bytes]) -> str:
    if not figures:
        return "<p>No figures: no successful runs.</p>"
    return figure_tags(of_section(figures, m.FIGURES))


def _published(model: m.ReportModel, figures: Mapping[str, bytes]) -> str:
    return table(tables.published_table(model))


def _frameworks(model: m.ReportModel, figures: Mapping[str, bytes]) -> str:
    out = [] if model.comparisons else [paragraph(model.only_one_framework_text)]
    out += [f"<h3>{esc(c.group.title)}</h3>\n{table(tables.comparison_table(c))}"
            for c in model.comparisons]
    if model.wrapper:
        out += [f"<h3>{esc(m.WRAPPER_TITLE)}</h3>", paragraph(m.WRAPPER_TEXT),
                table(tables.wrapper_table(model))]
    return "\n".join(out)


def _mfu(model: m.ReportModel, figures: Mapping[str, bytes]) -> str:
    empty = mfu.empty_text(model.groups)
    if empty:
        return paragraph(empty)
    out = [figure_tags(of_section(figures, mfu.KEY))]
    out += [f"<h3>{esc(g.title)}</h3>\n{table(tables.mfu_table(g))}"
            for g in mfu.groups(model.groups)]
    out.append("<p><b>Peaks:</b></p><ul>" + "".join(
        f"<li>{esc(line)}</li>" for line in mfu.peak_lines(model.rows)) + "</ul>")
    return "\n".join(out)


def _energy(model: m.ReportModel, figures: Mapping[str, bytes]) -> str:
    empty = energy.empty_text(model.rows)
    return "\n".join(([paragraph(empty)] if empty else []) + [
        f"<h3>{esc(g.title)}</h3>\n{table(tables.energy_table(g))}"
        for g in energy.groups(model.groups)])


def _breakdown(model: m.ReportModel, figures: Mapping[str, bytes]) -> str:
    losses = model.losses
    out = [paragraph(losses.empty_text)] if losses.empty_text else []
    out.append(figure_tags(of_section(figures, m.BREAKDOWN)))
    for s in losses.series:
        out.append(f"<h3>{esc(s.title)}</h3>")
        if s.verdict:
            out.append(f"<p><b>Verdict:</b> {esc(s.verdict)}</p>")
        if s.rows:
            out.append(table(tables.breakdown_table(s)))
        if s.missing and not losses.empty_text:
            out.append("<ul>" + "".join(f"<li>no breakdown: {esc(line)}</li>"
                                        for line in s.missing) + "</ul>")
        if s.shares:
            out.append("<p><b>Distance to the limit:</b></p><ul>"
                       + "".join(f"<li>{esc(share.text)}</li>" for share in s.shares) + "</ul>")
        out.append("<p><b>Extrapolation check:</b></p>")
        if any(c.checked for c in s.checks):
            out.append(table(tables.checks_table(s)))
        unchecked = [c.not_checked_text for c in s.checks if not c.checked]
        if unchecked:
            out.append("<ul>" + "".join(f"<li>{esc(line)}</li>" for line in unchecked) + "</ul>")
    return "\n".join(out)


def _scaling_model(model: m.ReportModel, figures: Mapping[str, bytes]) -> str:
    if not model.modelled:
        return "<p>No multi-worker runs: nothing to model.</p>"
    out = []
    if any(x.modelled for x in model.modelled):
        out += ["<p>In the 0-100% column the blue bar spans the bounds and the black mark is the "
                "measurement.</p>", table(tables.scaling_model_table(model))]
    out.append("<ul>" + "".join(f"<li>{esc(note)}</li>"
                                for note in tables.scaling_model_notes(model)) + "</ul>")
    return "\n".join(out)


def _allreduce(model: m.ReportModel, figures: Mapping[str, bytes]) -> str:
    if not model.allreduce:
        return ("<p>No allreduce records among the inputs (<code>scalebench allreduce</code> "
                "measures them).</p>")
    return table(tables.allreduce_table(model))


def _problems(model: m.ReportModel, figures: Mapping[str, bytes]) -> str:
    if not model.failures:
        return "<p>None: every run finished.</p>"
    return table(tables.failures_table(model))


def _environment(model: m.ReportModel, figures: Mapping[str, bytes]) -> str:
    envs = model.environments
    if not envs.envs:
        return "<p>No records.</p>"
    out = []
    if envs.differing_text:
        out.append(f'<p><span class="badge bad">{len(envs.envs)} different environments</span> '
                   f"{esc(envs.differing_text)}</p>")
    out += [f"<p>{esc(v)}</p>" for v in envs.vettings]
    if envs.placements:
        out.append("<ul>" + "".join(f"<li>{esc(p)}</li>" for p in envs.placements) + "</ul>")
    return "\n".join(out + [table(tables.environment_table(model))])


def _method(model: m.ReportModel, figures: Mapping[str, bytes]) -> str:
    return "\n".join(paragraph(text) for text in (model.settings_text, model.basis_text) if text)


def _best(model: m.ReportModel, figures: Mapping[str, bytes]) -> str:
    if not model.best:
        return paragraph(best.EMPTY)
    parts = []
    for cell in model.best:
        parts += [f"<h3>{esc(cell.title)}</h3>", paragraph(cell.verdict),
                  raw_table(best.HEADER, [[esc(v) for v in row] for row in best.rows_of(cell)])]
    return "\n".join(parts)


RENDERERS: dict[str, Callable[[m.ReportModel, Mapping[str, bytes]], str]] = {
    m.INPUT_PROBLEMS: _input_problems, m.HEADLINE: _headline, m.FIGURES: _figures,
    m.PUBLISHED: _published, m.FRAMEWORKS: _frameworks, m.BREAKDOWN: _breakdown,
    m.SCALING_MODEL: _scaling_model, mfu.KEY: _mfu, energy.KEY: _energy,
    m.ALLREDUCE: _allreduce, m.PROBLEMS: _problems, m.ENVIRONMENT: _environment,
    m.METHOD: _method, best.KEY: _best,
}


def heading(section: m.Section) -> str:
    # Titles are the report's own words, not results: quotes stay as they are.
    return f'<h2 id="{esc(section.key)}">{html.escape(section.title, quote=False)}</h2>'


def page(model: m.ReportModel, figures: Mapping[str, bytes]) -> str:
    """figures: name -> PNG bytes, embedded as base64."""
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{esc(model.title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{esc(model.title)}</h1>",
        f'<p class="sub">{esc(model.counts_text)}</p>',
        "<nav>" + "".join(f'<a href="#{esc(s.key)}">{html.escape(s.title, quote=False)}</a>'
                          for s in model.sections) + "</nav>",
    ]
    for section in model.sections:
        parts.append(heading(section))
        parts += [paragraph(p) for p in section.paragraphs]
        parts.append(RENDERERS[section.key](model, figures))
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def write(model: m.ReportModel, out_dir: Path, figure_paths: Mapping[str, Path]) -> Path:
    """report.html next to the figures it embeds (read from figure_paths)."""
    figures = {name: Path(p).read_bytes() for name, p in figure_paths.items()}
    path = out_dir / "report.html"
    path.write_text(page(model, figures), encoding="utf-8")
    return path
