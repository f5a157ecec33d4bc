"""fio + rbd engine: validation, argv, the lifecycle and its failure paths (fio's JSON
output itself: test_bench_fio_json.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cephscope.runner.benchmarks import BENCHMARKS
from cephscope.runner.benchmarks.base import BenchContext, BenchmarkError, ClusterAccess
from cephscope.runner.benchmarks.fio_json import parse_report_file, result_from_reports
from cephscope.runner.benchmarks.librbdfio import LibrbdFio, object_size_bytes
from tests.unit.bench_golden import TOOLS_DIR
from tests.unit.runner_fakes import install_fake_tools

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


@pytest.fixture()
def fake_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return install_fake_tools(tmp_path, monkeypatch, ("fio", "rbd"))


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
    single = result_from_reports("randread", [parse_report_file(
        TOOLS_DIR / "fio-3.33-rbd-randread-4k-qd16-status1.jsonplus")])
    assert result.iops == pytest.approx(2 * single.iops)
    assert len(samples) == 5 and all(s.ops_per_second > 0 for s in samples)


def test_fio_failure_carries_stderr(tmp_path: Path, fake_tools: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_FIO_FAIL", "1")
    bench = LibrbdFio({"mode": "randwrite", "time": 1, "use_existing_volumes": True,
                       "rbdname": "img"})
    with pytest.raises(BenchmarkError, match=r"(?s)status 1.*rbd_open failed"):
        bench.run("randwrite", _ctx(tmp_path))
