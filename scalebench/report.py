"""The files every sweep leaves: summary.csv, figures, report.md and report.html."""

from __future__ import annotations

from functools import partial
from pathlib import Path

from scalebench import allreduce, analysis, html_report, plots, scaling_model
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


def _gauge(low: float, value: float, high: float, width: int = 20) -> str:
    """0..100% as `width` characters: the bounds as [ and ], the measured point as *."""
    def at(x: float) -> int:
        return min(width - 1, max(0, round(x * (width - 1))))
    chars = ["."] * width
    for i in range(at(low), at(high) + 1):
        chars[i] = "="
    chars[at(low)], chars[at(high)] = "[", "]"
    chars[at(value)] = "*"
    return "`" + "".join(chars) + "`"


def scaling_model_section(model_rows: list[dict]) -> list[str]:
    """The measured efficiency between the model's bounds, and the bottleneck in words."""
    modelled = [m for m in model_rows if m["verdict"] != scaling_model.NOT_MODELLED]
    out = ["## Scaling model", "",
           "Bounds on efficiency from each run's one-worker step time and a ring allreduce of its "
           "fp32 gradients over the measured link: no overlap = compute + allreduce, full overlap "
           "= forward + max(backward, allreduce), backward = 2 x forward (docs/scaling-model.md). "
           "In the 0-100% column, [ ] are the bounds and * the measurement.", ""]
    if not modelled:
        reasons = sorted({m["verdict_text"] for m in model_rows})
        return out + [f"Not modelled: {_md_cell(r)}" for r in reasons] + [""]
    out += ["| model | framework | precision | workers | efficiency | 95% CI | no overlap | "
            "full overlap | 0-100% | compute (ms) | backward (ms) | allreduce (ms) | verdict |",
            "|---|---|---|---:|---:|---|---:|---:|---|---:|---:|---:|---|"]
    for m in modelled:
        ci = (f"{_fmt(m['efficiency_ci95_low'], '.1f', 100)}–"
              f"{_fmt(m['efficiency_ci95_high'], '.1f', 100)}%"
              if m["efficiency_ci95_low"] is not None else "–")
        out.append(
            f"| {m['model']} | {m['framework']} | {m['precision']} | {m['world_size']} | "
            f"{_fmt(m['efficiency'], '.1f', 100)}% | {ci} | "
            f"{_fmt(m['efficiency_no_overlap'], '.1f', 100)}% | "
            f"{_fmt(m['efficiency_full_overlap'], '.1f', 100)}% | "
            f"{_gauge(m['efficiency_no_overlap'], m['efficiency'], m['efficiency_full_overlap'])} | "
            f"{_fmt(m['compute_seconds'], '.1f', 1e3)} | {_fmt(m['backward_seconds'], '.1f', 1e3)} | "
            f"{_fmt(m['allreduce_seconds'], '.1f', 1e3)} | {m['verdict']} |")
    out.append("")
    for m in model_rows:
        link = ""
        if "link_bandwidth" in m:
            described = scaling_model.Link(m["link_bandwidth"], m["link_step_latency"],
                                           m["link_source"]).describe()
            link = f" Link: {described}."
        out.append(f"- {m['model']} {m['framework']} x{m['world_size']} {m['precision']}: "
                   f"{_md_cell(m['verdict_text'])}.{link}")
    return out + [""]


def allreduce_table(records: list[dict]) -> list[str]:
    lines = ["| framework | workers | nodes | device | dtype | size | time (ms) | 95% CI | "
             "algbw (GB/s) | busbw (GB/s) | 95% CI | noisy |",
             "|---|---:|---:|---|---|---:|---:|---|---:|---:|---|---|"]
    for r in allreduce.latest_points(records):
        lo, hi = r["seconds_ci95"]
        blo, bhi = r["busbw_bytes_per_sec_ci95"]
        lines.append(
            f"| {r['framework']} | {r['world_size']} | {r['nodes']} | {r['device']} | "
            f"{r['dtype']} | {allreduce.format_size(r['size_bytes'])} | "
            f"{_fmt(r['seconds'], '.3g', 1e3)} | "
            f"{'–' if lo is None else _fmt(lo, '.3g', 1e3) + '–' + _fmt(hi, '.3g', 1e3)} | "
            f"{_fmt(r['algbw_bytes_per_sec'], '.3g', 1e-9)} | "
            f"{_fmt(r['busbw_bytes_per_sec'], '.3g', 1e-9)} | "
            f"{'–' if blo is None else _fmt(blo, '.3g', 1e-9) + '–' + _fmt(bhi, '.3g', 1e-9)} | "
            f"{'yes' if r.get('noisy') else ''} |")
    return lines


def markdown(records: list[dict], problems: list[Problem], figures: dict[str, str],
             link: scaling_model.Link | None = None) -> str:
    rows = analysis.summary_rows(records)
    out = ["# scalebench report", ""]
    if problems:
        out += ["## Input problems", ""] + [f"- {_md_cell(p)}" for p in problems] + [""]
    out += ["## Throughput and scaling efficiency", ""]
    out += throughput_table(rows) if rows else ["No successful runs."]
    out += [""]
    for name, path in figures.items():
        out += [f"![{name}]({path})", ""]
    if any(r["world_size"] > 1 for r in rows):
        out += scaling_model_section(scaling_model.report_rows(records, link))
    if allreduce.latest_points(records):
        out += ["## Allreduce", "",
                "Each framework's own allreduce per message size: algbw = bytes / time, busbw = "
                "algbw x 2(N-1)/N (as nccl-tests). Warm-up, trials and 95% intervals as for the "
                "training runs; a trial's time is the slowest rank's.", ""]
        out += allreduce_table(records) + [""]
    bad = problem_runs(records)
    if bad:
        out += ["## Failed, timed-out and skipped runs", "",
                "| run | framework | model | workers | status | reason |", "|---|---|---|---:|---|---|"]
        for r in bad:
            what = r.get("model") or (f"allreduce {allreduce.format_size(r['size_bytes'])}"
                                      if r.get("kind") == "allreduce" else "")
            out.append(f"| {_md_cell(r.get('run_id', r.get('kind')))} | {r.get('framework', '')} | "
                       f"{what} | {r.get('world_size', '')} | {r['status']} | "
                       f"{_md_cell(r.get('error', ''))} |")
        out.append("")
    out += ["## Method", "", method_text(records), ""]
    out += ["## Environment", ""]
    for env in environments(records):
        out += ["| field | value |", "|---|---|"]
        out += [f"| {k} | {_md_cell(v)} |" for k, v in env.items()]
        out.append("")
    return "\n".join(out)


def write_all(records: list[dict], problems: list[Problem], out_dir: Path,
              link: scaling_model.Link | None = None) -> list[Path]:
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
    md.write_text(markdown(records, problems, {name: p.name for name, p in figures.items()},
                           link))
    written.append(md)
    written.append(html_report.write(records, problems, out_dir, figures))
    return written
