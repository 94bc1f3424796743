"""The measuring part of scripts/gpu-check.sh, run in the check's private environment once the
bundle is installed and Horovod built (or not): every step is one of the project's own commands
(`scalebench env`, `list`, `sweep`, `report`, benchmarks/harness_overhead.py, the vet task's
node probes), run in order of value under one deadline; a step that no longer fits is skipped
and named. Writes OUT/summary.md (readable alone), results.jsonl, summary.csv, report.html,
env.json and check.log (the shell script adds build.log): at most 7 files.

    python scripts/gpu_check.py --out OUT --work WORK --device cuda|cpu --deadline UNIX
                                [--horovod-status FILE] [--horovod-errors FILE] [--bundle DIR]

Exit status: 0 every planned step ran ok; 1 a step failed; 3 Horovod was planned but not built
(its build failed or ran out of its box); 4 a step was skipped for want of time. 1 wins over 3,
3 over 4 (scripts/gpu-check.sh documents the same).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MODELS = ("resnet101", "inception_v3", "vgg16")
# What one run costs on each device (seconds), before the first sweep measures it: a launch's
# start-up (torchrun / horovodrun, imports, the peak probe) and one configuration (model build,
# warm-up, windows; DDP's one-worker run also times its wrapped step).
COSTS = {"cuda": {"launch": 25.0, "config": 12.0}, "cpu": {"launch": 8.0, "config": 6.0}}
RESERVE = {"cuda": 40.0, "cpu": 15.0}  # kept back for the report and the summary
EXIT_WORDS = {0: "every planned step ran ok", 1: "a step failed",
              3: "Horovod was planned but did not build; its steps did not run",
              4: "a step was skipped for want of time"}


@dataclass(frozen=True)
class Sizes:
    models: tuple[str, ...]
    batch: int
    image_size: int | None  # None: each model's native size (224; Inception V3 299 with aux)
    warmup: int
    iters: int
    trials: int
    harness: tuple[str, int, int]  # model, image size, batch of the harness-overhead benchmark


# On a CPU the same steps at a small size, with one model: a 2-core machine takes about 20 s
# per configuration even at 32 px (Inception V3 cannot go below 75 px).
SIZES = {"cuda": Sizes(MODELS, 64, None, 3, 10, 3, ("resnet101", 224, 64)),
         "cpu": Sizes(("resnet101",), 2, 32, 1, 1, 2, ("resnet101", 32, 2))}


@dataclass
class StepResult:
    name: str
    status: str  # ok, failed, skipped
    seconds: float
    note: str = ""


@dataclass
class Check:
    out: Path
    work: Path
    device: str
    deadline: float
    log_path: Path
    steps: list[StepResult] = field(default_factory=list)
    per_config: float = 0.0  # measured seconds per configuration, after the first sweep
    per_launch: float = 0.0

    def left(self) -> float:
        return self.deadline - RESERVE[self.device] - time.time()

    def log(self, text: str) -> None:
        with open(self.log_path, "a", encoding="utf-8") as fh:
            fh.write(text.rstrip() + "\n")

    def run(self, name: str, argv: list[str], timeout: float, out_file: Path | None = None
            ) -> tuple[int, str]:
        """One command with the time left; its output to check.log (and out_file)."""
        env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH",
                                                                                    "")}
        self.log(f"== {name}: {' '.join(argv)} (timeout {timeout:.0f} s)")
        # Its own process group: at the deadline it gets Ctrl-C (a sweep then stops its
        # launches and keeps its records), and whatever is left of the group is killed.
        child = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True, start_new_session=True)
        try:
            text, _ = child.communicate(timeout=max(1.0, timeout))
            code = child.returncode
        except subprocess.TimeoutExpired:
            text = stop(child) + f"\n(stopped at the deadline, after {timeout:.0f} s)"
            code = 124
        self.log(text[-20000:])
        if out_file is not None:
            out_file.write_text(text, encoding="utf-8")
        return code, text


def stop(child: subprocess.Popen, grace: float = 20.0) -> str:
    """Ctrl-C to the child's process group, then SIGKILL to what is left after `grace`."""
    try:
        os.killpg(child.pid, signal.SIGINT)
        text, _ = child.communicate(timeout=grace)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        text, _ = child.communicate()
    except ProcessLookupError:
        text, _ = child.communicate()
    return text or ""


def python() -> str:
    return sys.executable


# ---------------------------------------------------------------- the steps

def environment(check: Check) -> StepResult:
    start = time.time()
    code, text = check.run("environment", [python(), "-m", "scalebench", "env", "--device",
                                           check.device], 60)
    try:
        env = json.loads(text[text.index("{"):text.rindex("}") + 1])
    except ValueError:
        return StepResult("environment and topology", "failed", time.time() - start,
                          f"scalebench env exited {code}")
    (check.out / "env.json").write_text(json.dumps(env, indent=2), encoding="utf-8")
    if shutil.which("nvidia-smi"):
        check.run("nvidia-smi", ["nvidia-smi", "--query-gpu=name,driver_version,memory.total,"
                                 "clocks.max.sm,power.limit,compute_cap", "--format=csv"], 30)
    return StepResult("environment and topology", "ok", time.time() - start)


@dataclass(frozen=True)
class Sweep:
    name: str
    frameworks: tuple[str, ...]
    precisions: tuple[str, ...]
    tf32: str

    def configs(self, models: int) -> int:
        return len(self.frameworks) * len(self.precisions) * models

    def launches(self) -> int:
        return len(self.frameworks) * len(self.precisions)


def estimate(check: Check, sweep: Sweep) -> float:
    cost = COSTS[check.device]
    launch = check.per_launch or cost["launch"]
    config = check.per_config or cost["config"]
    return sweep.launches() * launch + sweep.configs(len(SIZES[check.device].models)) * config


def stopped_at_deadline(name: str, seconds: float, need: float, left: float) -> StepResult:
    """A step that started with the time its estimate asked for and met the deadline first
    (CPU fp16, say, far slower than the first sweep's calibration): skipped for want of time
    (exit status 4), not failed, for nothing it runs went wrong."""
    return StepResult(name, "skipped", seconds, f"stopped at the deadline after {seconds:.0f} s: "
                                                f"about {need:.0f} s needed, {left:.0f} s left "
                                                "at its start")


def run_sweep(check: Check, sweep: Sweep) -> StepResult:
    sizes = SIZES[check.device]
    need = estimate(check, sweep)
    left = check.left()
    if left < need:
        return StepResult(sweep.name, "skipped", 0.0, f"about {need:.0f} s needed, "
                                                      f"{max(0.0, left):.0f} s left")
    folder = check.work / "sweeps" / sweep.name
    shutil.rmtree(folder, ignore_errors=True)
    argv = [python(), "-m", "scalebench", "sweep", "--device", check.device, "--workers", "1",
            "--models", ",".join(sizes.models), "--frameworks", ",".join(sweep.frameworks),
            "--precision", ",".join(sweep.precisions), "--tf32", sweep.tf32,
            "--batch-size", str(sizes.batch), "--warmup", str(sizes.warmup),
            "--iters", str(sizes.iters), "--trials", str(sizes.trials),
            "--timeout", str(int(max(30.0, min(300.0, check.left())))),
            "--launch", "grouped", "--quiet", "--no-report", "--out", str(folder)]
    if sizes.image_size:
        argv += ["--image-size", str(sizes.image_size)]
    start = time.time()
    code, _ = check.run(sweep.name, argv, check.left())
    seconds = time.time() - start
    records = read_records(folder / "results.jsonl")
    ok = sum(1 for r in records if r.get("status") == "ok")
    if ok and not check.per_config:  # calibrate the estimates on what this machine did
        launch = COSTS[check.device]["launch"]
        check.per_launch = launch
        check.per_config = max(1.0, (seconds - sweep.launches() * launch)
                               / sweep.configs(len(sizes.models)))
    bad = [r for r in records if r.get("status") != "ok"]
    note = f"{ok} of {sweep.configs(len(sizes.models))} runs ok" + (
        "; " + "; ".join(f"{r.get('model')} {r.get('framework')} {r.get('precision')}: "
                         f"{r.get('status')} ({str(r.get('error'))[:160]})" for r in bad[:4])
        if bad else "")
    if code == 124 and not ok:
        return stopped_at_deadline(sweep.name, seconds, need, left)
    if code == 124:
        note += "; the rest stopped at the deadline"
    if code not in (0, 1) and not records:
        return StepResult(sweep.name, "failed", seconds, f"scalebench sweep exited {code}"
                          + (" (stopped at the deadline)" if code == 124 else ""))
    return StepResult(sweep.name, "ok" if ok else "failed", seconds, note)


def harness(check: Check) -> StepResult:
    model, size, batch = SIZES[check.device].harness
    need = 3 * (check.per_config or COSTS[check.device]["config"]) + 10
    left = check.left()
    if left < need:
        return StepResult("harness vs a bare PyTorch loop", "skipped", 0.0,
                          f"about {need:.0f} s needed, {max(0.0, left):.0f} s left")
    path = check.work / "harness.json"
    path.unlink(missing_ok=True)
    sizes = SIZES[check.device]
    start = time.time()
    code, _ = check.run("harness", [python(), "benchmarks/harness_overhead.py", "--device",
                                    check.device, "--model", model, "--image-size", str(size),
                                    "--batch-size", str(batch), "--warmup", str(sizes.warmup),
                                    "--iters", str(sizes.iters), "--trials", str(sizes.trials),
                                    "--rounds", "2", "--json", str(path)], check.left())
    if code == 124:
        return stopped_at_deadline("harness vs a bare PyTorch loop", time.time() - start, need,
                                   left)
    if code != 0 or not path.is_file():
        return StepResult("harness vs a bare PyTorch loop", "failed", time.time() - start,
                          f"exited {code}")
    data = json.loads(path.read_text())
    return StepResult("harness vs a bare PyTorch loop", "ok", time.time() - start,
                      f"{model} {size} px batch {batch}: scalebench / bare loop = "
                      f"{data['median_ratio']:.3f} (median of {len(data['ratios'])} rounds; "
                      "goal >= 0.98)")


def vet(check: Check) -> StepResult:
    need = 2 * (check.per_launch or COSTS[check.device]["launch"])
    left = check.left()
    if left < need:
        return StepResult("vetting's per-GPU probes", "skipped", 0.0,
                          f"about {need:.0f} s needed, {max(0.0, left):.0f} s left")
    folder = check.work / "vet"
    shutil.rmtree(folder, ignore_errors=True)
    start = time.time()
    code, text = check.run("vet", [python(), __file__, "vet-probes", "--device", check.device,
                                   "--out", str(folder)], check.left())
    records = read_records(folder / "results.jsonl")
    if code == 124 and (not records or records[-1].get("status") != "ok"):
        return stopped_at_deadline("vetting's per-GPU probes", time.time() - start, need, left)
    if not records or records[-1].get("status") != "ok":
        why = records[-1].get("error") if records else f"exited {code}"
        return StepResult("vetting's per-GPU probes", "failed", time.time() - start, str(why))
    return StepResult("vetting's per-GPU probes", "ok", time.time() - start,
                      text.strip().splitlines()[-1] if text.strip() else "")


def vet_probes(device: str, out: Path) -> int:
    """The vet task's node probes (compute step and GEMM per device) on this one machine,
    through the executor and DDP's local launcher: one task per GPU (one on a CPU)."""
    import socket

    from scalebench.frameworks import ddp
    from scalebench.hardware import devices
    from scalebench.running import executor
    from scalebench.spec.launch import Job, LaunchSpec
    from scalebench.tasks import vet as vet_task
    from scalebench.vet.options import DEFAULT_MATMUL, VetOptions
    from scalebench.vet.plan import train_spec

    info = devices.resolve(device)
    sizes = SIZES[device]
    per_node = max(1, info.accelerators) if info.device == "cuda" else 1
    options = VetOptions(device=device, batch_size=sizes.batch * (1 if device == "cuda" else 2),
                         image_size=sizes.harness[1], warmup=max(2, sizes.warmup),
                         iters=sizes.iters, repeats=3,
                         matmul_size=DEFAULT_MATMUL[info.device] // (1 if device == "cuda" else 2))
    launch = LaunchSpec(framework="ddp", world_size=per_node, nodes=1, device=info.device,
                        backend=info.backend, timeout=120.0,
                        threads_per_worker=devices.threads_per_worker(info, per_node, None),
                        options=ddp.Options())
    spec = vet_task.VetSpec(probe="nodes", nodes=(socket.gethostname(),), together=True,
                            repeats=options.repeats, per_node=per_node,
                            train=train_spec(options, info), matmul_size=options.matmul_size,
                            matmul_iters=options.matmul_iters)
    job = Job(f"vet-{time.strftime('%Y%m%d-%H%M%S')}-nodes", vet_task.KIND, launch, spec)
    done = executor.execute([job], info, out, lambda name: ddp.Options())
    for record in done.records:
        print(vet_task.result_text(record))
    return 0 if all(r["status"] == "ok" for r in done.records) else 1


# ---------------------------------------------------------------- results and the summary

def read_records(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


def collect(check: Check) -> list[dict]:
    """Every sweep's and the vetting's records into OUT/results.jsonl."""
    records = []
    for path in sorted((check.work / "sweeps").glob("*/results.jsonl")):
        records += read_records(path)
    records += read_records(check.work / "vet" / "results.jsonl")
    with open(check.out / "results.jsonl", "w", encoding="utf-8") as fh:
        for r in records:
            fh.write(json.dumps(r) + "\n")
    return records


def write_report(check: Check, records: list[dict]) -> StepResult:
    start = time.time()
    if not any(r.get("kind") == "train" for r in records):
        return StepResult("report", "skipped", 0.0, "no training record")
    folder = check.work / "report"
    shutil.rmtree(folder, ignore_errors=True)
    code, _ = check.run("report", [python(), "-m", "scalebench", "report",
                                   str(check.out / "results.jsonl"), "--out", str(folder)],
                        max(30.0, check.deadline - time.time()))
    for name in ("report.html", "summary.csv"):
        if (folder / name).is_file():
            shutil.copy(folder / name, check.out / name)
    return StepResult("report", "ok" if code == 0 else "failed", time.time() - start,
                      "" if code == 0 else f"scalebench report exited {code}")


def fmt(value: float | None, spec: str = ".3g", scale: float = 1.0, suffix: str = "") -> str:
    return "–" if value is None else format(value * scale, spec) + suffix


def results_table(records: list[dict]) -> list[str]:
    train = [r for r in records if r.get("kind") == "train" and r.get("status") == "ok"]
    if not train:
        return ["No training run finished.", ""]
    lines = ["| model | px | framework | precision | math | images/s | MFU (measured peak) | "
             "MFU (datasheet) | joules/image | watts |",
             "|---|---:|---|---|---|---:|---:|---:|---:|---:|"]
    for r in sorted(train, key=lambda r: (r["model"], r["framework"], r["precision"],
                                          str(r.get("tf32")))):
        math = r.get("math") or {}
        tf32 = "TF32" if math.get("cudnn_allow_tf32") or math.get("matmul_precision") in (
            "high", "medium") else ("fp32" if r["precision"] == "fp32" and r["device"] == "cuda"
                                    else "–")
        lines.append(f"| {r['model']} | {r['image_size']}{' +aux' if r.get('aux_logits') else ''}"
                     f" | {r['framework']} | {r['precision']} (tf32 {r.get('tf32')}) | {tf32} | "
                     f"{fmt(r.get('images_per_sec'), '.1f')} | {fmt(r.get('mfu'), '.1f', 100, '%')}"
                     f" | {fmt(r.get('mfu_datasheet'), '.1f', 100, '%')} | "
                     f"{fmt(r.get('joules_per_image'))} | {fmt(r.get('mean_watts_per_worker'))} |")
    return lines + [""]


def energy_line(records: list[dict]) -> str:
    from scalebench.hardware.energy import not_measured_text

    train = [r for r in records if r.get("kind") == "train" and r.get("status") == "ok"]
    if any(r.get("joules_per_image") for r in train):
        kinds = sorted({k for r in train for k in (r.get("energy") or {}).get("components", {})})
        return (f"Energy measured ({'+'.join(kinds)}): component energy of the timed windows, "
                "not MLPerf Power.")
    reasons = list(dict.fromkeys(not_measured_text(r) for r in train))
    return "Energy not measured: " + ("; ".join(reasons) or "no run finished") + "."


def peaks(records: list[dict]) -> list[str]:
    seen = {}
    for r in records:
        if r.get("kind") == "train" and r.get("peak_flops"):
            seen[(r["precision"], r.get("tf32"))] = (
                f"- {r['precision']} (tf32 {r.get('tf32')}): measured "
                f"{r['peak_flops'] / 1e12:.4g} TFLOP/s ({r.get('peak_method')})"
                + (f"; datasheet {r['datasheet_peak_flops'] / 1e12:.4g} TFLOP/s"
                   if r.get("datasheet_peak_flops") else ""))
    return list(seen.values())


def vet_lines(records: list[dict]) -> list[str]:
    out = []
    for r in records:
        if r.get("kind") == "vet" and r.get("status") == "ok":
            for u in r.get("units", []):
                compute = sorted(u["compute_images_per_sec"])
                flops = sorted(u["matmul_flops_per_sec"])
                out.append(f"- {u['node']} device {u['device_index']} ({u['device_name']}): "
                           f"compute {compute[len(compute) // 2]:.3g} images/s (median of "
                           f"{len(compute)}), GEMM {flops[len(flops) // 2] / 1e12:.3g} TFLOP/s")
    return out


def stability_lines(env: dict) -> list[str]:
    """`scalebench env`'s unstable settings and unread ones (hardware/stability.py)."""
    from scalebench.hardware import stability

    found = env.get("stability")
    if not isinstance(found, dict):
        return ["not read (env.json holds no stability readings)"]
    return stability.lines(found) or ["none found: governor, turbo, persistence mode, "
                                      "application clocks and power limits as they should be"]


def disturbed_line(records: list[dict]) -> str:
    """How many ok training records were disturbed, and by what (analysis/disturbance.py)."""
    from scalebench.analysis import disturbance

    ok = [r for r in records if r.get("kind") == "train" and r.get("status") == "ok"]
    hit = [r for r in ok if disturbance.is_disturbed(r)]
    return (f"Disturbed records: {len(hit)} of {len(ok)}"
            + (": " + "; ".join(f"{r.get('run_id')}: {disturbance.record_text(r)}"
                                for r in hit) if hit else "") + ".")


# How gpu-check.sh's Horovod line starts when horovod.torch imports: built now, installed
# from the wheel cache, or installed by the --install-only command before this one
HOROVOD_READY = ("built", "installed", "already installed")


def horovod_ready(status: str) -> bool:
    """Whether the Horovod line says Horovod can be measured (its steps are planned)."""
    return status.startswith(HOROVOD_READY)


def exit_status(steps: list[StepResult], horovod: str) -> int:
    """0 all planned steps ok; 1 a step failed; 3 a planned Horovod build did not give a usable
    Horovod; 4 a step skipped for want of time."""
    if any(s.status == "failed" for s in steps):
        return 1
    if horovod.startswith("skipped"):  # "not built: ..." is a build that was never planned
        return 3
    if any(s.status == "skipped" for s in steps):
        return 4
    return 0


def summary(check: Check, records: list[dict], started: float, bundle: Path | None,
            horovod: str, horovod_errors: str = "") -> str:
    from scalebench.hardware import topology

    env = {}
    if (check.out / "env.json").is_file():
        env = json.loads((check.out / "env.json").read_text())
    elapsed = time.time() - started
    skipped = [s for s in check.steps if s.status != "ok"]
    manifest = {}
    if bundle is not None and (bundle / "manifest.txt").is_file():
        manifest = dict(line.split("=", 1) for line in
                        (bundle / "manifest.txt").read_text().splitlines() if "=" in line)
    lines = [f"# scalebench GPU check: {env.get('accelerator_model') or env.get('cpu_model')}",
             "",
             f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')} on {env.get('hostname')}, device "
             f"`{check.device}`, {elapsed:.0f} s of the measuring steps "
             f"({'all steps ran' if not skipped else f'{len(skipped)} steps not ok or skipped'}).",
             "",
             f"Versions: Python {env.get('python')}, torch {env.get('torch')}, torchvision "
             f"{env.get('torchvision')}, CUDA {env.get('cuda')}, cuDNN {env.get('cudnn')}, NCCL "
             f"{env.get('nccl')}, Horovod {env.get('horovod') or 'not installed'}, Ray "
             f"{env.get('ray') or 'not installed'}; scalebench {env.get('git_commit')}.", "",
             "## Steps", "", "| step | status | seconds | note |", "|---|---|---:|---|"]
    lines += [f"| {s.name} | {s.status} | {s.seconds:.0f} | {s.note.replace('|', '/')} |"
              for s in check.steps]
    lines += ["", f"Horovod: {horovod}", ""]
    if horovod_errors.strip():
        lines += ["### Why Horovod did not build", "", "```", *horovod_errors.strip().splitlines(),
                  "```", "", "build.log holds the whole build log.", ""]
    lines += [f"Ray: not checked, {manifest.get('ray', 'the bundle holds no Ray')}." if not
              env.get("ray") else f"Ray: {env.get('ray')} (installed; not in this check's steps).",
              "", "## Results (one worker, every framework the same step)", "",
              *([f"On a CPU: {', '.join(SIZES['cpu'].models)} only, at "
                 f"{SIZES['cpu'].image_size} px, batch {SIZES['cpu'].batch} (a GPU check runs "
                 f"{', '.join(MODELS)} at their native sizes, batch 64).", ""]
                if check.device == "cpu" else []),
              *results_table(records), energy_line(records), "", "Peaks (MFU's denominator):", "",
              *(peaks(records) or ["- none measured"]), ""]
    lines += ["## Settings that make numbers unstable", "",
              *(f"- {x}" for x in stability_lines(env)), "", disturbed_line(records), ""]
    vets = vet_lines(records)
    if vets:
        lines += ["## Vetting's per-device probes", "", *vets, ""]
    lines += ["## Topology", "", *(f"- {x}" for x in topology.describe(env.get("topology"))), "",
              "## Files", "",
              "summary.md (this), results.jsonl (every record), summary.csv and report.html (the "
              "report: throughput, MFU, energy, environment), env.json (versions and topology), "
              "check.log (every command and its output), build.log (offline install, Horovod "
              "build).", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    if argv and argv[0] == "vet-probes":
        p = argparse.ArgumentParser(prog="gpu_check.py vet-probes")
        p.add_argument("--device", choices=("cuda", "cpu"), required=True)
        p.add_argument("--out", type=Path, required=True)
        a = p.parse_args(argv[1:])
        return vet_probes(a.device, a.out)
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--work", type=Path, required=True)
    p.add_argument("--device", choices=("cuda", "cpu"), required=True)
    p.add_argument("--deadline", type=float, required=True, help="unix time to finish by")
    p.add_argument("--horovod-status", type=Path)
    p.add_argument("--horovod-errors", type=Path)
    p.add_argument("--bundle", type=Path)
    a = p.parse_args(argv)
    started = time.time()
    a.out.mkdir(parents=True, exist_ok=True)
    a.work.mkdir(parents=True, exist_ok=True)
    check = Check(a.out, a.work, a.device, a.deadline, a.out / "check.log")
    horovod = a.horovod_status.read_text().strip() if a.horovod_status and \
        a.horovod_status.is_file() else "not attempted"
    hvd = ("horovod",) if horovod_ready(horovod) else ()
    on = "on" if a.device == "cuda" else "default"  # a CPU has no TF32: the same steps
    fp32 = "fp32 (TF32 on)" if a.device == "cuda" else "fp32"
    plan = [("env", None),
            ("sweep", Sweep(f"ddp {fp32} and bf16", ("ddp",), ("fp32", "bf16"), on)),
            *([("sweep", Sweep(f"horovod {fp32} and bf16", hvd, ("fp32", "bf16"), on))]
              if hvd else []),
            ("harness", None),
            ("sweep", Sweep("ddp fp16", ("ddp",), ("fp16",), on)),
            ("sweep", Sweep("ddp fp32 TF32 off", ("ddp",), ("fp32",), "off")),
            ("vet", None),
            *([("sweep", Sweep("horovod fp16", hvd, ("fp16",), on)),
               ("sweep", Sweep("horovod fp32 TF32 off", hvd, ("fp32",), "off"))] if hvd else [])]
    for kind, sweep in plan:
        if kind == "env":
            result = environment(check)
        elif kind == "sweep":
            result = run_sweep(check, sweep)
        elif kind == "harness":
            result = harness(check)
        else:
            result = vet(check)
        check.steps.append(result)
        check.log(f"== step {result.name}: {result.status} in {result.seconds:.0f} s "
                  f"{result.note}")
    records = collect(check)
    check.steps.append(write_report(check, records))
    errors = a.horovod_errors.read_text(errors="replace") if a.horovod_errors and \
        a.horovod_errors.is_file() else ""
    code = exit_status(check.steps, horovod)
    text = summary(check, records, started, a.bundle, horovod, errors)
    text += f"\nExit status {code}: {EXIT_WORDS[code]}\n"
    (a.out / "summary.md").write_text(text, encoding="utf-8")
    print(text)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
