"""scalebench vet [flags]: measure every node and every link of the Slurm allocation this runs
in, write verdicts and the vetted / cordoned node lists (scalebench/vet/)."""

from __future__ import annotations

import argparse
from pathlib import Path

from scalebench.vet import options as vet_options

DEFAULT_OUT = "results/vet"
FLAGS = ("model", "image_size", "batch_size", "precision", "device", "repeats", "threshold",
         "warmup", "iters", "matmul_size", "matmul_iters", "allreduce_size", "allreduce_iters",
         "timeout", "sustained", "pairs", "rounds", "topology", "inject_node_slowdown",
         "inject_link_delay", "inject_probe_kill")


def add_vet_flags(p: argparse.ArgumentParser) -> None:
    d = vet_options.VetOptions()
    p.add_argument("--model", help=f"the compute probe's model (default {d.model})")
    p.add_argument("--image-size", help="pixels (default: the model's native size)")
    p.add_argument("--batch-size", help=f"images per compute step (default {d.batch_size})")
    p.add_argument("--precision", help="fp32, bf16 or fp16: the step and the matmul's dtype "
                   f"(default {d.precision})")
    p.add_argument("--device", help="auto, cpu or cuda (default auto)")
    p.add_argument("--repeats", help=f"windows per figure, for its spread (default {d.repeats})")
    p.add_argument("--threshold", help="percent below the median a figure must fall (and "
                   f"beyond its noise) to be slow (default {d.threshold:g})")
    p.add_argument("--warmup", help=f"untimed compute steps (default {d.warmup})")
    p.add_argument("--iters", help=f"compute steps per window (default {d.iters})")
    p.add_argument("--matmul-size", help="N of the N x N matmul (default 8192 on CUDA, 1024 "
                   "on CPU)")
    p.add_argument("--matmul-iters", help=f"matmuls per window (default {d.matmul_iters})")
    p.add_argument("--allreduce-size", help="bytes per pair allreduce, K/M/G powers of two "
                   "(default 64M on CUDA, 16M on CPU)")
    p.add_argument("--allreduce-iters", help=f"allreduces per window (default "
                   f"{d.allreduce_iters})")
    p.add_argument("--timeout", help=f"seconds per probe step (default {d.timeout:g})")
    p.add_argument("--sustained", help="seconds of back-to-back GEMMs per node, timed in "
                   "--repeats windows (default 30 on CUDA, 3 on CPU)")
    p.add_argument("--pairs", help="auto, all or few: which pairs meet; all: every pair "
                   "(N-1 rounds); few: the constant schedule (--rounds rounds, pairs inside "
                   "leaf switches then across them where the topology is known, and up to 2 "
                   "retest rounds); auto: all where that is no more rounds (default auto)")
    p.add_argument("--rounds", help=f"rounds of the constant schedule, before retests "
                   f"(default {d.rounds})")
    p.add_argument("--topology", metavar="FILE", help="leaf switches in topology.conf syntax "
                   "(SwitchName=s0 Nodes=n[1-32]); default: Slurm's own (scontrol show "
                   "topology) where TopologyPlugin=topology/tree, else none")
    g = p.add_argument_group("fault injection (tests of the vetting; off by default; recorded "
                             "in vet.json)")
    g.add_argument("--inject-node-slowdown", metavar="NODE:FRACTION",
                   help="that Slurm node's compute and matmul take (1 + FRACTION) times as "
                   "long: sb3:0.5 makes it 1.5x slower (comma list allowed)")
    g.add_argument("--inject-link-delay", metavar="NODEA:NODEB:SECONDS",
                   help="sleep SECONDS after each collective between those two nodes "
                   "(comma list allowed)")
    g.add_argument("--inject-probe-kill", metavar="NODE",
                   help="the node probe on that node kills itself as it starts (comma list "
                   "allowed): it must be cordoned as unreachable, the rest vetted")


def register(sub) -> None:
    p = sub.add_parser("vet", help="measure every node and link of the Slurm allocation, "
                       "cordon slow nodes (vetted-nodes.txt, cordoned-nodes.txt)",
                       description="Inside a Slurm allocation: a compute probe (the sweep's "
                       "one-worker training step), a matmul probe and a sustained matmul on "
                       "every node, allreduces between pairs of nodes (every pair, or a "
                       "constant number of rounds: inside leaf switches, then across), each "
                       "with repeats; verdicts: slow compute node, slow network node, slow "
                       "link, slow uplink, unreachable. Writes vet.json, vetted-nodes.txt, "
                       "cordoned-nodes.txt, vet.md and vet.html. Exit 0 when the vetting "
                       "finished (a node whose probe failed is cordoned as unreachable), 1 "
                       "when a pair step failed.")
    add_vet_flags(p)
    p.add_argument("--out", help=f"output folder (default {DEFAULT_OUT})")
    p.add_argument("--quiet", action="store_true", help="no live progress line")
    p.set_defaults(run=run)


def options_from_args(args: argparse.Namespace) -> vet_options.VetOptions:
    return vet_options.build({name: getattr(args, name) for name in FLAGS})


def run(args: argparse.Namespace) -> int:
    from scalebench.vet.run import run_vet, summary_lines

    options = options_from_args(args)
    outcome = run_vet(options, Path(args.out or DEFAULT_OUT), live=False if args.quiet else None)
    for line in summary_lines(outcome.document):
        print(line)
    for path in outcome.outputs:
        print(f"  wrote {path}")
    if outcome.interrupted:
        return 130
    return 0 if outcome.ok else 1
