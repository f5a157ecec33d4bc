"""The containerised dev cluster's cephadm layout: container names, flags, bind mounts and host
paths as cephadm 16.2.15 makes them (no podman needed), and refusals before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from cephscope.deploy.container import Podman
from cephscope.deploy.container_cluster import (
    ContainerCluster,
    ContainerClusterError,
    container_name,
    daemon_conf,
)

FSID = "0b5e3a2c-6f0e-4c61-9d2b-3b8f7e0a1c55"


def cluster(root: Path) -> ContainerCluster:
    made = ContainerCluster(root, Podman(runtime="/usr/sbin/runc"), fsid=FSID, port_base=27000)
    made.image = "localhost/cephscope-ceph:tentacle-abc"
    return made


def volumes(args: list[str]) -> dict[str, str]:
    pairs = [args[i + 1] for i, a in enumerate(args) if a == "--volume"]
    return {p.split(":")[1]: p.split(":")[0] for p in pairs}


def test_cephadm_names_and_host_paths(tmp_path: Path) -> None:
    c = cluster(tmp_path)
    assert container_name(FSID, "osd.3") == f"ceph-{FSID}-osd-3"
    assert container_name(FSID, "mon.a") == f"ceph-{FSID}-mon-a"
    assert c.osd_asok(3) == tmp_path / "var/run/ceph" / FSID / "ceph-osd.3.asok"
    assert c.daemon_dir("osd.3") == tmp_path / "var/lib/ceph" / FSID / "osd.3"
    assert c.log_dir == tmp_path / "var/log/ceph" / FSID
    assert c.asok_root == tmp_path / "var/run/ceph"


def test_osd_container_is_privileged_with_devices_and_cephadms_mounts(tmp_path: Path) -> None:
    args = cluster(tmp_path)._container_args("osd.3", f"ceph-{FSID}-osd-3")
    for flag in ("--ipc=host", "--net=host", "--init", "--privileged", "--group-add=disk",
                 "--stop-signal=SIGTERM"):
        assert flag in args
    assert "--pid=host" not in args  # podman refuses it with --init; cephadm does not pass it
    assert args[args.index("--entrypoint") + 1] == "/usr/bin/ceph-osd"
    assert args[args.index("--name") + 1] == f"ceph-{FSID}-osd-3"
    mounts = volumes(args)
    assert mounts["/var/run/ceph"] == str(tmp_path / "var/run/ceph" / FSID)
    assert mounts["/var/lib/ceph/osd/ceph-3"] == str(tmp_path / "var/lib/ceph" / FSID / "osd.3")
    assert mounts["/etc/ceph/ceph.conf"] == str(tmp_path / "var/lib/ceph" / FSID / "osd.3/config")
    assert mounts["/var/log/ceph"] == str(tmp_path / "var/log/ceph" / FSID)
    assert mounts["/dev"] == "/dev" and mounts["/sys"] == "/sys"


def test_mgr_container_is_not_privileged_and_sees_no_devices(tmp_path: Path) -> None:
    args = cluster(tmp_path)._container_args("mgr.x", None)
    assert "--privileged" not in args and "--name" not in args
    assert "/dev" not in volumes(args) and "/sys" not in volumes(args)
    assert args[args.index("--entrypoint") + 1] == "/usr/bin/ceph-mgr"


def test_mkfs_mounts_no_conf(tmp_path: Path) -> None:
    args = cluster(tmp_path)._container_args("mon.a", None, ["/seed:/tmp/seed:z"], no_config=True)
    assert "/etc/ceph/ceph.conf" not in volumes(args)
    assert volumes(args)["/tmp/seed"] == "/seed"


def test_daemon_conf_uses_cephs_default_paths() -> None:
    conf = daemon_conf(FSID, 27000, 4, "/usr/lib/x86_64-linux-gnu/rados-classes")
    assert f"fsid = {FSID}" in conf and "mon_host = v2:127.0.0.1:27000" in conf
    assert "ms_bind_port_min = 27010" in conf and "ms_bind_port_max = 27099" in conf
    # sockets, data and logs at Ceph's defaults inside the container (the mounts place them)
    assert "admin_socket" not in conf and "osd_data" not in conf and "log_file" not in conf


def test_a_root_too_deep_for_socket_paths_is_refused(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60)
    with pytest.raises(ContainerClusterError, match="exceed 107 bytes"):
        cluster(deep).up()
    assert not (deep / "var").exists()
