"""Device resolution against the fixture tree tests/fixtures/sysfs/host1 (see build_tree.py)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from cephscope.exporter.devices import DeviceResolver

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "sysfs" / "host1"


@pytest.fixture()
def tree(sysfs_host1: Path) -> Path:
    """The fixture tree, read-only."""
    return sysfs_host1


@pytest.fixture()
def writable_tree(sysfs_host1: Path, tmp_path: Path) -> Path:
    """A private copy of the fixture tree (for tests that add or remove links)."""
    root = tmp_path / "host1"
    shutil.copytree(sysfs_host1, root, symlinks=True)
    return root


def resolver(root: Path, *, udev: bool = True, host_root: str | None = None) -> DeviceResolver:
    return DeviceResolver(
        sys_root=str(root / "sys"),
        dev_root=str(root / "dev"),
        udev_data=str(root / "run" / "udev" / "data") if udev else str(root / "no-udev"),
        host_root=str(root / "host") if host_root is None else host_root,
    )


def map_st_dev_to(root: Path, path: Path, sysfs_target: str) -> None:
    """Make the fixture's /sys/dev/block/M:m of `path`'s filesystem point at a fixture
    device: the test file really lives on this machine's filesystem, whose device numbers
    the hand-built tree cannot know in advance."""
    st = os.stat(path)
    link = root / "sys" / "dev" / "block" / f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    if link.is_symlink():
        link.unlink()
    link.symlink_to(os.path.relpath(root / "sys" / sysfs_target, link.parent))


def test_nvme_whole_disk_has_controller_attributes(tree: Path) -> None:
    res = resolver(tree).resolve("/dev/nvme0n1")
    dev = res.device
    assert dev is not None, res.reason
    assert (dev.name, dev.kind, dev.parent, dev.transport) == ("nvme0n1", "disk", "nvme0n1", "nvme")
    assert dev.model == "Samsung SSD 970 EVO Plus 1TB"  # padded in sysfs, stripped here
    assert dev.serial == "S4EWNX0R123456A"
    assert dev.firmware_rev == "2B2QEXM7"
    assert dev.wwn == "eui.0025385b91b0e1a2"
    assert dev.rotational == "0"
    assert (dev.scheduler, dev.nr_requests, dev.hw_queues) == ("none", 1023, 8)
    assert dev.size_bytes == 1953525168 * 512
    assert res.access == "blk"


def test_partition_keeps_its_own_name_and_names_its_disk(tree: Path) -> None:
    dev = resolver(tree).resolve("/dev/nvme0n1p1").device
    assert dev is not None
    assert (dev.name, dev.kind, dev.parent) == ("nvme0n1p1", "partition", "nvme0n1")
    # attributes and queue settings come from the disk the partition is on
    assert dev.model == "Samsung SSD 970 EVO Plus 1TB"
    assert dev.transport == "nvme"
    assert dev.nr_requests == 1023
    assert dev.size_bytes == 125829120 * 512


def test_sata_ssd_prefers_udev_database(tree: Path) -> None:
    dev = resolver(tree).resolve("/dev/sda").device
    assert dev is not None
    assert (dev.name, dev.transport, dev.rotational) == ("sda", "sata", "0")
    assert dev.model == "Samsung SSD 860 EVO 500GB"  # ID_MODEL, full (sysfs truncates it)
    assert dev.serial == "S3Z1NB0K123456X"
    assert dev.wwn == "0x5002538e40a1b2c3"
    assert dev.scheduler == "mq-deadline"


def test_sata_ssd_without_udev_uses_sysfs(tree: Path) -> None:
    dev = resolver(tree, udev=False).resolve("/dev/sda").device
    assert dev is not None
    assert dev.model == "Samsung SSD 860"
    assert dev.wwn.startswith("t10.ATA")
    assert dev.transport == "sata"  # from the ata port in the sysfs path alone
    assert dev.firmware_rev == "4B6Q"


@pytest.mark.parametrize(
    "path",
    [
        "/dev/mapper/ceph--0a1b--vg-osd--block--9f8e",
        "/dev/ceph-0a1b-vg/osd-block-9f8e",
        "/dev/dm-0",
        "/var/lib/ceph/osd/ceph-2/block",  # ceph-volume's data dir link
    ],
)
def test_lvm_on_sas_hdd_resolves_to_dm_with_physical_parent(tree: Path, path: str) -> None:
    res = resolver(tree).resolve(path)
    dev = res.device
    assert dev is not None, res.reason
    assert (dev.name, dev.kind, dev.parent) == ("dm-0", "dm", "sdb")
    assert dev.dm_name == "ceph--0a1b--vg-osd--block--9f8e"
    assert dev.rotational == "1"
    assert dev.transport == "sas"
    assert dev.model == "ST4000NM0025"
    assert dev.serial == "ZC1ABCDE0000C1234567"  # from the binary VPD page 0x80
    assert dev.wwn == "naa.5000c500a1b2c3d4"


def test_lv_name_lookup_without_dev_links(writable_tree: Path) -> None:
    """udev-less hosts may lack /dev/mapper links: the dm name in sysfs is enough."""
    shutil.rmtree(writable_tree / "dev" / "mapper")
    dev = resolver(writable_tree).resolve("/dev/mapper/ceph--0a1b--vg-osd--block--9f8e").device
    assert dev is not None and dev.name == "dm-0"


def test_virtio_disk(tree: Path) -> None:
    dev = resolver(tree).resolve("/dev/vda").device
    assert dev is not None
    assert (dev.name, dev.kind, dev.transport, dev.serial) == ("vda", "disk", "virtio", "overlayblk")
    assert dev.model == ""


def test_loop_device_parent_is_the_disk_holding_its_backing_file(writable_tree: Path) -> None:
    image = writable_tree / "host" / "var" / "lib" / "ceph-images" / "osd0.img"
    map_st_dev_to(writable_tree, image, "block/sdc/sdc1")
    dev = resolver(writable_tree).resolve("/var/lib/ceph/osd/ceph-4/block").device
    assert dev is not None
    assert (dev.name, dev.kind, dev.transport) == ("loop0", "loop", "loop")
    assert dev.backing_file == "/var/lib/ceph-images/osd0.img"
    assert dev.parent == "sdc"
    assert dev.rotational == "0"  # the loop's own flag (what Ceph sees), not sdc's
    assert dev.model == "" and dev.serial == ""


def test_unattached_loop_is_its_own_parent(tree: Path) -> None:
    dev = resolver(tree).resolve("/dev/loop1").device
    assert dev is not None
    assert (dev.name, dev.parent, dev.backing_file) == ("loop1", "loop1", "")


def test_file_on_a_filesystem_resolves_to_the_partition_under_it(
    writable_tree: Path, tmp_path: Path
) -> None:
    image = tmp_path / "osd.7.img"
    image.write_bytes(b"\0" * 4096)
    map_st_dev_to(writable_tree, image, "block/sdc/sdc1")
    res = resolver(writable_tree, host_root="/").resolve(str(image))
    assert res.access == "file"
    assert res.device is not None
    assert (res.device.name, res.device.parent, res.device.transport) == ("sdc1", "sdc", "sata")


def test_file_on_a_filesystem_without_block_device_says_why() -> None:
    res = DeviceResolver().resolve("/proc/self/status")  # procfs: st_dev major 0
    assert res.device is None
    assert res.access == "file"
    assert "without a block device" in res.reason


def test_missing_device_node_says_which(tree: Path) -> None:
    res = resolver(tree).resolve("/var/lib/ceph/osd/ceph-5/block")
    assert res.device is None
    assert res.chain == ("/var/lib/ceph/osd/ceph-5/block", "/dev/sdz")
    assert "sdz" in res.reason


@pytest.mark.parametrize("path", ["", "unknown"])
def test_no_path(tree: Path, path: str) -> None:
    res = resolver(tree).resolve(path)
    assert res.device is None and res.reason == "no path reported"


def test_symlink_loop_is_reported_not_followed_forever(writable_tree: Path) -> None:
    (writable_tree / "dev" / "a").symlink_to("b")
    (writable_tree / "dev" / "b").symlink_to("a")
    res = resolver(writable_tree).resolve("/dev/a")
    assert res.device is None
    assert "too many levels" in res.reason


def test_device_not_in_sysfs(tree: Path) -> None:
    assert resolver(tree).device("sdq") is None
    dev = resolver(tree).device("sdc1")
    assert dev is not None and dev.parent == "sdc"


def test_fixture_tree_is_what_build_tree_writes(tmp_path: Path) -> None:
    """The checked-in tree must be regenerated when build_tree.py changes."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("build_tree", FIXTURE.parent / "build_tree.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fresh = tmp_path / "fresh"
    module.build(str(fresh))

    def listing(root: Path) -> dict[str, str]:
        out = {}
        for dirpath, dirnames, filenames in os.walk(root):
            for name in dirnames + filenames:
                p = Path(dirpath) / name
                rel = str(p.relative_to(root))
                if p.is_symlink():
                    out[rel] = "-> " + os.readlink(p)
                elif p.is_file():
                    out[rel] = p.read_bytes().hex()
        return out

    assert listing(fresh) == listing(FIXTURE)
