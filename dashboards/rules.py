"""Recording and alert rules, generated from MixinConfig into alerts/*.rules.yml.

Recording rules: per-OSD rates and latencies, and per-step aggregates (a figure multiplied
into `cephscope_step_info`, so the recorded series carry every sweep parameter of the step
that was running). The per-OSD device / NIC rules are the topology rules in
alerts/osd_devices.rules.yml; the op-queue rule is alerts/opqueue.rules.yml.

Alerts: every alert has `severity`, `summary`, `description` and a `runbook_url` pointing at
its section of docs/alerts.md (the anchor is the alert name in lower case).
"""

from __future__ import annotations

from typing import Any

from cephscope.dashboards.config import MixinConfig

OP_TYPES = ("r", "w", "rw")

# Alert name -> docs/alerts.md section anchor (GitHub lower-cases the heading).
ALERT_NAMES = (
    "CephscopeStepLatencyRegression",
    "CephscopeStepIOPSRegression",
    "CephscopeStepOSDLatencyRegression",
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
)


def _step_join(figure: str) -> str:
    """Stamp every label of the running step onto a cluster-wide (single series) figure."""
    return f"cephscope_step_info * on() group_left() ({figure})"


def recording_rules(cfg: MixinConfig) -> dict[str, Any]:
    w = cfg.rate_window
    exporter = "{" + cfg.exporter_job_selector + "}"
    node_idle = "{" + cfg.node_job_selector + ', mode="idle"}'
    op_rates = " or ".join(
        f'label_replace(rate(ceph_osd_op_{op}{exporter}[{w}]), "op", "{op}", "", "")'
        for op in OP_TYPES
    )
    osd_rules: list[dict[str, str]] = [
        {
            "record": "ceph_daemon_op:ceph_osd_op:rate",
            "expr": f"sum by (job, instance, ceph_daemon, op) ({op_rates})",
        },
        {
            "record": "ceph_daemon:ceph_osd_op_latency_seconds:avg",
            "expr": (
                f"sum by (job, instance, ceph_daemon) (rate(ceph_osd_op_latency_sum{exporter}[{w}]))"
                f" / sum by (job, instance, ceph_daemon) "
                f"(rate(ceph_osd_op_latency_count{exporter}[{w}]))"
            ),
        },
    ]
    for quantile, name in ((0.5, "p50"), (0.99, "p99")):
        osd_rules.append(
            {
                "record": f"ceph_daemon:cephscope_osd_op_latency_seconds:{name}",
                "expr": (
                    f"histogram_quantile({quantile}, sum by (job, instance, ceph_daemon, le) "
                    f"(rate(cephscope_osd_op_latency_seconds_bucket{exporter}[{w}])))"
                ),
            }
        )
    step_rules: list[dict[str, str]] = [
        {
            "record": "cephscope_step:osd_ops:rate",
            "expr": _step_join("sum(ceph_daemon_op:ceph_osd_op:rate)"),
        },
        {
            "record": "cephscope_step:osd_op_latency_seconds:avg",
            "expr": _step_join(
                f"sum(rate(ceph_osd_op_latency_sum{exporter}[{w}])) / "
                f"sum(rate(ceph_osd_op_latency_count{exporter}[{w}]))"
            ),
        },
        {
            "record": "cephscope_step:osd_op_latency_seconds:p99",
            "expr": _step_join(
                "histogram_quantile(0.99, sum by (le) "
                f"(rate(cephscope_osd_op_latency_seconds_bucket{exporter}[{w}])))"
            ),
        },
        {
            "record": "cephscope_step:osd_cpu_cores:rate",
            "expr": _step_join(f"sum(rate(cephscope_osd_thread_cpu_seconds_total{exporter}[{w}]))"),
        },
        {
            # The op worker threads: the figure to hold against osd_op_num_shards x threads.
            "record": "cephscope_step:osd_tp_osd_tp_cpu_cores:rate",
            "expr": _step_join(
                "sum(rate(cephscope_osd_thread_cpu_seconds_total"
                + "{" + cfg.exporter_job_selector + f', thread_group="tp_osd_tp"}}[{w}]))'
            ),
        },
        {
            "record": "cephscope_step:osd_op_queue_items:sum",
            "expr": _step_join(f"sum(avg_over_time(cephscope_osd_op_queue_items{exporter}[{w}]))"),
        },
        {
            "record": "cephscope_step:osd_op_shards:sum",
            "expr": _step_join(f"sum(cephscope_osd_op_shards{exporter})"),
        },
        {
            "record": "cephscope_step:node_cpu_busy:ratio",
            "expr": _step_join(f"1 - avg(rate(node_cpu_seconds_total{node_idle}[{w}]))"),
        },
        {
            "record": "cephscope_step:client_ops_per_second",
            "expr": (
                "cephscope_step_info * on(run, step) group_left() "
                "sum by (run, step) (cephscope_client_ops_per_second)"
            ),
        },
        {
            "record": "cephscope_step:client_latency_seconds",
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


def _annotations(cfg: MixinConfig, alert: str, summary: str, description: str) -> dict[str, str]:
    return {
        "summary": summary,
        "description": description,
        "runbook_url": f"{cfg.runbook_base_url}#{alert.lower()}",
    }


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
            "expr": (
                "(\n  cephscope_step:osd_op_latency_seconds:avg\n  / on(step) group_left()\n"
                "  max by (step) (\n"
                "    label_replace(\n"
                "      avg_over_time(cephscope_step:osd_op_latency_seconds:avg"
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
            "expr": f"ceph_daemon:cephscope_osd_op_latency_seconds:p99 > {cfg.slow_op_p99_seconds}",
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
            "expr": f"ceph_daemon_device:node_disk_io_util:rate1m > {cfg.disk_saturation_util}",
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
