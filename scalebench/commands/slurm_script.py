"""scalebench slurm-script WORKLOAD.toml --nodes N [--gpus-per-node G] [--partition P]
[--time T] [...]: write a ready sbatch file that runs the sweep as Slurm job steps, then
`scalebench report`."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from scalebench.slurm import script
from scalebench.spec import config, fields
from scalebench.spec.errors import UserError


def register(sub) -> None:
    p = sub.add_parser("slurm-script", help="write an sbatch file that runs a workload's sweep "
                       "as Slurm job steps on whole nodes, then its report")
    p.add_argument("workload", help="workload TOML file (see workloads/)")
    p.add_argument("--nodes", required=True, help="nodes to allocate")
    p.add_argument("--gpus-per-node", help="GPUs per node (one worker each); 0 or absent: a "
                   "CPU sweep")
    p.add_argument("--ntasks-per-node", help="CPU sweeps: workers per node (default: one per "
                   "allocated CPU)")
    p.add_argument("--partition", help="Slurm partition")
    p.add_argument("--time", help="job time limit: MINUTES, HH:MM:SS or D-HH:MM:SS")
    p.add_argument("--account", help="Slurm account to charge")
    p.add_argument("--job-name", help="default scalebench-<workload name>")
    p.add_argument("--out", help="results folder (default results/<workload name>-slurm)")
    p.add_argument("--script", help="file to write (default <workload name>.sbatch here)")
    p.add_argument("--no-exclusive", dest="exclusive", action="store_false",
                   help="share nodes with other jobs (default: whole nodes, --exclusive)")
    p.add_argument("--vet", action="store_true", help="the job vets its nodes first and runs "
                   "on the vetted ones only (`scalebench sweep --vet`)")
    p.add_argument("--sweep-args", default="", help="more `scalebench sweep` flags, quoted: "
                   "--sweep-args \"--workers 1,2 --iters 5\" (one flag: --sweep-args=--quiet)")
    p.set_defaults(run=run)


class _SweepArgsParser(argparse.ArgumentParser):
    def error(self, message: str):
        raise UserError(f"sweep-args: {message}")


def sweep_values(workload: str, sweep_args: list[str]) -> dict:
    """The sweep the job will run, parsed and validated as `scalebench sweep` would."""
    from scalebench.commands import sweep as sweep_command

    parser = _SweepArgsParser(prog="scalebench slurm-script --sweep-args")
    sweep_command.register(parser.add_subparsers(parser_class=_SweepArgsParser))
    args, unknown = parser.parse_known_args(["sweep", workload, *sweep_args])
    if unknown:
        raise UserError(f"sweep-args: not a `scalebench sweep` flag: {' '.join(unknown)}")
    values = sweep_command.values_from_args(args)
    values["launcher"] = "slurm"
    config.build_spec(values)
    return values


def run(args: argparse.Namespace) -> int:
    nodes = fields.integer("nodes", args.nodes, 1)
    gpus = fields.integer("gpus_per_node", args.gpus_per_node, 0) if args.gpus_per_node else 0
    tasks = (fields.integer("ntasks_per_node", args.ntasks_per_node, 1)
             if args.ntasks_per_node else None)
    if gpus and tasks and tasks != gpus:
        raise UserError(f"ntasks_per_node: GPU sweeps run one worker per GPU ({gpus}), got "
                        f"{tasks}")
    time_limit = script.check_time(args.time) if args.time else None
    partition = script.check_name("partition", args.partition) if args.partition else None
    account = script.check_name("account", args.account) if args.account else None
    try:
        sweep_args = shlex.split(args.sweep_args)
    except ValueError as exc:
        raise UserError(f"sweep-args: {exc}") from None
    if args.vet and "--vet" not in sweep_args:
        sweep_args.append("--vet")
    values = sweep_values(args.workload, sweep_args)
    name = str(values.get("name", Path(args.workload).stem))
    if "workers" not in values and gpus:
        workers = script.default_workers(nodes, gpus)
        sweep_args += ["--workers", ",".join(str(w) for w in workers)]
    else:
        workers = config.build_spec(values).workers or ()
    script.check_fits(workers, nodes, gpus, tasks, values.get("threads_per_worker"))
    out = Path(args.out or f"results/{name}-slurm").resolve()
    job = script.BatchJob(
        workload=Path(args.workload).resolve(), out=out, nodes=nodes, python=sys.executable,
        workdir=Path.cwd(), gpus_per_node=gpus, ntasks_per_node=tasks, partition=partition,
        time=time_limit, account=account,
        job_name=script.check_name("job_name", args.job_name or f"scalebench-{name}"),
        exclusive=args.exclusive, sweep_args=tuple(sweep_args))
    path = Path(args.script or f"{name}.sbatch")
    out.mkdir(parents=True, exist_ok=True)  # Slurm writes the job's output there from the start
    path.write_text(job.render())
    path.chmod(0o755)
    print(f"wrote {path}; submit it with: sbatch {path}")
    return 0
