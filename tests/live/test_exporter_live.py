"""Exporter on the real dev cluster, read through the stack's real Prometheus.

rados bench writes 4 KiB objects for BENCH_SECONDS; then, from what Prometheus scraped off
cephscope-exporter during the bench:
- ``sum(rate(ceph_osd_op_w[...]))`` agrees with rados bench's own average IOPS within 10 %
  (pool size 1: one client write is one OSD write op);
- the p99 write latency from ``cephscope_osd_op_latency_seconds`` lies between rados
  bench's min and max latency, for the cluster and for every OSD.
"""

from __future__ import annotations

import subprocess
import time

from cephscope.deploy.capture_fixtures import parse_bench_output
from cephscope.deploy.devcluster import DevCluster
from cephscope.deploy.stack import Stack

BENCH_SECONDS = 24
# Scrapes every 5 s: leave the first seconds (ramp-up) and the end (drain) out of the window.
EDGE_SECONDS = 3


def scalar(stack: Stack, promql: str, at: float) -> float:
    result = stack.query(promql, at=at)
    assert len(result) == 1, f"{promql}: {result}"
    return float(result[0]["value"][1])


def test_write_iops_and_p99_match_rados_bench(devcluster: DevCluster, stack: Stack) -> None:
    osds = [f"osd.{i}" for i in devcluster.osd_ids()]
    up = stack.wait_for_series('cephscope_daemon_up{ceph_daemon=~"osd.*"} == 1', timeout=60)
    assert sorted(s["metric"]["ceph_daemon"] for s in up) == sorted(osds)

    started = time.time()
    proc = subprocess.run(
        devcluster.rados_argv(
            "-p", devcluster.bench_pool, "bench", str(BENCH_SECONDS), "write",
            "-b", "4096", "-t", "16", "--no-cleanup",
        ),
        capture_output=True, timeout=BENCH_SECONDS + 120, check=False,
    )
    ended = time.time()
    output = proc.stdout.decode(errors="replace")
    assert proc.returncode == 0, output[-2000:] + proc.stderr.decode(errors="replace")[-2000:]
    bench = parse_bench_output(output)
    assert bench["average_iops"] > 0 and bench["max_latency_s"] > bench["min_latency_s"] > 0

    # Wait until Prometheus has scraped past the end of the window.
    at = ended - EDGE_SECONDS
    window = int(at - (started + EDGE_SECONDS))
    time.sleep(max(0.0, at + 2 * stack.scrape_interval_seconds - time.time()))

    iops = scalar(stack, f"sum(rate(ceph_osd_op_w[{window}s]))", at)
    assert abs(iops - bench["average_iops"]) <= 0.10 * bench["average_iops"], (
        f"Prometheus {iops:.0f} IOPS vs rados bench {bench['average_iops']:.0f}"
    )

    p99 = scalar(
        stack,
        "histogram_quantile(0.99, sum by (le) "
        f'(rate(cephscope_osd_op_latency_seconds_bucket{{op="w"}}[{window}s])))',
        at,
    )
    assert bench["min_latency_s"] <= p99 <= bench["max_latency_s"], (p99, bench)
    per_osd = stack.query(
        "histogram_quantile(0.99, sum by (le, ceph_daemon) "
        f'(rate(cephscope_osd_op_latency_seconds_bucket{{op="w"}}[{window}s])))',
        at=at,
    )
    assert sorted(s["metric"]["ceph_daemon"] for s in per_osd) == sorted(osds)
    for series in per_osd:
        value = float(series["value"][1])
        assert bench["min_latency_s"] <= value <= bench["max_latency_s"], (series, bench)

    # The mean from the histogram's _sum/_count matches the perf counter's average.
    mean_hist = scalar(
        stack,
        f'sum(rate(cephscope_osd_op_latency_seconds_sum{{op="w"}}[{window}s])) / '
        f'sum(rate(cephscope_osd_op_latency_seconds_count{{op="w"}}[{window}s]))',
        at,
    )
    mean_perf = scalar(
        stack,
        f"sum(rate(ceph_osd_op_w_latency_sum[{window}s])) / "
        f"sum(rate(ceph_osd_op_w_latency_count[{window}s]))",
        at,
    )
    assert abs(mean_hist - mean_perf) <= 0.05 * mean_perf
    print(
        f"\nexporter live: Prometheus {iops:.0f} IOPS vs rados bench {bench['average_iops']:.0f};"
        f" p99 {p99 * 1000:.1f} ms (rados bench min {bench['min_latency_s'] * 1000:.1f},"
        f" avg {bench['average_latency_s'] * 1000:.1f}, max {bench['max_latency_s'] * 1000:.1f} ms);"
        f" mean {mean_hist * 1000:.2f} ms (histogram) vs {mean_perf * 1000:.2f} ms (perf)"
    )
    # This part's collectors succeeded during the bench.
    failed = stack.query(
        'cephscope_scrape_collector_success{collector=~"perf|histogram"} == 0', at=at
    )
    assert not failed, failed
