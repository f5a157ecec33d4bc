"""A test's own reading of the OSDs' thread CPU, straight from /proc/<pid>/task/*/stat, sampled
in a background thread while a sweep runs: the reference the report's per-step thread-group
figures are checked against. Threads are grouped by the exporter's own rule (`thread_group`)."""

from __future__ import annotations

import bisect
import os
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from cephscope.exporter.collectors.threads import parse_stat, thread_group

CLK_TCK = os.sysconf("SC_CLK_TCK")


def read_groups(pid: int) -> dict[str, float]:
    """thread group -> CPU seconds (user + system) of the process's live threads."""
    groups: dict[str, float] = {}
    task_dir = f"/proc/{pid}/task"
    for tid in os.listdir(task_dir):
        try:
            with open(f"{task_dir}/{tid}/stat") as f:
                fields = parse_stat(f.read())
        except (OSError, ValueError):
            continue  # the thread exited between listdir and read
        group = thread_group(fields.comm)
        groups[group] = groups.get(group, 0.0) + (fields.utime + fields.stime) / CLK_TCK
    return groups


class ProcSampler:
    """Samples every OSD's thread groups every `period` seconds: daemon -> [(time, pid,
    groups)]. The pid is re-read from the OSD's pid file each time (OSDs restart)."""

    def __init__(self, pid_files: Mapping[str, Path], period: float = 0.25) -> None:
        self.pid_files = dict(pid_files)
        self.period = period
        self.samples: dict[str, list[tuple[float, int, dict[str, float]]]] = {
            d: [] for d in self.pid_files}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> ProcSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.is_set():
            for daemon, pid_file in self.pid_files.items():
                try:
                    pid = int(pid_file.read_text().strip())
                    groups = read_groups(pid)
                except (OSError, ValueError):
                    continue  # restarting: no process yet
                self.samples[daemon].append((time.time(), pid, groups))
            self._stop.wait(self.period)

    def value_at(self, daemon: str, group: str, at: float) -> tuple[int, float] | None:
        """(pid, CPU seconds of the group at `at`), interpolated between the two samples
        around it; None when they are of different processes or `at` is outside."""
        samples = self.samples[daemon]
        times = [s[0] for s in samples]
        i = bisect.bisect_left(times, at)
        if i == 0 or i >= len(samples):
            return None
        (t0, p0, g0), (t1, p1, g1) = samples[i - 1], samples[i]
        if p0 != p1:
            return None
        v0, v1 = g0.get(group, 0.0), g1.get(group, 0.0)
        return p0, v0 + (v1 - v0) * (at - t0) / (t1 - t0)

    def rate(self, daemon: str, group: str, start: float, end: float) -> float | None:
        """CPU seconds per second of the group between `start` and `end` (one process)."""
        a, b = self.value_at(daemon, group, start), self.value_at(daemon, group, end)
        if a is None or b is None or a[0] != b[0] or end <= start:
            return None
        return (b[1] - a[1]) / (end - start)
