"""The figures the report, the recording rules and the dashboards share, each written once.

A figure is its PromQL: which series, which job's targets (`Jobs`), which rate window. The
report (runner/system_metrics, runner/report/step_system), the rules (dashboards/rules.py), the panels
(dashboards/definitions.py) and the scrape configs (deploy/stack.py, deploy/docker/
prometheus.yml) all build theirs from here, so 27 % in the report is 27 % on the dashboard.

Decisions made here once:
- Host CPU busy: the node-mixin convention (its `instance:node_cpu_utilisation` rule counts
  `mode=~"idle|iowait|steal"` as not busy): iowait is a CPU with nothing to run while a disk
  works, steal is time the hypervisor gave to someone else; neither is work of this host.
  Written as the busy modes' rate summed, divided by the CPU count, rather than node-mixin's
  `1 - avg(rate(idle|iowait|steal))`: both are the same number when a CPU's modes add up to one
  second per second, and this form is the one the report computes from the raw counters, so the
  two agree exactly rather than to within the counters' jitter.
- Disk await: time spent on reads and writes over the reads and writes completed (iostat's
  `await`); no I/O completed is 0 (nothing waited), never NaN.
- Disk util: iostat's %util as a ratio, clamped at 1 (the io_time counter can run ahead of
  wall time by a tick).
- Histograms: every histogram figure is "classic form or native form" (the helpers below), so
  one query answers whether Prometheus stores the exporter's histograms classic or as native
  histograms with custom buckets (Prometheus 3, `cephscope stack up --prometheus-release 3`).
- Rate window: `RATE_WINDOW_SCRAPES` scrape intervals, as Grafana's `$__rate_interval` (a rate
  needs two samples in its window; four keep it steady). Rules have no dashboard time range and
  use `RULE_RATE_WINDOW`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

# Prometheus job names of the scrape targets, as the local stack and docker-compose name them.
EXPORTER_JOB = "cephscope-exporter"
NODE_JOB = "node"
RUNNER_JOB = "cephscope-runner"

# Scrape interval of the shipped stacks (deploy/stack.py, deploy/docker/prometheus.yml).
SCRAPE_INTERVAL_SECONDS = 5
# A rate() window is this many scrape intervals (Grafana's $__rate_interval is the same).
RATE_WINDOW_SCRAPES = 4
# Window of the recorded rates: a 30 s sweep step is followed; >= 4 scrapes at 5 s.
RULE_RATE_WINDOW = "30s"
DASHBOARD_RATE_WINDOW = "$__rate_interval"

# CPU modes that are not work of the host (node-mixin's convention; see the module doc).
NOT_BUSY_CPU_MODES = ("idle", "iowait", "steal")
_NOT_BUSY = "|".join(NOT_BUSY_CPU_MODES)
_IDLE = 'mode="idle"'

# Raw counters behind the figures (the report pulls their scrapes; see runner/window_rates).
CPU_SECONDS = "node_cpu_seconds_total"
DISK_IO_TIME = "node_disk_io_time_seconds_total"
DISK_READS = "node_disk_reads_completed_total"
DISK_WRITES = "node_disk_writes_completed_total"
DISK_READ_BYTES = "node_disk_read_bytes_total"
DISK_WRITTEN_BYTES = "node_disk_written_bytes_total"
DISK_READ_TIME = "node_disk_read_time_seconds_total"
DISK_WRITE_TIME = "node_disk_write_time_seconds_total"
NIC_RECEIVE_BYTES = "node_network_receive_bytes_total"
NIC_TRANSMIT_BYTES = "node_network_transmit_bytes_total"
OSD_OPS = "ceph_osd_op"
OSD_THREAD_CPU_SECONDS = "cephscope_osd_thread_cpu_seconds_total"
# CephFS: an MDS's client requests and its reply latency (ceph-exporter's names, ceph_daemon).
MDS_REQUESTS = "ceph_mds_server_handle_client_request"
MDS_REPLY_LATENCY = "ceph_mds_reply_latency"  # _sum / _count
# RGW: a gateway's requests (ceph-exporter's names, labelled instance_id). GET and PUT are
# counted in `rgw` up to Reef (latency to the first byte) and in Tentacle's `rgw_op` (latency
# of the whole operation), which replaced them: each figure takes whichever the gateway has.
RGW_REQUESTS = "ceph_rgw_req"
RGW_FAILED_REQUESTS = "ceph_rgw_failed_req"
RGW_OPERATIONS = ("get", "put")


def rgw_op_counters(op: str) -> tuple[tuple[str, str, str], ...]:
    """(ops, bytes, latency pair without _sum/_count) of a GET or PUT: the `rgw` counters of
    Pacific and Reef first, then Tentacle's `rgw_op` ones."""
    if op not in RGW_OPERATIONS:
        raise ValueError(f"RGW operation {op!r}: not one of {RGW_OPERATIONS}")
    return ((f"ceph_rgw_{op}", f"ceph_rgw_{op}_b", f"ceph_rgw_{op}_initial_lat"),
            (f"ceph_rgw_op_{op}_obj_ops", f"ceph_rgw_op_{op}_obj_bytes",
             f"ceph_rgw_op_{op}_obj_lat"))


# The exporter's classic histograms whose figures the report, rules and dashboards share.
OSD_OP_LATENCY_HISTOGRAM = "cephscope_osd_op_latency_seconds"
OSD_OP_PHASE_HISTOGRAM = "cephscope_osd_op_phase_duration_seconds"


def osd_op_latency_counter(op: str = "") -> str:
    """ceph-exporter's OSD op latency average pair, without its _sum/_count suffix: all ops
    (op ""), or "r", "w", "rw"."""
    return f"ceph_osd_op_{op}_latency" if op else "ceph_osd_op_latency"


def cpu_is_busy(mode: str) -> bool:
    """Whether time in this node_exporter CPU mode is work (the report's side of the rule)."""
    return mode not in NOT_BUSY_CPU_MODES


def job_matcher(job: str) -> str:
    return f'job="{job}"'


def selector(*matchers: str) -> str:
    """`{a, b}` of the non-empty matchers ("" when none)."""
    kept = [m for m in matchers if m]
    return "{" + ", ".join(kept) + "}" if kept else ""


def _by(labels: Iterable[str]) -> str:
    return ", ".join(labels)


def _agg(op: str, by: tuple[str, ...], inner: str) -> str:
    """`op by (labels) (inner)`, or `op(inner)` over everything."""
    return f"{op} by ({_by(by)}) ({inner})" if by else f"{op}({inner})"


# ---- histograms, stored classic or native -----------------------------------------------------
#
# The exporter exposes classic histograms (`<name>_bucket{le}`, `_sum`, `_count`). Prometheus 3
# can store each one as a single native histogram with custom buckets (NHCB:
# `convert_classic_histograms_to_nhcb`); then only `<name>` exists, holding buckets, sum and
# count, and a query of `_bucket`, `_sum` or `_count` finds nothing. Every histogram figure is
# therefore written once as "classic form `or` native form": on one Prometheus one side is
# empty (a classic series always has `le`, a native one never, so `or` keeps both sides' series
# during a switch-over), and histogram_quantile, rate and sum take either shape.


def histogram_selector(name: str, *matchers: str) -> str:
    """The series of histogram `name` in either storage (`label_values`, existence checks)."""
    return selector(f'__name__=~"{name}(_bucket)?"', *matchers)


def histogram_buckets(name: str, by: Iterable[str], window: str, *matchers: str,
                      function: str = "rate") -> str:
    """`function` (rate or increase) of the histogram's buckets over `window`, summed by `by`:
    classic bucket series keep `le`, native series are whole histograms."""
    by, sel = tuple(by), selector(*matchers)
    classic = _agg("sum", (*by, "le"), f"{function}({name}_bucket{sel}[{window}])")
    native = _agg("sum", by, f"{function}({name}{sel}[{window}])")
    return f"{classic} or {native}"


def histogram_quantile(quantile: float, name: str, by: Iterable[str], window: str,
                       *matchers: str) -> str:
    """The `quantile` of the histogram's observations over `window`, per `by` group."""
    return f"histogram_quantile({quantile}, {histogram_buckets(name, by, window, *matchers)})"


def histogram_rate(name: str, part: str, by: Iterable[str], window: str, *matchers: str) -> str:
    """Per-second rate of the histogram's `count` or `sum`, summed by `by` (parenthesised: it
    is an `or` of the two storage forms)."""
    if part not in ("count", "sum"):
        raise ValueError(f"histogram part {part!r}: count or sum")
    by, sel = tuple(by), selector(*matchers)
    classic = _agg("sum", by, f"rate({name}_{part}{sel}[{window}])")
    native = _agg("sum", by, f"histogram_{part}(rate({name}{sel}[{window}]))")
    return f"({classic} or {native})"


def histogram_raw(name: str, by: Iterable[str], *matchers: str) -> str:
    """The histogram's cumulative buckets as stored (instant or range query), summed by `by`:
    classic `le` series, or native histograms the caller expands (see runner/histogram_points)."""
    by, sel = tuple(by), selector(*matchers)
    return f"{_agg('sum', (*by, 'le'), f'{name}_bucket{sel}')} or {_agg('sum', by, f'{name}{sel}')}"


@dataclass(frozen=True)
class Figures:
    """PromQL of every shared figure for one set of job names and one rate window.

    `node` / `exporter` are the matchers that pick node_exporter's and cephscope-exporter's
    targets (a dashboard passes its template variables too); `window` is the rate window
    (a duration, or "$__rate_interval" in a panel)."""

    node: tuple[str, ...] = (job_matcher(NODE_JOB),)
    exporter: tuple[str, ...] = (job_matcher(EXPORTER_JOB),)
    window: str = RULE_RATE_WINDOW

    def with_window(self, window: str) -> Figures:
        return Figures(self.node, self.exporter, window)

    def node_rate(self, counter: str, *matchers: str) -> str:
        return f"rate({counter}{selector(*self.node, *matchers)}[{self.window}])"

    def exporter_rate(self, counter: str, *matchers: str) -> str:
        return f"rate({counter}{selector(*self.exporter, *matchers)}[{self.window}])"

    # ---- CPU (node_exporter)

    def cpu_busy_cores(self, by: Iterable[str], *matchers: str) -> str:
        """CPU seconds of work per second (cores' worth), summed by `by`; per core with
        `by` holding `cpu`."""
        return _agg("sum", tuple(by), self.node_rate(CPU_SECONDS, *matchers, f'mode!~"{_NOT_BUSY}"'))

    def cpu_count(self, by: Iterable[str], *matchers: str) -> str:
        return _agg("count", tuple(by), f"{CPU_SECONDS}{selector(*self.node, *matchers, _IDLE)}")

    def cpu_busy_ratio(self, by: Iterable[str], *matchers: str) -> str:
        """Host CPU busy, 0..1 of all its CPUs."""
        by = tuple(by)
        on = f" on({_by(by)})" if by else ""
        return f"{self.cpu_busy_cores(by, *matchers)} /{on} {self.cpu_count(by, *matchers)}"

    def cpu_mode_ratio(self, by: Iterable[str], *matchers: str) -> str:
        """Per CPU mode other than idle (user, system, iowait, ...), 0..1 of all the CPUs of
        the `by` group (`by` without `mode`)."""
        by = tuple(by)
        rate = self.node_rate(CPU_SECONDS, *matchers, 'mode!="idle"')
        return (f"sum by ({_by((*by, 'mode'))}) ({rate})"
                f" / on({_by(by)}) group_left {self.cpu_count(by, *matchers)}")

    # ---- disks and NICs (node_exporter), per device

    def disk_iops(self, *matchers: str) -> str:
        return f"{self.node_rate(DISK_READS, *matchers)} + {self.node_rate(DISK_WRITES, *matchers)}"

    def disk_await_seconds(self, *matchers: str, reads: bool = True, writes: bool = True) -> str:
        """Average seconds per completed I/O (iostat's await; r_await / w_await with one kind);
        0 where none completed."""
        times = [self.node_rate(c, *matchers) for c, on in
                 ((DISK_READ_TIME, reads), (DISK_WRITE_TIME, writes)) if on]
        ops = [self.node_rate(c, *matchers) for c, on in
               ((DISK_READS, reads), (DISK_WRITES, writes)) if on]
        time_sum, op_sum = " + ".join(times), " + ".join(ops)
        if len(ops) > 1:
            time_sum, op_sum = f"({time_sum})", f"({op_sum})"
        return f"{time_sum} / ({op_sum} > 0) or {op_sum} * 0"

    def disk_util_ratio(self, *matchers: str) -> str:
        return f"clamp_max({self.node_rate(DISK_IO_TIME, *matchers)}, 1)"

    # ---- OSDs (cephscope-exporter)

    def osd_op_latency_seconds(self, by: Iterable[str] = (), *matchers: str, op: str = "") -> str:
        """OSD op latency average (ceph-exporter's _sum / _count pair), summed by `by`
        (() : all OSDs together)."""
        counter, by = osd_op_latency_counter(op), tuple(by)
        return (f"{_agg('sum', by, self.exporter_rate(counter + '_sum', *matchers))}"
                f" / {_agg('sum', by, self.exporter_rate(counter + '_count', *matchers))}")

    def osd_op_latency_quantile(self, quantile: float, by: Iterable[str] = (),
                                *matchers: str) -> str:
        """OSD op latency quantile from the exporter's latency histograms (classic or native
        storage), per `by` group (() : all OSDs and op kinds together)."""
        return histogram_quantile(quantile, OSD_OP_LATENCY_HISTOGRAM, by, self.window,
                                  *self.exporter, *matchers)

    def average_seconds(self, pair: str, by: Iterable[str] = (), *matchers: str) -> str:
        """Average of a Ceph long-running average (its _sum / _count pair) over the window,
        summed by `by`; no sample where nothing completed (never NaN)."""
        by = tuple(by)
        return (f"{_agg('sum', by, self.exporter_rate(pair + '_sum', *matchers))}"
                f" / ({_agg('sum', by, self.exporter_rate(pair + '_count', *matchers))} > 0)")

    # ---- CephFS (MDS) and RGW (cephscope-exporter)

    def mds_request_rate(self, by: Iterable[str] = (), *matchers: str) -> str:
        """Client requests per second the MDSs received, summed by `by`."""
        return _agg("sum", tuple(by), self.exporter_rate(MDS_REQUESTS, *matchers))

    def mds_reply_latency_seconds(self, by: Iterable[str] = (), *matchers: str) -> str:
        """Average MDS reply latency (request received to reply sent), by `by`."""
        return self.average_seconds(MDS_REPLY_LATENCY, by, *matchers)

    def rgw_op_rate(self, op: str, by: Iterable[str] = (), *matchers: str) -> str:
        """GET or PUT operations per second of the gateways, summed by `by`."""
        by = tuple(by)
        return " or ".join(f"({_agg('sum', by, self.exporter_rate(ops, *matchers))})"
                           for ops, _, _ in rgw_op_counters(op))

    def rgw_bytes_rate(self, op: str, by: Iterable[str] = (), *matchers: str) -> str:
        """Bytes per second the gateways sent (GET) or received (PUT), summed by `by`."""
        by = tuple(by)
        return " or ".join(f"({_agg('sum', by, self.exporter_rate(nbytes, *matchers))})"
                           for _, nbytes, _ in rgw_op_counters(op))

    def rgw_request_rate(self, by: Iterable[str] = (), *matchers: str) -> str:
        """Requests per second the gateways served (every API and op), summed by `by`."""
        return _agg("sum", tuple(by), self.exporter_rate(RGW_REQUESTS, *matchers))

    def rgw_failed_request_rate(self, by: Iterable[str] = (), *matchers: str) -> str:
        """Requests per second the gateways aborted, summed by `by`."""
        return _agg("sum", tuple(by), self.exporter_rate(RGW_FAILED_REQUESTS, *matchers))

    def rgw_latency_seconds(self, op: str, by: Iterable[str] = (), *matchers: str) -> str:
        """Average GET or PUT latency of the gateways, by `by`: to the first byte up to Reef,
        of the whole operation on Tentacle."""
        return " or ".join(f"({self.average_seconds(pair, by, *matchers)})"
                           for _, _, pair in rgw_op_counters(op))

    def osd_thread_cpu_cores(self, by: Iterable[str] = (), *matchers: str) -> str:
        """CPU seconds per second of the OSDs' threads, summed by `by` (thread_group, ...)."""
        return _agg("sum", tuple(by), self.exporter_rate(OSD_THREAD_CPU_SECONDS, *matchers))


STACK_FIGURES = Figures()
