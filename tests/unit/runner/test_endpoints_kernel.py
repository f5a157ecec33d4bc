"""Kernel drivers (their modules are absent here: unit-tested only): refused before any change
naming the missing module and client; the commands they would run, as argv; their lifecycle
against a scripted client (map, mkfs, mount; unmount, unmap)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cephscope.runner.benchmarks.base import (
    BenchContext,
    BenchmarkError,
    ClusterAccess,
    PreflightAccess,
)
from cephscope.runner.benchmarks.fio import Fio
from cephscope.runner.endpoints.base import EndpointSite
from cephscope.runner.endpoints.kernel import (
    CephfsKernelDriver,
    KernelBlockDriver,
    ceph_mount_argv,
    device_of,
    mkfs_argv,
    module_problems,
    rbd_map_argv,
    rbd_nbd_map_argv,
    rbd_nbd_unmap_argv,
    rbd_unmap_argv,
    tcmu_backstore_argv,
    tcmu_lun_argv,
    tcmu_remove_argvs,
    xfs_mount_argv,
)
from cephscope.runner.endpoints.settings import EndpointSpec
from cephscope.runner.endpoints.undo import UndoLog
from tests.unit.runner_fakes import MountTable, ScriptedHost, install_fake_tools


def _with_modules(*modules: str, filesystems: str = "nodev\tfuse\n") -> ScriptedHost:
    def answer(argv: list[str]) -> tuple[int, bytes]:
        if argv[:2] == ["test", "-d"]:
            return (0 if argv[2].rsplit("/", 1)[-1] in modules else 1), b""
        if argv == ["cat", "/proc/filesystems"]:
            return 0, filesystems.encode()
        return 0, b""
    return ScriptedHost("c", answer)


def test_modules_are_read_on_every_client_and_the_missing_one_named() -> None:
    with_rbd, without = _with_modules("rbd"), _with_modules()
    without.name = "client2"
    problems = module_problems(["rbd-kernel", "rbd-kernel", "librbd"], [with_rbd, without])
    assert problems == ["client_endpoints driver rbd-kernel needs the kernel module 'rbd', "
                        "missing on client2 (/sys/module/rbd); nothing was changed"]
    assert ["test", "-d", "/sys/module/rbd"] in with_rbd.calls
    assert module_problems(["rbd-nbd", "rbd-tcmu"], [with_rbd])[1].startswith(
        "client_endpoints driver rbd-tcmu needs the kernel module 'target_core_user'")
    # the ceph filesystem counts as there when the kernel offers it (built in)
    assert module_problems(["cephfs-kernel"], [_with_modules(filesystems="nodev\tceph\n")]) == []
    assert "/proc/filesystems" in module_problems(["cephfs-kernel"], [_with_modules()])[0]


def test_here_every_kernel_driver_is_refused_before_any_change() -> None:
    """This machine has none of the modules (/sys/module read for real)."""
    steps = [{"endpoint": EndpointSpec(d, d).to_dict()}
             for d in ("rbd-kernel", "rbd-nbd", "rbd-tcmu", "cephfs-kernel")]
    missing = [m for m in ("rbd", "nbd", "target_core_user", "ceph")
               if not Path(f"/sys/module/{m}").exists()]
    if "ceph" in missing and "ceph" in Path("/proc/filesystems").read_text().split():
        missing.remove("ceph")
    problems = Fio.preflight(steps, PreflightAccess(ceph=lambda prefix, **a: [{"name": "fs"}]))
    # DESIGN.md: none of them on these machines; each missing one named, none other
    assert [p.split("'")[1] for p in problems if "kernel module" in p] == missing


def test_the_commands_they_would_run() -> None:
    assert rbd_map_argv("/c.conf", "admin", "p", "img", "/k") == [
        "rbd", "-c", "/c.conf", "--id", "admin", "--keyring", "/k", "device", "map", "p/img",
        "--options", "noshare"]
    assert rbd_unmap_argv("/c.conf", "admin", "/dev/rbd0") == [
        "rbd", "-c", "/c.conf", "--id", "admin", "device", "unmap", "/dev/rbd0"]
    assert rbd_nbd_map_argv("/c.conf", "admin", "p", "img") == [
        "rbd-nbd", "-c", "/c.conf", "--id", "admin", "map", "p/img"]
    assert rbd_nbd_unmap_argv("/dev/nbd3") == ["rbd-nbd", "unmap", "/dev/nbd3"]
    assert tcmu_backstore_argv("p", "img", 64) == [
        "targetcli", "/backstores/user:rbd", "create", "cfgstring=p/img", "name=img", "size=64M"]
    assert tcmu_lun_argv("naa.5001", "img") == [
        "targetcli", "/loopback/naa.5001/luns", "create", "/backstores/user:rbd/img"]
    assert tcmu_remove_argvs("naa.5001", "img") == [
        ["targetcli", "/loopback", "delete", "naa.5001"],
        ["targetcli", "/backstores/user:rbd", "delete", "img"]]
    assert mkfs_argv("/dev/rbd0") == ["mkfs.xfs", "-f", "/dev/rbd0"]
    assert xfs_mount_argv("/dev/rbd0", "/m") == ["mount", "-t", "xfs", "-o", "noatime",
                                                  "/dev/rbd0", "/m"]
    assert ceph_mount_argv("/c.conf", "admin", "cephfs", "/m") == [
        "mount", "-t", "ceph", ":/", "/m", "-o", "name=admin,conf=/c.conf,mds_namespace=cephfs"]


@pytest.mark.parametrize(("driver", "output"), [
    ("rbd-kernel", "/dev/sda"), ("rbd-kernel", "/dev/rbd0; reboot"), ("rbd-nbd", ""),
    ("rbd-nbd", "/dev/nbd0/../sda"), ("rbd-tcmu", "/dev/rbd0"),
])
def test_a_map_that_prints_no_device_of_its_kind_is_refused(driver: str, output: str) -> None:
    with pytest.raises(BenchmarkError, match="not a device"):
        device_of(driver, output)


def _site(tmp_path: Path, driver: str, host: ScriptedHost) -> EndpointSite:
    ctx = BenchContext(cluster=ClusterAccess(Path("/c.conf"), "client.admin"), pool="p",
                       step_dir=tmp_path / "run" / "step-s1", run_id="r", step_id="s1",
                       clients=(host,))
    return EndpointSite(ctx, EndpointSpec("e", driver, endpoint_size_mib=64), UndoLog())


@pytest.mark.parametrize(("driver", "device", "map_program", "unmap"), [
    ("rbd-kernel", "/dev/rbd7", "rbd", ["rbd", "-c", "/c.conf", "--id", "admin", "device",
                                        "unmap", "/dev/rbd7"]),
    ("rbd-nbd", "/dev/nbd2", "rbd-nbd", ["rbd-nbd", "unmap", "/dev/nbd2"]),
])
def test_block_drivers_map_make_xfs_mount_and_undo(tmp_path: Path, monkeypatch,
                                                   driver: str, device: str, map_program: str,
                                                   unmap: list[str]) -> None:
    install_fake_tools(tmp_path, monkeypatch, ("rbd",))  # the images, made here
    table = MountTable()

    def answer(argv: list[str]) -> tuple[int, bytes]:
        if "map" in argv:
            return 0, f"{device}\n".encode()
        return table(argv)

    host = ScriptedHost("c", answer)
    site = _site(tmp_path, driver, host)
    block = KernelBlockDriver(site)
    block.create()
    programs = [a[0] for a in host.calls]
    assert programs.index(map_program) < programs.index("mkfs.xfs") < programs.index("mount")
    assert ["mkfs.xfs", "-f", device] in host.calls
    mp = site.mountpoint(site.clients[0], 0)
    assert ["mount", "-t", "xfs", "-o", "noatime", device, mp] in host.calls
    assert block.endpoints(site.clients[0])[0].path == mp
    assert block.remove() == []
    assert unmap in host.calls and not table.mounted
    assert host.calls.index(unmap) > max(i for i, a in enumerate(host.calls) if a[0] == "umount")
    created = (tmp_path / "calls.log").read_text()
    if driver == "rbd-kernel":  # krbd cannot map these: turned off as CBT does
        assert "feature disable p/cephscope-s1-c-0 deep-flatten fast-diff object-map" in created


def test_tcmu_finds_its_scsi_disk(tmp_path: Path, monkeypatch) -> None:
    install_fake_tools(tmp_path, monkeypatch, ("rbd",))
    table = MountTable()

    def answer(argv: list[str]) -> tuple[int, bytes]:
        if argv[:2] == ["targetcli", "/loopback"] and argv[2] == "create":
            return 0, b"Created target naa.50014055d6c8b2aa.\n"
        if argv[0] == "cat" and argv[1].endswith("/tpgt_1/address"):
            assert "naa.50014055d6c8b2aa" in argv[1]
            return 0, b"3:0:1\n"
        if argv[0] == "ls":
            assert argv[1] == "/sys/class/scsi_disk/3:0:1:0/device/block"
            return 0, b"sdc\n"
        return table(argv)

    host = ScriptedHost("c", answer)
    block = KernelBlockDriver(_site(tmp_path, "rbd-tcmu", host))
    block.create()
    assert ["mkfs.xfs", "-f", "/dev/sdc"] in host.calls
    block.remove()
    assert ["targetcli", "/loopback", "delete", "naa.50014055d6c8b2aa"] in host.calls


def test_cephfs_kernel_mounts_with_mount_ceph(tmp_path: Path) -> None:
    table = MountTable()
    host = ScriptedHost("c", table)
    site = _site(tmp_path, "cephfs-kernel", host)
    site.ceph = lambda prefix, **a: [{"name": "cephfs", "data_pools": ["d"]}]
    driver = CephfsKernelDriver(site)
    driver.create()
    mp = site.mountpoint(site.clients[0], 0)
    assert ["mount", "-t", "ceph", ":/", mp, "-o",
            "name=admin,conf=/c.conf,mds_namespace=cephfs"] in host.calls
    assert driver.remove() == [] and not table.mounted
