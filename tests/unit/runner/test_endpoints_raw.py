"""rawfio's targets: the probe run for real on this machine's paths (a file, a missing path,
a directory, a character device, a file locked the way BlueStore locks its device), and the
refusals it leads to; OSD devices and paths from `osd metadata` by host."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from cephscope.runner.benchmarks.base import PreflightAccess
from cephscope.runner.benchmarks.rawfio import RawFio
from cephscope.runner.endpoints.raw import osd_places, path_problem, probe, target_problems
from cephscope.runner.hostexec import LocalHost

METADATA = [
    {"id": 0, "hostname": "host1", "devices": "loop3", "bluestore_bdev_dev_node": "/dev/loop3",
     "osd_data": "/var/lib/ceph/osd/ceph-0"},
    {"id": 1, "hostname": "host2", "devices": "sdb,sdc", "bluestore_bdev_partition_path":
     "/srv/osd1/block"},
    {"id": 2, "hostname": 7},
]


def test_osd_places_by_host() -> None:
    places = osd_places(METADATA)
    assert places["host1"] == {"loop3", "/dev/loop3", "/var/lib/ceph/osd/ceph-0"}
    assert {"sdb", "sdc", "/srv/osd1/block"} <= places["host2"]
    assert osd_places("garbage") == {}


def test_probe_and_problems_of_real_paths(tmp_path: Path) -> None:
    here = LocalHost()
    target = tmp_path / "target.img"
    target.write_bytes(b"\0" * 4096)
    found = probe(here, str(target))
    assert found["kind"] == "file" and found["locked"] is False
    assert path_problem(found, {}) is None
    assert path_problem(probe(here, str(tmp_path / "new.img")), {}) is None  # made by fio
    assert "neither a block device nor a regular file" in str(
        path_problem(probe(here, str(tmp_path)), {}))
    assert "neither" in str(path_problem(probe(here, "/dev/null"), {}))
    # a BlueStore OSD holds an exclusive flock on its device or block file
    with open(target, "rb") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        assert "locked by a process" in str(path_problem(probe(here, str(target)), {}))
    # this cluster's OSD on this host uses it
    places = {found["host"]: {os.path.realpath(target)}}
    assert "an OSD of this cluster uses it" in str(path_problem(probe(here, str(target)), places))


def test_a_block_device_held_or_mounted_is_refused() -> None:
    found = {"path": "/dev/sdz", "host": "h", "kind": "block", "name": "sdz", "busy": True,
             "locked": False, "real": "/dev/sdz"}
    assert "in exclusive use" in str(path_problem(found, {}))
    found["busy"] = False
    assert path_problem(found, {}) is None
    assert "an OSD of this cluster" in str(path_problem(found, {"h": {"sdz"}}))
    assert path_problem(found, {"other-host": {"sdz"}}) is None


def test_preflight_names_each_refused_path(tmp_path: Path) -> None:
    ok = tmp_path / "ok.img"
    problems = RawFio.preflight([{"block_devices": f"{ok},{tmp_path}"},
                                 {"block_devices": str(ok)}],
                                PreflightAccess(ceph=lambda prefix, **a: []))
    assert problems == [f"rawfio target {tmp_path} on {os.uname().nodename}: neither a block "
                        "device nor a regular file"]
    assert target_problems([str(ok)], PreflightAccess()) == []
