"""report.md: the ReportModel as markdown, section by section."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from scalebench.report import best, energy, mfu, tables
from scalebench.report import model as m
from scalebench.report.figures import CAPTIONS, of_section
from scalebench.report.tables import Cell, Details, Gauge, Mark, Table

GAUGE_WIDTH = 20


def md_text(value: object) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def gauge(g: Gauge, width: int = GAUGE_WIDTH) -> str:
    """0..100% as `width` characters: the bounds as [ and ], the measured point as *."""
    def at(x: float) -> int:
        return min(width - 1, max(0, round(x * (width - 1))))
    chars = ["."] * width
    for i in range(at(g.low), at(g.high) + 1):
        chars[i] = "="
    chars[at(g.low)], chars[at(g.high)] = "[", "]"
    chars[at(g.value)] = "*"
    return "`" + "".join(chars) + "`"


def cell(c: Cell) -> str:
    if isinstance(c, tuple):
        return " ".join(cell(x) for x in c)
    if isinstance(c, Mark):
        return "" if not c.text else (md_text(c.text) if c.css == "muted" else f"**{md_text(c.text)}**")
    if isinstance(c, Gauge):
        return gauge(c)
    if isinstance(c, Details):
        return md_text(c.text)
    return md_text(c)


def table(t: Table) -> list[str]:
    align = ["---:" if i in t.num_cols else "---" for i in range(len(t.header))]
    return ["| " + " | ".join(md_text(h) for h in t.header) + " |", "|" + "|".join(align) + "|",
            *("| " + " | ".join(cell(c) for c in row) + " |" for row in t.rows), ""]


def _input_problems(model: m.ReportModel, figures: Mapping[str, str]) -> list[str]:
    return [f"- {md_text(p)}" for p in model.input_problems] + [""]


def _headline(model: m.ReportModel, figures: Mapping[str, str]) -> list[str]:
    if not model.rows:
        return ["No successful runs.", ""]
    out = [f"{model.noisy_text}", ""] if model.noisy else []
    for group in model.groups:
        out += [f"### {md_text(group.title)}", ""]
        if group.headline:
            out += [md_text(group.headline), ""]
        out += table(tables.summary_table(group))
        warnings = tables.warning_lines(group)
        if warnings:
            out += ["Warnings:", "", *(f"- {md_text(w)}" for w in warnings), ""]
    return out


def figure_lines(figures: Mapping[str, str]) -> list[str]:
    out = []
    for name, path in figures.items():
        out += [f"![{name}]({path})", "", f"*{CAPTIONS.get(name, name)}*", ""]
    return out


def _figures(model: m.ReportModel, figures: Mapping[str, str]) -> list[str]:
    if not figures:
        return ["No figures: no successful runs.", ""]
    return figure_lines(of_section(figures, m.FIGURES))


def _published(model: m.ReportModel, figures: Mapping[str, str]) -> list[str]:
    return table(tables.published_table(model))


def _frameworks(model: m.ReportModel, figures: Mapping[str, str]) -> list[str]:
    out = [] if model.comparisons else [md_text(model.only_one_framework_text), ""]
    for comparison in model.comparisons:
        out += [f"### {md_text(comparison.group.title)}", "",
                *table(tables.comparison_table(comparison))]
    if model.wrapper:
        out += [f"### {md_text(m.WRAPPER_TITLE)}", "", m.WRAPPER_TEXT, "",
                *table(tables.wrapper_table(model))]
    return out


def _mfu(model: m.ReportModel, figures: Mapping[str, str]) -> list[str]:
    empty = mfu.empty_text(model.groups)
    if empty:
        return [empty, ""]
    out = figure_lines(of_section(figures, mfu.KEY))
    for group in mfu.groups(model.groups):
        out += [f"### {md_text(group.title)}", "", *table(tables.mfu_table(group))]
    return out + ["Peaks:", "", *(f"- {md_text(line)}" for line in mfu.peak_lines(model.rows)), ""]


def _energy(model: m.ReportModel, figures: Mapping[str, str]) -> list[str]:
    out = [md_text(energy.empty_text(model.rows)), ""] if energy.empty_text(model.rows) else []
    for group in energy.groups(model.groups):
        out += [f"### {md_text(group.title)}", "", *table(tables.energy_table(group))]
    return out


def _breakdown(model: m.ReportModel, figures: Mapping[str, str]) -> list[str]:
    losses = model.losses
    out = [losses.empty_text, ""] if losses.empty_text else []
    out += figure_lines(of_section(figures, m.BREAKDOWN))
    for s in losses.series:
        out += [f"### {md_text(s.title)}", ""]
        if s.verdict:
            out += [f"**Verdict:** {md_text(s.verdict)}", ""]
        if s.rows:
            out += table(tables.breakdown_table(s))
        if s.missing and not losses.empty_text:
            out += [f"- no breakdown: {md_text(line)}" for line in s.missing] + [""]
        if s.shares:
            out += ["**Distance to the limit:**", "",
                    *(f"- {md_text(share.text)}" for share in s.shares), ""]
        out += ["**Extrapolation check:**", ""]
        if any(c.checked for c in s.checks):
            out += table(tables.checks_table(s))
        out += [f"- {md_text(c.not_checked_text)}" for c in s.checks if not c.checked] + [""]
    return out


def _scaling_model(model: m.ReportModel, figures: Mapping[str, str]) -> list[str]:
    if not model.modelled:
        return ["No multi-worker runs: nothing to model.", ""]
    out = []
    if any(x.modelled for x in model.modelled):
        out += ["In the 0-100% column, [ ] are the bounds and * the measurement.", "",
                *table(tables.scaling_model_table(model))]
    return out + [f"- {md_text(note)}" for note in tables.scaling_model_notes(model)] + [""]


def _allreduce(model: m.ReportModel, figures: Mapping[str, str]) -> list[str]:
    if not model.allreduce:
        return ["No allreduce records among the inputs (`scalebench allreduce` measures them).", ""]
    return table(tables.allreduce_table(model))


def _problems(model: m.ReportModel, figures: Mapping[str, str]) -> list[str]:
    if not model.failures:
        return ["None: every run finished.", ""]
    return table(tables.failures_table(model))


def _environment(model: m.ReportModel, figures: Mapping[str, str]) -> list[str]:
    if not model.environments.envs:
        return ["No records.", ""]
    out = []
    if model.environments.differing_text:
        out += [f"**{len(model.environments.envs)} different environments.** "
                f"{md_text(model.environments.differing_text)}", ""]
    out += [line for v in model.environments.vettings for line in (md_text(v), "")]
    out += [*(f"- {md_text(p)}" for p in model.environments.placements), ""] \
        if model.environments.placements else []
    return out + table(tables.environment_table(model))


def _method(model: m.ReportModel, figures: Mapping[str, str]) -> list[str]:
    return [line for text in (model.settings_text, model.basis_text) if text
            for line in (text, "")]


def _best(model: m.ReportModel, figures: Mapping[str, str]) -> list[str]:
    if not model.best:
        return [best.EMPTY, ""]
    out = []
    for cell in model.best:
        out += [f"### {md_text(cell.title)}", "", md_text(cell.verdict), "",
                "| " + " | ".join(best.HEADER) + " |", "|" + "---|" * len(best.HEADER),
                *("| " + " | ".join(md_text(v) for v in row) + " |"
                  for row in best.rows_of(cell)), ""]
    return out


RENDERERS: dict[str, Callable[[m.ReportModel, Mapping[str, str]], list[str]]] = {
    m.INPUT_PROBLEMS: _input_problems, m.HEADLINE: _headline, m.FIGURES: _figures,
    m.PUBLISHED: _published, m.FRAMEWORKS: _frameworks, m.BREAKDOWN: _breakdown,
    m.SCALING_MODEL: _scaling_model, mfu.KEY: _mfu, energy.KEY: _energy,
    m.ALLREDUCE: _allreduce, m.PROBLEMS: _problems, m.ENVIRONMENT: _environment,
    m.METHOD: _method, best.KEY: _best,
}


def render(model: m.ReportModel, figures: Mapping[str, str]) -> str:
    """figures: name -> the PNG's path relative to report.md."""
    out = [f"# {model.title}", "", model.counts_text, ""]
    for section in model.sections:
        out += [f"## {section.title}", ""]
        for paragraph in section.paragraphs:
            out += [paragraph, ""]
        out += RENDERERS[section.key](model, figures)
    return "\n".join(out)
