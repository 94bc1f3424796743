"""A sweep on Kubernetes (`scalebench sweep --launcher k8s`, experimental): each launch's job
is created, watched to its end, its records read back and appended to the sweep's results
file, one launch after another.

Records come from the results volume (a local mount of the claim, when given) or from the
`SCALEBENCH_RESULT` lines in the job's pod logs. Every run the pods' sweep planned but did not
record (the job failed, timed out, or ended without a record of it) becomes a failed or timeout
record through its task, as a failed launch does under any launcher, with the operator's reason
and message and the tail of the pods' logs. A timed-out job is deleted, and so is the running
one on Ctrl-C.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from scalebench import tasks
from scalebench.frameworks.base import LaunchOutcome
from scalebench.hardware.devices import DeviceInfo
from scalebench.k8s import api, watch
from scalebench.k8s import results as k8s_results
from scalebench.k8s.plan import RESULTS_MOUNT, STARTUP_SECONDS, Launch
from scalebench.k8s.render import LABEL_PREFIX
from scalebench.records import results
from scalebench.running import executor
from scalebench.running.progress import Progress
from scalebench.running.sweep import SweepOutcome, allreduce_jobs, write_report
from scalebench.spec.config import SweepSpec
from scalebench.spec.launch import Job
from scalebench.tasks import train

# Plans the pods' runs here, where their GPUs are not: the checks of CUDA itself ran at render.
STAND_IN = DeviceInfo("cpu", "gloo", 0, 1)
RUN_LABEL = f"{LABEL_PREFIX}/run"


@dataclass(frozen=True)
class Cluster:
    """How this sweep reaches the cluster and its results."""

    api_url: str | None = None  # None: in-cluster service account, else the kubeconfig
    results_dir: Path | None = None  # a local mount of the results claim
    poll_seconds: float = 10.0
    pending_seconds: float = STARTUP_SECONDS  # a job not running by then is deleted


@dataclass(frozen=True)
class Submission:
    """One job of the sweep and the runs its pods' sweep plans."""

    launch: Launch
    manifest: dict
    jobs: tuple[Job, ...]
    image: str

    @property
    def label(self) -> str:
        nodes = f"{self.launch.nodes} node{'s' if self.launch.nodes > 1 else ''}"
        workers = ",".join(map(str, self.launch.workers))
        return (f"{self.launch.framework} on {nodes} (workers {workers}): "
                f"{self.manifest['kind']} {self.launch.name}")


def pod_jobs(launch: Launch, pod_spec: SweepSpec) -> tuple[Job, ...]:
    """The runs a launch's pods will plan (their run ids, the fields of their records), as the
    k8s launcher's runs on the launch's nodes."""
    # The hostfile is the operator's, inside the pods: planned here without it (it would be
    # read for the node count), and the jobs keep the options the pods run with.
    here = pod_spec
    if "horovod" in pod_spec.framework_options:
        here = dataclasses.replace(pod_spec, framework_options={
            **pod_spec.framework_options,
            "horovod": dataclasses.replace(pod_spec.options("horovod"), hostfile=None)})
    jobs = train.plan(here, STAND_IN)
    if here.with_allreduce:
        jobs = allreduce_jobs(here, STAND_IN) + jobs
    return tuple(dataclasses.replace(job, launch=dataclasses.replace(
        job.launch, device="cuda", backend="nccl", launcher="k8s", nodes=launch.nodes,
        options=pod_spec.options(job.launch.framework))) for job in jobs)


def run_k8s_sweep(submissions: Sequence[Submission], out_dir: Path, sweep_id: str,
                  cluster: Cluster, *, report: bool = True, progress: Progress | None = None,
                  client: api.Client | None = None) -> SweepOutcome:
    """Every submission in turn; records appended to OUT/results.jsonl as each job ends (an
    older results file is moved aside first), then the report."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    done = executor.ExecutionOutcome(out_dir, out_dir / results.RESULTS_FILE)
    progress = progress or Progress(sum(len(s.jobs) for s in submissions))
    done.set_aside = executor.set_aside(done.results_path)
    if done.set_aside:
        progress.note(f"previous results moved to {done.set_aside}")
    client = client or api.connect(cluster.api_url)
    try:
        for submission in submissions:
            records = _run_one(client, submission, cluster, progress)
            executor.append_records(done, records, sweep_id)
            progress.finish(records, configurations=max(1, len(records)))
    except KeyboardInterrupt:
        done.interrupted = True
        progress.note(f"interrupted: the running job was deleted; results so far are saved in "
                      f"{done.results_path}")
    finally:
        progress.close()
        client.close()
    outcome = SweepOutcome(out_dir, done.records, interrupted=done.interrupted)
    if report and not done.interrupted:
        outcome.outputs = write_report(done.results_path)
    return outcome


def _run_one(client: api.Client, submission: Submission, cluster: Cluster,
             progress: Progress) -> list[dict]:
    manifest, launch = submission.manifest, submission.launch
    name = f"{manifest['kind']} {launch.name}"
    first, last = progress.done + 1, progress.done + len(submission.jobs)
    progress.note(f"[{first}-{last}/{progress.total}] {submission.label}: creating it in "
                  f"namespace {manifest['metadata'].get('namespace', 'default')}, "
                  f"{progress.total - last} runs after this")
    progress.start(submission.label, configurations=len(submission.jobs))
    began = time.time()
    try:
        try:
            client.create(manifest)
        except api.ApiError as exc:
            ended = watch.Outcome("failed", watch.State("failed"), f"could not create {name}: "
                                  f"{exc}")
            return _records(submission, ended, [], [], {}, began)
        ended = watch.watch(client, manifest, launch.deadline_seconds, cluster.poll_seconds,
                            pending_seconds=cluster.pending_seconds, delete=False,
                            on_state=lambda s: progress.note(f"  {name}: {s.phase} "
                                                             f"({watch.words(s)})"))
        found, problems, logs = collect(client, submission, cluster)
        if ended.status == "timeout":  # after its logs are read: they go with its pods
            watch.delete_quietly(client, manifest)
            progress.note(f"  deleted {name}")
        return _records(submission, ended, found, problems, logs, began)
    except KeyboardInterrupt:
        watch.delete_quietly(client, manifest)
        progress.note(f"  deleted {name}")
        raise


def collect(client: api.Client, submission: Submission,
            cluster: Cluster) -> tuple[list[dict], list[str], dict[str, str]]:
    """The job's records (from the results volume's file when it holds one, else from the pod
    logs' SCALEBENCH_RESULT lines), a line per unreadable record, and the logs read."""
    problems: list[str] = []
    try:
        logs = client.job_logs(submission.manifest, RUN_LABEL)
    except api.ApiError as exc:
        logs = {}
        problems.append(f"pod logs not read: {exc}")
    if cluster.results_dir is not None:
        inside = PurePosixPath(submission.launch.out).relative_to(RESULTS_MOUNT)
        path = cluster.results_dir / inside / results.RESULTS_FILE
        if path.is_file():
            found, invalid = results.load([path])
            return found, problems + [f"{bad.path}:{bad.line}: {bad.reason}"
                                      for bad in invalid], logs
        problems.append(f"{path} does not exist; records read from the pod logs")
    records: dict[tuple, dict] = {}
    for where, text in logs.items():
        found, bad = k8s_results.parse(text.splitlines())
        problems += [f"{where}: {p}" for p in bad]
        for record in found:
            records.setdefault(k8s_results.key(record), record)
    return list(records.values()), problems, logs


def _records(submission: Submission, ended: watch.Outcome, found: list[dict],
             problems: list[str], logs: dict[str, str], began: float) -> list[dict]:
    """The job's own records, then a failed (or timeout) record for each planned run it did not
    record, built by the run's task as any launcher's failed launch is."""
    manifest = submission.manifest
    where = {"kind": manifest["kind"], "name": manifest["metadata"]["name"],
             "namespace": manifest["metadata"].get("namespace", "default"),
             "state": watch.words(ended.state)}
    out = []
    for record in found:
        record["scheduler"] = {**(record.get("scheduler") or {}),
                               "k8s": {**where, "pod_sweep_id": record.get("sweep_id")}}
        record["launcher"] = "k8s"
        out.append(record)
    recorded = {r.get("run_id") for r in found}
    missing = [job for job in submission.jobs if job.run_id not in recorded]
    if not missing:
        return out
    error = ended.error or (f"{manifest['kind']} {where['name']} succeeded but no record of "
                            "this run came back")
    if problems:
        error += f" ({len(problems)} problem{'s' if len(problems) > 1 else ''} reading "
        error += f"results; first: {problems[0]})"
    failed = LaunchOutcome("failed" if ended.status == "ok" else ended.status, None,
                           error[:1000], api.log_tail(logs), began, submission.launch.nodes,
                           scheduler={"k8s": where})
    # The cluster's environment is known only from a record its pods wrote.
    env = next((r["env"] for r in found if isinstance(r.get("env"), dict)), None) or {
        "image": submission.image, "backend": "nccl"}
    for job in missing:
        out += tasks.get(job.kind).records(job, failed, env)
    return out
