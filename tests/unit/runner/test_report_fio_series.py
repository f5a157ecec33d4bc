"""The report's per-step fio time series: fio's logs (a real capture) beside the Prometheus
series stored for the step, on the mode's own time axis; a PNG per step and mode with logs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cephscope.runner.report.build import load_rows, write_report
from cephscope.runner.report.fio_series import plot_fio_series, step_series_of
from cephscope.runner.results import RunDir
from cephscope.runner.steps import Step
from tests.unit.bench_golden import TOOLS_DIR

LOGS = TOOLS_DIR / "fio-3.33-logs-randrw70-2jobs"
START = 1795706348.2  # the capture's fio started just before its first window (…348.5)


def _run(tmp_path: Path, with_logs: bool = True) -> Path:
    step = Step(id="abc123", benchmark="fio", iteration=0,
                params={"mode": "randrw", "log_avg_msec": 500}, pool_profile=None,
                ceph_config={}, axes={})
    run_dir = tmp_path / "run"
    RunDir.create(run_dir, "run", tmp_path / "s.yaml", "", {}, [step])
    step_dir = run_dir / step.dir_name
    step_dir.mkdir()
    if with_logs:
        for path in LOGS.glob("*.log"):
            shutil.copy(path, step_dir / path.name)
    result = {"iops": 700.0, "mode": "randrw", "bandwidth_bytes_per_second": 2.8e6,
              "latency_avg_seconds": 0.02}
    (step_dir / "result.json").write_text(json.dumps({
        "step": step.id, "status": "done", "benchmark": "fio", "iteration": 0, "axes": {},
        "results": [result], "config": {},
        "timestamps": {"started": START - 2, "ended": START + 4,
                       "modes": {"randrw": {"start": START, "end": START + 3.2}}}}))
    osd = [{"metric": {"ceph_daemon": f"osd.{i}"},
            "values": [[START - 1, "5"], *[[START + t, str(100 + i)] for t in (0.5, 1.5, 2.5)],
                       [START + 3.5, "7"]]} for i in range(2)]
    lat = [{"metric": {"ceph_daemon": "osd.0"}, "values": [[START + 1.5, "0.004"]]},
           {"metric": {"ceph_daemon": "osd.1"}, "values": [[START + 1.5, "0.006"]]}]
    (step_dir / "prometheus.json").write_text(json.dumps({
        "start": START - 2, "end": START + 4, "queries": {
            "osd_ops_per_second": {"result": osd}, "osd_op_latency_seconds": {"result": lat}}}))
    return run_dir


def test_fio_and_prometheus_series_share_the_modes_time_axis(tmp_path: Path) -> None:
    run_dir = _run(tmp_path)
    _run_meta, rows = load_rows(run_dir)
    found = step_series_of(rows[0], run_dir)
    assert found is not None
    # fio's windows at ...348.5, 349.0, ...: 0.3 s, 0.8 s, ... after the mode started
    assert [round(t, 1) for t, _v in found.fio_iops][:3] == [0.3, 0.8, 1.3]
    assert found.fio_iops[0][1] == 725
    assert 0.01 < found.fio_latency_seconds[0][1] < 0.05
    # both OSDs summed per scrape; scrapes outside the mode's window left out
    assert found.osd_ops == [(pytest.approx(0.5), 201.0), (pytest.approx(1.5), 201.0),
                             (pytest.approx(2.5), 201.0)]
    assert found.osd_latency_seconds == [(pytest.approx(1.5), pytest.approx(0.005))]


def test_a_plot_per_step_with_logs_and_none_without(tmp_path: Path) -> None:
    run_dir = _run(tmp_path)
    _meta, rows = load_rows(run_dir)
    (png,) = plot_fio_series(rows, run_dir, tmp_path / "plots")
    assert png.name == "fio-series-abc123-randrw.png" and png.stat().st_size > 10_000
    bare = _run(tmp_path / "bare", with_logs=False)
    _meta, rows = load_rows(bare)
    assert plot_fio_series(rows, bare, tmp_path / "plots2") == []


def test_the_report_shows_it(tmp_path: Path) -> None:
    run_dir = _run(tmp_path)
    report = write_report(run_dir)
    assert any(p.name == "fio-series-abc123-randrw.png" for p in report.plots)
    assert "fio-series-abc123-randrw" in report.markdown_path.read_text()
