"""Kernel drivers: `rbd-kernel` (krbd), `rbd-nbd`, `rbd-tcmu` (an RBD image as a block device,
XFS on it, mounted; fio makes its files there, as CBT does) and `cephfs-kernel` (the kernel
CephFS client). Each needs a kernel module on every client (/sys/module/<module>; the `ceph`
filesystem also in /proc/filesystems): a sweep naming one is refused before anything changes
when a client lacks it, naming the module and the client.

The commands they run are built here as argv lists; the device a map prints is taken only
when it is a device name of that driver (/dev/rbdN, /dev/nbdN, /dev/sdX).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from cephscope.runner.benchmarks.base import BenchmarkError
from cephscope.runner.endpoints.base import Client, Driver, Endpoint, EndpointSite
from cephscope.runner.endpoints.cephfs import CephfsFuseDriver
from cephscope.runner.endpoints.librbd import step_images
from cephscope.runner.endpoints.mounts import mount, unmount_all
from cephscope.runner.endpoints.settings import KERNEL_MODULES
from cephscope.runner.hostexec import HostExec, HostExecError

# krbd cannot map images with these features (CBT's default for rbd-kernel)
KRBD_DISABLED_FEATURES = ("deep-flatten", "fast-diff", "object-map")
DEVICE = {"rbd-kernel": re.compile(r"/dev/rbd[0-9]+"), "rbd-nbd": re.compile(r"/dev/nbd[0-9]+"),
          "rbd-tcmu": re.compile(r"/dev/sd[a-z]+")}
WWN = re.compile(r"naa\.[0-9a-f]+")
SCSI_ADDRESS = re.compile(r"[0-9]+:[0-9]+:[0-9]+")
SECONDS = 120.0


# ---- modules ------------------------------------------------------------------------------------

def missing_module(host: HostExec, module: str) -> bool:
    """Whether the client lacks the module (not loaded, not built in; for `ceph` also not a
    filesystem the kernel offers)."""
    try:
        if host.run(["test", "-d", f"/sys/module/{module}"], timeout=SECONDS,
                    check=False).returncode == 0:
            return False
        if module == "ceph":
            filesystems = host.run(["cat", "/proc/filesystems"], timeout=SECONDS).stdout.decode()
            return not any(line.split()[-1:] == ["ceph"] for line in filesystems.splitlines())
    except HostExecError:
        return True
    return True


def module_problems(drivers: Sequence[str], clients: Sequence[HostExec]) -> list[str]:
    """One line per (driver, client) whose kernel module is missing."""
    problems = []
    for driver in dict.fromkeys(drivers):
        module = KERNEL_MODULES.get(driver)
        if module is None:
            continue
        lacking = [h.name for h in clients if missing_module(h, module)]
        if lacking:
            problems.append(f"client_endpoints driver {driver} needs the kernel module "
                            f"{module!r}, missing on {', '.join(lacking)} (/sys/module/{module}"
                            f"{' and /proc/filesystems' if module == 'ceph' else ''}); "
                            f"nothing was changed")
    return problems


# ---- commands -----------------------------------------------------------------------------------

def rbd_map_argv(conf: str, client_id: str, pool: str, image: str,
                 keyring: str | None = None) -> list[str]:
    keyring_args = ["--keyring", keyring] if keyring else []
    return ["rbd", "-c", conf, "--id", client_id, *keyring_args, "device", "map",
            f"{pool}/{image}", "--options", "noshare"]


def rbd_unmap_argv(conf: str, client_id: str, device: str) -> list[str]:
    return ["rbd", "-c", conf, "--id", client_id, "device", "unmap", device]


def rbd_nbd_map_argv(conf: str, client_id: str, pool: str, image: str) -> list[str]:
    return ["rbd-nbd", "-c", conf, "--id", client_id, "map", f"{pool}/{image}"]


def rbd_nbd_unmap_argv(device: str) -> list[str]:
    return ["rbd-nbd", "unmap", device]


def tcmu_backstore_argv(pool: str, image: str, size_mib: int) -> list[str]:
    return ["targetcli", "/backstores/user:rbd", "create", f"cfgstring={pool}/{image}",
            f"name={image}", f"size={size_mib}M"]


def tcmu_loopback_argv() -> list[str]:
    return ["targetcli", "/loopback", "create"]


def tcmu_lun_argv(wwn: str, image: str) -> list[str]:
    return ["targetcli", f"/loopback/{wwn}/luns", "create", f"/backstores/user:rbd/{image}"]


def tcmu_remove_argvs(wwn: str | None, image: str) -> list[list[str]]:
    loopback = [["targetcli", "/loopback", "delete", wwn]] if wwn else []
    return [*loopback, ["targetcli", "/backstores/user:rbd", "delete", image]]


def mkfs_argv(device: str) -> list[str]:
    return ["mkfs.xfs", "-f", device]


def xfs_mount_argv(device: str, mountpoint: str) -> list[str]:
    return ["mount", "-t", "xfs", "-o", "noatime", device, mountpoint]


def ceph_mount_argv(conf: str, client_id: str, fs_name: str, mountpoint: str) -> list[str]:
    # mount.ceph finds the monitors and the key from the conf (and its keyring)
    return ["mount", "-t", "ceph", ":/", mountpoint, "-o",
            f"name={client_id},conf={conf},mds_namespace={fs_name}"]


def device_of(driver: str, output: str) -> str:
    """The device a map printed (its last word), or BenchmarkError when it is not one."""
    words = output.split()
    device = words[-1] if words else ""
    if not DEVICE[driver].fullmatch(device):
        raise BenchmarkError(f"{driver}: map printed {output.strip()[-200:]!r}, not a device")
    return device


# ---- drivers ------------------------------------------------------------------------------------

@dataclass
class Mapped:
    client: Client
    image: str
    device: str = ""
    wwn: str | None = None


class KernelBlockDriver(Driver):
    """An image per endpoint and client, mapped on the client, XFS made and mounted on it."""

    name: ClassVar[str] = "rbd-kernel"

    def __init__(self, site: EndpointSite) -> None:
        super().__init__(site)
        self.images = step_images(site)
        if site.spec.driver == "rbd-kernel" and not site.spec.disabled_features:
            self.images.disabled_features = KRBD_DISABLED_FEATURES
        self.mapped: list[Mapped] = []
        self.mounts: list[tuple[Client, str]] = []

    def _ids(self) -> tuple[str, str]:
        cluster = self.site.ctx.cluster
        return str(cluster.conf_path), cluster.client_id

    def map(self, client: Client, image: str) -> Mapped:
        conf, client_id = self._ids()
        driver, pool = self.site.spec.driver, self.images.pool
        mapped = Mapped(client, image)
        self.mapped.append(mapped)
        if driver == "rbd-kernel":
            keyring = self.site.ctx.cluster.keyring_path
            out = client.run(rbd_map_argv(conf, client_id, pool, image,
                                          str(keyring) if keyring else None), "rbd device map")
        elif driver == "rbd-nbd":
            out = client.run(rbd_nbd_map_argv(conf, client_id, pool, image), "rbd-nbd map",
                             env=self.env())
        else:
            out = self._tcmu_map(client, mapped)
        mapped.device = device_of(driver, out)
        return mapped

    def _tcmu_map(self, client: Client, mapped: Mapped) -> str:
        image, size = mapped.image, self.site.spec.endpoint_size_mib
        client.run(tcmu_backstore_argv(self.images.pool, image, size), "targetcli backstore")
        created = client.run(tcmu_loopback_argv(), "targetcli loopback")
        wwn = WWN.search(created)
        if wwn is None:
            raise BenchmarkError(f"targetcli printed no loopback WWN: {created.strip()[-200:]!r}")
        mapped.wwn = wwn.group(0)
        client.run(tcmu_lun_argv(mapped.wwn, image), "targetcli lun")
        address = client.run(["cat", f"/sys/kernel/config/target/loopback/{mapped.wwn}/tpgt_1/"
                                     "address"], "tcmu address").strip()
        if not SCSI_ADDRESS.fullmatch(address):
            raise BenchmarkError(f"tcmu: SCSI address {address!r} is not host:channel:target")
        block = client.run(["ls", f"/sys/class/scsi_disk/{address}:0/device/block"],
                           "tcmu block device").split()
        return f"/dev/{block[0]}" if block else ""

    def unmap(self, mapped: Mapped) -> str | None:
        conf, client_id = self._ids()
        driver = self.site.spec.driver
        try:
            if driver == "rbd-kernel" and mapped.device:
                mapped.client.run(rbd_unmap_argv(conf, client_id, mapped.device), "rbd unmap")
            elif driver == "rbd-nbd" and mapped.device:
                mapped.client.run(rbd_nbd_unmap_argv(mapped.device), "rbd-nbd unmap")
            elif driver == "rbd-tcmu":
                for argv in tcmu_remove_argvs(mapped.wwn, mapped.image):
                    mapped.client.run(argv, "targetcli delete")
        except BenchmarkError as exc:
            return str(exc)
        return None

    def create(self) -> None:
        site = self.site
        for client in site.clients:
            for index in range(site.spec.endpoints_per_client):
                self.images.create(site.image_name(client, index))
        for client in site.clients:
            for index in range(site.spec.endpoints_per_client):
                mapped = self.map(client, site.image_name(client, index))
                client.run(mkfs_argv(mapped.device), f"mkfs.xfs {mapped.device}")
                path = site.mountpoint(client, index)
                self.mounts.append((client, path))
                mount(site, client, path, xfs_mount_argv(mapped.device, path))

    def endpoints(self, client: Client) -> list[Endpoint]:
        return [Endpoint(client, i, "directory", path=self.site.mountpoint(client, i))
                for i in range(self.site.spec.endpoints_per_client)]

    def remove(self) -> list[str]:
        problems = unmount_all(self.site, self.mounts)
        self.mounts = []
        for mapped in list(self.mapped):
            problem = self.unmap(mapped)
            if problem is None:
                self.mapped.remove(mapped)
            else:
                problems.append(problem)
        return problems + self.images.remove_all()


class CephfsKernelDriver(CephfsFuseDriver):
    """A kernel CephFS mount per endpoint and client; a directory per endpoint in it."""

    name: ClassVar[str] = "cephfs-kernel"

    def mount_argv(self, fs_name: str, path: str) -> list[str]:
        cluster = self.site.ctx.cluster
        return ceph_mount_argv(str(cluster.conf_path), cluster.client_id, fs_name, path)


KERNEL_DRIVERS: dict[str, Callable[[EndpointSite], Driver]] = {
    "rbd-kernel": KernelBlockDriver, "rbd-nbd": KernelBlockDriver,
    "rbd-tcmu": KernelBlockDriver, "cephfs-kernel": CephfsKernelDriver,
}
