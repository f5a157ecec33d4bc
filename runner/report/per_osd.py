"""The report's per-OSD tables, bounded: a cluster of 1,000 OSDs gives a step as many rows as
one of a dozen. Up to `TOP_OSDS` OSDs (or OSD devices) each one has its row, as on a small
cluster; beyond, a table lists the `TOP_OSDS` with the highest figure (the slowest p99, the
busiest threads, the busiest devices) and another gives the figure's distribution over all of
them (min / p50 / p90 / max), so an outlier is named and the spread is seen without a row per
OSD (docs/benchmarks.md, *The report at scale*).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from cephscope.runner.report.hosts import Fmt, Table, device_table
from cephscope.runner.report.step_system import DeviceFigures, SystemFigures

# How many OSDs (OSD devices) a per-OSD table lists by name; the rest are in its distribution.
TOP_OSDS = 10
# OSD thread groups below this many CPU seconds per second stay out of the per-step tables.
THREAD_GROUP_MIN_CPU = 0.001
SPREAD = ("min", "p50", "p90", "max")


def quantile(ordered: Sequence[float], q: float) -> float:
    """The q-quantile of sorted values, linear between the closest ranks (numpy's default)."""
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def spread(values: Iterable[float]) -> tuple[float, float, float, float]:
    """(min, p50, p90, max) of the values (at least one)."""
    ordered = sorted(values)
    return ordered[0], quantile(ordered, 0.5), quantile(ordered, 0.9), ordered[-1]


def spread_row(label: str, values: Sequence[float], fmt: Fmt, scale: float = 1.0,
               digits: int = 1) -> list[str]:
    return [label, str(len(values)), *(fmt(v, scale, digits) for v in spread(values))]


def osd_p99_tables(s: SystemFigures, fmt: Fmt, top: int = TOP_OSDS) -> list[Table]:
    """OSD-side p99 per OSD: every OSD up to `top`, else the slowest `top` and the spread."""
    p99 = s.osd_p99_by_daemon
    if not p99:
        return []
    if len(p99) <= top:
        return [("OSD-side p99 per OSD", ["OSD", "p99 ms"],
                 [[d, fmt(v, 1e3, 2)] for d, v in sorted(p99.items())])]
    slowest = sorted(p99.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    return [
        (f"OSD-side p99 over {len(p99)} OSDs", ["figure", "OSDs", *(f"{q} ms" for q in SPREAD)],
         [spread_row("p99", list(p99.values()), fmt, 1e3, 2)]),
        (f"OSD-side p99: the slowest {top} of {len(p99)} OSDs", ["OSD", "p99 ms"],
         [[d, fmt(v, 1e3, 2)] for d, v in slowest]),
    ]


def thread_group_tables(s: SystemFigures, fmt: Fmt, top: int = TOP_OSDS) -> list[Table]:
    """CPU seconds per second by OSD thread group: every OSD's groups up to `top` OSDs, else
    each group's spread over the OSDs and the groups of the `top` busiest OSDs."""
    busy = {k: v for k, v in s.thread_groups.items() if v >= THREAD_GROUP_MIN_CPU}
    if not busy:
        return []
    rests = f"; {s.scrapes} scrapes" if s.scrapes is not None else ""
    osd_cpu: dict[tuple[str, str], float] = {}
    for (host, daemon, _group), value in s.thread_groups.items():
        osd_cpu[(host, daemon)] = osd_cpu.get((host, daemon), 0.0) + value

    def rows(keys: Iterable[tuple[str, str, str]]) -> list[list[str]]:
        return [[h, d, g, fmt(busy[(h, d, g)], digits=3)] for h, d, g in keys]

    header = ["host", "OSD", "thread group", "CPU s/s"]
    if len(osd_cpu) <= top:
        return [(f"OSD thread groups (>= {THREAD_GROUP_MIN_CPU:g} CPU s/s{rests})", header,
                 rows(sorted(busy, key=lambda k: (k[0], k[1], -busy[k]))))]
    busiest = sorted(osd_cpu, key=lambda osd: (-osd_cpu[osd], osd))[:top]
    rank = {osd: i for i, osd in enumerate(busiest)}
    per_group: dict[str, list[float]] = {}
    for (_host, _daemon, group), value in s.thread_groups.items():
        per_group.setdefault(group, []).append(value)
    spread_body = [[g, str(len(vs)), fmt(sum(vs), digits=3),
                    *(fmt(v, digits=3) for v in spread(vs))]
                   for g, vs in sorted(per_group.items(), key=lambda kv: -sum(kv[1]))
                   if sum(vs) >= THREAD_GROUP_MIN_CPU]
    return [
        (f"OSD thread groups over {len(osd_cpu)} OSDs (CPU s/s per OSD{rests})",
         ["thread group", "OSDs", "all OSDs", *SPREAD], spread_body),
        (f"OSD thread groups of the busiest {top} of {len(osd_cpu)} OSDs "
         f"(>= {THREAD_GROUP_MIN_CPU:g} CPU s/s)", header,
         rows(sorted((k for k in busy if (k[0], k[1]) in rank),
                     key=lambda k: (rank[(k[0], k[1])], -busy[k])))),
    ]


# (figure, scale, digits, value of a device) of the device spread table
DEVICE_FIGURES: Sequence[tuple[str, float, int, Callable[[DeviceFigures], float | None]]] = (
    ("util %", 100.0, 1, lambda d: d.util_ratio),
    ("await ms", 1e3, 2, lambda d: d.await_seconds),
    ("IOPS", 1.0, 0, lambda d: d.iops),
    ("read MiB/s", 1 / 2**20, 1, lambda d: d.read_bytes_per_second),
    ("write MiB/s", 1 / 2**20, 1, lambda d: d.write_bytes_per_second),
)


def device_tables(s: SystemFigures, fmt: Fmt, top: int = TOP_OSDS) -> list[Table]:
    """The OSD devices (or every disk): each up to `top`, else the `top` busiest (by util,
    then IOPS) and each figure's spread over all of them."""
    if not s.devices:
        return []
    title, header, body = device_table(s, fmt)
    if len(s.devices) <= top:
        return [(title, header, body)]
    order = sorted(range(len(s.devices)), key=lambda i: (
        -(s.devices[i].util_ratio or 0.0), -(s.devices[i].iops or 0.0), s.devices[i].host,
        s.devices[i].device))[:top]
    spread_body = []
    for name, scale, digits, figure in DEVICE_FIGURES:
        values = [v for d in s.devices if (v := figure(d)) is not None]
        if values:
            spread_body.append(spread_row(name, values, fmt, scale, digits))
    return [
        (f"{title} over {len(s.devices)} devices", ["figure", "devices", *SPREAD], spread_body),
        (f"{title}: the busiest {top} of {len(s.devices)} by util", header,
         [body[i] for i in order]),
    ]
