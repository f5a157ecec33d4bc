"""Collector ``histogram``: OSD op latency histograms from ``perf histogram dump``.

The OSD keeps 2-D histograms latency x request size (src/osd/osd_perf_counters.cc):
``op_r_latency_out_bytes_histogram``, ``op_w_latency_in_bytes_histogram``,
``op_rw_latency_in_bytes_histogram``. Each axis (src/common/perf_histogram.{h,cc}) has a
scale (linear/log2), ``min``, ``quant_size`` and ``buckets``; bucket 0 holds values below
``min`` (underflow), bucket ``buckets-1`` everything above the last bound (overflow), and
bucket i in between ends (exclusive) at ``min + quants(i) * quant_size`` with
quants(i) = i (linear) or 2^(i-1) (log2). The OSD feeds the latency axis with
``latency.to_nsec()``: nanoseconds, although the axis is named "Latency (usec)".

Summing over the size axis gives a latency histogram, exported as the Prometheus
histogram ``cephscope_osd_op_latency_seconds{ceph_daemon, op="r"|"w"|"rw"}`` with
cumulative ``le`` buckets in seconds (bucket i's exclusive upper bound: latencies are whole
nanoseconds, so "< bound" is "<= bound"); the overflow bucket only feeds ``+Inf``.
``_count`` is the histogram's total; ``_sum`` is the matching long-running average of
``perf dump`` (``osd.op_<op>_latency.sum``, same ops, same code path).

Summing over the latency axis gives ``cephscope_osd_op_size_bytes{ceph_daemon, op}``:
request sizes, ``le`` = the inclusive upper byte bound of each size bucket (a 4096-byte
write falls in the 4096..8191 bucket, so ``le="8191"``); ``_sum`` from
``osd.op_<op>_inb``/``op_r_outb`` byte counters.

What is exported is bounded (docs/metrics.md, *Series per OSD*): by default the latency
histogram of ``r`` and ``w`` ops only (``--collector.histogram.ops``), with the OSD's
buckets up to ``--collector.histogram.latency-max-seconds`` (30 s: beyond
``osd_op_complaint_time`` an op is counted as blocked; slower ops still count in ``+Inf``),
and the size histogram only with ``--collector.histogram.size``. An underflow bucket of an
axis whose minimum is 0 cannot hold anything (no latency or size is below 0) and is never
written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cephscope.exporter.asok import Daemon
from cephscope.exporter.collector import DaemonCollector, DaemonSession
from cephscope.exporter.exposition import MetricFamily, MetricSink, format_value, line_prefix
from cephscope.exporter.settings import HostSettings, option

# op label -> (histogram counter in the "osd" collection, perf dump latency avg, bytes counter)
OSD_OP_HISTOGRAMS: dict[str, tuple[str, str, str]] = {
    "r": ("op_r_latency_out_bytes_histogram", "op_r_latency", "op_r_out_bytes"),
    "w": ("op_w_latency_in_bytes_histogram", "op_w_latency", "op_w_in_bytes"),
    "rw": ("op_rw_latency_in_bytes_histogram", "op_rw_latency", "op_rw_in_bytes"),
}

LATENCY_METRIC = "cephscope_osd_op_latency_seconds"
SIZE_METRIC = "cephscope_osd_op_size_bytes"


@dataclass(frozen=True)
class HistogramSettings:
    ops: str = option("r,w", "op kinds whose histograms are exported, comma-separated "
                      "from r, w, rw", metavar="OPS")
    latency_max_seconds: float = option(
        30.0, "latency buckets up to this bound are exported, slower ops count in +Inf only; "
        "0 = every bucket of the OSD's axis (up to 53,687 s)", metavar="SECONDS")
    size: bool = option(False, "also export the op size histogram "
                        "(cephscope_osd_op_size_bytes)")


def parse_ops(text: str) -> tuple[str, ...]:
    """The op kinds of --collector.histogram.ops, in the OSD's order."""
    chosen = {o.strip() for o in text.split(",") if o.strip()}
    unknown = chosen - set(OSD_OP_HISTOGRAMS)
    if unknown or not chosen:
        raise ValueError(f"--collector.histogram.ops {text!r}: expected a comma-separated list "
                         f"of {', '.join(OSD_OP_HISTOGRAMS)}")
    return tuple(o for o in OSD_OP_HISTOGRAMS if o in chosen)


MAX_AXIS_BUCKETS = 1024


@dataclass(frozen=True)
class Axis:
    scale: str  # "linear" | "log2"
    minimum: int
    quant_size: int
    buckets: int

    @classmethod
    def from_dump(cls, axis: Any) -> Axis:
        if not isinstance(axis, dict):
            raise ValueError(f"histogram axis is {axis!r}")
        scale = axis.get("scale_type")
        if scale not in ("linear", "log2"):
            raise ValueError(f"histogram axis has unknown scale_type {scale!r}")
        try:
            parsed = cls(scale, int(axis["min"]), int(axis["quant_size"]), int(axis["buckets"]))
        except (KeyError, TypeError, ValueError, OverflowError) as err:
            raise ValueError(f"histogram axis {axis.get('name')!r} is malformed: {err}") from None
        # Ceph's axes have 32 buckets; a garbled count must not make us build a huge list.
        if not 2 <= parsed.buckets <= MAX_AXIS_BUCKETS or parsed.quant_size <= 0:
            raise ValueError(f"histogram axis {axis.get('name')!r} is degenerate: {parsed}")
        return parsed

    def exclusive_upper_bounds(self) -> list[int]:
        """Exclusive upper bound of buckets 0 .. buckets-2 (the last one is unbounded)."""
        bounds = [self.minimum]  # underflow: value < min
        for i in range(1, self.buckets - 1):
            quants = i if self.scale == "linear" else 1 << (i - 1)
            bounds.append(self.minimum + quants * self.quant_size)
        return bounds


def _matrix(values: Any, rows: int, cols: int) -> list[list[int]]:
    if not isinstance(values, list) or len(values) != rows:
        raise ValueError(f"histogram values are not {rows} rows")
    for row in values:
        if not isinstance(row, list) or len(row) != cols:
            raise ValueError(f"histogram row is not {cols} values")
        # A count is a non-negative integer; anything else would break the sums. Checked
        # with builtins over the whole row (a 60-OSD scrape has ~180k counts): type() is
        # exact, so bool, float and str are refused alike.
        if not _ONLY_INT.issuperset(map(type, row)) or min(row) < 0:
            bad = next((c for c in row if type(c) is not int or c < 0), row[0])
            raise ValueError(f"histogram count {str(bad)[:40]!r} is not a count")
    return values


_ONLY_INT = frozenset({int})


def cumulative(counts: list[int]) -> list[int]:
    total = 0
    out = []
    for c in counts:
        total += c
        out.append(total)
    return out


class HistogramCollector(DaemonCollector):
    name = "histogram"
    help = "OSD op latency (and size) histograms from perf histogram dump"
    default_enabled = True
    daemon_types = frozenset({"osd"})

    settings_type = HistogramSettings

    def __init__(self, settings: HistogramSettings | None = None,
                 host: HostSettings | None = None) -> None:
        super().__init__(settings, host)
        self.ops = parse_ops(self.settings.ops)
        if self.settings.latency_max_seconds < 0:
            raise ValueError("--collector.histogram.latency-max-seconds must be >= 0")
        self.latency_max_ns = self.settings.latency_max_seconds * 1e9 or float("inf")
        self.size = self.settings.size
        # Axis -> rendered le strings (None: bucket not written); axes are compile-time
        # constants in the OSD.
        self._le_cache: dict[tuple[Axis, str], list[str | None]] = {}
        # (daemon, metric, op, axis) -> bucket line prefixes, +Inf, _sum, _count prefixes.
        self._prefix_cache: dict[
            tuple[str, str, str, Axis], tuple[list[str | None], str, str, str]] = {}

    def prefetch(self, daemon: Daemon) -> Sequence[tuple[str, dict[str, Any]]]:
        return (("perf histogram dump", {}), ("perf dump", {}))

    def _les(self, axis: Axis, unit: str) -> list[str | None]:
        """The `le` of each bucket but the overflow, None where no line is written: an
        underflow bucket below 0 (nothing is), latency buckets above the maximum."""
        key = (axis, unit)
        les = self._le_cache.get(key)
        if les is None:
            les = []
            for index, bound in enumerate(axis.exclusive_upper_bounds()):
                if index == 0 and axis.minimum <= 0:
                    les.append(None)
                elif unit == "ns":
                    les.append(format_value(bound / 1e9) if bound <= self.latency_max_ns
                               else None)
                else:  # whole bytes: inclusive upper bound
                    les.append(format_value(bound - 1))
            self._le_cache[key] = les
        return les

    def collect_daemon(self, session: DaemonSession, sink: MetricSink) -> None:
        dump = session.command("perf histogram dump")
        osd = dump.get("osd") if isinstance(dump, dict) else None
        if not isinstance(osd, dict):
            raise ValueError(f"{session.daemon.name}: perf histogram dump has no osd section")
        # The sums come from perf dump (memoised: the perf collector fetched it already).
        perf_osd: dict[str, Any] = {}
        try:
            perf = session.command("perf dump")
            if isinstance(perf, dict) and isinstance(perf.get("osd"), dict):
                perf_osd = perf["osd"]
        except ValueError:
            perf_osd = {}
        daemon = session.daemon.name
        lat_fam = sink.histogram(
            LATENCY_METRIC,
            "OSD op latency (client op received to reply), from the OSD's latency x size "
            "perf histograms with the size axis summed.",
        )
        size_fam = sink.histogram(
            SIZE_METRIC,
            "OSD op request size (bytes in for w/rw, out for r), from the same histograms "
            "with the latency axis summed.",
        ) if self.size else None
        for op in self.ops:
            hist_name, latency_avg, bytes_counter = OSD_OP_HISTOGRAMS[op]
            hist = osd.get(hist_name)
            if not isinstance(hist, dict):
                continue
            axes = hist.get("axes")
            if not isinstance(axes, list) or len(axes) != 2:
                raise ValueError(f"{daemon}: {hist_name} does not have two axes")
            lat_axis, size_axis = Axis.from_dump(axes[0]), Axis.from_dump(axes[1])
            matrix = _matrix(hist.get("values"), lat_axis.buckets, size_axis.buckets)
            lat_counts = [sum(row) for row in matrix]
            total = sum(lat_counts)
            latency_sum = perf_osd.get(latency_avg)
            lat_sum = latency_sum.get("sum", 0) if isinstance(latency_sum, dict) else 0
            if not isinstance(lat_sum, int | float) or isinstance(lat_sum, bool):
                lat_sum = 0
            size_sum = perf_osd.get(bytes_counter, 0)
            if not isinstance(size_sum, int | float):
                size_sum = 0
            self._emit(lat_fam, self._prefixes(session, lat_fam.name, op, lat_axis, "ns"),
                       lat_counts, total, lat_sum)
            if size_fam is not None:
                size_counts = [sum(col) for col in zip(*matrix, strict=True)]
                self._emit(size_fam, self._prefixes(session, size_fam.name, op, size_axis,
                                                    "bytes"), size_counts, total, size_sum)

    def forget_daemon(self, daemon_name: str) -> None:
        for key in [k for k in self._prefix_cache if k[0] == daemon_name]:
            self._prefix_cache.pop(key, None)

    def _prefixes(
        self, session: DaemonSession, metric: str, op: str, axis: Axis, unit: str
    ) -> tuple[list[str | None], str, str, str]:
        key = (session.daemon.name, metric, op, axis)
        cached = self._prefix_cache.get(key)
        if cached is None:
            labels = f'{session.daemon_label},op="{op}"'
            buckets = [
                None if le is None else line_prefix(metric + "_bucket", f'{labels},le="{le}"')
                for le in self._les(axis, unit)
            ]
            cached = (
                buckets,
                line_prefix(metric + "_bucket", f'{labels},le="+Inf"'),
                line_prefix(metric + "_sum", labels),
                line_prefix(metric + "_count", labels),
            )
            self._prefix_cache[key] = cached
        return cached

    @staticmethod
    def _emit(
        fam: MetricFamily,
        prefixes: tuple[list[str | None], str, str, str],
        counts: list[int],
        total: int,
        total_sum: float,
    ) -> None:
        buckets, inf_prefix, sum_prefix, count_prefix = prefixes
        running = 0
        add = fam.add_line
        # The overflow bucket (last) only counts towards +Inf; buckets without a line still
        # count towards the next written one (cumulative).
        for prefix, count in zip(buckets, counts, strict=False):
            running += count
            if prefix is not None:
                add(prefix, running)
        add(inf_prefix, total)
        add(sum_prefix, total_sum)
        add(count_prefix, total)


COLLECTOR = HistogramCollector
