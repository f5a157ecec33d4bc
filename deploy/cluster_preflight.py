"""What `devcluster up` checks before it changes anything: the programs it will run (on this
machine, or in a release root), free ports, a state dir that is ours or empty, and which OSD
backing can be had here. Each failure is one line saying what to do."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from cephscope import host_commands
from cephscope.deploy.cluster_layout import ClusterLayout, DevClusterError
from cephscope.deploy.procs import port_is_free

# The programs the dev cluster runs (their packages: cephscope.host_commands).
REQUIRED_BINARIES = ("ceph-mon", "ceph-mgr", "ceph-osd", "ceph", "ceph-authtool", "monmaptool", "rbd",
                     "rados", "losetup")
# The MDS (--mds) and the gateway with its user (--rgw).
MDS_BINARIES = ("ceph-mds",)
RGW_BINARIES = ("radosgw", "radosgw-admin")
# Run on this machine whatever release the daemons are (a release root holds only Ceph).
HOST_TOOLS = ("losetup",)
# Namespace hosts: made with ip/unshare, entered with nsenter, reached over SSH like real hosts.
MULTI_HOST_TOOLS = ("ip", "unshare", "umount", "nsenter", "sshd", "ssh", "ssh-keygen",
                    "prometheus-node-exporter")
# Kernel AIO contexts a BlueStore OSD sets up: bdev_aio_max_queue_depth (1024) for its block
# device and as many again for BlueFS on it (2048 per OSD, measured). They are machine-wide:
# when `fs.aio-nr` would pass `fs.aio-max-nr`, `ceph-osd --mkfs` fails with EAGAIN or EIO.
AIO_CONTEXTS_PER_OSD = 2048


class ClusterPreflight:
    """The checks of `up` for the cluster laid out by `layout`; `loop_unavailable` says why
    loop devices cannot be used here (None: they can)."""

    def __init__(self, layout: ClusterLayout, loop_unavailable: Callable[[], str | None],
                 log: Callable[[str], None], proc_sys: Path = Path("/proc/sys")) -> None:
        self.layout = layout
        self._loop_unavailable = loop_unavailable
        self._log = log
        self._proc_sys = proc_sys

    def check_binaries(self) -> None:
        ceph_tools = [b for b in REQUIRED_BINARIES if b not in HOST_TOOLS]
        ceph_tools += [*(MDS_BINARIES if self.layout.mds else ()), *(RGW_BINARIES if self.layout.rgw else ())]
        host_tools = [*HOST_TOOLS, *(MULTI_HOST_TOOLS if self.layout.multi_host else ())]
        root = self.layout.release.root
        if root is not None:
            absent_in_root = sorted(
                binary for binary in ceph_tools
                if not any((root / d / binary).exists() for d in ("usr/bin", "usr/sbin"))
            )
            if absent_in_root:
                raise DevClusterError(f"release root {root} lacks {' '.join(absent_in_root)}; rebuild it")
            wanted = host_tools
        else:
            wanted = [*ceph_tools, *host_tools]
        absent = host_commands.missing(wanted)
        if absent:
            raise DevClusterError(
                host_commands.missing_packages_message(absent) + " (run `make setup` as root)"
            )

    def check_ports(self) -> None:
        ports = self.layout.ports()
        busy = [p for p in ports if not port_is_free(p)]
        if busy:
            raise DevClusterError(
                f"ports in use on 127.0.0.1: {', '.join(map(str, busy[:8]))}"
                f"{' …' if len(busy) > 8 else ''} (the dev cluster needs {ports[0]} and "
                f"{ports[1]}-{ports[-1]}; pick another --port-base)"
            )

    def check_aio_headroom(self) -> None:
        """The OSDs' kernel AIO contexts fit under `fs.aio-max-nr` with what is in use now (other
        clusters on this machine count): one clear line instead of a failed OSD mkfs."""
        try:
            in_use = int((self._proc_sys / "fs/aio-nr").read_text())
            limit = int((self._proc_sys / "fs/aio-max-nr").read_text())
        except (OSError, ValueError):
            return  # not Linux's /proc: nothing to say
        needed = self.layout.num_osds * AIO_CONTEXTS_PER_OSD
        if in_use + needed > limit:
            raise DevClusterError(
                f"kernel AIO contexts: {in_use} of fs.aio-max-nr={limit} are in use and "
                f"{self.layout.num_osds} OSDs need about {needed} more; stop another cluster or "
                f"raise the limit (sysctl -w fs.aio-max-nr={max(limit * 2, in_use + needed)})")

    def check_state_dir_is_ours_or_empty(self) -> None:
        state_dir = self.layout.state_dir
        if not state_dir.exists() or self.layout.state_file.exists():
            return
        contents = [p.name for p in state_dir.iterdir()]
        if contents:
            raise DevClusterError(
                f"{state_dir} is not empty and holds no dev cluster of ours "
                f"({', '.join(sorted(contents)[:5])}); choose an empty or new --state-dir"
            )

    def choose_backing(self) -> str:
        """"loop" or "file" for a new cluster, as `--backing` asks and this machine allows."""
        if self.layout.backing == "file":
            return "file"
        why_not = self._loop_unavailable()
        if why_not is None:
            return "loop"
        if self.layout.backing == "loop":
            raise DevClusterError(f"loop devices cannot be used here: {why_not}")
        self._log(f"devcluster: loop devices cannot be used ({why_not}); OSDs on plain files")
        return "file"
