"""Latency x size histograms collapsed into Prometheus histograms."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cephscope.exporter.collectors import enabled_collectors
from cephscope.exporter.collectors.histogram import Axis, _matrix, cumulative
from tests.unit.fake_asok import (
    CEPH_VERSION,
    FIXTURES_ROOT,
    FakeCluster,
    capture_dir,
    exporter_args,
    only_collectors,
    parse_samples,
    scrape_once,
)


def test_log2_axis_bounds_follow_perf_histogram() -> None:
    # The OSD's latency axis: log2, min 0, quant 100 us (in ns), 32 buckets.
    axis = Axis("log2", 0, 100_000, 32)
    bounds = axis.exclusive_upper_bounds()
    assert len(bounds) == 31
    assert bounds[:4] == [0, 100_000, 200_000, 400_000]
    assert bounds[-1] == 100_000 * 2**29


def test_linear_axis_bounds() -> None:
    axis = Axis("linear", 10, 5, 5)
    assert axis.exclusive_upper_bounds() == [10, 15, 20, 25]


def test_axis_from_dump_agrees_with_the_ranges_ceph_prints() -> None:
    dump = json.loads((capture_dir("load", "osd.0") / "perf_histogram_dump.json").read_bytes())
    for hist in dump["osd"].values():
        for axis_doc in hist["axes"]:
            axis = Axis.from_dump(axis_doc)
            ranges = axis_doc["ranges"]
            # Ceph's "max" of bucket i is our exclusive bound minus one.
            assert [r["max"] + 1 for r in ranges[:-1]] == axis.exclusive_upper_bounds()


def test_bad_axis_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="scale_type"):
        Axis.from_dump({"scale_type": "log10", "min": 0, "quant_size": 1, "buckets": 4})


def p99_from_buckets(buckets: list[tuple[float, float]]) -> float:
    """histogram_quantile(0.99) the way Prometheus interpolates."""
    total = buckets[-1][1]
    rank = 0.99 * total
    prev_le, prev_count = 0.0, 0.0
    for le, count in buckets:
        if count >= rank:
            if le == float("inf"):
                return prev_le
            return prev_le + (le - prev_le) * (rank - prev_count) / (count - prev_count)
        prev_le, prev_count = le, count
    raise AssertionError("unreachable")


# Every op kind, every bucket, and the size histogram: the default leaves them out.
EVERY_HISTOGRAM = ("--collector.histogram.ops=r,w,rw", "--collector.histogram.latency-max-seconds=0",
                   "--collector.histogram.size")


def scrape_load(tmp_path: Path, *flags: str) -> dict[str, float]:
    cluster = FakeCluster(tmp_path / "run")
    cluster.add_osd(0, scenario="load")
    try:
        return parse_samples(scrape_once(tmp_path / "run", *only_collectors("histogram"), *flags))
    finally:
        cluster.stop()


def test_load_capture_collapses_size_axis(tmp_path: Path) -> None:
    samples = scrape_load(tmp_path, *EVERY_HISTOGRAM)
    capture = capture_dir("load", "osd.0")
    hist = json.loads((capture / "perf_histogram_dump.json").read_bytes())["osd"]
    perf = json.loads((capture / "perf_dump.json").read_bytes())["osd"]
    matrix = hist["op_w_latency_in_bytes_histogram"]["values"]
    total = sum(map(sum, matrix))
    assert total > 1000
    prefix = 'cephscope_osd_op_latency_seconds_bucket{ceph_daemon="osd.0",op="w",le='
    buckets = sorted(
        (float(key[len(prefix) + 1 : -2]), value)
        for key, value in samples.items()
        if key.startswith(prefix)
    )
    counts = [c for _, c in buckets]
    assert counts == sorted(counts), "buckets must be cumulative"
    assert buckets[-1] == (float("inf"), total)
    # bucket 0 (below the axis' minimum of 0 ns) can hold nothing and has no line
    assert counts[:-1] == cumulative([sum(row) for row in matrix])[1:-1]
    assert buckets[0][0] == 0.0001
    labels = '{ceph_daemon="osd.0",op="w"}'
    assert samples["cephscope_osd_op_latency_seconds_count" + labels] == total
    assert samples["cephscope_osd_op_latency_seconds_sum" + labels] == pytest.approx(
        perf["op_w_latency"]["sum"]
    )
    # Mean from the histogram's own sum/count agrees with the OSD's op_w_latency average.
    assert samples["cephscope_osd_op_latency_seconds_sum" + labels] / total == pytest.approx(
        perf["op_w_latency"]["avgtime"], rel=0.05
    )
    # p99 lies within rados bench's own min..max latency of the captured run.
    manifest = json.loads((FIXTURES_ROOT / CEPH_VERSION / "manifest.json").read_text())
    bench = manifest["scenarios"]["load"]["bench_result"]
    p99 = p99_from_buckets(buckets)
    assert bench["min_latency_s"] <= p99 <= bench["max_latency_s"]
    # 4 KiB writes: every op in the 4096..8191 byte bucket.
    size = 'cephscope_osd_op_size_bytes_bucket{ceph_daemon="osd.0",op="w",le='
    assert samples[size + '"4095"}'] == 0
    assert samples[size + '"8191"}'] == total
    assert size + '"-1"}' not in samples
    for op in ("r", "w", "rw"):
        assert f'cephscope_osd_op_latency_seconds_count{{ceph_daemon="osd.0",op="{op}"}}' in samples


def test_default_is_r_and_w_latency_up_to_30_seconds(tmp_path: Path) -> None:
    default = scrape_load(tmp_path / "default")
    full = scrape_load(tmp_path / "full", *EVERY_HISTOGRAM)
    assert not any(k.startswith("cephscope_osd_op_size_bytes") for k in default)
    assert not any('op="rw"' in k for k in default)
    prefix = 'cephscope_osd_op_latency_seconds_bucket{ceph_daemon="osd.0",op="w",le='
    les = [k[len(prefix) + 1:-2] for k in default if k.startswith(prefix)]
    # 100 us x 2^k up to 26.2144 s: the last bound below 30 s
    assert les == [repr(0.0001 * 2**k) if k < 10 else str(round(0.0001 * 2**k, 4))
                   for k in range(19)] + ["+Inf"], les
    # every series the default shows, the full set shows with the same value
    assert all(full[k] == v for k, v in default.items()
               if not k.startswith("cephscope_scrape_collector_duration"))


def test_latency_max_keeps_the_slower_ops_in_inf(tmp_path: Path) -> None:
    samples = scrape_load(tmp_path, "--collector.histogram.latency-max-seconds=0.01")
    prefix = 'cephscope_osd_op_latency_seconds_bucket{ceph_daemon="osd.0",op="w",le='
    buckets = {k[len(prefix) + 1:-2]: v for k, v in samples.items() if k.startswith(prefix)}
    assert list(buckets) == ["0.0001", "0.0002", "0.0004", "0.0008", "0.0016", "0.0032",
                             "0.0064", "+Inf"]
    count = samples['cephscope_osd_op_latency_seconds_count{ceph_daemon="osd.0",op="w"}']
    assert buckets["+Inf"] == count > buckets["0.0064"]


@pytest.mark.parametrize(("flag", "message"), [
    ("--collector.histogram.ops=r,x", "expected a comma-separated list of r, w, rw"),
    ("--collector.histogram.ops=", "expected a comma-separated list"),
    ("--collector.histogram.latency-max-seconds=-1", "must be >= 0"),
])
def test_bad_histogram_flags_name_the_flag(flag: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as err:
        enabled_collectors(exporter_args("/nonexistent", flag))
    assert flag.split("=")[0] in str(err.value)


@pytest.mark.parametrize("bad", ["12", True, -1, 1.5, None, [1]])
def test_a_histogram_count_that_is_not_a_count_is_a_clear_error(bad: object) -> None:
    # Found by benchmarks/fuzz_scrape.py: a string count raised TypeError in the sums.
    assert _matrix([[1, 2], [3, 4]], 2, 2) == [[1, 2], [3, 4]]
    with pytest.raises(ValueError, match="is not a count"):
        _matrix([[1, 2], [3, bad]], 2, 2)
