"""Host knobs against the sysfs fixture tree: which devices, validation, apply/restore.

The host is this machine with every absolute path taken under a copy of the fixture tree,
so the real `cat`, `tee` and `stat` run against real files (sysfs' own refusals need the
real kernel: tests/live/test_knobs_live.py)."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from cephscope.exporter.devices import DeviceResolver
from cephscope.runner.knobs.base import KnobError
from cephscope.runner.knobs.host import HostKnobs
from tests.unit.runner_fakes import RootedHost


class Mon:
    def __init__(self, metadata: list[dict[str, Any]]) -> None:
        self.metadata = metadata

    def command(self, prefix: str, **args: Any) -> Any:
        assert prefix == "osd metadata"
        return self.metadata


@pytest.fixture
def root(sysfs_host1: Path, tmp_path: Path) -> Path:
    root = tmp_path / "host1"
    shutil.copytree(sysfs_host1, root, symlinks=True)
    for dev in ("nvme0n1", "sdb", "sda"):
        (root / "sys" / "block" / dev / "queue" / "read_ahead_kb").write_text("128\n")
    (root / "proc" / "sys" / "vm").mkdir(parents=True)
    (root / "proc" / "sys" / "vm" / "swappiness").write_text("60\n")
    return root


def knobs(root: Path, sysctl_on: Mapping[str, str] | None = None) -> HostKnobs:
    # osd.0 on an NVMe partition, osd.1 on an LV over a SAS disk, both on host "here"
    metadata = [
        {"id": 0, "hostname": "here", "bluestore_bdev_dev_node": "/dev/nvme0n1p1",
         "bluestore_bdev_access_mode": "blk", "devices": "nvme0n1"},
        {"id": 1, "hostname": "here", "bluestore_bdev_dev_node": "/dev/dm-0",
         "bluestore_bdev_access_mode": "blk", "devices": "sdb"},
    ]
    resolver = DeviceResolver(sys_root=str(root / "sys"), dev_root=str(root / "dev"),
                              udev_data=str(root / "run" / "udev" / "data"), host_root=str(root / "host"))
    return HostKnobs(Mon(metadata), lambda host: RootedHost(root),  # type: ignore[arg-type]
                     sysctl_on, resolver)


def test_queue_devices_partition_dm_and_loop(root: Path):
    resolver = DeviceResolver(sys_root=str(root / "sys"), dev_root=str(root / "dev"))
    assert resolver.queue_devices("nvme0n1p1") == ["nvme0n1"]
    assert resolver.queue_devices("dm-0") == ["sdb"]
    assert resolver.queue_devices("loop0") == ["loop0"]  # not the disk of its backing file
    assert resolver.queue_devices("sda") == ["sda"]


def test_osd_ra_applies_to_exactly_the_osd_devices_and_restores(root: Path):
    k = knobs(root)
    assert k.validate({"osd_ra": [0, 4096]}) == []
    snap = k.snapshot(["osd_ra"])
    assert sorted(e["path"] for e in snap) == ["/sys/block/nvme0n1/queue/read_ahead_kb",
                                               "/sys/block/sdb/queue/read_ahead_kb"]
    verified = k.apply({"osd_ra": 4096})
    assert verified == {"osd_ra here:nvme0n1": "4096", "osd_ra here:sdb": "4096"}
    ra = {d: (root / "sys" / "block" / d / "queue" / "read_ahead_kb").read_text().strip()
          for d in ("nvme0n1", "sdb", "sda")}
    assert ra == {"nvme0n1": "4096", "sdb": "4096", "sda": "128"}
    assert k.restore(snap) == []
    assert (root / "sys/block/sdb/queue/read_ahead_kb").read_text().strip() == "128"


def test_scheduler_not_offered_is_an_error_naming_device_and_choices(root: Path):
    problems = knobs(root).validate({"block_queue.scheduler": ["none", "elevator9"]})
    assert problems == [
        "block_queue.scheduler: 'elevator9': here:nvme0n1 offers the schedulers none, "
        "mq-deadline, kyber, bfq",
        "block_queue.scheduler: 'elevator9': here:sdb offers the schedulers mq-deadline, "
        "kyber, bfq, none"]


def test_scheduler_reads_back_the_bracketed_choice(root: Path):
    k = knobs(root)
    snap = k.snapshot(["block_queue.scheduler"])
    assert {e["value"] for e in snap} == {"none", "mq-deadline"}
    # a real sysfs file shows "[kyber] …" after the write; this one shows what tee wrote
    assert k.apply({"block_queue.scheduler": "kyber"}) == {
        "block_queue.scheduler here:nvme0n1": "kyber", "block_queue.scheduler here:sdb": "kyber"}
    assert k.restore(snap) == []
    assert (root / "sys/block/sdb/queue/scheduler").read_text() == "mq-deadline"


def test_missing_and_read_only_attributes_and_bad_values(root: Path):
    (root / "sys/block/sdb/queue/rotational").chmod(0o444)
    problems = knobs(root).validate({"block_queue.wbt_lat_usec": [75000],
                                     "block_queue.rotational": [0],
                                     "osd_ra": [-1],
                                     "sysctl.vm.no_such_knob": [1]})
    text = "\n".join(problems)
    assert "block_queue.wbt_lat_usec: here:nvme0n1: cannot read " \
           "/sys/block/nvme0n1/queue/wbt_lat_usec" in text
    assert "block_queue.rotational: here:sdb: /sys/block/sdb/queue/rotational is read-only" \
        in text
    assert "osd_ra: -1: read-ahead must be a whole number of KiB" in text
    assert "sysctl.vm.no_such_knob: here: cannot read /proc/sys/vm/no_such_knob" in text


def test_sysctl_on_osd_hosts_and_clients_is_one_write_on_one_machine(root: Path):
    k = knobs(root, {"sysctl.vm.swappiness": "all"})
    snap = k.snapshot(["sysctl.vm.swappiness"])
    assert [(e["host"], e["path"], e["value"]) for e in snap] == [
        ("here", "/proc/sys/vm/swappiness", "60")]
    assert k.apply({"sysctl.vm.swappiness": 10}) == {"sysctl.vm.swappiness here": "10"}
    assert k.restore(snap) == []
    assert (root / "proc/sys/vm/swappiness").read_text() == "60"


def test_iosched_attribute_absent_before_the_sweep_is_not_put_back(root: Path):
    # the EC study: `scheduler: mq-deadline` + `iosched/read_expire` axis on devices whose
    # pre-sweep scheduler has no read_expire
    k = knobs(root)
    settings = ["block_queue.scheduler", "block_queue.iosched/read_expire"]
    assert not (root / "sys/block/sdb/queue/iosched/read_expire").exists()
    snap = k.snapshot(settings)
    assert {(e["setting"], e["value"]) for e in snap} == {
        ("block_queue.scheduler", "none"), ("block_queue.scheduler", "mq-deadline"),
        ("block_queue.iosched/read_expire", None)}
    assert k.restore(snap) == []
    assert not (root / "sys/block/sdb/queue/iosched/read_expire").exists()
    # an attribute that is not an iosched/ one and cannot be read stays an error
    with pytest.raises(KnobError, match="wbt_lat_usec"):
        k.snapshot(["block_queue.wbt_lat_usec"])


def test_a_hostile_metadata_host_name_is_refused_before_any_host_is_run_on(tmp_path: Path):
    """An OSD that reports an option-like hostname (a container's NODE_NAME) is refused,
    naming it: no ssh is started for any host, not even for a read."""
    from cephscope.runner.hostexec import SshHost

    record = tmp_path / "ssh-calls"
    fake_ssh = tmp_path / "ssh"
    fake_ssh.write_text(f"#!/bin/sh\necho \"$@\" >> {record}\nexit 1\n")
    fake_ssh.chmod(0o755)
    metadata = [{"id": 3, "hostname": "-oProxyCommand=touch /tmp/x", "devices": "sda"}]
    k = HostKnobs(Mon(metadata),  # type: ignore[arg-type]
                  lambda host: SshHost(host, ssh_bin=str(fake_ssh)))
    problems = k.validate({"osd_ra": [128], "sysctl.vm.swappiness": [10]})
    assert problems and all("osd.3" in p and "'-oProxyCommand=touch /tmp/x'" in p
                            for p in problems)
    assert not record.exists()


def test_a_device_path_from_remote_metadata_is_never_written(tmp_path: Path):
    """A remote OSD host's `devices` like ../../../home/ceph/x would make root tee a file
    outside /sys/block: refused, naming the OSD, before anything is read or written."""
    from cephscope.runner.hostexec import SshHost

    metadata = [{"id": 4, "hostname": "osd-host-2", "devices": "sda,../../../home/ceph/x"}]
    record = tmp_path / "ssh-calls"
    fake_ssh = tmp_path / "ssh"
    fake_ssh.write_text(f"#!/bin/sh\necho \"$@\" >> {record}\nexit 1\n")
    fake_ssh.chmod(0o755)
    k = HostKnobs(Mon(metadata),  # type: ignore[arg-type]
                  lambda host: SshHost(host, ssh_bin=str(fake_ssh)))
    problems = k.validate({"osd_ra": [128]})
    assert len(problems) == 1
    assert "osd.4" in problems[0] and "'../../../home/ceph/x'" in problems[0]
    assert not record.exists()
