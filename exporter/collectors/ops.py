"""Collector ``ops``: OSD ops in flight, blocked ops and historic-op phase durations.

Sources (src/common/TrackedOp.cc, src/osd/OpRequest.cc):

* ``dump_ops_in_flight`` → ``{"ops": [...], "num_ops": N}``; every op has ``age`` (seconds
  since it was received) and ``type_data.flag_point`` (how far it got).
* ``dump_blocked_ops`` → ``{"ops": [...], "complaint_time": s, "num_blocked_ops": N}``:
  in-flight ops older than ``osd_op_complaint_time``.
* ``dump_historic_ops`` → ``{"size": n, "duration": s, "ops": [...]}``: completed ops with
  ``initiated_at`` and ``type_data.events[]`` (``event``, ``time``, ``duration``). The OSD
  keeps the ``osd_op_history_size`` *slowest* ops completed in the last
  ``osd_op_history_duration`` seconds (OpHistory trims the shortest first), so the phase
  histogram describes slow ops, not the average op: it says where slow ops spend their time.

Phases are the time between two events of one historic op (first occurrence of each):
``receive`` initiated → queued_for_pg (messenger and dispatch), ``queue`` queued_for_pg →
reached_pg (waiting in the sharded op queue), ``pg`` reached_pg → started (PG checks and
locks), ``execute`` started → commit_sent (or done for ops without a reply event, e.g.
reads), ``reply`` commit_sent → done, and ``total`` = the op's own ``duration``.

By default the phase histogram has the phases ``queue`` and ``total`` (how much of a slow
op's time was op-queue wait), and decade buckets 100 µs … 10 s; every phase and finer
buckets are one flag away (``--collector.ops.phases``, ``--collector.ops.phase-buckets``),
as is the in-flight split by flag point (``--collector.ops.flag-points``): see
docs/metrics.md, *Series per OSD*.

A history lives for minutes and is scraped every few seconds, so each op is counted once:
a bounded per-daemon memory of (initiated_at, description) keys remembers what was seen.
Durations the OSD cannot have meant are not observed but counted in
``cephscope_osd_op_phase_duration_ignored_total``: Ceph prints a negative ``utime_t``
difference as ≈ 2^32 s (4294967295.999999), and a timestamp pair can be out of order.
"""

from __future__ import annotations

import itertools
import math
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from cephscope.exporter.asok import Daemon
from cephscope.exporter.collector import DaemonCollector, DaemonSession
from cephscope.exporter.exposition import MetricSink, format_value, line_prefix
from cephscope.exporter.settings import HostSettings, option

PHASE_METRIC = "cephscope_osd_op_phase_duration_seconds"
IGNORED_METRIC = "cephscope_osd_op_phase_duration_ignored_total"

# phase -> (start event, end events in order of preference); "total" is the op duration.
PHASES: dict[str, tuple[str, tuple[str, ...]]] = {
    "receive": ("initiated", ("queued_for_pg",)),
    "queue": ("queued_for_pg", ("reached_pg",)),
    "pg": ("reached_pg", ("started",)),
    "execute": ("started", ("commit_sent", "done")),
    "reply": ("commit_sent", ("done",)),
}
TOTAL_PHASE = "total"
ALL_PHASES: tuple[str, ...] = (*PHASES, TOTAL_PHASE)

DEFAULT_PHASES = ("queue", TOTAL_PHASE)
# Upper bounds (seconds): decades from 100 µs to 10 s. The history holds the slowest ops only,
# and the average per phase (_sum / _count) is exact; a finer grid is one flag away, e.g.
# FINE_PHASE_BUCKETS (10 µs .. 30 s, an NVMe queue hop up to a stalled HDD op).
PHASE_BUCKETS: tuple[float, ...] = (0.0001, 0.001, 0.01, 0.1, 1.0, 10.0)
FINE_PHASE_BUCKETS: tuple[float, ...] = (
    0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005,
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)
MAX_PHASE_BUCKETS = 64
# ceph prints a negative utime_t difference as ~2^32 seconds.
SENTINEL_SECONDS = 4294967295.0
# A completed op that took longer than a day is a broken timestamp, not a measurement.
MAX_PLAUSIBLE_SECONDS = 86400.0
SEEN_OPS_MIN_CAPACITY = 1024

# OpRequest::state_string() values -> bounded label values.
FLAG_POINTS: dict[str, str] = {
    "no flag points reached": "none",
    "delayed": "delayed",
    "queued for pg": "queued_for_pg",
    "reached pg": "reached_pg",
    "started": "started",
    "waiting for sub ops": "waiting_for_subops",
    "commit sent; apply or cleanup": "commit_sent",
}
OTHER_FLAG_POINT = "other"


@dataclass(frozen=True)
class OpsSettings:
    phases: str = option(
        ",".join(DEFAULT_PHASES), "phases of the historic-op phase histogram, comma-separated "
        f"from {', '.join(ALL_PHASES)}, or all", metavar="PHASES")
    phase_buckets: str = option(
        ",".join(format_value(b) for b in PHASE_BUCKETS), "upper bounds (seconds) of the "
        "phase histogram's buckets, comma-separated and increasing", metavar="SECONDS,...")
    flag_points: bool = option(
        False, "also export in-flight ops by flag point "
        "(cephscope_osd_ops_in_flight_by_flag_point)")


def parse_phases(text: str) -> tuple[str, ...]:
    """The phases of --collector.ops.phases, in ALL_PHASES' order."""
    chosen = {p.strip() for p in text.split(",") if p.strip()}
    if chosen == {"all"}:
        return ALL_PHASES
    unknown = chosen - set(ALL_PHASES)
    if unknown or not chosen:
        raise ValueError(f"--collector.ops.phases {text!r}: expected all or a comma-separated "
                         f"list of {', '.join(ALL_PHASES)}")
    return tuple(p for p in ALL_PHASES if p in chosen)


def parse_buckets(text: str) -> tuple[float, ...]:
    """The bounds of --collector.ops.phase-buckets: positive, finite, increasing."""
    try:
        bounds = tuple(float(b) for b in text.split(",") if b.strip())
    except ValueError:
        bounds = ()
    if (not 0 < len(bounds) <= MAX_PHASE_BUCKETS
            or not all(math.isfinite(b) and b > 0 for b in bounds)
            or any(a >= b for a, b in itertools.pairwise(bounds))):
        raise ValueError(f"--collector.ops.phase-buckets {text!r}: expected 1 to "
                         f"{MAX_PHASE_BUCKETS} increasing positive seconds, comma-separated")
    return bounds


def classify_duration(seconds: float) -> str | None:
    """None if ``seconds`` is a plausible duration, else why it is not."""
    if not math.isfinite(seconds):
        return "not_finite"
    if seconds >= SENTINEL_SECONDS:
        return "sentinel"
    if seconds < 0:
        return "negative"
    if seconds > MAX_PLAUSIBLE_SECONDS:
        return "too_large"
    return None


def parse_time(text: Any) -> float:
    """Seconds since the epoch of a Ceph ``utime_t`` stream (``2026-11-21T22:29:53.886479+0000``)."""
    if not isinstance(text, str):
        raise ValueError(f"event time is {text!r}, not a string")
    return datetime.fromisoformat(text).timestamp()


@dataclass
class PhaseSamples:
    """Phase durations of one op, and the values rejected (phase, reason)."""

    durations: dict[str, float] = field(default_factory=dict)
    ignored: list[tuple[str, str]] = field(default_factory=list)


def op_phases(op: Any) -> PhaseSamples:
    """Phase durations of one historic op (phases whose events it lacks are absent)."""
    out = PhaseSamples()
    if not isinstance(op, dict):
        out.ignored.append(("op", "malformed"))
        return out
    type_data = op.get("type_data")
    events = type_data.get("events") if isinstance(type_data, dict) else None
    if not isinstance(events, list):
        out.ignored.append(("op", "malformed"))
        return out
    # First time of each event name; a requeued op repeats queued_for_pg/reached_pg.
    first: dict[str, float] = {}
    order: dict[str, int] = {}
    for index, event in enumerate(events):
        if not isinstance(event, dict) or not isinstance(event.get("event"), str):
            continue
        name = event["event"]
        if name in first:
            continue
        try:
            first[name] = parse_time(event.get("time"))
        except (ValueError, TypeError):
            out.ignored.append(("op", "bad_time"))
            continue
        order[name] = index
    for phase, (start, ends) in PHASES.items():
        if start not in first:
            continue
        end = next((e for e in ends if e in first and order[e] > order[start]), None)
        if end is None:
            continue
        _keep(out, phase, first[end] - first[start])
    duration = op.get("duration")
    if isinstance(duration, int | float) and not isinstance(duration, bool):
        _keep(out, TOTAL_PHASE, float(duration))
    return out


def _keep(out: PhaseSamples, phase: str, seconds: float) -> None:
    reason = classify_duration(seconds)
    if reason is None:
        out.durations[phase] = seconds
    else:
        out.ignored.append((phase, reason))


def op_key(op: Any) -> int:
    """Identity of a historic op across dumps (hash: the memory holds ints, not strings)."""
    if isinstance(op, dict):
        return hash((str(op.get("initiated_at")), str(op.get("description"))))
    return hash(repr(op))


class PhaseHistogram:
    """Cumulative-by-construction histogram of one daemon's phases (exporter-side counter)."""

    def __init__(self, buckets: tuple[float, ...] = PHASE_BUCKETS) -> None:
        self.buckets = buckets
        self.counts: dict[str, list[int]] = {p: [0] * (len(buckets) + 1) for p in ALL_PHASES}
        self.sums: dict[str, float] = dict.fromkeys(ALL_PHASES, 0.0)
        self.ignored: dict[tuple[str, str], int] = {}

    def observe(self, phase: str, seconds: float) -> None:
        counts = self.counts[phase]
        for i, bound in enumerate(self.buckets):
            if seconds <= bound:
                counts[i] += 1
                break
        else:
            counts[-1] += 1
        self.sums[phase] += seconds

    def ignore(self, phase: str, reason: str) -> None:
        self.ignored[(phase, reason)] = self.ignored.get((phase, reason), 0) + 1


class DaemonOpHistory:
    """Per-daemon memory: the phase histogram and the keys of ops already counted."""

    def __init__(self, buckets: tuple[float, ...] = PHASE_BUCKETS) -> None:
        self.histogram = PhaseHistogram(buckets)
        self.seen: OrderedDict[int, None] = OrderedDict()
        self.observed_ops = 0
        # (daemon label, phase -> line prefixes), see phase_line_prefixes
        self.line_prefixes: tuple[str, dict[str, tuple[list[str], str, str, str]]] | None = None
        # Two overlapping scrapes of one daemon must not count an op twice.
        self.lock = threading.Lock()

    def add_history(self, ops: Iterable[Any]) -> int:
        """Count the ops not seen before; returns how many were new."""
        ops = list(ops)
        new = 0
        for op in ops:
            key = op_key(op)
            if key in self.seen:
                self.seen.move_to_end(key)
                continue
            self.seen[key] = None
            new += 1
            samples = op_phases(op)
            for phase, seconds in samples.durations.items():
                self.histogram.observe(phase, seconds)
            for phase, reason in samples.ignored:
                self.histogram.ignore(phase, reason)
        # Every op of this dump was just moved to the end: trimming the front only forgets
        # ops that have left the OSD's history, which never come back.
        capacity = max(SEEN_OPS_MIN_CAPACITY, 2 * len(ops))
        while len(self.seen) > capacity:
            self.seen.popitem(last=False)
        self.observed_ops += new
        return new


def _ops_list(doc: Any, command: str) -> list[Any]:
    if not isinstance(doc, dict):
        raise ValueError(f"{command} is {type(doc).__name__}, not an object")
    ops = doc.get("ops", [])
    if not isinstance(ops, list):
        raise ValueError(f"{command}: ops is {type(ops).__name__}, not a list")
    return ops


def _count(doc: dict[str, Any], key: str, ops: list[Any]) -> int:
    value = doc.get(key)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return len(ops)


def oldest_age(ops: list[Any]) -> float:
    ages = [
        float(op["age"])
        for op in ops
        if isinstance(op, dict)
        and isinstance(op.get("age"), int | float)
        and classify_duration(float(op["age"])) is None
    ]
    return max(ages, default=0.0)


def flag_point_counts(ops: list[Any]) -> dict[str, int]:
    counts = dict.fromkeys([*FLAG_POINTS.values(), OTHER_FLAG_POINT], 0)
    for op in ops:
        type_data = op.get("type_data") if isinstance(op, dict) else None
        flag = type_data.get("flag_point") if isinstance(type_data, dict) else None
        counts[FLAG_POINTS.get(flag, OTHER_FLAG_POINT) if isinstance(flag, str) else "none"] += 1
    return counts


def emit_in_flight(in_flight: Any, blocked: Any, daemon_label: str, sink: MetricSink,
                   flag_points: bool = True) -> None:
    ops = _ops_list(in_flight, "dump_ops_in_flight")
    blocked_ops = _ops_list(blocked, "dump_blocked_ops")
    sink.gauge(
        "cephscope_osd_ops_in_flight", "Ops the OSD is working on (dump_ops_in_flight num_ops)."
    ).add_rendered(daemon_label, _count(in_flight, "num_ops", ops))
    sink.gauge(
        "cephscope_osd_op_oldest_in_flight_age_seconds",
        "Age of the oldest op in flight (0 when none).",
    ).add_rendered(daemon_label, round(oldest_age(ops), 6))
    if flag_points:
        by_flag = sink.gauge(
            "cephscope_osd_ops_in_flight_by_flag_point",
            "Ops in flight by how far they got (OpRequest flag point).",
        )
        for flag, count in flag_point_counts(ops).items():
            by_flag.add_rendered(f'{daemon_label},flag_point="{flag}"', count)
    sink.gauge(
        "cephscope_osd_ops_blocked",
        "Ops in flight for longer than osd_op_complaint_time (dump_blocked_ops).",
    ).add_rendered(daemon_label, _count(blocked, "num_blocked_ops", blocked_ops))
    sink.gauge(
        "cephscope_osd_op_oldest_blocked_age_seconds",
        "Age of the oldest blocked op (0 when none).",
    ).add_rendered(daemon_label, round(oldest_age(blocked_ops), 6))
    complaint = blocked.get("complaint_time")
    if isinstance(complaint, int | float) and not isinstance(complaint, bool):
        sink.gauge(
            "cephscope_osd_op_complaint_time_seconds",
            "osd_op_complaint_time: age from which an op counts as blocked.",
        ).add_rendered(daemon_label, complaint)


def phase_line_prefixes(
    daemon_label: str, buckets: tuple[float, ...], phases: tuple[str, ...] = ALL_PHASES
) -> dict[str, tuple[list[str], str, str, str]]:
    """Per phase: the line prefixes of its buckets, +Inf, _sum and _count (rendered once
    per daemon: up to ~150 lines per OSD per scrape otherwise format their labels each time)."""
    les = [format_value(b) for b in buckets]
    out = {}
    for phase in phases:
        labels = f'{daemon_label},phase="{phase}"'
        out[phase] = (
            [line_prefix(f"{PHASE_METRIC}_bucket", f'{labels},le="{le}"') for le in les],
            line_prefix(f"{PHASE_METRIC}_bucket", f'{labels},le="+Inf"'),
            line_prefix(f"{PHASE_METRIC}_sum", labels),
            line_prefix(f"{PHASE_METRIC}_count", labels),
        )
    return out


def emit_history(history: DaemonOpHistory, doc: Any, daemon_label: str, sink: MetricSink,
                 phases: tuple[str, ...] = ALL_PHASES) -> None:
    for key, name, text in (
        ("size", "cephscope_osd_op_history_size",
         "osd_op_history_size: how many of the slowest recent ops the OSD keeps."),
        ("duration", "cephscope_osd_op_history_duration_seconds",
         "osd_op_history_duration: how long the OSD keeps a completed op in its history."),
    ):
        value = doc.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            sink.gauge(name, text).add_rendered(daemon_label, value)
    sink.counter(
        "cephscope_osd_op_history_ops_total",
        "Historic ops counted into the phase histogram (each op once).",
    ).add_rendered(daemon_label, history.observed_ops)
    hist = history.histogram
    fam = sink.histogram(
        PHASE_METRIC,
        "Time historic (slowest recent) OSD ops spent in each phase: receive, queue (op "
        "queue wait), pg, execute, reply, total.",
    )
    if history.line_prefixes is None or history.line_prefixes[0] != daemon_label:
        history.line_prefixes = (daemon_label,
                                 phase_line_prefixes(daemon_label, hist.buckets, phases))
    add = fam.add_line
    for phase, (bucket_prefixes, inf_prefix, sum_prefix, count_prefix) in (
        history.line_prefixes[1].items()
    ):
        running = 0
        counts = hist.counts[phase]
        for prefix, count in zip(bucket_prefixes, counts, strict=False):
            running += count
            add(prefix, running)
        total = running + counts[-1]
        add(inf_prefix, total)
        add(sum_prefix, round(hist.sums[phase], 9))
        add(count_prefix, total)
    ignored = sink.counter(
        IGNORED_METRIC,
        "Phase durations not observed because the OSD reported an impossible value "
        "(2^32 s sentinel, negative, over a day, unparsable op).",
    )
    for (phase, reason), count in sorted(hist.ignored.items()):
        if phase in phases or phase == "op":
            ignored.add_rendered(f'{daemon_label},phase="{phase}",reason="{reason}"', count)


class OpsCollector(DaemonCollector):
    name = "ops"
    help = "OSD ops in flight / blocked and historic-op phase durations"
    default_enabled = True
    daemon_types = frozenset({"osd"})
    settings_type = OpsSettings

    def __init__(self, settings: OpsSettings | None = None,
                 host: HostSettings | None = None) -> None:
        super().__init__(settings, host)
        self.phases = parse_phases(self.settings.phases)
        self.buckets = parse_buckets(self.settings.phase_buckets)
        self._histories: dict[str, DaemonOpHistory] = {}
        self._lock = threading.Lock()

    def forget_daemon(self, daemon_name: str) -> None:
        with self._lock:
            self._histories.pop(daemon_name, None)

    def _history(self, daemon_name: str) -> DaemonOpHistory:
        with self._lock:
            history = self._histories.get(daemon_name)
            if history is None:
                history = self._histories[daemon_name] = DaemonOpHistory(self.buckets)
            return history

    def prefetch(self, daemon: Daemon) -> Sequence[tuple[str, dict[str, Any]]]:
        return (("dump_ops_in_flight", {}), ("dump_blocked_ops", {}), ("dump_historic_ops", {}))

    def collect_daemon(self, session: DaemonSession, sink: MetricSink) -> None:
        label = session.daemon_label
        emit_in_flight(
            session.command("dump_ops_in_flight"), session.command("dump_blocked_ops"), label, sink,
            self.settings.flag_points,
        )
        doc = session.command("dump_historic_ops")
        ops = _ops_list(doc, "dump_historic_ops")
        history = self._history(session.daemon.name)
        with history.lock:
            history.add_history(ops)
            emit_history(history, doc, label, sink, self.phases)


COLLECTOR = OpsCollector
