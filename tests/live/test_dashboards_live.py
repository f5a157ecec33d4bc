"""Every query of every dashboard panel, and every cookbook query, returns data from the real
Prometheus after a real sweep on the dev cluster (template variables substituted as Grafana
would). Two short sweeps run: a baseline, then the same spec with `--baseline`, so the
baseline panels have data too.

Both Prometheus majors answer every query: the session stack's Prometheus 2.42 (Debian
bookworm) and a second stack on Prometheus 3.5 (`--prometheus-release 3`, from the Tentacle
root filesystem) scraping the same cluster and the same sweeps (3.x has left-open range
selectors and normalises classic histograms' `le` labels), storing the exporter's histograms
as native histograms with custom buckets; the OSD latency percentiles of each step agree
between the two.

The CephFS and RGW panels need traffic on the session cluster's MDS and gateway: while the
sweeps run, a background loop makes Swift rounds on the gateway and file rounds through a
ceph-fuse mount of its file system (deploy/service_traffic.py), and the exporter's MDS and RGW
series in Prometheus are checked against what that loop did.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from cephscope.dashboards import rule_names as names
from cephscope.dashboards.queries import (
    annotation_queries,
    cookbook_queries,
    load_dashboards,
    panel_queries,
    resolve_variables,
    substitute,
)
from cephscope.deploy import rootfs
from cephscope.deploy.devcluster import DevCluster
from cephscope.deploy.service_traffic import (
    BackgroundTraffic,
    CephFuseMount,
    Counts,
    SwiftAccount,
)
from cephscope.deploy.stack import Stack
from cephscope.figures import OSD_OP_LATENCY_HISTOGRAM, STACK_FIGURES
from cephscope.runner.report.step_system import summarize_system
from cephscope.runner.system_metrics import pull_step_window
from tests.live.conftest import free_port_base
from tests.live.sweeps import REPO, SweepRun, prometheus_get, run_sweep

SPEC = """\
name: dashboards-live
benchmarks:
  radosbench:
    op_size: 4096
    concurrent_ops: [8, 16]
    time: {seconds}
    write_only: true
"""


@pytest.fixture(scope="module")
def stack3(devcluster: DevCluster, stack: Stack,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """Prometheus 3.5 over the same cluster, scraping the session stack's runner port: it sees
    the same sweeps."""
    rootfs.build("tentacle")  # Prometheus 3.5 comes from sid, as Tentacle does (cached)
    second = Stack(tmp_path_factory.mktemp("stack-prometheus3"),
                   port_base=free_port_base(8, avoid={devcluster.port_base, stack.port_base}),
                   asok_dir=devcluster.asok_dir, ceph_conf=devcluster.conf_path,
                   prometheus_release="3", runner_port=stack.runner_port)
    try:
        second.up()
        second.wait_for_series('up{job="node"} == 1', timeout=60)
        yield second
    finally:
        second.purge()


@pytest.fixture(params=["2", "3"], ids=["prometheus2", "prometheus3"])
def prometheus(request: pytest.FixtureRequest, stack: Stack, stack3: Stack) -> Stack:
    """The stack whose Prometheus answers the queries: 2.42 or 3.5."""
    chosen = stack if request.param == "2" else stack3
    version = prometheus_get(chosen, "/api/v1/status/buildinfo", {})["version"]
    assert version.startswith(f"{request.param}."), version
    return chosen


@dataclass(frozen=True)
class ServiceTraffic:
    """What the background loop did on the MDS and the gateway, and when."""

    started: float
    stopped: float
    swift: Counts
    files: int


@pytest.fixture(scope="module")
def traffic_and_sweep(devcluster: DevCluster, stack: Stack, stack3: Stack,
                      tmp_path_factory: pytest.TempPathFactory
                      ) -> tuple[SweepRun, ServiceTraffic]:
    assert devcluster.mds and devcluster.rgw, "the session dev cluster needs its MDS and gateway"
    runs = tmp_path_factory.mktemp("dashboards-runs")
    spec = SPEC.format(seconds=8)
    access = devcluster.rgw_access()
    swift = SwiftAccount(access.swift_auth_url, access.swift_user, access.swift_key)
    baseline = run_sweep(devcluster, stack, spec, runs / "baseline")
    # From here on, both Prometheus servers have scraped the gateway for a minute: the test
    # below finds a scrape well before the traffic began.
    with CephFuseMount(devcluster.conf_path, runs / "cephfs") as mountpoint:
        traffic = BackgroundTraffic(swift, mountpoint, interval=1.0)
        started = time.time()
        traffic.start()
        try:
            current = run_sweep(devcluster, stack, spec, runs / "current",
                                baseline=baseline.run_dir)
            # The rule groups evaluate every 5 s: give the last evaluations time to land.
            time.sleep(6)
        finally:
            traffic.stop()
        stopped = time.time()
    return current, ServiceTraffic(started, stopped, traffic.counts, traffic.files_done)


@pytest.fixture(scope="module")
def swept(traffic_and_sweep: tuple[SweepRun, ServiceTraffic]) -> SweepRun:
    return traffic_and_sweep[0]


def evaluate(stack: Stack, expr: str, instant: bool, run: SweepRun) -> list[dict[str, Any]]:
    if instant:
        return prometheus_get(stack, "/api/v1/query",
                              {"query": expr, "time": str(run.last_step_middle)})["result"]
    return prometheus_get(stack, "/api/v1/query_range",
                          {"query": expr, "start": str(run.start - 10), "end": str(run.end + 5),
                           "step": "5"})["result"]


def grafana_builtins(run: SweepRun) -> dict[str, str]:
    # As Grafana computes them for this time range at a 5 s scrape interval:
    # $__rate_interval = max($__interval + scrape interval, 4 x scrape interval).
    range_seconds = int(run.last_step_middle - run.start) + 15
    return {"__rate_interval": "20s", "__interval": "5s", "__range": f"{range_seconds}s"}


def test_every_dashboard_panel_query_returns_series(prometheus: Stack, swept: SweepRun) -> None:
    stack = prometheus
    dashboards = load_dashboards(REPO / "dashboards" / "json")
    assert len(dashboards) == 4
    checked = 0
    empty: list[str] = []
    for dashboard in dashboards.values():
        values = resolve_variables(stack.prometheus, dashboard, swept.run_id, swept.start - 10, swept.end + 5)
        values.update(grafana_builtins(swept))
        for query in panel_queries(dashboard) + annotation_queries(dashboard):
            expr = substitute(query.expr, values)
            series = evaluate(stack, expr, query.instant, swept)
            checked += 1
            if not series:
                empty.append(f"{query.name}: {expr}")
    assert checked >= 40
    assert not empty, f"{len(empty)} of {checked} queries returned no series:\n" + "\n".join(empty)


def test_step_params_reach_the_comparison_table(prometheus: Stack, swept: SweepRun) -> None:
    """The comparison join yields one row per step, labelled with the sweep axis."""
    stack = prometheus
    dashboard = load_dashboards(REPO / "dashboards" / "json")["cephscope-sweep-comparison"]
    values = resolve_variables(stack.prometheus, dashboard, swept.run_id, swept.start - 10, swept.end + 5)
    values.update(grafana_builtins(swept))
    values["__range"] = f"{int(swept.end - swept.start) + 15}s"
    table = next(q for q in panel_queries(dashboard) if "group_left" in q.expr)
    rows = prometheus_get(stack, "/api/v1/query",
                          {"query": substitute(table.expr, values), "time": str(swept.end + 5)})
    by_step = {r["metric"]["step"]: r["metric"] for r in rows["result"]}
    assert set(by_step) == {s["step"] for s in swept.steps}
    assert {m["concurrent_ops"] for m in by_step.values()} == {"8", "16"}
    assert all(float(r["value"][1]) > 100 for r in rows["result"])  # IOPS of a real bench


def test_every_cookbook_query_returns_series(prometheus: Stack, swept: SweepRun) -> None:
    stack = prometheus
    queries = cookbook_queries((REPO / "docs" / "promql-cookbook.md").read_text())
    assert len(queries) >= 6
    values = {"run": swept.run_id, "step": swept.steps[-1]["step"], **grafana_builtins(swept)}
    empty = []
    for query in queries:
        expr = substitute(query, values)
        if not evaluate(stack, expr, True, swept) and not evaluate(stack, expr, False, swept):
            empty.append(expr)
    assert not empty, "cookbook queries without data:\n" + "\n".join(empty)


def _scrapes_around(stack: Stack, metric: str, before: float, after: float) -> tuple[float, float]:
    """Of one series, the last scrape that began a scrape interval before `before` (its
    socket reads long done by then) and the first that began after `after` (a sample's
    timestamp is when its scrape began; the exporter reads the sockets after that)."""
    at = after + 15
    result = prometheus_get(stack, "/api/v1/query",
                            {"query": f"{metric}[{int(at - before) + 30}s]", "time": str(at)})
    assert len(result["result"]) == 1, (metric, result["result"])
    samples = [(float(t), float(v)) for t, v in result["result"][0]["values"]]
    return ([v for t, v in samples if t < before - 5][-1],
            next(v for t, v in samples if t > after))


def test_exporter_mds_and_rgw_series_follow_the_traffic(
        prometheus: Stack, traffic_and_sweep: tuple[SweepRun, ServiceTraffic]) -> None:
    """During the sweep's steps Prometheus holds the exporter's MDS and gateway series, and
    the gateway's counters moved by exactly the requests the traffic made: every PUT, GET and
    request between the last scrape before it started and the first after it stopped."""
    swept, traffic = traffic_and_sweep
    stack = prometheus
    assert traffic.swift.puts >= 8 and traffic.files >= 8, traffic
    time.sleep(max(0.0, traffic.stopped + 7 - time.time()))  # a scrape after it stopped
    exporter = 'job="cephscope-exporter"'
    made = {"ceph_rgw_put": traffic.swift.puts, "ceph_rgw_get": traffic.swift.gets,
            "ceph_rgw_req": traffic.swift.puts + traffic.swift.gets + traffic.swift.deletes
            + traffic.swift.other}
    for metric, requests in made.items():
        before, after = _scrapes_around(stack, f'{metric}{{{exporter}, instance_id="a"}}',
                                        traffic.started, traffic.stopped)
        assert after - before == requests, (metric, before, after, traffic.swift)
    before, after = _scrapes_around(
        stack, f'ceph_mds_server_handle_client_request{{{exporter}, ceph_daemon="mds.a"}}',
        traffic.started, traffic.stopped)
    assert after - before >= traffic.files, (before, after, traffic.files)
    # and every step of the sweep has its MDS and gateway figures recorded, moving
    window = f"[{int(swept.end - swept.start) + 15}s]"
    for name in (names.STEP_MDS_REQUESTS, names.STEP_RGW_OPS):
        query = f'max by (step) (max_over_time({name}{{run="{swept.run_id}"}}{window}))'
        rows = prometheus_get(stack, "/api/v1/query",
                              {"query": query, "time": str(swept.end + 5)})["result"]
        by_step = {r["metric"]["step"]: float(r["value"][1]) for r in rows}
        assert set(by_step) == {s["step"] for s in swept.steps}, (name, by_step)
        assert all(v > 0 for v in by_step.values()), (name, by_step)


# The two servers scrape the exporter at nearly the same moments (the same target gets the
# same scrape offset), so the report's step p99, taken from the stored cumulative buckets over
# the step's window, is the same figure from either storage: measured 42.45 / 42.45 ms and
# 61.42 / 61.43 ms (classic / native). Each server evaluates the recorded step p99 on its own
# schedule, and a panel's 20 s rate window at the step's end reaches into the step before it,
# holding one sample more on 2.x (closed range) than on 3.x (left-open): measured 47.4 / 45.1
# and 48.5 / 61.4 ms. A histogram read in the wrong storage shape gives no figure at all.
REPORT_TOLERANCE = 0.05
WINDOWED_TOLERANCE = 0.5


def _p(values: list[float]) -> str:
    return ", ".join(f"{v * 1000:.2f} ms" for v in values)


def test_osd_latency_percentiles_agree_on_classic_and_native_storage(
        stack: Stack, stack3: Stack, swept: SweepRun) -> None:
    """Prometheus 2.42 (classic `_bucket` series) and 3.5 (one native histogram with custom
    buckets per OSD and op) scraping the same exporter give each step the same OSD p50/p99 in
    the report (from the stored histograms), in the recorded step p99 and in the dashboards'
    p99 panel query."""
    assert not stack.native_histograms and stack3.native_histograms
    assert stack.query(f"count({OSD_OP_LATENCY_HISTOGRAM}_bucket)")
    assert not stack3.query(f"{OSD_OP_LATENCY_HISTOGRAM}_bucket")
    native = stack3.query(OSD_OP_LATENCY_HISTOGRAM)
    assert native and all("histogram" in s for s in native)
    panel = STACK_FIGURES.with_window("20s").osd_op_latency_quantile(0.99)
    for row in swept.steps:
        start, end = row["start"], row["end"]
        figures = [summarize_system(pull_step_window(s.prometheus_url, start, end),
                                    window=(start, end), mode="write") for s in (stack, stack3)]
        for quantile in ("50", "99"):
            classic, nhcb = (f.osd_latency_percentiles.get(quantile) for f in figures)
            assert classic and nhcb, (row["step"], quantile, classic, nhcb)
            assert math.isclose(classic, nhcb, rel_tol=REPORT_TOLERANCE), (
                f"step {row['step']} p{quantile}: {_p([classic, nhcb])}")
        print(f"step {row['step']} report p99 classic/native: "
              f"{_p([f.osd_latency_percentiles['99'] for f in figures])}")
        recorded = [s.query(f'max(max_over_time(cephscope_step:osd_op_latency_seconds:p99'
                            f'{{run="{swept.run_id}", step="{row["step"]}"}}[{end - start:.0f}s]))',
                            at=end) for s in (stack, stack3)]
        assert all(recorded), (row["step"], recorded)
        rule = [float(r[0]["value"][1]) for r in recorded]
        assert math.isclose(*rule, rel_tol=WINDOWED_TOLERANCE), f"recorded p99: {_p(rule)}"
        answers = [s.query(panel, at=end) for s in (stack, stack3)]
        queried = [float(a[0]["value"][1]) for a in answers]
        assert math.isclose(*queried, rel_tol=WINDOWED_TOLERANCE), f"panel p99: {_p(queried)}"
        print(f"  recorded {_p(rule)}, panel query {_p(queried)}")
