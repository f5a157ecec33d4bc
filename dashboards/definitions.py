"""The four cephscope dashboards, as typed builders.

Metric names: ceph-exporter's perf-counter names (`ceph_osd_op_w_latency_sum`, ...), the
exporter's own `cephscope_*` series, node_exporter, the runner's step series, and the
recording rules in alerts/ (per-step aggregates here, per-OSD device/NIC by the topology rules).
Sweep parameters are only on `cephscope_step_info`: panels join it with
`* on(run, step) group_left()` (or through the per-step recording rules that do the join).
"""

from __future__ import annotations

from typing import Any

from grafana_foundation_sdk.builders import dashboard as gdash

from cephscope import figures as fig
from cephscope.dashboards import rule_names as names
from cephscope.dashboards.common import (
    MDS_SEL,
    OSD_SEL,
    RGW_SEL,
    RUN_SEL,
    SCHEMA_TAG,
    Query,
    dashboard_links,
    datasource_variable,
    exporter_variables,
    finish,
    heatmap,
    query_variable,
    run_variable,
    sel,
    service_variables,
    state_timeline,
    step_annotations,
    table,
    timeseries,
)
from cephscope.dashboards.config import MixinConfig
from cephscope.figures import (
    DASHBOARD_RATE_WINDOW,
    OSD_OP_LATENCY_HISTOGRAM,
    OSD_OP_PHASE_HISTOGRAM,
    Figures,
    histogram_buckets,
    histogram_quantile,
    histogram_rate,
    histogram_selector,
)

# Stable dashboard uids: links and bookmarks survive rebuilds.
UID_SWEEP_OVERVIEW = "cephscope-sweep-overview"
UID_OSD_INTERNALS = "cephscope-osd-internals"
UID_DEVICES_NETWORK = "cephscope-devices-network"
UID_SWEEP_COMPARISON = "cephscope-sweep-comparison"

OP_TYPES = ("r", "w", "rw")
OP_SEL = 'op=~"$op"'


def _base(title: str, uid: str, description: str, topics: list[str]) -> gdash.Dashboard:
    return (
        gdash.Dashboard(title)
        .uid(uid)
        .description(description)
        .tags([SCHEMA_TAG, "ceph", "performance", *topics])
        .links(dashboard_links())
        .editable()
        .refresh("10s")
        .time("now-30m", "now")
        .timezone("utc")
    )


def _figures(cfg: MixinConfig) -> Figures:
    """The shared figures as panels query them: node_exporter by the config's job, OSDs by
    the dashboard's $job / $instance / $ceph_daemon variables, window $__rate_interval."""
    return Figures((cfg.node_job_selector,), (OSD_SEL,), DASHBOARD_RATE_WINDOW)


def _host_variable(cfg: MixinConfig) -> Any:
    return query_variable(
        "host", "Host (node_exporter)",
        f"label_values(node_cpu_seconds_total{sel(cfg.node_job_selector)}, instance)",
    )


def _per_host_rows(dashboard: gdash.Dashboard, cfg: MixinConfig) -> gdash.Dashboard:
    """One row per host ($host repeats it): CPU by mode and busy % per core."""
    figures, host = _figures(cfg), 'instance=~"$host"'
    return (
        dashboard.with_row(gdash.Row("Host $host").repeat("host"))
        .with_panel(
            timeseries(
                "CPU by mode on $host",
                [
                    Query(figures.cpu_mode_ratio(("instance",), host), "{{instance}} {{mode}}")
                ],
                "percentunit",
                "Fraction of all the host's cores by CPU mode (user, system, iowait, ...).",
                stack=True,
            )
        )
        .with_panel(
            timeseries(
                "Busy per CPU core on $host",
                [
                    Query(figures.cpu_busy_cores(("instance", "cpu"), host),
                          "{{instance}} cpu{{cpu}}")
                ],
                "percentunit",
                "Each core's busy fraction (iowait and steal count as idle): one saturated core while "
                "the host is not busy points at a single thread.",
            )
        )
        .with_panel(
            timeseries(
                "Cores busy on $host",
                [
                    Query(figures.cpu_busy_cores(("instance",), host), "{{instance}} busy"),
                    Query(figures.cpu_count(("instance",), host), "{{instance}} cores"),
                ],
                "short",
                "How many of the host's cores were busy, against how many it has.",
                width=24,
                height=6,
            )
        )
    )


def _osd_op_rate(by: str) -> list[Query]:
    return [
        Query(
            f"sum by ({by}) (rate(ceph_osd_op_{op}{sel(OSD_SEL)}[$__rate_interval]))",
            f"{{{{{by}}}}} op_{op}" if by else f"op_{op}",
        )
        for op in OP_TYPES
    ]


def _osd_quantile(quantile: float, by: str) -> Query:
    return Query(
        Figures(exporter=(OSD_SEL,), window=DASHBOARD_RATE_WINDOW).osd_op_latency_quantile(
            quantile, by.split(", ")),
        f"p{round(quantile * 100)} {{{{{by.split(', ')[-1]}}}}}",
    )


def _cephfs_rgw_rows(dashboard: gdash.Dashboard, cfg: MixinConfig) -> gdash.Dashboard:
    """CephFS (the MDSs of $mds) and RGW (the gateways of $rgw): requests, latency and what
    they hold, from the exporter's ceph-exporter-named counters."""
    mds = Figures((cfg.node_job_selector,), (MDS_SEL,), DASHBOARD_RATE_WINDOW)
    rgw = Figures((cfg.node_job_selector,), (RGW_SEL,), DASHBOARD_RATE_WINDOW)
    by_mds, by_gateway = ("ceph_daemon",), ("instance_id",)
    return (
        dashboard.with_row(gdash.Row("CephFS (MDS)"))
        .with_panel(
            timeseries(
                "MDS client requests",
                [
                    Query(mds.mds_request_rate(by_mds), "received {{ceph_daemon}}"),
                    Query(f"sum by (ceph_daemon) ({mds.exporter_rate(fig.MDS_REPLY_LATENCY + '_count')})",
                          "replied {{ceph_daemon}}"),
                ],
                "reqps",
                "Client requests per second each MDS received (mds_server "
                "handle_client_request) and answered (mds reply_latency count).",
                width=6,
            )
        )
        .with_panel(
            timeseries(
                "MDS reply latency",
                [Query(mds.mds_reply_latency_seconds(by_mds), "{{ceph_daemon}}")],
                "s",
                "Average time from a client request's arrival to the MDS's reply (mds "
                "reply_latency _sum / _count); the CephFS latency alert's figure.",
                width=6,
            )
        )
        .with_panel(
            timeseries(
                "MDS caps and inodes",
                [
                    Query(f"ceph_mds_caps{sel(MDS_SEL)}", "caps {{ceph_daemon}}"),
                    Query(f"ceph_mds_inodes{sel(MDS_SEL)}", "inodes {{ceph_daemon}}"),
                    Query(f"ceph_mds_inodes_with_caps{sel(MDS_SEL)}",
                          "inodes with caps {{ceph_daemon}}"),
                ],
                "short",
                "Capabilities the MDS has handed to clients, and inodes in its cache.",
                width=6,
            )
        )
        .with_panel(
            timeseries(
                "MDS sessions and journal",
                [
                    Query(f"ceph_mds_sessions_session_count{sel(MDS_SEL)}",
                          "client sessions {{ceph_daemon}}"),
                    Query(f"sum by (ceph_daemon) (rate(ceph_mds_log_evadd{sel(MDS_SEL)}"
                          "[$__rate_interval]))", "journal events/s {{ceph_daemon}}"),
                ],
                "short",
                "Client sessions open on each MDS, and events it adds to its journal per "
                "second (metadata updates: creates, renames, unlinks, ...).",
                width=6,
            )
        )
        .with_row(gdash.Row("RGW (gateways)"))
        .with_panel(
            timeseries(
                "Gateway requests",
                [
                    Query(f"sum by (instance_id) (rate({fig.RGW_REQUESTS}{sel(RGW_SEL)}"
                          "[$__rate_interval]))", "requests {{instance_id}}"),
                    Query(f"sum by (instance_id) (rate({fig.RGW_FAILED_REQUESTS}{sel(RGW_SEL)}"
                          "[$__rate_interval]))", "failed {{instance_id}}"),
                ],
                "reqps",
                "Requests per second each gateway handled (S3, Swift and admin alike), and "
                "those that failed (an error answer: denied, missing bucket or key, ...).",
                width=8,
            )
        )
        .with_panel(
            timeseries(
                "GET / PUT rate",
                [Query(rgw.rgw_op_rate(op, by_gateway), f"{op.upper()} {{{{instance_id}}}}")
                 for op in fig.RGW_OPERATIONS],
                "ops",
                "Object GETs and PUTs per second (rgw get/put up to Reef; rgw_op "
                "get_obj_ops/put_obj_ops on Tentacle).",
                width=8,
            )
        )
        .with_panel(
            timeseries(
                "GET / PUT bandwidth",
                [Query(rgw.rgw_bytes_rate(op, by_gateway), f"{op.upper()} {{{{instance_id}}}}")
                 for op in fig.RGW_OPERATIONS],
                "Bps",
                "Object bytes sent by GETs and received by PUTs per second.",
                width=8,
            )
        )
        .with_panel(
            timeseries(
                "GET / PUT latency",
                [Query(rgw.rgw_latency_seconds(op, by_gateway), f"{op.upper()} {{{{instance_id}}}}")
                 for op in fig.RGW_OPERATIONS],
                "s",
                "Average latency to the first byte (get/put_initial_lat, up to Reef) or of the "
                "whole operation (rgw_op get/put_obj_lat, Tentacle); the RGW latency alert's "
                "figure. Gateways time requests with a coarse clock (4 ms ticks here).",
                width=12,
            )
        )
        .with_panel(
            timeseries(
                "Gateway queue",
                [
                    Query(f"ceph_rgw_qlen{sel(RGW_SEL)}", "queued {{instance_id}}"),
                    Query(f"ceph_rgw_qactive{sel(RGW_SEL)}", "active {{instance_id}}"),
                ],
                "short",
                "Requests waiting in the gateway's queue and requests being served at the "
                "snapshot: active near rgw_thread_pool_size (or the beast frontend's limit) "
                "with a growing queue means the gateway, not RADOS, is the bottleneck.",
                width=12,
            )
        )
    )


def sweep_overview(cfg: MixinConfig) -> dict[str, Any]:
    client = sel(RUN_SEL)
    figures = _figures(cfg)
    dashboard = _base(
        "cephscope / Sweep overview",
        UID_SWEEP_OVERVIEW,
        "Sweep steps overlaid on client and OSD performance and CPU.",
        ["sweep"],
    )
    for variable in [*exporter_variables(cfg), *service_variables(), run_variable(),
                     _host_variable(cfg)]:
        dashboard = dashboard.with_variable(variable)
    for annotation in step_annotations(cfg):
        dashboard = dashboard.annotation(annotation)
    dashboard = (
        dashboard.with_row(gdash.Row("Steps"))
        .with_panel(
            table(
                "Active step parameters",
                [Query(f"cephscope_step_info{client}")],
                "The step running at the end of the time range, with every sweep axis.",
                height=5,
            )
        )
        .with_panel(
            table(
                "Steps in time range",
                [Query(f"max_over_time(cephscope_step_info{client}[$__range])")],
                "Every step that ran in the time range, with its parameters.",
                height=7,
            )
        )
        .with_panel(
            state_timeline(
                "Run phases",
                [Query(f"max by (run, phase, step) (cephscope_run_phase{client})",
                       "{{phase}} {{step}}")],
                "What the runner did outside the measurements: the idle baseline at run start, "
                "per step the scrub wait, health gate, cache drop and prepare (prefill), and "
                "a recovery test's phases (healthy, degraded, recovering, backfilling, "
                "recovered).",
            )
        )
        .with_row(gdash.Row("Client (benchmark tool)"))
        .with_panel(
            timeseries(
                "Client IOPS",
                [
                    Query(
                        f"sum by (run, step, mode) (cephscope_client_ops_per_second{client})",
                        "{{mode}} step {{step}}",
                    )
                ],
                "iops",
                "Per-second operations reported live by the benchmark tool.",
            )
        )
        .with_panel(
            timeseries(
                "Client latency",
                [
                    Query(
                        f"max by (run, step, mode) (cephscope_client_latency_seconds{client})",
                        "{{mode}} step {{step}}",
                    ),
                    Query(
                        "cephscope_step_baseline_latency_seconds" + sel(RUN_SEL, 'stat="avg"'),
                        "baseline avg {{mode}} step {{step}}",
                    ),
                ],
                "s",
                "Live client latency; the baseline run's average for the same step id when the "
                "sweep runs with --baseline.",
            )
        )
        .with_row(gdash.Row("OSD"))
        .with_panel(
            timeseries(
                "OSD op rate (all OSDs)",
                _osd_op_rate(""),
                "ops",
                "Client ops seen by the OSDs (ceph_osd_op_r/_w/_rw), summed.",
                width=8,
            )
        )
        .with_panel(
            timeseries(
                "OSD op latency p50 / p99 (all OSDs)",
                [_osd_quantile(0.5, "op"), _osd_quantile(0.99, "op")],
                "s",
                "From the exporter's latency histograms (perf histogram dump), by op type.",
                width=8,
            )
        )
        .with_panel(
            timeseries(
                "OSD op latency avg (all OSDs)",
                [
                    Query(figures.osd_op_latency_seconds(), "avg all ops"),
                    *(Query(figures.osd_op_latency_seconds(op=op), f"avg op_{op}")
                      for op in OP_TYPES),
                ],
                "s",
                "Average from the perf counters' _sum/_count pairs: all ops (the report's OSD "
                "op latency), and by op type.",
                width=8,
            )
        )
    )
    dashboard = (
        _cephfs_rgw_rows(dashboard, cfg)
        .with_row(gdash.Row("CPU"))
        .with_panel(
            timeseries(
                "Host CPU busy",
                [
                    Query(figures.cpu_busy_ratio(("instance",)), "{{instance}}")
                ],
                "percentunit",
                "node_exporter: fraction of all cores busy (iowait and steal count as idle, "
                "as in node-mixin and the report).",
            )
        )
        .with_panel(
            timeseries(
                "OSD CPU by thread group",
                [
                    Query(figures.osd_thread_cpu_cores(("ceph_daemon", "thread_group")),
                          "{{ceph_daemon}} {{thread_group}}")
                ],
                "percentunit",
                "Per-thread CPU of the OSD processes (cores), grouped by thread name "
                "(tp_osd_tp, msgr-worker, bstore_kv_sync, ...).",
            )
        )
    )
    return finish(_per_host_rows(dashboard, cfg))


def osd_internals(cfg: MixinConfig) -> dict[str, Any]:
    dashboard = _base(
        "cephscope / OSD internals",
        UID_OSD_INTERNALS,
        "Per-OSD latency, op queue, in-flight ops, historic-op phases, BlueStore and RocksDB.",
        ["osd"],
    )
    op_variable = query_variable(
        "op", "OSD op (latency heatmap)",
        f"label_values({histogram_selector(OSD_OP_LATENCY_HISTOGRAM)}, op)", multi=False,
        include_all=False,
    )
    for variable in [*exporter_variables(cfg), run_variable(), op_variable]:
        dashboard = dashboard.with_variable(variable)
    for annotation in step_annotations(cfg):
        dashboard = dashboard.annotation(annotation)

    def op_latency_avg() -> str:
        return _figures(cfg).osd_op_latency_seconds(("ceph_daemon",))

    def avg_latency(counter: str) -> str:
        return (
            f"sum by (ceph_daemon) (rate({counter}_sum{sel(OSD_SEL)}[$__rate_interval])) / "
            f"sum by (ceph_daemon) (rate({counter}_count{sel(OSD_SEL)}[$__rate_interval]))"
        )

    dashboard = (
        dashboard.with_row(gdash.Row("Latency heatmaps (OSD side)"))
        .with_panel(
            heatmap(
                "OSD op latency $ceph_daemon op $op",
                Query(
                    histogram_buckets(OSD_OP_LATENCY_HISTOGRAM, (), DASHBOARD_RATE_WINDOW,
                                      OSD_SEL, OP_SEL, function="increase")
                ),
                "s",
                "Ops per latency bucket (the OSD's own histogram, 100 us x 2^k edges) per "
                "interval; one panel per OSD ($ceph_daemon repeats it), op kind from $op.",
                width=12,
                repeat="ceph_daemon",
            )
        )
        .with_row(gdash.Row("OSD CPU split"))
        .with_panel(
            timeseries(
                "OSD CPU by thread group (all selected OSDs, stacked)",
                [
                    Query(_figures(cfg).osd_thread_cpu_cores(("thread_group",)), "{{thread_group}}")
                ],
                "short",
                "CPU cores used by each OSD thread group: what shard/thread tuning moves "
                "(tp_osd_tp op workers vs msgr-worker vs bstore_kv_sync).",
                width=24,
                stack=True,
            )
        )
        .with_row(gdash.Row("Latency per OSD"))
        .with_panel(
            timeseries(
                "Op latency avg per OSD",
                [Query(op_latency_avg(), "{{ceph_daemon}}")],
                "s",
                "ceph_osd_op_latency: client op latency including queue time.",
                width=8,
            )
        )
        .with_panel(
            timeseries(
                "Op latency p50 per OSD",
                [Query(f"{names.OSD_OP_LATENCY_P50}{sel(OSD_SEL)}", "p50 {{ceph_daemon}}")],
                "s",
                "From the exporter's latency histograms, all op types, over the recording "
                "rules' window: one recorded series per OSD, where a quantile over every "
                "OSD's buckets took 2 s at 1,000 OSDs (docs/scale.md).",
                width=8,
            )
        )
        .with_panel(
            timeseries(
                "Op latency p99 per OSD",
                [Query(f"{names.OSD_OP_LATENCY_P99}{sel(OSD_SEL)}", "p99 {{ceph_daemon}}")],
                "s",
                "From the exporter's latency histograms, all op types, over the recording "
                "rules' window: one recorded series per OSD, where a quantile over every "
                "OSD's buckets took 2 s at 1,000 OSDs (docs/scale.md).",
                width=8,
            )
        )
        .with_row(gdash.Row("Op queue"))
        .with_panel(
            timeseries(
                "Queue wait per OSD",
                [
                    Query(
                        f"{names.OSD_OP_QUEUE_WAIT}{sel(OSD_SEL)}",
                        "{{ceph_daemon}} op_{{op}}",
                    )
                ],
                "s",
                "Average time an op waited before a tp_osd_tp worker dequeued it: op latency "
                "(from receive) minus op process latency (from dequeue), per op type "
                "(recording rule in alerts/opqueue.rules.yml).",
                width=8,
            )
        )
        .with_panel(
            timeseries(
                "Queued items per shard",
                [
                    Query(
                        f"sum by (ceph_daemon, shard) (cephscope_osd_op_queue_items{sel(OSD_SEL)})",
                        "{{ceph_daemon}} shard {{shard}}",
                    ),
                    Query(f"cephscope_osd_op_shards{sel(OSD_SEL)}", "shards {{ceph_daemon}}"),
                ],
                "short",
                "Items in each ShardedOpWQ shard at the snapshot (dump_op_pq_state), and the "
                "number of shards.",
                width=8,
            )
        )
        .with_panel(
            timeseries(
                "Ops in flight / blocked",
                [
                    Query(f"cephscope_osd_ops_in_flight{sel(OSD_SEL)}", "in flight {{ceph_daemon}}"),
                    Query(f"cephscope_osd_ops_blocked{sel(OSD_SEL)}", "blocked {{ceph_daemon}}"),
                ],
                "short",
                "dump_ops_in_flight; blocked = older than osd_op_complaint_time.",
                width=8,
            )
        )
        .with_row(gdash.Row("Historic ops"))
        .with_panel(
            timeseries(
                "Historic-op phase durations (avg)",
                [
                    Query(
                        histogram_rate(OSD_OP_PHASE_HISTOGRAM, "sum", ("phase",),
                                       DASHBOARD_RATE_WINDOW, OSD_SEL)
                        + " / "
                        + histogram_rate(OSD_OP_PHASE_HISTOGRAM, "count", ("phase",),
                                         DASHBOARD_RATE_WINDOW, OSD_SEL),
                        "{{phase}}",
                    )
                ],
                "s",
                "Average time between events of the ops in dump_historic_ops: queue "
                "(queued_for_pg -> reached_pg) and total by default; receive, pg, execute and "
                "reply with the exporter's --collector.ops.phases=all.",
            )
        )
        .with_panel(
            timeseries(
                "Historic-op phase durations (p99)",
                [
                    Query(
                        histogram_quantile(0.99, OSD_OP_PHASE_HISTOGRAM, ("phase",),
                                           DASHBOARD_RATE_WINDOW, OSD_SEL),
                        "{{phase}}",
                    )
                ],
                "s",
                "p99 of each phase of the historic ops.",
            )
        )
        .with_row(gdash.Row("BlueStore / RocksDB"))
        .with_panel(
            timeseries(
                "BlueStore commit and kv latency",
                [
                    # Pacific's commit_lat became txc_commit_lat in Reef
                    Query(f'{avg_latency("ceph_bluestore_commit_lat")} or '
                          f'{avg_latency("ceph_bluestore_txc_commit_lat")}',
                          "commit {{ceph_daemon}}"),
                    Query(avg_latency("ceph_bluestore_kv_sync_lat"), "kv_sync {{ceph_daemon}}"),
                    Query(avg_latency("ceph_bluestore_kv_flush_lat"), "kv_flush {{ceph_daemon}}"),
                    Query(
                        avg_latency("ceph_bluestore_state_aio_wait_lat"), "aio_wait {{ceph_daemon}}"
                    ),
                ],
                "s",
                "BlueStore transaction commit, RocksDB (kv) sync and flush, and data aio wait "
                "latency.",
            )
        )
        .with_panel(
            timeseries(
                "RocksDB (BlueFS) writes",
                [
                    Query(
                        "sum by (ceph_daemon) (rate(ceph_bluefs_bytes_written_wal"
                        f"{sel(OSD_SEL)}[$__rate_interval]))",
                        "WAL {{ceph_daemon}}",
                    ),
                    Query(
                        "sum by (ceph_daemon) (rate(ceph_bluefs_bytes_written_sst"
                        f"{sel(OSD_SEL)}[$__rate_interval]))",
                        "SST {{ceph_daemon}}",
                    ),
                ],
                "Bps",
                "RocksDB's WAL and SST writes through BlueFS (Ceph's rocksdb counters have "
                "priority 0 and are not exported by default; BlueFS' are).",
                width=8,
            )
        )
        .with_panel(
            timeseries(
                "BlueStore onode cache hit ratio",
                [
                    Query(
                        "sum by (ceph_daemon) (rate(ceph_bluestore_onode_hits"
                        f"{sel(OSD_SEL)}[$__rate_interval])) / (sum by (ceph_daemon) "
                        f"(rate(ceph_bluestore_onode_hits{sel(OSD_SEL)}[$__rate_interval])) + "
                        "sum by (ceph_daemon) (rate(ceph_bluestore_onode_misses"
                        f"{sel(OSD_SEL)}[$__rate_interval])))",
                        "{{ceph_daemon}}",
                    )
                ],
                "percentunit",
                "Share of onode lookups served from BlueStore's cache.",
                width=4,
            )
        )
    )
    return finish(dashboard)


def devices_network(cfg: MixinConfig) -> dict[str, Any]:
    """Per-OSD device and NIC figures from the topology recording rules (#4)."""
    dashboard = _base(
        "cephscope / Devices & network",
        UID_DEVICES_NETWORK,
        "Per-OSD data device await, utilisation, queue, IOPS and NIC bandwidth.",
        ["devices", "network"],
    )
    for variable in [*exporter_variables(cfg), run_variable()]:
        dashboard = dashboard.with_variable(variable)
    for annotation in step_annotations(cfg):
        dashboard = dashboard.annotation(annotation)
    osd = sel('ceph_daemon=~"$ceph_daemon"')

    def per_osd(title: str, record: str, unit: str, description: str, width: int = 8) -> Any:
        return timeseries(
            title, [Query(f"{record}{osd}", "{{ceph_daemon}} {{role}} {{device}}")], unit, description,
            width,
        )

    def per_nic(title: str, record: str, unit: str, description: str, width: int = 12) -> Any:
        return timeseries(
            title,
            [Query(f"{record}{osd}", "{{ceph_daemon}} {{network}} {{interface}}")],
            unit,
            description,
            width,
        )

    dashboard = (
        dashboard.with_row(gdash.Row("Devices"))
        .with_panel(
            table(
                "OSD data devices",
                [Query(f"cephscope_osd_device_info{sel(OSD_SEL)}")],
                "Devices of each OSD (data/db/wal) with model and rotational flag (topology info).",
                height=6,
            )
        )
        .with_panel(
            timeseries(
                "Device await",
                [
                    Query(
                        f"{names.DEVICE_READ_AWAIT}{osd}",
                        "read {{ceph_daemon}} {{role}} {{device}}",
                    ),
                    Query(
                        f"{names.DEVICE_WRITE_AWAIT}{osd}",
                        "write {{ceph_daemon}} {{role}} {{device}}",
                    ),
                    Query(f"{names.DEVICE_AWAIT}{osd}", "all {{ceph_daemon}} {{role}} {{device}}"),
                ],
                "s",
                "iostat's r_await / w_await / await of the OSD's devices (await is the "
                "report's disk await; 0 while no I/O completes).",
                width=8,
            )
        )
        .with_panel(
            per_osd(
                "Device utilisation",
                names.DEVICE_UTIL,
                "percentunit",
                "iostat's %util: share of time with at least one I/O in flight.",
            )
        )
        .with_panel(
            per_osd(
                "Device queue size",
                names.DEVICE_QUEUE_SIZE,
                "short",
                "iostat's aqu-sz: average I/Os queued or in service.",
            )
        )
        .with_panel(
            timeseries(
                "Device IOPS",
                [
                    Query(
                        f"{names.DEVICE_READS}{osd}",
                        "read {{ceph_daemon}} {{role}} {{device}}",
                    ),
                    Query(
                        f"{names.DEVICE_WRITES}{osd}",
                        "write {{ceph_daemon}} {{role}} {{device}}",
                    ),
                ],
                "iops",
                "Reads and writes completed per second.",
            )
        )
        .with_panel(
            timeseries(
                "Device throughput",
                [
                    Query(
                        f"{names.DEVICE_READ_BYTES}{osd}",
                        "read {{ceph_daemon}} {{role}} {{device}}",
                    ),
                    Query(
                        f"{names.DEVICE_WRITTEN_BYTES}{osd}",
                        "write {{ceph_daemon}} {{role}} {{device}}",
                    ),
                ],
                "Bps",
                "Bytes read and written per second.",
            )
        )
        .with_row(gdash.Row("Network"))
        .with_panel(
            table(
                "OSD networks",
                [Query(f"cephscope_osd_network_info{sel(OSD_SEL)}")],
                "Public / cluster address and interface of each OSD.",
                height=6,
            )
        )
        .with_panel(
            per_nic(
                "NIC receive",
                names.NETWORK_RECEIVE_BYTES,
                "Bps",
                "Bytes received on the OSD's interfaces.",
                width=12,
            )
        )
        .with_panel(
            per_nic(
                "NIC transmit",
                names.NETWORK_TRANSMIT_BYTES,
                "Bps",
                "Bytes sent on the OSD's interfaces.",
                width=12,
            )
        )
    )
    return finish(dashboard)


def sweep_comparison(cfg: MixinConfig) -> dict[str, Any]:
    """IOPS and latency per step parameters of one run: tables over the dashboard range."""
    dashboard = _base(
        "cephscope / Sweep comparison",
        UID_SWEEP_COMPARISON,
        "For one run: IOPS, latency and CPU per step, with every sweep parameter as a column.",
        ["sweep", "comparison"],
    ).time("now-6h", "now")
    dashboard = dashboard.with_variable(datasource_variable(cfg)).with_variable(
        run_variable(multi=False)
    )
    for annotation in step_annotations(cfg):
        dashboard = dashboard.annotation(annotation)
    run = sel('run="$run"')
    steps = f"max_over_time(cephscope_step_info{run}[$__range])"

    def joined(inner: str) -> Query:
        # Step params come from cephscope_step_info; the figure is joined in on (run, step).
        return Query(f"{steps} * on(run, step) group_left() ({inner})")

    dashboard = (
        dashboard.with_row(gdash.Row("Per step (client)"))
        .with_panel(
            table(
                "Client IOPS and latency per step",
                [
                    joined(
                        "sum by (run, step) "
                        f"(avg_over_time(cephscope_client_ops_per_second{run}[$__range]))"
                    ),
                    joined(
                        "max by (run, step) "
                        f"(avg_over_time(cephscope_client_latency_seconds{run}[$__range]))"
                    ),
                ],
                "Average over each step's duration of the benchmark tool's live figures; one "
                "row per step, sweep axes as columns. Value #A = IOPS, Value #B = latency (s).",
                height=9,
            )
        )
        .with_row(gdash.Row("Per step (OSD, from per-step recording rules)"))
        .with_panel(
            table(
                "OSD IOPS, latency and CPU per step",
                [
                    Query(f"avg_over_time({names.STEP_OSD_OPS}{run}[$__range])"),
                    Query(f"avg_over_time({names.STEP_OSD_OP_LATENCY_AVG}{run}[$__range])"),
                    Query(f"avg_over_time({names.STEP_OSD_OP_LATENCY_P99}{run}[$__range])"),
                    Query(f"avg_over_time({names.STEP_OSD_CPU_CORES}{run}[$__range])"),
                ],
                "Recorded every few seconds while a step runs. Value #A = OSD ops/s, #B = avg "
                "latency (s), #C = p99 latency (s), #D = OSD CPU (cores); IOPS per core = A / D.",
                height=9,
            )
        )
        .with_row(gdash.Row("Per step (CephFS and RGW, from per-step recording rules)"))
        .with_panel(
            table(
                "MDS requests and reply latency per step",
                [
                    Query(f"avg_over_time({names.STEP_MDS_REQUESTS}{run}[$__range])"),
                    Query(f"avg_over_time({names.STEP_MDS_REPLY_LATENCY_AVG}{run}[$__range])"),
                ],
                "All MDSs while each step ran. Value #A = client requests/s, #B = average "
                "reply latency (s).",
                width=12,
                height=9,
            )
        )
        .with_panel(
            table(
                "Gateway GET / PUT rate and latency per step",
                [
                    Query(f"avg_over_time({names.STEP_RGW_OPS}{run}[$__range])"),
                    Query(f"avg_over_time({names.STEP_RGW_LATENCY_AVG}{run}[$__range])"),
                ],
                "All gateways while each step ran, one row per step and op (get, put). "
                "Value #A = ops/s, #B = average latency (s).",
                width=12,
                height=9,
            )
        )
        .with_row(gdash.Row("Over time"))
        .with_panel(
            timeseries(
                "OSD IOPS by step",
                [Query(f"{names.STEP_OSD_OPS}{run}", "step {{step}}")],
                "iops",
                "Cluster OSD op rate while each step ran.",
            )
        )
        .with_panel(
            timeseries(
                "OSD p99 latency by step",
                [Query(f"{names.STEP_OSD_OP_LATENCY_P99}{run}", "step {{step}}")],
                "s",
                "Cluster OSD p99 op latency while each step ran.",
            )
        )
    )
    return finish(dashboard)


def all_dashboards(cfg: MixinConfig) -> dict[str, dict[str, Any]]:
    """File name (without .json) -> dashboard JSON."""
    return {
        "sweep-overview": sweep_overview(cfg),
        "osd-internals": osd_internals(cfg),
        "devices-network": devices_network(cfg),
        "sweep-comparison": sweep_comparison(cfg),
    }


__all__ = ["all_dashboards", "query_variable"]
