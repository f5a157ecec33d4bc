"""`cephscope report` and `cephscope compare` on real run dirs captured from the dev cluster
(tests/fixtures/runs: two demo shard x thread sweeps and an object-size fio sweep, each with the
system metrics the sweep pulled from the local stack's Prometheus)."""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import statistics
from pathlib import Path

import pytest

from cephscope.runner import compare_cli, report_cli, stats
from cephscope.runner.report import compare
from cephscope.runner.report.build import (
    OsdTopology,
    Row,
    SystemFigures,
    detail_table,
    likely_bottleneck,
    load_rows,
    summarize_system,
    table,
    write_report,
)
from cephscope.runner.report.step_system import system_columns
from cephscope.runner.results import RunDir
from cephscope.runner.steps import Step

RUNS = Path(__file__).resolve().parents[2] / "fixtures" / "runs"
# the OSD data devices of the dev cluster the fixtures were captured on
OSD_DEVICES = frozenset({"loop3", "loop4", "loop5"})


def _copy(name: str, tmp_path: Path) -> Path:
    dest = tmp_path / name
    shutil.copytree(RUNS / name, dest)
    return dest


def _results(run_dir: Path) -> dict[str, dict]:
    out = {}
    for step_dir in sorted(run_dir.glob("step-*")):
        result = json.loads((step_dir / "result.json").read_text())
        out[result["step"]] = result
    return out


def test_report_table_has_every_step_with_its_figures(tmp_path: Path) -> None:
    run_dir = _copy("demo-a", tmp_path)
    report = write_report(run_dir)
    md = report.markdown_path.read_text()
    results = _results(run_dir)
    assert len(results) == 4
    for step_id, result in results.items():
        (line,) = [ln for ln in md.splitlines() if ln.startswith(f"| {step_id} ")]
        figures = result["results"][0]
        assert f"| {figures['iops']:,.0f} |" in line
        assert f"| {figures['latency_avg_seconds'] * 1e3:.2f} |" in line
        shards = result["axes"]["ceph_config.osd_op_num_shards"]
        assert f"| {shards} |" in line
        # system metrics were stored by the sweep: CPU and a bottleneck tag are there (a tag
        # in the table, the sentence in the step's detail)
        tag = line.rstrip(" |").rsplit("| ", 1)[1]
        assert tag in ("CPU", "OSD op path", "outside OSD") or tag.startswith(("disk ", "core ")), line
    header = next(ln for ln in md.splitlines() if ln.startswith("| step |"))
    assert "| osd_op_num_shards | osd_op_num_threads_per_shard |" in header
    assert "no latency percentiles" in md
    steps_table = report.html_path.read_text().split("<h2>Steps</h2>")[1].split("</table>")[0]
    assert steps_table.count("<tr>") == 5


def test_plots_per_sweep_axis(tmp_path: Path) -> None:
    report = write_report(_copy("demo-a", tmp_path))
    names = sorted(p.name for p in report.plots)
    # demo-a predates per-core and thread-group series: no such plots from it
    assert names == ["heatmap-radosbench-write-osd_op_num_shards-x-osd_op_num_threads_per_shard.png",
                     "radosbench-write-vs-osd_op_num_shards.png",
                     "radosbench-write-vs-osd_op_num_threads_per_shard.png"]
    for path in report.plots:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert path.stat().st_size > 10_000


def test_fio_run_has_percentiles_and_a_categorical_axis_plot(tmp_path: Path) -> None:
    run_dir = _copy("objsize", tmp_path)
    report = write_report(run_dir)
    rows = [r for r in report.rows if r.status == "done"]
    assert len(rows) == 4
    for row in rows:
        assert row.percentile("99") is not None and row.percentile("50") is not None
        assert row.percentile("50") <= row.percentile("99")
    assert [p.name for p in report.plots] == ["librbdfio-randread-vs-vol_object_size.png"]
    md = report.markdown_path.read_text()
    for size in ("4M", "2M", "1M", "512K"):
        assert f"| {size} |" in md


def test_system_figures_are_window_means(tmp_path: Path) -> None:
    step_dir = next((RUNS / "demo-a").glob("step-*"))
    prometheus = json.loads((step_dir / "prometheus.json").read_text())
    figures = summarize_system(prometheus, OsdTopology(OSD_DEVICES, frozenset({"lo"})))
    cpu_series = prometheus["queries"]["cpu_busy_ratio"]["result"]
    expected_cpu = max(statistics.fmean(float(v) for _t, v in s["values"]) for s in cpu_series)
    assert figures.cpu_busy_ratio == pytest.approx(expected_cpu)
    assert 0 < figures.cpu_busy_ratio <= 1.0
    assert figures.disk_device in OSD_DEVICES
    util = {s["metric"]["device"]: statistics.fmean(float(v) for _t, v in s["values"])
            for s in prometheus["queries"]["disk_util_ratio"]["result"]}
    assert figures.disk_util_ratio == pytest.approx(max(util[d] for d in OSD_DEVICES if d in util))
    assert figures.nic_device == "lo"
    assert figures.osd_devices_only
    assert figures.osd_op_latency_seconds is not None and figures.osd_op_latency_seconds > 0


def test_without_topology_every_host_device_counts() -> None:
    step_dir = next((RUNS / "demo-a").glob("step-*"))
    prometheus = json.loads((step_dir / "prometheus.json").read_text())
    figures = summarize_system(prometheus)
    assert not figures.osd_devices_only
    all_devices = {s["metric"]["device"] for s in prometheus["queries"]["disk_util_ratio"]["result"]}
    assert figures.disk_device in all_devices


def test_broken_prometheus_file_does_not_break_the_report(tmp_path: Path) -> None:
    run_dir = _copy("demo-a", tmp_path)
    victim = next(run_dir.glob("step-*"))
    (victim / "prometheus.json").write_text("{not json")
    report = write_report(run_dir, plots=False)
    broken = [r for r in report.rows if r.step.id == victim.name.removeprefix("step-")]
    assert broken[0].status == "done" and not broken[0].system.available
    assert "n/a (no system metrics)" in report.markdown_path.read_text()


def test_failed_and_pending_steps_are_listed(tmp_path: Path) -> None:
    run_dir = _copy("demo-a", tmp_path)
    rd = RunDir(run_dir)
    steps = rd.steps()
    (rd.step_dir(steps[0]) / "result.json").unlink()
    rd.fail_step(steps[0], "radosbench write: rados exited with status 1", {})
    shutil.rmtree(rd.step_dir(steps[1]))
    _run, rows = load_rows(run_dir)
    status = {r.step.id: r.status for r in rows}
    assert status[steps[0].id] == "failed" and status[steps[1].id] == "pending"
    md = write_report(run_dir, plots=False).markdown_path.read_text()
    assert "rados exited with status 1" in md
    assert "2 done of 4" in md


def _row(system: SystemFigures, latency: float = 0.01) -> Row:
    step = Step(id="x", benchmark="radosbench", iteration=0, params={}, pool_profile=None,
                ceph_config={})
    return Row(step, "write", "done", {"iops": 1000.0, "latency_avg_seconds": latency}, system)


def test_bottleneck_names() -> None:
    assert likely_bottleneck(_row(SystemFigures())).startswith("n/a")
    disk = SystemFigures(cpu_busy_ratio=0.5, disk_util_ratio=0.97, disk_device="sdb",
                         disk_await_seconds=0.004)
    assert likely_bottleneck(_row(disk)) == "disk sdb (97% busy, await 4.0 ms)"
    cpu = SystemFigures(cpu_busy_ratio=0.93, cpu_instance="host1", disk_util_ratio=0.2)
    assert likely_bottleneck(_row(cpu)) == "CPU (93% busy on host1)"
    outside = SystemFigures(cpu_busy_ratio=0.3, disk_util_ratio=0.2, osd_op_latency_seconds=0.001)
    assert "outside the OSD op path" in likely_bottleneck(_row(outside, latency=0.01))
    inside = SystemFigures(cpu_busy_ratio=0.3, disk_util_ratio=0.2, osd_op_latency_seconds=0.008)
    assert "OSD op latency (80%" in likely_bottleneck(_row(inside, latency=0.01))
    assert _row(cpu).iops_per_cpu_percent == pytest.approx(1000 / 93)
    # a gateway benchmark's client latency (Little's law where the tool measures none) against
    # the gateway's own: time spent before the gateway is named
    step = Step(id="g", benchmark="swiftbench", iteration=0, params={}, pool_profile=None,
                ceph_config={})
    quick_gateway = SystemFigures(cpu_busy_ratio=0.3, disk_util_ratio=0.2,
                                  rgw_requests_per_second=22.0, rgw_latency_seconds={"get": 0.0006})
    swift = Row(step, "get", "done", {"iops": 22.0, "extra": {"latency_little_seconds": 0.045}},
                quick_gateway)
    assert "outside the gateway (its own latency is 1% of the client's (concurrency" \
        in likely_bottleneck(swift)


def test_gateway_figures_join_the_step_rows_of_the_mode_they_measure() -> None:
    step = Step(id="x", benchmark="swiftbench", iteration=0, params={}, pool_profile=None,
                ceph_config={})
    gateway = SystemFigures(cpu_busy_ratio=0.3, rgw_requests_per_second=250.0,
                            rgw_ops_per_second={"put": 120.0, "get": 200.0},
                            rgw_bytes_per_second={"put": 120.0 * 4096},
                            rgw_latency_seconds={"put": 0.0125, "get": 0.004})
    rows = [Row(step, mode, "done", {"iops": 100.0}, gateway) for mode in ("put", "get", "del")]
    header, body = table(rows)
    assert header[-3:] == ["RGW op/s", "RGW lat ms", "bottleneck"]
    assert [r[-3:-1] for r in body] == [["120", "12.50"], ["200", "4.00"], ["250", "-"]]
    details = dict((name, value) for name, value in detail_table(rows[0])[2])
    assert details["RGW PUT lat ms"] == "12.50" and details["RGW PUT MiB/s"] == "0.47"
    assert details["RGW GET MiB/s"] == "-"
    columns = system_columns(gateway, 100.0, None, "put.2")  # a repeated hsbench phase
    assert (columns["rgw_ops_per_second"], columns["rgw_latency_seconds"]) == (120.0, 0.0125)
    assert system_columns(gateway, 100.0, None, "del")["rgw_ops_per_second"] is None
    # a run whose windows had no gateway gets no RGW columns nor details
    plain = [_row(SystemFigures(cpu_busy_ratio=0.3))]
    assert "RGW op/s" not in table(plain)[0]
    # nor a run of a RADOS benchmark beside an idle gateway: its step details keep the figures
    rados = Step(id="r", benchmark="radosbench", iteration=0, params={}, pool_profile=None,
                 ceph_config={})
    idle = Row(rados, "write", "done", {"iops": 100.0}, gateway)
    assert "RGW op/s" not in table([idle])[0]
    assert ["RGW requests/s", "250.0"] in detail_table(idle)[2]
    assert not any(name.startswith("RGW") for name, _v in detail_table(plain[0])[2])


def test_report_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    report_cli.add_arguments(parser)
    assert report_cli.run(parser.parse_args([str(tmp_path)])) == 2
    assert "not a cephscope run dir" in capsys.readouterr().err
    run_dir = _copy("demo-a", tmp_path)
    assert report_cli.run(parser.parse_args([str(run_dir), "--no-plots"])) == 0
    assert (run_dir / "report.md").exists()


# ---- compare -----------------------------------------------------------------------------------

def _compare(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser()
    compare_cli.add_arguments(parser)
    code = compare_cli.run(parser.parse_args(list(argv)))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_compare_a_run_with_itself(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _err = _compare(capsys, str(RUNS / "demo-a"), str(RUNS / "demo-a"),
                               "--fail-on-regression", "0")
    assert code == 0
    assert out.count("| ok |") == 8 and "1.000" in out  # 4 steps x (IOPS, avg latency)
    assert "0 of 8 figures regressed" in out


def test_compare_one_iteration_per_side_cannot_tell(capsys: pytest.CaptureFixture[str]) -> None:
    a, b = _results(RUNS / "demo-a"), _results(RUNS / "demo-b")
    assert set(a) == set(b)  # same spec: same step ids
    iops_ratios = {s: b[s]["results"][0]["iops"] / a[s]["results"][0]["iops"] for s in a}
    lat_ratios = {s: b[s]["results"][0]["latency_avg_seconds"]
                  / a[s]["results"][0]["latency_avg_seconds"] for s in a}
    comparisons, only_a, only_b = compare.compare_runs(RUNS / "demo-a", RUNS / "demo-b", 0.0)
    assert not only_a and not only_b
    ratios = sorted(f.ratio for c in comparisons for f in c.figures if f.figure == "iops")
    assert ratios == pytest.approx(sorted(iops_ratios.values()))
    ratios = sorted(f.ratio for c in comparisons for f in c.figures
                    if f.figure == "latency_avg_seconds")
    assert ratios == pytest.approx(sorted(lat_ratios.values()))
    worst = max(max((1 - r) * 100 for r in iops_ratios.values()),
                max((r - 1) * 100 for r in lat_ratios.values()))
    assert worst > 0, "the two captured runs differ; the fixture would not test anything"
    # one sample per side: a change beyond the threshold is never called a regression
    code, out, _err = _compare(capsys, str(RUNS / "demo-a"), str(RUNS / "demo-b"),
                               "--fail-on-regression", f"{worst * 0.5:.3f}")
    assert code == compare_cli.EXIT_CANNOT_TELL and "regression |" not in out
    assert "cannot tell (worse)" in out and "cannot tell noise from change" in out
    code, out, _err = _compare(capsys, str(RUNS / "demo-a"), str(RUNS / "demo-b"),
                               "--fail-on-regression", f"{worst + 1:.3f}")
    assert code == 0 and "cannot tell (worse)" not in out
    code, _out, _err = _compare(capsys, str(RUNS / "demo-a"), str(RUNS / "demo-b"))
    assert code == 0


def _scaled_copy(tmp_path: Path, factor: float) -> Path:
    """The iterations run with every IOPS figure multiplied by `factor` (latency unchanged)."""
    dest = tmp_path / f"scaled-{factor}"
    shutil.copytree(RUNS / "iterations", dest, ignore=shutil.ignore_patterns("prometheus.json"))
    for path in dest.glob("step-*/result.json"):
        result = json.loads(path.read_text())
        for r in result["results"]:
            r["iops"] *= factor
        path.write_text(json.dumps(result))
    return dest


def test_compare_welch_across_iterations(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    slower = _scaled_copy(tmp_path, 0.3)
    comparisons, _a, _b = compare.compare_runs(RUNS / "iterations", slower, 10.0, 0.05)
    assert len(comparisons) == 8  # 4 parameter sets x 2 modes, 3 iterations each
    iops_a: dict[tuple[str, str], list[float]] = {}
    for path in sorted((RUNS / "iterations").glob("step-*/result.json")):
        result = json.loads(path.read_text())
        params = Step.from_dict(json.loads((path.parent / "params.json").read_text()))
        for r in result["results"]:
            iops_a.setdefault((f"radosbench {params.short_params()}", r["mode"]), []).append(
                r["iops"])
    verdicts = set()
    for c in comparisons:
        (fig,) = [f for f in c.figures if f.figure == "iops"]
        a = iops_a[(c.params, c.mode)]
        expected = stats.welch(a, [v * 0.3 for v in a])
        assert (fig.n_a, fig.n_b) == (3, 3)
        assert fig.p_value == pytest.approx(expected.p)
        assert fig.ratio == pytest.approx(0.3)
        assert fig.verdict == ("regression" if expected.p < 0.05 else "not significant")
        verdicts.add(fig.verdict)
        latency = [f for f in c.figures if f.figure == "latency_avg_seconds"]
        assert latency[0].verdict == "ok" and latency[0].p_value == pytest.approx(1.0)
    assert "regression" in verdicts
    code, out, _err = _compare(capsys, str(RUNS / "iterations"), str(slower),
                               "--fail-on-regression", "10", "--format", "json")
    assert code == compare_cli.EXIT_REGRESSION
    data = json.loads(out)
    assert data["alpha"] == 0.05 and len(data["comparisons"]) == 8
    # a stricter alpha turns the marginal ones into "not significant"
    strict = [f.verdict for c in compare.compare_runs(RUNS / "iterations", slower, 10.0,
                                                          1e-9)[0]
              for f in c.figures if f.figure == "iops"]
    assert "regression" not in strict
    code, out, _err = _compare(capsys, str(RUNS / "iterations"), str(slower), "--format", "csv")
    assert code == 0
    lines = list(csv.DictReader(out.splitlines()))
    assert len(lines) == 16 and {ln["figure"] for ln in lines} == {"IOPS", "avg latency"}
    assert {ln["n A"] for ln in lines} == {"3"}


def test_compare_bad_inputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = _compare(capsys, str(RUNS / "demo-a"), str(RUNS / "objsize"))
    assert code == 2 and "no step" in err
    code, _out, err = _compare(capsys, str(tmp_path), str(RUNS / "demo-a"))
    assert code == 2 and "not a cephscope run dir" in err
    code, _out, err = _compare(capsys, str(RUNS / "demo-a"), str(RUNS / "demo-a"),
                               "--fail-on-regression", "-5")
    assert code == 2 and ">= 0" in err
    code, _out, err = _compare(capsys, str(RUNS / "demo-a"), str(RUNS / "demo-a"),
                               "--alpha", "1.5")
    assert code == 2 and "--alpha" in err


def test_system_figures_use_each_modes_window() -> None:
    # fio steps: prepare() prefills the image before the randread mode starts; the mode's own
    # window (recorded by the sweep) keeps the prefill writes out of the figures.
    step_dir = next((RUNS / "objsize").glob("step-*"))
    prometheus = json.loads((step_dir / "prometheus.json").read_text())
    span = json.loads((step_dir / "result.json").read_text())["timestamps"]["modes"]["randread"]
    _run, rows = load_rows(RUNS / "objsize")
    (row,) = [r for r in rows if r.step.id == step_dir.name.removeprefix("step-")]
    cpu_series = prometheus["queries"]["cpu_busy_ratio"]["result"]
    inside = [float(v) for t, v in cpu_series[0]["values"] if span["start"] <= t <= span["end"]]
    assert inside, "the fixture has points inside the mode window"
    assert row.system.cpu_busy_ratio == pytest.approx(statistics.fmean(inside))
    whole = summarize_system(prometheus)
    osd_ops = summarize_system(prometheus, window=(span["start"], span["end"]))
    assert osd_ops.osd_ops_per_second != whole.osd_ops_per_second


def test_idle_baseline_is_shown_beside_each_step(tmp_path: Path) -> None:
    """The idle baseline window's figures (a captured window of the same cluster stands in for
    it: demo-b's first step) beside each step's, for the same host / device."""
    from cephscope.runner.report.build import IDLE_NOTE, build_content, load_idle_baseline
    from cephscope.runner.results import IDLE_BASELINE_FILE

    run_dir = _copy("demo-a", tmp_path)
    assert build_content(run_dir).idle is None  # no idle baseline recorded: no section
    idle_capture = RUNS / "demo-b" / "step-d88fe92890df" / "prometheus.json"
    shutil.copy(idle_capture, run_dir / IDLE_BASELINE_FILE)
    window = json.loads(idle_capture.read_text())
    RunDir(run_dir).update_state(idle_baseline={"start": window["start"], "end": window["end"]})
    idle = load_idle_baseline(run_dir)
    assert idle is not None and idle.cpu_busy_ratio is not None
    content = build_content(run_dir)
    assert content.idle is not None
    header, body = content.idle
    col = {name: i for i, name in enumerate(header)}
    by_step = {r.step.id: r for r in content.rows}
    assert {line[0] for line in body} == set(by_step)
    for line in body:
        step = by_step[line[0]].system
        assert step.cpu_busy_ratio is not None
        # the same host's busy fraction (this capture predates the per-mode query)
        modes = idle.cpu_modes.get(step.cpu_instance or "")
        idle_cpu = sum(modes.values()) if modes else idle.cpu_busy_ratio
        assert line[col["CPU busy %"]] == f"{step.cpu_busy_ratio * 100:,.1f}"
        assert line[col["idle CPU %"]] == f"{idle_cpu * 100:,.1f}"
        assert line[col["CPU above idle %"]] == f"{(step.cpu_busy_ratio - idle_cpu) * 100:,.1f}"
        disk = max(step.devices, key=lambda d: d.util_ratio or 0.0)
        assert line[col["disk"]] == disk.device
        (same,) = [d for d in idle.devices if (d.host, d.device) == (disk.host, disk.device)]
        assert line[col["idle IOPS"]] == f"{same.iops:,.0f}"
    md = write_report(run_dir, plots=False).markdown_path.read_text()
    assert "## System vs idle baseline" in md and IDLE_NOTE in md


def test_idle_baseline_without_its_metrics_adds_nothing(tmp_path: Path) -> None:
    from cephscope.runner.report.build import build_content

    run_dir = _copy("demo-a", tmp_path)
    RunDir(run_dir).update_state(idle_baseline={"start": 1.0, "end": 31.0})
    assert build_content(run_dir).idle is None  # recorded, but no Prometheus data for it


def test_swept_values_are_the_x_ticks() -> None:
    from cephscope.runner.report.plots import _pyplot, axis_title, place_axis

    plt = _pyplot()
    fig, (log2, categories) = plt.subplots(1, 2)
    try:
        # powers of two: a log2 axis whose ticks are exactly the swept values
        where = place_axis(log2, [4, 1, 16, 1])
        assert log2.get_xscale() == "log" and where == {1: 1.0, 4: 4.0, 16: 16.0}
        assert [t.get_text() for t in log2.get_xticklabels()] == ["1", "4", "16"]
        # anything else: one evenly spaced category per value, in order
        where = place_axis(categories, [20, 1, 10, 5])
        assert categories.get_xscale() == "linear" and where == {1: 0.0, 5: 1.0, 10: 2.0,
                                                                 20: 3.0}
        assert [t.get_text() for t in categories.get_xticklabels()] == ["1", "5", "10", "20"]
    finally:
        plt.close(fig)
    assert axis_title("osd_op_num_shards") == "osd_op_num_shards (shards per OSD)"
    assert axis_title("op_size") == "op_size (bytes)"
    assert axis_title("pool_profile") == "pool_profile"
