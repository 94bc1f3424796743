"""One Horovod worker as a task of a Slurm step:
python -m scalebench.frameworks.horovod.slurm_worker RUN_DIR.

Horovod starts srun-launched workers on its own only in MPI builds (srun --mpi=pmix, ranks from
PMI); the Gloo build scalebench uses needs what horovodrun's Gloo launcher gives each worker it
starts: the slot's HOROVOD_* variables and a rendezvous server. The sweep holds that server for
the step (launcher.slurm_launch, with the slot plan in RUN_DIR/horovod-slots.json); this sets
the variables of the slot at this task's Slurm rank, the network interface towards the server,
and runs the usual worker.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path

SLOTS_FILE = "horovod-slots.json"


def slot_env(slot: dict) -> dict[str, str]:
    """The variables horovodrun's Gloo launcher sets for one slot (gloo_run.create_slot_env_vars)."""
    return {"HOROVOD_HOSTNAME": slot["hostname"], "HOROVOD_RANK": str(slot["rank"]),
            "HOROVOD_SIZE": str(slot["size"]), "HOROVOD_LOCAL_RANK": str(slot["local_rank"]),
            "HOROVOD_LOCAL_SIZE": str(slot["local_size"]),
            "HOROVOD_CROSS_RANK": str(slot["cross_rank"]),
            "HOROVOD_CROSS_SIZE": str(slot["cross_size"])}


def interface_to(address: str) -> str:
    """The name of this machine's interface that reaches address (Gloo's HOROVOD_GLOO_IFACE)."""
    import psutil

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect((address, 9))  # UDP: picks the route, sends nothing
        local = s.getsockname()[0]
    for name, addrs in psutil.net_if_addrs().items():
        if any(a.family == socket.AF_INET and a.address == local for a in addrs):
            return name
    return "lo"


def main(argv: list[str]) -> int:
    run_dir = Path(argv[1])
    plan = json.loads((run_dir / SLOTS_FILE).read_text())
    rank = int(os.environ["SLURM_PROCID"])
    slot = plan[rank]
    host = os.environ.get("SLURMD_NODENAME")
    if host and host != slot["hostname"]:
        print(f"scalebench: Slurm placed rank {rank} on {host}, the Horovod slot plan on "
              f"{slot['hostname']}", file=sys.stderr)
        return 1
    os.environ.update(slot_env(slot))
    if "HOROVOD_GLOO_IFACE" not in os.environ:
        os.environ["HOROVOD_GLOO_IFACE"] = interface_to(os.environ["HOROVOD_GLOO_RENDEZVOUS_ADDR"])
    from scalebench.frameworks.horovod.worker import main as worker_main

    return worker_main([argv[0], str(run_dir)])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
