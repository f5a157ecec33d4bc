"""The sweep's progress on screen: a rich progress bar and a table of finished steps on a
TTY, one plain line per step otherwise."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

from cephscope.runner.benchmarks.base import Benchmark, LiveSample
from cephscope.runner.steps import Step

Log = Callable[[str], None]


def format_duration(seconds: float) -> str:
    total = round(seconds)
    h, rem = divmod(total, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else (f"{m}m{s:02d}s" if m else f"{s}s")



class Progress:
    """rich progress bar + table of finished steps on a TTY; plain lines otherwise."""

    def __init__(self, steps: list[Step], todo: list[Step],
                 benchmarks: Mapping[str, type[Benchmark]], tty: bool | None, log: Log) -> None:
        self.steps = steps
        self.todo = todo
        self.benchmarks = benchmarks
        self.tty = sys.stdout.isatty() if tty is None else tty
        self.log = log
        self.index = {s.id: i for i, s in enumerate(steps, 1)}
        self.finished_rows: list[tuple[str, ...]] = []
        self._progress: Any = None
        self._task: Any = None
        self._last_live = 0.0

    def _estimate(self, step: Step) -> float:
        return max(1.0, self.benchmarks[step.benchmark].estimated_seconds(step.params))

    def __enter__(self) -> Progress:
        if self.tty:
            from rich.progress import (
                BarColumn,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )
            from rich.progress import Progress as RichProgress

            self._progress = RichProgress(
                TextColumn("[bold]{task.fields[label]}"), BarColumn(),
                TextColumn("{task.fields[params]}"), TimeElapsedColumn(), TimeRemainingColumn())
            self._progress.start()
            total = sum(self._estimate(s) for s in self.todo)
            self._task = self._progress.add_task("sweep", total=total, label="", params="")
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._progress is not None:
            self._progress.stop()
            if self.finished_rows:
                from rich.console import Console
                from rich.table import Table

                table = Table(title="finished steps")
                for col in ("#", "step", "params", "mode", "IOPS", "MiB/s", "lat avg ms",
                            "status"):
                    table.add_column(col)
                for row in self.finished_rows:
                    table.add_row(*row)
                Console().print(table)

    def start(self, step: Step) -> None:
        label = f"step {self.index[step.id]}/{len(self.steps)} {step.id}"
        if self._progress is not None:
            self._progress.update(self._task, label=label, params=step.short_params())
        else:
            self.log(f"{label} {step.benchmark} {step.short_params()}: starting")

    def live(self, mode: str, sample: LiveSample) -> None:
        if self._progress is None or sample.ops_per_second is None:
            return
        now = time.monotonic()
        if now - self._last_live >= 1.0:
            self._last_live = now
            self._progress.update(self._task, params=f"{mode} {sample.ops_per_second:.0f} op/s")

    def finish(self, step: Step, result: Mapping[str, Any] | None, error: str | None) -> None:
        n = str(self.index[step.id])
        rows = []
        for r in (result or {}).get("results", []):
            lat = r.get("latency_avg_seconds")
            rows.append((n, step.id, step.short_params(), str(r.get("mode")),
                         f"{r.get('iops', 0):.0f}",
                         f"{(r.get('bandwidth_bytes_per_second') or 0) / 2**20:.1f}",
                         f"{lat * 1000:.2f}" if lat is not None else "-", "done"))
        if error:
            rows.append((n, step.id, step.short_params(), "-", "-", "-", "-",
                         f"FAILED: {error[:60]}"))
        self.finished_rows += rows
        if self._progress is not None:
            self._progress.advance(self._task, self._estimate(step))
        else:
            for row in rows:
                self.log(f"step {row[0]}/{len(self.steps)} {row[1]} {row[2]} mode={row[3]} "
                         f"iops={row[4]} MiB/s={row[5]} lat_avg_ms={row[6]} {row[7]}")
