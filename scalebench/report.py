"""The files every sweep leaves: summary.csv, figures, report.md and report.html."""

from __future__ import annotations

from functools import partial
from pathlib import Path

from scalebench import analysis, html_report, plots
from scalebench.results import Problem


def _fmt(value, spec: str = ".1f", scale: float = 1.0) -> str:
    if value is None or value != value:  # None or NaN
        return "–"
    return format(value * scale, spec)


def _md_cell(value) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def throughput_table(rows: list[dict]) -> list[str]:
    lines = ["| model | framework | precision | workers | nodes | images/s | 95% CI | "
             "per worker | efficiency | 95% CI | vs best 1-worker | per node | noisy |",
             "|---|---|---|---:|---:|---:|---|---:|---:|---|---:|---:|---|"]
    for r in rows:
        ci = f"{_fmt(r['ci95_low'])}–{_fmt(r['ci95_high'])}" if r["ci95_low"] is not None else "–"
        eci = (f"{_fmt(r['efficiency_ci95_low'], '.1f', 100)}–"
               f"{_fmt(r['efficiency_ci95_high'], '.1f', 100)}%"
               if r["efficiency_ci95_low"] is not None else "–")
        best = _fmt(r["efficiency_vs_best"], ".1f", 100)
        if r["efficiency_vs_best"] is not None:
            best += f"% ({r['best_one_worker_framework']})"
        lines.append(
            f"| {r['model']} | {r['framework']} | {r['precision']} | {r['world_size']} | "
            f"{r['nodes']} | {_fmt(r['images_per_sec'], '.2f')} | {ci} | "
            f"{_fmt(r['per_worker_images_per_sec'], '.2f')} | "
            f"{_fmt(r['efficiency'], '.1f', 100)}{'%' if r['efficiency'] is not None else ''} | "
            f"{eci} | {best} | "
            f"{_fmt(r['efficiency_per_node'], '.1f', 100)}"
            f"{'%' if r['efficiency_per_node'] is not None else ''} | "
            f"{'yes (' + _fmt(r['rel_std'], '.1f', 100) + '%)' if r['noisy'] else ''} |")
    return lines


def problem_runs(records: list[dict]) -> list[dict]:
    return [r for r in records if r.get("status") != "ok"]


def environments(records: list[dict]) -> list[dict]:
    seen, envs = set(), []
    for r in records:
        env = r.get("env", {})
        key = tuple(sorted((k, str(v)) for k, v in env.items()))
        if key not in seen:
            seen.add(key)
            envs.append(env)
    return envs


def method_text(records: list[dict]) -> str:
    ok = [r for r in records if r.get("kind") == "train" and r.get("status") == "ok"]
    if not ok:
        return "No successful runs."
    r = ok[0]
    scaling = ("weak scaling: the per-worker batch is fixed and the global batch grows with the "
               "workers" if r["scaling"] == "weak" else
               "strong scaling: the global batch is fixed and split across the workers")
    return (
        f"{scaling}. Each run does {r['warmup']} untimed warm-up steps, then {r['trials']} trials "
        f"of {r['iters']} steps. Every trial window starts after a device sync and a barrier on "
        "all ranks and ends with a device sync; a trial's throughput is all workers' images "
        "divided by the slowest rank's window time. The 95% interval is a Student-t interval of "
        "the mean over trials (how well the mean is known, not the spread of trials); efficiency "
        "intervals are delta-method approximations. Efficiency is throughput(N) / (N x "
        "throughput(1)) against the same framework's one-worker run; 'vs best 1-worker' uses the "
        "fastest one-worker run of any framework. Runs whose trial-to-trial standard deviation "
        f"exceeds {100 * 0.05:.0f}% of the mean are flagged noisy.")


def markdown(records: list[dict], problems: list[Problem], figures: dict[str, str]) -> str:
    rows = analysis.summary_rows(records)
    out = ["# scalebench report", ""]
    if problems:
        out += ["## Input problems", ""] + [f"- {_md_cell(p)}" for p in problems] + [""]
    out += ["## Throughput and scaling efficiency", ""]
    out += throughput_table(rows) if rows else ["No successful runs."]
    out += [""]
    for name, path in figures.items():
        out += [f"![{name}]({path})", ""]
    bad = problem_runs(records)
    if bad:
        out += ["## Failed, timed-out and skipped runs", "",
                "| run | framework | model | workers | status | reason |", "|---|---|---|---:|---|---|"]
        for r in bad:
            out.append(f"| {_md_cell(r.get('run_id', r.get('kind')))} | {r.get('framework', '')} | "
                       f"{r.get('model', '')} | {r.get('world_size', '')} | {r['status']} | "
                       f"{_md_cell(r.get('error', ''))} |")
        out.append("")
    out += ["## Method", "", method_text(records), ""]
    out += ["## Environment", ""]
    for env in environments(records):
        out += ["| field | value |", "|---|---|"]
        out += [f"| {k} | {_md_cell(v)} |" for k, v in env.items()]
        out.append("")
    return "\n".join(out)


def write_all(records: list[dict], problems: list[Problem], out_dir: Path) -> list[Path]:
    """summary.csv, efficiency.png, throughput.png, report.md and report.html in out_dir.

    The efficiency figure carries Horovod's published efficiencies as reference lines.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = analysis.summary_rows(records)
    written = []
    csv_path = out_dir / "summary.csv"
    analysis.summary_frame(records).to_csv(csv_path, index=False)
    written.append(csv_path)
    figures: dict[str, Path] = {}
    for name, draw in (("efficiency", partial(plots.efficiency_plot, published=True)),
                       ("throughput", plots.throughput_plot)):
        path = draw(rows, out_dir / f"{name}.png")
        if path is not None:
            figures[name] = path
            written.append(path)
    md = out_dir / "report.md"
    md.write_text(markdown(records, problems, {name: p.name for name, p in figures.items()}))
    written.append(md)
    written.append(html_report.write(records, problems, out_dir, figures))
    return written
