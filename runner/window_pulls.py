"""The system metrics of each finished step's window (and of the idle baseline), pulled from
Prometheus into the run dir once its scrape lag has passed."""

from __future__ import annotations

import time
from dataclasses import dataclass

from cephscope.runner.results import IDLE_BASELINE_FILE, RunDir, atomic_write_json
from cephscope.runner.steps import Step
from cephscope.runner.system_metrics import pull_step_window


@dataclass(frozen=True)
class WindowPulls:
    prometheus_url: str
    rate_window: str = "auto"
    lag_seconds: float = 10.0

    def pull_pending(self, rd: RunDir, steps: list[Step], final: bool) -> None:
        """Pull Prometheus data for finished steps once the scrape lag has passed; `final`:
        wait for the lag of the last ones."""
        self.pull_idle_baseline(rd, final)
        pending = []
        for step in steps:
            result = rd.step_result(step)
            if result is None or (rd.step_dir(step) / "prometheus.json").exists():
                continue
            pending.append((step, result["timestamps"]))
        if not pending:
            return
        if final:
            wait = max(ts["ended"] + self.lag_seconds for _, ts in pending) - time.time()
            if wait > 0:
                time.sleep(wait)
        for step, ts in pending:
            if time.time() < ts["ended"] + self.lag_seconds:
                continue
            data = pull_step_window(self.prometheus_url, ts["started"], ts["ended"],
                                    self.rate_window)
            rd.write_step_file(step, "prometheus.json", data)

    def pull_idle_baseline(self, rd: RunDir, final: bool) -> None:
        """The idle baseline window's system metrics, stored once for the report."""
        idle = rd.journal().idle_baseline
        path = rd.path / IDLE_BASELINE_FILE
        if not isinstance(idle, dict) or path.exists():
            return
        wait = idle["end"] + self.lag_seconds - time.time()
        if wait > 0 and not final:
            return
        time.sleep(max(0.0, wait))
        atomic_write_json(path, pull_step_window(self.prometheus_url, idle["start"],
                                                 idle["end"], self.rate_window))
