"""Selectors and thresholds shared by the dashboards and the alert rules (mixin style).

Every job selector, rule window and alert threshold lives here, so a deployment changes them
in one place and rebuilds with `cephscope dashboards --in-tree` (which writes the dashboards
JSON and every rule file under alerts/).
"""

from __future__ import annotations

from dataclasses import dataclass

from cephscope.figures import (
    EXPORTER_JOB,
    NODE_JOB,
    RULE_RATE_WINDOW,
    RUNNER_JOB,
    Figures,
    job_matcher,
)


@dataclass(frozen=True)
class MixinConfig:
    # Prometheus job names as the local stack (deploy/stack.py) and docker-compose scrape them
    # (cephscope.figures names them for both).
    exporter_job_selector: str = job_matcher(EXPORTER_JOB)
    node_job_selector: str = job_matcher(NODE_JOB)
    runner_job_selector: str = job_matcher(RUNNER_JOB)

    # Grafana datasource uid provisioned by dashboards/provisioning/datasources/.
    datasource_uid: str = "cephscope-prometheus"
    # Grafana tag the runner puts on its region annotations.
    runner_annotation_tag: str = "cephscope"

    # Window of the recorded rates: short enough to follow a 30 s sweep step,
    # long enough for >= 4 scrapes at a 5 s scrape interval.
    rate_window: str = RULE_RATE_WINDOW
    # Evaluation interval of the per-step rule groups (a step lasts tens of seconds).
    step_rules_interval: str = "5s"

    # Latency regression: client latency of a step vs the baseline run's latency at the
    # same step id, as published by the runner (`cephscope sweep --baseline RUN_DIR`).
    # 2x: identical re-runs on a busy 2-core dev box differed by up to 1.4x (and 2.4x for a
    # 10 s step while other clusters ran benchmarks on the same cores); lower it on
    # dedicated hardware where re-runs agree within a few percent.
    latency_regression_ratio: float = 2.0
    # Ignore regressions below this absolute increase (noise on sub-millisecond steps).
    latency_regression_min_increase_seconds: float = 0.0005
    latency_regression_for: str = "20s"
    # How far back Prometheus looks for the baseline run's per-step OSD latency (the
    # baseline must have run against the same Prometheus within this window).
    baseline_lookback: str = "7d"
    # IOPS regression: the step's IOPS below this fraction of the baseline's.
    iops_regression_ratio: float = 0.5
    # CephFS and RGW latency regressions, as the OSD one: the step's MDS reply latency, and its
    # gateway GET and PUT latency, against the baseline run's at the same step id (both from
    # their per-step recordings). The OSD figure's 2x, for the same reason (re-runs on a busy
    # 2-core box). A gateway times requests with a coarse clock (4 ms ticks here, every
    # release): averages over a few fast requests are coarse.
    mds_latency_regression_ratio: float = 2.0
    rgw_latency_regression_ratio: float = 2.0

    # Ops in flight longer than osd_op_complaint_time (Ceph's "slow ops").
    blocked_ops_for: str = "1m"
    # OSD op latency p99 above this for `slow_ops_for` is a slow-ops warning.
    slow_op_p99_seconds: float = 1.0
    slow_ops_for: str = "2m"

    daemon_down_for: str = "30s"
    scrape_failing_for: str = "1m"

    # Device busy fraction (node_disk_io_time_seconds rate) counted as saturated.
    disk_saturation_util: float = 0.95
    disk_saturation_for: str = "2m"

    # Where the runbook sections live; each alert links `<base>#<alert name in lower case>`.
    # Default: docs/alerts.md of this repository, relative to its root (as a link in a
    # checkout or a repository browser). Set the URL of your own copy, e.g. a
    # https://…/blob/<branch>/docs/alerts.md page, so that notifications link somewhere.
    runbook_base_url: str = "docs/alerts.md"

    def figures(self) -> Figures:
        """The shared figures with this config's job selectors and rule window."""
        return Figures((self.node_job_selector,), (self.exporter_job_selector,), self.rate_window)


DEFAULT_CONFIG = MixinConfig()
