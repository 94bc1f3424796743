"""The shipped CI example: its workload validates and every scalebench command in it parses."""

from __future__ import annotations

import re
import shlex

import pytest

from scalebench import cli
from scalebench.hardware.devices import DeviceInfo
from scalebench.spec import config
from tests.conftest import REPO
from tests.plans import flat_runs

CI = REPO / "examples" / "ci"


def test_ci_workload_validates_and_expands_on_a_gpu_node():
    spec = config.build_spec(config.load_workload(CI / "gpu-sweep.toml"))
    assert spec.device == "cuda" and spec.trials >= 4  # enough trials for Mann-Whitney U
    runs = flat_runs(spec, DeviceInfo("cuda", "nccl", accelerators=4, cores=32))
    assert sorted({r.world_size for r in runs}) == [1, 2, 4]
    assert {r.model for r in runs} == {"resnet101", "inception_v3", "vgg16"}


def workflow_commands() -> list[list[str]]:
    text = (CI / "scaling-regression.yml").read_text().replace("\\\n", " ")
    commands = []
    for line in text.splitlines():
        match = re.search(r"-m scalebench (.*)$", line)
        if match:
            args = shlex.split(match.group(1))
            commands.append([re.sub(r"\$\{?(\w+)\}?", r"/x/\1", a) for a in args])
    return commands


def test_workflow_is_valid_yaml_with_the_gate_steps():
    yaml = pytest.importorskip("yaml", reason="PyYAML not installed")
    flow = yaml.safe_load((CI / "scaling-regression.yml").read_text())
    (job,) = flow["jobs"].values()
    assert "self-hosted" in job["runs-on"] and "gpu" in job["runs-on"]
    steps = {s.get("name"): s for s in job["steps"]}
    assert steps["Set up the environment"]["run"] == "make setup"
    assert "scalebench compare" in steps["Compare against the baseline"]["run"]
    assert steps["Upload the report"]["if"] == "always()"
    assert "upload-artifact" in steps["Upload the report"]["uses"]


def test_every_scalebench_command_in_the_workflow_parses():
    commands = workflow_commands()
    assert {c[0] for c in commands} == {"env", "sweep", "compare", "history"}
    parser = cli.build_parser()
    for argv in commands:
        args = parser.parse_args(argv)
        assert args.command in cli.COMMANDS
    compare = next(c for c in commands if c[0] == "compare")
    assert "--markdown" in compare and "--threshold" in compare
    detect = next(c for c in commands if c[:2] == ["history", "detect"])
    assert "--markdown" in detect and "--last" in detect
