"""fio's JSON output: parsers replayed on real fio 3.33 captures (json+ with status reports),
merged percentiles, live figures and failure paths."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cephscope.runner.benchmarks.base import BenchmarkError, LiveSample
from cephscope.runner.benchmarks.fio_json import (
    LiveAggregator,
    StreamScanner,
    final_report,
    iter_json_objects,
    parse_report_file,
    percentiles_from_bins,
    result_from_reports,
)
from tests.unit.bench_golden import TOOLS_DIR, check_golden

CAPTURES = {
    "fio-randread-4k-qd16-status1": ("randread", ["fio-3.33-rbd-randread-4k-qd16-status1.jsonplus"]),
    "fio-randwrite-4k-qd16-status1": ("randwrite", ["fio-3.33-rbd-randwrite-4k-qd16-status1.jsonplus"]),
    "fio-read-64k-qd4": ("read", ["fio-3.33-rbd-read-64k-qd4.json"]),
    "fio-randrw70-4k-qd8-2jobs": ("randrw", ["fio-3.33-rbd-randrw70-4k-qd8-2jobs.jsonplus"]),
    "fio-randread-4k-qd16-2vols": ("randread", ["fio-3.33-rbd-randread-4k-qd16-2vols.0.jsonplus",
                                                "fio-3.33-rbd-randread-4k-qd16-2vols.1.jsonplus"]),
}


def _reports(files: list[str]) -> list[dict]:
    return [parse_report_file(TOOLS_DIR / f) for f in files]


@pytest.mark.parametrize("name", sorted(CAPTURES))
def test_capture_matches_golden(name: str) -> None:
    mode, files = CAPTURES[name]
    check_golden(name, result_from_reports(mode, _reports(files)).to_dict())


def test_single_process_figures_are_fios_own() -> None:
    text = (TOOLS_DIR / "fio-3.33-rbd-randread-4k-qd16-status1.jsonplus").read_text()
    last = list(iter_json_objects(text))[-1]
    read = last["jobs"][0]["read"]
    result = result_from_reports("randread", [final_report(text)])
    assert result.iops == pytest.approx(read["iops"])
    assert result.bandwidth_bytes_per_second == read["bw_bytes"]
    assert result.ops == read["total_ios"]
    assert result.latency_avg_seconds == pytest.approx(read["lat_ns"]["mean"] * 1e-9)
    assert result.latency_max_seconds == pytest.approx(read["lat_ns"]["max"] * 1e-9)
    assert result.latency_min_seconds == pytest.approx(read["lat_ns"]["min"] * 1e-9)
    assert result.latency_stddev_seconds == pytest.approx(read["lat_ns"]["stddev"] * 1e-9)
    assert result.latency_percentiles_seconds["99"] == pytest.approx(
        read["lat_ns"]["percentile"]["99.000000"] * 1e-9)
    assert result.latency_percentiles_seconds["99.9"] == pytest.approx(
        read["lat_ns"]["percentile"]["99.900000"] * 1e-9)
    assert result.extra["percentile_method"] == "fio"
    assert result.runtime_seconds == pytest.approx(read["runtime"] / 1000)


def test_status_reports_precede_the_final_report() -> None:
    text = (TOOLS_DIR / "fio-3.33-rbd-randread-4k-qd16-status1.jsonplus").read_text()
    reports = list(iter_json_objects(text))
    assert len(reports) == 5
    ios = [r["jobs"][0]["read"]["total_ios"] for r in reports]
    assert ios == sorted(ios)
    assert final_report(text) == reports[-1]


def test_bins_reproduce_fios_percentiles() -> None:
    report = _reports(["fio-3.33-rbd-randread-4k-qd16-status1.jsonplus"])[0]
    lat = report["jobs"][0]["read"]["lat_ns"]
    ours = percentiles_from_bins({float(k): float(v) for k, v in lat["bins"].items()})
    for key, value in lat["percentile"].items():
        assert ours[f"{float(key):.6f}".rstrip("0").rstrip(".")] == value


def test_two_volumes_merge_percentiles_from_bins() -> None:
    files = CAPTURES["fio-randread-4k-qd16-2vols"][1]
    each = [result_from_reports("randread", [r]) for r in _reports(files)]
    both = result_from_reports("randread", _reports(files))
    assert both.extra["percentile_method"] == "merged-bins"
    assert both.iops == pytest.approx(sum(r.iops for r in each))
    assert both.ops == sum(r.ops for r in each)
    for key in ("50", "99", "99.9"):
        values = [r.latency_percentiles_seconds[key] for r in each]
        assert min(values) <= both.latency_percentiles_seconds[key] <= max(values)
    ordered = [both.latency_percentiles_seconds[k] for k in sorted(
        both.latency_percentiles_seconds, key=float)]
    assert ordered == sorted(ordered)
    assert both.latency_max_seconds == max(r.latency_max_seconds for r in each)


def test_mixed_mode_reports_both_directions() -> None:
    result = result_from_reports("randrw", _reports(CAPTURES["fio-randrw70-4k-qd8-2jobs"][1]))
    directions = result.extra["directions"]
    assert set(directions) == {"read", "write"}
    assert result.iops == pytest.approx(directions["read"]["iops"] + directions["write"]["iops"])
    # 70 % reads asked for
    assert 0.6 < directions["read"]["ops"] / result.ops < 0.8
    assert result.extra["percentile_method"] == "merged-bins"


def test_plain_json_without_bins_uses_fios_percentiles() -> None:
    result = result_from_reports("read", _reports(CAPTURES["fio-read-64k-qd4"][1]))
    assert result.extra["percentile_method"] == "fio"
    assert result.latency_percentiles_seconds["50"] > 0
    assert result.bandwidth_bytes_per_second / result.iops == pytest.approx(65536, rel=0.01)


def test_fio_error_capture_is_rejected() -> None:
    path = TOOLS_DIR / "fio-3.33-rbd-error-noimage.json"
    with pytest.raises(ValueError, match="no I/O"):
        result_from_reports("read", [parse_report_file(path)])


def test_job_error_is_rejected() -> None:
    report = _reports(CAPTURES["fio-read-64k-qd4"][1])[0]
    report["jobs"][0]["error"] = 5
    with pytest.raises(ValueError, match="error 5"):
        result_from_reports("read", [report])


@pytest.mark.parametrize("content", ["", "fio: engine rbd not loadable\n", '{"jobs": [', "[1, 2]"])
def test_garbage_output_names_the_file(tmp_path: Path, content: str) -> None:
    path = tmp_path / "fio-read.0.json"
    path.write_text(content)
    stderr = tmp_path / "fio-read.0.stderr"
    stderr.write_text("rbd_open failed.\n")
    with pytest.raises(BenchmarkError, match="unparseable output") as excinfo:
        parse_report_file(path, stderr)
    assert str(path) in str(excinfo.value)
    assert "rbd_open failed" in str(excinfo.value)


def test_truncated_stream_falls_back_to_last_complete_report(tmp_path: Path) -> None:
    text = (TOOLS_DIR / "fio-3.33-rbd-randread-4k-qd16-status1.jsonplus").read_text()
    reports = list(iter_json_objects(text))
    cut = text[: len(text) - 1000]
    last_complete = final_report(cut)
    assert last_complete == reports[-2]


def test_live_figures_from_status_reports_in_any_chunking() -> None:
    text = (TOOLS_DIR / "fio-3.33-rbd-randread-4k-qd16-status1.jsonplus").read_text()
    reports = list(iter_json_objects(text))
    for chunk in (1000, 65536, len(text)):
        seen: list[LiveSample] = []
        aggregator = LiveAggregator("randread", 1, lambda mode, s, seen=seen: seen.append(s))
        scanner = StreamScanner(0, aggregator)
        for i in range(0, len(text), chunk):
            scanner.feed(text[i : i + chunk])
        aggregator.flush()
        assert len(seen) == len(reports)
        # second interval: ops between report 1 and 2 over their timestamp difference
        d_ops = (reports[1]["jobs"][0]["read"]["total_ios"]
                 - reports[0]["jobs"][0]["read"]["total_ios"])
        dt = (reports[1]["timestamp_ms"] - reports[0]["timestamp_ms"]) / 1000
        assert seen[1].ops_per_second == pytest.approx(d_ops / dt)
        assert seen[1].bytes_per_second == pytest.approx(d_ops * 4096 / dt, rel=1e-3)
        assert 1e-5 < seen[1].latency_seconds < 1.0


def test_live_aggregator_sums_processes() -> None:
    files = CAPTURES["fio-randread-4k-qd16-2vols"][1]
    streams = [list(iter_json_objects((TOOLS_DIR / f).read_text())) for f in files]
    seen: list[LiveSample] = []
    aggregator = LiveAggregator("randread", 2, lambda mode, s: seen.append(s))
    aggregator.add(0, streams[0][0])
    assert seen == []
    aggregator.add(1, streams[1][0])
    assert len(seen) == 1 and seen[0].ops_per_second > 0


def test_golden_files_are_json() -> None:
    for name in CAPTURES:
        json.loads((TOOLS_DIR / "golden" / f"{name}.json").read_text())
