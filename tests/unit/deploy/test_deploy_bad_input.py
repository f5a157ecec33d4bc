"""Bad input to `cephscope devcluster` / `cephscope stack`: one clear line, a non-zero exit,
and nothing created. These run the real CLI but never get as far as starting Ceph."""

from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from cephscope.deploy.devcluster import DevCluster
from tests.live.conftest import free_port_base
from tests.unit.cli_runs import cephscope, one_error_line


@pytest.fixture
def held_port() -> Iterator[int]:
    base = free_port_base(100)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", base + 20))
        sock.listen()
        yield base


def test_ports_in_use_are_named_and_nothing_is_created(tmp_path: Path, held_port: int) -> None:
    state = tmp_path / "cluster"
    line = one_error_line(cephscope("devcluster", "up", "--state-dir", str(state),
                                    "--port-base", str(held_port)))
    assert f"ports in use on 127.0.0.1: {held_port + 20}" in line
    assert "--port-base" in line
    assert not state.exists()


def test_state_dir_of_something_else_is_refused(tmp_path: Path) -> None:
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "ceph.conf").write_text("[global]\nfsid = 0000\n")
    line = one_error_line(cephscope("devcluster", "up", "--state-dir", str(foreign),
                                    "--port-base", str(free_port_base(100))))
    assert "holds no dev cluster of ours" in line and "ceph.conf" in line
    assert sorted(p.name for p in foreign.iterdir()) == ["ceph.conf"]


def test_missing_debian_packages_are_named(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": str(tmp_path)}  # no ceph binaries on this PATH
    line = one_error_line(cephscope("devcluster", "up", "--state-dir", str(tmp_path / "c"), env=env))
    assert line.startswith("devcluster: missing Debian packages: ")
    for package in ("ceph-mon", "ceph-osd", "ceph-common"):
        assert package in line
    assert "make setup" in line
    assert not (tmp_path / "c").exists()


def test_no_permission_for_loop_devices() -> None:
    # As root, drop to the unprivileged uid 65534 (nobody); as anyone else, stay.
    user = "65534" if os.geteuid() == 0 else None
    with tempfile.TemporaryDirectory() as parent:
        Path(parent).chmod(0o777)
        state = Path(parent) / "c"
        line = one_error_line(cephscope("devcluster", "up", "--backing", "loop", "--state-dir", str(state),
                                        "--port-base", str(free_port_base(100)), user=user))
        assert "loop devices cannot be used here: no permission" in line
        assert not state.exists()


def test_down_and_status_of_a_cluster_that_is_not_there(tmp_path: Path) -> None:
    line = one_error_line(cephscope("devcluster", "down", "--state-dir", str(tmp_path)))
    assert line == f"devcluster: no dev cluster in {tmp_path.resolve()}"
    line = one_error_line(cephscope("devcluster", "restart-osd", "0", "--state-dir", str(tmp_path)))
    assert "no dev cluster" in line


def test_down_of_a_stopped_cluster_says_so(tmp_path: Path) -> None:
    # A state dir as `down` leaves it: state.json present, nothing running, no loop attached.
    cluster = DevCluster(tmp_path / "c", port_base=free_port_base(100), num_osds=1)
    cluster.state_dir.mkdir()
    (cluster.state_dir / "state.json").write_text(
        json.dumps({"fsid": "f", "port_base": cluster.port_base, "num_osds": 1, "backing": "file",
                    "device_class": "ssd", "osd_size_gib": 1,
                    "osds": [{"osd_id": 0, "image": "x", "loop_device": None}]})
    )
    line = one_error_line(cephscope("devcluster", "down", "--state-dir", str(cluster.state_dir)))
    assert line.endswith("is not running")


def test_stack_ports_in_use_and_down_when_not_running(tmp_path: Path, held_port: int) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", held_port + 1))
        sock.listen()
        line = one_error_line(cephscope("stack", "up", "--state-dir", str(tmp_path / "s"),
                                        "--port-base", str(held_port), "--asok-dir", str(tmp_path)))
    assert f"{held_port + 1} (alertmanager)" in line
    assert not (tmp_path / "s").exists()
    line = one_error_line(cephscope("stack", "down", "--state-dir", str(tmp_path / "s")))
    assert "is not running" in line


def test_stack_refuses_a_missing_asok_dir(tmp_path: Path) -> None:
    line = one_error_line(cephscope("stack", "up", "--state-dir", str(tmp_path / "s"),
                                    "--port-base", str(free_port_base(8)),
                                    "--asok-dir", str(tmp_path / "nope")))
    assert "admin socket dir" in line and "does not exist" in line


def test_setpriv_is_available() -> None:
    # The loop-permission test above relies on it; util-linux ships it on Debian.
    assert shutil.which("setpriv")


def test_a_gateway_or_mds_asked_of_a_cluster_made_without_is_refused(tmp_path: Path) -> None:
    state = tmp_path / "c"
    state.mkdir()
    record = {"fsid": "f", "port_base": free_port_base(100), "num_osds": 1, "backing": "file",
              "device_class": "ssd", "osd_size_gib": 1, "osds": []}
    (state / "state.json").write_text(json.dumps(record))
    for flag, service in (("--rgw", "a RADOS gateway"), ("--mds", "an MDS")):
        line = one_error_line(cephscope("devcluster", "up", flag, "--state-dir", str(state)))
        assert line == (f"devcluster: the dev cluster in {state.resolve()} was made without {service} "
                        f"({flag}); purge it and make it again to have one")
    assert [p.name for p in state.iterdir()] == ["state.json"]


def test_missing_mds_and_gateway_packages_are_named(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for program in ("ceph-mon", "ceph-mgr", "ceph-osd", "ceph", "ceph-authtool", "monmaptool", "rbd",
                    "rados", "losetup"):
        (bin_dir / program).symlink_to("/bin/true")
    env = {**os.environ, "PATH": str(bin_dir)}
    line = one_error_line(cephscope("devcluster", "up", "--mds", "--rgw", "--state-dir",
                                    str(tmp_path / "c"), env=env))
    assert line.startswith("devcluster: missing Debian packages: ceph-common ceph-mds radosgw ")
    assert "(commands ceph-mds, radosgw, radosgw-admin)" in line
    assert not (tmp_path / "c").exists()
