"""Is a usable Horovod installed here? Checked in a child process, once per scalebench process."""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
import sys
from pathlib import Path

FIX = "run `make horovod` (or point SCALEBENCH_HOROVOD=system at your own installation)"


def horovodrun_path() -> str | None:
    beside = Path(sys.executable).parent / "horovodrun"
    return str(beside) if beside.is_file() else shutil.which("horovodrun")


NCCL_FIX = ("rebuild it with NCCL on a GPU machine (`make horovod` there: the build finds torch's "
            "NCCL), or run this sweep with --device cpu")
BUILD_FLAGS = ("nccl", "gloo", "mpi", "cuda", "rocm")


@functools.cache
def probe() -> tuple[bool, str, dict[str, bool]]:
    """Import horovod.torch in a child (a broken extension must not take down the sweep):
    (usable, version or reason with the fix, build flags)."""
    if horovodrun_path() is None:
        return False, f"horovod is not installed (no horovodrun found); {FIX}", {}
    code = ("import json, horovod, horovod.torch as hvd; "
            "assert hvd.gloo_built(), 'built without Gloo'; "
            "print(json.dumps({'version': horovod.__version__, 'nccl': bool(hvd.nccl_built()), "
            "'gloo': bool(hvd.gloo_built()), 'mpi': bool(hvd.mpi_built()), "
            "'cuda': bool(hvd.cuda_built()), 'rocm': bool(hvd.rocm_built())}))")
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=120)
    except subprocess.TimeoutExpired:
        return False, f"importing horovod.torch took over 120 s; {FIX}", {}
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["unknown error"])[-1]
        return False, f"horovod.torch does not load ({last}); {FIX}", {}
    info = json.loads(out.stdout.strip().splitlines()[-1])
    return True, f"horovod {info['version']}", {k: info[k] for k in BUILD_FLAGS}


def check_installation() -> tuple[bool, str]:
    usable, text, _ = probe()
    return usable, text


def build_flags() -> dict[str, bool]:
    """What this Horovod was built with (recorded in every record's environment)."""
    return probe()[2]


def device_problem(device: str) -> str | None:
    """Without NCCL, Horovod moves CUDA tensors through host memory and Gloo: a different
    (and slower) allreduce than the one being benchmarked."""
    if device == "cuda" and probe()[0] and not build_flags().get("nccl"):
        return f"this Horovod was built without NCCL (CUDA tensors would go through Gloo); {NCCL_FIX}"
    return None
