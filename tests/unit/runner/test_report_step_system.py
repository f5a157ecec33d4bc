"""Report on a real 3-iteration run (tests/fixtures/runs/iterations): OSD-side percentiles from
histogram deltas, per-host / per-core / per-device / thread-group tables, heatmaps, statistics
over iterations, summary.csv columns, the self-contained HTML; values checked against the stored
Prometheus data and the step results, computed independently here."""

from __future__ import annotations

import csv
import json
import math
import re
import shutil
import statistics
from pathlib import Path

import pytest

from cephscope.runner import stats
from cephscope.runner.report.build import (
    Row,
    SystemFigures,
    likely_bottleneck,
    load_rows,
    statistics_table,
    system_tables,
    write_report,
)
from cephscope.runner.report.plots import heatmap_cells
from cephscope.runner.report.step_system import (
    counter_increase,
    histogram_quantile,
    mode_window,
    ops_of_mode,
)
from cephscope.runner.results import RunDir
from cephscope.runner.steps import Step

RUN = Path(__file__).resolve().parents[2] / "fixtures" / "runs" / "iterations"


def _copy(tmp_path: Path) -> Path:
    dest = tmp_path / "iterations"
    shutil.copytree(RUN, dest)
    return dest


def _step_files(step_id: str) -> tuple[dict, dict]:
    d = RUN / f"step-{step_id}"
    return (json.loads((d / "result.json").read_text()),
            json.loads((d / "prometheus.json").read_text()))


# ---- building blocks -----------------------------------------------------------------------

def test_histogram_quantile_like_prometheus() -> None:
    buckets = {0.1: 10.0, 0.2: 20.0, math.inf: 20.0}
    assert histogram_quantile(0.5, buckets) == pytest.approx(0.1)
    assert histogram_quantile(0.75, buckets) == pytest.approx(0.15)
    assert histogram_quantile(0.25, buckets) == pytest.approx(0.05)  # lowest bucket from 0
    # the rank falls in +Inf: the highest finite bound answers
    assert histogram_quantile(0.9, {0.1: 5.0, math.inf: 10.0}) == pytest.approx(0.1)
    assert histogram_quantile(0.5, {0.1: 0.0, math.inf: 0.0}) is None
    assert histogram_quantile(0.5, {0.1: 3.0}) is None  # no +Inf: not a histogram


def test_counter_increase_over_a_window() -> None:
    points = [(0.0, 10.0), (5.0, 15.0), (10.0, 30.0), (15.0, 32.0), (20.0, 40.0)]
    assert counter_increase(points, (5.0, 10.0)) == 15.0
    # the value read at 15 is the scrape that saw the window's end
    assert counter_increase(points, (5.0, 10.0), settle_seconds=5.0) == 17.0
    assert counter_increase(points, (2.0, 12.0)) == 20.0  # from the last sample before 2
    # a reset (OSD restart) counts from zero
    assert counter_increase([(0, 100.0), (5, 120.0), (10, 7.0), (15, 9.0)], (0, 15)) == 29.0
    assert counter_increase([(0, 1.0)], (0, 15)) is None


def test_ops_of_each_mode() -> None:
    assert ops_of_mode("write") == {"w"} and ops_of_mode("randwrite") == {"w"}
    for mode in ("seq", "rand", "read", "randread"):
        assert ops_of_mode(mode) == {"r"}
    assert ops_of_mode("randrw") is None and ops_of_mode(None) is None


# ---- OSD-side percentiles ------------------------------------------------------------------

def _expected_osd_p99(result: dict, prometheus: dict, mode: str) -> float:
    """Independent: per le, last value at or before the window start to the last value at or
    before the window end + one scrape interval, summed over OSDs for the mode's op kind."""
    start, end = (result["timestamps"]["modes"][mode][k] for k in ("start", "end"))
    settle = prometheus["scrape_interval_seconds"]
    op = "w" if mode == "write" else "r"
    totals: dict[float, float] = {}
    for series in prometheus["queries"]["osd_op_latency_bucket"]["result"]:
        if series["metric"]["op"] != op:
            continue
        values = [(float(t), float(v)) for t, v in series["values"]]
        first = [v for t, v in values if t <= start][-1]
        last = [v for t, v in values if t <= end + settle][-1]
        le = math.inf if series["metric"]["le"] == "+Inf" else float(series["metric"]["le"])
        totals[le] = totals.get(le, 0.0) + last - first
    rank = 0.99 * totals[math.inf]
    lower, lower_count = 0.0, 0.0
    for le in sorted(totals):
        if totals[le] >= rank:
            return lower + (le - lower) * (rank - lower_count) / (totals[le] - lower_count)
        lower, lower_count = le, totals[le]
    raise AssertionError("no bucket holds the rank")


def test_osd_side_p99_from_histogram_deltas() -> None:
    _run, rows = load_rows(RUN)
    done = [r for r in rows if r.status == "done"]
    assert len(done) == 24  # 12 steps x (write, seq)
    for row in done:
        result, prometheus = _step_files(row.step.id)
        expected = _expected_osd_p99(result, prometheus, row.mode)
        assert row.osd_percentile("99") == pytest.approx(expected), (row.step.id, row.mode)
        p50, p99, p999 = (row.osd_percentile(q) for q in ("50", "99", "99.9"))
        assert 0 < p50 <= p99 <= p999
        # the OSD's share of an op lies within what the client saw end to end
        assert row.figure("latency_min_seconds") <= p99 <= row.figure("latency_max_seconds")
        assert set(row.system.osd_p99_by_daemon) == {"osd.0", "osd.1", "osd.2"}


# ---- per-host tables ------------------------------------------------------------------------

def _window_mean(series: dict, window: tuple[float, float]) -> float:
    return statistics.fmean(float(v) for t, v in series["values"] if window[0] <= t <= window[1])


def test_per_core_cpu_and_system_tables() -> None:
    _run, rows = load_rows(RUN)
    row = next(r for r in rows if r.mode == "write" and r.step.axes["radosbench.concurrent_ops"] == 16)
    result, prometheus = _step_files(row.step.id)
    window = mode_window(result, "write")
    cores = {s["metric"]["cpu"]: _window_mean(s, window)
             for s in prometheus["queries"]["cpu_core_busy_ratio"]["result"]}
    assert len(cores) == 2  # this machine's two cores
    host, cpu, busiest = row.system.max_core
    assert busiest == pytest.approx(max(cores.values())) and cores[cpu] == pytest.approx(busiest)
    assert row.iops_per_core == pytest.approx(row.figure("iops") / sum(cores.values()))
    modes = {s["metric"]["mode"]: _window_mean(s, window)
             for s in prometheus["queries"]["cpu_mode_ratio"]["result"]}
    tables = {name.split(" (")[0]: (header, body) for name, header, body in system_tables(row)}
    header, body = tables["CPU per host"]
    (line,) = body
    assert line[0] == host
    assert line[header.index("user %")] == f"{modes['user'] * 100:,.1f}"
    assert line[header.index("iowait %")] == f"{modes['iowait'] * 100:,.1f}"
    assert line[header.index("max core %")] == f"cpu{cpu} {busiest * 100:.0f}"
    # devices: only the OSDs' own (stored topology), with their util
    header, body = tables["OSD devices"]
    osd_devices = {s["metric"]["device"]
                   for s in prometheus["queries"]["osd_device_info"]["result"]}
    assert {ln[1] for ln in body} == osd_devices
    util = {s["metric"]["device"]: _window_mean(s, window)
            for s in prometheus["queries"]["disk_util_ratio"]["result"]}
    for ln in body:
        assert ln[header.index("util %")] == f"{util[ln[1]] * 100:,.1f}"
    header, body = tables["NICs"]
    assert [ln[1] for ln in body] == ["lo"]
    # thread groups: tp_osd_tp is there for each OSD, values are the stored rate means
    header, body = tables["OSD thread groups"]
    tp = {ln[1]: float(ln[3]) for ln in body if ln[2] == "tp_osd_tp"}
    assert set(tp) == {"osd.0", "osd.1", "osd.2"}
    stored = {s["metric"]["ceph_daemon"]: _window_mean(s, window)
              for s in prometheus["queries"]["osd_thread_cpu_seconds_per_second"]["result"]
              if s["metric"]["thread_group"] == "tp_osd_tp"}
    for daemon, value in tp.items():
        assert value == pytest.approx(stored[daemon], abs=0.0005)


def _row(system: SystemFigures) -> Row:
    step = Step(id="x", benchmark="radosbench", iteration=0, params={}, pool_profile=None,
                ceph_config={})
    return Row(step, "write", "done", {"iops": 1000.0, "latency_avg_seconds": 0.01}, system)


def test_bottleneck_names_a_saturated_core() -> None:
    figures = SystemFigures(cpu_busy_ratio=0.55, cpu_instance="host1", disk_util_ratio=0.2,
                            cores={("host1", "0"): 0.97, ("host1", "1"): 0.13},
                            thread_groups={("host1", "osd.0", "tp_osd_tp"): 0.9,
                                           ("host1", "osd.0", "msgr-worker"): 0.2})
    verdict = likely_bottleneck(_row(figures))
    assert verdict.startswith("CPU core 0 on host1 (97% busy)")
    assert "tp_osd_tp" in verdict
    figures.cores[("host1", "0")] = 0.5
    assert "core" not in likely_bottleneck(_row(figures))


# ---- statistics and heatmaps ----------------------------------------------------------------

def test_statistics_over_iterations() -> None:
    _run, rows = load_rows(RUN)
    header, body = statistics_table(rows)
    assert len(body) == 8  # 4 parameter sets x 2 modes
    results = {}
    for step in RunDir(RUN).steps():
        result, _prom = _step_files(step.id)
        for r in result["results"]:
            results.setdefault((step.short_params(), r["mode"]), []).append(r["iops"])
    for line in body:
        iops = results[(line[2], line[1])]
        assert line[header.index("n")] == "3" and len(iops) == 3
        s = stats.summarize(iops)
        assert line[header.index("IOPS mean ± sd")] == f"{s.mean:,.0f} ± {s.sd:,.0f}"
        assert line[header.index("IOPS CV %")] == f"{s.cv * 100:,.1f}"
        assert line[header.index("IOPS 95% CI")] == f"{s.ci_low:,.0f} .. {s.ci_high:,.0f}"


def test_heatmap_cells_are_iteration_means() -> None:
    _run, rows = load_rows(RUN)
    writes = [r for r in rows if r.mode == "write"]
    xs, ys, grid = heatmap_cells(writes, "radosbench.op_size", "radosbench.concurrent_ops",
                                 lambda r: r.figure("iops"))
    assert xs == [4096, 65536] and ys == [1, 16]
    for yi, conc in enumerate(ys):
        for xi, size in enumerate(xs):
            expected = statistics.fmean(
                r.figure("iops") for r in writes
                if r.step.axes["radosbench.op_size"] == size
                and r.step.axes["radosbench.concurrent_ops"] == conc)
            assert grid[yi][xi] == pytest.approx(expected)


def test_report_files_plots_and_self_contained_html(tmp_path: Path) -> None:
    run_dir = _copy(tmp_path)
    report = write_report(run_dir)
    names = {p.name for p in report.plots}
    assert {"heatmap-radosbench-write-concurrent_ops-x-op_size.png",
            "heatmap-radosbench-seq-concurrent_ops-x-op_size.png",
            "osd-thread-groups.png", "cpu-cores.png"} <= names
    page = report.html_path.read_text()
    sources = re.findall(r"<img [^>]*src='([^']*)'", page)
    assert len(sources) == len(report.plots)
    assert all(s.startswith("data:image/png;base64,") for s in sources)
    md = report.markdown_path.read_text()
    assert "## Statistics over iterations" in md and "## System per step" in md
    assert "rate window: 20s (scrape interval 5s)" in md
    # rados bench seq reads back what the write wrote: 1-3 s, under two 5 s scrapes
    assert "WARNING: 12 mode window(s) shorter than 2 scrape intervals" in md


def test_summary_csv_has_system_columns(tmp_path: Path) -> None:
    run_dir = _copy(tmp_path)
    rd = RunDir(run_dir)
    rd.write_summary(rd.steps())
    with open(run_dir / "summary.csv") as f:
        lines = list(csv.DictReader(f))
    _run, rows = load_rows(run_dir)
    by_key = {(r.step.id, r.mode): r for r in rows}
    assert len(lines) == 24
    for line in lines:
        row = by_key[(line["step"], line["mode"])]
        assert float(line["osd_latency_p99_seconds"]) == pytest.approx(row.osd_percentile("99"))
        assert float(line["max_core_busy_ratio"]) == pytest.approx(row.system.max_core[2])
        assert float(line["cpu_busy_ratio"]) == pytest.approx(row.system.cpu_busy_ratio)
        assert float(line["bandwidth_mib_per_second"]) == pytest.approx(
            row.figure("bandwidth_bytes_per_second") / 2**20)
        assert line["disk_device"] in {"loop3", "loop4", "loop5"} or line["disk_device"] == ""


def test_a_short_rate_window_is_warned_about(tmp_path: Path) -> None:
    run_dir = _copy(tmp_path)
    for path in run_dir.glob("step-*/prometheus.json"):
        data = json.loads(path.read_text())
        assert data["warnings"] == []  # the auto window: 4 x the 5 s scrape interval
        data["warnings"] = ["rate window 5s is shorter than 4 scrape intervals (5s each): "
                            "rates may be empty or erratic"]
        path.write_text(json.dumps(data))
    md = write_report(run_dir, plots=False).markdown_path.read_text()
    assert md.count("WARNING: rate window 5s is shorter than 4 scrape intervals") == 1


def test_rate_window_follows_the_scrape_interval() -> None:
    from cephscope.runner.system_metrics import parse_duration, resolve_rate_window

    assert parse_duration("1m30s") == 90 and parse_duration("500ms") == 0.5
    with pytest.raises(ValueError):
        parse_duration("5 seconds")
    assert resolve_rate_window("auto", 15.0) == ("60s", [])
    assert resolve_rate_window("auto", 5.0) == ("20s", [])
    window, warnings = resolve_rate_window("auto", None)
    assert window == "15s" and "scrape interval unknown" in warnings[0]
    window, warnings = resolve_rate_window("15s", 15.0)
    assert window == "15s" and "shorter than 4 scrape intervals" in warnings[0]
    assert resolve_rate_window("2m", 15.0) == ("2m", [])
