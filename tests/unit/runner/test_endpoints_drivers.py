"""Client endpoint drivers against scripted clients: the argv each runs where, every mount in
the run's journal before it is made and out of it once unmounted, removal after a failure,
a leftover mount of a killed attempt unmounted first; the CephFS choices of
runner/endpoints/cephfs.py; the undo order of the restore."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cephscope.runner.benchmarks.base import BenchContext, BenchmarkError, ClusterAccess
from cephscope.runner.endpoints.base import EndpointSite
from cephscope.runner.endpoints.cephfs import (
    CephfsFuseDriver,
    ensure_filesystem,
    filesystem_problem,
)
from cephscope.runner.endpoints.rbd_fuse import RbdFuseDriver
from cephscope.runner.endpoints.settings import EndpointSpec
from cephscope.runner.endpoints.undo import UndoLog, undo_all, valid_entries
from tests.unit.runner_fakes import MountTable, ScriptedHost, install_fake_tools


class FakeMon:
    """Mon commands of a cluster with filesystems `fs` (name -> data pools)."""

    def __init__(self, fs: dict[str, list[str]] | None = None, mds_active: bool = True) -> None:
        self.fs = dict(fs or {})
        self.mds_active = mds_active
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, prefix: str, **args: Any) -> Any:
        self.calls.append((prefix, args))
        if prefix == "fs ls":
            return [{"name": n, "data_pools": list(p)} for n, p in self.fs.items()]
        if prefix == "fs add_data_pool":
            self.fs[args["fs_name"]].append(args["pool"])
        elif prefix == "fs rm_data_pool":
            self.fs[args["fs_name"]].remove(args["pool"])
        elif prefix == "fs new":
            self.fs[args["fs_name"]] = [args["data"]]
        elif prefix == "fs rm":
            del self.fs[args["fs_name"]]
        elif prefix == "fs get":
            state = "up:active" if self.mds_active else "up:standby"
            return {"mdsmap": {"info": {"gid_1": {"state": state}}}}
        return None


def _site(tmp_path: Path, driver: str, hosts: tuple = (), ceph: Any = None,
          cephfs_pools: dict[str, str] | None = None, per_client: int = 1,
          ensure_pool: Callable[[str, str, str], str] | None = None) -> EndpointSite:
    ctx = BenchContext(cluster=ClusterAccess(Path("/etc/ceph/c.conf"), "client.admin",
                                             Path("/etc/ceph/k")),
                       pool="cephscope-p", step_dir=tmp_path / "run" / "step-s1", run_id="r1",
                       step_id="s1", clients=hosts)
    spec = EndpointSpec("e", driver, endpoints_per_client=per_client, endpoint_size_mib=64)
    journal: list[dict[str, str]] = []
    undo = UndoLog(load=lambda: list(journal), store=lambda e: journal.__setitem__(
        slice(None), e))
    return EndpointSite(ctx, spec, undo, ceph, ensure_pool, dict(cephfs_pools or {}))


@pytest.fixture()
def fake_rbd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return install_fake_tools(tmp_path, monkeypatch, ("rbd",))


def test_rbd_fuse_mounts_one_image_per_endpoint_and_client(tmp_path: Path,
                                                           fake_rbd: Path) -> None:
    tables = {n: MountTable() for n in ("c1", "c2")}
    hosts = tuple(ScriptedHost(n, tables[n]) for n in ("c1", "c2"))
    site = _site(tmp_path, "rbd-fuse", hosts, per_client=2)
    journaled: list[list[dict[str, str]]] = []
    store = site.undo.store
    site.undo.store = lambda e: (journaled.append(list(e)), store(e))  # type: ignore[method-assign]
    driver = RbdFuseDriver(site)
    driver.create()
    c1 = hosts[0].calls
    mounts = [a for a in c1 if a[0] == "rbd-fuse"]
    mp = str(site.mountpoint(site.clients[0], 1))
    assert mounts[1] == ["rbd-fuse", "-c", "/etc/ceph/c.conf", "-p", "cephscope-p", "-r",
                         "cephscope-s1-c1-1", mp]
    # mountpoints are cephscope's own, under the run dir, beside (not in) the step dir
    assert mp == str(tmp_path / "run" / "client-work" / "c1" / "mnt" / "s1-1")
    assert ["test", "-f", f"{mp}/cephscope-s1-c1-1"] in c1
    # each mount journaled before its tool ran
    assert {"kind": "mount", "host": "c2", "path": str(site.mountpoint(site.clients[1], 0))} \
        in journaled[2]
    assert len(site.undo.entries()) == 4
    (endpoint, _second) = driver.endpoints(site.clients[0])
    assert endpoint.kind == "file" and endpoint.path.endswith("/s1-0/cephscope-s1-c1-0")
    assert driver.remove() == []
    assert site.undo.entries() == [] and not any(t.mounted for t in tables.values())
    calls = (tmp_path / "calls.log").read_text()
    assert calls.count(" create ") == 4 and calls.count(" rm ") == 8


def test_a_leftover_mount_is_unmounted_before_mounting_again(tmp_path: Path,
                                                             fake_rbd: Path) -> None:
    table = MountTable()
    host = ScriptedHost("c1", table)
    site = _site(tmp_path, "rbd-fuse", (host,))
    table.mounted.add(site.mountpoint(site.clients[0], 0))  # a killed attempt's mount
    RbdFuseDriver(site).create()
    programs = [a[0] for a in host.calls]
    assert programs.index("umount") < programs.index("rbd-fuse")


def test_a_mount_that_did_not_happen_fails_the_step_and_is_cleaned(tmp_path: Path,
                                                                  fake_rbd: Path) -> None:
    host = ScriptedHost("c1", lambda argv: (1, b"") if argv[0] == "mountpoint" else (0, b""))
    site = _site(tmp_path, "rbd-fuse", (host,))
    driver = RbdFuseDriver(site)
    with pytest.raises(BenchmarkError, match="nothing is mounted"):
        driver.create()
    assert len(site.undo.entries()) == 1  # journaled: the restore would look again
    assert driver.remove() == [] and site.undo.entries() == []


def test_cephfs_fuse_on_an_existing_filesystem_with_its_data_pool(tmp_path: Path) -> None:
    table = MountTable()

    def answer(argv: list[str]) -> tuple[int, bytes]:
        if argv[0] == "python3":  # the layout, read back
            return 0, argv[-1].encode() + b"\n"
        return table(argv)

    host = ScriptedHost("c1", answer)
    mon = FakeMon({"cephfs": ["cephfs_data"]})
    site = _site(tmp_path, "cephfs-fuse", (host,), mon,
                 {"cephfs_data": "rep1", "cephfs_metadata": "rep1"}, per_client=2,
                 ensure_pool=lambda profile, app, role: f"cephscope-{profile}-{role}")
    driver = CephfsFuseDriver(site)
    driver.create()
    pool = "cephscope-rep1-cephfs-data"
    assert ("fs add_data_pool", {"fs_name": "cephfs", "pool": pool}) in mon.calls
    assert {"kind": "cephfs_data_pool", "fs": "cephfs", "pool": pool} in site.undo.entries()
    fuse = [a for a in host.calls if a[0] == "ceph-fuse"]
    assert len(fuse) == 2 and "--client_fs=cephfs" in fuse[0]
    # two mounts of one client name: no pid file or admin socket from the conf
    assert "--pid_file=" in fuse[0] and "--admin_socket=" in fuse[0]
    base = f"{site.mountpoint(site.clients[0], 0)}/cephscope-r1-s1"
    layout = next(a for a in host.calls if a[0] == "python3")
    assert layout[-2:] == [base, pool] and "ceph.dir.layout.pool" in layout[2]
    assert driver.endpoints(site.clients[0])[1].path == \
        f"{site.mountpoint(site.clients[0], 1)}/cephscope-r1-s1/c1-1"
    assert driver.remove() == []
    # the step's files go with it; the data pool stays in the filesystem until the run ends
    assert ["rm", "-rf", "--one-file-system", base] in host.calls
    assert [e["kind"] for e in site.undo.entries()] == ["cephfs_data_pool"]
    problems = undo_all(site.undo, lambda name: host, mon, (RuntimeError,))
    assert problems == [] and mon.fs == {"cephfs": ["cephfs_data"]}


def test_cephfs_fuse_without_cephfs_pools_leaves_the_filesystem_alone(tmp_path: Path) -> None:
    mon = FakeMon({"a": ["a_data"], "b": ["b_data"]})
    site = _site(tmp_path, "cephfs-fuse", (ScriptedHost("c1", MountTable()),), mon)
    assert ensure_filesystem(site).name == "a" and ensure_filesystem(site).layout_pool is None
    assert [p for p, _a in mon.calls if p != "fs ls"] == []


def test_a_filesystem_is_made_from_cephfs_pools_when_there_is_none(tmp_path: Path) -> None:
    mon = FakeMon()
    made: list[tuple[str, str, str]] = []

    def ensure_pool(profile: str, application: str, role: str) -> str:
        made.append((profile, application, role))
        return f"cephscope-{profile}-{role}"

    site = _site(tmp_path, "cephfs-fuse", (), mon, {"cephfs_data": "d", "cephfs_metadata": "m"},
                 ensure_pool=ensure_pool)
    fs = ensure_filesystem(site)
    assert fs.name == "cephscope" and made == [("m", "cephfs", "cephfs-metadata"),
                                               ("d", "cephfs", "cephfs-data")]
    assert ("fs new", {"fs_name": "cephscope", "metadata": "cephscope-m-cephfs-metadata",
                       "data": "cephscope-d-cephfs-data"}) in mon.calls
    assert site.undo.entries() == [{"kind": "filesystem", "fs": "cephscope"}]
    assert undo_all(site.undo, lambda n: ScriptedHost(n), mon, (RuntimeError,)) == []
    assert [p for p, _a in mon.calls[-2:]] == ["fs fail", "fs rm"] and mon.fs == {}


def test_no_mds_to_take_a_new_filesystem_is_said(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr("cephscope.runner.endpoints.cephfs.time.sleep", lambda s: None)
    monkeypatch.setattr("cephscope.runner.endpoints.cephfs.MDS_ACTIVE_SECONDS", 0.0)
    site = _site(tmp_path, "cephfs-fuse", (), FakeMon(mds_active=False),
                 {"cephfs_data": "d", "cephfs_metadata": "m"},
                 ensure_pool=lambda p, a, r: "meta")
    with pytest.raises(BenchmarkError, match="no MDS became active"):
        ensure_filesystem(site)


def test_filesystem_problems_before_any_change() -> None:
    assert "has no CephFS filesystem;" in str(filesystem_problem(FakeMon(), None, False))
    assert "no CephFS filesystem 'x' (it has: a)" in str(
        filesystem_problem(FakeMon({"a": []}), "x", False))
    assert filesystem_problem(FakeMon(), None, True) is None
    assert filesystem_problem(FakeMon({"a": []}), None, False) is None


def test_undo_order_mounts_first_and_problems_kept(tmp_path: Path) -> None:
    order: list[str] = []
    table = MountTable()
    table.mounted |= {"/m/0", "/m/1"}

    def answer(argv: list[str]) -> tuple[int, bytes]:
        order.append(" ".join(argv))
        if argv[:2] == ["umount", "/m/1"] or argv[:3] == ["umount", "-l", "/m/1"]:
            return 1, b""
        return table(argv)

    mon = FakeMon({"cephfs": ["d", "extra"]})
    mon_calls = mon.calls
    entries = [{"kind": "cephfs_data_pool", "fs": "cephfs", "pool": "extra"},
               {"kind": "mount", "host": "c1", "path": "/m/0"},
               {"kind": "mount", "host": "c1", "path": "/m/1"}]
    assert valid_entries(entries) and not valid_entries([{"kind": "bomb"}])
    journal = list(entries)
    log = UndoLog(load=lambda: list(journal), store=lambda e: journal.__setitem__(slice(None), e))
    host = ScriptedHost("c1", answer)
    problems = undo_all(log, lambda name: host, mon, (RuntimeError,))
    assert len(problems) == 1 and "/m/1" in problems[0]
    assert journal == [{"kind": "mount", "host": "c1", "path": "/m/1"}]
    assert order.index("umount /m/0") < len(order)
    assert mon_calls[-1] == ("fs rm_data_pool", {"fs_name": "cephfs", "pool": "extra"})
