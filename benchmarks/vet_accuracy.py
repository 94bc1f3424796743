"""How well `scalebench vet` tells a slowed node from a healthy cluster, and what it costs.

Starts a private Slurm cluster of NODES slurmd nodes on this machine (scripts/slurm_local.sh;
needs Slurm, munge and root), then inside one allocation of all its nodes runs the real
`scalebench vet` (a fresh process each time, as a user would):

- K times with no fault: the false-alarm rate (vettings that cordoned any node: a healthy
  cluster must get none);
- K times per slowdown FRACTION with --inject-node-slowdown on one node (a different node each
  time): the detection rate (that node alone cordoned, as a slow compute node), and the
  smallest slowdown detected in every one of the K vettings;
- the vetting's wall time against a default sweep's on the same allocation (WORKLOAD as
  `scalebench sweep --launcher slurm`; goal: vetting under 10% of the sweep), unless
  --no-sweep.

    python benchmarks/vet_accuracy.py [--nodes 4] [--leaves 0] [--k 5]
        [--fractions 0.1,0.2,0.3,0.5] [--threshold PERCENT] [--workload workloads/default.toml]
        [--no-sweep] [--vet-args "--repeats 5 ..."]

The default probe sizes are those of the tests (tests/test_vet.py: Inception V3 at 75 px,
batch 2, 2 steps per window, 5 repeats, half a second of sustained GEMM); --vet-args replaces
them. --leaves L gives the cluster a tree topology of L leaf switches (the nodes split evenly
in order), which the vetting reads from `scontrol show topology`; --threshold is vet's.
The tests' 8-node cluster and threshold, whose healthy vettings must cordon no node:

    python benchmarks/vet_accuracy.py --nodes 8 --leaves 2 --threshold 35 --fractions 1.0 \
        --no-sweep

    python benchmarks/vet_accuracy.py --smoke   # about a minute: 3 nodes (the fewest that get
        # verdicts), 1 vetting with no fault and 1 with sb1 slowed by 50%, no sweep, probes
        # of ResNet-101 at 32 px, batch 2, 1 step per window, 2 repeats, 0.5 s of sustained
        # GEMMs (SMOKE_PROBES); the other flags still override it (but the sweep stays off)

Everything it writes (the cluster, every vetting's files) is in a temporary folder, removed at
the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GOAL_SHARE = 0.10
TEST_PROBES = ("--model inception_v3 --image-size 75 --batch-size 2 --warmup 1 --iters 2 "
               "--repeats 5 --matmul-size 384 --matmul-iters 10 --allreduce-size 2M "
               "--allreduce-iters 5 --sustained 0.5 --timeout 300")
# --smoke: the fewest vettings, each with the smallest probes
# (--sustained 0.5: the CPU default is 3 s of back-to-back GEMMs in every node probe)
SMOKE_PROBES = ("--model resnet101 --image-size 32 --batch-size 2 --warmup 1 --iters 1 "
                "--repeats 2 --matmul-size 128 --matmul-iters 2 --allreduce-size 64K "
                "--allreduce-iters 2 --sustained 0.5 --timeout 300")
SMOKE = {"nodes": 3, "k": 1, "fractions": "0.5", "vet_args": SMOKE_PROBES, "no_sweep": True}


def start_cluster(nodes: int, leaves: int = 0) -> Path:
    top = Path(tempfile.mkdtemp(prefix="scalebench-vet-bench-"))
    top.chmod(0o755)
    base = top / "cluster"
    proc = subprocess.run(["bash", str(REPO / "scripts" / "slurm_local.sh"), "start", str(base),
                           str(nodes), str(leaves)], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        shutil.rmtree(top, ignore_errors=True)
        sys.exit(f"cannot start a {nodes}-node Slurm cluster: {proc.stderr.strip()}")
    return base


def stop_cluster(base: Path) -> None:
    subprocess.run(["bash", str(REPO / "scripts" / "slurm_local.sh"), "stop", str(base)],
                   capture_output=True, timeout=120)
    shutil.rmtree(base.parent, ignore_errors=True)


def env_for(conf: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env.update(SLURM_CONF=str(conf), PYTHONUNBUFFERED="1")
    return env


def in_allocation(conf: Path, nodes: int, args: list[str], timeout: float
                  ) -> tuple[subprocess.CompletedProcess, float]:
    start = time.monotonic()
    proc = subprocess.run(["salloc", f"-N{nodes}", "--quiet", sys.executable, "-m", "scalebench",
                           *args], capture_output=True, text=True, env=env_for(conf), cwd=REPO,
                          timeout=timeout)
    return proc, time.monotonic() - start


def vet_once(conf: Path, nodes: int, out: Path, vet_args: list[str], fault: list[str]
             ) -> tuple[dict, float]:
    proc, wall = in_allocation(conf, nodes, ["vet", "--out", str(out), "--quiet", *vet_args,
                                             *fault], timeout=1800)
    if proc.returncode != 0:
        sys.exit(f"vet failed (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return json.loads((out / "vet.json").read_text()), wall


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--leaves", type=int, default=0,
                        help="leaf switches of a tree topology (0: none)")
    parser.add_argument("--k", type=int, default=5, help="vettings per case")
    parser.add_argument("--fractions", default="0.1,0.2,0.3,0.5",
                        help="slowdowns to try (0.5: the node takes 1.5x as long)")
    parser.add_argument("--threshold", help="vet's --threshold (percent; default: vet's own)")
    parser.add_argument("--vet-args", default=TEST_PROBES, help="flags for `scalebench vet`")
    parser.add_argument("--workload", default=str(REPO / "workloads" / "default.toml"))
    parser.add_argument("--no-sweep", action="store_true", help="skip the sweep for the ratio")
    parser.add_argument("--smoke", action="store_true",
                        help="smallest run (about a minute), to check that the script still works")
    if parser.parse_known_args(argv)[0].smoke:
        parser.set_defaults(**SMOKE)
    args = parser.parse_args(argv)
    vet_args = shlex.split(args.vet_args)
    if args.threshold is not None:
        vet_args += ["--threshold", args.threshold]
    fractions = [float(f) for f in args.fractions.split(",")]
    names = [f"sb{i}" for i in range(1, args.nodes + 1)]
    base = start_cluster(args.nodes, args.leaves)
    conf = base / "slurm.conf"
    work = base.parent / "runs"
    walls: list[float] = []
    try:
        alarms = 0
        for k in range(args.k):
            doc, wall = vet_once(conf, args.nodes, work / f"none-{k}", vet_args, [])
            walls.append(wall)
            alarms += bool(doc["cordoned"])
            print(f"no fault #{k + 1}: cordoned {list(doc['cordoned']) or 'none'}; "
                  f"{len(doc['verdicts'])} verdicts; {wall:.0f} s", flush=True)
        detected: dict[float, int] = {}
        for fraction in fractions:
            detected[fraction] = 0
            for k in range(args.k):
                node = names[k % len(names)]
                doc, wall = vet_once(conf, args.nodes, work / f"slow-{fraction}-{k}", vet_args,
                                     ["--inject-node-slowdown", f"{node}:{fraction}"])
                walls.append(wall)
                hit = list(doc["cordoned"]) == [node] and \
                    doc["cordoned"][node].startswith("slow compute node")
                detected[fraction] += hit
                print(f"{node} slowed {fraction:.0%}: cordoned {list(doc['cordoned']) or 'none'}"
                      f" -> {'detected' if hit else 'missed'}; {wall:.0f} s", flush=True)
        print(f"\nfalse-alarm rate: {alarms}/{args.k} = {alarms / args.k:.0%} "
              "(a healthy cluster with any node cordoned)")
        for fraction, hits in detected.items():
            print(f"detection rate at a {fraction:.0%} slowdown: {hits}/{args.k} = "
                  f"{hits / args.k:.0%}")
        reliable = [f for f, hits in detected.items() if hits == args.k]
        print("smallest slowdown detected in every vetting: "
              + (f"{min(reliable):.0%}" if reliable else "none of those tried"))
        vet_wall = sorted(walls)[len(walls) // 2]
        print(f"vetting wall time ({args.nodes} nodes, median of {len(walls)}): {vet_wall:.0f} s")
        if not args.no_sweep:
            proc, sweep_wall = in_allocation(
                conf, args.nodes, ["sweep", args.workload, "--launcher", "slurm", "--out",
                                   str(work / "sweep"), "--quiet"], timeout=7200)
            status = "" if proc.returncode == 0 else f" (exit {proc.returncode})"
            share = vet_wall / sweep_wall
            print(f"default sweep ({Path(args.workload).name}) on the same allocation: "
                  f"{sweep_wall:.0f} s{status}; vetting = {share:.1%} of it (goal < "
                  f"{GOAL_SHARE:.0%}: {'met' if share < GOAL_SHARE else 'not met'})")
    finally:
        stop_cluster(base)
    return 0


if __name__ == "__main__":
    sys.exit(main())
