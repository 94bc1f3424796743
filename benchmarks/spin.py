"""The busy process the benchmarks start beside their sweeps (disturbance.py's hog,
history_real.py's busy processes): a Python program that spins a given share of a core."""

from __future__ import annotations


def spin_program(duty: float = 1.0, name: str | None = None) -> str:
    """The program for `python -c`: it spins `duty` of every 10 ms (1: all the time) and, with
    `name`, names itself so (its comm, through prctl PR_SET_NAME) for /proc readers to see."""
    head = (f"import ctypes\nctypes.CDLL(None).prctl(15, b'{name}', 0, 0, 0)\n" if name else "")
    if duty >= 1:
        return head + "while True:\n    pass\n"
    return head + ("import time\nwhile True:\n    end = time.perf_counter() + "
                   f"{0.01 * duty:.6f}\n    while time.perf_counter() < end:\n        pass\n"
                   f"    time.sleep({0.01 * (1 - duty):.6f})\n")
