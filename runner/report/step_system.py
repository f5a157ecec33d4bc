"""System figures of one step's mode window, computed from the step's stored prometheus.json
(see `system_metrics`): nothing here talks to Prometheus, so a report made offline equals one
made online.

Per window: the busiest host's CPU (the headline), per-host CPU by mode (user, system, iowait),
per-core busy fractions (the busiest core), per OSD device IOPS / await / util, per NIC rx / tx,
OSD thread-group CPU seconds per second, and OSD-side latency percentiles from the deltas of the
OSD latency histogram buckets over the window. Every per-host figure is keyed by the series'
`host` label (the file_sd targets of a multi-host cluster carry it), else by Prometheus'
`instance` (a single host, or targets without the label); see `host_of`.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from cephscope.figures import RGW_OPERATIONS, cpu_is_busy, rgw_op_counters
from cephscope.runner.histogram_points import add_cumulative, bucket_points
from cephscope.runner.window_rates import SeriesRate, raw_points, series_rates

# Percentiles taken from the OSD latency histograms (labels as in fio's: "50", "99", "99.9").
OSD_PERCENTILES = ("50", "99", "99.9")

Window = tuple[float, float]


def host_of(labels: Mapping[str, str]) -> str:
    """The host a series belongs to: its `host` label where the scrape target carries one,
    else Prometheus' `instance` (host:port of the target)."""
    return labels.get("host") or labels.get("instance", "")


# (host, name, value) triples; host "" stands for any host (series without a `host` label)
HostKeyed = frozenset[tuple[str, str, str]]


@dataclass(frozen=True)
class OsdTopology:
    """Devices and interfaces the OSDs use (from cephscope_osd_device_info /
    cephscope_osd_network_info), to keep other disks and NICs of the host out of the figures,
    and to name them: which OSDs a device serves, which Ceph network (public / cluster) an
    interface carries."""

    devices: frozenset[str] = frozenset()
    interfaces: frozenset[str] = frozenset()
    # (host label or "", device, ceph_daemon) of every OSD device
    device_osds: HostKeyed = frozenset()
    # (host label or "", interface, network) of every OSD network
    interface_networks: HostKeyed = frozenset()

    # Looked up once per disk and NIC series of every step: indexed, not scanned (1,000 OSDs
    # made the scans a million comparisons per step).
    @cached_property
    def _device_index(self) -> dict[tuple[str, str], set[str]]:
        return _index(self.device_osds)

    @cached_property
    def _interface_index(self) -> dict[tuple[str, str], set[str]]:
        return _index(self.interface_networks)

    @cached_property
    def _devices_have_hosts(self) -> bool:
        return any(h for h, _n, _v in self.device_osds)

    @staticmethod
    def _names(index: dict[tuple[str, str], set[str]], host: str, name: str) -> str:
        """Comma-joined values for (host, name); entries without a host label match by name
        alone (a single-host run keys its node_exporter series by instance, which differs from
        the exporter's)."""
        exact = index.get((host, name), set()) if host else set()
        if not exact:
            exact = index.get(("", name), set())
        return ",".join(sorted(exact, key=_natural))

    def is_osd_device(self, host: str, device: str) -> bool:
        """Whether a disk series of `host` is an OSD's device. Where the exporters' series
        carry `host` labels the pair must match: /proc/diskstats is not per network
        namespace, so every namespace host's node_exporter lists every OSD's device."""
        if self._devices_have_hosts:
            return (host, device) in self._device_index
        return device in self.devices

    def osds_of(self, host: str, device: str) -> str:
        return self._names(self._device_index, host, device)

    def network_of(self, host: str, interface: str) -> str:
        """"public", "cluster", "public,cluster" (one NIC carries both) or "" (not an OSD's)."""
        return self._names(self._interface_index, host, interface)


def _index(entries: HostKeyed) -> dict[tuple[str, str], set[str]]:
    """(host, name) -> values of the (host, name, value) entries."""
    index: dict[tuple[str, str], set[str]] = {}
    for host, name, value in entries:
        index.setdefault((host, name), set()).add(value)
    return index


def _natural(text: str) -> tuple[str, int]:
    """Sort key: osd.2 before osd.10."""
    head, _sep, tail = text.rpartition(".")
    return (head, int(tail)) if tail.isdigit() else (text, -1)


def topology_from_series(device_series: Iterable[Mapping[str, Any]],
                         network_series: Iterable[Mapping[str, Any]]) -> OsdTopology:
    devices, interfaces = set(), set()
    device_osds, interface_networks = set(), set()
    for series in device_series:
        m = series.get("metric", {})
        if m.get("device"):
            devices.add(m["device"])
            device_osds.add((m.get("host", ""), m["device"], m.get("ceph_daemon", "?")))
    for series in network_series:
        m = series.get("metric", {})
        if m.get("interface"):
            interfaces.add(m["interface"])
            interface_networks.add((m.get("host", ""), m["interface"], m.get("network", "?")))
    return OsdTopology(frozenset(devices), frozenset(interfaces), frozenset(device_osds),
                       frozenset(interface_networks))


def topology_in(prometheus: Mapping[str, Any]) -> OsdTopology:
    """Topology stored with the step's metrics."""
    queries = prometheus.get("queries", {})
    devices = (queries.get("osd_device_info") or {}).get("result") or []
    networks = (queries.get("osd_network_info") or {}).get("result") or []
    return topology_from_series(devices, networks)


@dataclass(frozen=True)
class DeviceFigures:
    host: str
    device: str
    iops: float | None
    await_seconds: float | None
    util_ratio: float | None
    read_bytes_per_second: float | None
    write_bytes_per_second: float | None
    osds: str = ""  # the OSDs on this device ("osd.0,osd.3"), "" when not known


@dataclass(frozen=True)
class NicFigures:
    host: str
    device: str
    receive_bytes_per_second: float
    transmit_bytes_per_second: float
    network: str = ""  # the Ceph network it carries: "public", "cluster" or both, "" unknown


@dataclass
class SystemFigures:
    """Window means of the system metrics (None / empty when not available)."""

    cpu_busy_ratio: float | None = None
    cpu_instance: str | None = None  # the busiest host (see `host_of`)
    disk_util_ratio: float | None = None
    disk_device: str | None = None
    disk_host: str | None = None
    disk_await_seconds: float | None = None
    disk_iops: float | None = None
    nic_bytes_per_second: float | None = None
    nic_device: str | None = None
    nic_host: str | None = None
    osd_ops_per_second: float | None = None
    osd_op_latency_seconds: float | None = None
    # disk/NIC figures limited to the OSDs' devices (False: every device of the host)
    osd_devices_only: bool = False
    # host -> CPU mode ("user", "system", "iowait", ...) -> fraction of all its CPUs
    cpu_modes: dict[str, dict[str, float]] = field(default_factory=dict)
    # (host, cpu) -> busy fraction of that one CPU (user+system+irq+..., not iowait or steal)
    cores: dict[tuple[str, str], float] = field(default_factory=dict)
    devices: list[DeviceFigures] = field(default_factory=list)
    nics: list[NicFigures] = field(default_factory=list)
    # (host, ceph_daemon, thread_group) -> CPU seconds per second
    thread_groups: dict[tuple[str, str, str], float] = field(default_factory=dict)
    # OSD-side latency percentiles over the window, all OSDs and ops together ("99" -> seconds)
    osd_latency_percentiles: dict[str, float] = field(default_factory=dict)
    osd_latency_count: float | None = None
    # ceph_daemon -> p99 seconds over the window
    osd_p99_by_daemon: dict[str, float] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    # "scrapes": rates from the raw scrapes inside the window (see `window_rates`); "rate":
    # means of Prometheus rate()s (runs stored before the raw counters were pulled)
    source: str = "rate"
    # fewest scrapes inside the window any figure rests on (None: not known, source "rate")
    scrapes: int | None = None
    # the window held fewer than two scrapes: no rate can be taken without leaving it
    too_short: bool = False
    # seconds between the first and the last scrape used (the span the rates cover)
    covered_seconds: float | None = None
    # counters (COUNTER_SERIES names) with no series holding two scrapes inside the window:
    # their figures are empty (targets scrape at different moments: one can have two scrapes
    # inside a window where another has one)
    short_counters: list[str] = field(default_factory=list)
    # the RADOS Gateways, all together (cephscope.figures' RGW figures; None: no gateway)
    rgw_requests_per_second: float | None = None
    rgw_failed_requests_per_second: float | None = None
    # op kind ("get", "put") -> ops/s, bytes/s, average latency (s)
    rgw_ops_per_second: dict[str, float] = field(default_factory=dict)
    rgw_bytes_per_second: dict[str, float] = field(default_factory=dict)
    rgw_latency_seconds: dict[str, float] = field(default_factory=dict)

    @property
    def has_rgw(self) -> bool:
        return self.rgw_requests_per_second is not None

    @property
    def available(self) -> bool:
        return self.cpu_busy_ratio is not None or self.disk_util_ratio is not None

    @property
    def max_core(self) -> tuple[str, str, float] | None:
        """(host, cpu, busy fraction) of the busiest core."""
        if not self.cores:
            return None
        (host, cpu), value = max(self.cores.items(), key=lambda kv: (kv[1], kv[0]))
        return host, cpu, value

    @property
    def busy_cores(self) -> float | None:
        """CPU cores' worth of work on all hosts together."""
        return sum(self.cores.values()) if self.cores else None

    def host_busy_ratio(self, host: str) -> float | None:
        """A host's CPU busy fraction from its modes (iowait and steal are not busy)."""
        modes = self.cpu_modes.get(host)
        return sum(v for m, v in modes.items() if cpu_is_busy(m)) if modes else None

    def thread_group_totals(self) -> dict[str, float]:
        """thread group -> CPU seconds per second, summed over OSDs and hosts."""
        totals: dict[str, float] = {}
        for (_host, _daemon, group), value in self.thread_groups.items():
            totals[group] = totals.get(group, 0.0) + value
        return totals


def _note_busiest_disk(figures: SystemFigures) -> None:
    """The step's disk figures are its busiest device's (by utilisation)."""
    busiest = max((d for d in figures.devices if d.util_ratio is not None),
                  key=lambda d: d.util_ratio or 0.0, default=None)
    if busiest is not None:
        figures.disk_util_ratio, figures.disk_device = busiest.util_ratio, busiest.device
        figures.disk_host = busiest.host
        figures.disk_await_seconds, figures.disk_iops = busiest.await_seconds, busiest.iops


def series_means(entry: Mapping[str, Any], window: Window | None = None
                 ) -> list[tuple[dict[str, str], float]]:
    """Mean of every series of a query_range result (NaN points dropped), over the points
    inside `window` (start, end) when given and any fall inside it, else over all points."""
    out = []
    for series in entry.get("result", []) or []:
        points = raw_points(series)
        inside = [v for t, v in points if window and window[0] <= t <= window[1]]
        values = inside or [v for _t, v in points]
        if values:
            out.append((dict(series.get("metric", {})), statistics.fmean(values)))
    return out


def counter_increase(points: Sequence[tuple[float, float]], window: Window | None,
                     settle_seconds: float = 0.0) -> float | None:
    """Increase of a cumulative counter over the window, from its sampled values: from the last
    sample at or before the window's start (else the first inside) to the last sample at or
    before the window's end + `settle_seconds` (one scrape interval: a value read at time t is
    the last scrape before t, so the one that saw the window's end comes up to an interval
    later); a drop is a counter reset (the process restarted), counted from zero like rate()."""
    if window is None:
        chosen = list(points)
    else:
        before = [p for p in points if p[0] <= window[0]]
        inside = [p for p in points if window[0] < p[0] <= window[1] + settle_seconds]
        chosen = before[-1:] + inside
    if len(chosen) < 2:
        return None
    total = 0.0
    for (_t0, v0), (_t1, v1) in itertools.pairwise(chosen):
        total += v1 - v0 if v1 >= v0 else v1
    return total


def histogram_quantile(q: float, buckets: Mapping[float, float]) -> float | None:
    """Prometheus' histogram_quantile over cumulative bucket counts keyed by upper bound
    (math.inf for +Inf): linear within the bucket, lowest bucket from 0, +Inf answers the
    highest finite bound."""
    if not buckets or math.inf not in buckets:
        return None
    bounds = sorted(buckets)
    total = buckets[math.inf]
    if total <= 0:
        return None
    rank = q * total
    lower_bound, lower_count = 0.0, 0.0
    for bound in bounds:
        count = buckets[bound]
        if count >= rank:
            if math.isinf(bound):
                return lower_bound
            if count == lower_count:
                return bound
            return lower_bound + (bound - lower_bound) * (rank - lower_count) / (count - lower_count)
        lower_bound, lower_count = bound, count
    return lower_bound


def ops_of_mode(mode: str | None) -> frozenset[str] | None:
    """The OSD op kinds (histogram `op` label) a benchmark mode issues; None: all of them.
    Reads (rados bench seq/rand, fio read/randread) are "r", writes "w"; mixed modes all."""
    name = (mode or "").lower()
    if name in ("seq", "rand") or (name.endswith("read") and "rw" not in name):
        return frozenset({"r"})
    if name.endswith("write") and "rw" not in name:
        return frozenset({"w"})
    return None


def osd_histogram_deltas(entry: Mapping[str, Any], window: Window | None,
                         ops: frozenset[str] | None = None, settle_seconds: float = 0.0
                         ) -> dict[str, dict[float, float]]:
    """ceph_daemon -> {le: increase over the window} of the OSD latency histogram, summed over
    the op kinds `ops` (None: all)."""
    # one histogram per label set without `le`: its classic `le` series together, or one
    # native histogram (Prometheus 3 storing it as NHCB, listing only non-empty buckets)
    histograms: dict[tuple[tuple[str, str], ...], dict[float, float]] = {}
    for series in entry.get("result", []) or []:
        metric = series.get("metric", {})
        if ops is not None and metric.get("op") not in ops:
            continue
        key = tuple(sorted((k, v) for k, v in metric.items() if k != "le"))
        for le, points in bucket_points(series).items():
            increase = counter_increase(points, window, settle_seconds)
            if increase is not None:
                histograms.setdefault(key, {})[le] = increase
    per_daemon: dict[str, list[dict[float, float]]] = {}
    for key, buckets in histograms.items():
        per_daemon.setdefault(dict(key).get("ceph_daemon", "?"), []).append(buckets)
    return {daemon: add_cumulative(found) for daemon, found in per_daemon.items()}


def _apply_osd_histograms(figures: SystemFigures, entry: Mapping[str, Any],
                          window: Window | None, ops: frozenset[str] | None,
                          settle_seconds: float) -> None:
    deltas = osd_histogram_deltas(entry, window, ops, settle_seconds)
    merged = add_cumulative(list(deltas.values()))
    for daemon, buckets in deltas.items():
        p99 = histogram_quantile(0.99, buckets)
        if p99 is not None:
            figures.osd_p99_by_daemon[daemon] = p99
    figures.osd_latency_count = merged.get(math.inf)
    for name in OSD_PERCENTILES:
        value = histogram_quantile(float(name) / 100.0, merged)
        if value is not None:
            figures.osd_latency_percentiles[name] = value


def summarize_system(prometheus: Mapping[str, Any] | None,
                     topology: OsdTopology | None = None,
                     window: Window | None = None, mode: str | None = None) -> SystemFigures:
    """Window means; disks and NICs limited to the OSDs' own when the topology is known;
    OSD-side percentiles of the op kinds the mode issues (see `ops_of_mode`)."""
    figures = SystemFigures()
    if not prometheus:
        return figures
    queries = prometheus.get("queries", {})
    for name, entry in queries.items():
        if isinstance(entry, Mapping) and entry.get("error"):
            figures.errors.append(f"{name}: {entry['error']}")
    stored = topology_in(prometheus)
    topology = stored if stored.devices or stored.interfaces else (topology or OsdTopology())
    figures.osd_devices_only = bool(topology.devices)

    def means(name: str) -> list[tuple[dict[str, str], float]]:
        entry = queries.get(name)
        found = series_means(entry, window) if isinstance(entry, Mapping) else []
        if name.startswith("disk_") and topology.devices:
            found = [(m, v) for m, v in found
                     if topology.is_osd_device(host_of(m), m.get("device", ""))]
        if name.startswith("nic_") and topology.interfaces:
            found = [(m, v) for m, v in found if m.get("device") in topology.interfaces]
        return found

    def by_host_device(name: str) -> dict[tuple[str, str], float]:
        return {(host_of(m), m.get("device", "?")): v for m, v in means(name)}

    cpu = means("cpu_busy_ratio")
    if cpu:
        labels, value = max(cpu, key=lambda lv: lv[1])
        figures.cpu_busy_ratio, figures.cpu_instance = value, host_of(labels)
    for labels, value in means("cpu_mode_ratio"):
        figures.cpu_modes.setdefault(host_of(labels), {})[labels.get("mode", "?")] = value
    for labels, value in means("cpu_core_busy_ratio"):
        figures.cores[(host_of(labels), labels.get("cpu", "?"))] = value

    util = by_host_device("disk_util_ratio")
    awaits = by_host_device("disk_await_seconds")
    reads, writes = by_host_device("disk_read_iops"), by_host_device("disk_write_iops")
    read_bytes = by_host_device("disk_read_bytes_per_second")
    write_bytes = by_host_device("disk_write_bytes_per_second")
    for key in sorted(set(util) | set(reads) | set(writes)):
        iops = (reads.get(key, 0.0) + writes.get(key, 0.0)
                if key in reads or key in writes else None)
        figures.devices.append(DeviceFigures(key[0], key[1], iops, awaits.get(key), util.get(key),
                                             read_bytes.get(key), write_bytes.get(key),
                                             topology.osds_of(*key)))
    _note_busiest_disk(figures)

    rx, tx = by_host_device("nic_receive_bytes_per_second"), by_host_device(
        "nic_transmit_bytes_per_second")
    for key in sorted(set(rx) | set(tx)):
        figures.nics.append(NicFigures(key[0], key[1], rx.get(key, 0.0), tx.get(key, 0.0),
                                       topology.network_of(*key)))
    if figures.nics:
        top = max(figures.nics, key=lambda n: n.receive_bytes_per_second + n.transmit_bytes_per_second)
        figures.nic_device, figures.nic_host = top.device, top.host
        figures.nic_bytes_per_second = top.receive_bytes_per_second + top.transmit_bytes_per_second

    osd_ops = means("osd_ops_per_second")
    if osd_ops:
        figures.osd_ops_per_second = sum(v for _m, v in osd_ops)
    osd_lat = means("osd_op_latency_seconds")
    if osd_lat:
        figures.osd_op_latency_seconds = statistics.fmean(v for _m, v in osd_lat)
    for labels, value in means("osd_thread_cpu_seconds_per_second"):
        key = (host_of(labels), labels.get("ceph_daemon", "?"),
               labels.get("thread_group", "?"))
        figures.thread_groups[key] = value
    counters = prometheus.get("counters")
    span = window or _stored_window(prometheus)
    if isinstance(counters, Mapping) and counters and span is not None:
        _apply_counters(figures, counters, span, topology)
    histograms = queries.get("osd_op_latency_bucket")
    if isinstance(histograms, Mapping):
        interval = prometheus.get("scrape_interval_seconds")
        _apply_osd_histograms(figures, histograms, window, ops_of_mode(mode),
                              float(interval) if isinstance(interval, int | float) else 0.0)
    return figures


def _stored_window(prometheus: Mapping[str, Any]) -> Window | None:
    start, end = prometheus.get("start"), prometheus.get("end")
    if isinstance(start, int | float) and isinstance(end, int | float):
        return float(start), float(end)
    return None


def _apply_counters(figures: SystemFigures, counters: Mapping[str, Any], window: Window,
                    topology: OsdTopology) -> None:
    """Replace the rate()-based figures by ones from the raw scrapes inside the window. A
    window with fewer than two scrapes leaves every rate figure empty and flagged."""
    figures.source = "scrapes"
    for cpu_field in ("cpu_busy_ratio", "cpu_instance", "disk_util_ratio", "disk_device",
                      "disk_host", "disk_await_seconds", "disk_iops", "nic_bytes_per_second",
                      "nic_device", "nic_host", "osd_ops_per_second", "osd_op_latency_seconds"):
        setattr(figures, cpu_field, None)
    figures.cpu_modes, figures.cores, figures.devices, figures.nics = {}, {}, [], []
    figures.thread_groups = {}
    rates: dict[str, list[SeriesRate]] = {}
    short_series: list[int] = []
    for name, entry in counters.items():
        if not isinstance(entry, Mapping):
            continue
        if entry.get("error"):
            figures.errors.append(f"{name}: {entry['error']}")
            continue
        found, short = series_rates(entry.get("result") or [], window)
        rates[name] = found
        short_series += short
        if short and not found:
            figures.short_counters.append(name)
    used = [r.rate for found in rates.values() for r in found]
    if not used:
        figures.too_short = bool(short_series)
        figures.scrapes = max(short_series) if short_series else None
        return
    # the fewest scrapes any figure rests on (series left out for having one are not figures)
    figures.scrapes = min(r.scrapes for r in used)
    figures.covered_seconds = min(r.seconds for r in used)

    cpu_rates = rates.get("cpu_seconds", [])
    ncpus: dict[str, set[str]] = {}
    for r in cpu_rates:
        ncpus.setdefault(host_of(r.labels), set()).add(r.labels.get("cpu", "?"))
    for r in cpu_rates:
        host, mode, cpu = host_of(r.labels), r.labels.get("mode", "?"), r.labels.get("cpu", "?")
        if mode == "idle":
            continue
        value = r.rate.per_second
        modes = figures.cpu_modes.setdefault(host, {})
        modes[mode] = modes.get(mode, 0.0) + value / len(ncpus[host])
        if cpu_is_busy(mode):  # iowait and steal are not work (cephscope.figures)
            figures.cores[(host, cpu)] = figures.cores.get((host, cpu), 0.0) + value
    busy = {host: figures.host_busy_ratio(host) or 0.0 for host in figures.cpu_modes}
    if busy:
        figures.cpu_instance, figures.cpu_busy_ratio = max(busy.items(), key=lambda kv: kv[1])

    def by_device(name: str, nic: bool = False) -> dict[tuple[str, str], SeriesRate]:
        out = {}
        for r in rates.get(name, []):
            host, device = host_of(r.labels), r.labels.get("device", "?")
            if nic and topology.interfaces and device not in topology.interfaces:
                continue
            if not nic and topology.devices and not topology.is_osd_device(host, device):
                continue
            out[(host, device)] = r
        return out

    util, reads, writes = (by_device("disk_io_time_seconds"), by_device("disk_reads"),
                           by_device("disk_writes"))
    rbytes, wbytes = by_device("disk_read_bytes"), by_device("disk_written_bytes")
    rtime, wtime = by_device("disk_read_time_seconds"), by_device("disk_write_time_seconds")

    def per_second(found: Mapping[tuple[str, str], SeriesRate], key: tuple[str, str]
                   ) -> float | None:
        return found[key].rate.per_second if key in found else None

    for key in sorted(set(util) | set(reads) | set(writes)):
        ops = [found[key].rate for found in (reads, writes) if key in found]
        iops = sum(r.per_second for r in ops) if ops else None
        waited = [found[key].rate.increase for found in (rtime, wtime) if key in found]
        completed = sum(r.increase for r in ops)
        # cephscope.figures' await: no I/O completed is 0 (nothing waited), as in the rules
        await_seconds = None
        if waited and ops:
            await_seconds = sum(waited) / completed if completed > 0 else 0.0
        busy = per_second(util, key)
        figures.devices.append(DeviceFigures(key[0], key[1], iops, await_seconds,
                                             None if busy is None else min(busy, 1.0),
                                             per_second(rbytes, key), per_second(wbytes, key),
                                             topology.osds_of(*key)))
    _note_busiest_disk(figures)

    rx, tx = by_device("nic_receive_bytes", nic=True), by_device("nic_transmit_bytes", nic=True)
    for key in sorted(set(rx) | set(tx)):
        figures.nics.append(NicFigures(key[0], key[1], per_second(rx, key) or 0.0,
                                       per_second(tx, key) or 0.0, topology.network_of(*key)))
    if figures.nics:
        top = max(figures.nics,
                  key=lambda n: n.receive_bytes_per_second + n.transmit_bytes_per_second)
        figures.nic_device, figures.nic_host = top.device, top.host
        figures.nic_bytes_per_second = top.receive_bytes_per_second + top.transmit_bytes_per_second

    if rates.get("osd_op"):
        figures.osd_ops_per_second = sum(r.rate.per_second for r in rates["osd_op"])
    lat_sum = sum(r.rate.increase for r in rates.get("osd_op_latency_sum", []))
    lat_count = sum(r.rate.increase for r in rates.get("osd_op_latency_count", []))
    if lat_count > 0:
        figures.osd_op_latency_seconds = lat_sum / lat_count
    for r in rates.get("osd_thread_cpu_seconds", []):
        key3 = (host_of(r.labels), r.labels.get("ceph_daemon", "?"),
                r.labels.get("thread_group", "?"))
        figures.thread_groups[key3] = figures.thread_groups.get(key3, 0.0) + r.rate.per_second
    _apply_rgw(figures, rates)


def _apply_rgw(figures: SystemFigures, rates: Mapping[str, list[SeriesRate]]) -> None:
    """The gateways' figures as cephscope.figures defines them: every series summed, whatever
    its labels; a latency is the increase of the _sum over that of the _count; of the two
    generations of GET/PUT counters (`rgw`, Tentacle's `rgw_op`), the first that has the
    figure (PromQL's `or`)."""
    def per_second(name: str) -> float | None:
        found = rates.get(name) or []
        return sum(r.rate.per_second for r in found) if found else None

    figures.rgw_requests_per_second = per_second("rgw_requests")
    figures.rgw_failed_requests_per_second = per_second("rgw_failed_requests")
    for op in RGW_OPERATIONS:
        generations = [f"rgw_{op}.{g}" for g in range(len(rgw_op_counters(op)))]
        ops = next((v for g in generations if (v := per_second(f"{g}_ops")) is not None), None)
        moved = next((v for g in generations if (v := per_second(f"{g}_bytes")) is not None),
                     None)
        if ops is not None:
            figures.rgw_ops_per_second[op] = ops
        if moved is not None:
            figures.rgw_bytes_per_second[op] = moved
        for g in generations:
            count = sum(r.rate.increase for r in rates.get(f"{g}_latency_count", []))
            if count > 0:  # nothing completed: no latency (the figure's `> 0`)
                total = sum(r.rate.increase for r in rates.get(f"{g}_latency_sum", []))
                figures.rgw_latency_seconds[op] = total / count
                break


def rgw_op_of_mode(mode: str | None) -> str | None:
    """The gateway op kind ("put", "get") a benchmark mode issues (swiftbench's, hsbench's and
    getput's put/get, getput's random putr/getr, a repeated phase's put.2); None otherwise."""
    base = (mode or "").lower().split(".", 1)[0]
    base = base[:-1] if base in ("putr", "getr") else base
    return base if base in RGW_OPERATIONS else None


def mode_window(result: Mapping[str, Any], mode: str | None) -> Window | None:
    """A mode's own window (write vs read; fio's prefill excluded) from a step's result.json,
    else None (the whole step window)."""
    span = ((result.get("timestamps") or {}).get("modes") or {}).get(mode) or {}
    start, end = span.get("start"), span.get("end")
    if isinstance(start, int | float) and isinstance(end, int | float):
        return float(start), float(end)
    return None


def read_stored(path: Any) -> dict[str, Any] | None:
    """A step's prometheus.json (None when absent; an unreadable one becomes an error entry)."""
    import json

    try:
        with open(path) as f:
            data = json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        return {"queries": {"prometheus.json": {"error": f"unreadable: {exc}"}}}
    return data if isinstance(data, dict) else {
        "queries": {"prometheus.json": {"error": "unreadable: not a JSON object"}}}


# summary.csv columns of the system figures (base units: seconds, ratios 0..1, bytes/s)
SYSTEM_COLUMNS = (
    "osd_latency_p50_seconds", "osd_latency_p99_seconds", "osd_latency_p99.9_seconds",
    "cpu_busy_ratio", "cpu_host", "cpu_user_ratio", "cpu_system_ratio", "cpu_iowait_ratio",
    "max_core_busy_ratio", "max_core", "busy_cores", "iops_per_core",
    "disk_util_ratio", "disk_device", "disk_await_seconds", "disk_iops",
    "nic_bytes_per_second", "nic_device", "osd_op_latency_seconds",
    "rgw_requests_per_second", "rgw_ops_per_second", "rgw_latency_seconds",
)


def system_columns(figures: SystemFigures, iops: Any = None, bandwidth: Any = None,
                   mode: str | None = None) -> dict[str, Any]:
    """The SYSTEM_COLUMNS of one (step, mode), plus bandwidth in MiB/s; None when unknown.
    The RGW op/s and latency are of the op kind the mode issues (`rgw_op_of_mode`)."""
    op = rgw_op_of_mode(mode)
    pct = figures.osd_latency_percentiles
    modes = figures.cpu_modes.get(figures.cpu_instance or "", {})
    core = figures.max_core
    cores = figures.busy_cores
    return {
        "bandwidth_mib_per_second": bandwidth / 2**20 if isinstance(bandwidth, int | float) else None,
        "osd_latency_p50_seconds": pct.get("50"), "osd_latency_p99_seconds": pct.get("99"),
        "osd_latency_p99.9_seconds": pct.get("99.9"),
        "cpu_busy_ratio": figures.cpu_busy_ratio, "cpu_host": figures.cpu_instance,
        "cpu_user_ratio": modes.get("user"), "cpu_system_ratio": modes.get("system"),
        "cpu_iowait_ratio": modes.get("iowait"),
        "max_core_busy_ratio": core[2] if core else None,
        "max_core": f"{core[0]}:cpu{core[1]}" if core else None,
        "busy_cores": cores,
        "iops_per_core": iops / cores if isinstance(iops, int | float) and cores else None,
        "disk_util_ratio": figures.disk_util_ratio, "disk_device": figures.disk_device,
        "disk_await_seconds": figures.disk_await_seconds, "disk_iops": figures.disk_iops,
        "nic_bytes_per_second": figures.nic_bytes_per_second, "nic_device": figures.nic_device,
        "osd_op_latency_seconds": figures.osd_op_latency_seconds,
        "rgw_requests_per_second": figures.rgw_requests_per_second,
        "rgw_ops_per_second": figures.rgw_ops_per_second.get(op) if op else None,
        "rgw_latency_seconds": figures.rgw_latency_seconds.get(op) if op else None,
    }
