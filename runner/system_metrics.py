"""System metrics of a step window, pulled from Prometheus (query_range) into the step dir.

The report's list of queries lives here; the PromQL of every figure it shares with the rules and
dashboards (CPU busy, disk await, OSD op latency, ...) and the job selectors come from
`cephscope.figures`. `{w}` is the rate window: by default 4 x the
longest scrape interval of Prometheus' active targets (a rate() needs at least two samples in
its window; four keep it steady), read from Prometheus itself. Names follow node_exporter and
Ceph's own exporter names (`ceph_osd_op*`), which cephscope's exporter keeps unchanged.

Everything the report needs is stored (prometheus.json), so a report without Prometheus equals
one with it: the OSDs' devices and interfaces (topology info series) and the raw cumulative
bucket counters of the OSD latency histograms (the report takes their deltas over each mode's
window) are pulled along with the rates. Series keep their `instance` label and, where the
targets carry one (file_sd targets of a multi-host cluster), their `host` label, so every
per-host table has a host dimension, named after the host when it is known.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from cephscope import figures as figure_names
from cephscope.figures import RATE_WINDOW_SCRAPES, STACK_FIGURES, Figures, histogram_raw, selector
from cephscope.prometheus_api import PrometheusAPI, PrometheusError, PrometheusUnreachable

# Mode windows shorter than this many scrape intervals get a warning in the report.
MIN_WINDOW_SCRAPES = 2
AUTO_RATE_WINDOW = "auto"

# query name -> figure; `{w}` stands for the rate window until rendered
def system_queries(figures: Figures = STACK_FIGURES) -> dict[str, str]:
    """The report's query per stored name, every shared figure's PromQL from `figures`."""
    f = figures.with_window("{w}")
    host, exporter = ("instance", "host"), selector(*f.exporter)
    osd = ("instance", "host", "ceph_daemon")
    queries = {
        # CPU busy fraction per host (all CPUs together, 0..1; iowait and steal are not busy)
        "cpu_busy_ratio": f.cpu_busy_ratio(host),
        # per host and CPU mode (user, system, iowait, ...), fraction of all the host's CPUs
        "cpu_mode_ratio": f.cpu_mode_ratio(host),
        # per core: busy fraction of one CPU
        "cpu_core_busy_ratio": f.cpu_busy_cores((*host, "cpu")),
        # disks: utilisation, IOPS, bandwidth, average await
        "disk_util_ratio": f.disk_util_ratio(),
        "disk_read_iops": f.node_rate(figure_names.DISK_READS),
        "disk_write_iops": f.node_rate(figure_names.DISK_WRITES),
        "disk_read_bytes_per_second": f.node_rate(figure_names.DISK_READ_BYTES),
        "disk_write_bytes_per_second": f.node_rate(figure_names.DISK_WRITTEN_BYTES),
        "disk_await_seconds": f.disk_await_seconds(),
        # NICs
        "nic_receive_bytes_per_second": f.node_rate(figure_names.NIC_RECEIVE_BYTES),
        "nic_transmit_bytes_per_second": f.node_rate(figure_names.NIC_TRANSMIT_BYTES),
        # OSD side: op rate and average latency per OSD
        "osd_ops_per_second": f.exporter_rate(figure_names.OSD_OPS),
        "osd_op_latency_seconds": f.osd_op_latency_seconds(osd),
        "osd_op_r_latency_seconds": f.osd_op_latency_seconds(osd, op="r"),
        "osd_op_w_latency_seconds": f.osd_op_latency_seconds(osd, op="w"),
        # OSD thread groups (tp_osd_tp, msgr-worker, bstore_kv_sync, ...): CPU seconds per second
        "osd_thread_cpu_seconds_per_second": f.osd_thread_cpu_cores((*osd, "thread_group")),
        # raw cumulative OSD latency histogram buckets: the report takes deltas per mode window
        # (classic `le` series, or native histograms where Prometheus stores them so)
        "osd_op_latency_bucket": histogram_raw(figure_names.OSD_OP_LATENCY_HISTOGRAM,
                                               (*osd, "op"), *f.exporter),
        # topology: which disks and NICs are the OSDs' own
        "osd_device_info": f"cephscope_osd_device_info{exporter}",
        "osd_network_info": f"cephscope_osd_network_info{exporter}",
    }
    return queries


# queries of raw cumulative counters (deltas taken by the report, not rate()s)
CUMULATIVE_QUERIES = frozenset({"osd_op_latency_bucket"})


def counter_series(figures: Figures = STACK_FIGURES) -> dict[str, str]:
    """Raw counters whose scrapes inside a step's window give its system figures (see
    `window_rates`): pulled as range vectors, so every sample keeps its real scrape timestamp.
    The report computes each shared figure from them as `figures` defines it."""
    node, exporter = selector(*figures.node), selector(*figures.exporter)
    lat = figure_names.osd_op_latency_counter()
    return {
        "cpu_seconds": figure_names.CPU_SECONDS + node,
        "disk_io_time_seconds": figure_names.DISK_IO_TIME + node,
        "disk_reads": figure_names.DISK_READS + node,
        "disk_writes": figure_names.DISK_WRITES + node,
        "disk_read_bytes": figure_names.DISK_READ_BYTES + node,
        "disk_written_bytes": figure_names.DISK_WRITTEN_BYTES + node,
        "disk_read_time_seconds": figure_names.DISK_READ_TIME + node,
        "disk_write_time_seconds": figure_names.DISK_WRITE_TIME + node,
        "nic_receive_bytes": figure_names.NIC_RECEIVE_BYTES + node,
        "nic_transmit_bytes": figure_names.NIC_TRANSMIT_BYTES + node,
        "osd_op": figure_names.OSD_OPS + exporter,
        "osd_op_latency_sum": f"{lat}_sum{exporter}",
        "osd_op_latency_count": f"{lat}_count{exporter}",
        "osd_thread_cpu_seconds": figure_names.OSD_THREAD_CPU_SECONDS + exporter,
        # the RADOS Gateways' own counters (empty where the cluster has none)
        **rgw_counter_series(figures),
    }


def rgw_counter_series(figures: Figures = STACK_FIGURES) -> dict[str, str]:
    """The gateways' raw counters behind the RGW figures (cephscope.figures): requests and
    failures, and per GET/PUT its ops, bytes and latency pair in both generations (`rgw` up
    to Reef, Tentacle's `rgw_op`), named `rgw_<op>.<generation>_<what>`."""
    exporter = selector(*figures.exporter)
    series = {"rgw_requests": figure_names.RGW_REQUESTS + exporter,
              "rgw_failed_requests": figure_names.RGW_FAILED_REQUESTS + exporter}
    for op in figure_names.RGW_OPERATIONS:
        for generation, (ops, nbytes, pair) in enumerate(figure_names.rgw_op_counters(op)):
            name = f"rgw_{op}.{generation}"
            series[f"{name}_ops"] = ops + exporter
            series[f"{name}_bytes"] = nbytes + exporter
            series[f"{name}_latency_sum"] = f"{pair}_sum{exporter}"
            series[f"{name}_latency_count"] = f"{pair}_count{exporter}"
    return series


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)")
_DURATION_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800,
                     "y": 31536000}


def parse_duration(text: str) -> float:
    """Seconds of a Prometheus duration ("15s", "1m30s", "500ms")."""
    text = str(text).strip()
    parts = _DURATION_PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"not a Prometheus duration: {text!r}")
    return sum(float(n) * _DURATION_SECONDS[u] for n, u in parts)


def format_duration(seconds: float) -> str:
    return f"{round(seconds * 1000)}ms" if seconds < 1 else f"{seconds:g}s"


def scrape_interval_seconds(prometheus_url: str, timeout_seconds: float = 10.0) -> float | None:
    """The longest scrape interval of Prometheus' active targets (None when unknown)."""
    try:
        targets = PrometheusAPI(prometheus_url, timeout_seconds).active_targets()
        intervals = [parse_duration(t["scrapeInterval"]) for t in targets if t.get("scrapeInterval")]
    except (PrometheusError, ValueError, KeyError, TypeError):
        return None
    return max(intervals) if intervals else None


def resolve_rate_window(requested: str, scrape_interval: float | None) -> tuple[str, list[str]]:
    """The rate window to use and warnings: "auto" is RATE_WINDOW_SCRAPES x the scrape interval
    (15s when the interval is unknown); an explicit window shorter than that is kept but
    warned about."""
    warnings = []
    if requested == AUTO_RATE_WINDOW:
        if scrape_interval is None:
            return "15s", ["scrape interval unknown (Prometheus targets API): rate window 15s"]
        return format_duration(RATE_WINDOW_SCRAPES * scrape_interval), warnings
    seconds = parse_duration(requested)
    if scrape_interval is not None and seconds < RATE_WINDOW_SCRAPES * scrape_interval:
        warnings.append(f"rate window {requested} is shorter than {RATE_WINDOW_SCRAPES} scrape "
                        f"intervals ({format_duration(scrape_interval)} each): rates may be "
                        f"empty or erratic")
    return requested, warnings


def render_queries(rate_window: str, figures: Figures = STACK_FIGURES) -> dict[str, str]:
    return {name: q.replace("{w}", rate_window) for name, q in system_queries(figures).items()}


def pull_step_window(prometheus_url: str, start: float, end: float,
                     rate_window: str = AUTO_RATE_WINDOW, timeout_seconds: float = 20.0,
                     scrape_interval: float | None = None,
                     figures: Figures = STACK_FIGURES) -> dict[str, Any]:
    """query_range every system query over [start, end]; per-query errors are recorded, not
    raised (a missing exporter must not lose the step). The scrape interval is read from
    Prometheus unless given."""
    if scrape_interval is None:
        scrape_interval = scrape_interval_seconds(prometheus_url, timeout_seconds)
    rate_window, warnings = resolve_rate_window(rate_window, scrape_interval)
    # half a scrape interval resolves every scrape; finer only repeats the same samples
    step_seconds = max(1.0, (scrape_interval or 0.0) / 2, round((end - start) / 250.0, 1))
    out: dict[str, Any] = {"start": start, "end": end, "step_seconds": step_seconds,
                           "rate_window": rate_window, "scrape_interval_seconds": scrape_interval,
                           "warnings": warnings, "queries": {}}
    # a Prometheus that did not answer one query is not asked the rest (each would wait its
    # own timeout: minutes for a step window when it stopped answering)
    unreachable: str | None = None
    for name, query in render_queries(rate_window, figures).items():
        entry: dict[str, Any] = {"query": query}
        if unreachable is not None:
            entry["error"] = f"not asked: {unreachable}"
            out["queries"][name] = entry
            continue
        # a raw counter's value read at t is the last scrape before t: one interval more
        # holds the scrape that saw the window's end
        until = end + (scrape_interval or 0.0) if name in CUMULATIVE_QUERIES else end
        answer, lost = _api_get(prometheus_url, "query_range",
                                {"query": query, "start": f"{start:.3f}", "end": f"{until:.3f}",
                                 "step": f"{step_seconds:g}"}, timeout_seconds)
        entry.update(answer)
        if lost:
            unreachable = f"Prometheus at {prometheus_url} did not answer {name}: {answer['error']}"
        out["queries"][name] = entry
    out["counters"] = pull_counters(prometheus_url, start, end, timeout_seconds, unreachable,
                                    figures)
    return out


def _api_get(prometheus_url: str, endpoint: str, params: Mapping[str, str],
             timeout_seconds: float) -> tuple[dict[str, Any], bool]:
    """({"result": …} or {"error": why}, whether Prometheus did not answer at all) from a
    Prometheus query API; never raises."""
    try:
        return {"result": PrometheusAPI(prometheus_url, timeout_seconds).get(endpoint, params)
                ["result"]}, False
    except PrometheusUnreachable as exc:
        return {"error": str(exc)}, True
    except (PrometheusError, KeyError, TypeError) as exc:
        return {"error": str(exc)}, False


def pull_counters(prometheus_url: str, start: float, end: float,
                  timeout_seconds: float = 20.0,
                  unreachable: str | None = None,
                  figures: Figures = STACK_FIGURES) -> dict[str, Any]:
    """Every raw sample of the `counter_series` scraped in [start, end] (a range vector evaluated
    at `end`; one extra second of range, trimmed by the report, covers rounding). Once
    Prometheus did not answer (`unreachable`: why), the rest is not asked."""
    span_ms = math.ceil(max(0.0, end - start) * 1000) + 1000
    counters: dict[str, Any] = {}
    for name, series in counter_series(figures).items():
        query = f"{series}[{span_ms}ms]"
        entry: dict[str, Any] = {"query": query}
        if unreachable is not None:
            entry["error"] = f"not asked: {unreachable}"
        else:
            answer, lost = _api_get(prometheus_url, "query",
                                    {"query": query, "time": f"{end:.3f}"}, timeout_seconds)
            entry.update(answer)
            if lost:
                unreachable = f"Prometheus at {prometheus_url} did not answer {name}: {answer['error']}"
        counters[name] = entry
    return counters
