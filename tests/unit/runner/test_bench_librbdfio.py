"""fio + rbd engine: parsers replayed on real fio 3.33 captures (json+ with status reports),
merged percentiles, live figures, validation, argv, and failure paths."""

from __future__ import annotations

import json
import stat
import sys
import textwrap
from pathlib import Path

import pytest

from cephscope.runner.benchmarks import BENCHMARKS
from cephscope.runner.benchmarks.base import BenchContext, BenchmarkError, ClusterAccess, LiveSample
from cephscope.runner.benchmarks.librbdfio import (
    LibrbdFio,
    LiveAggregator,
    _StreamScanner,
    final_report,
    iter_json_objects,
    object_size_bytes,
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
        scanner = _StreamScanner(0, aggregator)
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


# ---- validation, argv ---------------------------------------------------------------------------

def test_registry() -> None:
    assert BENCHMARKS["librbdfio"] is LibrbdFio


@pytest.mark.parametrize(
    "params, fragment",
    [
        ({"mode": "randomread"}, "mode must be one of"),
        ({"iodepth": -1}, "'iodepth' must be > 0"),
        ({"iodepth": 1.5}, "'iodepth' must be int"),
        ({"time": -3}, "'time' must be > 0"),
        ({"rwmixread": 120}, "rwmixread must be 0..100"),
        ({"op_size": "4 parsecs"}, "op_size"),
        ({"vol_object_size": "3M"}, "power of two"),
        ({"use_existing_volumes": True}, "needs rbdname"),
        ({"rbdname": "img$(reboot)"}, "rbdname"),
        ({"volumes": 0}, "'volumes' must be > 0"),
        ({"iodepht": 16}, "unknown parameter 'iodepht'"),
    ],
)
def test_validate_reports_clear_problems(params: dict, fragment: str) -> None:
    problems = LibrbdFio.validate(params)
    assert any(fragment in p for p in problems), problems


def test_validate_accepts_cbt_style_parameters() -> None:
    assert LibrbdFio.validate({"mode": "randrw", "rwmixread": 70, "op_size": 4096, "iodepth": 32,
                               "numjobs": 2, "volumes_per_client": 2, "vol_size": 256,
                               "vol_object_size": 22, "time": 30, "ramp": 5,
                               "pool_profile": "rbd"}) == []
    assert LibrbdFio.validate({"op_size": "64K", "vol_object_size": "512K"}) == []


def test_object_size_forms() -> None:
    assert object_size_bytes(22) == 4 * 2**20
    assert object_size_bytes("512K") == 512 * 1024
    assert object_size_bytes(2 * 2**20) == 2 * 2**20
    with pytest.raises(ValueError):
        object_size_bytes(11)  # 2 KiB: below RBD's minimum


def test_prefill_only_when_reading_from_fresh_images() -> None:
    assert LibrbdFio({"mode": "randread"}).needs_prefill()
    assert LibrbdFio({"mode": "randrw"}).needs_prefill()
    assert not LibrbdFio({"mode": "randwrite"}).needs_prefill()
    assert not LibrbdFio({"mode": "randread", "prefill": False}).needs_prefill()
    assert not LibrbdFio({"mode": "read", "use_existing_volumes": True,
                          "rbdname": "img"}).needs_prefill()
    reads = LibrbdFio.estimated_seconds({"mode": "randread", "time": 10, "vol_size": 1024})
    writes = LibrbdFio.estimated_seconds({"mode": "randwrite", "time": 10, "vol_size": 1024})
    assert reads > writes >= 10


def _ctx(tmp_path: Path, timeout: float = 30.0, samples: list | None = None) -> BenchContext:
    return BenchContext(
        cluster=ClusterAccess(Path("/etc/ceph/test.conf"), "client.bench",
                              Path("/etc/ceph/bench.keyring")),
        pool="rbdpool", step_dir=tmp_path / "step", run_id="r", step_id="s1",
        report_progress=(lambda m, s: samples.append(s)) if samples is not None
        else (lambda m, s: None),
        timeout_seconds=timeout,
    )


def test_argv_and_environment(tmp_path: Path) -> None:
    bench = LibrbdFio({"mode": "randrw", "rwmixread": 70, "op_size": "4K", "iodepth": 8,
                       "numjobs": 2, "time": 5, "ramp": 2, "volumes": 2})
    ctx = _ctx(tmp_path)
    argv = bench.argv(ctx, "/usr/bin/fio", bench.image_names(ctx)[1], "cephscope-1")
    for expected in ("--ioengine=rbd", "--clientname=bench", "--pool=rbdpool",
                     "--rbdname=cephscope-s1-1", "--rw=randrw", "--bs=4096", "--iodepth=8",
                     "--numjobs=2", "--runtime=5", "--ramp_time=2", "--rwmixread=70",
                     "--output-format=json+", "--status-interval=1", "--time_based",
                     "--direct=1", "--group_reporting"):
        assert expected in argv, expected
    env = bench.tool_env(ctx)
    assert env["CEPH_CONF"] == "/etc/ceph/test.conf"
    assert env["CEPH_ARGS"] == "--keyring=/etc/ceph/bench.keyring"
    assert len(bench.output_paths("randrw", ctx)) == 2


FAKE_TOOL = textwrap.dedent(
    """\
    #!{python}
    # Stand-in for fio and rbd: records argv; fio replays a real capture, rbd succeeds.
    import os, sys, time
    with open(os.environ["FAKE_LOG"], "a") as log:
        log.write(os.path.basename(sys.argv[0]) + " " + " ".join(sys.argv[1:]) + " CEPH_CONF="
                  + os.environ.get("CEPH_CONF", "") + "\\n")
    if os.path.basename(sys.argv[0]) == "fio":
        if os.environ.get("FAKE_FIO_FAIL"):
            sys.stderr.write("rbd_open failed.\\nfio_rbd_connect failed.\\n")
            sys.exit(1)
        data = open(os.environ["FAKE_FIO_CAPTURE"]).read()
        for i in range(0, len(data), 20000):
            sys.stdout.write(data[i:i + 20000]); sys.stdout.flush(); time.sleep(0.01)
    """
)


@pytest.fixture()
def fake_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name in ("fio", "rbd"):
        script = bindir / name
        script.write_text(FAKE_TOOL.format(python=sys.executable))
        script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bindir}:{__import__('os').environ['PATH']}")
    monkeypatch.setenv("FAKE_LOG", str(tmp_path / "calls.log"))
    monkeypatch.setenv("FAKE_FIO_CAPTURE",
                       str(TOOLS_DIR / "fio-3.33-rbd-randread-4k-qd16-status1.jsonplus"))
    return bindir


def test_lifecycle_creates_prefills_runs_and_removes_images(tmp_path: Path, fake_tools: Path) -> None:
    samples: list = []
    ctx = _ctx(tmp_path, samples=samples)
    bench = LibrbdFio({"mode": "randread", "op_size": 4096, "time": 4, "vol_size": 64,
                       "vol_object_size": "1M", "volumes": 2})
    bench.prepare(ctx)
    for mode in bench.modes():
        bench.run(mode, ctx)
        result = bench.parse(mode, ctx)
    bench.cleanup(ctx)
    calls = (tmp_path / "calls.log").read_text().splitlines()
    creates = [c for c in calls if c.startswith("rbd ") and " create " in c]
    assert len(creates) == 2
    assert "--object-size 1048576" in creates[0] and "--size 64M" in creates[0]
    assert "rbdpool/cephscope-s1-0" in creates[0]
    prefills = [c for c in calls if c.startswith("fio ") and "--name=prefill" in c]
    assert len(prefills) == 2 and all("--rw=write" in c for c in prefills)
    runs = [c for c in calls if c.startswith("fio ") and "--name=cephscope" in c]
    assert len(runs) == 2 and all("CEPH_CONF=/etc/ceph/test.conf" in c for c in runs)
    removes = [c for c in calls if c.startswith("rbd ") and " rm " in c]
    assert len(removes) == 4  # a pre-create clean-up per image, and the cleanup
    single = result_from_reports("randread", _reports(CAPTURES["fio-randread-4k-qd16-status1"][1]))
    assert result.iops == pytest.approx(2 * single.iops)
    assert len(samples) == 5 and all(s.ops_per_second > 0 for s in samples)


def test_fio_failure_carries_stderr(tmp_path: Path, fake_tools: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_FIO_FAIL", "1")
    bench = LibrbdFio({"mode": "randwrite", "time": 1, "use_existing_volumes": True,
                       "rbdname": "img"})
    with pytest.raises(BenchmarkError, match=r"(?s)status 1.*rbd_open failed"):
        bench.run("randwrite", _ctx(tmp_path))


def test_golden_files_are_json() -> None:
    for name in CAPTURES:
        json.loads((TOOLS_DIR / "golden" / f"{name}.json").read_text())
