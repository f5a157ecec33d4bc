"""`DevCluster` as coordinator: the order of `up`, `down` and restarts, with recording fakes
of its parts (tests/unit/devcluster_fakes.py) handed in -- no Ceph, no processes."""

from __future__ import annotations

from pathlib import Path

import pytest

from cephscope.deploy.cluster_layout import ClusterState, DevClusterError, OsdBacking
from cephscope.deploy.devcluster import DevCluster
from tests.unit.devcluster_fakes import Journal, RecordingDaemons, recording_parts

OSDS = ("osd.0", "osd.1", "osd.2")


def new_cluster(tmp_path: Path, journal: Journal, fail: frozenset[str] = frozenset(),
                backing: str = "loop") -> DevCluster:
    return DevCluster(tmp_path / "c", num_osds=3, osd_size_gib=1, backing=backing, log=lambda m: None,
                      parts=recording_parts(journal, fail))


def stopped_cluster(tmp_path: Path, journal: Journal) -> DevCluster:
    """A cluster as `down` leaves it: its record, no daemon running, no loop attached."""
    state_dir = tmp_path / "c"
    (state_dir / "run").mkdir(parents=True)
    images = []
    for i in range(3):
        (state_dir / "osd" / f"ceph-{i}").mkdir(parents=True)
        images.append(OsdBacking(i, str(state_dir / "blocks" / f"osd.{i}.img"), None))
    ClusterState("f", 17000, 3, "loop", "ssd", 1, images).save(state_dir / "state.json")
    return DevCluster(state_dir, log=lambda m: None, parts=recording_parts(journal))


def running(cluster: DevCluster, names: tuple[str, ...] = ("mon.a", "mgr.x", *OSDS)) -> RecordingDaemons:
    daemons = cluster.daemons
    assert isinstance(daemons, RecordingDaemons)
    for name in names:
        daemons.running[name] = 100 + len(daemons.running)
    return daemons


def test_up_creates_mon_then_mgr_then_osds_with_the_record_saved_first(tmp_path: Path) -> None:
    journal = Journal()
    cluster = new_cluster(tmp_path, journal)
    cluster.up()
    starts = journal.kinds("start")
    assert [s[1] for s in starts[:2]] == ["mon.a", "mgr.x"]
    assert sorted(s[1] for s in starts[2:]) == list(OSDS)
    # the record exists before the first daemon starts, and names every loop device an OSD
    # sits on before that OSD starts
    assert all(recorded for _, _, _, recorded, _ in starts)
    assert all(len(loops) == 3 and all(loops) for _, name, _, _, loops in starts if name.startswith("osd."))
    first_start = journal.indices("start")[0]
    assert journal.indices("attach")[0] > first_start  # OSDs exist only once mon and mgr do
    # each OSD's mkfs before any OSD starts, the mon's mkfs before the mon starts
    mkfs = journal.indices("run", lambda e: "--mkfs" in e[2])
    mon_mkfs = [i for i in mkfs if journal.events[i][2][0] == "ceph-mon"]
    osd_mkfs = [i for i in mkfs if journal.events[i][2][0] == "ceph-osd"]
    assert mon_mkfs and mon_mkfs[0] < journal.index(*starts[0])
    assert len(osd_mkfs) == 3
    osd_starts = journal.indices("start", lambda e: e[1].startswith("osd."))
    assert max(osd_mkfs) < min(osd_starts)
    # OSDs up before the device class is set; HEALTH_OK waited for last
    wait_up = journal.index("wait_osds_up", (0, 1, 2))
    assert max(osd_starts) < wait_up
    device_class = journal.indices("run", lambda e: "set-device-class" in e[2])
    assert device_class and device_class[0] > wait_up
    assert journal.events[-1] == ("wait_health_ok",)
    state = cluster.load_state()
    assert [o.loop_device for o in state.osds] == ["/dev/loop40", "/dev/loop41", "/dev/loop42"]


def test_up_on_plain_files_attaches_no_loop_device(tmp_path: Path) -> None:
    journal = Journal()
    new_cluster(tmp_path, journal, backing="file").up()
    assert journal.kinds("attach") == []
    mkfs = [e[2] for e in journal.kinds("run") if e[2][0] == "ceph-osd"]
    assert all("--bluestore-block-create" in argv for argv in mkfs) and len(mkfs) == 3


def test_a_failed_osd_start_during_up_tears_down_what_was_started(tmp_path: Path) -> None:
    journal = Journal()
    cluster = new_cluster(tmp_path, journal, fail=frozenset({"osd.1"}))
    with pytest.raises(DevClusterError, match=r"osd\.1 did not start"):
        cluster.up()
    daemons = cluster.daemons
    assert isinstance(daemons, RecordingDaemons) and daemons.running == {}
    stops = [(i, e[1]) for i, e in enumerate(journal.events) if e[0] == "stop" and e[2]]
    stopped = [name for _, name in stops]
    assert sorted(stopped[:2]) == ["osd.0", "osd.2"] and stopped[2:] == ["mgr.x", "mon.a"]
    # every loop device attached is detached, and only after the last OSD stopped
    detached = journal.indices("detach")
    assert sorted(journal.events[i][1] for i in detached) == ["/dev/loop40", "/dev/loop41", "/dev/loop42"]
    assert min(detached) > max(i for i, name in stops if name.startswith("osd."))
    assert not cluster.state_dir.exists()
    assert ("wait_health_ok",) not in journal.events


def test_up_again_attaches_loops_then_starts_mon_mgr_osds_then_waits(tmp_path: Path) -> None:
    journal = Journal()
    cluster = stopped_cluster(tmp_path, journal)
    cluster.up()
    kinds = [e[0] for e in journal.events]
    assert kinds[:2] == ["check_binaries", "check_ports"]
    starts = journal.kinds("start")
    assert [s[1] for s in starts[:2]] == ["mon.a", "mgr.x"]
    assert sorted(s[1] for s in starts[2:]) == list(OSDS)
    # loop devices attached and recorded before any daemon starts (`down` must find them)
    assert max(journal.indices("attach")) < journal.indices("start")[0]
    assert all(loops == ("/dev/loop40", "/dev/loop41", "/dev/loop42") for *_, loops in starts)
    assert (cluster.osd_data(1) / "block").readlink() == Path("/dev/loop41")
    assert kinds[-2:] == ["wait_osds_up", "wait_health_ok"]


def test_up_refuses_a_running_cluster_and_starts_nothing(tmp_path: Path) -> None:
    journal = Journal()
    cluster = stopped_cluster(tmp_path, journal)
    running(cluster, ("mon.a",))
    with pytest.raises(DevClusterError, match=r"already running \(mon.a\)"):
        cluster.up()
    assert journal.kinds("start", "attach") == []


def test_down_stops_osds_before_mgr_and_mon_then_detaches_loops(tmp_path: Path) -> None:
    journal = Journal()
    cluster = stopped_cluster(tmp_path, journal)
    cluster.up()
    (cluster.asok_dir / "ceph-osd.0.asok").touch()
    (cluster.asok_dir / "osd.0.pid").touch()
    journal.events.clear()
    assert cluster.down() == ["mgr.x", "mon.a", *OSDS]
    stops = [e[1] for e in journal.kinds("stop")]
    assert sorted(stops[:3]) == list(OSDS) and stops[3:] == ["mgr.x", "mon.a"]
    detached = journal.indices("detach")
    assert len(detached) == 3 and min(detached) > max(journal.indices("stop"))
    assert [o.loop_device for o in cluster.load_state().osds] == [None, None, None]
    assert list(cluster.asok_dir.iterdir()) == []
    with pytest.raises(DevClusterError, match="is not running"):
        cluster.down()


def test_restart_stops_every_osd_before_starting_any_and_waits_for_them(tmp_path: Path) -> None:
    journal = Journal()
    cluster = stopped_cluster(tmp_path, journal)
    running(cluster)
    cluster.restart_osds([0, 2], on_stopped=lambda: journal.add("on_stopped"),
                         env={"NODE_NAME": "elsewhere"})
    events = [e[:2] if e[0] in ("start", "stop") else e for e in journal.events]
    assert sorted(events[:2]) == [("stop", "osd.0"), ("stop", "osd.2")]
    assert events[2] == ("on_stopped",)
    assert sorted(events[3:5]) == [("start", "osd.0"), ("start", "osd.2")]
    assert events[5:] == [("wait_osds_up", (0, 2)), ("wait_asok", (0, 2))]
    assert all(e[2] == {"NODE_NAME": "elsewhere"} for e in journal.kinds("start"))
    # the environment was for that restart only
    journal.events.clear()
    cluster.restart_osd(1)
    assert [e[2] for e in journal.kinds("start")] == [{}]


def test_restart_of_an_unknown_osd_touches_nothing(tmp_path: Path) -> None:
    journal = Journal()
    cluster = stopped_cluster(tmp_path, journal)
    with pytest.raises(DevClusterError, match=r"no such OSD in this dev cluster: \[7\]"):
        cluster.restart_osds([0, 7])
    assert journal.events == []


def test_start_daemon_starts_only_a_known_daemon_that_is_not_running(tmp_path: Path) -> None:
    journal = Journal()
    cluster = stopped_cluster(tmp_path, journal)
    running(cluster, ("mgr.x", *OSDS))
    with pytest.raises(DevClusterError, match=r"no daemon 'osd\.9'"):
        cluster.start_daemon("osd.9")
    with pytest.raises(DevClusterError, match=r"osd\.1 is already running"):
        cluster.start_daemon("osd.1")
    cluster.start_daemon("mon.a")
    assert [e[1] for e in journal.kinds("start")] == ["mon.a"]
    assert set(cluster.running_daemons()) == {"mon.a", "mgr.x", *OSDS}


def test_purge_downs_then_removes_the_state_dir(tmp_path: Path) -> None:
    journal = Journal()
    cluster = stopped_cluster(tmp_path, journal)
    running(cluster)
    cluster.purge()
    assert not cluster.state_dir.exists()
    assert sorted(e[1] for e in journal.kinds("stop")) == sorted(["mon.a", "mgr.x", *OSDS])


SERVICES = ("mds.a", "client.rgw.a")


def services_cluster(tmp_path: Path, journal: Journal, fail: frozenset[str] = frozenset(),
                     rgw_answer: bytes | None = None) -> DevCluster:
    return DevCluster(tmp_path / "c", port_base=21000, num_osds=3, osd_size_gib=1, backing="file",
                      mds=True, rgw=True, log=lambda m: None,
                      parts=recording_parts(journal, fail, rgw_answer))


def ceph_runs(journal: Journal, *words: str) -> list[int]:
    return journal.indices("run", lambda e: e[2][0] == "ceph" and all(w in e[2] for w in words))


def test_up_with_mds_and_rgw_starts_them_after_the_osds_and_waits_for_each(tmp_path: Path) -> None:
    journal = Journal()
    cluster = services_cluster(tmp_path, journal)
    cluster.up()
    starts = [e[1] for e in journal.kinds("start")]
    assert starts[:2] == ["mon.a", "mgr.x"] and sorted(starts[2:5]) == list(OSDS)
    assert starts[5:] == list(SERVICES)
    # their keys, pools and filesystem in one batch of two waves, once the mon is up (while
    # the OSDs are made: the mon is all they need)
    (batch, (first, then)), = journal.mon_waves()
    assert journal.indices("start", lambda e: e[1] == "mon.a")[0] < batch
    pools = [c["pool"] for c in first if c["prefix"] == "osd pool create"]
    assert sorted(pools) == sorted(["cephfs_metadata", "cephfs_data", ".rgw.root", "default.rgw.log",
                                    "default.rgw.control", "default.rgw.meta",
                                    "default.rgw.buckets.index", "default.rgw.buckets.data",
                                    "default.rgw.buckets.non-ec"])
    assert sorted(c["entity"] for c in first if c["prefix"] == "auth get-or-create") == sorted(SERVICES)
    # what needs the pools comes in the second wave: the filesystem and the gateway pools' tags
    fs_new, = [c for c in then if c["prefix"] == "fs new"]
    made = [fs_new[k] for k in ("fs_name", "metadata", "data")]
    assert made == ["cephfs", "cephfs_metadata", "cephfs_data"]
    enabled = [c["pool"] for c in then if c["prefix"] == "osd pool application enable" and c["app"] == "rgw"]
    assert sorted(enabled) == sorted(pools[2:]) and len(then) == 8
    # each waited for: the MDS active, the gateway answering HTTP, then the user; health last
    mds_start = journal.indices("start", lambda e: e[1] == "mds.a")[0]
    rgw_start = journal.indices("start", lambda e: e[1] == "client.rgw.a")[0]
    mds_active = journal.index("wait_mds_active", "cephfs", "a")
    answers = journal.index("wait_http", "http://127.0.0.1:21099/", "client.rgw.a")
    assert batch < mds_start < rgw_start < mds_active < answers
    admin = journal.indices("run", lambda e: e[2][0] == "radosgw-admin")
    assert len(admin) == 2 and min(admin) > answers
    assert journal.events[-1] == ("wait_health_ok",)
    state = cluster.load_state()
    assert (state.mds, state.rgw) == (True, True) and cluster.cephfs_name == "cephfs"
    assert cluster.daemon_asok("mds.a") == cluster.asok_dir / "ceph-mds.a.asok"
    assert cluster.daemon_asok("client.rgw.a") == cluster.asok_dir / "ceph-client.rgw.a.asok"


def test_the_gateways_user_and_keys_go_to_rgw_json_readable_by_its_owner_only(tmp_path: Path) -> None:
    journal = Journal()
    cluster = services_cluster(tmp_path, journal)
    cluster.up()
    rgw_json = cluster.state_dir / "rgw.json"
    assert rgw_json.stat().st_mode & 0o777 == 0o600
    access = cluster.rgw_access()
    assert access.endpoint == cluster.rgw_endpoint == "http://127.0.0.1:21099"
    assert access.swift_auth_url == "http://127.0.0.1:21099/auth/1.0"
    assert access.swift_user == "cephscope:swift"
    # the keys radosgw-admin made, not fixed strings of ours
    assert (access.access_key, access.secret_key, access.swift_key) == ("ACCESS1", "secret2", "swift3")
    assert "secret2" not in repr(access) and "swift3" not in repr(access)
    user, subuser = [e[2] for e in journal.kinds("run") if e[2][0] == "radosgw-admin"]
    assert user[3:5] == ("user", "create") and user[user.index("--uid") + 1] == "cephscope"
    assert subuser[3:5] == ("subuser", "create") and "--gen-secret" in subuser
    assert subuser[subuser.index("--subuser") + 1] == "cephscope:swift"
    assert subuser[subuser.index("--key-type") + 1] == "swift"
    assert not any(k in " ".join(e[2]) for e in journal.kinds("run") for k in ("secret2", "swift3"))


def test_a_user_made_without_keys_fails_the_up_and_writes_no_rgw_json(tmp_path: Path) -> None:
    journal = Journal()
    cluster = services_cluster(tmp_path, journal, rgw_answer=b'{"user_id": "cephscope", "keys": []}')
    with pytest.raises(DevClusterError, match="without keys"):
        cluster.up()
    assert not cluster.state_dir.exists()
    stopped = [e[1] for e in journal.kinds("stop") if e[2]]
    assert sorted(stopped[:2]) == ["client.rgw.a", "mds.a"] and stopped[-2:] == ["mgr.x", "mon.a"]


def test_a_failed_mds_start_tears_down_the_whole_cluster(tmp_path: Path) -> None:
    journal = Journal()
    cluster = services_cluster(tmp_path, journal, fail=frozenset({"mds.a"}))
    with pytest.raises(DevClusterError, match=r"mds\.a did not start"):
        cluster.up()
    daemons = cluster.daemons
    assert isinstance(daemons, RecordingDaemons) and daemons.running == {}
    assert "client.rgw.a" not in [e[1] for e in journal.kinds("start")]
    assert not cluster.state_dir.exists()


def test_up_again_starts_mds_and_rgw_after_the_osds_and_makes_nothing_again(tmp_path: Path) -> None:
    journal = Journal()
    cluster = services_cluster(tmp_path, journal)
    cluster.up()
    cluster.down()
    journal.events.clear()
    # the record keeps them: a later `up` without the flags starts them too
    again = DevCluster(tmp_path / "c", log=lambda m: None, parts=recording_parts(journal))
    assert (again.mds, again.rgw) == (True, True)
    again.up()
    starts = [e[1] for e in journal.kinds("start")]
    assert starts[:2] == ["mon.a", "mgr.x"] and starts[-2:] == list(SERVICES)
    osds_up = journal.index("wait_osds_up", (0, 1, 2))
    assert osds_up < journal.indices("start", lambda e: e[1] == "mds.a")[0]
    kinds = [e[0] for e in journal.events]
    assert kinds[-3:] == ["wait_mds_active", "wait_http", "wait_health_ok"]
    assert journal.mon_waves() == [] and ceph_runs(journal, "create") == []
    assert journal.indices("run", lambda e: "radosgw-admin" in e[2]) == []
    assert again.status()["rgw_endpoint"] == "http://127.0.0.1:21099"


def test_down_stops_the_gateway_and_mds_before_the_osds(tmp_path: Path) -> None:
    journal = Journal()
    cluster = services_cluster(tmp_path, journal)
    cluster.up()
    (cluster.asok_dir / "ceph-client.rgw.a.asok").touch()
    journal.events.clear()
    assert cluster.down() == sorted(["client.rgw.a", "mds.a", "mgr.x", "mon.a", *OSDS])
    stops = [e[1] for e in journal.kinds("stop")]
    assert sorted(stops[:2]) == ["client.rgw.a", "mds.a"]
    assert sorted(stops[2:5]) == list(OSDS) and stops[5:] == ["mgr.x", "mon.a"]
    # the gateway gets a short grace before SIGKILL (Tentacle's waits ~25 s for nothing)
    grace = {e[1]: e[3] for e in journal.kinds("stop")}
    assert grace["client.rgw.a"] == 5 and {grace[n] for n in grace if n != "client.rgw.a"} == {30}
    assert not (cluster.asok_dir / "ceph-client.rgw.a.asok").exists()
    assert (cluster.state_dir / "rgw.json").exists()  # `down` keeps the data; purge removes it
    cluster.purge()
    assert not cluster.state_dir.exists()


def test_a_cluster_without_them_refuses_rgw_access_and_cephfs_name(tmp_path: Path) -> None:
    journal = Journal()
    cluster = new_cluster(tmp_path, journal, backing="file")
    cluster.up()
    assert journal.kinds("wait_mds_active", "wait_http") == []
    assert "mds.a" not in cluster.running_daemons()
    with pytest.raises(DevClusterError, match=r"has no RADOS gateway \(make one with --rgw\)"):
        cluster.rgw_access()
    with pytest.raises(DevClusterError, match=r"has no MDS.*--mds"):
        _ = cluster.cephfs_name
    status = cluster.status()
    assert (status["mds"], status["rgw"]) == (False, False)
    assert (status["cephfs"], status["rgw_endpoint"]) == (None, None)
