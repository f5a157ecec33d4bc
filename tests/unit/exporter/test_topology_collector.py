"""The topology collector end to end: metadata from a (fake) mon or from fake admin sockets
replaying real captures, devices from the sysfs fixture tree, rendered exposition."""

from __future__ import annotations

import copy
import errno
import json
import logging
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from cephscope.exporter.asok import discover_daemons
from cephscope.exporter.collector import HostContext
from cephscope.exporter.collectors import enabled_collectors
from cephscope.exporter.collectors.topology import TopologyCollector, TopologySettings
from cephscope.exporter.exposition import MetricSink, render
from cephscope.exporter.main import build_parser
from cephscope.exporter.osdmeta import MonClient, facts_from_metadata
from cephscope.exporter.settings import HostSettings, PathSettings
from tests.unit.exporter_fakes import CAPTURED_FSID, METADATA, FakeMon, FakeRados, addresses, edited_metadata
from tests.unit.fake_asok import FakeCluster, capture_dir


@pytest.fixture()
def root(sysfs_host1: Path, tmp_path: Path) -> Path:
    """A private copy of the fixture tree: tests add data dirs and st_dev links to it."""
    dest = tmp_path / "host1"
    shutil.copytree(sysfs_host1, dest, symlinks=True)
    return dest


@pytest.fixture()
def tree(sysfs_host1: Path) -> Path:
    """The fixture tree, read-only."""
    return sysfs_host1


@pytest.fixture()
def asoks(tmp_path: Path) -> Any:
    cluster = FakeCluster(tmp_path / "asok")
    yield cluster
    for daemon in cluster.daemons.values():
        daemon.stop()


def make_collector(root: Path, mon: MonClient, refresh: float = 60.0,
                   device_gauges: bool = True) -> TopologyCollector:
    paths = PathSettings(sysfs=str(root / "sys"), devfs=str(root / "dev"),
                         udev_data=str(root / "run" / "udev" / "data"), procfs=str(root / "proc"),
                         rootfs=str(root / "host"))
    return TopologyCollector(TopologySettings(refresh_interval=refresh, nodename="vm",
                                              device_gauges=device_gauges),
                             HostSettings(paths=paths), mon=mon, addresses=addresses)


def context(asok_dir: Path) -> HostContext:
    return HostContext(
        discover_daemons(asok_dir, ["osd"]),
        asok_dir=str(asok_dir),
        deadline=time.monotonic() + 10,
        call_timeout=2.0,
        max_response_bytes=1 << 26,
    )


def scrape(collector: TopologyCollector, asok_dir: Path) -> str:
    sink = MetricSink()
    collector.collect_host(context(asok_dir), sink)
    return render(sink.families.values()).decode()


def lines(text: str, metric: str) -> list[str]:
    return sorted(line for line in text.splitlines() if line.startswith(metric + "{"))


def test_mon_metadata_resolved_against_fixture_hardware(
    root: Path, asoks: FakeCluster, tmp_path: Path
) -> None:
    for osd in (0, 1, 2):
        asoks.add_osd(osd, scenario="idle")
    mon = FakeMon(edited_metadata(root))
    text = scrape(make_collector(root, mon), tmp_path / "asok")

    assert "cephscope_topology_mon_up 1" in text
    assert lines(text, "cephscope_osd_info") == [
        f'cephscope_osd_info{{ceph_daemon="osd.{i}",hostname="vm",objectstore="bluestore",'
        f'device_class="ssd",ceph_version="16.2.15"}} 1'
        for i in (0, 1, 2)
    ]
    devices = lines(text, "cephscope_osd_device_info")
    assert devices == sorted([
        'cephscope_osd_device_info{ceph_daemon="osd.0",role="data",device="nvme0n1",'
        'nodename="vm",parent="nvme0n1",kind="disk",access="blk",'
        'model="Samsung SSD 970 EVO Plus 1TB",serial="S4EWNX0R123456A",'
        'wwn="eui.0025385b91b0e1a2",rotational="0",transport="nvme",firmware_rev="2B2QEXM7",'
        'scheduler="none"} 1',
        'cephscope_osd_device_info{ceph_daemon="osd.1",role="data",device="dm-0",'
        'nodename="vm",parent="sdb",kind="dm",access="blk",model="ST4000NM0025",'
        'serial="ZC1ABCDE0000C1234567",wwn="naa.5000c500a1b2c3d4",rotational="1",'
        'transport="sas",firmware_rev="E002",scheduler="none"} 1',
        'cephscope_osd_device_info{ceph_daemon="osd.1",role="db",device="nvme0n1p1",'
        'nodename="vm",parent="nvme0n1",kind="partition",access="blk",'
        'model="Samsung SSD 970 EVO Plus 1TB",serial="S4EWNX0R123456A",'
        'wwn="eui.0025385b91b0e1a2",rotational="0",transport="nvme",firmware_rev="2B2QEXM7",'
        'scheduler="none"} 1',
        'cephscope_osd_device_info{ceph_daemon="osd.2",role="data",device="sdc1",'
        'nodename="vm",parent="sdc",kind="partition",access="file",model="WDC WD40EFRX-68N",'
        'serial="WD-WCC7K1234567",wwn="naa.50014ee2b5c6d7e8",rotational="1",'
        'transport="sata",firmware_rev="0A82",scheduler="bfq"} 1',
    ])
    assert ('cephscope_osd_device_nr_requests{ceph_daemon="osd.0",role="data",device="nvme0n1",'
            'nodename="vm"} 1023') in text
    assert ('cephscope_osd_device_hw_queues{ceph_daemon="osd.0",role="data",device="nvme0n1",'
            'nodename="vm"} 8') in text
    # by default the device gauges are left out, the info series are the same
    lean = scrape(make_collector(root, mon, device_gauges=False), tmp_path / "asok")
    assert lines(lean, "cephscope_osd_device_info") == devices
    assert not any(line.startswith("cephscope_osd_device_") and "_info{" not in line
                   for line in lean.splitlines())
    assert lines(text, "cephscope_osd_network_info") == sorted([
        *(f'cephscope_osd_network_info{{ceph_daemon="osd.{i}",network="{net}",interface="lo",'
          f'nodename="vm",address="127.0.0.1"}} 1'
          for i in (0, 1, 2) for net in ("public", "cluster") if (i, net) != (2, "cluster")),
        'cephscope_osd_network_info{ceph_daemon="osd.2",network="cluster",interface="ens1f0",'
        'nodename="vm",address="2001:db8::11"} 1',
    ])
    # speed only where the kernel knows it: ens1f0 (25 GbE), not lo
    assert lines(text, "cephscope_osd_network_speed_bytes") == [
        'cephscope_osd_network_speed_bytes{ceph_daemon="osd.2",network="cluster",'
        'interface="ens1f0",nodename="vm"} 3125000000.0'
    ]


def test_unresolvable_device_still_gives_osd_info_and_a_clear_log(
    tree: Path, asoks: FakeCluster, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The real capture names /dev/loop6..9, which the fixture host does not have."""
    for osd in (0, 1, 2):
        asoks.add_osd(osd, scenario="idle")
    collector = make_collector(tree, FakeMon(), refresh=0)
    with caplog.at_level(logging.WARNING, logger="cephscope.exporter.topology"):
        text = scrape(collector, tmp_path / "asok")
        scrape(collector, tmp_path / "asok")  # same problem again: not logged again
    assert len(lines(text, "cephscope_osd_info")) == 3
    assert lines(text, "cephscope_osd_device_info") == []
    unknown = [r.getMessage() for r in caplog.records if "device unknown" in r.getMessage()]
    assert len(unknown) == 3
    assert any(
        "osd.0: data device unknown" in m and "/dev/loop6" in m and "No such file" in m
        for m in unknown
    ), unknown


def test_mon_down_falls_back_to_admin_socket_and_data_dir(
    root: Path, asoks: FakeCluster, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    asoks.add_osd(0, scenario="idle")
    config = json.loads((capture_dir("idle", "osd.0") / "config_show.json").read_text())
    # the captured OSD data dir, recreated inside the fixture host root, its block on loop0
    data_dir = root / "host" / config["osd_data"].lstrip("/")
    data_dir.mkdir(parents=True)
    (data_dir / "block").symlink_to("/dev/loop0")
    mon = FakeMon(down=True)
    collector = make_collector(root, mon, refresh=0)
    with caplog.at_level(logging.WARNING, logger="cephscope.exporter.topology"):
        text = scrape(collector, tmp_path / "asok")
        text2 = scrape(collector, tmp_path / "asok")
    assert "cephscope_topology_mon_up 0" in text
    assert lines(text, "cephscope_osd_info") == [
        'cephscope_osd_info{ceph_daemon="osd.0",hostname="vm",objectstore="bluestore",'
        'device_class="ssd",ceph_version="16.2.15"} 1'
    ]
    [device] = lines(text, "cephscope_osd_device_info")
    assert 'role="data",device="loop0"' in device and 'transport="loop"' in device
    assert lines(text, "cephscope_osd_network_info") == [
        'cephscope_osd_network_info{ceph_daemon="osd.0",network="cluster",interface="lo",'
        'nodename="vm",address="127.0.0.1"} 1',
        'cephscope_osd_network_info{ceph_daemon="osd.0",network="public",interface="lo",'
        'nodename="vm",address="127.0.0.1"} 1',
    ]
    assert text2 == text
    # one connection attempt, then no retry before retry_seconds; one log line
    assert mon.connects == 1
    fallbacks = [r for r in caplog.records if "using admin sockets" in r.getMessage()]
    assert len(fallbacks) == 1


def test_garbage_from_admin_socket_with_mon_down_skips_only_that_osd(
    tree: Path, asoks: FakeCluster, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    asoks.add_osd(0, scenario="idle", fault="garbage")
    asoks.add_osd(1, scenario="idle")
    collector = make_collector(tree, FakeMon(down=True), refresh=0)
    with caplog.at_level(logging.WARNING, logger="cephscope.exporter.topology"):
        text = scrape(collector, tmp_path / "asok")
    assert [line.split(",")[0] for line in lines(text, "cephscope_osd_info")] == [
        'cephscope_osd_info{ceph_daemon="osd.1"'
    ]
    assert any("osd.0" in r.getMessage() and "invalid JSON" in r.getMessage()
               for r in caplog.records)


def test_osd_of_another_cluster_does_not_take_the_mons_metadata(
    root: Path, asoks: FakeCluster, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Same id, other fsid (e.g. --ceph.conf of a second cluster on this host)."""
    asoks.add_osd(0, scenario="idle")
    mon = FakeMon(edited_metadata(root))
    mon.rados.fsid = "00000000-0000-0000-0000-000000000000"
    with caplog.at_level(logging.WARNING, logger="cephscope.exporter.topology"):
        text = scrape(make_collector(root, mon), tmp_path / "asok")
    assert "nvme0n1" not in text  # the mon's osd.0 is on NVMe; this host's osd.0 is not
    assert len(lines(text, "cephscope_osd_info")) == 1
    assert any(f"osd.0 belongs to cluster {CAPTURED_FSID}" in r.getMessage()
               for r in caplog.records)
    mon.rados.fsid = CAPTURED_FSID
    collector = make_collector(root, mon)
    assert "nvme0n1" in scrape(collector, tmp_path / "asok")


def test_osd_without_metadata_entry_uses_its_admin_socket(
    tree: Path, asoks: FakeCluster, tmp_path: Path
) -> None:
    """A just-created OSD the mon has no metadata for yet."""
    asoks.add_osd(0, scenario="idle")
    asoks.add_osd(7, scenario="idle", source_osd="osd.1")
    text = scrape(make_collector(tree, FakeMon()), tmp_path / "asok")
    assert "cephscope_topology_mon_up 1" in text
    assert {line.split(",")[0] for line in lines(text, "cephscope_osd_info")} == {
        'cephscope_osd_info{ceph_daemon="osd.0"', 'cephscope_osd_info{ceph_daemon="osd.7"'
    }


def test_series_are_cached_between_refreshes(root: Path, asoks: FakeCluster, tmp_path: Path) -> None:
    asoks.add_osd(0, scenario="idle")
    mon = FakeMon(edited_metadata(root))
    collector = make_collector(root, mon, refresh=3600)
    first = scrape(collector, tmp_path / "asok")
    second = scrape(collector, tmp_path / "asok")
    assert first == second
    assert mon.calls == ["osd metadata", "osd tree"]  # one refresh only
    collector.refresh_interval_seconds = 0
    scrape(collector, tmp_path / "asok")
    assert mon.calls.count("osd metadata") == 2


def test_dedicated_db_and_wal_only_when_ceph_says_so() -> None:
    shared = dict(METADATA[0], bluefs_db_partition_path="/dev/loop6", bluefs_dedicated_db="0")
    assert set(facts_from_metadata("0", shared).device_paths) == {"data"}
    dedicated = dict(shared, bluefs_dedicated_db="1", bluefs_dedicated_wal="1",
                     bluefs_wal_partition_path="/dev/nvme0n1p2")
    facts = facts_from_metadata("0", dedicated)
    assert facts.device_paths["db"][0] == "/dev/loop6"
    assert facts.device_paths["wal"][0] == "/dev/nvme0n1p2"
    assert facts.device_paths["data"] == [
        "/dev/loop6", "/tmp/cs-h4/cluster/osd/ceph-0/block"
    ]
    assert facts.ceph_version == "16.2.15"


def test_registered_with_flags() -> None:
    parser = build_parser()  # the global --ceph.* flags are main's
    args = parser.parse_args([
        "--collector.topology.refresh-interval", "5", "--ceph.conf", "/x/ceph.conf",
        "--ceph.name", "client.cephscope",
    ])
    [collector] = [c for c in enabled_collectors(args) if c.name == "topology"]
    assert isinstance(collector, TopologyCollector)
    assert collector.refresh_interval_seconds == 5
    assert (collector.mon.conffile, collector.mon.name) == ("/x/ceph.conf", "client.cephscope")
    off = parser.parse_args(["--no-collector.topology"])
    assert not [c for c in enabled_collectors(off) if c.name == "topology"]


def test_real_mon_client_with_bad_conf_fails_fast_and_cleanly() -> None:
    """python-rados for real: a missing ceph.conf is a ConnectionError naming the file."""
    mon = MonClient(conffile="/nonexistent/ceph.conf", name="client.admin", timeout=1)
    started = time.monotonic()
    with pytest.raises(ConnectionError, match=r"/nonexistent/ceph\.conf") as first:
        mon.osd_facts()
    with pytest.raises(ConnectionError) as again:  # within retry_seconds: no new attempt
        mon.osd_facts()
    assert str(again.value) == str(first.value)
    assert time.monotonic() - started < 5


def cephadm_metadata() -> list[dict[str, Any]]:
    """osd.0 as cephadm runs it: its data dir is /var/lib/ceph/osd/ceph-0 inside the container
    (/var/lib/ceph/<fsid>/osd.0 on the host), its block an LVM link only the container's path
    reaches; no device node in the metadata, so the data dir's `block` link is the only way."""
    meta = copy.deepcopy([m for m in METADATA if m["id"] == 0])
    meta[0].update(osd_data="/var/lib/ceph/osd/ceph-0",
                   bluestore_bdev_partition_path="unknown", bluestore_bdev_dev_node="unknown")
    return meta


def test_containerised_osd_paths_resolve_through_proc_pid_root(
    root: Path, asoks: FakeCluster, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    asoks.add_osd(0, scenario="idle", subdir=CAPTURED_FSID[:8])  # cephadm: /var/run/ceph/<fsid>/
    # The fake OSD answers from this process: SO_PEERCRED names our pid.
    container = root / "proc" / str(os.getpid()) / "root"
    data_in_container = container / "var/lib/ceph/osd/ceph-0"
    data_in_container.mkdir(parents=True)
    (data_in_container / "block").symlink_to("/dev/ceph-0a1b-vg/osd-block-9f8e")
    (container / "dev").symlink_to(root / "dev")  # cephadm binds the host's /dev
    on_host = root / "host" / "var/lib/ceph" / CAPTURED_FSID / "osd.0"
    on_host.mkdir(parents=True)
    (on_host / "block").symlink_to("/dev/ceph-0a1b-vg/osd-block-9f8e")
    mon = FakeMon(cephadm_metadata())

    # The host has a directory at the container's path too (the fixture's ceph-0, on NVMe):
    # the OSD's own view wins.
    text = scrape(make_collector(root, mon), tmp_path / "asok")
    [device] = lines(text, "cephscope_osd_device_info")
    assert 'ceph_daemon="osd.0",role="data",device="dm-0"' in device
    assert 'parent="sdb"' in device and 'kind="dm"' in device

    # Without the container's root (no such pid visible) the exporter's own view is the
    # fallback: there the same path is another OSD's dir (the fixture host's ceph-0, on NVMe).
    shutil.rmtree(root / "proc" / str(os.getpid()))
    with caplog.at_level(logging.INFO, logger="cephscope.exporter.topology"):
        text = scrape(make_collector(root, mon), tmp_path / "asok")
    [device] = lines(text, "cephscope_osd_device_info")
    assert 'device="nvme0n1"' in device
    messages = [r.getMessage() for r in caplog.records]
    assert any("resolving its paths in this exporter's view" in m for m in messages), messages


class SilentMonRados(FakeRados):
    """A connected handle whose mon stops answering (librados: -ETIMEDOUT), then comes back."""

    def __init__(self) -> None:
        super().__init__(METADATA)
        self.silent = True
        self.shut_down = False

    def mon_command(self, cmd: str, inbuf: bytes, timeout: int = 0) -> tuple[int, bytes, str]:
        if self.silent:
            return -errno.ETIMEDOUT, b"", ""
        return super().mon_command(cmd, inbuf, timeout)

    def shutdown(self) -> None:
        self.shut_down = True


def test_a_mon_that_stops_answering_is_asked_again_at_the_next_refresh() -> None:
    # A timed-out mon command is not a broken handle: librados hunts for the mon by itself, so
    # the handle is kept and the next refresh asks again (not after retry_seconds): a
    # restarted mon brings topology back within one refresh.
    mon = FakeMon()
    mon.rados = SilentMonRados()
    with pytest.raises(ConnectionError, match="no mon answered"):
        mon.osd_facts()
    assert not mon.rados.shut_down and mon.connects == 1
    mon.rados.silent = False
    assert sorted(mon.osd_facts()) == sorted(str(m["id"]) for m in METADATA)
    assert mon.connects == 1
