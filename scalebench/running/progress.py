"""Progress of a sweep: a live line per run on a terminal, result lines per finished run."""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO


def duration(seconds: float) -> str:
    """12s, 3m05s, 1h02m."""
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def result_lines(records: list[dict], index: int, total: int, elapsed: float | None
                 ) -> list[str]:
    """[k/n] and each record's own line (its task says how); one record per line."""
    from scalebench import tasks

    lines = [tasks.get(r["kind"]).result_line(r) for r in records]
    took = f" in {duration(elapsed)}" if elapsed is not None else ""
    if len(records) == 1:
        return [f"[{index}/{total}] {lines[0]}" + (took if records[0]["status"] == "ok" else "")]
    return [f"[{index}/{total}] done{took}:"] + [f"  {line}" for line in lines]


class Progress:
    """Tracks runs done and estimates what is left from the mean time of runs finished so far."""

    def __init__(self, total: int, stream: TextIO | None = None, live: bool | None = None,
                 clock=time.monotonic):
        self.total = total
        self.stream = stream or sys.stdout
        self.live = self.stream.isatty() if live is None else live
        self.clock = clock
        self.done = 0
        self.spent = 0.0  # seconds spent in launched runs (skips cost nothing)
        self.launched = 0
        self._run_start: float | None = None
        self._label = ""
        self._configurations = 1  # configurations the running launch measures
        self._ticker: threading.Thread | None = None
        self._stop = threading.Event()

    def estimate_left(self) -> float | None:
        """Seconds left: the mean time per launched configuration so far x those left."""
        if not self.launched:
            return None
        return self.spent / self.launched * (self.total - self.done)

    def status_line(self) -> str:
        elapsed = self.clock() - self._run_start if self._run_start is not None else 0.0
        left = self.estimate_left()
        eta = f", ~{duration(max(0.0, left - elapsed))} left" if left is not None else ""
        last = self.done + self._configurations
        which = f"{self.done + 1}" if self._configurations == 1 else f"{self.done + 1}-{last}"
        return (f"[{which}/{self.total}] {self._label} running {duration(elapsed)}, "
                f"{self.total - last} after this{eta}")

    def start(self, label: str, configurations: int = 1) -> None:
        self._label = label
        self._configurations = configurations
        self._run_start = self.clock()
        if self.live:
            self._stop.clear()
            self._ticker = threading.Thread(target=self._tick, daemon=True)
            self._ticker.start()

    def _tick(self) -> None:
        while not self._stop.wait(1.0):
            self.stream.write("\r\033[K" + self.status_line())
            self.stream.flush()

    def _stop_ticker(self) -> None:
        if self._ticker is not None:
            self._stop.set()
            self._ticker.join()
            self._ticker = None
            self.stream.write("\r\033[K")

    def finish(self, records: list[dict], configurations: int = 1) -> None:
        """The launch ended with these records; with configurations > 1 (a grouped launch)
        each record is one configuration and gets its own [k/n] line."""
        self._stop_ticker()
        elapsed = self.clock() - self._run_start if self._run_start is not None else 0.0
        self.spent += elapsed
        if configurations == 1:
            self.done += 1
            self.launched += 1
            lines = result_lines(records, self.done, self.total, elapsed)
        else:
            lines = []
            for record in records:
                self.done += 1
                lines += result_lines([record], self.done, self.total, None)
            lines.append(f"  ({len(records)} configurations in one launch, {duration(elapsed)})")
            self.launched += len(records)
        for line in lines:
            self.stream.write(line + "\n")
        self.stream.flush()

    def finish_elsewhere(self, label: str, configurations: int = 1) -> None:
        """A multi-node run finished here; another node writes its record."""
        self._stop_ticker()
        self.done += configurations
        self.launched += configurations
        self.spent += self.clock() - self._run_start if self._run_start is not None else 0.0
        self.stream.write(f"[{self.done}/{self.total}] {label}: done on this node "
                          "(node 0 records the result)\n")
        self.stream.flush()

    def skip(self, label: str, why: str) -> None:
        self.done += 1
        self.stream.write(f"[{self.done}/{self.total}] {label}: {why}\n")
        self.stream.flush()

    def note(self, text: str) -> None:
        self._stop_ticker()
        self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
        self._stop_ticker()
