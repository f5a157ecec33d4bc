"""Where one dev cluster lives: its state dir and the paths in it, its ports, its hosts, its
release, and the record (`state.json`) that `down` and a later `up` read.

Layout of the state dir:

    state.json            ports, fsid, OSD ids, backing of each OSD (what `down` undoes),
                          whether it has an MDS and a RADOS gateway
    ceph.conf, keyring    cluster conf (client.admin keyring path inside)
    rgw.json              the gateway's endpoint and its user's keys (mode 0600; --rgw only)
    mon/ mgr/ osd/        daemon data dirs (mds/ and rgw/ with --mds / --rgw)
    blocks/osd.N.img      sparse backing files
    run/                  admin sockets and pid files (run/<host>/ per host when multi-host)
    log/                  daemon logs

Nothing here starts a process: this is the vocabulary the other parts of the dev cluster
(preflight, supervision, bootstrap, health, teardown) share.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from cephscope.deploy.hosts import HOSTS_FILE, HostNetworkError, HostPlan, plan_hosts
from cephscope.deploy.placement import HOST_RELEASE, DevHost, Release, this_machine
from cephscope.deploy.rootfs import RootfsError, release_for, release_spec

STATE_FILE = "state.json"
MON_ID = "a"
MGR_ID = "x"
MDS_ID = "a"
# The gateway is a client of the cluster: its daemon name is client.rgw.<id>, as cephadm's.
RGW_NAME = "client.rgw.a"
RGW_FILE = "rgw.json"
# ms_bind_port_min/max are base + these; the mon sits on the base port itself.
MSGR_PORT_OFFSET = 10
MSGR_PORT_SPAN = 90


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
    mds: bool = False  # an MDS with the filesystem `cephfs`
    rgw: bool = False  # a RADOS gateway with a user

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


class ClusterLayout:
    """The shape of one dev cluster, identified by its state dir (see `resolve`)."""

    def __init__(
        self,
        state_dir: Path,
        release: Release,
        port_base: int = 17000,
        num_osds: int = 3,
        osd_size_gib: int = 10,
        backing: str = "auto",
        device_class: str = "ssd",
        host_plan: HostPlan | None = None,
        num_hosts: int = 1,
        num_clients: int = 0,
        mds: bool = False,
        rgw: bool = False,
    ) -> None:
        self.state_dir = state_dir
        self.release = release
        self.port_base = port_base
        self.num_osds = num_osds
        self.osd_size_gib = osd_size_gib
        self.backing = backing
        self.device_class = device_class
        self.num_hosts = num_hosts
        self.num_clients = num_clients
        self.mds = mds
        self.rgw = rgw
        self.host_plan = host_plan
        # The admin host runs the client tools; mon and mgr live on hosts[0]. The single-host
        # cluster runs everything on this machine.
        self.admin_host: DevHost = this_machine()
        self.hosts: list[DevHost] = (
            [h.dev_host() for h in host_plan.osd_hosts] if host_plan is not None else [self.admin_host]
        )

    @classmethod
    def resolve(
        cls,
        state_dir: Path | str | None = None,
        port_base: int = 17000,
        num_osds: int = 3,
        osd_size_gib: int = 10,
        backing: str = "auto",
        device_class: str = "ssd",
        hosts: int = 1,
        clients: int = 0,
        public_subnet: str | None = None,
        cluster_subnet: str | None = None,
        release: str | None = None,
        mds: bool = False,
        rgw: bool = False,
    ) -> ClusterLayout:
        """The layout these arguments ask for, where the state dir's own record wins over them
        (a damaged record is reported by the command that needs it; `down` works without it).
        An MDS or gateway is made with a new cluster: one made without is not given one later."""
        state_path = Path(state_dir or default_state_dir()).resolve()
        existing = state_path / STATE_FILE
        if existing.exists():
            recorded: ClusterState | None = None
            with contextlib.suppress(DevClusterError):
                recorded = ClusterState.load(existing)
            recorded_release: str | None = None
            if recorded is not None:
                port_base = recorded.port_base
                num_osds = recorded.num_osds
                osd_size_gib = recorded.osd_size_gib
                hosts = recorded.hosts
                clients = recorded.clients
                recorded_release = recorded.release
                for service, asked, has in (("an MDS (--mds)", mds, recorded.mds),
                                            ("a RADOS gateway (--rgw)", rgw, recorded.rgw)):
                    if asked and not has:
                        raise DevClusterError(
                            f"the dev cluster in {state_path} was made without {service}; "
                            f"purge it and make it again to have one")
                mds, rgw = recorded.mds, recorded.rgw
            if recorded_release is not None:
                if release not in (None, recorded_release):
                    raise DevClusterError(
                        f"the dev cluster in {state_path} runs release {recorded_release}, "
                        f"not {release}"
                    )
                release = recorded_release
        # Another release runs from its root filesystem (deploy/rootfs.py, deploy/rootexec.py).
        try:
            resolved_release = release_for(release)
        except RootfsError as exc:
            raise DevClusterError(str(exc)) from exc
        # A multi-host cluster: OSD hosts and clients are network namespaces (deploy/hosts.py).
        host_plan: HostPlan | None = None
        if (state_path / HOSTS_FILE).exists():
            host_plan = HostPlan.load(state_path / HOSTS_FILE)
        elif hosts > 1 or clients > 0:
            try:
                host_plan = plan_hosts(state_path, hosts, clients, public_subnet, cluster_subnet)
            except HostNetworkError as exc:
                raise DevClusterError(str(exc)) from exc
        return cls(state_path, resolved_release, port_base=port_base, num_osds=num_osds,
                   osd_size_gib=osd_size_gib, backing=backing, device_class=device_class,
                   host_plan=host_plan, num_hosts=hosts, num_clients=clients, mds=mds, rgw=rgw)

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
    def hosts_file(self) -> Path:
        return self.state_dir / HOSTS_FILE

    def osd_data(self, osd_id: int) -> Path:
        return self.state_dir / "osd" / f"ceph-{osd_id}"

    def osd_image(self, osd_id: int) -> Path:
        return self.state_dir / "blocks" / f"osd.{osd_id}.img"

    def pid_file(self, daemon: str) -> Path:
        return self.asok_dir / f"{daemon}.pid"

    def asok_dir_of(self, host_name: str) -> Path:
        """Admin sockets of one host's daemons (a multi-host cluster keeps them per host, so
        each host's exporter sees its own daemons only, as on a real cluster)."""
        return self.asok_dir / host_name if self.multi_host else self.asok_dir

    def osd_asok(self, osd_id: int) -> Path:
        return self.asok_dir_of(self.host_of(f"osd.{osd_id}").name) / f"ceph-osd.{osd_id}.asok"

    def daemon_asok(self, daemon: str) -> Path:
        """The admin socket of any daemon ("mds.a", "client.rgw.a"), named as packages do."""
        return self.asok_dir_of(self.host_of(daemon).name) / f"ceph-{daemon}.asok"

    @property
    def mds_data(self) -> Path:
        return self.state_dir / "mds" / f"ceph-{MDS_ID}"

    @property
    def rgw_data(self) -> Path:
        return self.state_dir / "rgw" / f"ceph-{RGW_NAME.removeprefix('client.')}"

    @property
    def rgw_file(self) -> Path:
        return self.state_dir / RGW_FILE

    # ---- hosts and ports -------------------------------------------------------------------

    @property
    def multi_host(self) -> bool:
        return self.host_plan is not None

    @property
    def client_names(self) -> list[str]:
        return [h.name for h in self.host_plan.clients] if self.host_plan else []

    def host_of(self, daemon: str) -> DevHost:
        """The host a daemon ("mon.a", "osd.3") runs on: mon, mgr, MDS and gateway on the
        first host, OSDs round-robin across hosts."""
        kind, _, ident = daemon.partition(".")
        if kind == "osd":
            return self.hosts[int(ident) % len(self.hosts)]
        return self.hosts[0]

    @property
    def mon_addr(self) -> str:
        return self.host_of(f"mon.{MON_ID}").public_addr

    @property
    def mon_port(self) -> int:
        return self.port_base

    @property
    def msgr_port_range(self) -> tuple[int, int]:
        """The ports daemons' messengers bind (ms_bind_port_min/max): base+10..base+99, less
        the last one when the gateway has it."""
        low = self.port_base + MSGR_PORT_OFFSET
        high = low + MSGR_PORT_SPAN - 1
        return low, high - 1 if self.rgw else high

    @property
    def rgw_port(self) -> int:
        """The gateway's HTTP port: the last of the cluster's range, which messengers (binding
        from the bottom up) are kept off."""
        return self.port_base + MSGR_PORT_OFFSET + MSGR_PORT_SPAN - 1

    @property
    def rgw_addr(self) -> str:
        return self.host_of(RGW_NAME).public_addr

    def ports(self) -> list[int]:
        """Every port this cluster's daemons listen on."""
        low, high = self.msgr_port_range
        return [self.mon_port, *range(low, high + 1), *([self.rgw_port] if self.rgw else [])]

    # ---- the record ------------------------------------------------------------------------

    def load_state(self) -> ClusterState:
        if not self.state_file.exists():
            raise DevClusterError(f"no dev cluster in {self.state_dir} (no {STATE_FILE})")
        return ClusterState.load(self.state_file)

    def osd_ids(self) -> list[int]:
        return [o.osd_id for o in self.load_state().osds]

    def service_names(self) -> list[str]:
        """The MDS and the gateway, where this cluster has them, in their start order."""
        return [*([f"mds.{MDS_ID}"] if self.mds else []), *([RGW_NAME] if self.rgw else [])]

    def daemon_names(self) -> list[str]:
        """mon, mgr, the OSDs the record names, then the MDS and gateway it has."""
        names = [f"mon.{MON_ID}", f"mgr.{MGR_ID}"]
        if self.state_file.exists():
            names += [f"osd.{i}" for i in self.osd_ids()]
        return names + self.service_names()

    # ---- the release -----------------------------------------------------------------------

    def release_spec_field(self, name: str) -> tuple[str, ...]:
        """A per-release setting of deploy/rootfs.py; empty for this machine's packages."""
        if self.release.name == HOST_RELEASE.name:
            return ()
        return tuple(getattr(release_spec(self.release.name), name))

    def osd_release_args(self) -> list[str]:
        """Debian's Tentacle builds osd_class_dir as a relative path (lib/<triplet>/rados-classes),
        which an OSD resolves against its working directory and misses: cls_rbd, cls_lock and
        friends fail with ENOENT. Name the release root's class dir explicitly."""
        if self.release.root is None:
            return []
        found = sorted(self.release.root.glob("usr/lib/*/rados-classes"))
        return ["--osd-class-dir", "/" + str(found[0].relative_to(self.release.root))] if found else []
