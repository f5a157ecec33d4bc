"""Past one Prometheus, live: an edge stack (Prometheus 3.5, native histograms) scrapes the dev
cluster, evaluates the per-host recording rules and remote-writes what the dashboards, the
alerts and the report read to a second Prometheus 3.5 started as a remote-write receiver (the
stand-in for Thanos, Mimir or VictoriaMetrics). A short sweep's report read from the receiver
has the same figures as the one read from the edge; the receiver holds fewer series, evaluates
the cluster-wide rules and the alerts, and the edge none of the alerts."""

from __future__ import annotations

import dataclasses
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cephscope import forwarding
from cephscope.deploy import rootfs
from cephscope.deploy.devcluster import DevCluster
from cephscope.deploy.stack import Stack
from cephscope.runner.report.build import Row, write_report
from tests.live.conftest import free_port_base
from tests.live.sweeps import run_sweep

# 12 s: at least two scrapes of every target inside the step, so every figure of the report
# (CPU, disks and NICs from the raw counters too) is there to compare
SPEC = """\
name: remote-write-live
benchmarks:
  radosbench:
    op_size: 4096
    concurrent_ops: 16
    time: 12
    write_only: true
"""


@pytest.fixture(scope="module")
def central_and_edge(devcluster: DevCluster, stack: Stack,
                     tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stack, Stack]]:
    rootfs.build("tentacle")  # Prometheus 3.5 comes from sid, as Tentacle does (cached)
    avoid = {devcluster.port_base, stack.port_base}
    central = Stack(tmp_path_factory.mktemp("central"), port_base=free_port_base(8, avoid=avoid),
                    prometheus_release="3", remote_write_receiver=True)
    edge = Stack(tmp_path_factory.mktemp("edge"),
                 port_base=free_port_base(8, avoid=avoid | {central.port_base}),
                 asok_dir=devcluster.asok_dir, ceph_conf=devcluster.conf_path,
                 prometheus_release="3", remote_write_url=f"{central.prometheus_url}/api/v1/write")
    try:
        central.up()
        edge.up()
        edge.wait_for_series('up{job="cephscope-exporter"} == 1', timeout=60)
        yield central, edge
    finally:
        edge.purge()
        central.purge()


def _latest_scrape(stack: Stack) -> float:
    found = stack.query('max(timestamp(up{job="cephscope-exporter"}))')
    return float(found[0]["value"][1]) if found else 0.0


def _report_rows(run_dir: Path, copy: Path, prometheus_url: str) -> list[Row]:
    """The run's report with every step's system figures pulled afresh from `prometheus_url`
    (the sweep stored the edge's: they are removed from the copy)."""
    shutil.copytree(run_dir, copy)
    for stored in copy.glob("step-*/prometheus.json"):
        stored.unlink()
    return write_report(copy, prometheus_url, plots=False).rows


def test_the_report_read_from_the_receiver_equals_the_edges(
        devcluster: DevCluster, central_and_edge: tuple[Stack, Stack], tmp_path: Path) -> None:
    central, edge = central_and_edge
    run = run_sweep(devcluster, edge, SPEC, tmp_path / "run")
    # the receiver has the edge's scrapes up to one interval past the run's end (the report
    # reads that far) once the last remote-write batch is in
    deadline = time.monotonic() + 60
    while _latest_scrape(central) < run.end + 6 or _latest_scrape(edge) < run.end + 6:
        assert time.monotonic() < deadline, (run.end, _latest_scrape(edge), _latest_scrape(central))
        time.sleep(1)
    time.sleep(2)
    from_edge = _report_rows(run.run_dir, tmp_path / "edge", edge.prometheus_url)
    from_central = _report_rows(run.run_dir, tmp_path / "central", central.prometheus_url)
    done = [(a, b) for a, b in zip(from_edge, from_central, strict=True) if a.status == "done"]
    assert done
    for at_edge, at_central in done:
        assert at_edge.system.osd_latency_percentiles.get("99")  # figures, not two empties
        assert at_edge.system.cpu_busy_ratio is not None and at_edge.system.thread_groups
        assert at_edge.system.osd_ops_per_second
        assert dataclasses.asdict(at_central.system) == dataclasses.asdict(at_edge.system)
        assert at_central.scrape_interval == at_edge.scrape_interval
        assert at_central.rate_window == at_edge.rate_window

    # The cut: only what is read leaves the edge, native histograms and recordings included.
    scraped = 'count({job=~"cephscope-exporter|node"})'
    edge_series, central_series = (float(s.query(scraped)[0]["value"][1]) for s in (edge, central))
    print(f"exporter and node_exporter series: edge {edge_series:.0f}, receiver "
          f"{central_series:.0f} ({central_series / edge_series:.0%})")
    assert central_series < 0.8 * edge_series
    names = 'group by (__name__) ({job=~"cephscope-exporter|node"})'
    edge_names, central_names = ({s["metric"]["__name__"] for s in stack.query(names)}
                                 for stack in (edge, central))
    kept_at_edge = {name for name in edge_names if not forwarding.is_forwarded(name)}
    assert kept_at_edge  # something was cut
    assert not kept_at_edge & central_names
    assert all("histogram" in s for s in central.query("cephscope_osd_op_latency_seconds"))
    assert central.query("ceph_daemon:cephscope_osd_op_latency_seconds:p99")  # the edge's rule
    recorded = central.query(f'cephscope_step:osd_ops:rate{{run="{run.run_id}"}}[10m]')
    assert recorded  # the receiver's own cluster-wide rule over the forwarded series
    alerting = {stack.prometheus_url: [r for g in stack.prometheus.get("rules")["groups"]
                                       for r in g["rules"] if r["type"] == "alerting"]
                for stack in (edge, central)}
    assert not alerting[edge.prometheus_url] and alerting[central.prometheus_url]
