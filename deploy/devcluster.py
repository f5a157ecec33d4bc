"""A real Ceph dev cluster from Debian's packages, on 127.0.0.1 (or on namespace hosts).

1 mon + 1 mgr + N BlueStore OSDs (loop devices, or plain files where loop devices cannot be
had), optionally an MDS with the filesystem `cephfs` and a RADOS gateway with a user
(deploy/cluster_services.py), cephx on, an explicit port range, and all state under one state directory
(deploy/cluster_layout.py), so that two clusters with different state dirs and port bases run
side by side. `down` stops only the daemons whose pid files live in that state dir (and whose
command line names its ceph.conf) and detaches only the loop devices it attached.

`DevCluster` coordinates: it decides the order of things (`up`, `down`, restarts) and hands
the work to its parts (deploy/cluster_parts.py), whose factory is handed in; where and how a
daemon runs is the `DaemonPlacement` among them (deploy/daemon_supervisor.py).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any

from cephscope.deploy.cluster_bootstrap import BENCH_POOL, RBD_IMAGE, RBD_IMAGE_SIZE_MIB, RBD_POOL
from cephscope.deploy.cluster_layout import (
    MGR_ID,
    MON_ID,
    ClusterLayout,
    ClusterState,
    DevClusterError,
    OsdBacking,
    default_state_dir,
)
from cephscope.deploy.cluster_parts import ClusterParts, PartsFactory, process_parts
from cephscope.deploy.cluster_services import CEPHFS_NAME
from cephscope.deploy.daemon_supervisor import GATEWAY_PREFIX
from cephscope.deploy.hostdaemons import HostDaemons
from cephscope.deploy.hosts import HostPlan
from cephscope.deploy.placement import DevHost, Placement, Release
from cephscope.deploy.rgw_access import RgwAccess
from cephscope.deploy.rootfs import ceph_version_of

__all__ = ["ClusterState", "DevCluster", "DevClusterError", "OsdBacking", "RgwAccess", "default_state_dir"]

# How long a stopped daemon has to exit before SIGKILL. Tentacle's radosgw, once its frontend
# is down, waits ~25 s on SIGTERM for its idle dedup background thread; a dev cluster's gateway
# holds nothing that needs a clean exit (its state is in RADOS).
DAEMON_STOP_SECONDS = 30.0
GATEWAY_STOP_SECONDS = 5.0


class DevCluster:
    """One dev cluster, identified by its state dir. The arguments are the shape of a new
    cluster; the state dir's own record wins over them (`ClusterLayout.resolve`). `parts`
    makes the collaborators (default: daemons as processes, `process_parts`)."""

    bench_pool = BENCH_POOL
    rbd_pool = RBD_POOL
    rbd_image = RBD_IMAGE
    rbd_image_size_mib = RBD_IMAGE_SIZE_MIB

    def __init__(
        self,
        state_dir: Path | str | None = None,
        port_base: int = 17000,
        num_osds: int = 3,
        osd_size_gib: int = 10,
        backing: str = "auto",
        device_class: str = "ssd",
        log: Callable[[str], None] | None = None,
        hosts: int = 1,
        clients: int = 0,
        public_subnet: str | None = None,
        cluster_subnet: str | None = None,
        release: str | None = None,
        mds: bool = False,
        rgw: bool = False,
        *,
        parts: PartsFactory = process_parts,
    ) -> None:
        self._log: Callable[[str], None] = log or (lambda msg: print(msg, flush=True))
        self.layout = ClusterLayout.resolve(
            state_dir, port_base=port_base, num_osds=num_osds, osd_size_gib=osd_size_gib,
            backing=backing, device_class=device_class, hosts=hosts, clients=clients,
            public_subnet=public_subnet, cluster_subnet=cluster_subnet, release=release,
            mds=mds, rgw=rgw)
        self.parts: ClusterParts = parts(self.layout, self._log)
        self.commands = self.parts.commands
        self.daemons = self.parts.daemons

    # ---- the layout (deploy/cluster_layout.py) ---------------------------------------------

    @property
    def state_dir(self) -> Path:
        return self.layout.state_dir

    @property
    def port_base(self) -> int:
        return self.layout.port_base

    @property
    def num_osds(self) -> int:
        return self.layout.num_osds

    @property
    def osd_size_gib(self) -> int:
        return self.layout.osd_size_gib

    @property
    def backing(self) -> str:
        return self.layout.backing

    @property
    def device_class(self) -> str:
        return self.layout.device_class

    @property
    def num_hosts(self) -> int:
        return self.layout.num_hosts

    @property
    def num_clients(self) -> int:
        return self.layout.num_clients

    @property
    def release(self) -> Release:
        return self.layout.release

    @property
    def mds(self) -> bool:
        """Whether the cluster has an MDS serving the filesystem `cephfs_name`."""
        return self.layout.mds

    @property
    def rgw(self) -> bool:
        """Whether the cluster has a RADOS gateway (`rgw_access()`)."""
        return self.layout.rgw

    @property
    def host_plan(self) -> HostPlan | None:
        return self.layout.host_plan

    @property
    def admin_host(self) -> DevHost:
        return self.layout.admin_host

    @property
    def hosts(self) -> list[DevHost]:
        return self.layout.hosts

    @property
    def conf_path(self) -> Path:
        return self.layout.conf_path

    @property
    def admin_keyring(self) -> Path:
        return self.layout.admin_keyring

    @property
    def asok_dir(self) -> Path:
        return self.layout.asok_dir

    @property
    def log_dir(self) -> Path:
        return self.layout.log_dir

    @property
    def state_file(self) -> Path:
        return self.layout.state_file

    @property
    def multi_host(self) -> bool:
        return self.layout.multi_host

    @property
    def client_names(self) -> list[str]:
        return self.layout.client_names

    @property
    def mon_addr(self) -> str:
        return self.layout.mon_addr

    @property
    def mon_port(self) -> int:
        return self.layout.mon_port

    @property
    def msgr_port_range(self) -> tuple[int, int]:
        return self.layout.msgr_port_range

    def asok_dir_of(self, host_name: str) -> Path:
        return self.layout.asok_dir_of(host_name)

    def osd_data(self, osd_id: int) -> Path:
        return self.layout.osd_data(osd_id)

    def osd_asok(self, osd_id: int) -> Path:
        return self.layout.osd_asok(osd_id)

    def daemon_asok(self, daemon: str) -> Path:
        """The admin socket of a daemon ("mds.a", "client.rgw.a")."""
        return self.layout.daemon_asok(daemon)

    def pid_file(self, daemon: str) -> Path:
        return self.layout.pid_file(daemon)

    def load_state(self) -> ClusterState:
        return self.layout.load_state()

    def osd_ids(self) -> list[int]:
        return self.layout.osd_ids()

    def host_of(self, daemon: str) -> DevHost:
        """The host a daemon ("mon.a", "osd.3") lives on, as the placement says."""
        return self.daemons.host_of(daemon)

    # ---- hosts (multi-host clusters) -------------------------------------------------------

    @property
    def host_daemons(self) -> HostDaemons | None:
        return self.parts.hosts.daemons if self.parts.hosts is not None else None

    @property
    def ssh_config(self) -> Path | None:
        """The ssh_config that names every host and client (multi-host clusters only)."""
        daemons = self.host_daemons
        return daemons.ssh_config if daemons else None

    # ---- commands (deploy/cluster_commands.py) ---------------------------------------------

    @property
    def placement(self) -> Placement:
        return self.commands.placement

    def admin_command(self, argv: Sequence[str]) -> list[str]:
        """The argv that runs a client tool of this cluster's release from the admin host."""
        return self.commands.admin_command(argv)

    def ceph_argv(self, *args: str) -> list[str]:
        return self.commands.ceph_argv(*args)

    def rados_argv(self, *args: str) -> list[str]:
        return self.commands.rados_argv(*args)

    def rbd_argv(self, *args: str) -> list[str]:
        return self.commands.rbd_argv(*args)

    def env(self) -> dict[str, str]:
        """Environment for tools that read CEPH_CONF (fio's rbd engine)."""
        return self.commands.env()

    def ceph_json(self, *args: str, timeout: float = 60) -> Any:
        return self.commands.ceph_json(*args, timeout=timeout)

    def ceph(self, *args: str, timeout: float = 60) -> str:
        return self.commands.ceph(*args, timeout=timeout)

    def ceph_version(self) -> str | None:
        """The Ceph package version this cluster's daemons run."""
        return ceph_version_of(self.release)

    # ---- CephFS and the gateway (deploy/cluster_services.py) -------------------------------

    @property
    def cephfs_name(self) -> str:
        if not self.mds:
            raise DevClusterError(f"the dev cluster in {self.state_dir} has no MDS and no CephFS "
                                  f"(make one with --mds)")
        return CEPHFS_NAME

    @property
    def rgw_endpoint(self) -> str:
        """http://ADDR:PORT of the gateway (where `rgw_access()` points)."""
        return self.parts.services.rgw_endpoint

    def rgw_access(self) -> RgwAccess:
        """The gateway's endpoint and its user's S3 and Swift keys (from rgw.json)."""
        return self.parts.services.rgw_access()

    # ---- daemons (deploy/daemon_supervisor.py) ---------------------------------------------

    def osd_pid(self, osd_id: int) -> int | None:
        return self.daemons.pid(f"osd.{osd_id}")

    def running_daemons(self) -> dict[str, int]:
        return {name: pid for name in self.layout.daemon_names() if (pid := self.daemons.pid(name))}

    def _start_in_parallel(self, names: Sequence[str], env: Mapping[str, str] | None = None) -> None:
        with ThreadPoolExecutor(max_workers=max(1, len(names))) as pool:
            list(pool.map(lambda name: self.daemons.start(name, env), names))

    def _stop_in_parallel(self, names: Sequence[str]) -> list[bool]:
        def stop(name: str) -> bool:
            gateway = name.startswith(GATEWAY_PREFIX)
            return self.daemons.stop(name, GATEWAY_STOP_SECONDS if gateway else DAEMON_STOP_SECONDS)

        with ThreadPoolExecutor(max_workers=max(1, len(names))) as pool:
            return list(pool.map(stop, names))

    # ---- health (deploy/cluster_health.py) -------------------------------------------------

    def muted_health_checks(self) -> tuple[str, ...]:
        """Checks this cluster's release raises for reasons outside the cluster (see rootfs.py)."""
        return self.parts.health.muted_health_checks()

    def wait_health_ok(self, timeout: float = 120) -> None:
        self.parts.health.wait_health_ok(timeout=timeout)

    def wait_pgs_active_clean(self, timeout: float = 120) -> None:
        self.parts.health.wait_pgs_active_clean(timeout=timeout)

    # ---- up --------------------------------------------------------------------------------

    def up(self) -> float:
        """Create (or start again) the cluster; return the seconds it took to reach HEALTH_OK."""
        started = time.monotonic()
        preflight = self.parts.preflight
        preflight.check_binaries()
        preflight.check_state_dir_is_ours_or_empty()
        if self.state_file.exists():
            running = self.running_daemons()
            if running:
                raise DevClusterError(
                    f"dev cluster in {self.state_dir} is already running ({', '.join(sorted(running))})"
                )
            preflight.check_ports()
            preflight.check_aio_headroom()
            self._start_existing()
            self.wait_health_ok(timeout=120)
        else:
            preflight.check_ports()
            preflight.check_aio_headroom()
            backing = preflight.choose_backing()
            try:
                self._create(backing)
                self.wait_health_ok(timeout=120)
            except BaseException:
                self._log("devcluster: bootstrap failed; removing what it created")
                self.down(quiet=True)
                self._remove_state_dir()
                raise
        return time.monotonic() - started

    def _create(self, backing: str) -> None:
        bootstrap = self.parts.bootstrap
        state = bootstrap.new_state(backing)  # recorded before anything starts
        if self.parts.hosts is not None:
            self.parts.hosts.up_network()
        services = self.parts.services
        bootstrap.create(state, with_the_mon=services.prepare)
        services.create()
        if self.parts.hosts is not None:
            self.parts.hosts.start_services()

    def _start_existing(self) -> None:
        state = self.load_state()
        if self.parts.hosts is not None:
            self.parts.hosts.up_network()
        self.parts.bootstrap.reattach_loops(state)
        self.daemons.start(f"mon.{MON_ID}")
        self.daemons.start(f"mgr.{MGR_ID}")
        ids = [o.osd_id for o in state.osds]
        self._start_in_parallel([f"osd.{i}" for i in ids])
        self.parts.health.wait_osds_up(ids, timeout=90)
        self.parts.services.start()
        if self.parts.hosts is not None:
            self.parts.hosts.start_services()

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
        names = [f"osd.{i}" for i in ids]
        self._stop_in_parallel(names)
        if on_stopped is not None:
            on_stopped()
        self._start_in_parallel(names, env)
        # The mon marks a restarted OSD up only after it has booted again.
        self.parts.health.wait_osds_up(ids, timeout=timeout)
        self.parts.health.wait_asok(ids, timeout=timeout)
        return time.monotonic() - started

    def restart_osd(self, osd_id: int, timeout: float = 120) -> float:
        return self.restart_osds([osd_id], timeout=timeout)

    def start_daemon(self, daemon: str) -> None:
        """Start one daemon (`mon.a`, `osd.2`) that is not running, e.g. after it crashed."""
        if daemon not in self.layout.daemon_names():
            raise DevClusterError(f"no daemon {daemon!r} in this dev cluster")
        if self.daemons.pid(daemon) is not None:
            raise DevClusterError(f"{daemon} is already running")
        self.daemons.start(daemon)

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
            "mds": state.mds,
            "rgw": state.rgw,
            "cephfs": CEPHFS_NAME if state.mds else None,
            "rgw_endpoint": self.rgw_endpoint if state.rgw else None,
            "daemons": {name: running.get(name) for name in self.layout.daemon_names()},
            "osds": [asdict(o) for o in state.osds],
            "health": None,
        }
        if self.parts.hosts is not None:
            result.update(self.parts.hosts.status())
        if f"mon.{MON_ID}" in running:
            with contextlib.suppress(DevClusterError, json.JSONDecodeError):
                health = self.ceph_json("health", timeout=15)
                result["health"] = health.get("status") if isinstance(health, dict) else None
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
        hosts = self.parts.hosts
        namespaces = hosts.namespaces_present() if hosts is not None else []
        if not running and not attached and not namespaces and not quiet:
            raise DevClusterError(f"dev cluster in {self.state_dir} is not running")
        # The gateway and the MDS first (their clients of the OSDs would hang), then the OSDs,
        # so the mon sees them go; each kind in parallel (an MDS takes ~8 s to leave).
        self._stop_in_parallel(self.layout.service_names())
        self._stop_in_parallel([n for n in running if n.startswith("osd.")])
        for name in (f"mgr.{MGR_ID}", f"mon.{MON_ID}"):
            self.daemons.stop(name)
        if hosts is not None:
            running.update(hosts.down())
        # A loop device goes only once no OSD holds it.
        for backing in attached:
            self.parts.loops.detach(backing)
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
        services = [n for n in names if n.startswith(("mds.", "client."))]
        osds = [n for n in names if n.startswith("osd.")]
        stopped = [n for n, ok in zip(services, self._stop_in_parallel(services), strict=True) if ok]
        stopped += [n for n, ok in zip(osds, self._stop_in_parallel(osds), strict=True) if ok]
        stopped += [n for n in names if n not in osds and n not in services and self.daemons.stop(n)]
        stopped += self.parts.loops.detach_under(self.state_dir)
        self._log(f"devcluster: {problem}; stopped what the pid files and loop devices name "
                  f"({', '.join(stopped) or 'nothing was running'}); host namespaces, if any, "
                  f"are not known without the state file (ip netns list)")
        return stopped

    def _remove_state_dir(self) -> None:
        # Remove only what we created: the state dir is ours once state.json is in it.
        if self.state_dir.exists():
            shutil.rmtree(self.state_dir, ignore_errors=True)

    def purge(self) -> None:
        if not self.state_file.exists():
            raise DevClusterError(f"no dev cluster in {self.state_dir}")
        self.down(quiet=True)
        self._remove_state_dir()

