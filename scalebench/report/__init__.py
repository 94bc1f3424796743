"""The files every sweep leaves: summary.csv, breakdown.csv, efficiency.png, throughput.png (and,
where runs have a breakdown, waterfall.png and bounds.png), report.md and report.html, all from
one ReportModel (report.model.build). Imports analysis, tracking (history page), records and spec;
never frameworks' packages, tasks or running."""

from __future__ import annotations

from pathlib import Path

from scalebench.analysis import aggregate, breakdown, scaling_model
from scalebench.records.results import Problem
from scalebench.report import figures, html, markdown
from scalebench.report.model import ReportModel, build

__all__ = ["ReportModel", "build", "write_all"]


def write_all(records: list[dict], problems: list[Problem], out_dir: Path,
              link: scaling_model.Link | None = None) -> list[Path]:
    """summary.csv, breakdown.csv (the rows the report's breakdown section renders; only the
    header when no run has a breakdown), the figures (figures.FIGURES that have something to
    draw), report.md and report.html in out_dir.

    link: the scaling model's link; by default fitted from allreduce records among `records`.
    """
    import pandas as pd

    out_dir.mkdir(parents=True, exist_ok=True)
    model = build(records, problems, link)
    csv_path = out_dir / "summary.csv"
    pd.DataFrame(aggregate.csv_rows(model.rows), columns=aggregate.SUMMARY_COLUMNS).to_csv(
        csv_path, index=False)
    breakdown_path = out_dir / "breakdown.csv"
    pd.DataFrame(breakdown.csv_rows(model.losses.rows), columns=breakdown.BREAKDOWN_COLUMNS
                 ).to_csv(breakdown_path, index=False)
    drawn = figures.draw_all(model, out_dir)
    md_path = out_dir / "report.md"
    md_path.write_text(markdown.render(model, {name: p.name for name, p in drawn.items()}),
                       encoding="utf-8")
    return [csv_path, breakdown_path, *drawn.values(), md_path, html.write(model, out_dir, drawn)]
