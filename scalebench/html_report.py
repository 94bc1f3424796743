"""report.html: one self-contained page (inline CSS, figures as base64 PNG, no script, no network).

Every string that comes from results (hostnames, errors, stderr, paths, versions) goes through
`esc`; numbers are formatted here. The page holds: headline tables per model, the figures (with
Horovod's published efficiencies drawn for reference), framework-vs-framework comparisons at
each worker count, failed/timed-out/skipped runs with their reasons, each run's environment and
the method in plain words.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Iterable
from pathlib import Path

from scalebench import analysis, plots, stats
from scalebench.results import Problem

PUBLISHED_SETUP = ("128 servers x 4 Pascal GPUs, 25 Gbit/s RoCE, batch 64 per GPU, "
                   "synthetic data (Sergeev and Del Balso, 2018)")
MODEL_NAMES = {"inception_v3": "Inception V3", "resnet101": "ResNet-101", "vgg16": "VGG-16"}
SUPERLINEAR = 1.10  # efficiency above this is worth a word of explanation

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
figure{margin:1rem 0}figure img{max-width:100%;height:auto;border:1px solid #eee}
figcaption{color:#444;font-size:.9rem;max-width:900px}
pre{white-space:pre-wrap;word-break:break-word;background:#f7f7f7;padding:.5rem;font-size:.8rem}
nav a{margin-right:.9rem}.muted{color:#666}
"""


def esc(value) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def num(value, spec: str = ".3g", scale: float = 1.0, suffix: str = "") -> str:
    if value is None or value != value:
        return "–"
    return format(value * scale, spec) + suffix


def pct(value) -> str:
    return num(value, ".1f", 100.0, "%")


def interval(low, high, scale: float = 1.0, spec: str = ".3g", suffix: str = "") -> str:
    if low is None or high is None:
        return "no interval (one trial)"
    return f"{num(low, spec, scale)}–{num(high, spec, scale)}{suffix}"


def image_tag(png: bytes, alt: str) -> str:
    data = base64.b64encode(png).decode("ascii")
    return f'<img src="data:image/png;base64,{data}" alt="{esc(alt)}">'


def table(header: Iterable[str], rows: Iterable[Iterable[str]], num_cols: Iterable[int] = ()
          ) -> str:
    """Cells are HTML already (callers escape); header cells are escaped here."""
    nums = set(num_cols)
    out = ["<table><thead><tr>" + "".join(f"<th>{esc(h)}</th>" for h in header) + "</tr></thead>",
           "<tbody>"]
    for row in rows:
        out.append("<tr>" + "".join(f'<td class="num">{c}</td>' if i in nums else f"<td>{c}</td>"
                                    for i, c in enumerate(row)) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


# ---------------------------------------------------------------- grouping

GROUP_FIELDS = ("model", "batch_size", "image_size", "device", "scaling", "data")


def series_label(row: dict) -> str:
    return row["framework"] if row["precision"] == "fp32" else f"{row['framework']} {row['precision']}"


def workers_label(row: dict) -> str:
    return str(row["world_size"]) + (f" ({row['nodes']} nodes)" if row["nodes"] > 1 else "")


def group_title(key: tuple) -> str:
    g = dict(zip(GROUP_FIELDS, key, strict=True))
    per = "per worker" if g["scaling"] == "weak" else "in total"
    return (f"{MODEL_NAMES.get(g['model'], g['model'])} — batch {g['batch_size']} {per}, "
            f"{g['image_size']} px, {g['device']}, {g['scaling']} scaling, {g['data']} data")


def groups(rows: list[dict]) -> dict[tuple, list[dict]]:
    out: dict[tuple, list[dict]] = {}
    for r in rows:
        out.setdefault(tuple(r[f] for f in GROUP_FIELDS), []).append(r)
    return dict(sorted(out.items(), key=lambda kv: tuple(str(v) for v in kv[0])))


def run_samples(records: list[dict]) -> dict[tuple, list[float]]:
    """(group key, series label, world size, nodes) -> the chosen run's per-trial throughputs."""
    return {(tuple(r[f] for f in GROUP_FIELDS), series_label(r), r["world_size"], r["nodes"]):
            r["trial_images_per_sec"] for r in analysis.latest_ok(records)}


# ---------------------------------------------------------------- sections

def headline_cell(r: dict) -> str:
    parts = [f'<div class="ips">{num(r["images_per_sec"])} img/s</div>',
             f'<div class="sub">95% CI {interval(r["ci95_low"], r["ci95_high"])}</div>']
    if r["efficiency"] is not None:
        eci = ("" if r["efficiency_ci95_low"] is None else
               f' ({interval(r["efficiency_ci95_low"], r["efficiency_ci95_high"], 100, ".1f", "%")})')
        parts.append(f'<div>efficiency {pct(r["efficiency"])}<span class="sub">{eci}</span></div>')
    else:
        parts.append('<div class="sub">efficiency: no one-worker run</div>')
    if r["efficiency_vs_best"] is not None:
        parts.append(f'<div class="sub">vs best 1-worker: {pct(r["efficiency_vs_best"])} '
                     f'({esc(r["best_one_worker_framework"])})</div>')
    if r["noisy"]:
        parts.append(f'<span class="badge noisy" title="trial-to-trial standard deviation above '
                     f'{stats.NOISY_REL_STD:.0%} of the mean">noisy ({pct(r["rel_std"])})</span>')
    if r["efficiency"] is not None and r["efficiency"] > SUPERLINEAR:
        parts.append('<span class="badge bad" title="more than linear: the one-worker run was '
                     'slower per worker than this one">superlinear</span>')
    return "".join(parts)


def headline(rows: list[dict]) -> str:
    out = []
    for key, members in groups(rows).items():
        labels = sorted({series_label(r) for r in members})
        by_cell = {(workers_label(r), series_label(r)): r for r in members}
        worker_rows = sorted({(r["world_size"], r["nodes"], workers_label(r)) for r in members})
        body = []
        for _, _, wl in worker_rows:
            cells = [esc(wl)]
            for label in labels:
                r = by_cell.get((wl, label))
                cells.append(headline_cell(r) if r else '<span class="muted">not run</span>')
            body.append(cells)
        out.append(f"<h3>{esc(group_title(key))}</h3>")
        out.append(table(["workers"] + labels, body))
    return "\n".join(out)


def published_section(rows: list[dict]) -> str:
    body = []
    for model, value in sorted(plots.PUBLISHED_HOROVOD.items()):
        here = [r for r in rows if r["model"] == model and r["efficiency"] is not None
                and r["world_size"] > 1]
        if here:
            top = max(r["world_size"] for r in here)
            ours = "; ".join(f"{esc(series_label(r))}: {pct(r['efficiency'])}"
                             for r in sorted(here, key=series_label) if r["world_size"] == top)
            ours = f"at {top} workers: {ours}"
        else:
            ours = '<span class="muted">not measured here</span>'
        body.append([esc(MODEL_NAMES.get(model, model)), pct(value),
                     str(plots.PUBLISHED_WORKERS), ours])
    return (f"<p>Horovod's published scaling efficiencies, drawn as dotted red lines on the "
            f"efficiency figure for reference. Their hardware: {esc(PUBLISHED_SETUP)}. A "
            "different cluster, network and worker count: a reference point, not a target.</p>"
            + table(["model", "published efficiency", "GPUs", "this report"], body, [1, 2]))


def framework_comparison(rows: list[dict], records: list[dict], alpha: float = 0.05) -> str:
    samples = run_samples(records)
    out = []
    for key, members in groups(rows).items():
        per_workers: dict[tuple, list[dict]] = {}
        for r in members:
            per_workers.setdefault((r["world_size"], r["nodes"]), []).append(r)
        body = []
        for (_, _), rs in sorted(per_workers.items()):
            if len({series_label(r) for r in rs}) < 2:
                continue
            rs = sorted(rs, key=lambda r: -r["images_per_sec"])
            fastest = rs[0]
            fast_samples = samples[(key, series_label(fastest), fastest["world_size"],
                                    fastest["nodes"])]
            for r in rs:
                if r is fastest:
                    verdict = '<span class="badge good">fastest</span>'
                else:
                    d = stats.difference(fast_samples, samples[(key, series_label(r),
                                                                r["world_size"], r["nodes"])],
                                         alpha)
                    verdict = (f"slower, significant ({esc(d.test)})" if d.significant
                               else f"not distinguishable ({esc(d.test)})")
                body.append([esc(workers_label(r)), esc(series_label(r)), num(r["images_per_sec"]),
                             interval(r["ci95_low"], r["ci95_high"]),
                             num(r["images_per_sec"] / fastest["images_per_sec"], ".2f",
                                 suffix="×"),
                             pct(r["efficiency"]), verdict])
        if body:
            out.append(f"<h3>{esc(group_title(key))}</h3>")
            out.append(table(["workers", "framework", "images/s", "95% CI", "vs fastest",
                              "efficiency", "difference to the fastest"], body, [2, 4, 5]))
    if not out:
        ran = sorted({series_label(r) for r in rows})
        return (f"<p>Only one framework ran at each worker count ({esc(', '.join(ran) or 'none')}); "
                "nothing to compare side by side.</p>")
    return ("<p>At each worker count, every framework against the fastest one. Whether a gap is "
            f"real is decided on the per-trial samples: Mann-Whitney U (two-sided, alpha {alpha:g}) "
            "where the trial counts let it reach significance, else non-overlapping 95% "
            "intervals.</p>" + "\n".join(out))


def problems_section(records: list[dict]) -> str:
    bad = [r for r in records if r.get("status") != "ok"]
    if not bad:
        return "<p>None: every run finished.</p>"
    body = []
    for r in bad:
        reason = f"<div>{esc(r.get('error') or 'no reason recorded')}</div>"
        if r.get("stderr_tail"):
            reason += f"<details><summary>stderr (last lines)</summary><pre>{esc(r['stderr_tail'])}" \
                      "</pre></details>"
        cls = "noisy" if r["status"] == "skipped" else "bad"
        body.append([esc(r.get("run_id", r.get("kind"))), esc(r.get("framework")),
                     esc(r.get("model")), esc(r.get("world_size")),
                     f'<span class="badge {cls}">{esc(r["status"])}</span>', reason])
    return table(["run", "framework", "model", "workers", "status", "reason"], body)


def environment_section(records: list[dict]) -> str:
    """One column per distinct environment, with the runs that used it; differing fields marked."""
    envs: list[tuple[dict, list[str]]] = []
    for r in records:
        env, run = r.get("env") or {}, str(r.get("run_id", r.get("kind")))
        for known, runs in envs:
            if known == env:
                runs.append(run)
                break
        else:
            envs.append((env, [run]))
    if not envs:
        return "<p>No records.</p>"
    keys = list(dict.fromkeys(k for env, _ in envs for k in env))
    differing = {k for k in keys if len({repr(env.get(k)) for env, _ in envs}) > 1}
    out = []
    if len(envs) > 1:
        out.append(f'<p><span class="badge bad">{len(envs)} different environments</span> '
                   f"Fields that differ are highlighted: {esc(', '.join(sorted(differing)))}. "
                   "Numbers measured in different environments are not directly comparable.</p>")

    def value(env: dict, k: str) -> str:
        return '<span class="muted">–</span>' if env.get(k) is None else esc(env[k])

    body = [["runs"] + [esc(", ".join(runs)) for _, runs in envs]]
    body += [[f'<span class="diff">{esc(k)}</span>' if k in differing else esc(k)]
             + [value(env, k) for env, _ in envs] for k in keys]
    header = ["field"] + (["value"] if len(envs) == 1
                          else [f"environment {i}" for i in range(1, len(envs) + 1)])
    out.append(table(header, body))
    return "\n".join(out)


def method_section(records: list[dict]) -> str:
    ok = [r for r in records if r.get("kind") == "train" and r.get("status") == "ok"]
    settings = ""
    if ok:
        combos = sorted({(r["scaling"], r["warmup"], r["trials"], r["iters"]) for r in ok})
        settings = "<p>This report: " + "; ".join(
            f"{esc(s)} scaling, {w} warm-up step{'s' if w != 1 else ''}, {t} trial"
            f"{'s' if t != 1 else ''} of {i} step{'s' if i != 1 else ''}" for s, w, t, i in combos
        ) + ".</p>"
    return f"""
<p><b>Weak scaling</b> (the default): each worker keeps the same batch, so the global batch grows
with the number of workers, as in Horovod's and TensorFlow's benchmarks. <b>Strong scaling</b>:
the global batch is fixed and split across the workers, so each worker gets less work as workers
are added.</p>
<p>Every framework runs the same training step on the same synthetic data with the same model
code. Each run first does untimed <b>warm-up</b> steps (memory allocation, autotuning, caches),
then several <b>trials</b>: timed windows of a fixed number of steps. Each window starts after a
device sync and a barrier on all workers and ends with a device sync. A trial's throughput is all
workers' images divided by the slowest worker's window time, so a straggler counts.</p>
<p>The <b>95% interval</b> is a Student-t confidence interval of the mean over trials: it says how
well the mean throughput is known, not how much single trials spread. Few trials give wide
intervals. Efficiency intervals combine both runs' uncertainty (delta method).</p>
<p><b>Efficiency</b> = throughput(N) / (N × throughput(1)): 100% is perfect linear scaling. It is
taken against the same framework's one-worker run and, in "vs best 1-worker", against the fastest
one-worker run of any framework, which keeps a slow single-worker baseline from flattering a
framework. A run is flagged <b>noisy</b> when its trial-to-trial standard deviation exceeds
{stats.NOISY_REL_STD:.0%} of its mean; treat its numbers with care, or re-run with more trials.</p>
{settings}"""


def page(records: list[dict], problems: list[Problem], figures: dict[str, bytes],
         title: str = "scalebench report") -> str:
    rows = analysis.summary_rows(records)
    counts = {s: sum(1 for r in records if r.get("status") == s)
              for s in ("ok", "failed", "timeout", "skipped")}
    noisy = [r for r in rows if r["noisy"]]
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{esc(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{esc(title)}</h1>",
        f'<p class="sub">{len(records)} records: '
        + ", ".join(f"{n} {s}" for s, n in counts.items() if n) + "</p>",
        '<nav><a href="#headline">Results</a><a href="#figures">Figures</a>'
        '<a href="#frameworks">Framework vs framework</a><a href="#problems">Failed runs</a>'
        '<a href="#environment">Environment</a><a href="#method">Method</a></nav>',
    ]
    if problems:
        parts.append("<h2>Input problems</h2><ul>"
                     + "".join(f"<li>{esc(p)}</li>" for p in problems) + "</ul>")
    parts.append('<h2 id="headline">Throughput and scaling efficiency</h2>')
    if noisy:
        parts.append(f'<p><span class="badge noisy">{len(noisy)} noisy</span> '
                     f"{len(noisy)} of {len(rows)} runs vary by more than "
                     f"{stats.NOISY_REL_STD:.0%} from trial to trial: "
                     + esc(", ".join(f"{r['model']} {series_label(r)} x{r['world_size']}"
                                     for r in noisy)) + ".</p>")
    parts.append(headline(rows) if rows else "<p>No successful runs.</p>")
    parts.append('<h2 id="figures">Figures</h2>')
    captions = {
        "efficiency": "Scaling efficiency against each framework's own one-worker run, with 95% "
                      "intervals; the grey dashed line is perfect scaling, the dotted red lines "
                      f"are Horovod's published efficiencies at {plots.PUBLISHED_WORKERS} GPUs "
                      f"({PUBLISHED_SETUP}).",
        "throughput": "Images per second of all workers together, with 95% intervals; the grey "
                      "dashed line is linear scaling of the best one-worker run.",
    }
    if not figures:
        parts.append("<p>No figures: no successful runs.</p>")
    for name, png in figures.items():
        parts.append(f'<figure id="fig-{esc(name)}">{image_tag(png, name + " figure")}'
                     f"<figcaption>{esc(captions.get(name, name))}</figcaption></figure>")
    parts.append("<h3>Horovod's published points</h3>" + published_section(rows))
    parts.append('<h2 id="frameworks">Framework vs framework</h2>')
    parts.append(framework_comparison(rows, records))
    parts.append('<h2 id="problems">Failed, timed-out and skipped runs</h2>')
    parts.append(problems_section(records))
    parts.append('<h2 id="environment">Environment</h2>')
    parts.append(environment_section(records))
    parts.append('<h2 id="method">Method</h2>')
    parts.append(method_section(records))
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def write(records: list[dict], problems: list[Problem], out_dir: Path,
          figure_paths: dict[str, Path]) -> Path:
    """report.html next to the figures it embeds (read from figure_paths)."""
    figures = {name: Path(p).read_bytes() for name, p in figure_paths.items()}
    path = out_dir / "report.html"
    path.write_text(page(records, problems, figures), encoding="utf-8")
    return path
