"""`scalebench k8s render`: manifests of every operator, strictly validated against the vendored
CRDs; the operators' own examples pass the same validator; typos, wrong types, fields of another
Trainer version and bad input fail. No cluster: these check the manifests, not a run."""

from __future__ import annotations

import copy
import shlex
from pathlib import Path

import pytest

from scalebench import cli
from scalebench.commands import sweep as sweep_command
from scalebench.k8s import plan as k8s_plan
from scalebench.k8s import render, validate
from scalebench.spec.errors import UserError

ROOT = Path(__file__).resolve().parent.parent
PAPER = ROOT / "workloads" / "horovod-paper.toml"
EXAMPLES = sorted((validate.VENDOR / "examples").glob("*.yaml"))
IMAGE = "registry.example/scalebench:0.1.0"


def render_files(tmp_path, *extra, workload=PAPER) -> dict[str, dict]:
    out = tmp_path / "manifests"
    argv = ["k8s", "render", str(workload), "--image", IMAGE, "--gpus-per-node", "4",
            "--nodes", "1,2,4", "--results-pvc", "scalebench-results", "--out", str(out), *extra]
    assert cli.main(argv) == 0
    docs = {}
    for path in sorted(out.glob("*.yaml")):
        [doc] = validate.load_yaml_documents(path.read_text())
        docs[path.stem] = doc
    return docs


def sweep_line(script: str) -> list[str]:
    [line] = [ln for ln in script.splitlines() if ln.startswith("scalebench sweep ")]
    return shlex.split(line.split(" || ")[0])


def pod_script_of(doc: dict) -> str:
    """The shell script of the pod that runs the sweep, for each kind."""
    spec = doc["spec"]
    if doc["kind"] == "MPIJob":
        return spec["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0][
            "command"][2]
    if doc["kind"] == "TrainJob":
        return spec["trainer"]["command"][2]
    if doc["kind"] == "PyTorchJob":
        return spec["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0][
            "command"][2]
    return shlex.split(spec["entrypoint"])[2]


@pytest.fixture(scope="module")
def paper(tmp_path_factory):
    return render_files(tmp_path_factory.mktemp("paper"))


def test_the_paper_workload_renders_one_valid_job_per_framework_and_node_count(paper):
    assert sorted(paper) == sorted(f"horovod-paper-{fw}-{n}n" for fw in ("horovod", "ddp", "ray")
                                   for n in (1, 2, 4))
    kinds = {name: doc["kind"] for name, doc in paper.items()}
    assert {kinds[f"horovod-paper-{fw}-2n"] for fw in ("horovod", "ddp", "ray")} == {
        "MPIJob", "TrainJob", "RayJob"}
    for name, doc in paper.items():
        assert validate.problems(doc) == [], name
        assert doc["metadata"]["labels"]["scalebench/run"] == name
        assert doc["metadata"]["labels"]["scalebench/sweep-id"]
        pods = list(validate.pod_specs(doc["spec"]))
        assert pods
        for _, pod in pods:  # /dev/shm in memory and the results volume, in every pod
            assert {"name": "dshm", "emptyDir": {"medium": "Memory"}} in pod["volumes"]
            for container in pod["containers"]:
                assert {m["mountPath"] for m in container["volumeMounts"]} == {"/dev/shm",
                                                                              "/results"}


def test_the_mpijob_launcher_runs_the_sweep_on_whole_nodes(paper):
    for nodes in (1, 2, 4):
        doc = paper[f"horovod-paper-horovod-{nodes}n"]
        spec = doc["spec"]
        assert spec["launcherCreationPolicy"] == "WaitForWorkersReady"
        assert spec["slotsPerWorker"] == 4 and spec["runLauncherAsWorker"] is True
        hosts = 1 + spec["mpiReplicaSpecs"].get("Worker", {}).get("replicas", 0)
        assert hosts == nodes
        [launcher] = spec["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"]
        argv = sweep_line(launcher["command"][2])
        workers = [int(w) for w in argv[argv.index("--workers") + 1].split(",")]
        # horovodrun -np is the sweep's worker count: hosts x slots for a multi-node launch
        assert workers == ([1, 2, 4] if nodes == 1 else [hosts * spec["slotsPerWorker"]])
        assert argv[argv.index("--hostfile") + 1] == "/etc/mpi/hostfile"
        assert argv[argv.index("--frameworks") + 1] == "horovod"
        assert launcher["resources"]["limits"]["nvidia.com/gpu"] == 4
        assert spec["runPolicy"]["activeDeadlineSeconds"] == (
            3 * 3 * len(workers) * 900 + k8s_plan.STARTUP_SECONDS)


def test_the_pod_command_line_is_a_real_sweep_command(paper):
    """Each pod's `scalebench sweep` parses and validates as the sweep itself would."""
    from scalebench.spec import config

    for name, doc in paper.items():
        script = pod_script_of(doc)
        argv = sweep_line(script)
        assert argv[:3] == ["scalebench", "sweep", k8s_plan.WORKLOAD_FILE]
        args = [a.replace("${PET_NODE_RANK}", "0").replace("${PET_MASTER_ADDR}", "node-0")
                .replace("${PET_MASTER_PORT}", "29400") for a in argv[3:]]
        values = config.load_workload(PAPER)
        spec = config.build_spec(sweep_command.pod_sweep_values(values, args))
        assert spec.launcher == "local" and spec.device == "cuda", name
        assert spec.models == ("inception_v3", "resnet101", "vgg16")


def test_trainjob_uses_trainer_2_3_fields_and_ddp_nodes_rendezvous(paper):
    spec = paper["horovod-paper-ddp-2n"]["spec"]
    assert spec["runtimeRef"]["name"] == "torch-distributed"
    assert spec["trainer"]["numProcPerNode"] == 4 and spec["trainer"]["numNodes"] == 2
    assert "runtimePatches" in spec and "podTemplateOverrides" not in spec
    argv = sweep_line(spec["trainer"]["command"][2])
    assert argv[argv.index("--node-rank") + 1] == "${PET_NODE_RANK}"
    assert argv[argv.index("--rdzv-endpoint") + 1] == "${PET_MASTER_ADDR}:${PET_MASTER_PORT}"
    assert argv[argv.index("--out") + 1].endswith("/node-${PET_NODE_RANK}")
    assert 'if [ "${PET_NODE_RANK:-0}" = 0 ]; then scalebench k8s emit ' in spec["trainer"][
        "command"][2]


def test_pytorchjob_variant_names_its_container_pytorch(tmp_path):
    docs = render_files(tmp_path, "--ddp-kind", "pytorchjob")
    doc = docs["horovod-paper-ddp-4n"]
    assert doc["apiVersion"] == "kubeflow.org/v1" and doc["kind"] == "PyTorchJob"
    replicas = doc["spec"]["pytorchReplicaSpecs"]
    assert replicas["Master"]["replicas"] == 1 and replicas["Worker"]["replicas"] == 3
    for replica in replicas.values():
        assert [c["name"] for c in replica["template"]["spec"]["containers"]] == ["pytorch"]
    argv = sweep_line(replicas["Master"]["template"]["spec"]["containers"][0]["command"][2])
    assert argv[argv.index("--node-rank") + 1] == "${RANK}"
    assert "Worker" not in docs["horovod-paper-ddp-1n"]["spec"]["pytorchReplicaSpecs"]
    broken = copy.deepcopy(doc)
    broken["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0][
        "name"] = "trainer"
    assert any("named 'pytorch'" in p for p in validate.problems(broken))


def test_rayjob_shuts_down_with_a_ttl_and_keeps_results_on_the_shared_volume(paper):
    spec = paper["horovod-paper-ray-4n"]["spec"]
    assert spec["shutdownAfterJobFinishes"] is True and spec["ttlSecondsAfterFinished"] == 3600
    [group] = spec["rayClusterSpec"]["workerGroupSpecs"]
    assert group["replicas"] == group["minReplicas"] == group["maxReplicas"] == 3
    head = spec["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    assert head["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 4
    assert {"name": "results", "persistentVolumeClaim": {"claimName": "scalebench-results"}} \
        in head["volumes"]
    argv = sweep_line(shlex.split(spec["entrypoint"])[2])
    assert argv[argv.index("--ray-address") + 1] == "auto"
    assert argv[argv.index("--out") + 1].startswith("/results/")
    env = validate.load_yaml_documents(spec["runtimeEnvYAML"])[0]["env_vars"]
    assert env["SCALEBENCH_WORKLOAD"] == PAPER.read_text()


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_the_operators_own_examples_pass_the_strict_validator(path):
    docs = validate.load_yaml_documents(path.read_text())
    assert docs
    for doc in docs:
        assert validate.problems(doc) == []


def example(name: str) -> dict:
    return validate.load_yaml_documents((validate.VENDOR / "examples" / name).read_text())[0]


def fails_after(doc: dict, change, expected: str) -> None:
    """An operator's own example passes; after `change` it fails with `expected` among the
    problems."""
    assert validate.problems(doc) == []
    change(doc)
    found = validate.problems(doc)
    assert any(expected in p for p in found), found


@pytest.mark.parametrize("change, expected", [
    (lambda d: d["spec"].update(slotsPerWorkr=1), "'slotsPerWorkr' was unexpected"),
    (lambda d: d["spec"].update(slotsPerWorker="1"), "is not of type 'integer'"),
    (lambda d: d["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
     .update(resource={}), "'resource' was unexpected"),
    (lambda d: d["metadata"].update(name="Tensorflow_Benchmarks"), "not an RFC 1035 label"),
    (lambda d: d["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
     ["command"].__setitem__(3, "3"), "-np 3 is more than workers x slotsPerWorker (2 x 1)"),
])
def test_a_typo_or_a_wrong_type_fails_the_mpijob_example(change, expected):
    fails_after(example("mpi-operator_tensorflow-benchmarks.yaml"), change, expected)


@pytest.mark.parametrize("change, expected", [
    # Trainer 2.0's and 2.1's names for what 2.2 made runtimePatches
    (lambda d: d["spec"].update(podSpecOverrides=[]), "'podSpecOverrides' was unexpected"),
    (lambda d: d["spec"].update(podTemplateOverrides=[]), "'podTemplateOverrides' was unexpected"),
    # numProcPerNode was a string ("auto") before 2.2
    (lambda d: d["spec"]["trainer"].update(numProcPerNode="auto"), "is not of type 'integer'"),
    (lambda d: d["spec"]["trainer"].update(numNodes=0), "must be a positive count"),
    (lambda d: d["metadata"].update(name="x" * 64), "at most 63 characters"),
    (lambda d: d["metadata"].update(labels={"team": "a b"}), "not a label value"),
])
def test_fields_of_another_trainer_version_fail_the_trainjob_example(change, expected):
    fails_after(example("trainer_01-multi-node.yaml"), change, expected)


def test_rayjob_states_and_mounts_are_checked(paper):
    doc = copy.deepcopy(paper["horovod-paper-ray-2n"])
    head = doc["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    head["containers"][0]["volumeMounts"][1]["name"] = "result"
    doc["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["replicas"] = 5
    doc["spec"]["shutdownAfterJobFinish"] = True
    found = validate.problems(doc)
    assert any("'result' names no volume of the pod" in p for p in found), found
    assert any("outside minReplicas..maxReplicas" in p for p in found), found
    assert any("'shutdownAfterJobFinish' was unexpected" in p for p in found), found


def test_the_strict_schema_closes_listed_objects_only():
    schema = {"type": "object", "properties": {"a": {"type": "object", "properties": {}},
                                               "b": {"type": "object",
                                                     "x-kubernetes-preserve-unknown-fields": True,
                                                     "properties": {}},
                                               "c": {"type": "object",
                                                     "additionalProperties": {"type": "string"}}}}
    closed = validate.strict(schema)
    assert closed["additionalProperties"] is False
    assert closed["properties"]["a"]["additionalProperties"] is False
    assert "additionalProperties" not in closed["properties"]["b"]
    assert closed["properties"]["c"]["additionalProperties"] == {"type": "string"}
    assert "additionalProperties" not in schema  # the cached CRD is not changed in place


@pytest.mark.parametrize("argv, expected", [
    (["--nodes", "1,2"], "gpus_per_node: required"),
    (["--gpus-per-node", "0", "--nodes", "1"], "gpus_per_node"),
    (["--gpus-per-node", "4", "--nodes", "1", "--image", "registry.example/scalebench"],
     "image: give a tag or a digest"),
    (["--gpus-per-node", "4", "--nodes", "1", "--image", "scalebench@sha256:abc"],
     "image: digest must be sha256:"),
    (["--gpus-per-node", "4", "--nodes", "1", "--namespace", "Bench_NS"], "namespace:"),
    (["--gpus-per-node", "4", "--nodes", "1", "--run-name", "Paper_Run"], "run_name:"),
    (["--gpus-per-node", "4", "--nodes", "1", "--run-name", "p" * 60], "run_name:"),
    (["--gpus-per-node", "4", "--nodes", "1", "--ddp-kind", "mpijob"], "ddp_kind:"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, argv, expected):
    base = ["k8s", "render", str(PAPER), "--image", IMAGE, "--results-pvc", "r",
            "--out", str(tmp_path / "m")]
    assert cli.main(base + argv) == 2
    err = capsys.readouterr().err.strip()
    assert expected in err and "\n" not in err and "Traceback" not in err, err


def test_workers_the_nodes_do_not_divide_are_refused(tmp_path, capsys):
    workload = tmp_path / "w.toml"
    workload.write_text('[sweep]\nframeworks = ["ddp"]\nworkers = [1, 4, 6]\n')
    base = ["k8s", "render", str(workload), "--image", IMAGE, "--gpus-per-node", "4",
            "--out", str(tmp_path / "m")]
    assert cli.main([*base, "--nodes", "1,2"]) == 2
    assert "workers: 6 workers need 2 nodes of 4 GPUs and do not fill them" in capsys.readouterr().err
    workload.write_text('[sweep]\nframeworks = ["horovod"]\nworkers = [8]\n')
    assert cli.main([*base, "--nodes", "2"]) == 2
    assert "results_pvc: horovod on 2 nodes needs a shared volume" in capsys.readouterr().err
    assert cli.main([*base, "--nodes", "1,2", "--results-pvc", "r"]) == 2
    assert "nodes: no worker count of the sweep runs on 1 nodes" in capsys.readouterr().err


def test_render_is_pure_and_the_yaml_round_trips():
    target = k8s_plan.Target(image=IMAGE, gpus_per_node=2, nodes=(1, 2), run_name="t",
                             sweep_id="20260101T000000-abcdef12")
    values = {"name": "t", "frameworks": ["ddp", "ray"], "models": ["resnet101"]}
    plan = k8s_plan.plan({**values, "frameworks": ["ddp"]}, "[sweep]\n", target)
    assert [(la.framework, la.nodes, la.workers) for la in plan.launches] == [
        ("ddp", 1, (1, 2)), ("ddp", 2, (4,))]
    with pytest.raises(UserError, match="results_pvc: ray on 2 nodes"):
        k8s_plan.plan(values, "[sweep]\n", target)
    first, again = render.manifests(plan), render.manifests(plan)
    assert first == again
    for doc in first:
        assert validate.load_yaml_documents(render.to_yaml(doc)) == [doc]
