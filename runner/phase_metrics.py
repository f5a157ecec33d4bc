"""The runner's own /metrics: which step is running, when steps start/end, live client figures.

Series (see docs/metrics.md, section "Runner"):

    cephscope_run_info{run, spec, benchmarks, steps} 1
    cephscope_run_steps{run, state="total|done|failed"}
    cephscope_step_info{run, step, iteration, benchmark, mode, <axis labels>} 1   while running
    cephscope_step_start_timestamp_seconds{run, step}
    cephscope_step_end_timestamp_seconds{run, step}
    cephscope_step_dead_time_seconds{run, step}        config applied -> benchmark started
    cephscope_client_ops_per_second{run, step, mode}    while running (last per-second sample)
    cephscope_client_bytes_per_second{run, step, mode}
    cephscope_client_latency_seconds{run, step, mode}
    cephscope_step_baseline_latency_seconds{run, step, mode, stat, baseline_run}   with --baseline
    cephscope_step_baseline_iops{run, step, mode, baseline_run}

Rendered by hand (text format 0.0.4): the label set of step_info depends on the sweep's axes,
and series must disappear the moment a step ends, which a registry of fixed metrics makes awkward.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from cephscope.runner.benchmarks.base import LiveSample
from cephscope.runner.steps import Step, format_value

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def escape_label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(pairs: Mapping[str, str]) -> str:
    if not pairs:
        return ""
    inner = ",".join(f'{k}="{escape_label_value(str(v))}"' for k, v in pairs.items())
    return "{" + inner + "}"


def _num(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


@dataclass
class _Running:
    step: Step
    mode: str = ""
    live: dict[str, LiveSample] = field(default_factory=dict)  # mode -> last sample
    baseline: dict[str, dict[str, float]] = field(default_factory=dict)  # mode -> figures


class PhaseMetrics:
    """Thread-safe state of the sweep, rendered as Prometheus text on demand."""

    def __init__(self, run_id: str, spec_name: str, axis_labels: Mapping[str, str],
                 benchmarks: list[str], total_steps: int, baseline_run: str | None = None) -> None:
        self.run_id = run_id
        self.spec_name = spec_name
        self.axis_labels = dict(axis_labels)  # axis -> label name
        self.benchmarks = benchmarks
        self.total_steps = total_steps
        self.baseline_run = baseline_run
        self._lock = threading.Lock()
        self._running: _Running | None = None
        self._starts: dict[str, float] = {}
        self._ends: dict[str, float] = {}
        self._dead: dict[str, float] = {}
        self._done = 0
        self._failed = 0

    # ---- updates from the sweep ----------------------------------------------------------------

    def set_progress(self, done: int, failed: int) -> None:
        with self._lock:
            self._done, self._failed = done, failed

    def start_step(self, step: Step, start_ts: float, dead_time_seconds: float | None = None,
                   baseline: Mapping[str, Mapping[str, float]] | None = None) -> None:
        with self._lock:
            self._running = _Running(step=step,
                                     baseline={m: dict(v) for m, v in (baseline or {}).items()})
            self._starts[step.id] = start_ts
            self._ends.pop(step.id, None)
            if dead_time_seconds is not None:
                self._dead[step.id] = dead_time_seconds

    def set_mode(self, mode: str) -> None:
        with self._lock:
            if self._running is not None:
                self._running.mode = mode

    def live_sample(self, mode: str, sample: LiveSample) -> None:
        with self._lock:
            if self._running is not None:
                self._running.live[mode] = sample

    def end_step(self, end_ts: float) -> None:
        with self._lock:
            if self._running is not None:
                self._ends[self._running.step.id] = end_ts
            self._running = None

    # ---- rendering -----------------------------------------------------------------------------

    def step_info_labels(self, step: Step, mode: str) -> dict[str, str]:
        labels = {"run": self.run_id, "step": step.id, "iteration": str(step.iteration),
                  "benchmark": step.benchmark, "mode": mode}
        for axis, label in self.axis_labels.items():
            # Every axis of the sweep appears; "" (= absent to PromQL) where it does not apply.
            labels[label] = format_value(step.axes[axis]) if axis in step.axes else ""
        return labels

    def render(self) -> str:
        with self._lock:
            running = self._running
            starts = dict(self._starts)
            ends = dict(self._ends)
            dead = dict(self._dead)
            done, failed = self._done, self._failed
            live = dict(running.live) if running else {}
            mode = running.mode if running else ""
        run = {"run": self.run_id}
        out: list[str] = []

        def family(name: str, kind: str, help_text: str, rows: list[tuple[dict, float]]) -> None:
            out.append(f"# HELP {name} {help_text}")
            out.append(f"# TYPE {name} {kind}")
            out.extend(f"{name}{_labels(lab)} {_num(val)}" for lab, val in rows)

        family("cephscope_run_info", "gauge", "The sweep run this runner executes.",
               [({**run, "spec": self.spec_name, "benchmarks": ",".join(self.benchmarks),
                  "steps": str(self.total_steps)}, 1.0)])
        family("cephscope_run_steps", "gauge", "Steps of the run by state.",
               [({**run, "state": "total"}, self.total_steps), ({**run, "state": "done"}, done),
                ({**run, "state": "failed"}, failed)])
        info_rows = []
        if running is not None:
            info_rows.append((self.step_info_labels(running.step, mode), 1.0))
        family("cephscope_step_info", "gauge",
               "1 while the step runs; labels: step params (sweep axes).", info_rows)
        family("cephscope_step_start_timestamp_seconds", "gauge",
               "Unix time the step's benchmark started.",
               [({**run, "step": s}, t) for s, t in starts.items()])
        family("cephscope_step_end_timestamp_seconds", "gauge",
               "Unix time the step's benchmark ended.",
               [({**run, "step": s}, t) for s, t in ends.items()])
        family("cephscope_step_dead_time_seconds", "gauge",
               "Seconds from applying the step's config to its benchmark start.",
               [({**run, "step": s}, t) for s, t in dead.items()])
        ops_rows, bytes_rows, lat_rows = [], [], []
        if running is not None:
            for m, sample in live.items():
                lab = {**run, "step": running.step.id, "mode": m}
                if sample.ops_per_second is not None:
                    ops_rows.append((lab, sample.ops_per_second))
                if sample.bytes_per_second is not None:
                    bytes_rows.append((lab, sample.bytes_per_second))
                if sample.latency_seconds is not None:
                    lat_rows.append((lab, sample.latency_seconds))
        family("cephscope_client_ops_per_second", "gauge",
               "Client operations per second as the benchmark tool reports them.", ops_rows)
        family("cephscope_client_bytes_per_second", "gauge",
               "Client bytes per second as the benchmark tool reports them.", bytes_rows)
        family("cephscope_client_latency_seconds", "gauge",
               "Client average latency over the last second as the tool reports it.", lat_rows)
        base_lat, base_iops = [], []
        if running is not None and self.baseline_run:
            for m, figures in running.baseline.items():
                lab = {**run, "step": running.step.id, "mode": m,
                       "baseline_run": self.baseline_run}
                for stat in ("avg", "p99", "max"):
                    value = figures.get(f"latency_{stat}_seconds")
                    if value is not None:
                        base_lat.append(({**lab, "stat": stat}, value))
                if figures.get("iops") is not None:
                    base_iops.append((lab, figures["iops"]))
        family("cephscope_step_baseline_latency_seconds", "gauge",
               "The baseline run's latency for the running step (same step id).", base_lat)
        family("cephscope_step_baseline_iops", "gauge",
               "The baseline run's IOPS for the running step (same step id).", base_iops)
        return "\n".join(out) + "\n"


class MetricsServer:
    """Serves PhaseMetrics on 127.0.0.1 (never any other address)."""

    def __init__(self, metrics: PhaseMetrics, port: int, host: str = "127.0.0.1") -> None:
        self.metrics = metrics
        self.scrapes = 0
        handler = self._handler_class()
        try:
            self.httpd = ThreadingHTTPServer((host, port), handler)
        except OSError as exc:
            raise OSError(f"runner metrics: cannot listen on {host}:{port}: {exc.strerror}") \
                from exc
        self.httpd.daemon_threads = True
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="runner-metrics",
                                        daemon=True)

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.split("?")[0] == "/metrics":
                    body = server.metrics.render().encode()
                    server.scrapes += 1
                    ctype = CONTENT_TYPE
                    code = 200
                elif self.path == "/":
                    body = b'<html><body><a href="/metrics">cephscope runner metrics</a>' \
                           b"</body></html>\n"
                    ctype, code = "text/html", 200
                else:
                    body, ctype, code = b"not found\n", "text/plain", 404
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # scrapes every few seconds would flood the sweep's output

        return Handler

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        if self._thread.is_alive():  # shutdown() would wait forever for a loop never started
            self.httpd.shutdown()
        self.httpd.server_close()
