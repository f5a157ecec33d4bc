"""CBT's fio benchmark: its checks, the fio argv per kind of endpoint, total_iodepth, and the
lifecycle on librbd endpoints of two clients with stand-in tools (images made and removed,
prefill, precondition, fio's logs fetched from each client's work dir into the step dir)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cephscope.runner.benchmarks import BENCHMARKS
from cephscope.runner.benchmarks.base import BenchContext, BenchmarkError, ClusterAccess
from cephscope.runner.benchmarks.fio import Fio, split_depth
from cephscope.runner.endpoints.base import Client, Endpoint
from cephscope.runner.endpoints.settings import EndpointSpec
from cephscope.runner.endpoints.undo import UndoLog
from cephscope.runner.hostexec import LocalHost
from tests.unit.bench_golden import TOOLS_DIR
from tests.unit.runner_fakes import install_fake_tools

RBD = EndpointSpec("rbd", "librbd", endpoints_per_client=2, endpoint_size_mib=256).to_dict()


def _ctx(tmp_path: Path, clients: tuple = ()) -> BenchContext:
    run_dir = tmp_path / "run"
    return BenchContext(
        cluster=ClusterAccess(Path("/etc/ceph/test.conf"), "client.bench",
                              Path("/etc/ceph/bench.keyring")),
        pool="rbdpool", step_dir=run_dir / "step-s1", run_id="run1", step_id="s1",
        timeout_seconds=60, clients=clients, undo=UndoLog())


def test_registry_has_fio_and_rawfio() -> None:
    assert BENCHMARKS["fio"] is Fio and "rawfio" in BENCHMARKS


@pytest.mark.parametrize(("total", "endpoints", "depths"), [
    (16, 4, [4, 4, 4, 4]), (17, 4, [5, 4, 4, 4]), (3, 4, [1, 1, 1]), (1, 8, [1]),
    (8, 1, [8]),
])
def test_total_iodepth_spreads_like_cbt(total: int, endpoints: int, depths: list[int]) -> None:
    assert split_depth(total, endpoints) == depths
    assert sum(split_depth(total, endpoints)) == total


@pytest.mark.parametrize(("params", "fragment"), [
    ({"mode": "randomread"}, "mode must be one of"),
    ({"iodepth": 0}, "'iodepth' must be > 0"),
    ({"bs": "4 parsecs"}, "not a fio block size"),
    ({"bssplit": "4k/50:64k/50;rm"}, "not a fio block size"),
    ({"direct": 2}, "direct must be 0 or 1"),
    ({"time_based": True}, "time_based needs time"),
    ({"ioengine": "libaio --exec_prerun=x"}, "may hold only letters"),
    ({"rwmixread": 101}, "rwmixread must be 0..100"),
    ({"log_avg_msec": -1}, "'log_avg_msec' must be > 0"),
])
def test_validate_names_the_problem(params: dict, fragment: str) -> None:
    problems = Fio.validate({"client_endpoints": "rbd", "endpoint": RBD, "size": 64, **params})
    assert any(fragment in p for p in problems), problems


def test_validate_checks_the_precondition_too() -> None:
    problems = Fio.validate({"client_endpoints": "rbd", "endpoint": RBD, "size": 64,
                             "precondition": {"mode": "sideways", "size": 64}})
    assert any(p.startswith("fio precondition: mode must be one of") for p in problems)


def _argv(endpoint: Endpoint, log_prefix: str | None = None, **settings: object) -> list[str]:
    bench = Fio({"client_endpoints": "x", "mode": "randrw", "rwmixread": 70, "op_size": "4k",
                 "numjobs": 2, "procs_per_endpoint": 2, "size": 32, "time": 5,
                 "time_based": True, "ramp": 1, "norandommap": True, "rate_iops": 100,
                 "random_distribution": "zipf:1.2", **settings})
    return bench.argv("/usr/bin/fio", endpoint, 8, bench.settings, "bench", log_prefix)


def test_argv_for_an_rbd_endpoint() -> None:
    argv = _argv(Endpoint(Client(None), 1, "rbd", pool="p", image="img"), "/logs/p", direct=0,
                 ioengine="libaio", log_avg_msec=250)
    for expected in ("--ioengine=rbd", "--clientname=bench", "--pool=p", "--rbdname=img",
                     "--invalidate=0", "--direct=1", "--rw=randrw", "--rwmixread=70",
                     "--bs=4096", "--iodepth=8", "--numjobs=2", "--size=32M", "--runtime=5",
                     "--time_based", "--ramp_time=1", "--norandommap", "--rate_iops=100",
                     "--random_distribution=zipf:1.2", "--output-format=json+",
                     "--status-interval=1", "--lat_percentiles=1", "--group_reporting",
                     "--write_iops_log=/logs/p", "--write_lat_log=/logs/p",
                     "--write_bw_log=/logs/p", "--log_avg_msec=250", "--log_unix_epoch=1"):
        assert expected in argv, expected
    # the rbd engine always: the spec's ioengine and direct are for files
    assert "--ioengine=libaio" not in argv and "--direct=0" not in argv
    # one job section per process of the endpoint, after every global option
    assert argv[-2:] == ["--name=cephscope-1-0", "--name=cephscope-1-1"]


def test_argv_for_file_and_directory_endpoints() -> None:
    argv = _argv(Endpoint(Client(None), 0, "file", path="/mnt/x/img"), direct=0,
                 bs="4k-64k", bssplit="4k/50:64k/50")
    assert "--filename=/mnt/x/img" in argv and "--ioengine=libaio" in argv
    assert "--direct=0" in argv and "--bs=4k-64k" in argv and "--bssplit=4k/50:64k/50" in argv
    argv = _argv(Endpoint(Client(None), 0, "directory", path="/mnt/fs/d"))
    assert "--directory=/mnt/fs/d" in argv and "--direct=1" in argv
    assert not any(a.startswith("--write_") for a in argv)


@pytest.fixture()
def fake_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bindir = install_fake_tools(tmp_path, monkeypatch, ("fio", "rbd"))
    monkeypatch.setenv("FAKE_FIO_LOGS", str(TOOLS_DIR / "fio-3.33-logs-randrw70-2jobs"))
    return bindir


def test_lifecycle_on_two_clients(tmp_path: Path, fake_tools: Path) -> None:
    clients = (LocalHost("client1"), LocalHost("client2"))
    ctx = _ctx(tmp_path, clients)
    bench = Fio({"client_endpoints": "rbd", "endpoint": RBD, "mode": "randread",
                 "op_size": 4096, "total_iodepth": 3, "size": 64, "time": 5,
                 "log_avg_msec": 500,
                 "precondition": {"mode": "randwrite", "iodepth": 4, "size": 64, "time": 2}})
    bench.prepare(ctx)
    assert bench.has_precondition
    bench.precondition(ctx)
    files = bench.run("randread", ctx)
    result = bench.parse("randread", ctx)
    per_client = bench.parse_clients("randread", ctx)
    bench.cleanup(ctx)
    calls = (tmp_path / "calls.log").read_text().splitlines()
    creates = [c for c in calls if c.startswith("rbd ") and " create " in c]
    assert [c.split()[-2] for c in creates] == [f"rbdpool/cephscope-s1-client{n}-{i}"
                                                for n in (1, 2) for i in (0, 1)]
    assert all("--size 256M" in c and "--object-size 4194304" in c for c in creates)
    fio = [c for c in calls if c.startswith("fio ")]
    prefill = [c for c in fio if "--bs=4M" in c]
    precondition = [c for c in fio if "--rw=randwrite" in c and "--bs=4M" not in c]
    runs = [c for c in fio if "--rw=randread" in c]
    assert len(prefill) == 4 and len(precondition) == 4  # every endpoint of every client
    # total_iodepth 3 over 2 endpoints per client: 2 + 1
    assert sorted(c.split("--iodepth=")[1].split()[0] for c in runs) == ["1", "1", "2", "2"]
    assert len(files) == 8  # stdout and stderr of 4 processes
    # the clients' logs were written in their work dirs and copied into the step dir
    logs = sorted(p.name for p in ctx.step_dir.glob("*_iops.*.log"))
    assert logs == sorted(f"fio-randread.client{n}.{i}_iops.{j}.log"
                          for n in (1, 2) for i in (0, 1) for j in (1, 2))
    assert not list((ctx.step_dir.parent / "client-work").rglob("*.log"))
    assert result.extra["time_series"]["jobs"] == 8 and result.extra["processes"] == 4
    assert result.extra["endpoint"] == {"name": "rbd", "driver": "librbd",
                                        "endpoints_per_client": 2, "iodepths": [2, 1]}
    assert set(per_client) == {"client1", "client2"}
    assert per_client["client1"].iops == pytest.approx(result.iops / 2)
    assert json.loads((ctx.step_dir / "precondition.json").read_text())["mode"] == "precondition"
    removes = [c for c in calls if c.startswith("rbd ") and " rm " in c]
    assert len(removes) == 8  # a clean start per image, and the cleanup


def test_a_failed_prepare_still_cleans_up_what_it_made(tmp_path: Path, fake_tools: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_FIO_FAIL", "1")
    ctx = _ctx(tmp_path)
    bench = Fio({"client_endpoints": "rbd", "endpoint": RBD, "size": 64, "time": 1})
    with pytest.raises(BenchmarkError, match="prefill"):
        bench.prepare(ctx)
    bench.cleanup(ctx)
    calls = (tmp_path / "calls.log").read_text().splitlines()
    removes = [c.split()[-2] for c in calls if c.startswith("rbd ") and " rm " in c]
    assert removes.count("rbdpool/cephscope-s1-local-0") == 2


def test_run_without_prepare_is_a_clear_error(tmp_path: Path) -> None:
    bench = Fio({"client_endpoints": "rbd", "endpoint": RBD, "size": 64})
    with pytest.raises(BenchmarkError, match="prepare did not run"):
        bench.run("write", _ctx(tmp_path))


def test_cephfs_steps_use_the_filesystems_pools() -> None:
    fs = EndpointSpec("fs", "cephfs-fuse").to_dict()
    assert not Fio.needs_pool({"endpoint": fs})
    assert not Fio.needs_pool({"endpoint": fs, "cephfs_pools": {"cephfs_data": "a"}})
    assert Fio.application({"endpoint": fs}) == "cephfs"
    assert Fio.application({"endpoint": RBD}) == "rbd" and Fio.needs_pool({"endpoint": RBD})
