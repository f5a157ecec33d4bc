"""Per-host tables of one (step, mode) in the report, like the all-flash studies': per OSD
device (with the OSDs it serves), per NIC (named by the Ceph network it carries: public /
cluster) and per client. Hosts are the series' `host` label where the scrape targets carry one
(multi-host clusters), else Prometheus' `instance` (see `step_system.host_of`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from cephscope.runner.report.step_system import SystemFigures

Table = tuple[str, list[str], list[list[str]]]  # title, header, body
Fmt = Callable[..., str]


def device_table(s: SystemFigures, fmt: Fmt) -> Table:
    return (("OSD devices" if s.osd_devices_only else "disks (all devices)"),
            ["host", "device", "OSDs", "IOPS", "await ms", "util %", "read MiB/s",
             "write MiB/s"],
            [[d.host, d.device, d.osds or "-", fmt(d.iops, digits=0),
              fmt(d.await_seconds, 1e3, 2), fmt(d.util_ratio, 100),
              fmt(d.read_bytes_per_second, 1 / 2**20), fmt(d.write_bytes_per_second, 1 / 2**20)]
             for d in s.devices])


def nic_table(s: SystemFigures, fmt: Fmt) -> Table:
    return ("NICs", ["host", "device", "network", "rx MiB/s", "tx MiB/s"],
            [[n.host, n.device, n.network or "-", fmt(n.receive_bytes_per_second, 1 / 2**20),
              fmt(n.transmit_bytes_per_second, 1 / 2**20)] for n in s.nics])


def client_table(result: Mapping[str, Any], fmt: Fmt) -> Table | None:
    """One row per client of a mode run on several clients (None: one client)."""
    clients = result.get("clients") or {}
    if not clients:
        return None
    body = []
    for name, r in sorted(clients.items()):
        pct = r.get("latency_percentiles_seconds") or {}
        body.append([name, fmt(r.get("iops"), digits=0),
                     fmt(r.get("bandwidth_bytes_per_second"), 1 / 2**20),
                     fmt(r.get("latency_avg_seconds"), 1e3, 2),
                     fmt(pct.get("99", pct.get("99.0")), 1e3, 2),
                     fmt(r.get("latency_max_seconds"), 1e3, 2)])
    return ("clients", ["client", "IOPS", "MiB/s", "lat avg ms", "lat p99 ms", "lat max ms"],
            body)


def blamed_place(host: str | None, device: str | None) -> str:
    """"eth1 on host2" / "loop3 on host1": where a bottleneck sits."""
    return f"{device} on {host}" if host else str(device)
