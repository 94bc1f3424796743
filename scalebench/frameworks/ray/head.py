"""The embedded Ray cluster of one sweep, held by a small helper process.

python -m scalebench.frameworks.ray.head --info FILE --num-cpus N --num-gpus G --object-store-bytes B

Starts a local Ray instance (dashboard off, usage stats off), writes FILE (address, session
folder, environment a driver needs to connect), then keeps Ray up until its stdin closes: the
sweep closes it at the end, and the pipe also closes when the sweep process dies, so the cluster
never outlives the sweep. SIGTERM shuts down the same way. Its console is the sweep's ray.log.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import time
from pathlib import Path

from scalebench.records import atomic

# Environment a driver process needs to join this cluster (ray.init may turn on token auth).
CLIENT_ENV = ("RAY_AUTH_MODE",)


def _terminate(signum, frame):
    raise SystemExit(128 + signum)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="scalebench.frameworks.ray.head")
    parser.add_argument("--info", type=Path, required=True)
    parser.add_argument("--num-cpus", type=int, required=True)
    parser.add_argument("--num-gpus", type=int, default=0)
    parser.add_argument("--object-store-bytes", type=int, required=True)
    args = parser.parse_args(argv)

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    signal.signal(signal.SIGTERM, _terminate)
    start = time.time()
    import ray

    context = ray.init(address="local", num_cpus=args.num_cpus, num_gpus=args.num_gpus,
                       object_store_memory=args.object_store_bytes, include_dashboard=False,
                       log_to_driver=False, logging_level=logging.WARNING)
    try:
        info = context.address_info
        data = {
            "address": info["gcs_address"],
            "session_dir": info.get("session_dir"),
            "pid": os.getpid(),
            "ray_version": ray.__version__,
            "start_seconds": time.time() - start,
            "nodes": [dict(n["Resources"]) for n in ray.nodes() if n.get("Alive")],
            "env": {k: os.environ[k] for k in CLIENT_ENV if k in os.environ},
        }
        atomic.write_json(args.info, data)
        print(f"embedded Ray {ray.__version__} up in {data['start_seconds']:.1f} s at "
              f"{data['address']}; Ray's own logs: {data['session_dir']}/logs", flush=True)
        sys.stdin.buffer.read()  # returns when the sweep closes the pipe (or dies)
    finally:
        ray.shutdown()
        print("embedded Ray shut down", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
