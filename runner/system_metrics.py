"""System metrics of a step window, pulled from Prometheus (query_range) into the step dir.

The list of queries lives here and only here. `{w}` is the rate window (a few scrape
intervals). Names follow node_exporter and Ceph's own exporter names (`ceph_osd_op*`), which
cephscope's exporter keeps unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import requests

SYSTEM_QUERIES: Mapping[str, str] = {
    # CPU busy fraction per host (all CPUs together, 0..1)
    "cpu_busy_ratio": 'sum by (instance) (rate(node_cpu_seconds_total{{mode!="idle"}}[{w}]))'
                      ' / on(instance) count by (instance) (node_cpu_seconds_total{{mode="idle"}})',
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
}


def render_queries(rate_window: str) -> dict[str, str]:
    return {name: q.format(w=rate_window) for name, q in SYSTEM_QUERIES.items()}


def pull_step_window(prometheus_url: str, start: float, end: float, rate_window: str = "15s",
                     timeout_seconds: float = 20.0) -> dict[str, Any]:
    """query_range every system query over [start, end]; per-query errors are recorded, not
    raised (a missing exporter must not lose the step)."""
    step_seconds = max(1.0, round((end - start) / 250.0, 1))
    out: dict[str, Any] = {"start": start, "end": end, "step_seconds": step_seconds,
                           "rate_window": rate_window, "queries": {}}
    for name, query in render_queries(rate_window).items():
        entry: dict[str, Any] = {"query": query}
        try:
            resp = requests.get(f"{prometheus_url.rstrip('/')}/api/v1/query_range",
                                params={"query": query, "start": f"{start:.3f}",
                                        "end": f"{end:.3f}", "step": f"{step_seconds:g}"},
                                timeout=timeout_seconds)
            body = resp.json()
            if body.get("status") == "success":
                entry["result"] = body["data"]["result"]
            else:
                entry["error"] = body.get("error", f"HTTP {resp.status_code}")
        except (requests.RequestException, ValueError, KeyError) as exc:
            entry["error"] = str(exc)
        out["queries"][name] = entry
    return out
