"""What cephscope costs one Prometheus at 1,000 and 5,000 OSDs: a simulated cluster on this
machine, scraped by Prometheus 2 (classic histograms) and 3.5 (native histograms).

    .venv/bin/python benchmarks/scale_sim.py --osds 1000 [--osds-per-host 50]
        [--variants 2-classic,3-classic,3-native] [--scrape-interval 15] [--steps 10]
        [--step-seconds 60]
        [--release 20.2.4] [--json results.json]

The cluster: N hosts, each a network namespace of the multi-host dev cluster's kind
(deploy/hosts.py: namespaces on bridges the simulation makes and removes), each running one
cephscope-exporter with its default flags (as a host would: its own address, port 9967) over
M replaying OSD admin sockets (benchmarks/replay_osds.py: real captures of the release,
counters advancing, latency histograms moving, every OSD its own), and a node_exporter. A
runner endpoint (the runner's own PhaseMetrics) publishes a run of `--steps` steps.

Then, for each variant in turn, a fresh local stack (deploy/stack.py: Prometheus with every
shipped rule, Alertmanager) scrapes every host through file_sd targets while the run's steps
pass (after `--warmup-scrapes` scrapes), and the benchmark prints, from Prometheus' own
metrics and this machine's /proc: head series, samples ingested per second, Prometheus RSS
(peak and end) and CPU, exporter scrape durations and samples per scrape, rule group
evaluation times, the wall time of every dashboard panel's query over the whole run (template
variables as Grafana resolves them, Grafana's intervals for a 1000-point panel), and of the
report's queries for each step (runner/system_metrics.pull_step_window), plus the CPU the
exporters and the replaying sockets took. Variant `3-native-remote-write` makes that
Prometheus an edge remote-writing to a central store (docs/scale.md), and times the dashboard
and report queries there, as users would read them. Everything it started is stopped, and every
namespace, bridge and veth removed, also on Ctrl-C.

A variant stops early, and says why, when the machine's available memory falls below
`--min-available-gib`, or when scrapes fail (targets down) -- where this machine stops holding
the cluster. Figures, not a test; needs root (namespaces).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cephscope.dashboards.queries import (
    grafana_intervals,
    load_dashboards,
    panel_queries,
    resolve_variables,
    substitute,
)
from cephscope.deploy.hostdaemons import EXPORTER_PORT, NODE_EXPORTER, NODE_EXPORTER_PORT
from cephscope.deploy.hosts import HostNetwork, HostPlan, NsHost, plan_hosts
from cephscope.deploy.placement import host_command
from cephscope.deploy.procs import exporter_binary, pid_alive, terminate
from cephscope.deploy.stack import Stack
from cephscope.figures import EXPORTER_JOB, NODE_JOB
from cephscope.prometheus_api import PrometheusAPI, PrometheusError
from cephscope.runner.benchmarks.base import LiveSample
from cephscope.runner.phase_metrics import MetricsServer, PhaseMetrics
from cephscope.runner.steps import Step
from cephscope.runner.system_metrics import pull_step_window

REPO_ROOT = Path(__file__).resolve().parents[1]
REPLAY = REPO_ROOT / "benchmarks" / "replay_osds.py"
DEFAULT_RELEASE = "20.2.4"
MAX_HOSTS = 89  # deploy/hosts.py: .11 - .99 of the public /24
# variant -> (Prometheus major, native histograms, the scraping Prometheus is an edge that
# remote-writes to a central store, which the dashboards and the report then read)
VARIANTS = {"2-classic": ("2", False, False), "3-classic": ("3", False, False),
            "3-native": ("3", True, False), "3-native-remote-write": ("3", True, True)}
CENTRAL_PORT_OFFSET = 100  # the central store's stack: --port-base + 100
GIB = 1024**3


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def mem_available_bytes() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no MemAvailable in /proc/meminfo")


def cpu_seconds(pid: int) -> float:
    """utime + stime of a live process (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_bytes(pid: int, field_name: str = "VmRSS") -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field_name + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def load_average() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


# ---- the simulated cluster --------------------------------------------------------------------

@dataclass
class SimHost:
    host: NsHost
    osd_ids: range
    asok_dir: Path
    pids: dict[str, int] = field(default_factory=dict)  # service -> pid


class SimCluster:
    """N namespace hosts, each with replaying OSD sockets, an exporter and a node_exporter."""

    def __init__(self, state_dir: Path, osds: int, osds_per_host: int, release: str,
                 node_exporters: bool, seed: int = 1, exporter_args: list[str] | None = None,
                 min_available: int = 0) -> None:
        hosts = math.ceil(osds / osds_per_host)
        if hosts > MAX_HOSTS:
            raise SystemExit(f"{osds} OSDs at {osds_per_host} per host need {hosts} hosts; at "
                             f"most {MAX_HOSTS}: raise --osds-per-host")
        self.state_dir = state_dir
        self.plan: HostPlan = plan_hosts(state_dir, hosts, 0)
        self.release = release
        self.node_exporters = node_exporters
        self.seed = seed
        self.exporter_args = list(exporter_args or [])
        self.min_available = min_available
        self.hosts = [SimHost(h, range(i * osds_per_host, min(osds, (i + 1) * osds_per_host)),
                              state_dir / "asok" / h.name)
                      for i, h in enumerate(self.plan.osd_hosts)]
        self.targets_dir = state_dir / "targets"
        self.log_dir = state_dir / "log"
        self._procs: list[subprocess.Popen[bytes]] = []

    @property
    def osds(self) -> int:
        return sum(len(h.osd_ids) for h in self.hosts)

    def up(self) -> None:
        for d in (self.targets_dir, self.log_dir):
            d.mkdir(parents=True, exist_ok=True)
        self.plan.save(self.state_dir / "hosts.json")  # what `down` removes, saved first
        HostNetwork(self.plan).create()
        for sim in self.hosts:
            self._start_replay(sim)
            self._check_memory(sim)
        for sim in self.hosts:
            self._wait_ready(sim)
            self._start(sim, "exporter", [
                exporter_binary(), f"--web.listen-address={sim.host.public_addr}:{EXPORTER_PORT}",
                f"--ceph.asok-dir={sim.asok_dir}", *self.exporter_args])
            self._check_memory(sim)
            if self.node_exporters:
                self._start(sim, "node_exporter", [
                    NODE_EXPORTER, f"--web.listen-address={sim.host.public_addr}:{NODE_EXPORTER_PORT}",
                    "--no-collector.systemd"])
        self._write_targets()

    def _check_memory(self, sim: SimHost) -> None:
        available = mem_available_bytes()
        if available < self.min_available:
            raise MemoryError(f"{available / GIB:.1f} GiB available after starting "
                              f"{sim.host.name}'s services: the cluster alone does not fit")

    def _start(self, sim: SimHost, service: str, argv: list[str],
               stdout: int | None = None) -> subprocess.Popen[bytes]:
        with (self.log_dir / f"{service}-{sim.host.name}.log").open("ab") as out:
            proc = subprocess.Popen(host_command(sim.host.dev_host(), argv),
                                    stdin=subprocess.DEVNULL, stdout=stdout or out, stderr=out,
                                    start_new_session=True)
        self._procs.append(proc)
        sim.pids[service] = proc.pid  # nsenter execs the service: its pid is the service's
        return proc

    def _start_replay(self, sim: SimHost) -> None:
        first, last = sim.osd_ids[0], sim.osd_ids[-1]
        self._start(sim, "replay", [sys.executable, str(REPLAY), "--dir", str(sim.asok_dir),
                                    "--osds", f"{first}-{last}", "--release", self.release,
                                    "--seed", str(self.seed)], stdout=subprocess.PIPE)

    def _wait_ready(self, sim: SimHost) -> None:
        proc = next(p for p in self._procs if p.pid == sim.pids["replay"])
        assert proc.stdout is not None
        line = proc.stdout.readline()  # "ready" once every socket listens
        if line.strip() != b"ready":
            raise RuntimeError(f"replaying sockets of {sim.host.name} did not start "
                               f"(see {self.log_dir})")

    def _write_targets(self) -> None:
        for job, port, wanted in (("exporter", EXPORTER_PORT, True),
                                  ("node", NODE_EXPORTER_PORT, self.node_exporters)):
            entries = [{"targets": [f"{s.host.public_addr}:{port}"],
                        "labels": {"host": s.host.name}} for s in self.hosts] if wanted else []
            if entries:
                (self.targets_dir / f"{job}.json").write_text(json.dumps(entries, indent=1))

    def pids(self, service: str) -> list[int]:
        return [s.pids[service] for s in self.hosts if service in s.pids]

    def down(self) -> None:
        for proc in self._procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    terminate(proc.pid, 10)
            proc.wait()
        self._procs.clear()
        HostNetwork(self.plan).remove()


# ---- one Prometheus over it -------------------------------------------------------------------

class Sampler:
    """Every second while a variant runs: Prometheus' RSS, the machine's available memory and
    load, and every few seconds Prometheus' head series. When available memory falls below
    `min_available` it kills that Prometheus (its own child, by pid: a Prometheus growing
    past what the machine holds would take the other processes here with it) and says why."""

    def __init__(self, pid: int, min_available: int, api: PrometheusAPI) -> None:
        self.pid = pid
        self.min_available = min_available
        self.api = PrometheusAPI(api.url, timeout_seconds=3)
        self.peak_rss = 0
        self.min_available_seen = mem_available_bytes()
        self.max_load = load_average()
        self.head_series: float | None = None
        self.stop_reason: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        ticks = 0
        while not self._stop.wait(1.0):
            ticks += 1
            self.peak_rss = max(self.peak_rss, rss_bytes(self.pid))
            available = mem_available_bytes()
            self.min_available_seen = min(self.min_available_seen, available)
            self.max_load = max(self.max_load, load_average())
            if ticks % 5 == 0 and self.stop_reason is None:
                with contextlib.suppress(PrometheusError, IndexError, KeyError, ValueError):
                    self.head_series = float(
                        self.api.query("prometheus_tsdb_head_series")[0]["value"][1])
            if available < self.min_available and self.stop_reason is None:
                self.stop_reason = (f"memory: {available / GIB:.1f} GiB available "
                                    f"(< {self.min_available / GIB:.1f}) with Prometheus at "
                                    f"{rss_bytes(self.pid) / GIB:.1f} GiB RSS, "
                                    f"{self.head_series or 0:,.0f} head series")
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.pid, signal.SIGKILL)
            if not pid_alive(self.pid) and self.stop_reason is None:
                self.stop_reason = "Prometheus exited"

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def sim_steps(count: int) -> list[Step]:
    values = (16, 32, 64, 128)
    return [Step(id=f"sim{i:02d}", benchmark="radosbench", iteration=0,
                 params={"op_size": 4096, "concurrent_ops": values[i % len(values)]},
                 pool_profile=None, ceph_config={},
                 axes={"radosbench.concurrent_ops": values[i % len(values)]})
            for i in range(count)]


def timed(call: Callable[[], Any]) -> tuple[float, Any]:
    started = time.monotonic()
    result = call()
    return time.monotonic() - started, result


def scalar(api: PrometheusAPI, promql: str, at: float) -> float | None:
    found = api.query(promql, at)
    return float(found[0]["value"][1]) if found else None


def by_label(api: PrometheusAPI, promql: str, at: float, label: str) -> dict[str, float]:
    return {r["metric"].get(label, ""): float(r["value"][1]) for r in api.query(promql, at)}


def wait_targets_up(api: PrometheusAPI, expected: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while True:
        try:
            up = sum(1 for t in api.active_targets()
                     if t.get("health") == "up" and t["labels"].get("job") in (EXPORTER_JOB, NODE_JOB))
        except PrometheusError:
            up = 0
        if up >= expected or time.monotonic() > deadline:
            return up
        time.sleep(2)


@dataclass
class RunWindows:
    run_id: str
    start: float
    end: float
    steps: list[tuple[str, float, float]]
    stopped: str | None


def run_steps(metrics: PhaseMetrics, steps: list[Step], step_seconds: float,
              sampler: Sampler, live_ops: float) -> RunWindows:
    windows: list[tuple[str, float, float]] = []
    start = time.time()
    for index, step in enumerate(steps):
        if sampler.stop_reason:
            break
        began = time.time()
        metrics.start_step(step, began)
        metrics.set_mode("write")
        while time.time() < began + step_seconds and not sampler.stop_reason:
            metrics.live_sample("write", LiveSample(time.time(), live_ops, live_ops * 4096,
                                                    0.004 * (1 + index % 4)))
            time.sleep(1.0)
        ended = time.time()
        metrics.end_step(ended)
        metrics.set_progress(index + 1, 0)
        windows.append((step.id, began, ended))
    return RunWindows(metrics.run_id, start, time.time(), windows, sampler.stop_reason)


def measure_variant(name: str, cluster: SimCluster, args: argparse.Namespace,
                    port_base: int) -> dict[str, Any]:
    release, native, forwarded = VARIANTS[name]
    central = Stack(args.state_dir / f"central-{name}", port_base=port_base + CENTRAL_PORT_OFFSET,
                    prometheus_release=release, native_histograms=native,
                    remote_write_receiver=True, scrape_interval_seconds=args.scrape_interval,
                    log=log) if forwarded else None
    stack = Stack(args.state_dir / f"prometheus-{name}", port_base=port_base,
                  targets_dir=cluster.targets_dir, prometheus_release=release,
                  native_histograms=native, scrape_interval_seconds=args.scrape_interval,
                  remote_write_url=f"{central.prometheus_url}/api/v1/write" if central else None,
                  log=log)
    steps = sim_steps(args.steps)
    metrics = PhaseMetrics(f"scale-{name}-{int(time.time())}", "scale-sim",
                           {"radosbench.concurrent_ops": "concurrent_ops"}, ["radosbench"], len(steps))
    server = MetricsServer(metrics, stack.runner_port)
    out: dict[str, Any] = {"variant": name, "osds": cluster.osds, "hosts": len(cluster.hosts),
                           "scrape_interval_seconds": args.scrape_interval,
                           "load_before": load_average()}
    server.start()
    try:
        if central is not None:
            central.purge()
            log(f"{name}: central store up on :{central.port_base}")
            central.up(timeout=180)
        stack.purge()
        log(f"{name}: stack up (Prometheus {release}, "
            f"{'native' if native else 'classic'} histograms) on :{port_base}")
        stack.up(timeout=180)
        api = PrometheusAPI(stack.prometheus_url, timeout_seconds=120)
        pid = stack.running()["prometheus"]
        # every host's exporter and node_exporter, and the stack's own node_exporter
        expected = len(cluster.hosts) * (2 if cluster.node_exporters else 1) + 1
        up = wait_targets_up(api, expected, timeout=3 * args.scrape_interval + 60)
        log(f"{name}: {up}/{expected} host targets up; warming up for "
            f"{args.warmup_scrapes} scrapes")
        workers = {s: cluster.pids(s) for s in ("exporter", "replay", "node_exporter")}
        cpu_before = {s: sum(map(cpu_seconds, p)) for s, p in workers.items()}
        prom_cpu_before = cpu_seconds(pid)
        central_pid = central.running()["prometheus"] if central is not None else None
        central_cpu_before = cpu_seconds(central_pid) if central_pid else 0.0
        with Sampler(pid, int(args.min_available_gib * GIB), api) as sampler:
            time.sleep(args.warmup_scrapes * args.scrape_interval)
            log(f"{name}: run of {len(steps)} steps x {args.step_seconds:g} s")
            run = run_steps(metrics, steps, args.step_seconds, sampler,
                            live_ops=100.0 * cluster.osds)
            time.sleep(args.scrape_interval + 2)  # the run's last scrapes and rule evaluations
        elapsed = time.time() - run.start
        cpu = {s: (sum(map(cpu_seconds, p)) - cpu_before[s]) / elapsed for s, p in workers.items()}
        out["cpu_cores"] = {"prometheus": (cpu_seconds(pid) - prom_cpu_before) / elapsed, **cpu}
        if pid_alive(pid):
            out.update(prometheus_figures(api, run, args))
            if central is None:
                out.update(query_latencies(api, run, args))
        else:  # killed for memory: what the sampler saw last
            out["head_series"] = sampler.head_series
        if central is not None and central_pid is not None:
            time.sleep(10)  # the last remote-write batches
            central_api = PrometheusAPI(central.prometheus_url, timeout_seconds=120)
            out["central"] = {
                **prometheus_figures(central_api, run, args),
                "cpu_cores": (cpu_seconds(central_pid) - central_cpu_before) / elapsed,
                "rss_peak_bytes": rss_bytes(central_pid, "VmHWM"),
                "rss_end_bytes": rss_bytes(central_pid)}
            # what the dashboards and the report read: the central store
            out.update(query_latencies(central_api, run, args))
        out["rss_bytes"] = {s: sum(map(rss_bytes, p)) for s, p in workers.items()}
        out["prometheus_rss_end_bytes"] = rss_bytes(pid)
        out["prometheus_rss_peak_bytes"] = max(sampler.peak_rss, rss_bytes(pid, "VmHWM"))
        out["min_available_bytes"] = sampler.min_available_seen
        out["max_load"] = sampler.max_load
        out["stopped"] = run.stopped
    finally:
        server.stop()
        stack.purge()
        if central is not None:
            central.purge()
    return out


def prometheus_figures(api: PrometheusAPI, run: RunWindows,
                       args: argparse.Namespace) -> dict[str, Any]:
    """What one Prometheus holds and spends, from its own metrics over the run."""
    at = time.time()
    span = f"{max(args.scrape_interval * 2, round(at - run.start))}s"
    exporter = f'job="{EXPORTER_JOB}"'
    samples_by_type = by_label(
        api, f"sum by (type) (rate(prometheus_tsdb_head_samples_appended_total[{span}]))", at, "type")
    durations = [float(v) for r in api.query(f"scrape_duration_seconds{{{exporter}}}[{span}]", at)
                 for _t, v in r["values"]]
    out: dict[str, Any] = {
        "head_series": scalar(api, "prometheus_tsdb_head_series", at),
        "samples_per_second": sum(samples_by_type.values()),
        "samples_per_second_by_type": samples_by_type,
        "exporter_samples_per_scrape": scalar(api, f"avg(scrape_samples_scraped{{{exporter}}})", at),
        "exporter_scrape_seconds": {
            "median": statistics.median(durations) if durations else None,
            "p99": sorted(durations)[round(0.99 * (len(durations) - 1))] if durations else None,
            "max": max(durations) if durations else None, "scrapes": len(durations)},
        "exporter_scrapes_failed": scalar(
            api, f"sum(count_over_time((up{{{exporter}}} == 0)[{span}:]))", at) or 0.0,
        "rule_group_seconds": by_label(
            api, f"max_over_time(prometheus_rule_group_last_duration_seconds[{span}])", at, "rule_group"),
        "rule_iterations_missed": scalar(
            api, f"sum(increase(prometheus_rule_group_iterations_missed_total[{span}]))", at) or 0.0,
    }
    out["rule_group_seconds"] = {Path(k.split(";")[0]).name + ";" + k.split(";")[-1]: v
                                 for k, v in out["rule_group_seconds"].items()}
    return out


def query_latencies(api: PrometheusAPI, run: RunWindows,
                    args: argparse.Namespace) -> dict[str, Any]:
    """Wall time of every dashboard query over the run and of the report's queries per step."""
    out: dict[str, Any] = {"dashboard_queries": dashboard_query_times(api, run, args.scrape_interval)}
    report: list[float] = []
    for _step, start, end in run.steps:
        seconds, _pulled = timed(lambda s=start, e=end: pull_step_window(
            api.url, s, e, timeout_seconds=120, scrape_interval=args.scrape_interval))
        report.append(seconds)
    out["report_queries_seconds"] = {"steps": len(report), "total": sum(report),
                                     "max_step": max(report) if report else None}
    return out


def dashboard_query_times(api: PrometheusAPI, run: RunWindows, scrape_interval: float
                          ) -> list[dict[str, Any]]:
    """Every panel query of every dashboard over the whole run, as Grafana would send it."""
    timings = []
    for dashboard in load_dashboards(REPO_ROOT / "dashboards" / "json").values():
        # the simulated cluster has OSDs only: the MDS and gateway variables stay empty
        try:
            values = resolve_variables(api, dashboard, run.run_id, run.start, run.end,
                                       allow_empty=True)
        except PrometheusError as exc:  # a starved server: its panels are not asked, but said
            timings.extend({"query": query.name, "seconds": math.nan, "series": 0,
                            "error": f"variables: {exc}"} for query in panel_queries(dashboard))
            continue
        values.update(grafana_intervals(run.start, run.end, scrape_interval))
        step = max(scrape_interval, (run.end - run.start) / 1000)
        for query in panel_queries(dashboard):
            expr = substitute(query.expr, values)
            params = ({"query": expr, "time": f"{run.end:.3f}"} if query.instant else
                      {"query": expr, "start": f"{run.start:.3f}", "end": f"{run.end:.3f}",
                       "step": f"{step:g}"})
            try:
                seconds, data = timed(lambda p=params, q=query: api.get(
                    "query" if q.instant else "query_range", p))
                series, error = len(data["result"]), None
            except PrometheusError as exc:
                seconds, series, error = math.nan, 0, str(exc)
            timings.append({"query": query.name, "seconds": seconds, "series": series,
                            **({"error": error} if error else {})})
    return timings


# ---- output -----------------------------------------------------------------------------------

def _mib(value: float | None) -> str:
    return "-" if value is None else f"{value / 2**20:,.0f} MiB"


def summary_lines(result: dict[str, Any]) -> Iterator[str]:
    queries = result.get("dashboard_queries", [])
    times = sorted(q["seconds"] for q in queries if not math.isnan(q["seconds"]))
    scrape = result.get("exporter_scrape_seconds", {})
    yield (f"== {result['variant']}: {result['osds']} OSDs on {result['hosts']} hosts, scrape "
           f"every {result['scrape_interval_seconds']:g} s"
           + (f" -- STOPPED: {result['stopped']}" if result.get("stopped") else ""))
    yield (f"head series {result.get('head_series') or 0:,.0f}  samples/s "
           f"{result.get('samples_per_second', 0):,.0f} {result.get('samples_per_second_by_type')}")
    yield (f"Prometheus RSS peak {_mib(result.get('prometheus_rss_peak_bytes'))}, end "
           f"{_mib(result.get('prometheus_rss_end_bytes'))}; CPU cores {result.get('cpu_cores')}; "
           f"RSS of the hosts' processes { {k: _mib(v) for k, v in result.get('rss_bytes', {}).items()} }")
    yield (f"exporter scrape s: median {scrape.get('median')}, p99 {scrape.get('p99')}, max "
           f"{scrape.get('max')} over {scrape.get('scrapes')} scrapes; samples/scrape "
           f"{result.get('exporter_samples_per_scrape')}; failed scrapes "
           f"{result.get('exporter_scrapes_failed')}")
    yield (f"rule groups (max s): {result.get('rule_group_seconds')}; missed "
           f"{result.get('rule_iterations_missed')}")
    if times:
        yield (f"dashboard queries: {len(queries)}, median {statistics.median(times):.3f} s, "
               f"max {times[-1]:.3f} s, over 1 s: {sum(t > 1 for t in times)}, errors: "
               f"{sum(1 for q in queries if q.get('error'))}")
        for q in sorted(queries, key=lambda q: -q["seconds"] if not math.isnan(q["seconds"]) else 0)[:5]:
            yield f"   {q['seconds']:.3f} s  {q['series']:>6} series  {q['query']}"
    yield f"report queries: {result.get('report_queries_seconds')}"
    central = result.get("central")
    if central:
        yield (f"central store (the queries above ran there): head series "
               f"{central.get('head_series') or 0:,.0f}, samples/s "
               f"{central.get('samples_per_second', 0):,.0f}, RSS peak "
               f"{_mib(central.get('rss_peak_bytes'))}, CPU cores {central.get('cpu_cores'):.2f}, "
               f"rule groups (max s) {central.get('rule_group_seconds')}")
    yield (f"load average {result.get('load_before')} before, max {result.get('max_load')}; "
           f"least memory available {_mib(result.get('min_available_bytes'))}")


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt  # SIGTERM cleans up as Ctrl-C does


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--osds", type=int, default=200)
    parser.add_argument("--osds-per-host", type=int, default=50)
    parser.add_argument("--variants", default="2-classic,3-classic,3-native",
                        help=f"comma-separated, of {', '.join(VARIANTS)}")
    parser.add_argument("--release", default=DEFAULT_RELEASE,
                        help="Ceph version whose captures the OSDs replay")
    parser.add_argument("--scrape-interval", type=int, default=15)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--step-seconds", type=float, default=60.0,
                        help="the run (every step) is the dashboards' time range")
    parser.add_argument("--warmup-scrapes", type=int, default=4)
    parser.add_argument("--no-node-exporter", dest="node_exporters", action="store_false")
    parser.add_argument("--exporter-arg", action="append", default=[], metavar="FLAG",
                        help="a flag for every host's exporter beyond its defaults (repeat)")
    parser.add_argument("--min-available-gib", type=float, default=3.0,
                        help="stop a variant when the machine's available memory falls below")
    parser.add_argument("--state-dir", type=Path, default=Path("/tmp/cephscope-scale-sim"))
    parser.add_argument("--port-base", type=int, default=10000, help="the Prometheus stack's")
    parser.add_argument("--json", type=Path, help="write every figure here")
    args = parser.parse_args(argv)
    variants = args.variants.split(",")
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        parser.error(f"--variants: unknown {unknown}; known {list(VARIANTS)}")
    if os.geteuid() != 0:
        parser.error("needs root (network namespaces)")
    args.state_dir = args.state_dir.resolve()
    signal.signal(signal.SIGTERM, _interrupt)
    cluster = SimCluster(args.state_dir, args.osds, args.osds_per_host, args.release,
                         args.node_exporters, exporter_args=args.exporter_arg,
                         min_available=int(args.min_available_gib * GIB))
    commit = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True, check=False).stdout.strip()
    results: dict[str, Any] = {"date": time.strftime("%Y-%m-%d %H:%M %Z"), "commit": commit,
                               "release": args.release, "argv": sys.argv[1:], "variants": []}
    log(f"{cluster.osds} OSDs on {len(cluster.hosts)} hosts (release {args.release} captures), "
        f"commit {commit}, load average {load_average()}")
    try:
        started, _ = timed(cluster.up)
        log(f"cluster up in {started:.1f} s")
        for name in variants:
            result = measure_variant(name, cluster, args, args.port_base)
            results["variants"].append(result)
            for line in summary_lines(result):
                print(line, flush=True)
    except KeyboardInterrupt:
        log("interrupted: cleaning up")
    except MemoryError as exc:
        results["stopped"] = f"memory: {exc}"
        log(f"stopped: {results['stopped']}")
    finally:
        cluster.down()
        log(f"cluster removed; load average {load_average()}")
        if args.json:
            args.json.write_text(json.dumps(results, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
