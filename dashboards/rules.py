"""Recording and alert rules, generated from MixinConfig into alerts/*.rules.yml.

Recording rules: per-OSD rates and latencies, and per-step aggregates (a figure multiplied
into `cephscope_step_info`, so the recorded series carry every sweep parameter of the step
that was running), per-OSD op-queue wait (alerts/opqueue.rules.yml) and per-OSD device and NIC
figures joined through the topology info series (alerts/osd_devices.rules.yml). Every window
is `MixinConfig.rate_window`; every recorded name is a constant of rule_names.

Alerts: every alert has `severity`, `summary`, `description` and a `runbook_url` pointing at
its section of docs/alerts.md (the anchor is the alert name in lower case).
"""

from __future__ import annotations

from typing import Any

from cephscope import figures as fig
from cephscope.dashboards import rule_names as names
from cephscope.dashboards.config import MixinConfig

OP_TYPES = ("r", "w", "rw")

# Alert name -> docs/alerts.md section anchor (GitHub lower-cases the heading).
ALERT_NAMES = (
    "CephscopeStepLatencyRegression",
    "CephscopeStepIOPSRegression",
    "CephscopeStepOSDLatencyRegression",
    "CephscopeStepMDSLatencyRegression",
    "CephscopeStepRGWLatencyRegression",
    "CephscopeOSDOpsBlocked",
    "CephscopeOSDSlowOps",
    "CephscopeDaemonDown",
    "CephscopeExporterDown",
    "CephscopeCollectorFailing",
    "CephscopeDiskSaturated",
)

# Alerts that are about one OSD's latency: inhibited while that daemon is down.
PER_DAEMON_LATENCY_ALERTS = ("CephscopeOSDOpsBlocked", "CephscopeOSDSlowOps")
# Alerts about a whole step's client figures: inhibited while any daemon is down.
STEP_REGRESSION_ALERTS = (
    "CephscopeStepLatencyRegression",
    "CephscopeStepIOPSRegression",
    "CephscopeStepOSDLatencyRegression",
    "CephscopeStepMDSLatencyRegression",
    "CephscopeStepRGWLatencyRegression",
)


def _step_join(figure: str) -> str:
    """Stamp every label of the running step onto a cluster-wide (single series) figure."""
    return f"cephscope_step_info * on() group_left() ({figure})"


def recording_rules(cfg: MixinConfig) -> dict[str, Any]:
    w = cfg.rate_window
    figures = cfg.figures()
    exporter = "{" + cfg.exporter_job_selector + "}"
    op_rates = " or ".join(
        f'label_replace(rate(ceph_osd_op_{op}{exporter}[{w}]), "op", "{op}", "", "")'
        for op in OP_TYPES
    )
    osd_rules: list[dict[str, str]] = [
        {
            "record": names.OSD_OP_RATE,
            "expr": f"sum by (job, instance, ceph_daemon, op) ({op_rates})",
        },
        {
            "record": names.OSD_OP_LATENCY_AVG,
            "expr": figures.osd_op_latency_seconds(("job", "instance", "ceph_daemon")),
        },
    ]
    for quantile, name in ((0.5, names.OSD_OP_LATENCY_P50), (0.99, names.OSD_OP_LATENCY_P99)):
        osd_rules.append(
            {
                "record": name,
                "expr": figures.osd_op_latency_quantile(quantile, ("job", "instance", "ceph_daemon")),
            }
        )
    step_rules: list[dict[str, Any]] = [
        {
            "record": names.STEP_OSD_OPS,
            "expr": _step_join(f"sum({names.OSD_OP_RATE})"),
        },
        {
            "record": names.STEP_OSD_OP_LATENCY_AVG,
            "expr": _step_join(figures.osd_op_latency_seconds()),
        },
        {
            "record": names.STEP_OSD_OP_LATENCY_P99,
            "expr": _step_join(figures.osd_op_latency_quantile(0.99)),
        },
        {
            "record": names.STEP_OSD_CPU_CORES,
            "expr": _step_join(figures.osd_thread_cpu_cores()),
        },
        {
            # The op worker threads: the figure to hold against osd_op_num_shards x threads.
            "record": names.STEP_OSD_TP_OSD_TP_CPU_CORES,
            "expr": _step_join(figures.osd_thread_cpu_cores((), 'thread_group="tp_osd_tp"')),
        },
        {
            "record": names.STEP_OSD_OP_QUEUE_ITEMS,
            "expr": _step_join(f"sum(avg_over_time(cephscope_osd_op_queue_items{exporter}[{w}]))"),
        },
        {
            "record": names.STEP_OSD_OP_SHARDS,
            "expr": _step_join(f"sum(cephscope_osd_op_shards{exporter})"),
        },
        {
            "record": names.STEP_NODE_CPU_BUSY,
            # all hosts' CPUs together; iowait and steal are not busy (cephscope.figures)
            "expr": _step_join(figures.cpu_busy_ratio(())),
        },
        {
            "record": names.STEP_MDS_REQUESTS,
            "expr": _step_join(figures.mds_request_rate()),
        },
        {
            "record": names.STEP_MDS_REPLY_LATENCY_AVG,
            "expr": _step_join(figures.mds_reply_latency_seconds()),
        },
        *(
            {"record": names.STEP_RGW_OPS, "expr": _step_join(figures.rgw_op_rate(op)),
             "labels": {"op": op}}
            for op in fig.RGW_OPERATIONS
        ),
        *(
            {"record": names.STEP_RGW_LATENCY_AVG,
             "expr": _step_join(figures.rgw_latency_seconds(op)), "labels": {"op": op}}
            for op in fig.RGW_OPERATIONS
        ),
        {
            "record": names.STEP_CLIENT_OPS,
            "expr": (
                "cephscope_step_info * on(run, step) group_left() "
                "sum by (run, step) (cephscope_client_ops_per_second)"
            ),
        },
        {
            "record": names.STEP_CLIENT_LATENCY,
            "expr": (
                "cephscope_step_info * on(run, step) group_left() "
                "max by (run, step) (cephscope_client_latency_seconds)"
            ),
        },
    ]
    return {
        "groups": [
            {
                # One group, evaluated in order: the per-step rules read the per-OSD ones.
                "name": "cephscope-recording",
                "interval": cfg.step_rules_interval,
                "rules": osd_rules + step_rules,
            }
        ]
    }


def opqueue_rules(cfg: MixinConfig) -> dict[str, Any]:
    """Op queue wait per OSD and op type (r, w, rw), from ceph-exporter-compatible counters.

    Average seconds an op of that type waited between being received and being dequeued by a
    tp_osd_tp worker: op_<op>_latency counts from the message's receive stamp,
    op_<op>_process_latency from its dequeue (PrimaryLogPG::log_op_stats), so the difference
    is the time before dequeue. No ops in the window: no sample (the `> 0` guard), never
    NaN. A small negative difference from rate() extrapolation is clamped to 0.
    """
    w = cfg.rate_window
    exporter = "{" + cfg.exporter_job_selector + "}"
    by = "sum by (job, instance, ceph_daemon)"
    rules = [
        {
            "record": names.OSD_OP_QUEUE_WAIT,
            "expr": (
                "clamp_min(\n"
                "  (\n"
                f"      {by} (rate(ceph_osd_op_{op}_latency_sum{exporter}[{w}]))\n"
                f"    - {by} (rate(ceph_osd_op_{op}_process_latency_sum{exporter}[{w}]))\n"
                "  )\n"
                f"  / ({by} (rate(ceph_osd_op_{op}_latency_count{exporter}[{w}])) > 0),\n"
                "  0\n"
                ")"
            ),
            "labels": {"op": op},
        }
        for op in OP_TYPES
    ]
    return {"groups": [{"name": "cephscope-opqueue", "rules": rules}]}


def device_rules(cfg: MixinConfig) -> dict[str, Any]:
    """Per-OSD disk and NIC figures: node_exporter's node_disk_* / node_network_* joined to
    OSDs through the exporter's topology info series (docs/metrics.md, "Topology").

    Join key: (nodename, device). The exporter and node_exporter are different scrape
    targets, so `instance` differs; node_exporter's node_uname_info{nodename} gives each
    node_exporter instance its host name, and the exporter labels its info series with the
    same nodename. The info series sits on the "many" side of the join so that several OSDs
    may share one device (file-backed OSDs on one filesystem) or one NIC without a
    many-to-many error. Awaits are time/ops: where ops do not move the rule records 0 (no
    I/O waited), not NaN. Prometheus must scrape both targets at least twice per window.
    """
    figures = cfg.figures()
    node = "{" + cfg.node_job_selector + "}"
    device_info = "cephscope_osd_device_info{" + cfg.exporter_job_selector + "}"
    network_info = "cephscope_osd_network_info{" + cfg.exporter_job_selector + "}"
    uname = f"on (instance) group_left (nodename) node_uname_info{node}"

    def per_device(figure: str) -> str:
        return (
            "sum by (ceph_daemon, role, device, nodename) (\n"
            f"  {device_info}\n"
            "  * on (nodename, device) group_left ()\n"
            f"  (\n    ({figure})\n    * {uname}\n  )\n"
            ")"
        )

    rate = figures.node_rate

    def per_interface(counter: str) -> str:
        return (
            "sum by (ceph_daemon, network, interface, nodename) (\n"
            f"  {network_info}\n"
            "  * on (nodename, interface) group_left ()\n"
            "  label_replace(\n"
            f"    {rate(counter)} * {uname},\n"
            '    "interface", "$1", "device", "(.*)"\n'
            "  )\n"
            ")"
        )

    rules = [
        {"record": names.DEVICE_READS, "expr": per_device(rate(fig.DISK_READS))},
        {"record": names.DEVICE_WRITES, "expr": per_device(rate(fig.DISK_WRITES))},
        {"record": names.DEVICE_READ_BYTES, "expr": per_device(rate(fig.DISK_READ_BYTES))},
        {"record": names.DEVICE_WRITTEN_BYTES, "expr": per_device(rate(fig.DISK_WRITTEN_BYTES))},
        # iostat's r_await / w_await / await in seconds
        {"record": names.DEVICE_READ_AWAIT,
         "expr": per_device(figures.disk_await_seconds(writes=False))},
        {"record": names.DEVICE_WRITE_AWAIT,
         "expr": per_device(figures.disk_await_seconds(reads=False))},
        {"record": names.DEVICE_AWAIT, "expr": per_device(figures.disk_await_seconds())},
        # iostat's %util as a 0..1 ratio: share of wall time with at least one I/O in flight
        {"record": names.DEVICE_UTIL, "expr": per_device(figures.disk_util_ratio())},
        # iostat's aqu-sz: average number of I/Os queued or in service
        {"record": names.DEVICE_QUEUE_SIZE,
         "expr": per_device(rate("node_disk_io_time_weighted_seconds_total"))},
        # interface counters, not per-OSD traffic: OSDs sharing a NIC all see its total
        {"record": names.NETWORK_RECEIVE_BYTES, "expr": per_interface(fig.NIC_RECEIVE_BYTES)},
        {"record": names.NETWORK_TRANSMIT_BYTES, "expr": per_interface(fig.NIC_TRANSMIT_BYTES)},
        # share of the link speed in use, the busier direction; only where the kernel knows
        # the speed (cephscope_osd_network_speed_bytes is absent for lo and virtual links)
        {"record": names.NETWORK_LINK_UTIL,
         "expr": (
             "max by (ceph_daemon, network, interface, nodename) (\n"
             f'  label_replace({names.NETWORK_RECEIVE_BYTES}, "direction", "rx", "", "")\n'
             f'  or label_replace({names.NETWORK_TRANSMIT_BYTES}, "direction", "tx", "", "")\n'
             ")\n"
             "/ on (ceph_daemon, network, interface, nodename)\n"
             "max by (ceph_daemon, network, interface, nodename) "
             "(cephscope_osd_network_speed_bytes{" + cfg.exporter_job_selector + "} > 0)"
         )},
    ]
    return {"groups": [{"name": "cephscope-osd-devices", "rules": rules}]}


def rule_files(cfg: MixinConfig) -> dict[str, dict[str, Any]]:
    """Every rule file under alerts/ and its content: all of them come from ``cfg``."""
    return {
        "cephscope.rules.yml": recording_rules(cfg),
        "cephscope-alerts.rules.yml": alert_rules(cfg),
        "opqueue.rules.yml": opqueue_rules(cfg),
        "osd_devices.rules.yml": device_rules(cfg),
    }


def _annotations(cfg: MixinConfig, alert: str, summary: str, description: str) -> dict[str, str]:
    return {
        "summary": summary,
        "description": description,
        "runbook_url": f"{cfg.runbook_base_url}#{alert.lower()}",
    }


def _baseline_regression(cfg: MixinConfig, recorded: str, ratio: float,
                         on: tuple[str, ...] = ("step",)) -> str:
    """A per-step recording divided by the baseline run's median of the same recording at the
    same step id (and `on` labels), above `ratio` (CephscopeStepOSDLatencyRegression's shape).
    A baseline median of 0 (a coarse clock's zero) is not a baseline: no division by it."""
    by = ", ".join(on)
    return (
        f"(\n  {recorded}\n  / on({by}) group_left()\n"
        f"  (\n    max by ({by}) (\n"
        "      label_replace(\n"
        f"        quantile_over_time(0.5, {recorded}[{cfg.baseline_lookback}]),\n"
        '        "baseline_run", "$1", "run", "(.*)"\n'
        "      )\n"
        '      and on(baseline_run, step) cephscope_step_baseline_latency_seconds{stat="avg"}\n'
        "    ) > 0\n  )\n"
        f") > {ratio}"
    )


def alert_rules(cfg: MixinConfig) -> dict[str, Any]:
    w = cfg.rate_window
    exporter_up = "up{" + cfg.exporter_job_selector + "}"
    client_latency = f"avg_over_time(cephscope_client_latency_seconds[{w}])"
    baseline_latency = 'cephscope_step_baseline_latency_seconds{stat="avg"}'
    client_iops = (
        "sum by (job, instance, run, step, mode) "
        f"(avg_over_time(cephscope_client_ops_per_second[{w}]))"
    )
    rules: list[dict[str, Any]] = [
        {
            "alert": "CephscopeStepLatencyRegression",
            # The value is the ratio current / baseline; the `and` drops sub-noise increases.
            "expr": (
                f"(\n  {client_latency}\n  / on(run, step, mode) group_left()\n  {baseline_latency}\n"
                f") > {cfg.latency_regression_ratio}\n"
                f"and on(run, step, mode)\n"
                f"(\n  {client_latency}\n  - on(run, step, mode) group_left()\n  {baseline_latency}\n"
                f") > {cfg.latency_regression_min_increase_seconds}"
            ),
            "for": cfg.latency_regression_for,
            "labels": {"severity": "warning"},
            "annotations": _annotations(
                cfg,
                "CephscopeStepLatencyRegression",
                "Step {{ $labels.step }} of run {{ $labels.run }} is slower than its baseline",
                "Client {{ $labels.mode }} latency of step {{ $labels.step }} (run "
                "{{ $labels.run }}) is {{ $value | printf \"%.2f\" }}x the baseline run's "
                f"average at the same step id (threshold {cfg.latency_regression_ratio}x).",
            ),
        },
        {
            "alert": "CephscopeStepIOPSRegression",
            "expr": (
                f"(\n  {client_iops}\n  / on(run, step, mode) group_left()\n"
                "  cephscope_step_baseline_iops\n"
                f") < {cfg.iops_regression_ratio}"
            ),
            "for": cfg.latency_regression_for,
            "labels": {"severity": "warning"},
            "annotations": _annotations(
                cfg,
                "CephscopeStepIOPSRegression",
                "Step {{ $labels.step }} of run {{ $labels.run }} has fewer IOPS than its baseline",
                "Client {{ $labels.mode }} IOPS of step {{ $labels.step }} (run {{ $labels.run }}) "
                "are {{ $value | printf \"%.2f\" }}x the baseline run's at the same step id "
                f"(threshold {cfg.iops_regression_ratio}x).",
            ),
        },
        {
            "alert": "CephscopeStepOSDLatencyRegression",
            # The runner publishes only the baseline's client figures; the baseline's OSD-side
            # latency per step is the per-step recording of the baseline run itself, found in
            # Prometheus' history through the `baseline_run` label of the runner's series.
            # Its median, not its mean: the recording's first rate window of a step still holds
            # what ran before it or a fresh pool's slow first writes, and one such sample of a
            # few hundred ms lifts a mean of a short step's samples enough to hide a
            # several-fold regression.
            "expr": (
                f"(\n  {names.STEP_OSD_OP_LATENCY_AVG}\n  / on(step) group_left()\n"
                "  max by (step) (\n"
                "    label_replace(\n"
                f"      quantile_over_time(0.5, {names.STEP_OSD_OP_LATENCY_AVG}"
                f"[{cfg.baseline_lookback}]),\n"
                '      "baseline_run", "$1", "run", "(.*)"\n'
                "    )\n"
                f"    and on(baseline_run, step) {baseline_latency}\n"
                "  )\n"
                f") > {cfg.latency_regression_ratio}"
            ),
            "for": cfg.latency_regression_for,
            "labels": {"severity": "warning"},
            "annotations": _annotations(
                cfg,
                "CephscopeStepOSDLatencyRegression",
                "OSD latency of step {{ $labels.step }} of run {{ $labels.run }} is above its "
                "baseline",
                "Average OSD op latency during step {{ $labels.step }} (run {{ $labels.run }}) is "
                "{{ $value | printf \"%.2f\" }}x the baseline run's at the same step id "
                f"(threshold {cfg.latency_regression_ratio}x).",
            ),
        },
        {
            "alert": "CephscopeStepMDSLatencyRegression",
            # CephFS: the MDSs' average reply latency, as the OSD alert above.
            "expr": _baseline_regression(cfg, names.STEP_MDS_REPLY_LATENCY_AVG,
                                         cfg.mds_latency_regression_ratio),
            "for": cfg.latency_regression_for,
            "labels": {"severity": "warning"},
            "annotations": _annotations(
                cfg,
                "CephscopeStepMDSLatencyRegression",
                "MDS latency of step {{ $labels.step }} of run {{ $labels.run }} is above its "
                "baseline",
                "Average MDS reply latency during step {{ $labels.step }} (run {{ $labels.run }}) "
                "is {{ $value | printf \"%.2f\" }}x the baseline run's at the same step id "
                f"(threshold {cfg.mds_latency_regression_ratio}x).",
            ),
        },
        {
            "alert": "CephscopeStepRGWLatencyRegression",
            # RGW: the gateways' GET and PUT latency, each against its own baseline (op label).
            "expr": _baseline_regression(cfg, names.STEP_RGW_LATENCY_AVG,
                                         cfg.rgw_latency_regression_ratio, on=("step", "op")),
            "for": cfg.latency_regression_for,
            "labels": {"severity": "warning"},
            "annotations": _annotations(
                cfg,
                "CephscopeStepRGWLatencyRegression",
                "RGW {{ $labels.op }} latency of step {{ $labels.step }} of run {{ $labels.run }} "
                "is above its baseline",
                "Average gateway {{ $labels.op }} latency during step {{ $labels.step }} (run "
                "{{ $labels.run }}) is {{ $value | printf \"%.2f\" }}x the baseline run's at the "
                f"same step id (threshold {cfg.rgw_latency_regression_ratio}x).",
            ),
        },
        {
            "alert": "CephscopeOSDOpsBlocked",
            "expr": "cephscope_osd_ops_blocked > 0",
            "for": cfg.blocked_ops_for,
            "labels": {"severity": "warning"},
            "annotations": _annotations(
                cfg,
                "CephscopeOSDOpsBlocked",
                "{{ $labels.ceph_daemon }} has blocked ops",
                "{{ $labels.ceph_daemon }} has {{ $value }} ops in flight for longer than "
                "osd_op_complaint_time (Ceph's slow ops) for more than "
                f"{cfg.blocked_ops_for}.",
            ),
        },
        {
            "alert": "CephscopeOSDSlowOps",
            "expr": f"{names.OSD_OP_LATENCY_P99} > {cfg.slow_op_p99_seconds}",
            "for": cfg.slow_ops_for,
            "labels": {"severity": "warning"},
            "annotations": _annotations(
                cfg,
                "CephscopeOSDSlowOps",
                "{{ $labels.ceph_daemon }} p99 op latency is high",
                "p99 op latency of {{ $labels.ceph_daemon }} is {{ $value | humanizeDuration }} "
                f"(threshold {cfg.slow_op_p99_seconds} s) for more than {cfg.slow_ops_for}.",
            ),
        },
        {
            "alert": "CephscopeDaemonDown",
            "expr": "cephscope_daemon_up == 0",
            "for": cfg.daemon_down_for,
            "labels": {"severity": "critical"},
            "annotations": _annotations(
                cfg,
                "CephscopeDaemonDown",
                "{{ $labels.ceph_daemon }} does not answer on its admin socket",
                "The exporter on {{ $labels.instance }} found the admin socket of "
                "{{ $labels.ceph_daemon }} but the daemon did not answer for more than "
                f"{cfg.daemon_down_for}.",
            ),
        },
        {
            "alert": "CephscopeExporterDown",
            "expr": f"{exporter_up} == 0",
            "for": cfg.scrape_failing_for,
            "labels": {"severity": "critical"},
            "annotations": _annotations(
                cfg,
                "CephscopeExporterDown",
                "Prometheus cannot scrape the exporter on {{ $labels.instance }}",
                "Scrapes of {{ $labels.instance }} (job {{ $labels.job }}) have failed for more "
                f"than {cfg.scrape_failing_for}: no Ceph metrics from that host.",
            ),
        },
        {
            "alert": "CephscopeCollectorFailing",
            "expr": "cephscope_scrape_collector_success == 0",
            "for": cfg.scrape_failing_for,
            "labels": {"severity": "warning"},
            "annotations": _annotations(
                cfg,
                "CephscopeCollectorFailing",
                "Collector {{ $labels.collector }} fails on {{ $labels.instance }}",
                "The {{ $labels.collector }} collector of the exporter on {{ $labels.instance }} "
                f"has failed every scrape for more than {cfg.scrape_failing_for}; its series "
                "are missing.",
            ),
        },
        {
            "alert": "CephscopeDiskSaturated",
            "expr": f"{names.DEVICE_UTIL} > {cfg.disk_saturation_util}",
            "for": cfg.disk_saturation_for,
            "labels": {"severity": "warning"},
            "annotations": _annotations(
                cfg,
                "CephscopeDiskSaturated",
                "Data device {{ $labels.device }} of {{ $labels.ceph_daemon }} is saturated",
                "Device {{ $labels.device }} of {{ $labels.ceph_daemon }} has been busy "
                "{{ $value | humanizePercentage }} of the time for more than "
                f"{cfg.disk_saturation_for} (threshold {cfg.disk_saturation_util:.0%}).",
            ),
        },
    ]
    return {"groups": [{"name": "cephscope-alerts", "interval": cfg.step_rules_interval, "rules": rules}]}
