"""Workload files and flags: validation errors name the field and the allowed values."""

import subprocess
import sys

import pytest

from scalebench.hardware.devices import DeviceInfo
from scalebench.spec import config
from scalebench.spec.errors import UserError
from scalebench.tasks import train
from tests.plans import flat_runs as expand

CPU2 = DeviceInfo("cpu", "gloo", 0, 2)


def spec(**values):
    return config.build_spec(values)


@pytest.mark.parametrize("values, message", [
    ({"models": "resnet50"}, "models: unknown value 'resnet50'; allowed: resnet101, inception_v3, vgg16"),
    ({"frameworks": ["mpi"]}, "frameworks: unknown value 'mpi'; allowed: ddp, horovod, ray"),
    ({"precision": "fp8"}, "precision: unknown value 'fp8'; allowed: fp32, bf16, fp16"),
    ({"workers": "1,0"}, "workers: expected an integer >= 1, got 0"),
    ({"workers": "two"}, "workers: expected an integer >= 1, got 'two'"),
    ({"batch_size": 0}, "batch_size: expected an integer >= 1, got 0"),
    ({"timeout": -1}, "timeout: expected a number > 0, got -1"),
    ({"scaling": "linear"}, "scaling: unknown value 'linear'; allowed: weak, strong"),
    ({"device": "tpu"}, "device: unknown value 'tpu'; allowed: auto, cpu, cuda"),
    ({"data": "lmdb:/x"}, "data: unknown value 'lmdb:/x'; allowed: synthetic, imagefolder:PATH"),
    ({"data": "imagefolder:/does/not/exist"}, "data: image folder '/does/not/exist' does not exist"),
    ({"batchsize": 4}, "batchsize: unknown option; allowed: name, models"),
    ({"ddp": {"nodes": 2}}, "ddp.nodes: unknown option; allowed: nnodes, node_rank, rdzv_endpoint"),
    ({"ddp": {"nnodes": 2}}, "ddp.rdzv_endpoint: required when ddp.nnodes > 1"),
    ({"ddp": {"nnodes": 2, "node_rank": 2, "rdzv_endpoint": "h:1"}}, "ddp.node_rank: must be below"),
    ({"ddp": {"nnodes": 2, "rdzv_endpoint": "nohost"}}, "ddp.rdzv_endpoint: expected HOST:PORT"),
    ({"workers": [3], "ddp": {"nnodes": 2, "rdzv_endpoint": "h:29400"}}, "workers: 3 is not a multiple"),
    ({"horovod": {"hosts": "a:2,b"}}, "horovod.hosts: expected HOST:SLOTS"),
    ({"ray": {"placement": "RANDOM"}}, "ray.placement: unknown value 'RANDOM'; allowed: PACK, SPREAD"),
])
def test_bad_values_name_the_field(values, message):
    with pytest.raises(UserError) as err:
        spec(**values)
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value)


def test_flags_override_workload_file(tmp_path):
    path = tmp_path / "w.toml"
    path.write_text('[sweep]\nmodels = ["vgg16"]\nbatch_size = 8\n[horovod]\nfp16_allreduce = true\n')
    merged = config.merge(config.load_workload(path), {"batch_size": "16", "horovod": {"timeline": True}})
    s = config.build_spec(merged)
    assert s.models == ("vgg16",) and s.batch_size == 16 and s.name == "w"
    assert s.options("horovod").fp16_allreduce and s.options("horovod").timeline


def test_workload_file_errors(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[sweep\nmodels = 1")
    with pytest.raises(UserError, match="not valid TOML"):
        config.load_workload(bad)
    unknown = tmp_path / "unknown.toml"
    unknown.write_text("[mpi]\nx = 1\n")
    with pytest.raises(UserError, match=r"mpi: unknown table .* allowed: \[sweep\], \[ddp\]"):
        config.load_workload(unknown)
    with pytest.raises(UserError, match="not found"):
        config.load_workload(tmp_path / "missing.toml")


def test_every_shipped_workload_validates():
    from tests.conftest import REPO

    files = sorted((REPO / "workloads").glob("*.toml"))
    assert {f.name for f in files} >= {"default.toml", "horovod-paper.toml"}
    for f in files:
        s = config.build_spec(config.load_workload(f))
        assert s.models and s.frameworks
    paper = config.build_spec(config.load_workload(REPO / "workloads" / "horovod-paper.toml"))
    assert paper.batch_size == 64 and paper.image_size is None and paper.precision == ("fp32",)


def test_plan_expands_and_checks_inputs():
    runs = expand(spec(models="resnet101,inception_v3", workers="1,2", batch_size=4,
                            image_size=96), CPU2)
    assert [(r.model, r.world_size) for r in runs] == [
        ("resnet101", 1), ("resnet101", 2), ("inception_v3", 1), ("inception_v3", 2)]
    assert [r.threads_per_worker for r in runs] == [2, 1, 2, 1]
    assert not runs[2].aux_logits and runs[2].params == 23_834_568
    assert runs[1].global_batch == 8


def test_plan_native_sizes_and_aux_head():
    runs = expand(spec(models="inception_v3,vgg16", workers="1", batch_size=2), CPU2)
    assert [(r.model, r.image_size, r.aux_logits) for r in runs] == [
        ("inception_v3", 299, True), ("vgg16", 224, False)]


def test_plan_default_workers_are_powers_of_two():
    assert train.default_workers(8) == (1, 2, 4, 8)
    assert train.default_workers(6) == (1, 2, 4)
    assert train.default_workers(4, nnodes=2) == (2, 4, 8)
    assert [r.world_size for r in expand(spec(models="vgg16", image_size=64), CPU2)] == [1, 2]


@pytest.mark.parametrize("values, message", [
    ({"models": "inception_v3", "image_size": 64}, "image_size: inception_v3 needs at least 75 px, got 64"),
    ({"models": "resnet101", "batch_size": 1}, "batch_size: resnet101 has batch norm"),
    ({"models": "resnet101", "batch_size": 4, "workers": "1,4", "scaling": "strong"},
     "batch_size: resnet101 has batch norm and needs at least 2 images per worker in training, got 1"),
    ({"models": "vgg16", "batch_size": 5, "workers": "2", "scaling": "strong"},
     "batch_size: strong scaling splits the global batch 5 over 2 workers"),
])
def test_plan_rejects_inputs_models_cannot_take(values, message):
    with pytest.raises(UserError) as err:
        expand(spec(**values), CPU2)
    assert str(err.value).startswith(message)


def test_strong_scaling_splits_global_batch():
    runs = expand(spec(models="vgg16", batch_size=8, workers="1,2,4", scaling="strong",
                            image_size=32), CPU2)
    assert [(r.batch_size, r.global_batch) for r in runs] == [(8, 8), (4, 8), (2, 8)]


@pytest.mark.parametrize("args, field", [
    (["sweep", "--models", "alexnet"], "models: unknown value 'alexnet'"),
    (["sweep", "--workers", "0"], "workers: expected an integer >= 1"),
    (["sweep", "--precision", "int8"], "precision: unknown value 'int8'"),
    (["sweep", "--models", "inception_v3", "--image-size", "32"], "image_size: inception_v3 needs"),
    (["sweep", "no-such-file.toml"], "workload: file 'no-such-file.toml' not found"),
    (["report", "/nonexistent"], "results: '/nonexistent' is neither"),
    (["sweep", "--no-such-flag"], "unrecognized arguments: --no-such-flag"),
])
def test_cli_bad_input_is_one_line_exit_2(args, field, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "scalebench", *args, "--out", str(tmp_path)]
                          if args[0] == "sweep" else [sys.executable, "-m", "scalebench", *args],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert field in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "Traceback" not in proc.stderr


def test_cuda_needs_two_warmup_steps():
    gpu = DeviceInfo("cuda", "nccl", accelerators=1, cores=8)
    with pytest.raises(UserError, match="warmup: at least 2 steps on CUDA"):
        train.plan(spec(models="vgg16", workers="1", warmup=1), gpu)
    assert train.plan(spec(models="vgg16", workers="1", warmup=2), gpu)
    assert train.plan(spec(models="vgg16", workers="1", warmup=0, image_size=32), CPU2)


def test_repeats_are_interleaved_rounds_with_a_recorded_seed():
    s = spec(models="vgg16", frameworks="ddp,horovod,ray", workers="1,2", image_size=32,
             repeats=3, seed=7)
    jobs = train.plan(s, CPU2)
    assert len(jobs) == 3 * 3 * 2 and len({j.run_id for j in jobs}) == len(jobs)
    assert [j.repeat for j in jobs] == [1] * 6 + [2] * 6 + [3] * 6
    assert {j.order_seed for j in jobs} == {7} and {j.repeats for j in jobs} == {3}
    rounds = [[j.launch.framework for j in jobs if j.repeat == r][::2] for r in (1, 2, 3)]
    assert all(sorted(order) == ["ddp", "horovod", "ray"] for order in rounds)
    assert [[j.launch.framework for j in train.plan(s, CPU2) if j.repeat == r][::2]
            for r in (1, 2, 3)] == rounds  # the same seed, the same order
    assert len({tuple(order) for order in rounds}) > 1  # seed 7 shuffles differently per round
    one = train.plan(spec(models="vgg16", frameworks="ddp,ray", workers="1,2", image_size=32),
                     CPU2)
    assert [(j.launch.framework, j.launch.world_size, j.repeat, j.order_seed) for j in one] == [
        ("ddp", 1, 1, None), ("ddp", 2, 1, None), ("ray", 1, 1, None), ("ray", 2, 1, None)]


def test_paper_workload_repeats_three_times():
    from tests.conftest import REPO

    paper = config.build_spec(config.load_workload(REPO / "workloads" / "horovod-paper.toml"))
    assert paper.repeats == 3
