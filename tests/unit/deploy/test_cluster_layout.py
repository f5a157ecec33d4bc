"""The dev cluster's layout: the state dir's record wins over the arguments, paths and ports
follow from it, and a record that says another release is not silently changed."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest

from cephscope.deploy.cluster_layout import ClusterLayout, ClusterState, DevClusterError, OsdBacking


def record(state_dir: Path, **changes: object) -> None:
    state_dir.mkdir(parents=True, exist_ok=True)
    osds = [OsdBacking(0, "a", None), OsdBacking(5, "b", None)]
    raw = {**asdict(ClusterState("f", 23000, 2, "file", "hdd", 4, osds)), **changes}
    (state_dir / "state.json").write_text(json.dumps(raw))


def test_a_new_layout_is_what_the_arguments_say(tmp_path: Path) -> None:
    layout = ClusterLayout.resolve(tmp_path / "c", port_base=21000, num_osds=4, osd_size_gib=2)
    assert layout.state_dir == (tmp_path / "c").resolve()
    assert (layout.port_base, layout.num_osds, layout.osd_size_gib) == (21000, 4, 2)
    assert layout.mon_port == 21000 and layout.msgr_port_range == (21010, 21099)
    assert layout.mon_addr == "127.0.0.1" and not layout.multi_host
    assert layout.osd_asok(3) == layout.state_dir / "run" / "ceph-osd.3.asok"
    assert layout.pid_file("osd.3") == layout.state_dir / "run" / "osd.3.pid"
    assert layout.daemon_names() == ["mon.a", "mgr.x"]
    with pytest.raises(DevClusterError, match="no dev cluster in"):
        layout.load_state()


def test_the_record_wins_over_the_arguments(tmp_path: Path) -> None:
    record(tmp_path / "c")
    layout = ClusterLayout.resolve(tmp_path / "c", port_base=17000, num_osds=3, osd_size_gib=10)
    assert (layout.port_base, layout.num_osds, layout.osd_size_gib) == (23000, 2, 4)
    assert layout.osd_ids() == [0, 5]
    assert layout.daemon_names() == ["mon.a", "mgr.x", "osd.0", "osd.5"]


def test_a_damaged_record_leaves_the_arguments_and_is_reported_when_read(tmp_path: Path) -> None:
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "state.json").write_text("{not json")
    layout = ClusterLayout.resolve(tmp_path / "c", port_base=19000)
    assert layout.port_base == 19000
    with pytest.raises(DevClusterError, match="is damaged"):
        layout.load_state()


def test_a_recorded_release_is_not_replaced_by_another(tmp_path: Path) -> None:
    record(tmp_path / "c", release="reef")
    with pytest.raises(DevClusterError, match="runs release reef, not tentacle"):
        ClusterLayout.resolve(tmp_path / "c", release="tentacle")


def test_host_releases_add_no_release_arguments(tmp_path: Path) -> None:
    layout = ClusterLayout.resolve(tmp_path / "c")
    assert layout.release.root is None
    assert layout.release_spec_field("muted_health_checks") == ()
    assert layout.osd_release_args() == []


def test_mds_and_rgw_are_named_placed_and_given_the_last_port(tmp_path: Path) -> None:
    layout = ClusterLayout.resolve(tmp_path / "c", port_base=21000, mds=True, rgw=True)
    assert layout.service_names() == ["mds.a", "client.rgw.a"]
    assert layout.daemon_names() == ["mon.a", "mgr.x", "mds.a", "client.rgw.a"]
    assert layout.daemon_asok("mds.a") == layout.state_dir / "run" / "ceph-mds.a.asok"
    assert layout.pid_file("client.rgw.a") == layout.state_dir / "run" / "client.rgw.a.pid"
    # the gateway has base+99; the messengers are kept below it
    assert layout.rgw_port == 21099 and layout.msgr_port_range == (21010, 21098)
    assert layout.rgw_addr == "127.0.0.1"
    assert layout.ports() == [21000, *range(21010, 21099), 21099]
    without = ClusterLayout.resolve(tmp_path / "d", port_base=21000)
    assert without.service_names() == [] and without.ports() == [21000, *range(21010, 21100)]


def test_the_record_keeps_mds_and_rgw_and_refuses_to_add_them_later(tmp_path: Path) -> None:
    record(tmp_path / "c", mds=True, rgw=True)
    layout = ClusterLayout.resolve(tmp_path / "c")  # no flags: the record's services
    assert (layout.mds, layout.rgw) == (True, True)
    assert layout.daemon_names()[-2:] == ["mds.a", "client.rgw.a"]
    record(tmp_path / "d")  # a record from before services existed has neither
    assert ClusterState.load(tmp_path / "d" / "state.json").mds is False
    with pytest.raises(DevClusterError, match=r"made without a RADOS gateway \(--rgw\); purge it"):
        ClusterLayout.resolve(tmp_path / "d", rgw=True)
    with pytest.raises(DevClusterError, match=r"made without an MDS \(--mds\)"):
        ClusterLayout.resolve(tmp_path / "d", mds=True)


def test_multi_host_services_live_on_the_first_host(tmp_path: Path) -> None:
    layout = ClusterLayout.resolve(tmp_path / "c", hosts=2, clients=1, mds=True, rgw=True)
    first = layout.hosts[0]
    assert layout.host_of("mds.a") == layout.host_of("client.rgw.a") == first
    assert layout.rgw_addr == first.public_addr != "127.0.0.1"
    first_dir = layout.state_dir / "run" / first.name
    assert layout.daemon_asok("client.rgw.a") == first_dir / "ceph-client.rgw.a.asok"
