"""A dev cluster whose mon, mgr and OSDs run in podman containers, laid out as cephadm lays
out a cluster.

The daemons run from a release's image (`deploy/ceph_image.py`: a cached root filesystem
imported into podman) with the container flags, names, bind mounts and host paths cephadm uses
(read in cephadm 16.2.15's `CephContainer.run_cmd`, `get_container_mounts` and
`get_daemon_args`, Debian's /usr/sbin/cephadm; docs/deploy.md lists what is followed and what
is not):

    <root>/var/run/ceph/<fsid>/ceph-osd.N.asok     -> /var/run/ceph        (admin sockets)
    <root>/var/lib/ceph/<fsid>/osd.N               -> /var/lib/ceph/osd/ceph-N
    <root>/var/lib/ceph/<fsid>/osd.N/config        -> /etc/ceph/ceph.conf
    <root>/var/log/ceph/<fsid>                     -> /var/log/ceph
    <root>/var/lib/ceph/<fsid>/crash               -> /var/lib/ceph/crash

`<root>` is `/` on a machine that is the cluster's, or a directory of the caller's (tests) so
that nothing outside it is touched; every cluster has a fresh fsid. Containers are named
`ceph-<fsid>-<type>-<id>` and run `--net=host --ipc=host --init` (a private pid namespace), OSDs
`--privileged --group-add=disk` with /dev and /sys bound in; the daemons run in the foreground
as the image's `ceph` user. OSDs are BlueStore on loop devices (`--bluestore-block-path
/dev/loopN`, seen through the bound /dev). The admin's conf and keyring live in
`<root>/var/lib/ceph/<fsid>/admin` (cephadm writes /etc/ceph: two clusters here must not share
it); admin commands run from the release's root filesystem (`deploy/placement.py`).

Teardown removes the containers by name, detaches the loop devices it attached (when they still
back its files) and removes the fsid's three directories.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cephscope.deploy.ceph_image import ceph_release_image
from cephscope.deploy.container import ULIMITS, ContainerError, Podman, tail_of
from cephscope.deploy.devconf import dev_global_settings, dev_osd_settings
from cephscope.deploy.placement import Release, release_command
from cephscope.deploy.procs import port_is_free
from cephscope.deploy.rootfs import release_spec, rootfs_path
from cephscope.monclient import PgWaitTimeout, wait_pgs_active_clean

STATE_FILE = "cephscope-cluster.json"
SUN_PATH_MAX = 107  # Linux sockaddr_un path, without its NUL
MON_ID = "a"
MGR_ID = "x"
MSGR_PORT_OFFSET = 10
MSGR_PORT_SPAN = 90
# cephadm's per-daemon arguments (get_daemon_args): foreground, privileges dropped to ceph,
# logs to stderr (cephadm sends them to journald; here `podman logs`).
DAEMON_ARGS = ("-f", "--setuser", "ceph", "--setgroup", "ceph", "--default-log-to-file=false",
               "--default-log-to-stderr=true", "--default-log-stderr-prefix=debug ")
MON_ARGS = ("--default-mon-cluster-log-to-file=false", "--default-mon-cluster-log-to-stderr=true")


class ContainerClusterError(RuntimeError):
    """Something the user must fix; the message is one clear line."""


@dataclass
class LoopOsd:
    osd_id: int
    image: str
    loop_device: str | None


@dataclass
class ContainerClusterState:
    fsid: str
    root: str
    release: str
    image: str
    port_base: int
    osds: list[LoopOsd] = field(default_factory=list)

    @classmethod
    def load(cls, path: Path) -> ContainerClusterState:
        try:
            raw = json.loads(path.read_text())
            osds = [LoopOsd(**o) for o in raw.pop("osds", [])]
            return cls(**raw, osds=osds)
        except (OSError, ValueError, TypeError) as exc:
            raise ContainerClusterError(f"{path} is damaged ({exc})") from exc

    def save(self, path: Path) -> None:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2) + "\n")
        tmp.replace(path)


def container_name(fsid: str, daemon: str) -> str:
    """cephadm's container name: `ceph-<fsid>-osd-3` for osd.3 (dots become dashes)."""
    kind, _, ident = daemon.partition(".")
    return f"ceph-{fsid}-{kind}-{ident}"


def daemon_conf(fsid: str, port_base: int, osd_size_gib: int, class_dir: str | None) -> str:
    """The conf every daemon reads at /etc/ceph/ceph.conf: all paths are Ceph's defaults inside
    the container (the bind mounts put them at cephadm's host paths)."""
    low = port_base + MSGR_PORT_OFFSET
    return f"""\
# Written by cephscope's container dev cluster (cephadm's layout).
[global]
fsid = {fsid}
mon_host = v2:127.0.0.1:{port_base}
public_network = 127.0.0.1/32
public_addr = 127.0.0.1
ms_bind_msgr1 = false
ms_bind_port_min = {low}
ms_bind_port_max = {low + MSGR_PORT_SPAN - 1}
auth_cluster_required = cephx
auth_service_required = cephx
auth_client_required = cephx
osd_pool_default_size = 1
{dev_global_settings(chooseleaf=0)}
[mon]
auth_allow_insecure_global_id_reclaim = false

[osd]
{dev_osd_settings(osd_size_gib)}{f"osd_class_dir = {class_dir}" if class_dir else ""}
"""


class ContainerCluster:
    """One containerised dev cluster: 1 mon, 1 mgr, N loop-device OSDs."""

    bench_pool = "cephscope-bench"

    def __init__(self, root: Path | str, podman: Podman, release: str = "tentacle",
                 port_base: int = 17500, num_osds: int = 2, osd_size_gib: int = 4,
                 fsid: str | None = None,
                 log: Callable[[str], None] = lambda msg: print(msg, flush=True)) -> None:
        self.root = Path(root).resolve()
        self.podman = podman
        self.release_name = release
        self.spec = release_spec(release)
        self.release = Release(release, rootfs_path(release))
        self.port_base = port_base
        self.num_osds = num_osds
        self.osd_size_gib = osd_size_gib
        self.fsid = fsid or str(uuid.uuid4())
        self._log = log
        self.image = ""
        if self.state_file.exists():
            state = ContainerClusterState.load(self.state_file)
            self.image, self.port_base = state.image, state.port_base

    # ---- cephadm's host paths ----------------------------------------------------------------

    @property
    def asok_root(self) -> Path:
        """What the exporter is pointed at (`--ceph.asok-dir`): one level above the fsid."""
        return self.root / "var/run/ceph"

    @property
    def run_dir(self) -> Path:
        return self.asok_root / self.fsid

    @property
    def data_dir(self) -> Path:
        return self.root / "var/lib/ceph" / self.fsid

    @property
    def log_dir(self) -> Path:
        return self.root / "var/log/ceph" / self.fsid

    @property
    def admin_dir(self) -> Path:
        return self.data_dir / "admin"

    @property
    def conf_path(self) -> Path:
        return self.admin_dir / "ceph.conf"

    @property
    def admin_keyring(self) -> Path:
        return self.admin_dir / "ceph.client.admin.keyring"

    @property
    def state_file(self) -> Path:
        return self.data_dir / STATE_FILE

    def daemon_dir(self, daemon: str) -> Path:
        return self.data_dir / daemon

    def osd_asok(self, osd_id: int) -> Path:
        return self.run_dir / f"ceph-osd.{osd_id}.asok"

    def container_name(self, daemon: str) -> str:
        return container_name(self.fsid, daemon)

    def osd_ids(self) -> list[int]:
        return [o.osd_id for o in ContainerClusterState.load(self.state_file).osds]

    # ---- admin commands (the release's own tools, on the host) ----------------------------

    def admin_command(self, argv: Sequence[str]) -> list[str]:
        return release_command(self.release, argv, [self.data_dir])

    def ceph_argv(self, *args: str) -> list[str]:
        return self.admin_command(["ceph", "-c", str(self.conf_path), "--connect-timeout", "15",
                                   *args])

    def _run(self, argv: Sequence[str], timeout: float = 60,
             input_bytes: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
        try:
            proc = subprocess.run(argv, capture_output=True, timeout=timeout, input=input_bytes,
                                  check=False)
        except subprocess.TimeoutExpired as exc:
            raise ContainerClusterError(f"{' '.join(argv[-6:])} timed out after {timeout:.0f}s") from exc
        if proc.returncode != 0:
            raise ContainerClusterError(f"{' '.join(argv[-8:])} failed ({proc.returncode}): "
                                        f"{tail_of(proc.stderr)}")
        return proc

    def ceph(self, *args: str, timeout: float = 60, input_bytes: bytes | None = None) -> str:
        return self._run(self.ceph_argv(*args), timeout, input_bytes).stdout.decode()

    def ceph_json(self, *args: str, timeout: float = 60) -> Any:
        out = self.ceph(*args, "--format", "json", timeout=timeout)
        return json.loads(out) if out.strip() else None

    def _tool(self, *argv: str) -> str:
        return self._run(self.admin_command(argv)).stdout.decode()

    # ---- containers ------------------------------------------------------------------------

    def _mounts(self, daemon: str, no_config: bool = False) -> list[str]:
        """cephadm's get_container_mounts for a mon, mgr or OSD."""
        kind, _, ident = daemon.partition(".")
        own = self.daemon_dir(daemon)
        mounts = [f"{self.run_dir}:/var/run/ceph:z", f"{self.log_dir}:/var/log/ceph:z",
                  f"{self.data_dir / 'crash'}:/var/lib/ceph/crash:z",
                  f"{own}:/var/lib/ceph/{kind}/ceph-{ident}:z"]
        if not no_config:
            mounts.append(f"{own / 'config'}:/etc/ceph/ceph.conf:z")
        if kind in ("mon", "osd"):
            mounts.append("/dev:/dev")
            # No udevd here (/run/udev absent): cephadm binds it when it exists.
            if Path("/run/udev").is_dir():
                mounts.append("/run/udev:/run/udev")
        if kind == "osd":
            mounts.append("/sys:/sys")
        return [arg for m in mounts for arg in ("--volume", m)]

    def _container_args(self, daemon: str, name: str | None,
                         extra_mounts: Sequence[str] = (), no_config: bool = False) -> list[str]:
        """cephadm's CephContainer.run_cmd flags. No --pid=host: cephadm does not pass it for
        Ceph daemons, and podman refuses it with --init (its own PID 1). The exporter on the
        host still sees the daemon's host pid: SO_PEERCRED translates it."""
        kind = daemon.partition(".")[0]
        args = ["--ipc=host", "--stop-signal=SIGTERM", "--net=host",
                "--entrypoint", f"/usr/bin/ceph-{kind}", "--init",
                "--env", f"CONTAINER_IMAGE={self.image}",
                "--env", f"NODE_NAME={os.uname().nodename}",
                "--env", "CEPH_USE_RANDOM_NONCE=1",
                *(f"--ulimit={u}" for u in ULIMITS)]
        if kind == "osd":
            args += ["--privileged", "--group-add=disk"]
        if name:
            args += ["--name", name]
        return (args + self._mounts(daemon, no_config)
                + [arg for m in extra_mounts for arg in ("--volume", m)])

    def _podman(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[bytes]:
        try:
            proc = self.podman.run(*args, timeout=timeout)
        except ContainerError as exc:
            raise ContainerClusterError(str(exc)) from exc
        if proc.returncode != 0:
            raise ContainerClusterError(f"podman {' '.join(args[:1])} failed: "
                                        f"{tail_of(proc.stdout + proc.stderr)}")
        return proc

    def _once(self, daemon: str, *argv: str, extra_mounts: Sequence[str] = (),
              no_config: bool = False, timeout: float = 300) -> None:
        """A one-off run of the daemon's binary in its container setup (mkfs), as cephadm does."""
        self._podman("run", "--rm", *self._container_args(daemon, None, extra_mounts, no_config),
                     self.image, *argv, timeout=timeout)

    def _start(self, daemon: str) -> None:
        kind = daemon.partition(".")[0]
        extra = MON_ARGS if kind == "mon" else ()
        self._podman("run", "--detach", *self._container_args(daemon, self.container_name(daemon)),
                     self.image, "-n", daemon, *DAEMON_ARGS, *extra)

    def _remove(self, daemon: str) -> None:
        self.podman.remove(self.container_name(daemon))

    def _ceph_ids(self) -> tuple[int, int]:
        """The image's ceph user (cephadm's extract_uid_gid reads it from the image too)."""
        for line in (self.release.root / "etc/passwd").read_text().splitlines():  # type: ignore[operator]
            fields = line.split(":")
            if fields[0] == "ceph":
                return int(fields[2]), int(fields[3])
        raise ContainerClusterError(f"no ceph user in {self.release.root}/etc/passwd")

    def _chown_tree(self, path: Path, uid: int, gid: int) -> None:
        for dirpath, _dirs, files in os.walk(path):
            os.chown(dirpath, uid, gid)
            for name in files:
                os.chown(os.path.join(dirpath, name), uid, gid)

    # ---- up ----------------------------------------------------------------------------------

    def up(self) -> float:
        """Create the cluster; return seconds until HEALTH_OK. On failure, remove what was made."""
        started = time.monotonic()
        if self.state_file.exists():
            raise ContainerClusterError(f"a cluster {self.fsid} already exists under {self.root}")
        # The daemons bind short paths inside their containers; clients on the host connect
        # to the long host path, which must fit in sockaddr_un.sun_path.
        longest = str(self.run_dir / "ceph-osd.9999.asok")
        if len(longest.encode()) > SUN_PATH_MAX:
            raise ContainerClusterError(f"admin socket paths under {self.root} would exceed "
                                        f"{SUN_PATH_MAX} bytes ({longest}); use a shorter root")
        low = self.port_base + MSGR_PORT_OFFSET
        busy = [p for p in (self.port_base, *range(low, low + MSGR_PORT_SPAN)) if not port_is_free(p)]
        if busy:
            raise ContainerClusterError(f"ports in use on 127.0.0.1: {busy[:8]}; pick another port base")
        try:
            self.image = ceph_release_image(self.podman, self.release_name, log=self._log)
        except ContainerError as exc:
            raise ContainerClusterError(str(exc)) from exc
        try:
            self._create()
            self.wait_health_ok()
        except BaseException:
            self._log("container cluster: bootstrap failed; removing what it created")
            self.purge()
            raise
        return time.monotonic() - started

    def _create(self) -> None:
        for d in (self.run_dir, self.log_dir, self.data_dir / "crash", self.admin_dir,
                  self.data_dir / "loop"):
            d.mkdir(parents=True, exist_ok=True)
        state = ContainerClusterState(self.fsid, str(self.root), self.release_name, self.image,
                                      self.port_base)
        state.save(self.state_file)
        uid, gid = self._ceph_ids()
        class_dirs = sorted(self.release.root.glob("usr/lib/*/rados-classes"))  # type: ignore[union-attr]
        conf = daemon_conf(self.fsid, self.port_base, self.osd_size_gib,
                           "/" + str(class_dirs[0].relative_to(self.release.root)) if class_dirs else None)
        self.conf_path.write_text(
            f"[global]\nfsid = {self.fsid}\nmon_host = v2:127.0.0.1:{self.port_base}\n"
            f"keyring = {self.admin_keyring}\nadmin_socket =\nlog_file =\n")
        t0 = time.monotonic()
        self._bootstrap_mon(conf, uid, gid)
        self._log(f"container cluster: mon up ({time.monotonic() - t0:.1f}s)")
        mgr_dir = self.daemon_dir(f"mgr.{MGR_ID}")
        mgr_dir.mkdir()
        (mgr_dir / "config").write_text(conf)
        self.ceph("auth", "get-or-create", f"mgr.{MGR_ID}", "mon", "allow profile mgr", "osd",
                  "allow *", "mds", "allow *", "-o", str(mgr_dir / "keyring"))
        self._chown_tree(mgr_dir, uid, gid)
        self._start(f"mgr.{MGR_ID}")
        self._create_osds(state, conf, uid, gid)
        self._log(f"container cluster: {self.num_osds} OSDs up ({time.monotonic() - t0:.1f}s)")
        self.ceph("osd", "pool", "create", self.bench_pool, "16", "16", "replicated")
        self.ceph("osd", "pool", "application", "enable", self.bench_pool, "rados")

    def _bootstrap_mon(self, conf: str, uid: int, gid: int) -> None:
        mon_dir = self.daemon_dir(f"mon.{MON_ID}")
        mon_dir.mkdir()
        # cephadm's create_mon: the seeds come in from outside the (empty) mon dir, and mkfs
        # reads no conf (`-c /dev/null`); ceph-mon --mkfs refuses a non-empty dir.
        seed = self.data_dir / "mon-seed"
        seed.mkdir()
        self._tool("ceph-authtool", "--create-keyring", str(seed / "keyring"), "--gen-key",
                   "-n", "mon.", "--cap", "mon", "allow *")
        self._tool("ceph-authtool", "--create-keyring", str(self.admin_keyring), "--gen-key",
                   "-n", "client.admin", "--cap", "mon", "allow *", "--cap", "osd", "allow *",
                   "--cap", "mds", "allow *", "--cap", "mgr", "allow *", *self.spec.admin_key_args)
        self._tool("ceph-authtool", str(seed / "keyring"), "--import-keyring",
                   str(self.admin_keyring))
        self._tool("monmaptool", "--create", "--fsid", self.fsid, "--addv", MON_ID,
                   f"[v2:127.0.0.1:{self.port_base}]", *self.spec.monmap_args,
                   str(seed / "monmap"))
        self._chown_tree(seed, uid, gid)
        self._chown_tree(mon_dir, uid, gid)
        for d in (self.run_dir, self.log_dir, self.data_dir / "crash"):
            os.chown(d, uid, gid)
        self._once(f"mon.{MON_ID}", "--mkfs", "-i", MON_ID, "--fsid", self.fsid, "-c", "/dev/null",
                   "--monmap", "/tmp/seed/monmap", "--keyring", "/tmp/seed/keyring",
                   "--setuser", "ceph", "--setgroup", "ceph",
                   extra_mounts=[f"{seed}:/tmp/seed:z"], no_config=True)
        shutil.rmtree(seed)
        # ceph-mon --mkfs can exit 0 having refused to write anything.
        if not (mon_dir / "store.db").is_dir():
            raise ContainerClusterError(f"ceph-mon --mkfs wrote no store in {mon_dir}")
        (mon_dir / "config").write_text(conf)
        os.chown(mon_dir / "config", uid, gid)
        self._start(f"mon.{MON_ID}")

    def _attach_loop(self, image: Path, uid: int, gid: int) -> str:
        device = self._run(["losetup", "--find", "--show", str(image)]).stdout.decode().strip()
        name = Path(device).name
        with contextlib.suppress(OSError):  # an ssd-class device, as the dev cluster's
            Path(f"/sys/block/{name}/queue/rotational").write_text("0")
        # Ceph's udev rules (ceph-volume on LVM) hand an OSD's device to ceph.
        os.chown(device, uid, gid)
        return device

    def _create_osds(self, state: ContainerClusterState, conf: str, uid: int, gid: int) -> None:
        for _ in range(self.num_osds):
            osd_uuid = str(uuid.uuid4())
            secret = self._tool("ceph-authtool", "--gen-print-key").strip()
            osd_id = int(self.ceph("osd", "new", osd_uuid, "-i", "-",
                                   input_bytes=json.dumps({"cephx_secret": secret}).encode()).strip())
            data = self.daemon_dir(f"osd.{osd_id}")
            data.mkdir()
            (data / "config").write_text(conf)
            (data / "fsid").write_text(osd_uuid + "\n")
            self._tool("ceph-authtool", "--create-keyring", str(data / "keyring"), "--name",
                       f"osd.{osd_id}", "--add-key", secret)
            backing = self.data_dir / "loop" / f"osd.{osd_id}.img"
            with backing.open("wb") as fh:
                fh.truncate(self.osd_size_gib << 30)
            state.osds.append(LoopOsd(osd_id, str(backing), None))
            state.save(self.state_file)
            state.osds[-1].loop_device = self._attach_loop(backing, uid, gid)
            state.save(self.state_file)
            self._chown_tree(data, uid, gid)

        def mkfs_and_start(osd: LoopOsd) -> None:
            daemon = f"osd.{osd.osd_id}"
            self._once(daemon, "--mkfs", "-i", str(osd.osd_id), "--osd-uuid",
                       (self.daemon_dir(daemon) / "fsid").read_text().strip(),
                       "--bluestore-block-path", str(osd.loop_device),
                       "--setuser", "ceph", "--setgroup", "ceph")
            self._start(daemon)

        with ThreadPoolExecutor(max_workers=len(state.osds)) as pool:
            list(pool.map(mkfs_and_start, state.osds))
        self.wait_osds_up([o.osd_id for o in state.osds])
        ids = [f"osd.{o.osd_id}" for o in state.osds]
        with contextlib.suppress(ContainerClusterError):
            self.ceph("osd", "crush", "rm-device-class", *ids)
        self.ceph("osd", "crush", "set-device-class", "ssd", *ids)

    # ---- waiting -----------------------------------------------------------------------------

    def wait_osds_up(self, ids: Sequence[int], timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        up: set[int] = set()
        while True:
            with contextlib.suppress(ContainerClusterError, ValueError):
                dump = self.ceph_json("osd", "dump", timeout=20)
                up = {o["osd"] for o in dump["osds"] if o["up"] == 1}
                if set(ids) <= up:
                    return
            if time.monotonic() > deadline:
                first = self.container_name(f"osd.{ids[0]}")
                raise ContainerClusterError(f"OSDs {sorted(set(ids) - up)} not up after "
                                            f"{timeout:.0f}s (see podman logs {first})")
            time.sleep(0.5)

    def wait_health_ok(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        last: Any = None
        while True:
            with contextlib.suppress(ContainerClusterError, ValueError):
                last = self.ceph_json("health", timeout=20)
                if last.get("status") == "HEALTH_OK":
                    return
                for code, check in last.get("checks", {}).items():
                    if code in self.spec.muted_health_checks and not check.get("muted"):
                        self.ceph("health", "mute", code, "--sticky", timeout=20)
            if time.monotonic() > deadline:
                raise ContainerClusterError(f"no HEALTH_OK after {timeout:.0f}s: {last}")
            time.sleep(0.5)

    def wait_pgs_active_clean(self, timeout: float = 120) -> None:
        try:
            wait_pgs_active_clean(lambda: self.ceph_json("pg", "dump", "pgs", timeout=20),
                                  timeout, transient=(ContainerClusterError, ValueError))
        except PgWaitTimeout as exc:
            raise ContainerClusterError(str(exc)) from exc

    def container_pid(self, daemon: str) -> int:
        """The host pid of a daemon's container process (its --init's child is the daemon)."""
        out = self._podman("inspect", "--format", "{{.State.Pid}}",
                           self.container_name(daemon)).stdout.decode().strip()
        return int(out)

    # ---- teardown ----------------------------------------------------------------------------

    def purge(self) -> list[str]:
        """Remove our containers, detach our loop devices, remove the fsid's directories."""
        removed: list[str] = []
        state = None
        with contextlib.suppress(ContainerClusterError):
            if self.state_file.exists():
                state = ContainerClusterState.load(self.state_file)
        osds = state.osds if state else []
        daemons = [f"osd.{o.osd_id}" for o in osds] + [f"mgr.{MGR_ID}", f"mon.{MON_ID}"]
        with ThreadPoolExecutor(max_workers=len(daemons)) as pool:
            list(pool.map(self._remove, daemons))
        removed += [self.container_name(d) for d in daemons]
        for osd in osds:
            if osd.loop_device and self._detach_if_ours(osd):
                removed.append(osd.loop_device)
        for d in (self.run_dir, self.log_dir, self.data_dir):
            shutil.rmtree(d, ignore_errors=True)
        return removed

    def _detach_if_ours(self, osd: LoopOsd) -> bool:
        device = str(osd.loop_device)
        try:
            backing = Path(f"/sys/block/{Path(device).name}/loop/backing_file").read_text().strip()
        except OSError:
            return False
        if os.path.realpath(backing) != os.path.realpath(osd.image):
            self._log(f"container cluster: {device} now backs {backing}; leaving it alone")
            return False
        with contextlib.suppress(OSError):
            os.chown(device, 0, 6)  # back to root:disk, as udev made it
        with contextlib.suppress(ContainerClusterError):
            self._run(["losetup", "--detach", device])
            return True
        return False
