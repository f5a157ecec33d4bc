"""Series per OSD of an exposition, by collector and family (exporter/cardinality.py)."""

from __future__ import annotations

import pytest

from cephscope.exporter.cardinality import collector_of, count_series

TEXT = """\
# HELP ceph_osd_op_w_latency_sum x
# TYPE ceph_osd_op_w_latency_sum gauge
ceph_osd_op_w_latency_sum{ceph_daemon="osd.0"} 1.5
ceph_osd_op_w_latency_sum{ceph_daemon="osd.12"} 1.5
ceph_osd_op_w_latency_sum{ceph_daemon="mon.a"} 2
# TYPE ceph_AsyncMessenger_Worker_msgr_recv_bytes counter
ceph_AsyncMessenger_Worker_msgr_recv_bytes{ceph_daemon="osd.0",id="0"} 10
# TYPE cephscope_osd_op_latency_seconds histogram
cephscope_osd_op_latency_seconds_bucket{ceph_daemon="osd.0",op="w",le="0.0001"} 0
cephscope_osd_op_latency_seconds_bucket{ceph_daemon="osd.0",op="w",le="+Inf"} 3
cephscope_osd_op_latency_seconds_sum{ceph_daemon="osd.0",op="w"} 0.3
cephscope_osd_op_latency_seconds_count{ceph_daemon="osd.0",op="w"} 3
# TYPE cephscope_osd_thread_cpu_seconds_total counter
cephscope_osd_thread_cpu_seconds_total{ceph_daemon="osd.12",thread_group="a b}c"} 1
# TYPE cephscope_scrape_collector_success gauge
cephscope_scrape_collector_success{collector="perf"} 1
# TYPE cephscope_new_family gauge
cephscope_new_family{ceph_daemon="osd.0"} 1
"""


def test_counts_per_osd_by_collector_and_family() -> None:
    counts = count_series(TEXT)
    assert counts.osds == ["osd.0", "osd.12"]
    assert counts.osd_totals() == {"osd.0": 7, "osd.12": 2}
    assert counts.max_per_osd() == 7
    assert counts.per_osd["osd.0"][("histogram", "cephscope_osd_op_latency_seconds")] == 4
    assert counts.per_osd["osd.0"][("labeled", "ceph_AsyncMessenger_Worker_msgr_recv_bytes")] == 1
    assert counts.per_osd["osd.0"][("perf", "ceph_osd_op_w_latency_sum")] == 1
    assert counts.per_osd["osd.0"][("unknown", "cephscope_new_family")] == 1
    assert counts.per_osd["osd.12"][("threads", "cephscope_osd_thread_cpu_seconds_total")] == 1
    assert counts.mean_per_osd() == 4.5
    assert counts.mean_per_osd(collector="perf") == 1.0
    assert counts.mean_per_osd(key=("histogram", "cephscope_osd_op_latency_seconds")) == 2.0
    # other daemons and the host's own series are not per OSD
    assert counts.other_daemons == {"mon.a": 1}
    assert counts.per_host == {("scrape", "cephscope_scrape_collector_success"): 1}


def test_a_perf_counter_named_like_a_histogram_part_stays_its_own_family() -> None:
    # ceph-exporter's long-running averages are gauge/counter families ending in _sum/_count
    counts = count_series(TEXT)
    assert ("perf", "ceph_osd_op_w_latency") not in counts.families()


def test_an_empty_exposition_has_no_osd() -> None:
    counts = count_series("")
    assert (counts.osds, counts.max_per_osd(), counts.mean_per_osd()) == ([], 0, 0.0)


def test_a_line_that_is_not_a_sample_is_an_error() -> None:
    with pytest.raises(ValueError, match="not a sample line"):
        count_series("{ceph_daemon=\"osd.0\"} 1\n")


@pytest.mark.parametrize(("family", "labels", "collector"), [
    ("cephscope_osd_op_size_bytes", {}, "histogram"),
    ("cephscope_osd_op_queue_items", {}, "opqueue"),
    ("cephscope_osd_op_shards", {}, "opqueue"),
    ("cephscope_osd_op_phase_duration_seconds", {}, "ops"),
    ("cephscope_osd_ops_in_flight", {}, "ops"),
    ("cephscope_osd_resident_memory_bytes", {}, "threads"),
    ("cephscope_osd_device_info", {}, "topology"),
    ("cephscope_daemon_up", {}, "scrape"),
    ("ceph_bluestore_commit_lat_count", {"ceph_daemon": "osd.0"}, "perf"),
])
def test_collector_of_each_family(family: str, labels: dict[str, str], collector: str) -> None:
    assert collector_of(family, labels) == collector
