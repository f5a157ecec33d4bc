"""A real single-host Ceph cluster from Debian's packages, on 127.0.0.1.

1 mon + 1 mgr + N BlueStore OSDs (loop devices, or plain files where loop devices cannot be
had), cephx on, an explicit port range, and all state (conf, keyrings, data, sockets, logs,
pids) under one state directory, so that two clusters with different state dirs and port bases
run side by side. `down` stops only the daemons whose pid files live in that state dir (and
whose command line names its ceph.conf) and detaches only the loop devices it attached.

Layout of the state dir:

    state.json            ports, fsid, OSD ids, backing of each OSD (what `down` undoes)
    ceph.conf, keyring    cluster conf (client.admin keyring path inside)
    mon/ mgr/ osd/        daemon data dirs
    blocks/osd.N.img      sparse backing files
    run/                  admin sockets and pid files
    log/                  daemon logs
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cephscope import host_commands
from cephscope.deploy.devconf import ConfNetwork, render_conf
from cephscope.deploy.hostdaemons import HostDaemons, ssh_reachable
from cephscope.deploy.hosts import (
    HOSTS_FILE,
    HostNetwork,
    HostNetworkError,
    HostPlan,
    plan_hosts,
)
from cephscope.deploy.placement import (
    HOST_RELEASE,
    DevHost,
    Placement,
    PlacementError,
    Release,
    this_machine,
)
from cephscope.deploy.procs import pid_alive, pid_file_locked, pid_from_file, port_is_free, terminate
from cephscope.deploy.rootfs import RootfsError, ceph_version_of, release_for, release_spec
from cephscope.monclient import PgWaitTimeout, wait_pgs_active_clean

STATE_FILE = "state.json"
MON_ID = "a"
MGR_ID = "x"
# ms_bind_port_min/max are base + these; the mon sits on the base port itself.
MSGR_PORT_OFFSET = 10
MSGR_PORT_SPAN = 90
# The programs the dev cluster runs (their packages: cephscope.host_commands).
REQUIRED_BINARIES = ("ceph-mon", "ceph-mgr", "ceph-osd", "ceph", "ceph-authtool", "monmaptool", "rbd",
                     "rados", "losetup")
# Run on this machine whatever release the daemons are (a release root holds only Ceph).
HOST_TOOLS = ("losetup",)
# Namespace hosts: made with ip/unshare, entered with nsenter, reached over SSH like real hosts.
MULTI_HOST_TOOLS = ("ip", "unshare", "umount", "nsenter", "sshd", "ssh", "ssh-keygen",
                    "prometheus-node-exporter")


class DevClusterError(RuntimeError):
    """Something the user must fix; the message is one clear line."""


def default_state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "cephscope" / "devcluster"


@dataclass
class OsdBacking:
    osd_id: int
    image: str
    loop_device: str | None  # /dev/loopN while attached; None for plain-file OSDs


@dataclass
class ClusterState:
    fsid: str
    port_base: int
    num_osds: int
    backing: str  # "loop" or "file"
    device_class: str
    osd_size_gib: int
    osds: list[OsdBacking] = field(default_factory=list)
    release: str = HOST_RELEASE.name
    hosts: int = 1
    clients: int = 0

    @classmethod
    def load(cls, path: Path) -> ClusterState:
        try:
            raw = json.loads(path.read_text())
            osds = [OsdBacking(**o) for o in raw.pop("osds", [])]
            return cls(**raw, osds=osds)
        except (OSError, ValueError, TypeError, AttributeError) as exc:
            raise DevClusterError(f"{path} is damaged ({exc})") from exc

    def save(self, path: Path) -> None:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2) + "\n")
        tmp.replace(path)


class DevCluster:
    """One dev cluster, identified by its state dir."""

    bench_pool = "cephscope-bench"
    rbd_pool = "rbd"
    rbd_image = "cephscope-img"
    rbd_image_size_mib = 2048

    def __init__(
        self,
        state_dir: Path | str | None = None,
        port_base: int = 17000,
        num_osds: int = 3,
        osd_size_gib: int = 10,
        backing: str = "auto",
        device_class: str = "ssd",
        log: Any = None,
        hosts: int = 1,
        clients: int = 0,
        public_subnet: str | None = None,
        cluster_subnet: str | None = None,
        release: str | None = None,
    ) -> None:
        self.state_dir = Path(state_dir or default_state_dir()).resolve()
        self.port_base = port_base
        self.num_osds = num_osds
        self.osd_size_gib = osd_size_gib
        self.backing = backing
        self.device_class = device_class
        self._log = log or (lambda msg: print(msg, flush=True))
        # Where each process runs and from which release (deploy/placement.py). The single-host
        # cluster runs everything on this machine from its own packages.
        self.admin_host: DevHost = this_machine()
        self.hosts: list[DevHost] = [self.admin_host]
        self.placement = Placement(self.state_dir)
        self.num_hosts = hosts
        self.num_clients = clients
        existing = self.state_dir / STATE_FILE
        if existing.exists():
            # The state dir's own record wins over constructor defaults (a damaged one is
            # reported by the command that needs it; `down` works without it).
            recorded_release: str | None = None
            with contextlib.suppress(DevClusterError):
                state = ClusterState.load(existing)
                self.port_base = state.port_base
                self.num_osds = state.num_osds
                self.osd_size_gib = state.osd_size_gib
                self.num_hosts = state.hosts
                self.num_clients = state.clients
                recorded_release = state.release
            if recorded_release is not None:
                if release not in (None, recorded_release):
                    raise DevClusterError(
                        f"the dev cluster in {self.state_dir} runs release {recorded_release}, "
                        f"not {release}"
                    )
                release = recorded_release
        # Another release runs from its root filesystem (deploy/rootfs.py, deploy/rootexec.py).
        try:
            self.release: Release = release_for(release)
        except RootfsError as exc:
            raise DevClusterError(str(exc)) from exc
        # A multi-host cluster: OSD hosts and clients are network namespaces (deploy/hosts.py).
        self.host_plan: HostPlan | None = None
        if (self.state_dir / HOSTS_FILE).exists():
            self.host_plan = HostPlan.load(self.state_dir / HOSTS_FILE)
        elif self.num_hosts > 1 or self.num_clients > 0:
            try:
                self.host_plan = plan_hosts(self.state_dir, self.num_hosts, self.num_clients,
                                            public_subnet, cluster_subnet)
            except HostNetworkError as exc:
                raise DevClusterError(str(exc)) from exc
        if self.host_plan is not None:
            self.hosts = [h.dev_host() for h in self.host_plan.osd_hosts]

    # ---- paths -----------------------------------------------------------------------------

    @property
    def conf_path(self) -> Path:
        return self.state_dir / "ceph.conf"

    @property
    def admin_keyring(self) -> Path:
        return self.state_dir / "keyring"

    @property
    def asok_dir(self) -> Path:
        return self.state_dir / "run"

    @property
    def log_dir(self) -> Path:
        return self.state_dir / "log"

    @property
    def state_file(self) -> Path:
        return self.state_dir / STATE_FILE

    @property
    def multi_host(self) -> bool:
        return self.host_plan is not None

    def asok_dir_of(self, host_name: str) -> Path:
        """Admin sockets of one host's daemons (a multi-host cluster keeps them per host, so
        each host's exporter sees its own daemons only, as on a real cluster)."""
        return self.asok_dir / host_name if self.multi_host else self.asok_dir

    @property
    def host_daemons(self) -> HostDaemons | None:
        if self.host_plan is None:
            return None
        return HostDaemons(self.state_dir, self.host_plan, self.conf_path,
                           self.asok_dir_of, log=self._log)

    @property
    def ssh_config(self) -> Path | None:
        """The ssh_config that names every host and client (multi-host clusters only)."""
        daemons = self.host_daemons
        return daemons.ssh_config if daemons else None

    @property
    def client_names(self) -> list[str]:
        return [h.name for h in self.host_plan.clients] if self.host_plan else []

    @property
    def mon_addr(self) -> str:
        return self.host_of(f"mon.{MON_ID}").public_addr

    @property
    def mon_port(self) -> int:
        return self.port_base

    @property
    def msgr_port_range(self) -> tuple[int, int]:
        low = self.port_base + MSGR_PORT_OFFSET
        return low, low + MSGR_PORT_SPAN - 1

    def osd_data(self, osd_id: int) -> Path:
        return self.state_dir / "osd" / f"ceph-{osd_id}"

    def osd_asok(self, osd_id: int) -> Path:
        return self.asok_dir_of(self.host_of(f"osd.{osd_id}").name) / f"ceph-osd.{osd_id}.asok"

    def pid_file(self, daemon: str) -> Path:
        return self.asok_dir / f"{daemon}.pid"

    def load_state(self) -> ClusterState:
        if not self.state_file.exists():
            raise DevClusterError(f"no dev cluster in {self.state_dir} (no {STATE_FILE})")
        return ClusterState.load(self.state_file)

    def osd_ids(self) -> list[int]:
        return [o.osd_id for o in self.load_state().osds]

    # ---- command helpers -------------------------------------------------------------------

    def host_of(self, daemon: str) -> DevHost:
        """The host a daemon ("mon.a", "osd.3") runs on: mon and mgr on the first host, OSDs
        round-robin across hosts."""
        kind, _, ident = daemon.partition(".")
        if kind == "osd":
            return self.hosts[int(ident) % len(self.hosts)]
        return self.hosts[0]

    def admin_command(self, argv: Sequence[str]) -> list[str]:
        """The argv that runs a client tool of this cluster's release from the admin host."""
        return self.placement.command(self.admin_host, self.release, argv)

    def ceph_argv(self, *args: str) -> list[str]:
        return self.admin_command(["ceph", "-c", str(self.conf_path), "--connect-timeout", "15", *args])

    def rados_argv(self, *args: str) -> list[str]:
        return self.admin_command(["rados", "-c", str(self.conf_path), *args])

    def rbd_argv(self, *args: str) -> list[str]:
        return self.admin_command(["rbd", "-c", str(self.conf_path), *args])

    def env(self) -> dict[str, str]:
        """Environment for tools that read CEPH_CONF (fio's rbd engine)."""
        return {**os.environ, "CEPH_CONF": str(self.conf_path)}

    def _run_on(
        self,
        host: DevHost,
        argv: Sequence[str],
        timeout: float = 60,
        input_bytes: bytes | None = None,
    ) -> subprocess.CompletedProcess[bytes]:
        """Run a command of this cluster's release on `host` (the one way processes start)."""
        try:
            return self.placement.run(host, self.release, argv, timeout=timeout, input_bytes=input_bytes)
        except PlacementError as exc:
            raise DevClusterError(str(exc)) from exc

    def _run(
        self, argv: Sequence[str], timeout: float = 60, input_bytes: bytes | None = None
    ) -> subprocess.CompletedProcess[bytes]:
        """Run a command of this cluster's release on the admin host."""
        return self._run_on(self.admin_host, argv, timeout=timeout, input_bytes=input_bytes)

    def _run_here(self, argv: Sequence[str], timeout: float = 60) -> subprocess.CompletedProcess[bytes]:
        """Run one of this machine's own tools (losetup) outside any namespace or release root."""
        try:
            return self.placement.run(self.admin_host, HOST_RELEASE, argv, timeout=timeout)
        except PlacementError as exc:
            raise DevClusterError(str(exc)) from exc

    def _ceph_cmd(self, *args: str) -> list[str]:
        return ["ceph", "-c", str(self.conf_path), "--connect-timeout", "15", *args]

    def ceph_json(self, *args: str, timeout: float = 60) -> Any:
        out = self._run(self._ceph_cmd(*args, "--format", "json"), timeout=timeout).stdout
        return json.loads(out) if out.strip() else None

    def ceph(self, *args: str, timeout: float = 60) -> str:
        return self._run(self._ceph_cmd(*args), timeout=timeout).stdout.decode()

    # ---- preflight -------------------------------------------------------------------------

    def _check_binaries(self) -> None:
        ceph_tools = [b for b in REQUIRED_BINARIES if b not in HOST_TOOLS]
        host_tools = [*HOST_TOOLS, *(MULTI_HOST_TOOLS if self.multi_host else ())]
        if self.release.root is not None:
            root = self.release.root
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

    def _check_ports(self) -> None:
        low, high = self.msgr_port_range
        busy = [p for p in [self.mon_port, *range(low, high + 1)] if not port_is_free(p)]
        if busy:
            raise DevClusterError(
                f"ports in use on 127.0.0.1: {', '.join(map(str, busy[:8]))}"
                f"{' …' if len(busy) > 8 else ''} (the dev cluster needs {self.mon_port} and "
                f"{low}-{high}; pick another --port-base)"
            )

    def _check_state_dir_is_ours_or_empty(self) -> None:
        if not self.state_dir.exists():
            return
        if self.state_file.exists():
            return
        contents = [p.name for p in self.state_dir.iterdir()]
        if contents:
            raise DevClusterError(
                f"{self.state_dir} is not empty and holds no dev cluster of ours "
                f"({', '.join(sorted(contents)[:5])}); choose an empty or new --state-dir"
            )

    def _can_use_loop_devices(self) -> str | None:
        """None when a loop device can be attached here, else why not."""
        if not shutil.which("losetup"):
            return "losetup not found"
        if not Path("/dev/loop-control").exists():
            return "/dev/loop-control does not exist"
        if not os.access("/dev/loop-control", os.R_OK | os.W_OK):
            return "no permission to use /dev/loop-control"
        return None

    # ---- daemon processes ------------------------------------------------------------------

    def _daemon_pid(self, daemon: str) -> int | None:
        """The pid of one of our daemons if it runs: pid file here AND cmdline names our conf."""
        return pid_from_file(self.pid_file(daemon), str(self.conf_path))

    def osd_pid(self, osd_id: int) -> int | None:
        return self._daemon_pid(f"osd.{osd_id}")

    def _daemon_names(self) -> list[str]:
        names = [f"mon.{MON_ID}", f"mgr.{MGR_ID}"]
        if self.state_file.exists():
            names += [f"osd.{i}" for i in self.osd_ids()]
        return names

    def running_daemons(self) -> dict[str, int]:
        return {name: pid for name in self._daemon_names() if (pid := self._daemon_pid(name))}

    def _start_daemon(self, kind: str, ident: str, env: Mapping[str, str] | None = None) -> None:
        binary = {"mon": "ceph-mon", "mgr": "ceph-mgr", "osd": "ceph-osd"}[kind]
        # `env K=V … binary`: the environment reaches the daemon wherever placement runs it
        # (a namespace, a release root), without a shell
        with_env = ["env", *(f"{k}={v}" for k, v in env.items())] if env else []
        # The daemons fork into the background themselves and write their pid files.
        for attempt in range(3):
            try:
                self._run_on(
                    self.host_of(f"{kind}.{ident}"),
                    [*with_env, binary, "-c", str(self.conf_path), "-i", ident,
                     *(self._osd_release_args() if kind == "osd" else [])],
                    timeout=120,
                )
                break
            except DevClusterError as exc:
                # The previous instance's last threads can hold the pid-file lock for a moment
                # after it was reaped.
                if "failed to lock pidfile" not in str(exc) or attempt == 2:
                    raise
                time.sleep(1)
        deadline = time.monotonic() + 30
        while self._daemon_pid(f"{kind}.{ident}") is None:
            if time.monotonic() > deadline:
                raise DevClusterError(
                    f"{kind}.{ident} did not start; see {self.log_dir}/ceph-{kind}.{ident}.log"
                )
            time.sleep(0.1)

    def _stop_daemon(self, daemon: str, timeout: float = 30) -> bool:
        pid = self._daemon_pid(daemon)
        if pid is None:
            return False
        terminate(pid, timeout, log=self._log)
        deadline = time.monotonic() + 10
        while pid_file_locked(self.pid_file(daemon)) and time.monotonic() < deadline:
            time.sleep(0.05)
        return True

    # ---- up --------------------------------------------------------------------------------

    def up(self) -> float:
        """Create (or start again) the cluster; return the seconds it took to reach HEALTH_OK."""
        started = time.monotonic()
        self._check_binaries()
        self._check_state_dir_is_ours_or_empty()
        if self.state_file.exists():
            running = self.running_daemons()
            if running:
                raise DevClusterError(
                    f"dev cluster in {self.state_dir} is already running ({', '.join(sorted(running))})"
                )
            self._check_ports()
            self._start_existing()
            self.wait_health_ok(timeout=120)
        else:
            self._check_ports()
            backing = self._choose_backing()
            try:
                self._create(backing)
                self.wait_health_ok(timeout=120)
            except BaseException:
                self._log("devcluster: bootstrap failed; removing what it created")
                self.down(quiet=True)
                self._remove_state_dir()
                raise
        return time.monotonic() - started

    def _choose_backing(self) -> str:
        if self.backing == "file":
            return "file"
        why_not = self._can_use_loop_devices()
        if why_not is None:
            return "loop"
        if self.backing == "loop":
            raise DevClusterError(f"loop devices cannot be used here: {why_not}")
        self._log(f"devcluster: loop devices cannot be used ({why_not}); OSDs on plain files")
        return "file"

    def _write_conf(self) -> None:
        network = None
        if self.host_plan is not None:
            asok_of = {f"mon.{MON_ID}": self.host_of(f"mon.{MON_ID}").name,
                       f"mgr.{MGR_ID}": self.host_of(f"mgr.{MGR_ID}").name}
            for osd_id in range(self.num_osds):
                asok_of[f"osd.{osd_id}"] = self.host_of(f"osd.{osd_id}").name
            network = ConfNetwork(self.host_plan.public_subnet, self.host_plan.cluster_subnet,
                                  {daemon: self.asok_dir_of(host) for daemon, host in asok_of.items()})
        self.conf_path.write_text(render_conf(
            self.state_dir, self._fsid, self.mon_addr, self.mon_port, self.msgr_port_range,
            self.osd_size_gib, network))

    def _create(self, backing: str) -> None:
        s = self.state_dir
        for sub in ("run", "log", "crash", "mon", "mgr", "osd", "blocks"):
            (s / sub).mkdir(parents=True, exist_ok=True)
        self._fsid = str(uuid.uuid4())
        state = ClusterState(
            fsid=self._fsid,
            port_base=self.port_base,
            num_osds=self.num_osds,
            backing=backing,
            device_class=self.device_class,
            osd_size_gib=self.osd_size_gib,
            hosts=self.num_hosts,
            clients=self.num_clients,
            release=self.release.name,
        )
        state.save(self.state_file)
        t0 = time.monotonic()
        self._up_host_network()
        self._write_conf()
        self._bootstrap_mon()
        self._log(f"devcluster: mon up ({time.monotonic() - t0:.1f}s)")
        self._bootstrap_mgr()
        self._create_osds(state)
        self._log(f"devcluster: {self.num_osds} OSDs up on {backing} ({time.monotonic() - t0:.1f}s)")
        self._create_pools()
        self._start_host_services()

    # ---- hosts (multi-host clusters) -------------------------------------------------------

    def _up_host_network(self) -> None:
        """Namespaces, bridges, veths and ssh files of every host (nothing when single-host).
        The plan is saved first, so that `down` after a partial `up` finds what to remove."""
        plan = self.host_plan
        if plan is None:
            return
        plan.save(self.state_dir / HOSTS_FILE)
        for host in plan.osd_hosts:
            self.asok_dir_of(host.name).mkdir(parents=True, exist_ok=True)
        try:
            HostNetwork(plan, log=self._log).create()
        except HostNetworkError as exc:
            raise DevClusterError(str(exc)) from exc
        assert self.host_daemons is not None
        self.host_daemons.write_ssh_files()
        self._log(f"devcluster: {len(plan.osd_hosts)} hosts + {len(plan.clients)} clients on "
                  f"{plan.public_subnet} (public), {plan.cluster_subnet} (cluster)")

    def _start_host_services(self) -> None:
        """sshd, exporter and node_exporter on every host; the Prometheus targets files."""
        daemons = self.host_daemons
        if daemons is None:
            return
        for host in daemons.plan.hosts:
            daemons.start(host)
        daemons.write_targets()
        deadline = time.monotonic() + 30
        while failing := ssh_reachable(daemons.plan.hosts, daemons.ssh_config):
            if time.monotonic() > deadline:
                raise DevClusterError(f"sshd not reachable on {', '.join(failing)}; "
                                      f"see {self.log_dir}")
            time.sleep(0.5)

    def _bootstrap_mon(self) -> None:
        s = self.state_dir
        mon_keyring = s / "mon.keyring.tmp"
        authtool = "ceph-authtool"
        self._run(
            [
                authtool,
                "--create-keyring",
                str(mon_keyring),
                "--gen-key",
                "-n",
                "mon.",
                "--cap",
                "mon",
                "allow *",
            ]
        )
        self._run(
            [
                authtool,
                "--create-keyring",
                str(self.admin_keyring),
                "--gen-key",
                "-n",
                "client.admin",
                "--cap",
                "mon",
                "allow *",
                "--cap",
                "osd",
                "allow *",
                "--cap",
                "mds",
                "allow *",
                "--cap",
                "mgr",
                "allow *",
                *self._release_spec_field("admin_key_args"),
            ]
        )
        self._run([authtool, str(mon_keyring), "--import-keyring", str(self.admin_keyring)])
        monmap = s / "monmap.tmp"
        self._run(
            [
                "monmaptool",
                "--create",
                "--fsid",
                self._fsid,
                "--addv",
                MON_ID,
                f"[v2:{self.mon_addr}:{self.mon_port}]",
                *self._release_spec_field("monmap_args"),
                str(monmap),
            ]
        )
        self._run(
            [
                "ceph-mon",
                "-c",
                str(self.conf_path),
                "--mkfs",
                "-i",
                MON_ID,
                "--monmap",
                str(monmap),
                "--keyring",
                str(mon_keyring),
            ]
        )
        monmap.unlink()
        mon_keyring.unlink()
        self._start_daemon("mon", MON_ID)

    def _bootstrap_mgr(self) -> None:
        mgr_dir = self.state_dir / "mgr" / f"ceph-{MGR_ID}"
        mgr_dir.mkdir(parents=True, exist_ok=True)
        self._run(
            self._ceph_cmd(
                "auth",
                "get-or-create",
                f"mgr.{MGR_ID}",
                "mon",
                "allow profile mgr",
                "osd",
                "allow *",
                "mds",
                "allow *",
                "-o",
                str(mgr_dir / "keyring"),
            )
        )
        self._start_daemon("mgr", MGR_ID)

    def _attach_loop(self, image: Path) -> str:
        proc = self._run_here(["losetup", "--find", "--show", str(image)])
        device = proc.stdout.decode().strip()
        rotational = "1" if self.device_class == "hdd" else "0"
        name = Path(device).name
        try:
            Path(f"/sys/block/{name}/queue/rotational").write_text(rotational)
        except OSError as exc:
            self._log(f"devcluster: cannot set {name} rotational={rotational}: {exc}")
        return device

    def _create_osds(self, state: ClusterState) -> None:
        osds: list[OsdBacking] = []
        for _ in range(self.num_osds):
            osd_uuid = str(uuid.uuid4())
            secret = self._run(["ceph-authtool", "--gen-print-key"]).stdout.decode().strip()
            inbuf = json.dumps({"cephx_secret": secret}).encode()
            out = self._run(self._ceph_cmd("osd", "new", osd_uuid, "-i", "-"), input_bytes=inbuf)
            osd_id = int(out.stdout.decode().strip())
            data = self.osd_data(osd_id)
            data.mkdir(parents=True, exist_ok=True)
            self._run(
                [
                    "ceph-authtool",
                    "--create-keyring",
                    str(data / "keyring"),
                    "--name",
                    f"osd.{osd_id}",
                    "--add-key",
                    secret,
                ]
            )
            image = self.state_dir / "blocks" / f"osd.{osd_id}.img"
            loop_device = None
            if state.backing == "loop":
                with image.open("wb") as fh:
                    fh.truncate(self.osd_size_gib << 30)
                loop_device = self._attach_loop(image)
            osds.append(OsdBacking(osd_id, str(image), loop_device))
            # Record each attachment at once so that a failure later can undo it.
            state.osds = list(osds)
            state.save(self.state_file)
            (data / "fsid").write_text(osd_uuid + "\n")

        def mkfs(backing: OsdBacking) -> None:
            argv = [
                "ceph-osd",
                "-c",
                str(self.conf_path),
                "-i",
                str(backing.osd_id),
                "--mkfs",
                "--osd-uuid",
                (self.osd_data(backing.osd_id) / "fsid").read_text().strip(),
            ]
            if backing.loop_device:
                argv += ["--bluestore-block-path", backing.loop_device]
            else:
                argv += ["--bluestore-block-path", backing.image, "--bluestore-block-create"]
            self._run_on(self.host_of(f"osd.{backing.osd_id}"), argv, timeout=300)

        with ThreadPoolExecutor(max_workers=self.num_osds) as pool:
            list(pool.map(mkfs, osds))
            list(pool.map(lambda b: self._start_daemon("osd", str(b.osd_id)), osds))
        self._wait_osds_up([o.osd_id for o in osds], timeout=90)
        if self.device_class:
            ids = [f"osd.{o.osd_id}" for o in osds]
            with contextlib.suppress(DevClusterError):
                self.ceph("osd", "crush", "rm-device-class", *ids)
            self.ceph("osd", "crush", "set-device-class", self.device_class, *ids)

    def _create_pools(self) -> None:
        self.ceph("osd", "pool", "create", self.bench_pool, "32", "32", "replicated")
        self.ceph("osd", "pool", "application", "enable", self.bench_pool, "rados")
        self.ceph("osd", "pool", "create", self.rbd_pool, "32", "32", "replicated")
        rbd = ["rbd", "-c", str(self.conf_path)]
        self._run([*rbd, "pool", "init", self.rbd_pool])
        image = f"{self.rbd_pool}/{self.rbd_image}"
        self._run([*rbd, "create", "--size", str(self.rbd_image_size_mib), image])

    def _start_existing(self) -> None:
        state = self.load_state()
        self._fsid = state.fsid
        self._up_host_network()
        for backing in state.osds:
            if state.backing == "loop":
                backing.loop_device = self._attach_loop(Path(backing.image))
                state.save(self.state_file)
                # Loop numbers change between attachments: BlueStore follows the symlink.
                block = self.osd_data(backing.osd_id) / "block"
                block.unlink(missing_ok=True)
                block.symlink_to(backing.loop_device)
        self._start_daemon("mon", MON_ID)
        self._start_daemon("mgr", MGR_ID)
        ids = [o.osd_id for o in state.osds]
        with ThreadPoolExecutor(max_workers=max(1, len(ids))) as pool:
            list(pool.map(lambda i: self._start_daemon("osd", str(i)), ids))
        self._wait_osds_up(ids, timeout=90)
        self._start_host_services()

    # ---- waiting ---------------------------------------------------------------------------

    def _wait_osds_up(self, ids: Iterable[int], timeout: float) -> None:
        wanted = set(ids)
        deadline = time.monotonic() + timeout
        while True:
            try:
                dump = self.ceph_json("osd", "dump", timeout=20)
                up = {o["osd"] for o in dump["osds"] if o["up"] == 1}
                if wanted <= up:
                    return
            except DevClusterError:
                up = set()
            if time.monotonic() > deadline:
                raise DevClusterError(
                    f"OSDs {sorted(wanted - up)} not up after {timeout:.0f}s; see {self.log_dir}"
                )
            time.sleep(0.5)

    def muted_health_checks(self) -> tuple[str, ...]:
        """Checks this cluster's release raises for reasons outside the cluster (see rootfs.py)."""
        return self._release_spec_field("muted_health_checks")

    def wait_health_ok(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        last = ""
        while True:
            try:
                health = self.ceph_json("health", timeout=20)
                last = health.get("status", "")
                if last == "HEALTH_OK":
                    return
                self._mute_known_checks(health)
            except DevClusterError as exc:
                last = str(exc)
            if time.monotonic() > deadline:
                detail = ""
                with contextlib.suppress(DevClusterError):
                    detail = self.ceph("health", "detail", timeout=20).strip().replace("\n", " | ")
                raise DevClusterError(f"no HEALTH_OK after {timeout:.0f}s: {detail or last}")
            time.sleep(0.5)

    def _mute_known_checks(self, health: dict[str, Any]) -> None:
        for code in health.get("checks", {}):
            if code in self.muted_health_checks() and not health["checks"][code].get("muted"):
                self._log(f"devcluster: muting {code} (expected for {self.release.name}; "
                          "deploy/rootfs.py says why)")
                self.ceph("health", "mute", code, "--sticky", timeout=20)

    def _osd_release_args(self) -> list[str]:
        """Debian's Tentacle builds osd_class_dir as a relative path (lib/<triplet>/rados-classes),
        which an OSD resolves against its working directory and misses: cls_rbd, cls_lock and
        friends fail with ENOENT. Name the release root's class dir explicitly."""
        if self.release.root is None:
            return []
        found = sorted(self.release.root.glob("usr/lib/*/rados-classes"))
        return ["--osd-class-dir", "/" + str(found[0].relative_to(self.release.root))] if found else []

    def _release_spec_field(self, name: str) -> tuple[str, ...]:
        """A per-release setting of deploy/rootfs.py; empty for this machine's packages."""
        if self.release.name == HOST_RELEASE.name:
            return ()
        return tuple(getattr(release_spec(self.release.name), name))

    def ceph_version(self) -> str | None:
        """The Ceph package version this cluster's daemons run."""
        return ceph_version_of(self.release)

    def wait_pgs_active_clean(self, timeout: float = 120) -> None:
        try:
            wait_pgs_active_clean(lambda: self.ceph_json("pg", "dump", "pgs", timeout=20),
                                  timeout, transient=(DevClusterError, OSError))
        except PgWaitTimeout as exc:
            raise DevClusterError(str(exc)) from exc

    # ---- restart ---------------------------------------------------------------------------

    def restart_osds(self, ids: Iterable[int], timeout: float = 120,
                     on_stopped: Callable[[], None] | None = None,
                     env: Mapping[str, str] | None = None) -> float:
        """Restart OSDs in parallel (one that is not running is started); return when they are
        up again (seconds taken). All are stopped before any starts: `on_stopped` is called
        in between. `env`: extra environment for the started daemons (a test makes an OSD
        look containerised, e.g. NODE_NAME; the next restart without it undoes that)."""
        ids = list(ids)
        known = set(self.osd_ids())
        unknown = [i for i in ids if i not in known]
        if unknown:
            raise DevClusterError(f"no such OSD in this dev cluster: {unknown} (have {sorted(known)})")
        started = time.monotonic()
        with ThreadPoolExecutor(max_workers=max(1, len(ids))) as pool:
            list(pool.map(lambda i: self._stop_daemon(f"osd.{i}"), ids))
            if on_stopped is not None:
                on_stopped()
            list(pool.map(lambda i: self._start_daemon("osd", str(i), env), ids))
        # The mon marks a restarted OSD up only after it has booted again.
        self._wait_osds_up(ids, timeout=timeout)
        self._wait_asok(ids, timeout=timeout)
        return time.monotonic() - started

    def start_daemon(self, daemon: str) -> None:
        """Start one daemon (`mon.a`, `osd.2`) that is not running, e.g. after it crashed."""
        kind, _, ident = daemon.partition(".")
        if daemon not in self._daemon_names():
            raise DevClusterError(f"no daemon {daemon!r} in this dev cluster")
        if self._daemon_pid(daemon) is not None:
            raise DevClusterError(f"{daemon} is already running")
        self._start_daemon(kind, ident)

    def restart_osd(self, osd_id: int, timeout: float = 120) -> float:
        return self.restart_osds([osd_id], timeout=timeout)

    def _wait_asok(self, ids: Iterable[int], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for osd_id in ids:
            while not self.osd_asok(osd_id).exists():
                if time.monotonic() > deadline:
                    raise DevClusterError(f"osd.{osd_id} admin socket did not appear")
                time.sleep(0.1)

    # ---- status / down / purge -------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        state = self.load_state()
        running = self.running_daemons()
        result: dict[str, Any] = {
            "state_dir": str(self.state_dir),
            "fsid": state.fsid,
            "mon": f"v2:{self.mon_addr}:{self.mon_port}",
            "msgr_ports": "{}-{}".format(*self.msgr_port_range),
            "backing": state.backing,
            "release": state.release,
            "ceph_version": self.ceph_version(),
            "daemons": {name: running.get(name) for name in self._daemon_names()},
            "osds": [asdict(o) for o in state.osds],
            "health": None,
        }
        if self.host_plan is not None and self.host_daemons is not None:
            result["hosts"] = {
                h.name: {"role": h.role, "netns": h.netns, "public_addr": h.public_addr,
                         "cluster_addr": h.cluster_addr,
                         "up": Path("/run/netns", h.netns).exists()}
                for h in self.host_plan.hosts
            }
            result["host_services"] = self.host_daemons.running()
            result["ssh_config"] = str(self.host_daemons.ssh_config)
        if f"mon.{MON_ID}" in running:
            with contextlib.suppress(DevClusterError, json.JSONDecodeError):
                result["health"] = self.ceph_json("health", timeout=15).get("status")
        return result

    def down(self, quiet: bool = False) -> list[str]:
        """Stop our daemons, detach our loop devices, remove sockets; keep the data."""
        if not self.state_file.exists():
            if quiet:
                return []
            raise DevClusterError(f"no dev cluster in {self.state_dir}")
        try:
            state = self.load_state()
        except DevClusterError as exc:
            return self._down_damaged(str(exc))
        running = self.running_daemons()
        attached = [o for o in state.osds if o.loop_device]
        network = HostNetwork(self.host_plan, log=self._log) if self.host_plan else None
        namespaces = [h for h in self.host_plan.hosts if Path("/run/netns", h.netns).exists()] \
            if self.host_plan else []
        if not running and not attached and not namespaces and not quiet:
            raise DevClusterError(f"dev cluster in {self.state_dir} is not running")
        # OSDs first, so the mon sees them go; all in parallel.
        osd_names = [n for n in running if n.startswith("osd.")]
        with ThreadPoolExecutor(max_workers=max(1, len(osd_names))) as pool:
            list(pool.map(self._stop_daemon, osd_names))
        for name in (f"mgr.{MGR_ID}", f"mon.{MON_ID}"):
            self._stop_daemon(name)
        if network is not None:
            assert self.host_daemons is not None
            running.update({name: 0 for name in self.host_daemons.stop()})
            # Whatever else still runs in our namespaces was started there through us (a
            # benchmark a runner left behind): the namespaces cannot go while it lives.
            for host in network.plan.hosts:
                for pid in network.namespace_pids(host):
                    if pid_alive(pid):
                        with contextlib.suppress(ProcessLookupError):  # ended meanwhile
                            terminate(pid, 10, log=self._log)
                        running[f"pid {pid}@{host.name}"] = pid
            network.remove()
        for backing in attached:
            self._detach_loop(backing)
            backing.loop_device = None
        state.save(self.state_file)
        for leftover in [*self.asok_dir.glob("*.asok"), *self.asok_dir.glob("*/*.asok"),
                         *self.asok_dir.glob("*.pid")]:
            leftover.unlink(missing_ok=True)
        return sorted(running)

    def _down_damaged(self, problem: str) -> list[str]:
        """The state file is unreadable: stop the daemons our pid files name (a pid counts only
        when its command line holds our conf), detach loop devices backed by files in our
        state dir, and say what could not be known."""
        names = sorted(p.name.removesuffix(".pid") for p in self.asok_dir.rglob("*.pid"))
        osds = [n for n in names if n.startswith("osd.")]
        with ThreadPoolExecutor(max_workers=max(1, len(osds))) as pool:
            stopped = [n for n, ok in zip(osds, pool.map(self._stop_daemon, osds), strict=True)
                       if ok]
        stopped += [n for n in names if n not in osds and self._stop_daemon(n)]
        ours = str(self.state_dir) + os.sep
        for backing_file in Path("/sys/block").glob("loop*/loop/backing_file"):
            with contextlib.suppress(OSError, DevClusterError):
                if os.path.realpath(backing_file.read_text().strip()).startswith(ours):
                    device = f"/dev/{backing_file.parent.parent.name}"
                    self._run_here(["losetup", "--detach", device])
                    stopped.append(device)
        self._log(f"devcluster: {problem}; stopped what the pid files and loop devices name "
                  f"({', '.join(stopped) or 'nothing was running'}); host namespaces, if any, "
                  f"are not known without the state file (ip netns list)")
        return stopped

    def _detach_loop(self, backing: OsdBacking) -> None:
        device = backing.loop_device
        if not device:
            return
        name = Path(device).name
        # Detach only if it still points at our image (someone may have reused the number).
        try:
            backing_file = Path(f"/sys/block/{name}/loop/backing_file").read_text().strip()
        except OSError:
            return
        if os.path.realpath(backing_file) != os.path.realpath(backing.image):
            self._log(f"devcluster: {device} now backs {backing_file}; leaving it alone")
            return
        try:
            self._run_here(["losetup", "--detach", device])
        except DevClusterError as exc:
            self._log(f"devcluster: {exc}")

    def _remove_state_dir(self) -> None:
        # Remove only what we created: the state dir is ours once state.json is in it.
        if self.state_dir.exists():
            shutil.rmtree(self.state_dir, ignore_errors=True)

    def purge(self) -> None:
        if not self.state_file.exists():
            raise DevClusterError(f"no dev cluster in {self.state_dir}")
        self.down(quiet=True)
        self._remove_state_dir()
