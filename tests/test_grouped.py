"""Grouped launches with real launchers: a rank killed in the middle of a group leaves exactly
the records it should. Whether grouped launches measure what isolated ones do is a timing claim,
measured and printed by benchmarks/sweep_walltime.py (its --smoke runs in tests/test_benchmarks.py)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.conftest import cli_env, read_records

COMMON = ["--batch-size", "2", "--warmup", "1", "--threads-per-worker", "1", "--quiet",
          "--device", "cpu", "--timeout", "300"]


def sweep_cmd(out: Path, *args: str) -> list[str]:
    # no report: these tests read the records and the progress lines
    return [sys.executable, "-m", "scalebench", "sweep", "--out", str(out), "--no-report", *COMMON,
            *args]


def rank_worker(root: Path, rank: int) -> psutil.Process | None:
    for proc in psutil.process_iter(["cmdline"]):
        try:
            cmd = " ".join(proc.info["cmdline"] or [])
            if "ddp.worker" in cmd and str(root) in cmd and "torch.distributed.run" not in cmd \
                    and proc.environ().get("RANK") == str(rank):
                return proc
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return None


@pytest.mark.slow
def test_rank_killed_in_the_middle_of_a_group(tmp_path):
    out = tmp_path / "group"
    sweep = subprocess.Popen(
        sweep_cmd(out, "--frameworks", "ddp", "--models", "inception_v3,resnet101,vgg16",
                  "--workers", "2", "--image-size", "75", "--iters", "3", "--trials", "2",
                  "--no-breakdown", "--timeout", "600"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env())
    deadline = time.time() + 300
    first_done = None
    while time.time() < deadline and first_done is None:
        first_done = next((out / "runs").glob("group-*/member-0.json"), None) \
            if (out / "runs").is_dir() else None
        time.sleep(0.2)
    assert first_done is not None, "the group's first configuration never finished"
    # inside the second configuration: its build, one warm-up step and 3 x 2 timed steps of
    # ResNet-101 take several seconds here (VGG-16, launched again alone, stays cheap)
    time.sleep(1)
    victim = rank_worker(first_done.parent, 1)
    assert victim is not None
    victim.kill()
    stdout, stderr = sweep.communicate(timeout=600)
    assert sweep.returncode == 0, stderr
    records = read_records(out / "results.jsonl")
    assert [(r["model"], r["status"], r["launch"]) for r in records] == [
        ("inception_v3", "ok", "grouped"), ("resnet101", "failed", "grouped"),
        ("vgg16", "ok", "isolated")], [r.get("error") for r in records]
    assert records[0]["group_position"] == 1 and records[1]["group_position"] == 2
    assert records[0]["group_id"] == records[1]["group_id"] and "group_id" not in records[2]
    assert "(grouped launch, configuration 2 of 3)" in records[1]["error"]
    assert "[3/3] vgg16 ddp x2 fp32" in stdout
