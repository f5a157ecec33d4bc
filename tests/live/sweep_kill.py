"""Start the real `cephscope sweep` as a subprocess and SIGKILL it mid-run (shared by the live
tests that check `--resume` after a killed runner)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class KilledSweep:
    steps: list[dict[str, Any]]  # run.json's steps when the runner was killed
    step_timestamps: Path  # timestamps.json of the step that was running

    def step_window(self) -> dict[str, Any]:
        """The killed step's timestamps as written, with `ended` = now (the kill)."""
        window = json.loads(self.step_timestamps.read_text())
        window["ended"] = time.time()
        return window


def step_started(results: Path, step_number: int) -> tuple[list[dict[str, Any]], Path] | None:
    """(run.json steps, that step's timestamps.json) once step `step_number` (1-based) has
    started its benchmark, else None."""
    run = results / "run.json"
    steps = json.loads(run.read_text())["steps"] if run.exists() else []
    if len(steps) < step_number:
        return None
    ts = results / f"step-{steps[step_number - 1]['id']}" / "timestamps.json"
    if ts.exists() and "started" in json.loads(ts.read_text()):
        return steps, ts
    return None


def run_sweep_until_step_then_kill(argv: Sequence[str], results: Path, log_path: Path,
                                   step_number: int, *, timeout: float, settle: float = 0.0,
                                   before_kill: Callable[[list[dict[str, Any]]], None] | None
                                   = None) -> KilledSweep:
    """Run `argv` (a sweep writing to `results`, output to `log_path`) until step `step_number`
    runs its benchmark, wait `settle` seconds, call `before_kill(steps)`, then SIGKILL it.
    The runner must not end on its own before that (its log is in the assertion)."""
    with log_path.open("w") as log:
        proc = subprocess.Popen(list(argv), stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            deadline = time.monotonic() + timeout
            while (found := step_started(results, step_number)) is None:
                assert proc.poll() is None, log_path.read_text()
                assert time.monotonic() < deadline, f"step {step_number} never started"
                time.sleep(0.2)
            time.sleep(settle)
            if before_kill is not None:
                before_kill(found[0])
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
        finally:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(10)
    return KilledSweep(*found)
