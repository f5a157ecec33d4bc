"""Both benchmark classes run for real, a few seconds each, against the session dev cluster;
and the report's OSD topology comes from the live stack."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from cephscope.deploy.devcluster import DevCluster
from cephscope.runner.benchmarks import BENCHMARKS
from cephscope.runner.benchmarks.base import BenchContext, BenchResult, ClusterAccess, LiveSample
from cephscope.runner.report.build import fetch_topology


def _ctx(cluster: DevCluster, pool: str, step_dir: Path, step_id: str,
         samples: list[tuple[str, LiveSample]]) -> BenchContext:
    return BenchContext(
        cluster=ClusterAccess(cluster.conf_path),
        pool=pool,
        step_dir=step_dir,
        run_id="live",
        step_id=step_id,
        report_progress=lambda mode, sample: samples.append((mode, sample)),
        env={"CEPH_CONF": str(cluster.conf_path)},
        timeout_seconds=120,
    )


def _sane(result: BenchResult) -> None:
    assert result.iops > 0
    assert result.bandwidth_bytes_per_second > 0
    assert result.ops and result.ops > 0
    assert 0 < result.latency_min_seconds <= result.latency_avg_seconds
    assert result.latency_avg_seconds <= result.latency_max_seconds < 30
    # a 4 KiB op on 127.0.0.1 takes between a few microseconds and a second on average
    assert 1e-5 < result.latency_avg_seconds < 1.0


def test_radosbench_runs_for_real(devcluster: DevCluster, tmp_path: Path) -> None:
    params = {"op_size": 4096, "concurrent_ops": 8, "concurrent_procs": 2, "time": 3,
              "readmode": "rand"}
    assert BENCHMARKS["radosbench"].validate(params) == []
    samples: list[tuple[str, LiveSample]] = []
    ctx = _ctx(devcluster, devcluster.bench_pool, tmp_path / "rb", "liverb", samples)
    bench = BENCHMARKS["radosbench"](params)
    results = []
    try:
        bench.prepare(ctx)
        for mode in bench.modes():
            bench.run(mode, ctx)
            results.append(bench.parse(mode, ctx))
    finally:
        bench.cleanup(ctx)
    assert [r.mode for r in results] == ["write", "rand"]
    for result in results:
        _sane(result)
        assert result.extra["processes"] == 2
        assert result.latency_percentiles_seconds == {}  # rados bench has none
    # per-second figures arrived while the tool ran
    write_samples = [s for mode, s in samples if mode == "write"]
    assert len(write_samples) >= 2
    assert any((s.ops_per_second or 0) > 0 for s in write_samples)
    # cleanup removed this step's objects (and the run-name metadata objects)
    listing = subprocess.run(devcluster.rados_argv("-p", devcluster.bench_pool, "ls"),
                             capture_output=True, text=True, timeout=60, check=True).stdout
    assert "cephscope-liverb-" not in listing
    assert not any(f"_{pid}_object" in listing for pid in bench._pids.values())


def test_librbdfio_runs_for_real(devcluster: DevCluster, tmp_path: Path) -> None:
    params = {"mode": "randread", "op_size": 4096, "iodepth": 8, "vol_size": 64,
              "vol_object_size": "1M", "time": 3}
    assert BENCHMARKS["librbdfio"].validate(params) == []
    samples: list[tuple[str, LiveSample]] = []
    ctx = _ctx(devcluster, devcluster.rbd_pool, tmp_path / "fio", "livefio", samples)
    bench = BENCHMARKS["librbdfio"](params)
    image = f"{devcluster.rbd_pool}/cephscope-livefio-0"
    try:
        bench.prepare(ctx)
        info = json.loads(subprocess.run(
            devcluster.rbd_argv("info", "--format", "json", image),
            capture_output=True, text=True, timeout=60, check=True).stdout)
        assert info["object_size"] == 1 << 20
        assert info["size"] == 64 << 20
        (mode,) = bench.modes()
        bench.run(mode, ctx)
        result = bench.parse(mode, ctx)
    finally:
        bench.cleanup(ctx)
    _sane(result)
    pct = result.latency_percentiles_seconds
    for key in ("50", "90", "99", "99.9"):
        assert key in pct and pct[key] > 0
    ordered = [pct[k] for k in sorted(pct, key=float)]
    assert ordered == sorted(ordered)
    assert pct["99"] <= result.latency_max_seconds * 1.01
    assert (tmp_path / "fio" / "fio-prefill.0.json").exists()  # reads ran on written data
    assert len([s for _m, s in samples]) >= 2
    images = subprocess.run(devcluster.rbd_argv("ls", devcluster.rbd_pool), capture_output=True,
                            text=True, timeout=60, check=True).stdout.split()
    assert "cephscope-livefio-0" not in images


@pytest.mark.timeout(120)
def test_report_topology_is_the_osds_devices(stack, devcluster: DevCluster) -> None:
    deadline = time.monotonic() + 90
    topology = fetch_topology(stack.prometheus_url)
    while len(topology.devices) < len(devcluster.osd_ids()) and time.monotonic() < deadline:
        time.sleep(3)  # the exporter's first scrape may not have happened yet
        topology = fetch_topology(stack.prometheus_url)
    # one data device per OSD (loop devices on the dev cluster), all traffic on lo
    assert len(topology.devices) >= len(devcluster.osd_ids())
    assert "lo" in topology.interfaces
