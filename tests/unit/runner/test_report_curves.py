"""Response curves: which axes raise load, the points (means and spread over iterations), the
knee (maximum IOPS / mean latency) on synthetic queues whose knee is known, and on recorded
runs (tests/fixtures/runs)."""

from __future__ import annotations

import csv
import json
import shutil
import statistics
from pathlib import Path
from typing import Any

import pytest

from cephscope.runner.benchmarks import BENCHMARKS
from cephscope.runner.report.build import Row, SystemFigures, load_rows, write_report
from cephscope.runner.report.curve_plots import plot_response_curves
from cephscope.runner.report.curves import (
    CSV_FILE,
    JSON_FILE,
    P99_CLIENT,
    P99_OSD,
    curves_table,
    load_axes,
    response_curves,
    write_curve_data,
)
from cephscope.runner.steps import Step

RUNS = Path(__file__).resolve().parents[2] / "fixtures" / "runs"


def _row(axes: dict[str, Any], iops: float, latency: float | None, *, mode: str = "randwrite",
         benchmark: str = "librbdfio", iteration: int = 0, p99: float | None = None,
         osd_p99: float | None = None) -> Row:
    params = {k.split(".", 1)[1]: v for k, v in axes.items()}
    sid = f"{benchmark[:3]}{abs(hash((tuple(sorted(axes.items())), iteration))) % 10**9:09d}"
    step = Step(id=sid, benchmark=benchmark, iteration=iteration, params=params,
                pool_profile=None, ceph_config={}, axes=axes)
    result: dict[str, Any] = {"iops": iops, "mode": mode}
    if latency is not None:
        result["latency_avg_seconds"] = latency
    if p99 is not None:
        result["latency_percentiles_seconds"] = {"99": p99}
    system = SystemFigures(osd_latency_percentiles={"99": osd_p99} if osd_p99 else {})
    return Row(step, mode, "done", result, system)


def closed_loop(depths: list[int], capacity: float, base_latency: float) -> list[Row]:
    """A closed-loop client with N ops in flight against one queue: IOPS = min(N / R0, C),
    latency = N / IOPS (Little's law). Saturation starts at N* = C x R0."""
    rows = []
    for n in depths:
        iops = min(n / base_latency, capacity)
        rows.append(_row({"librbdfio.iodepth": n}, iops, n / iops))
    return rows


def test_closed_loop_knee_is_where_saturation_starts() -> None:
    # C = 8000 IOPS, R0 = 1 ms: saturation at N* = 8 ops in flight
    (curve,) = response_curves(closed_loop([1, 2, 4, 8, 16, 32, 64], 8000.0, 0.001))
    assert curve.axis == "librbdfio.iodepth" and curve.label == "iodepth"
    assert [p.load for p in curve.points] == [1, 2, 4, 8, 16, 32, 64]
    assert curve.points[curve.knee].load == 8
    # past the knee the next step buys no IOPS and doubles latency, and the sentence says so
    assert "knee at iodepth=8" in curve.knee_text()
    assert "iodepth=16 gives +0% IOPS for +100% latency" in curve.knee_text()
    # the order of the rows does not matter
    (shuffled,) = response_curves(closed_loop([64, 1, 16, 4, 32, 2, 8], 8000.0, 0.001))
    assert shuffled.points[shuffled.knee].load == 8


def test_open_loop_knee_is_at_half_utilisation() -> None:
    """An M/M/1 queue driven at a rate (rate_iops): latency S / (1 - rho); power is largest at
    rho = 0.5, Kleinrock's optimal operating point."""
    service = 0.001
    rows = [_row({"librbdfio.rate_iops": int(rho * 1000)}, rho / service, service / (1 - rho))
            for rho in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)]
    (curve,) = response_curves(rows)
    assert curve.points[curve.knee].load == 500


def test_knee_at_an_end_of_the_sweep_is_said() -> None:
    (rising,) = response_curves(closed_loop([1, 2, 4], 8000.0, 0.001))
    assert rising.knee == 2 and "not reached" in rising.knee_text()
    (past,) = response_curves(closed_loop([16, 32, 64], 8000.0, 0.001))
    assert past.knee == 0 and "sweep lower" in past.knee_text()


def test_two_points_and_one() -> None:
    (two,) = response_curves(closed_loop([4, 16], 8000.0, 0.001))
    # 4 -> 16 in flight: IOPS x2 (4000 -> 8000), latency x2 (1 -> 2 ms): a tie, the lower load
    assert two.knee == 0 and "two points" in two.knee_text()
    (better,) = response_curves(closed_loop([1, 4], 8000.0, 0.001))
    assert better.knee == 1  # IOPS x4, latency unchanged
    assert response_curves(closed_loop([4], 8000.0, 0.001)) == []


def test_only_declared_load_parameters_are_load_axes() -> None:
    assert set(BENCHMARKS["radosbench"].load_parameters) == {"concurrent_ops",
                                                             "concurrent_procs"}
    assert "iodepth" in BENCHMARKS["librbdfio"].load_parameters
    # CBT's fio: per-job queue depth and the client's total alike
    assert {"iodepth", "total_iodepth", "procs_per_endpoint"} <= set(
        BENCHMARKS["fio"].load_parameters)
    assert load_axes([_row({"fio.total_iodepth": d, "fio.client_endpoints": "rbd"}, 1.0, 1.0,
                           benchmark="fio").step for d in (1, 4)]) == ["fio.total_iodepth"]
    steps = [r.step for r in (
        _row({"librbdfio.iodepth": 1, "librbdfio.op_size": 4096}, 1.0, 1.0),
        _row({"librbdfio.iodepth": 4, "librbdfio.op_size": 65536}, 1.0, 1.0),
        _row({"radosbench.concurrent_ops": 4, "ceph_config.osd_op_num_shards": 2}, 1.0, 1.0,
             benchmark="radosbench"),
        _row({"nosuch.iodepth": 4}, 1.0, 1.0, benchmark="nosuch"))]
    assert load_axes(steps) == ["librbdfio.iodepth", "radosbench.concurrent_ops"]
    # an op size sweep alone draws no curve
    rows = [_row({"librbdfio.op_size": s}, 1000.0, 0.001) for s in (4096, 65536)]
    assert response_curves(rows) == []


def test_one_curve_per_configuration_with_iteration_spread() -> None:
    rows = []
    for size, scale in ((4096, 1.0), (65536, 0.5)):
        for depth in (1, 8, 32):
            for iteration, noise in enumerate((0.9, 1.0, 1.1)):
                iops = min(depth / 0.001, 8000.0) * scale * noise
                rows.append(_row({"librbdfio.iodepth": depth, "librbdfio.op_size": size},
                                 iops, depth / iops, iteration=iteration,
                                 p99=3 * depth / iops))
    curves = response_curves(rows)
    assert [c.configuration for c in curves] == [(("op_size", "4096"),),
                                                 (("op_size", "65536"),)]
    for c in curves:
        assert c.p99_source == P99_CLIENT
        size = int(c.configuration[0][1])
        for p in c.points:
            members = [r for r in rows if r.step.axes == {"librbdfio.iodepth": p.load,
                                                         "librbdfio.op_size": size}]
            assert sorted(p.steps) == sorted(r.step.id for r in members)
            iops = [r.figure("iops") for r in members]
            assert p.iops.n == 3
            assert p.iops.mean == pytest.approx(statistics.fmean(iops))
            assert p.iops.sd == pytest.approx(statistics.stdev(iops))
            lat = [r.figure("latency_avg_seconds") for r in members]
            assert p.latency.sd == pytest.approx(statistics.stdev(lat))
            assert p.p99 is not None and p.p99.mean == pytest.approx(
                statistics.fmean(r.percentile("99") for r in members))
    header, body = curves_table(curves)
    assert len(body) == 6 and sum(1 for line in body if line[-1] == "knee") == 2
    assert " ± " in body[0][header.index("IOPS")]


def test_p99_from_the_osds_when_the_client_has_none_and_never_mixed() -> None:
    rows = [_row({"radosbench.concurrent_ops": n}, 1000.0 * n, 0.001, benchmark="radosbench",
                 mode="write", osd_p99=0.004 * n) for n in (1, 4)]
    (curve,) = response_curves(rows)
    assert curve.p99_source == P99_OSD and curve.points[1].p99.mean == pytest.approx(0.016)
    rows[0].result["latency_percentiles_seconds"] = {"99": 0.002}
    (mixed,) = response_curves(rows)
    assert mixed.p99_source is None and all(p.p99 is None for p in mixed.points)


def test_points_without_latency_are_left_out() -> None:
    rows = closed_loop([1, 2, 4], 8000.0, 0.001)
    rows.append(_row({"librbdfio.iodepth": 8}, 8000.0, None))
    (curve,) = response_curves(rows)
    assert [p.load for p in curve.points] == [1, 2, 4]


def _iops_by_axes(run_dir: Path) -> dict[tuple[str, int, int], list[tuple[str, float, float]]]:
    """(mode, op_size, concurrent_ops) -> (step id, IOPS, mean latency) of every iteration,
    read from the step files themselves."""
    found: dict[tuple[str, int, int], list[tuple[str, float, float]]] = {}
    for path in sorted(run_dir.glob("step-*/result.json")):
        result = json.loads(path.read_text())
        step = json.loads((path.parent / "params.json").read_text())
        for r in result["results"]:
            key = (r["mode"], step["params"]["op_size"], step["params"]["concurrent_ops"])
            found.setdefault(key, []).append((step["id"], r["iops"], r["latency_avg_seconds"]))
    return found


def test_recorded_run_curves_come_from_its_steps(tmp_path: Path) -> None:
    """The iterations fixture (rados bench write + seq, op size x concurrent_ops {1, 16}, three
    iterations): a curve per mode and op size, each point the mean of its three steps."""
    run_dir = tmp_path / "iterations"
    shutil.copytree(RUNS / "iterations", run_dir)
    _run, rows = load_rows(run_dir)
    curves = response_curves(rows)
    assert len(curves) == 4
    measured = _iops_by_axes(run_dir)
    for c in curves:
        assert c.label == "concurrent_ops" and c.p99_source == P99_OSD
        size = int(dict(c.configuration)["op_size"])
        for p in c.points:
            steps = measured[(c.mode, size, p.load)]
            assert sorted(p.steps) == sorted(s for s, _i, _l in steps)
            assert p.iops.mean == pytest.approx(statistics.fmean(i for _s, i, _l in steps))
            assert p.latency.mean == pytest.approx(statistics.fmean(lat for _s, _i, lat in steps))
        assert c.knee is not None
        assert c.points[c.knee].power == max(p.power for p in c.points)
    # the whole report without its other plots (matplotlib takes seconds per figure)
    report = write_report(run_dir, plots=False)
    md = report.markdown_path.read_text()
    assert "## Response curves" in md
    for c in curves:
        assert f"- {c.knee_text()}" in md
    assert "<h2>Response curves</h2>" in report.html_path.read_text()
    curve_plots = plot_response_curves(curves, tmp_path / "plots")
    assert sorted(p.name for p in curve_plots) == [
        "response-radosbench-seq-concurrent_ops.png",
        "response-radosbench-write-concurrent_ops.png"]
    for p in curve_plots:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    data = json.loads((run_dir / JSON_FILE).read_text())["curves"]
    assert [d["knee_load"] for d in data] == [c.points[c.knee].load for c in curves]
    lines = list(csv.DictReader((run_dir / CSV_FILE).read_text().splitlines()))
    assert len(lines) == 8
    assert sum(int(line["knee"]) for line in lines) == 4
    for line in lines:
        steps = measured[(line["mode"], int(line["configuration"].split("=")[1]),
                          int(line["load"]))]
        assert float(line["iops_mean"]) == pytest.approx(statistics.fmean(i for _s, i, _l in steps))


def test_a_run_without_a_load_axis_has_no_curve_section(tmp_path: Path) -> None:
    run_dir = tmp_path / "demo-a"
    shutil.copytree(RUNS / "demo-a", run_dir)
    (run_dir / CSV_FILE).write_text("stale")
    md = write_report(run_dir, plots=False).markdown_path.read_text()
    assert "Response curves" not in md
    assert not (run_dir / CSV_FILE).exists() and not (run_dir / JSON_FILE).exists()
    assert write_curve_data(run_dir, []) == []


def test_recorded_iodepth_curve() -> None:
    """A real fio queue-depth sweep (tests/fixtures/runs/iodepth: 7 depths x 2 iterations):
    one curve of seven points with fio's own p99, the knee where power is largest, and the
    step past it costing more latency than it buys IOPS."""
    _run, rows = load_rows(RUNS / "iodepth")
    (curve,) = response_curves(rows)
    assert (curve.benchmark, curve.mode, curve.label) == ("librbdfio", "randwrite", "iodepth")
    assert [p.load for p in curve.points] == [1, 2, 4, 8, 16, 32, 64]
    assert curve.p99_source == P99_CLIENT
    results: dict[int, list[dict[str, Any]]] = {}
    for path in (RUNS / "iodepth").glob("step-*/result.json"):
        depth = json.loads((path.parent / "params.json").read_text())["params"]["iodepth"]
        results.setdefault(depth, []).extend(json.loads(path.read_text())["results"])
    for p in curve.points:
        measured = results[p.load]
        assert p.iops.n == len(measured) == 2
        assert p.iops.mean == pytest.approx(statistics.fmean(r["iops"] for r in measured))
        assert p.iops.sd == pytest.approx(statistics.stdev(r["iops"] for r in measured))
        assert p.p99 is not None and p.p99.mean == pytest.approx(
            statistics.fmean(r["latency_percentiles_seconds"]["99"] for r in measured))
    knee = curve.knee
    assert knee is not None
    assert curve.points[knee].power == max(p.power for p in curve.points)
    if knee + 1 < len(curve.points):
        here, after = curve.points[knee], curve.points[knee + 1]
        assert after.latency.mean / here.latency.mean > after.iops.mean / here.iops.mean
