"""The runner's own /metrics: which step is running, when steps start/end, live client figures.

Series (see docs/metrics.md, section "Runner"):

    cephscope_run_info{run, spec, benchmarks, steps} 1
    cephscope_run_steps{run, state="total|done|failed"}
    cephscope_step_info{run, step, iteration, benchmark, mode, <axis labels>, ceph_version} 1
                                                         while running
    cephscope_step_start_timestamp_seconds{run, step}
    cephscope_step_end_timestamp_seconds{run, step}
    cephscope_step_dead_time_seconds{run, step}        config applied -> benchmark started
    cephscope_run_phase{run, phase, step} 1        while a run phase lasts (idle_baseline,
                                                   scrub_wait, health_gate, drop_caches,
                                                   quiet_before, quiet_after, prepare,
                                                   rebuild, recovery_<phase> of a recovery
                                                   test)
    cephscope_client_ops_per_second{run, step, mode}    while running (last per-second sample)
    cephscope_client_bytes_per_second{run, step, mode}
    cephscope_client_latency_seconds{run, step, mode}
    cephscope_step_client_ops_per_second{run, step, mode, client}   the same per client of a
    cephscope_step_client_bytes_per_second{run, step, mode, client}  step run on several
    cephscope_step_client_latency_seconds{run, step, mode, client}   clients
    cephscope_step_baseline_latency_seconds{run, step, mode, stat, baseline_run}   with --baseline
    cephscope_step_baseline_iops{run, step, mode, baseline_run}

Served by prometheus_client from a custom collector: the label set of step_info depends on the
sweep's axes, and series must disappear the moment a step ends, so every scrape builds the
families afresh from the sweep's state instead of keeping registered metrics.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, generate_latest, start_http_server
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from cephscope.runner.benchmarks.base import LiveSample
from cephscope.runner.steps import Step, format_value


@dataclass
class _Running:
    step: Step
    mode: str = ""
    live: dict[str, LiveSample] = field(default_factory=dict)  # mode -> last sample
    # (client, mode) -> last sample of that client alone (steps run on several clients)
    client_live: dict[tuple[str, str], LiveSample] = field(default_factory=dict)
    baseline: dict[str, dict[str, float]] = field(default_factory=dict)  # mode -> figures


class PhaseMetrics(Collector):
    """Thread-safe state of the sweep; a prometheus_client collector of it."""

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
        self._phase: tuple[str, str] | None = None  # (phase, step id or "")
        self._ceph_version = ""  # what the cluster reports; a label of step_info when known

    # ---- updates from the sweep ----------------------------------------------------------------

    def set_ceph_version(self, version: str) -> None:
        with self._lock:
            self._ceph_version = version

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

    def set_phase(self, phase: str | None, step_id: str = "") -> None:
        """A run phase outside the benchmark itself (hygiene, prefill); None ends it."""
        with self._lock:
            self._phase = (phase, step_id) if phase else None

    def set_mode(self, mode: str) -> None:
        with self._lock:
            if self._running is not None:
                self._running.mode = mode

    def live_sample(self, mode: str, sample: LiveSample) -> None:
        with self._lock:
            if self._running is not None:
                self._running.live[mode] = sample

    def live_client_sample(self, client: str, mode: str, sample: LiveSample) -> None:
        with self._lock:
            if self._running is not None:
                self._running.client_live[(client, mode)] = sample

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
        if self._ceph_version:
            labels["ceph_version"] = self._ceph_version
        return labels

    def collect(self) -> Iterator[Metric]:
        """prometheus_client's Collector protocol: the families as they stand now."""
        with self._lock:
            running = self._running
            starts = dict(self._starts)
            ends = dict(self._ends)
            dead = dict(self._dead)
            done, failed = self._done, self._failed
            live = dict(running.live) if running else {}
            client_live = dict(running.client_live) if running else {}
            mode = running.mode if running else ""
        run = {"run": self.run_id}

        def family(name: str, help_text: str, rows: list[tuple[dict[str, str], float]]) -> Metric:
            metric = GaugeMetricFamily(name, help_text)
            for labels, value in rows:
                metric.add_sample(name, labels, float(value))
            return metric

        yield family("cephscope_run_info", "The sweep run this runner executes.",
                     [({**run, "spec": self.spec_name, "benchmarks": ",".join(self.benchmarks),
                        "steps": str(self.total_steps)}, 1.0)])
        yield family("cephscope_run_steps", "Steps of the run by state.",
                     [({**run, "state": "total"}, self.total_steps),
                      ({**run, "state": "done"}, done), ({**run, "state": "failed"}, failed)])
        info_rows = []
        if running is not None:
            info_rows.append((self.step_info_labels(running.step, mode), 1.0))
        yield family("cephscope_step_info",
                     "1 while the step runs; labels: step params (sweep axes).", info_rows)
        phase = self._phase
        yield family("cephscope_run_phase",
                     "1 while a run phase lasts (hygiene before a step, idle baseline, prepare).",
                     [({**run, "phase": phase[0], "step": phase[1]}, 1.0)] if phase else [])
        yield family("cephscope_step_start_timestamp_seconds",
                     "Unix time the step's benchmark started.",
                     [({**run, "step": s}, t) for s, t in starts.items()])
        yield family("cephscope_step_end_timestamp_seconds", "Unix time the step's benchmark ended.",
                     [({**run, "step": s}, t) for s, t in ends.items()])
        yield family("cephscope_step_dead_time_seconds",
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
        yield family("cephscope_client_ops_per_second",
                     "Client operations per second as the benchmark tool reports them.", ops_rows)
        yield family("cephscope_client_bytes_per_second",
                     "Client bytes per second as the benchmark tool reports them.", bytes_rows)
        yield family("cephscope_client_latency_seconds",
                     "Client average latency over the last second as the tool reports it.",
                     lat_rows)
        yield from self._client_families(running, client_live, family)
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
        yield family("cephscope_step_baseline_latency_seconds",
                     "The baseline run's latency for the running step (same step id).", base_lat)
        yield family("cephscope_step_baseline_iops",
                     "The baseline run's IOPS for the running step (same step id).", base_iops)

    def _client_families(self, running: _Running | None,
                         client_live: Mapping[tuple[str, str], LiveSample],
                         family: Callable[[str, str, list[tuple[dict[str, str], float]]], Metric],
                         ) -> Iterator[Metric]:
        """Per-client live figures: separate families, so that a sum over the step series
        never counts a client twice."""
        rows: dict[str, list[tuple[dict[str, str], float]]] = {"ops": [], "bytes": [], "lat": []}
        if running is not None:
            for (client, m), sample in sorted(client_live.items()):
                lab = {"run": self.run_id, "step": running.step.id, "mode": m, "client": client}
                for key, value in (("ops", sample.ops_per_second),
                                   ("bytes", sample.bytes_per_second),
                                   ("lat", sample.latency_seconds)):
                    if value is not None:
                        rows[key].append((lab, value))
        yield family("cephscope_step_client_ops_per_second",
                     "Operations per second of one client of the running step.", rows["ops"])
        yield family("cephscope_step_client_bytes_per_second",
                     "Bytes per second of one client of the running step.", rows["bytes"])
        yield family("cephscope_step_client_latency_seconds",
                     "Average latency over the last second of one client of the running step.",
                     rows["lat"])

    def registry(self) -> CollectorRegistry:
        """A registry holding only these families (no process/platform collectors)."""
        registry = CollectorRegistry(auto_describe=False)
        registry.register(self)
        return registry

    def render(self) -> str:
        """The text exposition a scrape would get (prometheus_client's renderer)."""
        return generate_latest(self.registry()).decode()


class MetricsServer:
    """Serves PhaseMetrics with prometheus_client's HTTP server on 127.0.0.1 only."""

    def __init__(self, metrics: PhaseMetrics, port: int, host: str = "127.0.0.1") -> None:
        self.metrics = metrics
        self.host = host
        self.requested_port = port
        self._httpd: WSGIServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> tuple[str, int]:
        if self._httpd is None:
            raise RuntimeError("runner metrics: server not started")
        host, port = self._httpd.server_address[:2]
        return str(host), int(port)

    @property
    def port(self) -> int:
        return self.address[1]

    def start(self) -> None:
        try:
            self._httpd, self._thread = start_http_server(self.requested_port, addr=self.host,
                                                          registry=self.metrics.registry())
        except OSError as exc:
            raise OSError(f"runner metrics: cannot listen on {self.host}:{self.requested_port}: "
                          f"{exc.strerror}") from exc

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
