"""Collector ``perf``: perf counters (``perf dump`` + ``perf schema``), named as ceph-exporter.

Naming follows ceph-exporter (src/exporter/DaemonMetricCollector.cc, ``promethize`` in
src/exporter/util.cc, kept in sync with the mgr prometheus module):

* name ``ceph_<collection>_<counter>``; a trailing ``-`` becomes ``_minus``; ``.``, ``/``,
  space and ``-`` become ``_``; ``::`` becomes ``_``; ``+`` becomes ``_plus``;
* counters below the priority threshold (``--collector.perf.priority``, default 5 like
  ``exporter_prio_limit``) are skipped, and so are the collections (``perf dump``
  sections) matched by ``--collector.perf.exclude-collections``: by default BlueStore's
  cache autotuner bins (``bluestore-pricache*``, 61 series per OSD that no shipped figure
  uses; see docs/metrics.md, *Series per OSD*);
* long-running averages (schema type bit 0x4) become ``<name>_sum`` (schema's metric_type,
  help "<description> Total") and ``<name>_count`` (counter, help "<description> Count");
  time values are already seconds in ``perf dump``;
* everything else is one sample typed as the schema's ``metric_type`` (gauge/counter);
* one label ``ceph_daemon="osd.N"``; a gateway's counters carry ``instance_id`` instead
  (``Daemon.counter_labels``);
* an RGW multisite counter named after its source zone (``data-sync-from-<zone>``) is exported
  under the fixed name ``ceph_data_sync_from_zone_<counter>`` with ``source_zone="<zone>"``.

The schema is cached per daemon and refetched when the daemon's pid (SO_PEERCRED) changes
or the shape of ``perf dump`` no longer matches the one seen with the cached schema (a
restart between two scrapes, or between the schema and the dump).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cephscope.exporter.asok import Daemon
from cephscope.exporter.collector import DaemonCollector, DaemonSession
from cephscope.exporter.exposition import COUNTER, GAUGE, MetricSink, line_prefix, render_labels
from cephscope.exporter.settings import HostSettings, option

PERFCOUNTER_LONGRUNAVG = 0x4
PERFCOUNTER_COUNTER = 0x8
PERFCOUNTER_HISTOGRAM = 0x10


# BlueStore's cache autotuner: 14 byte gauges per cache (data, kv, kv_onode, meta) at
# priority 5, 61 series per OSD in all: 40 % of the OSD's priority->=5 counters.
DEFAULT_EXCLUDED_COLLECTIONS = "bluestore-pricache.*"


@dataclass(frozen=True)
class PerfSettings:
    priority: int = option(
        5, "export perf counters with priority >= N (ceph-exporter's exporter_prio_limit;"
        " 0 = all, 5 = useful, 10 = critical)", metavar="N",
        hidden_aliases=("--ceph.perf-priority",))
    exclude_collections: str = option(
        DEFAULT_EXCLUDED_COLLECTIONS, "perf dump sections (collections) not exported, a regex "
        "matching the whole name; '' exports every collection", metavar="REGEX")


def collection_filter(pattern: str, flag: str) -> re.Pattern[str] | None:
    """The compiled exclusion regex of a collection-name flag (None: exclude nothing)."""
    if not pattern:
        return None
    try:
        return re.compile(pattern)
    except re.error as err:
        raise ValueError(f"{flag} {pattern!r}: not a regular expression: {err}") from None


def exported_kind(info: Any, priority: int) -> tuple[bool, str] | None:
    """Whether a schema entry (`perf schema` or `counter schema`) is exported, and how:
    (is a long-run average, Prometheus type); None for histograms, counters below the
    priority threshold and garbled entries (which cost that counter only)."""
    if not isinstance(info, dict):
        return None
    ctype = schema_int(info.get("type", 0))
    # Schemas without a priority (very old daemons) are not filtered.
    prio = schema_int(info.get("priority", priority))
    if ctype is None or prio is None or ctype & PERFCOUNTER_HISTOGRAM or prio < priority:
        return None
    # Ceph writes metric_type from the type's counter bit (perf_counters.cc), so the two agree
    # in every real schema; one that is garbled or disagrees is this counter's fault, and must
    # not turn its type (osd.0 a gauge, osd.1 a counter: one name, two types, the second
    # daemon's series dropped at rendering) into another daemon's loss. Schemas written
    # before metric_type existed go by the bit.
    kind = COUNTER if ctype & PERFCOUNTER_COUNTER else GAUGE
    if info.get("metric_type") not in (None, kind):
        return None
    return bool(ctype & PERFCOUNTER_LONGRUNAVG), kind


def promethize(name: str) -> str:
    """ceph-exporter's / mgr prometheus module's metric-name rules, with the ``ceph_`` prefix."""
    if name.endswith("-"):
        name = name[:-1] + "_minus"
    for char in "./ -":
        name = name.replace(char, "_")
    name = name.replace("::", "_").replace("+", "_plus")
    return "ceph_" + name


_DATA_SYNC_FROM = re.compile(r"data_sync_from_([^_]*)")

Labels = tuple[tuple[str, str], ...]


def fixed_name(metric: str) -> tuple[str, Labels]:
    """ceph-exporter's fixed names (``add_fixed_name_metrics``): a metric named after an RGW
    multisite source zone, ``ceph_data_sync_from_<zone>_<counter>``, becomes
    ``ceph_data_sync_from_zone_<counter>`` with the label ``source_zone="<zone>"``; any other
    name is kept, with no extra label."""
    match = _DATA_SYNC_FROM.search(metric)
    if match is None:
        return metric, ()
    return _DATA_SYNC_FROM.sub("data_sync_from_zone", metric), (("source_zone", match.group(1)),)


@dataclass(frozen=True)
class _Counter:
    collection: str
    counter: str
    metric: str
    is_average: bool
    metric_type: str
    description: str
    extra_labels: Labels = ()

    @property
    def sum_family(self) -> tuple[str, str, str]:
        return (self.metric + "_sum", self.metric_type, self.description + " Total")

    @property
    def count_family(self) -> tuple[str, str, str]:
        return (self.metric + "_count", COUNTER, self.description + " Count")

    @property
    def value_family(self) -> tuple[str, str, str]:
        return (self.metric, self.metric_type, self.description)


_Family = tuple[str, str, str]
_Entry = tuple[str, bool, _Family, str, _Family, str]


@dataclass(frozen=True)
class _Plan:
    """What to emit for one daemon, derived from its schema, with the sample-line
    prefixes (``name{ceph_daemon="osd.N"} ``) rendered once per daemon life."""

    pid: int | None
    shape: tuple[tuple[str, int], ...]
    # (collection, [(counter, is_average, (family args, line prefix) for value or sum,
    #                (family args, line prefix) for count)])
    collections: tuple[tuple[str, tuple[_Entry, ...]], ...]


def build_plan(
    pid: int | None, shape: tuple[tuple[str, int], ...], counters: tuple[_Counter, ...],
    label: str,
) -> _Plan:
    by_collection: dict[str, list[_Entry]] = {}
    for c in counters:
        if c.is_average:
            first, second = c.sum_family, c.count_family
        else:
            first = second = c.value_family
        labels = f"{label},{render_labels(dict(c.extra_labels))}" if c.extra_labels else label
        by_collection.setdefault(c.collection, []).append(
            (
                c.counter,
                c.is_average,
                first,
                line_prefix(first[0], labels),
                second,
                line_prefix(second[0], labels),
            )
        )
    return _Plan(pid, shape, tuple((k, tuple(v)) for k, v in by_collection.items()))


def dump_shape(dump: dict[str, Any]) -> tuple[tuple[str, int], ...]:
    """Collections and their sizes: changes when a daemon restarts with other counters."""
    return tuple((name, len(group)) for name, group in dump.items() if isinstance(group, dict))


def plan_from_schema(schema: Any, priority: int,
                     excluded: re.Pattern[str] | None = None) -> tuple[_Counter, ...]:
    if not isinstance(schema, dict):
        raise ValueError(f"perf schema is a {type(schema).__name__}, not an object")
    counters: list[_Counter] = []
    for collection, group in schema.items():
        if not isinstance(group, dict):
            continue
        if excluded is not None and excluded.fullmatch(collection):
            continue
        for counter, info in group.items():
            kind = exported_kind(info, priority)
            if kind is None:
                continue
            longrunavg, mtype = kind
            metric, extra_labels = fixed_name(promethize(f"{collection}_{counter}"))
            counters.append(
                _Counter(
                    collection,
                    counter,
                    metric,
                    longrunavg,
                    mtype,
                    str(info.get("description") or f"{collection} {counter}"),
                    extra_labels,
                )
            )
    return tuple(counters)


def schema_int(value: Any) -> int | None:
    """An integer schema field (Ceph writes ints; some releases strings of digits)."""
    if type(value) is int:
        return value
    if type(value) is str and value.lstrip("-").isdigit():
        return int(value)
    return None


def _number(value: Any) -> float | None:
    kind = type(value)
    if kind is int or kind is float:
        return value
    if kind is bool:
        return int(value)
    return None


class PerfCollector(DaemonCollector):
    name = "perf"
    help = "perf counters from perf dump/perf schema, with ceph-exporter's names"
    default_enabled = True
    # Like ceph-exporter: every daemon but mgr (the mgr prometheus module exports those)
    # and short-lived clients; a gateway (client.rgw.*) is a daemon here.
    daemon_types = frozenset({"osd", "mon", "mds", "rgw"})

    settings_type = PerfSettings

    def __init__(self, settings: PerfSettings | None = None, host: HostSettings | None = None
                 ) -> None:
        super().__init__(settings, host)
        self.priority = self.settings.priority
        self.excluded = collection_filter(self.settings.exclude_collections,
                                          "--collector.perf.exclude-collections")
        self._plans: dict[str, _Plan] = {}

    def forget_daemon(self, daemon_name: str) -> None:
        self._plans.pop(daemon_name, None)

    def prefetch(self, daemon: Daemon) -> Sequence[tuple[str, dict[str, Any]]]:
        if daemon.name in self._plans:
            return (("perf dump", {}),)
        return (("perf dump", {}), ("perf schema", {}))

    def _plan(self, session: DaemonSession, dump: dict[str, Any]) -> _Plan:
        name = session.daemon.name
        pid = session.peer_pid
        shape = dump_shape(dump)
        plan = self._plans.get(name)
        if plan is not None and plan.pid == pid and plan.shape == shape:
            return plan
        counters = plan_from_schema(session.command("perf schema"), self.priority, self.excluded)
        # The schema's pid: if the daemon restarted between dump and schema, the next
        # scrape's dump comes from that pid and its shape decides whether to refetch.
        plan = build_plan(session.peer_pid, shape, counters, session.counter_label)
        self._plans[name] = plan
        return plan

    def collect_daemon(self, session: DaemonSession, sink: MetricSink) -> None:
        dump = session.command("perf dump")
        if not isinstance(dump, dict):
            raise ValueError(f"{session.daemon.name}: perf dump is not an object")
        plan = self._plan(session, dump)
        family = sink.family
        for collection, entries in plan.collections:
            group = dump.get(collection)
            if not isinstance(group, dict):
                continue
            for counter, is_average, first, first_prefix, second, second_prefix in entries:
                value = group.get(counter)
                if value is None:
                    # Schema and dump from different daemon lives: emit what both know.
                    continue
                if is_average:
                    if type(value) is not dict:
                        continue
                    total = _number(value.get("sum"))
                    count = _number(value.get("avgcount"))
                    if total is None or count is None:
                        continue
                    family(*first).add_line(first_prefix, total)
                    family(*second).add_line(second_prefix, count)
                else:
                    number = _number(value)
                    if number is not None:
                        family(*first).add_line(first_prefix, number)


COLLECTOR = PerfCollector
