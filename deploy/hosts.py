"""Hosts of a multi-host dev cluster: network namespaces on bridges that the dev cluster makes.

Each host (OSD host or client) is a network namespace with its own hostname (a UTS namespace
kept alive by a bind mount, entered together with the network namespace), a `public` NIC
(eth0) on the cluster's public bridge and, for OSD hosts, a `cluster` NIC (eth1) on the
cluster bridge. The root namespace holds one address on the public bridge so that the admin
host (runner, Prometheus) reaches every host; nothing is forwarded or NATed anywhere.

Every name derives from the state dir (`cluster_tag`), short enough for IFNAMSIZ (15), so two
dev clusters coexist. `HostNetwork.remove` undoes whatever exists of a plan, also after a
partial `create`; what was planned is saved to `hosts.json` before anything is made.
"""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import json
import subprocess
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from cephscope.deploy.placement import DevHost

HOSTS_FILE = "hosts.json"
# host i (1-based) gets .10+i, client j gets .100+j; the root namespace has .1 (public only)
HOST_OFFSET = 10
CLIENT_OFFSET = 100
ADMIN_OFFSET = 1
PUBLIC_NIC = "eth0"
CLUSTER_NIC = "eth1"
IFNAMSIZ = 15


class HostNetworkError(RuntimeError):
    """A host network cannot be made or removed; the message is one clear line."""


def cluster_tag(state_dir: Path) -> str:
    """Six hex digits naming this cluster's namespaces and interfaces."""
    return hashlib.sha256(str(state_dir.resolve()).encode()).hexdigest()[:6]


def default_subnets(state_dir: Path) -> tuple[str, str]:
    """Public and cluster /24s in 10.231/16 and 10.232/16, the third octet from the state dir,
    so that two dev clusters (each checked against the routes of the other) rarely collide."""
    octet = int(cluster_tag(state_dir), 16) % 256
    return f"10.231.{octet}.0/24", f"10.232.{octet}.0/24"


@dataclass(frozen=True)
class NsHost:
    """One planned namespace host: its name (= hostname, CRUSH host, SSH name) and plumbing."""

    name: str
    role: str  # "osd" or "client"
    netns: str
    uts_file: str
    public_addr: str
    cluster_addr: str | None
    public_veth: str  # root-namespace end of the public veth
    cluster_veth: str | None

    def dev_host(self) -> DevHost:
        return DevHost(self.name, self.netns, self.public_addr, self.cluster_addr,
                       uts_file=Path(self.uts_file))


@dataclass(frozen=True)
class HostPlan:
    tag: str
    public_subnet: str
    cluster_subnet: str
    public_bridge: str
    cluster_bridge: str
    admin_addr: str  # the root namespace's address on the public bridge
    hosts: tuple[NsHost, ...]

    @property
    def osd_hosts(self) -> list[NsHost]:
        return [h for h in self.hosts if h.role == "osd"]

    @property
    def clients(self) -> list[NsHost]:
        return [h for h in self.hosts if h.role == "client"]

    def prefixlen(self, subnet: str) -> int:
        return ipaddress.ip_network(subnet).prefixlen

    def save(self, path: Path) -> None:
        data = asdict(self)
        path.write_text(json.dumps(data, indent=2) + "\n")

    @classmethod
    def load(cls, path: Path) -> HostPlan:
        raw = json.loads(path.read_text())
        hosts = tuple(NsHost(**h) for h in raw.pop("hosts"))
        return cls(**raw, hosts=hosts)


def _address(subnet: ipaddress.IPv4Network, offset: int, what: str) -> str:
    if offset >= subnet.num_addresses - 1:
        raise HostNetworkError(f"subnet {subnet} is too small for {what} (needs host .{offset})")
    return str(subnet.network_address + offset)


def plan_hosts(state_dir: Path, hosts: int, clients: int,
               public_subnet: str | None = None, cluster_subnet: str | None = None) -> HostPlan:
    """Names and addresses of `hosts` OSD hosts and `clients` client hosts (no side effects)."""
    if hosts < 1 or clients < 0:
        raise HostNetworkError("--hosts must be at least 1 and --clients at least 0")
    default_public, default_cluster = default_subnets(state_dir)
    try:
        public = ipaddress.IPv4Network(public_subnet or default_public)
        cluster = ipaddress.IPv4Network(cluster_subnet or default_cluster)
    except ValueError as exc:
        raise HostNetworkError(f"bad subnet: {exc}") from exc
    if public.overlaps(cluster):
        raise HostNetworkError(f"public subnet {public} overlaps cluster subnet {cluster}")
    if not (public.is_private and cluster.is_private):
        raise HostNetworkError(f"subnets must be private ranges: {public}, {cluster}")
    if hosts >= CLIENT_OFFSET - HOST_OFFSET:
        raise HostNetworkError(f"at most {CLIENT_OFFSET - HOST_OFFSET - 1} hosts")
    tag = cluster_tag(state_dir)
    hosts_dir = state_dir.resolve() / "hosts"
    planned: list[NsHost] = []
    for role, count, offset in (("osd", hosts, HOST_OFFSET), ("client", clients, CLIENT_OFFSET)):
        for index in range(1, count + 1):
            name = f"{'host' if role == 'osd' else 'client'}{index}"
            short = f"{'h' if role == 'osd' else 'c'}{index}"
            planned.append(NsHost(
                name=name,
                role=role,
                netns=f"cephscope-{tag}-{name}",
                uts_file=str(hosts_dir / f"{name}.uts"),
                public_addr=_address(public, offset + index, name),
                cluster_addr=_address(cluster, offset + index, name) if role == "osd" else None,
                public_veth=f"cs{tag}p{short}",
                cluster_veth=f"cs{tag}c{short}" if role == "osd" else None,
            ))
    plan = HostPlan(
        tag=tag, public_subnet=str(public), cluster_subnet=str(cluster),
        public_bridge=f"cs{tag}pub", cluster_bridge=f"cs{tag}clu",
        admin_addr=_address(public, ADMIN_OFFSET, "the admin address"), hosts=tuple(planned),
    )
    for name in [plan.public_bridge, plan.cluster_bridge,
                 *(h.public_veth for h in planned), *(h.cluster_veth for h in planned if h.cluster_veth)]:
        assert len(name) <= IFNAMSIZ, name
    return plan


def overlapping_routes(subnets: Sequence[str], routes: Sequence[dict[str, Any]],
                       own_interfaces: Sequence[str] = ()) -> list[str]:
    """Routes (`ip -j route show table all` entries) whose destination overlaps a subnet;
    default routes and routes through our own interfaces do not count."""
    wanted = [ipaddress.ip_network(s) for s in subnets]
    found: list[str] = []
    for route in routes:
        dst = route.get("dst", "")
        if dst in ("default", "") or route.get("dev") in own_interfaces:
            continue
        if route.get("type") in ("broadcast", "local") and route.get("dev") in own_interfaces:
            continue
        try:
            net = ipaddress.ip_network(dst, strict=False)
        except ValueError:
            continue
        if net.version != 4 or net.prefixlen == 0:
            continue
        for subnet in wanted:
            if subnet.overlaps(net):
                found.append(f"{dst} dev {route.get('dev', '?')} overlaps {subnet}")
    return found


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[bytes]:
    proc = subprocess.run(["ip", *args], capture_output=True, timeout=30, check=False)
    if check and proc.returncode != 0:
        raise HostNetworkError(f"ip {' '.join(args)}: {proc.stderr.decode(errors='replace').strip()}")
    return proc


def _exists(kind: str, name: str) -> bool:
    if kind == "netns":
        return Path("/run/netns", name).exists()
    return Path("/sys/class/net", name).exists()


class HostNetwork:
    """Makes and removes the namespaces, bridges and veths of one plan."""

    def __init__(self, plan: HostPlan, log: Any = None) -> None:
        self.plan = plan
        self._log = log or (lambda msg: None)

    def check_routes(self) -> None:
        out = _ip("-j", "-4", "route", "show", "table", "all").stdout
        routes = json.loads(out or b"[]")
        own = [self.plan.public_bridge, self.plan.cluster_bridge]
        clashes = overlapping_routes([self.plan.public_subnet, self.plan.cluster_subnet], routes, own)
        if clashes:
            raise HostNetworkError(
                "subnet overlaps an existing route: " + "; ".join(clashes[:3])
                + " (choose others with --public-subnet / --cluster-subnet)"
            )

    def create(self) -> None:
        p = self.plan
        self.check_routes()
        for bridge in (p.public_bridge, p.cluster_bridge):
            if not _exists("link", bridge):
                _ip("link", "add", bridge, "type", "bridge")
            _ip("link", "set", bridge, "up")
        _ip("addr", "replace", f"{p.admin_addr}/{p.prefixlen(p.public_subnet)}", "dev", p.public_bridge)
        for host in p.hosts:
            self._create_host(host)

    def _create_host(self, host: NsHost) -> None:
        p = self.plan
        if not _exists("netns", host.netns):
            _ip("netns", "add", host.netns)
        uts = Path(host.uts_file)
        uts.parent.mkdir(parents=True, exist_ok=True)
        if not _uts_mounted(uts):
            uts.touch()
            # unshare binds the new UTS namespace onto the file; `hostname` runs inside it.
            _run(["unshare", f"--uts={uts}", "hostname", host.name], f"hostname of {host.name}")
        links = [(host.public_veth, PUBLIC_NIC, p.public_bridge, host.public_addr, p.public_subnet)]
        if host.cluster_veth and host.cluster_addr:
            links.append((host.cluster_veth, CLUSTER_NIC, p.cluster_bridge, host.cluster_addr,
                          p.cluster_subnet))
        ns = ["-n", host.netns]
        for outer, inner, bridge, addr, subnet in links:
            if not _exists("link", outer):
                _ip("link", "add", outer, "type", "veth", "peer", "name", inner, "netns", host.netns)
            _ip("link", "set", outer, "master", bridge, "up")
            _ip(*ns, "addr", "replace", f"{addr}/{p.prefixlen(subnet)}", "dev", inner)
            _ip(*ns, "link", "set", inner, "up")
        _ip(*ns, "link", "set", "lo", "up")

    def namespace_pids(self, host: NsHost) -> list[int]:
        if not _exists("netns", host.netns):
            return []
        out = _ip("netns", "pids", host.netns, check=False).stdout.decode()
        return [int(x) for x in out.split() if x.isdigit()]

    def remove(self) -> list[str]:
        """Delete veths, namespaces, UTS bind mounts and bridges of the plan that exist."""
        p = self.plan
        removed: list[str] = []
        for host in p.hosts:
            for veth in (host.public_veth, host.cluster_veth):
                if veth and _exists("link", veth):
                    _ip("link", "del", veth, check=False)
                    removed.append(veth)
            if _exists("netns", host.netns):
                _ip("netns", "del", host.netns, check=False)
                removed.append(host.netns)
            uts = Path(host.uts_file)
            if _uts_mounted(uts):
                _run(["umount", str(uts)], f"unmount {uts}")
            with contextlib.suppress(OSError):
                uts.unlink()
        for bridge in (p.public_bridge, p.cluster_bridge):
            if _exists("link", bridge):
                _ip("link", "del", bridge, check=False)
                removed.append(bridge)
        return removed


def _run(argv: list[str], what: str) -> None:
    proc = subprocess.run(argv, capture_output=True, timeout=30, check=False)
    if proc.returncode != 0:
        raise HostNetworkError(f"{what}: {proc.stderr.decode(errors='replace').strip()}")


def _uts_mounted(path: Path) -> bool:
    target = str(path)
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            fields = line.split()
            if len(fields) > 4 and fields[4] == target:
                return True
    return False
