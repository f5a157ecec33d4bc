"""System metrics of a step window, pulled from Prometheus (query_range) into the step dir.

The list of queries lives here and only here. `{w}` is the rate window: by default 4 x the
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

import requests

# rate() window = this many scrape intervals (by default).
RATE_WINDOW_SCRAPES = 4
# Mode windows shorter than this many scrape intervals get a warning in the report.
MIN_WINDOW_SCRAPES = 2
AUTO_RATE_WINDOW = "auto"

SYSTEM_QUERIES: Mapping[str, str] = {
    # CPU busy fraction per host (all CPUs together, 0..1)
    "cpu_busy_ratio": 'sum by (instance, host) (rate(node_cpu_seconds_total{{mode!="idle"}}[{w}]))'
                      ' / on(instance, host) count by (instance, host)'
                      ' (node_cpu_seconds_total{{mode="idle"}})',
    # per host and CPU mode (user, system, iowait, ...), fraction of all the host's CPUs
    "cpu_mode_ratio": 'sum by (instance, host, mode)'
                      ' (rate(node_cpu_seconds_total{{mode!="idle"}}[{w}]))'
                      ' / on(instance, host) group_left count by (instance, host)'
                      ' (node_cpu_seconds_total{{mode="idle"}})',
    # per core: busy fraction of one CPU (iowait is waiting, not work: left out)
    "cpu_core_busy_ratio": 'sum by (instance, host, cpu) '
                           '(rate(node_cpu_seconds_total{{mode!~"idle|iowait"}}[{w}]))',
    # disks: utilisation, IOPS, bandwidth, average await
    "disk_util_ratio": "rate(node_disk_io_time_seconds_total[{w}])",
    "disk_read_iops": "rate(node_disk_reads_completed_total[{w}])",
    "disk_write_iops": "rate(node_disk_writes_completed_total[{w}])",
    "disk_read_bytes_per_second": "rate(node_disk_read_bytes_total[{w}])",
    "disk_write_bytes_per_second": "rate(node_disk_written_bytes_total[{w}])",
    "disk_await_seconds": "(rate(node_disk_read_time_seconds_total[{w}])"
                          " + rate(node_disk_write_time_seconds_total[{w}]))"
                          " / (rate(node_disk_reads_completed_total[{w}])"
                          " + rate(node_disk_writes_completed_total[{w}]))",
    # NICs
    "nic_receive_bytes_per_second": "rate(node_network_receive_bytes_total[{w}])",
    "nic_transmit_bytes_per_second": "rate(node_network_transmit_bytes_total[{w}])",
    # OSD side: op rate and average latency per OSD
    "osd_ops_per_second": "rate(ceph_osd_op[{w}])",
    "osd_op_latency_seconds": "rate(ceph_osd_op_latency_sum[{w}])"
                              " / rate(ceph_osd_op_latency_count[{w}])",
    "osd_op_r_latency_seconds": "rate(ceph_osd_op_r_latency_sum[{w}])"
                                " / rate(ceph_osd_op_r_latency_count[{w}])",
    "osd_op_w_latency_seconds": "rate(ceph_osd_op_w_latency_sum[{w}])"
                                " / rate(ceph_osd_op_w_latency_count[{w}])",
    # OSD thread groups (tp_osd_tp, msgr-worker, bstore_kv_sync, ...): CPU seconds per second
    "osd_thread_cpu_seconds_per_second": "sum by (instance, host, ceph_daemon, thread_group)"
                                         " (rate(cephscope_osd_thread_cpu_seconds_total[{w}]))",
    # raw cumulative OSD latency histogram buckets: the report takes deltas per mode window
    "osd_op_latency_bucket": "sum by (instance, host, ceph_daemon, op, le)"
                             " (cephscope_osd_op_latency_seconds_bucket)",
    # topology: which disks and NICs are the OSDs' own
    "osd_device_info": "cephscope_osd_device_info",
    "osd_network_info": "cephscope_osd_network_info",
}

# queries of raw cumulative counters (deltas taken by the report, not rate()s)
CUMULATIVE_QUERIES = frozenset({"osd_op_latency_bucket"})

# Raw counters whose scrapes inside a step's window give its system figures (see
# `window_rates`): pulled as range vectors, so every sample keeps its real scrape timestamp.
COUNTER_SERIES: Mapping[str, str] = {
    "cpu_seconds": "node_cpu_seconds_total",
    "disk_io_time_seconds": "node_disk_io_time_seconds_total",
    "disk_reads": "node_disk_reads_completed_total",
    "disk_writes": "node_disk_writes_completed_total",
    "disk_read_bytes": "node_disk_read_bytes_total",
    "disk_written_bytes": "node_disk_written_bytes_total",
    "disk_read_time_seconds": "node_disk_read_time_seconds_total",
    "disk_write_time_seconds": "node_disk_write_time_seconds_total",
    "nic_receive_bytes": "node_network_receive_bytes_total",
    "nic_transmit_bytes": "node_network_transmit_bytes_total",
    "osd_op": "ceph_osd_op",
    "osd_op_latency_sum": "ceph_osd_op_latency_sum",
    "osd_op_latency_count": "ceph_osd_op_latency_count",
    "osd_thread_cpu_seconds": "cephscope_osd_thread_cpu_seconds_total",
}

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
        body = requests.get(f"{prometheus_url.rstrip('/')}/api/v1/targets",
                            params={"state": "active"}, timeout=timeout_seconds).json()
        targets = body["data"]["activeTargets"]
        intervals = [parse_duration(t["scrapeInterval"]) for t in targets if t.get("scrapeInterval")]
    except (requests.RequestException, ValueError, KeyError, TypeError):
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


def render_queries(rate_window: str) -> dict[str, str]:
    return {name: q.format(w=rate_window) for name, q in SYSTEM_QUERIES.items()}


def pull_step_window(prometheus_url: str, start: float, end: float,
                     rate_window: str = AUTO_RATE_WINDOW, timeout_seconds: float = 20.0,
                     scrape_interval: float | None = None) -> dict[str, Any]:
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
    for name, query in render_queries(rate_window).items():
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
    out["counters"] = pull_counters(prometheus_url, start, end, timeout_seconds, unreachable)
    return out


def _api_get(prometheus_url: str, endpoint: str, params: Mapping[str, str],
             timeout_seconds: float) -> tuple[dict[str, Any], bool]:
    """({"result": …} or {"error": why}, whether Prometheus did not answer at all) from a
    Prometheus query API; never raises."""
    try:
        resp = requests.get(f"{prometheus_url.rstrip('/')}/api/v1/{endpoint}", params=params,
                            timeout=timeout_seconds)
        body = resp.json()
        if body.get("status") == "success":
            return {"result": body["data"]["result"]}, False
        return {"error": body.get("error", f"HTTP {resp.status_code}")}, False
    except (requests.ConnectionError, requests.Timeout) as exc:
        return {"error": str(exc)}, True
    except (requests.RequestException, ValueError, KeyError) as exc:
        return {"error": str(exc)}, False


def pull_counters(prometheus_url: str, start: float, end: float,
                  timeout_seconds: float = 20.0,
                  unreachable: str | None = None) -> dict[str, Any]:
    """Every raw sample of the COUNTER_SERIES scraped in [start, end] (a range vector evaluated
    at `end`; one extra second of range, trimmed by the report, covers rounding). Once
    Prometheus did not answer (`unreachable`: why), the rest is not asked."""
    span_ms = math.ceil(max(0.0, end - start) * 1000) + 1000
    counters: dict[str, Any] = {}
    for name, selector in COUNTER_SERIES.items():
        query = f"{selector}[{span_ms}ms]"
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
