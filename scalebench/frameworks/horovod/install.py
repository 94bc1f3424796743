"""Is a usable Horovod installed here? Checked in a child process, once per scalebench process."""

from __future__ import annotations

import functools
import shutil
import subprocess
import sys
from pathlib import Path

FIX = "run `make horovod` (or point SCALEBENCH_HOROVOD=system at your own installation)"


def horovodrun_path() -> str | None:
    beside = Path(sys.executable).parent / "horovodrun"
    return str(beside) if beside.is_file() else shutil.which("horovodrun")


@functools.cache
def check_installation() -> tuple[bool, str]:
    """Import horovod.torch in a child: a broken extension must not take down the sweep."""
    if horovodrun_path() is None:
        return False, f"horovod is not installed (no horovodrun found); {FIX}"
    probe = ("import horovod, horovod.torch as hvd; "
             "assert hvd.gloo_built(), 'built without Gloo'; print(horovod.__version__)")
    try:
        out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                             timeout=120)
    except subprocess.TimeoutExpired:
        return False, f"importing horovod.torch took over 120 s; {FIX}"
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["unknown error"])[-1]
        return False, f"horovod.torch does not load ({last}); {FIX}"
    return True, f"horovod {out.stdout.strip()}"
