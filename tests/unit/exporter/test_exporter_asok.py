"""Admin-socket client: protocol, allowlist, typed errors, discovery."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from cephscope.exporter.asok import (
    READ_ONLY_COMMANDS,
    AsokClient,
    AsokCommandError,
    AsokConnectError,
    AsokJSONError,
    AsokNotAllowedError,
    AsokProtocolError,
    AsokTimeoutError,
    daemon_from_asok_path,
    discover_daemons,
)
from tests.unit.fake_asok import FakeCluster, capture_dir


@pytest.fixture
def cluster(tmp_path: Path):
    fake = FakeCluster(tmp_path / "run")
    yield fake
    fake.stop()


def test_replays_capture_and_reports_peer_pid(cluster: FakeCluster) -> None:
    daemon = cluster.add_osd(0)
    client = AsokClient(daemon.path, timeout=2)
    expected = json.loads((capture_dir("load", "osd.0") / "perf_dump.json").read_bytes())
    assert client.command("perf dump") == expected
    raw = client.command_raw("version")
    assert raw.peer_pid == os.getpid()
    assert daemon.requests[-1] == {"prefix": "version"}
    assert client.config_get("osd_op_num_shards") == "0"


def test_write_commands_are_never_sent(cluster: FakeCluster) -> None:
    daemon = cluster.add_osd(0)
    client = AsokClient(daemon.path)
    for prefix in ("config set", "injectargs", "perf reset", "flush_journal"):
        assert prefix not in READ_ONLY_COMMANDS
        with pytest.raises(AsokNotAllowedError, match=prefix):
            client.command(prefix, var="osd_op_num_shards", val="1")
    assert daemon.requests == []


def test_unknown_command_is_a_command_error(cluster: FakeCluster) -> None:
    daemon = cluster.add_osd(0)
    daemon.responses.pop("dump_blocked_ops.json")
    with pytest.raises(AsokCommandError, match="Invalid argument"):
        AsokClient(daemon.path).command("dump_blocked_ops")


def test_hang_times_out_within_the_timeout(cluster: FakeCluster) -> None:
    daemon = cluster.add_osd(0, fault="hang")
    started = time.monotonic()
    with pytest.raises(AsokTimeoutError):
        AsokClient(daemon.path, timeout=0.3).command("perf dump")
    assert time.monotonic() - started < 1.0


@pytest.mark.parametrize(
    ("fault", "error", "message"),
    [
        ("close_mid_frame", AsokProtocolError, "connection closed after"),
        ("huge_length", AsokProtocolError, "exceeds the limit"),
        ("garbage", AsokJSONError, "invalid JSON"),
    ],
)
def test_broken_responses_raise_typed_errors(
    cluster: FakeCluster, fault: str, error: type[Exception], message: str
) -> None:
    daemon = cluster.add_osd(0, fault=fault)
    started = time.monotonic()
    with pytest.raises(error, match=message):
        AsokClient(daemon.path, timeout=2).command("perf dump")
    assert time.monotonic() - started < 1.0  # the 2 GiB prefix is refused, not read


def test_socket_without_listener_and_missing_file(cluster: FakeCluster) -> None:
    dead = cluster.add_dead_socket("ceph-osd.9.asok")
    with pytest.raises(AsokConnectError, match="refused"):
        AsokClient(dead).command("version")
    with pytest.raises(AsokConnectError):
        AsokClient(cluster.dir / "ceph-osd.10.asok").command("version")


def test_discovery_top_level_and_cephadm_subdirs(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "0b9d5c3e-fsid").mkdir(parents=True)
    for name in (
        "ceph-osd.0.asok",
        "0b9d5c3e-fsid/ceph-osd.1.asok",
        "0b9d5c3e-fsid/ceph-mon.a.asok",
        "ceph-mgr.x.asok",
        "ceph-client.admin.4242.94811.asok",
        "osd.0.pid",
        "not-a-socket.txt",
    ):
        (run / name).touch()
    names = [d.name for d in discover_daemons(run)]
    assert names == ["mgr.x", "mon.a", "osd.0", "osd.1"]
    assert [d.name for d in discover_daemons(run, ["osd"])] == ["osd.0", "osd.1"]
    assert discover_daemons(tmp_path / "missing") == []
    osd1 = daemon_from_asok_path(run / "0b9d5c3e-fsid/ceph-osd.1.asok")
    assert osd1 is not None
    assert (osd1.type, osd1.id, osd1.cluster) == ("osd", "1", "ceph")
    assert daemon_from_asok_path("ceph-client.admin.1.2.asok") is None


def test_discovery_of_vstart_socket_names(tmp_path: Path) -> None:
    """Ceph's vstart.sh names sockets $name.asok, its clients' $name.$pid.asok, and its
    gateways' radosgw.<port>.asok."""
    run = tmp_path / "asok"
    run.mkdir()
    for name in ("osd.0.asok", "osd.1.asok", "mon.a.asok", "mgr.x.asok", "client.admin.31337.asok",
                 "radosgw.8000.asok"):
        (run / name).touch()
    assert [d.name for d in discover_daemons(run)] == [
        "mgr.x", "mon.a", "osd.0", "osd.1", "radosgw.8000"]
    gateway = daemon_from_asok_path(run / "radosgw.8000.asok")
    assert gateway is not None
    assert (gateway.type, gateway.id, gateway.counter_labels) == (
        "rgw", "8000", {"instance_id": "8000"})
    osd0 = daemon_from_asok_path(run / "osd.0.asok")
    assert osd0 is not None and (osd0.type, osd0.id, osd0.cluster) == ("osd", "0", "ceph")
    named = daemon_from_asok_path("backup-osd.7.asok")
    assert named is not None and (named.name, named.cluster) == ("osd.7", "backup")


def test_fetch_concurrently_runs_sockets_in_parallel(cluster: FakeCluster) -> None:
    from cephscope.exporter.asok import RawResponse, fetch_concurrently

    good = cluster.add_osd(0)
    slow = [cluster.add_osd(i, fault="slow:0.4") for i in (1, 2, 3)]
    hung = cluster.add_osd(4, fault="hang")
    dead = cluster.add_dead_socket("ceph-osd.5.asok")
    commands = [{"prefix": "version"}, {"prefix": "status"}]
    paths = [good.path, *(d.path for d in slow), hung.path, dead]
    started = time.monotonic()
    results = fetch_concurrently(
        {str(p): commands for p in paths}, deadline=started + 5, call_timeout=0.6
    )
    elapsed = time.monotonic() - started
    # Three slow sockets x two commands x 0.4 s would be 2.4 s one after the other.
    assert elapsed < 1.5
    version, status = results[str(good.path)]
    assert isinstance(version, RawResponse) and isinstance(status, RawResponse)
    assert json.loads(version.payload)["version"] == "16.2.15"
    assert "osd_fsid" in json.loads(status.payload)
    for daemon in slow:
        assert all(isinstance(r, RawResponse) for r in results[str(daemon.path)])
    hung_results = results[str(hung.path)]
    assert len(hung_results) == 2 and all(isinstance(r, AsokTimeoutError) for r in hung_results)
    assert len(hung.requests) == 1, "after a failure the socket's other commands are not sent"
    assert all(isinstance(r, AsokConnectError) for r in results[str(dead)])
    assert version.peer_pid == os.getpid()


def test_fetch_concurrently_refuses_write_commands(cluster: FakeCluster) -> None:
    from cephscope.exporter.asok import fetch_concurrently

    daemon = cluster.add_osd(0)
    with pytest.raises(AsokNotAllowedError):
        fetch_concurrently(
            {str(daemon.path): [{"prefix": "config set", "var": "x", "val": "1"}]},
            deadline=time.monotonic() + 1,
            call_timeout=1,
        )
    assert daemon.requests == []


@pytest.mark.parametrize(
    ("fault", "error"),
    [
        ("close_mid_frame", AsokProtocolError),
        ("huge_length", AsokProtocolError),
        ("hang", AsokTimeoutError),
    ],
)
def test_fetch_concurrently_faults(cluster: FakeCluster, fault: str, error: type) -> None:
    from cephscope.exporter.asok import fetch_concurrently

    daemon = cluster.add_osd(0, fault=fault)
    started = time.monotonic()
    results = fetch_concurrently(
        {str(daemon.path): [{"prefix": "perf dump"}]}, deadline=started + 0.5, call_timeout=5
    )
    assert time.monotonic() - started < 1.0
    assert isinstance(results[str(daemon.path)][0], error)


@pytest.mark.parametrize(
    ("socket", "name", "gateway_id", "instance_id"),
    [
        # packages, a hand-started gateway: ceph-exporter (Reef and later) cannot find a fourth
        # field and drops its counters; here the id is the instance_id
        ("ceph-client.rgw.a.asok", "rgw.a", "a", "a"),
        ("client.rgw.8000.asok", "rgw.8000", "8000", "8000"),
        # cephadm: rgw.<service>.<host>.<random>[.<pid>.<cctid>]: the random suffix
        ("ceph-client.rgw.foo.ceph-node-00.hrgsea.2.94739968030880.asok",
         "rgw.foo.ceph-node-00.hrgsea.2.94739968030880", "foo.ceph-node-00.hrgsea.2.94739968030880",
         "hrgsea"),
        ("ceph-client.rgw.s3.host1.xkwzle.asok", "rgw.s3.host1.xkwzle", "s3.host1.xkwzle", "xkwzle"),
        # Rook: client.rgw.<store with dots>.<id>
        ("ceph-client.rgw.my.store.a.asok", "rgw.my.store.a", "my.store.a", "a"),
        # the old client.radosgw.<name> entity and vstart.sh's socket: the last field
        ("ceph-client.radosgw.gateway.asok", "radosgw.gateway", "gateway", "gateway"),
        ("radosgw.8001.asok", "radosgw.8001", "8001", "8001"),
        ("backup-client.rgw.b.asok", "rgw.b", "b", "b"),
    ],
)
def test_gateway_sockets_named_and_labelled_as_ceph_exporter(
        socket: str, name: str, gateway_id: str, instance_id: str) -> None:
    daemon = daemon_from_asok_path(f"/run/ceph/{socket}")
    assert daemon is not None
    assert (daemon.name, daemon.type, daemon.id, daemon.instance_id) == (
        name, "rgw", gateway_id, instance_id)
    assert daemon.counter_labels == {"instance_id": instance_id}
    osd = daemon_from_asok_path("/run/ceph/ceph-osd.3.asok")
    assert osd is not None and osd.counter_labels == {"ceph_daemon": "osd.3"}
    mds = daemon_from_asok_path("/run/ceph/ceph-mds.cephfs.node1.abcdef.asok")
    assert mds is not None and (mds.name, mds.counter_labels) == (
        "mds.cephfs.node1.abcdef", {"ceph_daemon": "mds.cephfs.node1.abcdef"})


@pytest.mark.parametrize("socket", [
    "ceph-client.admin.asok", "ceph-client.admin.4242.94811.asok", "ceph-client.rbd-mirror.a.asok",
    "ceph-client.rgw.asok", "ceph-client.rgw..asok", "ceph-client.rgw.foo.bar..asok",
    "ceph-client.myrgw.a.asok", "radosgw.asok", "ceph-client.rgw.a\n.asok", "ceph-osd.\t1.asok",
    "ceph-client.rgw.\udcff.asok", "ceph-osd.1.asok.bak", ".asok", "ceph-.asok",
])
def test_names_that_are_not_a_daemons_socket_are_skipped(socket: str) -> None:
    assert daemon_from_asok_path(f"/run/ceph/{socket}") is None


def test_hostile_socket_names_in_the_dir_are_skipped(tmp_path: Path) -> None:
    """Anyone who can write the socket dir chooses names: bytes that are not UTF-8, newlines,
    quotes. None becomes a daemon (and so a label value or a path elsewhere)."""
    run = tmp_path / "run"
    run.mkdir()
    for raw in (b"ceph-osd.\xff.asok", b"ceph-client.rgw.a\nb.asok", b"ceph-osd.0.asok",
                b'ceph-client.rgw.x".asok', b"ceph-client.rgw.a.asok"):
        (run / os.fsdecode(raw)).touch()
    found = discover_daemons(run)
    assert [d.name for d in found] == ["osd.0", "rgw.a", 'rgw.x"']
    assert found[2].counter_labels == {"instance_id": 'x"'}
