"""What the node's CPUs did during the timed windows, from /proc (no psutil): the node's busy,
idle and steal time (/proc/stat), every process's CPU time (/proc/<pid>/stat), and which of
those processes are the benchmark's own.

The benchmark's own processes are the sweep's process and its descendants (the sweep exports
its pid in SWEEP_PID_VAR before it launches anything, so launchers, workers, Ray's processes
and data-loader workers all descend from it) and every process carrying this run's marker
(MARKER_VAR: Horovod starts workers in new sessions, which may be re-parented). Everything else
on the node is another process. Times are in clock ticks (USER_HZ, 10 ms on Linux).

Reading is a scan of /proc: a few milliseconds for a few hundred processes (docs/disturbance.md
has the measured cost); it happens at the edges of a window, never inside one.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
CPUFREQ = Path("/sys/devices/system/cpu")
MARKER_VAR = "SCALEBENCH_RUN_MARKER"  # every process a launch starts carries the run's marker
SWEEP_PID_VAR = "SCALEBENCH_SWEEP_PID"  # "HOST:PID" of the sweep that launched this process


def ticks_per_second() -> int:
    try:
        return int(os.sysconf("SC_CLK_TCK"))
    except (ValueError, OSError, AttributeError):
        return 100


@dataclass(frozen=True)
class NodeTimes:
    """The first line of /proc/stat, summed over every CPU, in ticks."""

    busy: int  # user, nice, system, irq, softirq (guest time is inside user)
    idle: int  # idle and iowait
    steal: int  # time a hypervisor gave to another guest
    total: int  # all of the above

    def minus(self, before: NodeTimes) -> NodeTimes:
        return NodeTimes(self.busy - before.busy, self.idle - before.idle,
                         self.steal - before.steal, self.total - before.total)


def wait_until_quiet(limit: float, busy_below: float = 0.15,
                     window: float = 1.0) -> tuple[float, float]:
    """Wait until the node's cores were less than busy_below busy over one window (steal
    counted busy: the cores were not free), at most `limit` seconds (one window at least): the
    last window's busy fraction and the seconds waited. For measurements compared across
    minutes: what ran just before (launches still exiting, the kernel reclaiming their memory)
    once slowed the first of a series of clean sweeps by 11%."""
    import time

    start = time.monotonic()
    while True:
        before = node_times()
        time.sleep(window)
        spent = node_times().minus(before)
        busy = (spent.busy + spent.steal) / max(1, spent.total)
        waited = time.monotonic() - start
        if busy < busy_below or waited >= limit:
            return busy, waited


def parse_stat(text: str) -> NodeTimes:
    """The aggregate "cpu" line of /proc/stat."""
    for line in text.splitlines():
        if line.startswith("cpu "):
            values = [int(v) for v in line.split()[1:]]
            values += [0] * (8 - len(values))
            user, nice, system, idle, iowait, irq, softirq, steal = values[:8]
            busy = user + nice + system + irq + softirq
            return NodeTimes(busy, idle + iowait, steal, busy + idle + iowait + steal)
    raise ValueError("no aggregate cpu line in /proc/stat")


def node_times(proc: Path = PROC) -> NodeTimes:
    with open(proc / "stat", encoding="ascii") as fh:
        return parse_stat(fh.read())


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    name: str
    ticks: int  # utime + stime of all its threads
    start: int  # start time after boot, in ticks: a pid reused by a new process differs


def parse_pid_stat(data: bytes) -> Proc:
    """/proc/<pid>/stat: the name sits in parentheses and may hold spaces or parentheses."""
    head, _, rest = data.rpartition(b")")
    pid_text, _, name = head.partition(b" (")
    fields = rest.split()
    # fields[0] is field 3 (state): ppid is field 4, utime 14, stime 15, starttime 22
    return Proc(int(pid_text), int(fields[1]), name.decode("utf-8", "replace"),
                int(fields[11]) + int(fields[12]), int(fields[19]))


def process(pid: int | str, proc: Path = PROC) -> Proc | None:
    """One process now (None when it is gone or unreadable)."""
    try:
        fd = os.open(f"{proc}/{pid}/stat", os.O_RDONLY)
        try:
            data = os.read(fd, 4096)
        finally:
            os.close(fd)
        return parse_pid_stat(data)
    except (OSError, ValueError, IndexError):
        return None


def processes(proc: Path = PROC) -> dict[int, Proc]:
    """Every process readable now (a process that ends while being read is left out)."""
    found = (process(name, proc) for name in os.listdir(proc) if name.isdigit())
    return {p.pid: p for p in found if p is not None}


def lineage(pids: list[int], proc: Path = PROC) -> dict[int, Proc]:
    """These processes and their ancestors, read one by one: what OwnProcesses.of needs to
    classify them, without a scan of all of /proc."""
    out: dict[int, Proc] = {}
    for pid in pids:
        while pid > 1 and pid not in out:
            p = process(pid, proc)
            if p is None:
                break
            out[pid] = p
            pid = p.ppid
    return out


def cpu_count(proc: Path = PROC) -> int:
    """CPUs /proc/stat sums over (per-CPU lines), at least 1."""
    try:
        text = (proc / "stat").read_text(encoding="ascii")
    except OSError:
        return os.cpu_count() or 1
    return max(1, sum(1 for line in text.splitlines()
                      if line.startswith("cpu") and line[3:4].isdigit()))


def sweep_pid(environ: dict[str, str] | None = None) -> int | None:
    """The sweep's pid when it runs on this host (SWEEP_PID_VAR), else None."""
    value = (os.environ if environ is None else environ).get(SWEEP_PID_VAR, "")
    host, _, pid = value.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return None
    return int(pid)


def sweep_value() -> str:
    """What a sweep exports in SWEEP_PID_VAR: this host and this process."""
    return f"{socket.gethostname()}:{os.getpid()}"


class OwnProcesses:
    """Which processes are the benchmark's own: the roots (the sweep's process, or this one
    where no sweep exported its pid) and their descendants, and processes carrying the run's
    marker. A process's answer is kept by (pid, start time): the environment of a process is
    read once, when it is first seen outside the roots' trees."""

    def __init__(self, roots: set[int], marker: str | None, proc: Path = PROC) -> None:
        self.roots, self.marker, self.proc = set(roots), marker, proc
        self._known: dict[tuple[int, int], bool] = {}

    def of(self, procs: dict[int, Proc]) -> set[int]:
        """The pids among procs that are the benchmark's own."""
        own: set[int] = set()
        for pid in procs:
            if self._is_own(pid, procs, own, 0):
                own.add(pid)
        return own

    def _is_own(self, pid: int, procs: dict[int, Proc], own: set[int], depth: int) -> bool:
        p = procs.get(pid)
        if p is None:
            return False
        key = (pid, p.start)
        if key in self._known:
            return self._known[key]
        if pid in self.roots or pid in own:
            answer = True
        elif depth < 64 and p.ppid > 1 and p.ppid != pid and \
                self._is_own(p.ppid, procs, own, depth + 1):
            answer = True
        else:
            answer = self._carries_marker(pid)
        self._known[key] = answer
        return answer

    def _carries_marker(self, pid: int) -> bool:
        if not self.marker:
            return False
        try:
            data = (self.proc / str(pid) / "environ").read_bytes()
        except OSError:  # another user's process, or gone
            return False
        return f"{MARKER_VAR}={self.marker}".encode() in data.split(b"\0")


def own_processes(proc: Path = PROC) -> OwnProcesses:
    """This process's view of the benchmark's own processes (the module's rule)."""
    root = sweep_pid()
    roots = {os.getpid()} | ({root} if root is not None else set())
    return OwnProcesses(roots, os.environ.get(MARKER_VAR), proc)


INTERPRETERS = ("python", "java", "node", "ruby", "perl")


def label(p: Proc, proc: Path = PROC) -> str:
    """A process's name in words: an interpreter with what it runs ("python -m pytest",
    "python train.py"), else its name."""
    if not p.name.startswith(INTERPRETERS):
        return p.name
    try:
        argv = (proc / str(p.pid) / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return p.name
    words = [a.decode("utf-8", "replace") for a in argv[1:] if a]
    shown: list[str] = []
    for word in words:
        if word == "-c":
            shown.append("-c")
            break
        if word == "-m" or (shown and shown[-1] == "-m"):
            shown.append(word)
        elif not word.startswith("-"):
            shown.append(Path(word).name)
        if len(shown) >= 2 or (shown and shown[-1] != "-m" and "-m" not in shown[:-1]):
            break
    return " ".join([p.name, *shown])


def governors(root: Path = CPUFREQ) -> dict[str, int]:
    """The CPU frequency governor -> how many CPUs use it ({} where cpufreq is not exposed,
    as in most VMs and containers)."""
    out: dict[str, int] = {}
    for path in sorted(root.glob("cpu[0-9]*/cpufreq/scaling_governor")):
        try:
            name = path.read_text().strip()
        except OSError:
            continue
        out[name] = out.get(name, 0) + 1
    return out
