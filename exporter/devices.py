"""Resolve a path an OSD uses (block device node, symlink, LV, or file) to a block device.

The result names the device exactly as the kernel's /proc/diskstats does (and hence as
node_exporter's ``node_disk_*{device}`` label does): ``nvme0n1``, ``sda1``, ``dm-3``,
``loop0``. That name is the device the I/O is accounted to; ``parent`` names the
physical whole disk(s) the I/O ends up on, so both can be joined with node_exporter:

* whole disk ``sda``        -> device ``sda``,   parent ``sda``
* partition ``sdb2``        -> device ``sdb2``,  parent ``sdb``
* LVM / device-mapper       -> device ``dm-N``,  parent = whole disks under its slaves
* loop device ``loop0``     -> device ``loop0``, parent = whole disk holding the backing file
* regular file on a fs      -> the block device holding the filesystem (st_dev)

Attributes (model, serial, wwn, transport, firmware) describe the device itself where the
kernel has them, else the parent disk(s) (partitions and LVs have no model of their own).
``rotational`` and the queue settings are the device's own (that is what Ceph sees).

Everything is read from sysfs, plus the udev database when one exists (``/run/udev/data``;
parsed directly so that tests can point it at a fixture tree — libudev cannot be redirected).
The /sys, /dev, /proc and /run roots are parameters; nothing here writes anywhere.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field

_NVME_NAMESPACE = re.compile(r"^nvme\d+(c\d+)?n\d+$")
# SCSI VPD page 0x80 (unit serial number): 4-byte header, then the serial (space padded).
_VPD80_HEADER = 4


@dataclass(frozen=True)
class BlockDevice:
    """One block device as diskstats names it, with what sysfs/udev say about it."""

    name: str
    kind: str  # disk | partition | dm | loop | md | other
    parent: str  # comma-joined whole physical disks the I/O ends up on
    model: str = ""
    serial: str = ""
    wwn: str = ""
    rotational: str = ""  # "0" / "1" / "" (unknown)
    transport: str = ""  # nvme, sata, sas, scsi, usb, virtio, loop, dm, md, ...
    firmware_rev: str = ""
    scheduler: str = ""
    nr_requests: int | None = None
    hw_queues: int | None = None
    size_bytes: int | None = None
    backing_file: str = ""  # loop devices only
    dm_name: str = ""  # device-mapper devices only (e.g. ceph--vg-osd--block--0)


@dataclass(frozen=True)
class Resolution:
    """Outcome of resolving one path: a device, or the reason there is none."""

    path: str
    device: BlockDevice | None
    access: str = ""  # blk (path is a device node) | file (path is a file on a fs)
    reason: str = ""  # why device is None; empty when resolved
    chain: tuple[str, ...] = field(default_factory=tuple)  # symlinks followed, for logs


class DeviceResolver:
    """Path -> BlockDevice against (possibly fixture) /sys, /dev roots and udev database."""

    def __init__(
        self,
        sys_root: str = "/sys",
        dev_root: str = "/dev",
        udev_data: str = "/run/udev/data",
        host_root: str = "/",
    ) -> None:
        self.sys_root = sys_root
        self.dev_root = dev_root
        # the udev database directory itself, as node_exporter's --path.udev.data
        self.udev_data = udev_data
        # Absolute paths outside /dev (OSD data dirs, backing files) are taken relative to
        # host_root; "/" on a real host, a fixture directory in tests.
        self.host_root = host_root

    def within(self, root: str) -> DeviceResolver:
        """The same resolver seen from another root filesystem: a daemon's own paths (its data
        dir, its /dev links) are read through ``/proc/<pid>/root`` when it runs in a container
        or chroot; sysfs and udev stay this host's, so names and major:minor are the host's."""
        return DeviceResolver(
            sys_root=self.sys_root,
            dev_root=os.path.join(root, "dev"),
            udev_data=self.udev_data,
            host_root=root,
        )

    # -- public ---------------------------------------------------------------------------

    def resolve(self, path: str) -> Resolution:
        """Resolve `path` (as written in OSD metadata or an OSD data dir) to a device."""
        if not path or path == "unknown":
            return Resolution(path, None, reason="no path reported")
        local, chain, err = self._follow_links(path)
        if err:
            return Resolution(path, None, reason=err, chain=chain)
        try:
            st = os.stat(local)
        except OSError as exc:
            # Fixture trees (and hosts without devtmpfs access) may lack the node itself:
            # a /dev/<name> whose name sysfs knows is still resolvable by name.
            by_name = self._name_from_dev_path(local)
            if by_name:
                return self._finish(path, by_name, "blk", chain)
            return Resolution(path, None, reason=f"{local}: {exc.strerror}", chain=chain)
        if stat.S_ISBLK(st.st_mode):
            name = self._name_from_devnum(os.major(st.st_rdev), os.minor(st.st_rdev))
            if name is None:
                name = self._name_from_dev_path(local)
            if name is None:
                return Resolution(
                    path,
                    None,
                    reason=(
                        f"block device {os.major(st.st_rdev)}:{os.minor(st.st_rdev)} "
                        f"not found under {self.sys_root}/dev/block"
                    ),
                    chain=chain,
                )
            return self._finish(path, name, "blk", chain)
        if stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode):
            major, minor = os.major(st.st_dev), os.minor(st.st_dev)
            name = self._name_from_devnum(major, minor)
            if name is None:
                return Resolution(
                    path,
                    None,
                    access="file",
                    reason=(
                        f"file on a filesystem without a block device (st_dev {major}:{minor}, "
                        "e.g. tmpfs/overlay/network fs)"
                    ),
                    chain=chain,
                )
            return self._finish(path, name, "file", chain)
        return Resolution(path, None, reason=f"{local}: neither a block device nor a file", chain=chain)

    def device(self, name: str) -> BlockDevice | None:
        """Describe the block device `name` (a diskstats name), or None if sysfs lacks it."""
        if not os.path.isdir(self._class_block(name)):
            return None
        return self._describe(name)

    # -- path handling ----------------------------------------------------------------------

    def queue_devices(self, name: str) -> list[str]:
        """The devices whose request queue serves I/O on `name` (read-ahead, scheduler, …):
        a partition's disk, a device-mapper device's underlying devices (recursively), and
        anything else itself — a loop device too (its backing file's disk has its own queue)."""
        return self._queue_devices(name, 0)

    def _queue_devices(self, name: str, depth: int) -> list[str]:
        disk = self._whole_disk(name)
        try:
            slaves = sorted(os.listdir(os.path.join(self.sys_root, "block", disk, "slaves")))
        except OSError:
            slaves = []
        if not slaves or depth > 16:
            return [disk]
        found: list[str] = []
        for slave in slaves:
            found += [d for d in self._queue_devices(slave, depth + 1) if d not in found]
        return found

    def map_path(self, path: str) -> str:
        """Map an absolute host path into the configured roots."""
        for real, root in (("/dev", self.dev_root), ("/sys", self.sys_root)):
            if path == real or path.startswith(real + "/"):
                return root + path[len(real) :]
        if self.host_root in ("", "/"):
            return path
        return os.path.join(self.host_root, path.lstrip("/"))

    def _unmap(self, local: str) -> str:
        """Inverse of map_path for log messages and for matching /dev/<name>."""
        for real, root in (("/dev", self.dev_root), ("/sys", self.sys_root)):
            if local == root or local.startswith(root.rstrip("/") + "/"):
                return real + local[len(root.rstrip("/")) :]
        if self.host_root not in ("", "/") and local.startswith(self.host_root.rstrip("/") + "/"):
            return local[len(self.host_root.rstrip("/")) :]
        return local

    def _follow_links(self, path: str) -> tuple[str, tuple[str, ...], str]:
        """Follow symlinks by hand so absolute targets (/dev/..) land inside the roots."""
        local = self.map_path(path) if os.path.isabs(path) else path
        chain: list[str] = [path]
        for _ in range(40):
            if not os.path.islink(local):
                return local, tuple(chain), ""
            try:
                target = os.readlink(local)
            except OSError as exc:
                return local, tuple(chain), f"{self._unmap(local)}: {exc.strerror}"
            if os.path.isabs(target):
                local = self.map_path(target)
            else:
                local = os.path.normpath(os.path.join(os.path.dirname(local), target))
            chain.append(self._unmap(local))
        return local, tuple(chain), f"{path}: too many levels of symbolic links"

    def _name_from_devnum(self, major: int, minor: int) -> str | None:
        link = os.path.join(self.sys_root, "dev", "block", f"{major}:{minor}")
        if not os.path.exists(link):
            return None
        return os.path.basename(os.path.realpath(link))

    def _name_from_dev_path(self, local: str) -> str | None:
        """`/dev/sda1` -> sda1, `/dev/mapper/vg-lv` -> dm-N, by name only."""
        dev_path = self._unmap(local)
        if not dev_path.startswith("/dev/"):
            return None
        rel = dev_path[len("/dev/") :]
        if rel.startswith("mapper/"):
            return self._dm_by_name(rel[len("mapper/") :])
        if "/" not in rel and os.path.isdir(self._class_block(rel)):
            return rel
        if rel.count("/") == 1:
            # /dev/<vg>/<lv>: device-mapper name doubles dashes inside vg and lv names.
            vg, lv = rel.split("/")
            return self._dm_by_name(f"{vg.replace('-', '--')}-{lv.replace('-', '--')}")
        return None

    def _dm_by_name(self, dm_name: str) -> str | None:
        block = os.path.join(self.sys_root, "block")
        try:
            names = sorted(os.listdir(block))
        except OSError:
            return None
        for name in names:
            if name.startswith("dm-") and _read(os.path.join(block, name, "dm", "name")) == dm_name:
                return name
        return None

    # -- sysfs description ---------------------------------------------------------------------

    def _class_block(self, name: str) -> str:
        return os.path.join(self.sys_root, "class", "block", name)

    def _finish(self, path: str, name: str, access: str, chain: tuple[str, ...]) -> Resolution:
        if not os.path.isdir(self._class_block(name)):
            return Resolution(
                path, None, access=access, reason=f"{name}: not in {self.sys_root}/class/block",
                chain=chain,
            )
        return Resolution(path, self._describe(name), access=access, chain=chain)

    def _whole_disk(self, name: str) -> str:
        """Partition -> its disk (the sysfs directory above it); anything else -> itself."""
        node = os.path.realpath(self._class_block(name))
        if os.path.exists(os.path.join(node, "partition")):
            return os.path.basename(os.path.dirname(node))
        return name

    def _physical_disks(self, name: str, depth: int = 0) -> list[str]:
        """Whole disks the I/O on `name` ends up on (through dm slaves and loop backing)."""
        if depth > 16:
            return []
        disk = self._whole_disk(name)
        slaves_dir = os.path.join(self.sys_root, "block", disk, "slaves")
        try:
            slaves = sorted(os.listdir(slaves_dir))
        except OSError:
            slaves = []
        if slaves:
            found: list[str] = []
            for slave in slaves:
                for d in self._physical_disks(slave, depth + 1):
                    if d not in found:
                        found.append(d)
            return found
        if disk.startswith("loop"):
            backing = _read(os.path.join(self.sys_root, "block", disk, "loop", "backing_file"))
            if backing:
                res = self.resolve(backing.removesuffix(" (deleted)"))
                if res.device is not None:
                    return res.device.parent.split(",")
            return [disk]
        return [disk]

    def _udev_properties(self, name: str) -> dict[str, str]:
        dev = _read(os.path.join(self._class_block(name), "dev"))
        if not dev:
            return {}
        props: dict[str, str] = {}
        for line in _read(os.path.join(self.udev_data, f"b{dev}")).splitlines():
            if line.startswith("E:") and "=" in line:
                key, _, value = line[2:].partition("=")
                props[key] = value
        return props

    def _kind(self, name: str) -> str:
        node = os.path.realpath(self._class_block(name))
        if os.path.exists(os.path.join(node, "partition")):
            return "partition"
        if name.startswith("dm-"):
            return "dm"
        if name.startswith("loop"):
            return "loop"
        if name.startswith("md"):
            return "md"
        return "disk"

    def _transport(self, disk: str) -> str:
        if _NVME_NAMESPACE.match(disk):
            return "nvme"
        for prefix, transport in (("loop", "loop"), ("dm-", "dm"), ("md", "md"), ("rbd", "rbd"),
                                  ("nbd", "nbd"), ("zram", "zram")):
            if disk.startswith(prefix):
                return transport
        props = self._udev_properties(disk)
        device_dir = os.path.join(self.sys_root, "block", disk, "device")
        subsystem = os.path.basename(os.path.realpath(os.path.join(device_dir, "subsystem")))
        if subsystem == "virtio":
            return "virtio"
        if subsystem in ("nvme", "nvme-subsystem"):
            return "nvme"
        sys_path = os.path.realpath(os.path.join(self.sys_root, "block", disk))
        if subsystem == "scsi" or "/host" in sys_path:
            if "/usb" in sys_path or props.get("ID_BUS") == "usb":
                return "usb"
            if re.search(r"/ata\d+/", sys_path) or props.get("ID_BUS") == "ata":
                return "sata"
            if "/end_device-" in sys_path or "/port-" in sys_path:
                return "sas"
            if "/virtio" in sys_path:
                return "virtio-scsi"
            return "scsi"
        return props.get("ID_BUS", "")

    def _disk_attributes(self, disk: str) -> dict[str, str]:
        """model/serial/wwn/firmware of one whole disk (udev first where it has them)."""
        props = self._udev_properties(disk)
        block = os.path.join(self.sys_root, "block", disk)
        device_dir = os.path.join(block, "device")
        model = props.get("ID_MODEL", "").replace("_", " ").strip() or _read(
            os.path.join(device_dir, "model")
        )
        serial = props.get("ID_SERIAL_SHORT", "") or _read(os.path.join(device_dir, "serial"))
        if not serial:
            serial = _read(os.path.join(block, "serial"))  # virtio-blk
        if not serial:
            serial = _vpd80_serial(os.path.join(device_dir, "vpd_pg80"))
        wwn = props.get("ID_WWN", "") or _read(os.path.join(block, "wwid")) or _read(
            os.path.join(device_dir, "wwid")
        )
        firmware = props.get("ID_REVISION", "") or _read(
            os.path.join(device_dir, "firmware_rev")
        ) or _read(os.path.join(device_dir, "rev"))
        return {"model": model, "serial": serial, "wwn": wwn, "firmware_rev": firmware}

    def _describe(self, name: str) -> BlockDevice:
        kind = self._kind(name)
        physical = self._physical_disks(name)
        own_disk = self._whole_disk(name)
        queue = os.path.join(self.sys_root, "block", own_disk, "queue")
        # Own attributes for whole disks; partitions and dm take their physical disks'.
        attr_sources = [own_disk] if kind in ("disk", "partition") else physical
        if kind == "loop":
            attr_sources = []
        attrs: dict[str, list[str]] = {"model": [], "serial": [], "wwn": [], "firmware_rev": []}
        transports: list[str] = []
        for disk in attr_sources:
            for key, value in self._disk_attributes(disk).items():
                if value and value not in attrs[key]:
                    attrs[key].append(value)
            transport = self._transport(disk)
            if transport and transport not in transports:
                transports.append(transport)
        if kind == "loop":
            transports = ["loop"]
        elif not transports:
            transports = [self._transport(own_disk)]
        scheduler_line = _read(os.path.join(queue, "scheduler"))
        selected = re.search(r"\[([^\]]+)\]", scheduler_line)
        size_sectors = _read_int(os.path.join(self._class_block(name), "size"))
        mq_dir = os.path.join(self.sys_root, "block", own_disk, "mq")
        try:
            hw_queues: int | None = len(os.listdir(mq_dir))
        except OSError:
            hw_queues = None
        return BlockDevice(
            name=name,
            kind=kind,
            parent=",".join(physical),
            model=",".join(attrs["model"]),
            serial=",".join(attrs["serial"]),
            wwn=",".join(attrs["wwn"]),
            rotational=_read(os.path.join(queue, "rotational")),
            transport=",".join(t for t in transports if t),
            firmware_rev=",".join(attrs["firmware_rev"]),
            scheduler=selected.group(1) if selected else scheduler_line,
            nr_requests=_read_int(os.path.join(queue, "nr_requests")),
            hw_queues=hw_queues,
            # sysfs "size" is always in 512-byte sectors, whatever the logical block size.
            size_bytes=size_sectors * 512 if size_sectors is not None else None,
            backing_file=_read(os.path.join(self.sys_root, "block", own_disk, "loop", "backing_file"))
            if kind == "loop"
            else "",
            dm_name=_read(os.path.join(self.sys_root, "block", own_disk, "dm", "name"))
            if kind == "dm"
            else "",
        )


def _read(path: str) -> str:
    """A sysfs attribute, stripped; "" when absent or unreadable (EINVAL on lo/speed...)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return ""


def _read_int(path: str) -> int | None:
    try:
        return int(_read(path))
    except ValueError:
        return None


def _vpd80_serial(path: str) -> str:
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError:
        return ""
    if len(raw) <= _VPD80_HEADER or raw[1] != 0x80:
        return ""
    length = int.from_bytes(raw[2:4], "big")
    return raw[_VPD80_HEADER : _VPD80_HEADER + length].decode("ascii", "replace").strip()
