"""fio's own time series: a real fio 3.33 capture (2 jobs, randrw 70/30, log_avg_msec=500,
log_unix_epoch) parsed per window, summed over jobs and directions; odd lines skipped."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cephscope.runner.benchmarks.fio_logs import (
    combine,
    log_files,
    parse_log,
    step_series,
)
from tests.unit.bench_golden import TOOLS_DIR

LOGS = TOOLS_DIR / "fio-3.33-logs-randrw70-2jobs"


def _raw(kind: str, job: int) -> list[tuple[int, float, int]]:
    samples, bad = parse_log((LOGS / f"fio-randrw.0_{kind}.{job}.log").read_text())
    assert bad == 0
    return [(s.time_ms, s.value, s.direction) for s in samples]


def test_log_files_are_named_by_kind_and_job() -> None:
    files = log_files(LOGS, "fio-randrw.")
    assert {(f.kind, f.job) for f in files} == {(k, j) for k in ("iops", "bw", "lat", "clat",
                                                              "slat") for j in (1, 2)}
    assert {f.prefix for f in files} == {"fio-randrw.0"}
    assert log_files(LOGS, "fio-randread.") == []


def test_windows_sum_the_jobs_and_both_directions() -> None:
    series = step_series(LOGS, "randrw", 500)
    assert series is not None and series.epoch and series.jobs == 2
    # the first window: both jobs' read and write IOPS lines (fio's own numbers)
    first = [v for t, v, _d in _raw("iops", 1) + _raw("iops", 2) if abs(t - 1795706348500) < 250]
    assert series.times[0] == pytest.approx(1795706348.5)
    assert series.iops[0] == sum(first) == 725
    assert series.directions["read"]["iops"][0] + series.directions["write"]["iops"][0] == 725
    # bandwidth is KiB/s in the log, bytes/s in the series: 4 KiB per I/O here
    assert series.bytes_per_second[0] == pytest.approx(725 * 4096, rel=0.05)


def test_latency_is_the_iops_weighted_mean_of_jobs_and_directions() -> None:
    series = step_series(LOGS, "randrw", 500)
    assert series is not None
    iops = {(job, d): v for job in (1, 2) for t, v, d in _raw("iops", job)
            if abs(t - 1795706349000) < 250}
    lat = {(job, d): v for job in (1, 2) for t, v, d in _raw("lat", job)
           if abs(t - 1795706349000) < 250}
    expected = sum(lat[k] * iops[k] for k in lat) / sum(iops[k] for k in lat) * 1e-9
    assert series.latency_seconds[1] == pytest.approx(expected)
    # writes are slower than reads on this cluster: the weighted mean lies between them
    read, write = (series.directions[d]["latency_seconds"][1] for d in ("read", "write"))
    assert read < series.latency_seconds[1] < write


def test_interval_inferred_from_the_logs_when_not_given() -> None:
    given = step_series(LOGS, "randrw", 500)
    inferred = step_series(LOGS, "randrw")
    assert given is not None and inferred is not None
    assert inferred.interval_ms == 500 and inferred.times == given.times


def test_garbage_lines_are_skipped_and_counted(tmp_path: Path) -> None:
    for path in LOGS.glob("*.log"):
        shutil.copy(path, tmp_path / path.name)
    lat = tmp_path / "fio-randrw.0_lat.1.log"
    lat.write_text("not a log line\n1795706348500, -5, 1, 0, 0\n1795706348500, 7, 9, 0, 0\n"
                   + lat.read_text() + "1795706348999\n")
    series = combine(log_files(tmp_path, "fio-randrw."), 500)
    assert series.skipped_lines == 4
    assert series.iops == step_series(LOGS, "randrw", 500).iops  # type: ignore[union-attr]


def test_relative_times_without_log_unix_epoch(tmp_path: Path) -> None:
    (tmp_path / "fio-write.0_iops.1.log").write_text("500, 100, 1, 0, 0\n1000, 120, 1, 0, 0\n")
    (tmp_path / "fio-write.0_lat.1.log").write_text("500, 2000000, 1, 0, 0\n")
    series = step_series(tmp_path, "write")
    assert series is not None and not series.epoch
    assert series.times == [0.5, 1.0] and series.iops == [100, 120]
    assert series.latency_seconds == [pytest.approx(0.002), None]


def test_no_logs_no_series(tmp_path: Path) -> None:
    assert step_series(tmp_path, "write") is None
    assert step_series(tmp_path / "absent", "write") is None
