"""opqueue / ops / threads collectors on the real dev cluster, through the stack's exporter.

A short rados bench (4 KiB writes, 32 in flight) runs while the running exporter is scraped:
tp_osd_tp CPU grows on every OSD, every shard of every OSD has op-queue series (as many shards
as the OSD's own config says), in-flight gauges are there, the historic ops land in the phase
histogram, and Prometheus computes the queue-wait recording rule from the perf counters. Under
that load the default exposition holds the series budget per OSD (docs/metrics.md).
"""

from __future__ import annotations

import subprocess
import time
from typing import Any

from cephscope.dashboards import rule_names as names
from cephscope.deploy.devcluster import DevCluster
from cephscope.deploy.stack import Stack, http_get
from cephscope.exporter.asok import AsokClient
from cephscope.exporter.cardinality import BUDGET_SERIES_PER_OSD, count_series

BENCH_SECONDS = 8


def exposition(stack: Stack) -> str:
    return http_get(stack.exporter_url + "/metrics", timeout=15).decode()


def samples_of(text: str) -> dict[str, float]:
    samples: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            samples[key] = float(value)
    return samples


def scrape(stack: Stack) -> dict[str, float]:
    return samples_of(exposition(stack))


def expected_shards(devcluster: DevCluster, osd_id: int) -> int:
    """What OSD::get_num_op_shards() picks: the option, else its _hdd/_ssd variant."""
    client = AsokClient(devcluster.osd_asok(osd_id))
    configured = int(client.config_get("osd_op_num_shards"))
    if configured:
        return configured
    rotational = devcluster.ceph_json("osd", "metadata", str(osd_id))["rotational"] == "1"
    return int(client.config_get("osd_op_num_shards_hdd" if rotational else "osd_op_num_shards_ssd"))


def value(samples: dict[str, float], name: str, **labels: Any) -> float:
    key = name + "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"
    assert key in samples, f"{key} not exported"
    return samples[key]


def test_op_queue_ops_and_threads_under_rados_bench(devcluster: DevCluster, stack: Stack) -> None:
    osds = [f"osd.{i}" for i in devcluster.osd_ids()]
    # The history keeps the slowest ops of the last osd_op_history_duration (600 s): slower ops
    # of earlier tests (e.g. an injected dispatch delay) would keep this bench's ops out of it.
    # A short duration lets the bench's ops replace them; restored below.
    devcluster.ceph("config", "set", "osd", "osd_op_history_duration", "2")
    try:
        time.sleep(3)
        check_under_rados_bench(devcluster, stack, osds)
    finally:
        devcluster.ceph("config", "rm", "osd", "osd_op_history_duration")


def check_under_rados_bench(devcluster: DevCluster, stack: Stack, osds: list[str]) -> None:
    before = scrape(stack)
    bench = subprocess.Popen(
        devcluster.rados_argv("-p", devcluster.bench_pool, "bench", str(BENCH_SECONDS), "write",
                              "-b", "4096", "-t", "32", "--no-cleanup"),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    during: list[dict[str, float]] = []
    largest = 0  # series of the busiest OSD in any scrape under load
    try:
        time.sleep(2)
        while bench.poll() is None and len(during) < 6:
            text = exposition(stack)
            during.append(samples_of(text))
            counted = count_series(text)
            assert set(counted.per_osd) == set(osds), counted.osds
            largest = max(largest, counted.max_per_osd())
            time.sleep(0.5)
        output, _ = bench.communicate(timeout=BENCH_SECONDS + 60)
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.wait()
    assert bench.returncode == 0, output.decode(errors="replace")[-500:]
    after = scrape(stack)
    subprocess.run(devcluster.rados_argv("-p", devcluster.bench_pool, "cleanup"),
                   capture_output=True, timeout=120, check=False)

    for collector in ("opqueue", "ops", "threads"):
        assert value(after, "cephscope_scrape_collector_success", collector=collector) == 1
    assert during, "rados bench ended before any scrape"
    assert 0 < largest <= BUDGET_SERIES_PER_OSD, f"{largest} series per OSD under load"
    for osd_id, osd in zip(devcluster.osd_ids(), osds, strict=True):
        # Thread CPU: the op workers did the writes.
        grown = value(after, "cephscope_osd_thread_cpu_seconds_total", ceph_daemon=osd,
                      thread_group="tp_osd_tp") - value(
            before, "cephscope_osd_thread_cpu_seconds_total", ceph_daemon=osd,
            thread_group="tp_osd_tp")
        assert grown > 0, f"{osd}: tp_osd_tp CPU did not grow"
        assert value(after, "cephscope_osd_resident_memory_bytes", ceph_daemon=osd) > 50e6
        assert value(after, "cephscope_osd_threads", ceph_daemon=osd) >= value(
            after, "cephscope_osd_thread_group_threads", ceph_daemon=osd, thread_group="tp_osd_tp")
        # Op queue: one series per shard (the weighted queue client ops wait in; the strict
        # queue is one flag away), as many shards as the OSD's config says.
        shards = expected_shards(devcluster, osd_id)
        for samples in (after, *during):
            assert value(samples, "cephscope_osd_op_shards", ceph_daemon=osd) == shards
            for shard in range(shards):
                assert value(samples, "cephscope_osd_op_queue_items", ceph_daemon=osd,
                             shard=shard, queue="normal") >= 0
                high = f'ceph_daemon="{osd}",shard="{shard}",queue="high"'
                assert f"cephscope_osd_op_queue_items{{{high}}}" not in samples
            beyond = f'ceph_daemon="{osd}",shard="{shards}",queue="normal"'
            assert f"cephscope_osd_op_queue_items{{{beyond}}}" not in samples
        # Ops: gauges always there; the bench's slowest ops land in the phase histogram.
        for samples in (before, after, *during):
            assert value(samples, "cephscope_osd_ops_in_flight", ceph_daemon=osd) >= 0
            assert value(samples, "cephscope_osd_ops_blocked", ceph_daemon=osd) >= 0
        assert value(after, "cephscope_osd_op_phase_duration_seconds_count", ceph_daemon=osd,
                     phase="queue") > value(
            before, "cephscope_osd_op_phase_duration_seconds_count", ceph_daemon=osd,
            phase="queue")
    # 32 writes in flight spread over the OSDs: some scrape saw ops in flight.
    assert max(sum(value(s, "cephscope_osd_ops_in_flight", ceph_daemon=o) for o in osds)
               for s in during) > 0

    # Prometheus scraped the series and evaluates the queue-wait rule from the perf counters.
    assert len(stack.wait_for_series('cephscope_osd_op_shards{job="cephscope-exporter"}',
                                     timeout=20)) == len(osds)
    waits = stack.wait_for_series(
        f'{names.OSD_OP_QUEUE_WAIT}{{op="w"}}', timeout=25)
    assert {w["metric"]["ceph_daemon"] for w in waits} <= set(osds)
    assert all(0 <= float(w["value"][1]) < 10 for w in waits)
