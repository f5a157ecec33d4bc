"""What `devcluster up` refuses before it changes anything."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from cephscope.deploy.cluster_layout import ClusterLayout, DevClusterError
from cephscope.deploy.cluster_preflight import ClusterPreflight
from cephscope.deploy.placement import Release


def preflight(layout: ClusterLayout, why_not: str | None = None,
              said: list[str] | None = None) -> ClusterPreflight:
    return ClusterPreflight(layout, lambda: why_not, log=(said if said is not None else []).append)


def test_a_state_dir_that_holds_something_else_is_refused(tmp_path: Path) -> None:
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "thesis.tex").touch()
    layout = ClusterLayout.resolve(tmp_path / "c")
    with pytest.raises(DevClusterError, match=r"holds no dev cluster of ours \(thesis\.tex\)"):
        preflight(layout).check_state_dir_is_ours_or_empty()
    (tmp_path / "c" / "state.json").write_text("{}")
    preflight(layout).check_state_dir_is_ours_or_empty()  # ours: no error
    preflight(ClusterLayout.resolve(tmp_path / "new")).check_state_dir_is_ours_or_empty()


def test_a_busy_port_in_the_range_is_named(tmp_path: Path) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        layout = ClusterLayout.resolve(tmp_path / "c", port_base=port - 15)
        with pytest.raises(DevClusterError, match="pick another --port-base") as raised:
            preflight(layout).check_ports()
    # other programs on this machine may hold ports of the range too
    busy = str(raised.value).removeprefix("ports in use on 127.0.0.1: ").split(" (")[0].split(", ")
    assert str(port) in busy


def test_backing_as_asked_and_as_this_machine_allows(tmp_path: Path) -> None:
    said: list[str] = []
    layout = ClusterLayout.resolve(tmp_path / "c", backing="auto")
    assert preflight(layout).choose_backing() == "loop"
    assert preflight(layout, "no permission to use /dev/loop-control", said).choose_backing() == "file"
    assert "OSDs on plain files" in said[0] and "no permission" in said[0]
    layout.backing = "loop"
    with pytest.raises(DevClusterError, match="loop devices cannot be used here: nope"):
        preflight(layout, "nope").choose_backing()
    layout.backing = "file"
    assert preflight(layout, None).choose_backing() == "file"


def test_a_release_root_without_the_ceph_programs_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "usr" / "bin").mkdir(parents=True)
    (root / "usr" / "bin" / "ceph").touch()
    layout = ClusterLayout.resolve(tmp_path / "c")
    layout.release = Release("reef", root)
    with pytest.raises(DevClusterError, match=f"release root {root} lacks ceph-authtool ceph-mgr"):
        preflight(layout).check_binaries()


def test_mds_and_gateway_programs_are_needed_only_when_asked_for(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "usr" / "bin").mkdir(parents=True)
    for program in ("ceph", "ceph-authtool", "ceph-mgr", "ceph-mon", "ceph-osd", "rados", "rbd",
                    "monmaptool"):
        (root / "usr" / "bin" / program).touch()
    layout = ClusterLayout.resolve(tmp_path / "c")
    layout.release = Release("reef", root)
    preflight(layout).check_binaries()  # a root without them serves a cluster without them
    layout.mds = layout.rgw = True
    with pytest.raises(DevClusterError, match=f"release root {root} lacks ceph-mds radosgw radosgw-admin"):
        preflight(layout).check_binaries()


def test_the_gateways_port_is_checked_too(tmp_path: Path) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        layout = ClusterLayout.resolve(tmp_path / "c", port_base=port - 99, rgw=True)
        assert layout.rgw_port == port and port not in range(layout.msgr_port_range[1] + 1)
        with pytest.raises(DevClusterError, match=rf"ports in use on 127.0.0.1: .*\b{port}\b"):
            preflight(layout).check_ports()


def test_osds_the_kernel_has_no_aio_contexts_for_are_refused_naming_the_limit(
        tmp_path: Path) -> None:
    proc_sys = tmp_path / "proc-sys"
    (proc_sys / "fs").mkdir(parents=True)
    (proc_sys / "fs/aio-max-nr").write_text("65536\n")
    layout = ClusterLayout.resolve(tmp_path / "c", num_osds=3)
    check = ClusterPreflight(layout, lambda: None, log=[].append, proc_sys=proc_sys)
    (proc_sys / "fs/aio-nr").write_text("60000\n")  # OSDs of other clusters
    with pytest.raises(DevClusterError, match=r"60000 of fs.aio-max-nr=65536 are in use and "
                                              r"3 OSDs need about 6144 more.*"
                                              r"sysctl -w fs.aio-max-nr=131072"):
        check.check_aio_headroom()
    (proc_sys / "fs/aio-nr").write_text("47104\n")
    check.check_aio_headroom()  # room for three more
