"""Past one Prometheus: what an edge Prometheus forwards to a central store, and which rules
run where.

An edge Prometheus scrapes some of the cluster's hosts (all of them when one is enough to
scrape, a share each when not), evaluates the per-host recording rules over them and
`remote_write`s to a central store (a Prometheus started as a remote-write receiver, or
Thanos, Mimir, VictoriaMetrics: the same protocol). The dashboards, the alerts and
`cephscope report` read the central store.

- Forwarded: the recorded series (every name with a colon, Prometheus' `level:metric:ops`
  convention) and the raw series a dashboard panel, the report or a central rule reads; nothing
  else leaves the edge (unused perf counters, the op size histograms, most of node_exporter).
  tests/unit/test_forwarding.py holds the list to the dashboards', the report's and the rules'
  queries, so a new panel cannot silently read a series that stays behind.
- Rules: a recording rule that aggregates within one OSD, device or host (the per-OSD op
  rates and latency quantiles, op queue wait, OSD devices and NICs joined to node_exporter)
  is evaluated on the edge, where its inputs are. A rule over the whole cluster (the per-step
  figures, `cephscope_step:*`) and every alert are evaluated by the central store: with several
  edges no one edge sees the whole cluster, and an alert fires once, not once per edge.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

EDGE, CENTRAL = "edge", "central"
# Cluster-wide recorded series (dashboards/rule_names.py STEP_*): the central store's rules.
CLUSTER_WIDE_RECORDING_PREFIX = "cephscope_step:"

# Raw series read by a dashboard panel, the report or a central rule; the rest stays on the edge.
FORWARDED_SERIES: tuple[str, ...] = (
    "up",
    # node_exporter: host CPU, and the disk and NIC counters of the report's tables
    "node_cpu_seconds_total",
    "node_disk_(io_time_seconds|read_bytes|read_time_seconds|reads_completed|write_time_seconds"
    "|writes_completed|written_bytes)_total",
    "node_network_(receive|transmit)_bytes_total",
    # ceph-exporter-compatible perf counters the panels and the report read
    "ceph_osd_op(_r|_w|_rw)?",
    "ceph_osd_op(_r|_w|_rw)?_latency_(sum|count)",
    "ceph_bluefs_bytes_written_(sst|wal)",
    "ceph_bluestore_(commit_lat|txc_commit_lat|kv_flush_lat|kv_sync_lat|state_aio_wait_lat)_(sum|count)",
    "ceph_bluestore_onode_(hits|misses)",
    # CephFS (MDS) and RGW panels and per-step figures (a handful of daemons, not per OSD)
    "ceph_mds_(caps|inodes|inodes_with_caps|log_evadd|server_handle_client_request"
    "|sessions_session_count)",
    "ceph_mds_reply_latency_(sum|count)",
    "ceph_rgw_(req|failed_req|get|get_b|put|put_b|qlen|qactive)",
    "ceph_rgw_(get|put)_initial_lat_(sum|count)",
    "ceph_rgw_op_(get|put)_obj_(ops|bytes|lat_sum|lat_count)",
    "cephscope_rgw_instance_info",
    # the exporter's own: health, topology, histograms (classic series or native), queues, CPU
    "cephscope_daemon_up",
    "cephscope_scrape_collector_success",
    "cephscope_osd_(device|network)_info",
    "cephscope_osd_op_(latency|phase_duration)_seconds(_bucket|_sum|_count)?",
    "cephscope_osd_op_queue_items",
    "cephscope_osd_op_shards",
    "cephscope_osd_ops_(blocked|in_flight)",
    "cephscope_osd_thread_cpu_seconds_total",
    # the runner: steps, run phases, client figures, baselines
    "cephscope_(step|run|client)_.+",
)
RECORDED_SERIES = "[a-zA-Z_][a-zA-Z0-9_]*:[a-zA-Z0-9_:]*"
# Remote write protobuf messages (https://prometheus.io/docs/specs/prw/remote_write_spec_2_0/).
REMOTE_WRITE_1 = "prometheus.WriteRequest"
REMOTE_WRITE_2 = "io.prometheus.write.v2.Request"


def forwarded_name_regex() -> str:
    """The metric names an edge forwards (anchored by Prometheus' relabelling)."""
    return "|".join(f"({name})" for name in (*FORWARDED_SERIES, RECORDED_SERIES))


def is_forwarded(name: str) -> bool:
    return re.fullmatch(forwarded_name_regex(), name) is not None


def remote_write_config(url: str, native_histograms: bool) -> dict[str, Any]:
    """One `remote_write` entry of an edge Prometheus: the forwarded series only."""
    entry: dict[str, Any] = {
        "url": url,
        "write_relabel_configs": [{"source_labels": ["__name__"], "regex": forwarded_name_regex(),
                                   "action": "keep"}],
    }
    if native_histograms:
        # off by default: native histograms would be dropped on the way; and remote write
        # 1.0 has no field for custom bucket bounds (a receiver refuses the whole batch), 2.0
        # has: its message carries native histograms with custom buckets
        entry["send_native_histograms"] = True
        entry["protobuf_message"] = REMOTE_WRITE_2
    return entry


def rule_role(rule: Mapping[str, Any]) -> str:
    """Where a rule runs: EDGE (recording rules within an OSD, device or host) or CENTRAL
    (cluster-wide recordings and every alert)."""
    if "alert" in rule or str(rule.get("record", "")).startswith(CLUSTER_WIDE_RECORDING_PREFIX):
        return CENTRAL
    return EDGE


def rules_for(role: str, rule_file: Mapping[str, Any]) -> dict[str, Any]:
    """The groups of a rule file with only the rules `role` evaluates (empty groups dropped;
    order kept, so a group still evaluates its rules in the order they were written)."""
    if role not in (EDGE, CENTRAL):
        raise ValueError(f"rule role {role!r}: {EDGE} or {CENTRAL}")
    groups = []
    for group in rule_file.get("groups") or []:
        kept = [r for r in group.get("rules") or [] if rule_role(r) == role]
        if kept:
            groups.append({**group, "rules": kept})
    return {"groups": groups}
