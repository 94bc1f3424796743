"""`scalebench tune` for real (torchrun, horovodrun, Ray on CPU with gloo): a short tune of one
cell per framework whose files load, whose tuned.toml a sweep accepts, and whose report then
shows "At their best"; bad input is one line and exit 2 before anything launches."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from scalebench import cli
from scalebench.spec import tuned
from tests.conftest import REPO, cli_env, needs_horovod, read_records

# The smallest real cell: Inception V3 without its aux head at 75 px, 2 images per worker,
# one step per window, one thread per worker.
CELL = ["--models", "inception_v3", "--image-size", "75", "--batch-size", "2", "--warmup", "1",
        "--iters", "1", "--workers", "2", "--threads-per-worker", "1", "--timeout", "240"]


def tune_args(out: Path, *args: str) -> list[str]:
    return ["tune", *CELL, "--out", str(out), "--quiet", "--seed", "1", *args]


def tune(out: Path, *args: str) -> subprocess.CompletedProcess:
    """`python -m scalebench tune` as a fresh process (Ray's: its driver must not live on in
    the test process)."""
    return subprocess.run([sys.executable, "-m", "scalebench", *tune_args(out, *args)],
                          cwd=REPO, env=cli_env(), capture_output=True, text=True, timeout=600)


def tune_here(capsys, out: Path, *args: str) -> subprocess.CompletedProcess:
    """The same tune run by the CLI in this process (its launches are real torchrun and
    horovodrun processes), without a second Python and torch start-up; what it printed."""
    capsys.readouterr()
    code = cli.main(tune_args(out, *args))
    printed = capsys.readouterr()
    return subprocess.CompletedProcess(["scalebench", "tune"], code, printed.out, printed.err)


def check_files(out: Path, framework: str, knob: str, asked: float) -> dict:
    doc = json.loads((out / "tune.json").read_text())
    [cell] = doc["cells"]
    assert cell["cell"] == f"{framework}/inception_v3/w2"
    names = {c["name"]: c for c in cell["candidates"]}
    default = names[cell["default"]]
    other = next(c for c in cell["candidates"] if not c["default"])
    assert default["default"] and other["settings"][knob] == asked
    # both measured side by side in every slot of the race
    assert cell["slots"] and all(len(s) == 2 for s in cell["slots"])
    assert all(v > 0 for s in cell["slots"] for v in s.values())
    assert cell["verdict"].startswith(f"{framework}/inception_v3/w2: ")
    assert cell["confirmation"] is not None
    if cell["winner"] != cell["default"]:
        conf = cell["confirmation"]
        assert len(conf["ratios"]) >= 3 and conf["significant"] and conf["low"] > 1
    records = read_records(out / "results.jsonl")
    assert records and all(r["kind"] == "tune" and r["status"] == "ok" for r in records)
    assert len(records) == len(cell["launches"])
    for page in ("tune.md", "tune.html"):
        assert cell["cell"] in (out / page).read_text()
    assert tuned.load(out / "tuned.toml")[0].framework == framework
    return cell


@pytest.mark.slow
def test_ddp_tune_reads_back_the_buckets_and_a_sweep_runs_the_winner_beside_the_default(
        tmp_path, capsys):
    out = tmp_path / "tune"
    done = tune_here(capsys, out, "--frameworks", "ddp", "--knobs", "bucket_cap_mb=1", "--budget", "30s")
    assert done.returncode == 0, done.stderr[-3000:]
    cell = check_files(out, "ddp", "bucket_cap_mb", 1.0)
    # DDP's own logging data says which bucket cap each candidate ran with, on every rank
    for c in cell["candidates"]:
        assert [r["bucket_cap_mb"] for r in c["read_back"]] == [c["settings"]["bucket_cap_mb"]] * 2
    assert not [f for f in cell["findings"] if "asked" in f or "rebuilt" in f], cell["findings"]
    assert "[tune " in done.stdout and "left]" in done.stdout  # progress through the budget
    # every window follows a re-wrap and REWARM untimed steps: a window is at least 3 x REWARM
    # timed steps, whatever the workload's iters (1 here)
    assert cell["window_steps"] == 9
    records = read_records(out / "results.jsonl")
    assert {r["iters"] for r in records if r["status"] == "ok"} == {9}
    # a pick other than the default is confirmed over the planned launches, or (where the race
    # left too little of the 30 s for that, as on a slow machine) kept out with the reason why
    confirms = sum(x["phase"] == "confirm" for x in cell["launches"])
    if cell["confirmation"] and cell["best_in_race"] != cell["default"]:
        plan = cell["confirmation"]["plan"]
        if plan is None:
            assert confirms == 0 and cell["winner"] == cell["default"]
            assert [f for f in cell["findings"] if "cannot pay for its confirmation" in f], \
                cell["findings"]
        else:
            assert plan["launches"] >= 3 and plan["launches"] == confirms

    # The tune's tuned.toml loads as written (check_files); a file whose cell names a setting
    # (the winner's, or bucket_cap_mb=1 where the default was kept) adds that run beside the
    # default one, and the report compares the two.
    sweep = tmp_path / "sweep"
    forced = tmp_path / "tuned.toml"
    text = (out / "tuned.toml").read_text()
    if cell["winner"] == cell["default"]:
        text = text.replace("[cell.options]\n", "[cell.options]\nbucket_cap_mb = 1.0\n", 1)
    forced.write_text(text)
    assert cli.main(["sweep", *CELL, "--workers", "1,2", "--frameworks", "ddp", "--trials", "2",
                     "--no-breakdown", "--out", str(sweep), "--quiet", "--tuned",
                     str(forced)]) == 0
    records = read_records(sweep / "results.jsonl")
    two = [r for r in records if r["world_size"] == 2]
    tuned_cap = cell["winner_settings"]["bucket_cap_mb"] if cell["winner"] != cell["default"] \
        else 1.0
    assert sorted(r["options"].get("bucket_cap_mb") or 25.0 for r in two) == sorted([tuned_cap,
                                                                                    25.0])
    report = (sweep / "report.md").read_text()
    best = report.split("## At their best", 1)[1].split("\n## ", 1)[0]
    assert f"ddp tuned (bucket_cap_mb={tuned_cap})" in best and "default kept" not in best
    # the tuned row's efficiency is against the default's one-worker run (one worker does not
    # communicate, so the knob cannot change it)
    [line] = [x for x in best.splitlines() if x.startswith("| ddp ")]
    assert re.search(r"\| \d+% / \d+% \|", line), line
    assert "At their best" in (sweep / "report.html").read_text()


@pytest.mark.slow
@needs_horovod
def test_horovod_tune_launches_each_candidate_in_interleaved_rounds(tmp_path, capsys):
    out = tmp_path / "tune"
    done = tune_here(capsys, out, "--frameworks", "horovod", "--knobs", "fusion_threshold_mb=0",
                "--budget", "40s")
    assert done.returncode == 0, done.stderr[-3000:]
    cell = check_files(out, "horovod", "fusion_threshold_mb", 0.0)
    assert cell["interleaving"] == "launches in interleaved rounds"
    race = [x for x in cell["launches"] if x["phase"] == "race"]
    assert len(race) >= 2 and all(len(x["candidates"]) == 1 for x in race)
    plan = (cell["confirmation"] or {}).get("plan")
    if plan:  # across launches a paired slot is a pair of launches
        confirms = [x for x in cell["launches"] if x["phase"] == "confirm"]
        assert plan["launches"] == len(confirms) == 2 * plan["paired_slots"]
        assert all(len(x["candidates"]) == 1 for x in confirms)
    # what hvd.init() read: the fusion threshold each launch was given
    zero = next(c for c in cell["candidates"] if not c["default"])
    assert all(r["fusion_threshold_mb"] == 0.0 for r in zero["read_back"])


@pytest.mark.slow
def test_ray_tune_rewraps_through_prepare_model(tmp_path):
    pytest.importorskip("ray")
    out = tmp_path / "tune"
    done = tune(out, "--frameworks", "ray", "--knobs", "gradient_as_bucket_view",
                "--budget", "70s")
    assert done.returncode == 0, done.stderr[-3000:]
    cell = check_files(out, "ray", "gradient_as_bucket_view", True)
    on = next(c for c in cell["candidates"] if not c["default"])
    assert all(r["gradient_as_bucket_view"] is True for r in on["read_back"])


@pytest.mark.parametrize("args, message", [
    (["--knobs", "colour"], "scalebench tune: error: knobs: unknown knob 'colour'; known: "),
    (["--knobs", "fusion_threshold_mb"], "knobs: fusion_threshold_mb is a knob of horovod, "
                                         "which is not among the frameworks tuned (ddp)"),
    (["--knobs", "bucket_cap_mb=0"], "knobs.bucket_cap_mb: '0' refused; allowed: numbers > 0"),
    (["--budget", "5s"], "budget: 5s is too small for 1 cell: at least 20s"),
    (["--budget", "soon"], "budget: cannot read 'soon' as a wall time > 0"),
    (["--workers", "1"], "workers: tune needs worker counts >= 2"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, args, message):
    code = cli.main(["tune", *CELL, "--frameworks", "ddp", "--out", str(tmp_path), *args])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "results.jsonl").exists()


def test_a_tuned_file_naming_a_knob_the_framework_lacks_is_refused(tmp_path, capsys):
    bad = tmp_path / "tuned.toml"
    bad.write_text('format_version = 1\n[[cell]]\nframework = "ddp"\nmodel = "vgg16"\n'
                   'workers = 2\n[cell.options]\nfusion_threshold_mb = 8.0\n')
    code = cli.main(["sweep", "--frameworks", "ddp", "--tuned", str(bad), "--out",
                     str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and "options.fusion_threshold_mb is not a knob of ddp" in err
