"""Topology: which host, block devices and network interfaces each local OSD uses.

Series (all ``1``-valued info series unless said otherwise)::

    cephscope_osd_info{ceph_daemon, hostname, objectstore, device_class, ceph_version}
    cephscope_osd_device_info{ceph_daemon, role, device, parent, kind, access, model, serial,
                              wwn, rotational, transport, firmware_rev, scheduler, nodename}
    cephscope_osd_device_nr_requests / _hw_queues / _size_bytes   (gauges, same keys; with
                                                     --collector.topology.device-gauges)
    cephscope_osd_network_info{ceph_daemon, network, interface, address, nodename}
    cephscope_osd_network_speed_bytes{ceph_daemon, network, interface, nodename}   (gauge)
    cephscope_topology_mon_up   1 if this refresh got `osd metadata` from the mon

``device`` and ``interface`` are the names node_exporter puts in the ``device`` label of
``node_disk_*`` / ``node_network_*``; ``nodename`` is this host's uname node name, the
``nodename`` label of node_exporter's ``node_uname_info`` — together they are the join key
(the exporter and node_exporter are different scrape targets, so ``instance`` is not).

Only OSDs with an admin socket on this host are described (devices and interfaces are
resolved against this host's /sys). An OSD in a container or chroot (cephadm, Rook, a dev
cluster running another release) reports paths of its own mount namespace: they are read through
``/proc/<pid>/root`` (pid from the socket's SO_PEERCRED) first, then in this exporter's own view,
and end at the host's block device by major:minor. Refreshed every
``--collector.topology.refresh-interval`` seconds; cached series are served in between.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass

from cephscope.exporter.asok import AsokError, Daemon
from cephscope.exporter.collector import CachedHostCollector, HostContext
from cephscope.exporter.devices import DeviceResolver, Resolution
from cephscope.exporter.exposition import MetricSink
from cephscope.exporter.netinfo import (
    InterfaceAddress,
    interface_for,
    link_speed_bytes,
    local_addresses,
    parse_ceph_addrs,
)
from cephscope.exporter.osdmeta import MonClient, OsdFacts, facts_from_config
from cephscope.exporter.settings import HostSettings, option

log = logging.getLogger("cephscope.exporter.topology")



@dataclass(frozen=True)
class TopologySettings:
    refresh_interval: float = option(
        60.0, "re-read OSD metadata, sysfs and interfaces at most this often", metavar="SECONDS")
    nodename: str = option(
        "", "host identity put in the nodename label; must equal node_exporter's "
        "node_uname_info nodename (empty: this host's uname node name)", metavar="NAME")
    device_gauges: bool = option(
        False, "also export each OSD device's queue/nr_requests, blk-mq hardware queues and "
        "size (cephscope_osd_device_nr_requests, _hw_queues, _size_bytes)")


class TopologyCollector(CachedHostCollector):
    name = "topology"
    help = "OSD -> host, block devices and network interfaces (info series for PromQL joins)"
    default_enabled = True

    settings_type = TopologySettings

    def __init__(
        self,
        settings: TopologySettings | None = None,
        host: HostSettings | None = None,
        *,
        mon: MonClient | None = None,
        addresses: Callable[[], list[InterfaceAddress]] | None = None,
    ) -> None:
        super().__init__(settings, host)
        self.refresh_interval_seconds = self.settings.refresh_interval
        self.nodename = self.settings.nodename or os.uname().nodename
        paths, ceph = self.host.paths, self.host.ceph
        self.sys_root = paths.sysfs
        self.proc_root = paths.procfs
        self.resolver = DeviceResolver(sys_root=paths.sysfs, dev_root=paths.devfs,
                                       udev_data=paths.udev_data, host_root=paths.rootfs)
        self.mon = mon or MonClient(conffile=ceph.conf, name=ceph.name, keyring=ceph.keyring,
                                    timeout=ceph.mon_timeout)
        self._addresses = addresses or (lambda: local_addresses(self.proc_root))
        # Last problem logged per subject: a line when it appears or changes, not every refresh.
        self._logged: dict[str, str] = {}

    def _note(self, subject: str, message: str, level: int = logging.WARNING) -> None:
        if self._logged.get(subject) != message:
            self._logged[subject] = message
            log.log(level, "%s", message)

    def _clear(self, subject: str) -> None:
        self._logged.pop(subject, None)

    # -- facts -------------------------------------------------------------------------------

    def _mon_facts(self) -> dict[str, OsdFacts] | None:
        try:
            facts = self.mon.osd_facts()
        except ConnectionError as exc:
            self._note("mon", f"topology: OSD metadata from the mon unavailable, using admin "
                       f"sockets and OSD data dirs instead: {exc}")
            return None
        if "mon" in self._logged:
            log.info("topology: OSD metadata from the mon available again")
            self._clear("mon")
        return facts

    def _asok_config(self, ctx: HostContext, daemon: Daemon) -> tuple[dict, dict] | None:
        """The OSD's `config show` and `version`, or None (logged) when its socket fails."""
        session = ctx.session(daemon)
        try:
            config = session.command("config show")
            version = session.command("version")
            if not isinstance(config, dict) or not isinstance(version, dict):
                raise AsokError(daemon.asok_path, "config show/version did not return objects")
        except AsokError as exc:
            self._note(f"{daemon.name}/asok", f"topology: {daemon.name}: admin socket: {exc}")
            return None
        self._clear(f"{daemon.name}/asok")
        return config, version

    def _asok_facts(
        self, daemon: Daemon, config: dict, version: dict, resolvers: list[DeviceResolver]
    ) -> OsdFacts:
        return facts_from_config(
            daemon.id, config, version, self.nodename,
            lexists=lambda p: any(os.path.lexists(r.map_path(p)) for r in resolvers),
        )

    def _resolvers_for(self, ctx: HostContext, daemon: Daemon) -> list[DeviceResolver]:
        """Where the OSD's paths are looked up: its own root first when it differs from ours."""
        try:
            pid = ctx.session(daemon).pid()
        except AsokError:
            pid = None
        if not pid:
            return [self.resolver]
        root = os.path.join(self.proc_root, str(pid), "root")
        try:
            theirs, ours = os.stat(root), os.stat(self.resolver.host_root or "/")
        except OSError as exc:
            self._note(f"{daemon.name}/root", f"topology: {daemon.name}: cannot read {root} "
                       f"({exc.strerror}); resolving its paths in this exporter's view",
                       logging.INFO)
            return [self.resolver]
        if (theirs.st_dev, theirs.st_ino) == (ours.st_dev, ours.st_ino):
            return [self.resolver]
        return [self.resolver.within(root), self.resolver]

    # -- refresh -----------------------------------------------------------------------------

    def refresh(self, ctx: HostContext, sink: MetricSink) -> None:
        osds = [d for d in ctx.daemons if d.type == "osd"]
        mon_facts = self._mon_facts() if osds else None
        sink.gauge(
            "cephscope_topology_mon_up",
            "1 if the last topology refresh read `osd metadata` from the mon, 0 if it fell "
            "back to admin sockets.",
        ).add(1 if mon_facts is not None else 0)
        try:
            addresses = self._addresses()
        except OSError as exc:
            self._note("addresses", f"topology: cannot list this host's addresses: {exc}")
            addresses = []
        for daemon in osds:
            local = self._asok_config(ctx, daemon)
            facts = mon_facts.get(daemon.id) if mon_facts is not None else None
            if facts is not None and local is not None and self.mon.fsid:
                # The same OSD id in another cluster (a second cluster on this host, or
                # --ceph.conf naming the wrong one) must not lend its metadata.
                osd_fsid = str(local[0].get("fsid", ""))
                if osd_fsid and osd_fsid != self.mon.fsid:
                    self._note(f"{daemon.name}/fsid", f"topology: {daemon.name} belongs to "
                               f"cluster {osd_fsid}, the mon to {self.mon.fsid}: using its "
                               "admin socket")
                    facts = None
            if facts is None and local is None:
                self._note(daemon.name, f"topology: {daemon.name}: no metadata from the "
                           "mon and none from its admin socket; OSD left out")
                continue
            resolvers = self._resolvers_for(ctx, daemon)
            if facts is None:
                facts = self._asok_facts(daemon, *local, resolvers)
            self._clear(daemon.name)
            self._emit_osd(daemon.name, facts, addresses, sink, resolvers)

    def _emit_osd(
        self,
        ceph_daemon: str,
        facts: OsdFacts,
        addresses: list[InterfaceAddress],
        sink: MetricSink,
        resolvers: list[DeviceResolver] | None = None,
    ) -> None:
        resolved: dict[str, Resolution] = {}
        for role, paths in facts.device_paths.items():
            res = self._resolve_first(paths, resolvers or [self.resolver])
            subject = f"{ceph_daemon}/{role}"
            if res.device is None:
                tried = ", ".join(paths) or "no path in metadata"
                self._note(subject, f"topology: {ceph_daemon}: {role} device unknown "
                           f"({res.reason}; tried {tried}; metadata from {facts.source})")
                continue
            self._clear(subject)
            resolved[role] = res
        device_class = facts.device_class
        if not device_class and "data" in resolved:
            # What the OSD itself picks as default_device_class.
            device_class = {"0": "ssd", "1": "hdd"}.get(resolved["data"].device.rotational, "")
        sink.gauge(
            "cephscope_osd_info",
            "OSD identity: host name (as Ceph reports it), object store, CRUSH device class, "
            "Ceph version. Always 1.",
        ).add(1, {
            "ceph_daemon": ceph_daemon,
            "hostname": facts.hostname,
            "objectstore": facts.objectstore,
            "device_class": device_class,
            "ceph_version": facts.ceph_version,
        })
        info = sink.gauge(
            "cephscope_osd_device_info",
            "Block device of an OSD role (data/db/wal) as node_exporter's diskstats names it "
            "(device), the physical disk(s) under it (parent) and sysfs/udev attributes. "
            "Join with node_disk_* on (nodename, device). Always 1.",
        )
        nr_requests = sink.gauge(
            "cephscope_osd_device_nr_requests",
            "Block-layer queue depth (queue/nr_requests) of the OSD's device.",
        )
        hw_queues = sink.gauge(
            "cephscope_osd_device_hw_queues",
            "Number of blk-mq hardware queues (mq/*) of the OSD's device.",
        )
        size = sink.gauge("cephscope_osd_device_size_bytes", "Size of the OSD's block device.")
        for role, res in resolved.items():
            dev = res.device
            assert dev is not None
            keys = {"ceph_daemon": ceph_daemon, "role": role, "device": dev.name,
                    "nodename": self.nodename}
            info.add(1, {
                **keys,
                "parent": dev.parent,
                "kind": dev.kind,
                "access": res.access,
                "model": dev.model,
                "serial": dev.serial,
                "wwn": dev.wwn,
                "rotational": dev.rotational,
                "transport": dev.transport,
                "firmware_rev": dev.firmware_rev,
                "scheduler": dev.scheduler,
            })
            if not self.settings.device_gauges:
                continue  # 3 series per device that no shipped figure reads
            if dev.nr_requests is not None:
                nr_requests.add(dev.nr_requests, keys)
            if dev.hw_queues is not None:
                hw_queues.add(dev.hw_queues, keys)
            if dev.size_bytes is not None:
                size.add(dev.size_bytes, keys)
        self._emit_network(ceph_daemon, facts, addresses, sink)

    def _resolve_first(self, paths: list[str], resolvers: list[DeviceResolver]) -> Resolution:
        """First path that resolves, in the OSD's own view before ours; else the first failure
        (the most telling reason)."""
        first: Resolution | None = None
        for resolver in resolvers:
            for path in paths:
                res = resolver.resolve(path)
                if res.device is not None:
                    return res
                first = first or res
        return first or Resolution("", None, reason="no device path reported")

    def _emit_network(
        self,
        ceph_daemon: str,
        facts: OsdFacts,
        addresses: list[InterfaceAddress],
        sink: MetricSink,
    ) -> None:
        info = sink.gauge(
            "cephscope_osd_network_info",
            "Interface carrying an OSD's public or cluster network address. Join with "
            "node_network_* on (nodename, device=interface). Always 1.",
        )
        speed = sink.gauge(
            "cephscope_osd_network_speed_bytes",
            "Link speed of the interface in bytes/s, where the kernel knows it "
            "(absent for lo and virtual links).",
        )
        for network in ("public", "cluster"):
            addrs = parse_ceph_addrs(facts.addrs.get(network, ""))
            subject = f"{ceph_daemon}/{network}"
            if not addrs:
                self._note(subject, f"topology: {ceph_daemon}: no {network} address in "
                           f"metadata ({facts.addrs.get(network, '')!r})", logging.INFO)
                continue
            address = addrs[0]
            interface = interface_for(address, addresses) or facts.ifaces.get(network, "")
            if not interface:
                self._note(subject, f"topology: {ceph_daemon}: no local interface holds the "
                           f"{network} address {address}")
                continue
            self._clear(subject)
            keys = {"ceph_daemon": ceph_daemon, "network": network, "interface": interface,
                    "nodename": self.nodename}
            info.add(1, {**keys, "address": address})
            link_speed = link_speed_bytes(interface, self.sys_root)
            if link_speed is not None:
                speed.add(link_speed, keys)


COLLECTOR = TopologyCollector
