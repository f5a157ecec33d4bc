"""CBT's rawfio: its keys read as CBT reads them, its checks, and its lifecycle on files with
a stand-in fio (3 processes round robin over 2 paths, the initialisation in op_size blocks,
the file it made removed after the step)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cephscope.runner.benchmarks.base import BenchContext, ClusterAccess
from cephscope.runner.benchmarks.rawfio import RawFio
from tests.unit.runner_fakes import install_fake_tools


@pytest.mark.parametrize(("params", "fragment"), [
    ({}, "block_devices missing"),
    ({"block_devices": "dev/vdb"}, "not an absolute path"),
    ({"block_devices": "/dev/vdb", "fio_cmd": "sudo /usr/bin/fio"}, "no sudo or shell"),
    ({"block_devices": "/dev/vdb", "ramp": "soon"}, "ramp must be seconds"),
    ({"block_devices": "/dev/vdb", "mode": "readwrite2"}, "rawfio: mode must be one of"),
    ({"block_devices": "/dev/vdb", "concurrent_procs": 0}, "'concurrent_procs' must be > 0"),
])
def test_rawfio_validation(params: dict, fragment: str) -> None:
    assert any(fragment in p for p in RawFio.validate(params)), RawFio.validate(params)


def test_rawfio_reads_cbts_keys() -> None:
    assert RawFio.validate({"block_devices": "/dev/vdb,/dev/vdc", "ramp": "0", "time": 60,
                            "vol_size": 1024, "direct": 0, "op_size": 4096000}) == []
    bench = RawFio({"block_devices": "/dev/vdb, /dev/vdc", "concurrent_procs": 3,
                    "vol_size": 1000, "fio_cmd": "/usr/bin/fio", "ramp": "2", "log_bw": False,
                    "log_iops": False, "log_lat": False})
    assert bench.paths == ["/dev/vdb", "/dev/vdc"]
    assert bench.endpoint is not None and bench.endpoint.endpoints_per_client == 3
    s = bench.settings
    assert (s["size"], s["cmd_path"], s["ramp"], s["time"]) == (900, "/usr/bin/fio", 2.0, 300.0)
    assert s["logging"] is False and not RawFio.needs_pool({})


def test_lifecycle_on_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install_fake_tools(tmp_path, monkeypatch, ("fio",))
    existing, made = tmp_path / "old.img", tmp_path / "new.img"
    existing.write_bytes(b"keep")
    ctx = BenchContext(cluster=ClusterAccess(Path("/c.conf")), pool="", run_id="r",
                       step_dir=tmp_path / "run" / "step-s1", step_id="s1")
    bench = RawFio({"block_devices": f"{existing},{made}", "concurrent_procs": 3,
                    "vol_size": 100, "op_size": 65536, "time": 2, "mode": "randread"})
    bench.prepare(ctx)
    made.write_bytes(b"as fio would")  # the stand-in writes nothing
    bench.run("randread", ctx)
    result = bench.parse("randread", ctx)
    bench.cleanup(ctx)
    calls = [c for c in (tmp_path / "calls.log").read_text().splitlines() if c.startswith("fio ")]
    prefill, runs = calls[:3], calls[3:]
    assert all("--rw=write" in c and "--bs=65536" in c and "--size=90M" in c for c in prefill)
    targets = [c.split("--filename=")[1].split()[0] for c in runs]
    assert sorted(targets) == sorted([str(existing), str(made), str(existing)])  # at once
    assert all("--ioengine=libaio" in c and "--direct=1" in c and "--rw=randread" in c
               for c in runs)
    assert result.benchmark == "rawfio" and result.extra["processes"] == 3
    assert existing.read_bytes() == b"keep" and not made.exists()
