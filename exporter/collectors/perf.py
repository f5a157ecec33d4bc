"""Collector ``perf``: perf counters (``perf dump`` + ``perf schema``), named as ceph-exporter.

Naming follows ceph-exporter (src/exporter/DaemonMetricCollector.cc, ``promethize`` in
src/exporter/util.cc, kept in sync with the mgr prometheus module):

* name ``ceph_<collection>_<counter>``; a trailing ``-`` becomes ``_minus``; ``.``, ``/``,
  space and ``-`` become ``_``; ``::`` becomes ``_``; ``+`` becomes ``_plus``;
* counters below the priority threshold (``--ceph.perf-priority``, default 5 like
  ``exporter_prio_limit``) are skipped;
* long-running averages (schema type bit 0x4) become ``<name>_sum`` (schema's metric_type,
  help "<description> Total") and ``<name>_count`` (counter, help "<description> Count");
  time values are already seconds in ``perf dump``;
* everything else is one sample typed as the schema's ``metric_type`` (gauge/counter);
* one label ``ceph_daemon="osd.N"``.

The schema is cached per daemon and refetched when the daemon's pid (SO_PEERCRED) changes
or the shape of ``perf dump`` no longer matches the one seen with the cached schema (a
restart between two scrapes, or between the schema and the dump).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from cephscope.exporter.collector import DaemonCollector, DaemonSession
from cephscope.exporter.exposition import COUNTER, GAUGE, MetricSink

PERFCOUNTER_LONGRUNAVG = 0x4
PERFCOUNTER_HISTOGRAM = 0x10
DEFAULT_PRIORITY = 5


def promethize(name: str) -> str:
    """ceph-exporter's / mgr prometheus module's metric-name rules, with the ``ceph_`` prefix."""
    if name.endswith("-"):
        name = name[:-1] + "_minus"
    for char in "./ -":
        name = name.replace(char, "_")
    name = name.replace("::", "_").replace("+", "_plus")
    return "ceph_" + name


@dataclass(frozen=True)
class _Counter:
    collection: str
    counter: str
    metric: str
    is_average: bool
    metric_type: str
    description: str


@dataclass(frozen=True)
class _Plan:
    """What to emit for one daemon, derived from its schema."""

    pid: int | None
    shape: tuple[tuple[str, int], ...]
    counters: tuple[_Counter, ...]


def dump_shape(dump: dict[str, Any]) -> tuple[tuple[str, int], ...]:
    """Collections and their sizes: changes when a daemon restarts with other counters."""
    return tuple((name, len(group)) for name, group in dump.items() if isinstance(group, dict))


def plan_from_schema(schema: Any, priority: int) -> tuple[_Counter, ...]:
    if not isinstance(schema, dict):
        raise ValueError(f"perf schema is a {type(schema).__name__}, not an object")
    counters: list[_Counter] = []
    for collection, group in schema.items():
        if not isinstance(group, dict):
            continue
        for counter, info in group.items():
            if not isinstance(info, dict):
                continue
            ctype = int(info.get("type", 0))
            if ctype & PERFCOUNTER_HISTOGRAM:
                continue
            # Schemas without a priority (very old daemons) are not filtered.
            if int(info.get("priority", priority)) < priority:
                continue
            mtype = COUNTER if info.get("metric_type") == "counter" else GAUGE
            counters.append(
                _Counter(
                    collection,
                    counter,
                    promethize(f"{collection}_{counter}"),
                    bool(ctype & PERFCOUNTER_LONGRUNAVG),
                    mtype,
                    str(info.get("description") or f"{collection} {counter}"),
                )
            )
    return tuple(counters)


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float):
        return value
    return None


class PerfCollector(DaemonCollector):
    name = "perf"
    help = "perf counters from perf dump/perf schema, with ceph-exporter's names"
    default_enabled = True
    # Like ceph-exporter: every daemon but mgr (the mgr prometheus module exports those)
    # and short-lived clients.
    daemon_types = frozenset({"osd", "mon", "mds"})

    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__(args)
        self.priority = int(getattr(args, "ceph_perf_priority", DEFAULT_PRIORITY))
        self._plans: dict[str, _Plan] = {}

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--ceph.perf-priority",
            dest="ceph_perf_priority",
            type=int,
            default=DEFAULT_PRIORITY,
            metavar="N",
            help="export perf counters with priority >= N (ceph-exporter's exporter_prio_limit;"
            " 0 = all, 5 = useful, 10 = critical; default %(default)s)",
        )

    def forget_daemon(self, daemon_name: str) -> None:
        self._plans.pop(daemon_name, None)

    def _plan(self, session: DaemonSession, dump: dict[str, Any]) -> _Plan:
        name = session.daemon.name
        pid = session.peer_pid
        shape = dump_shape(dump)
        plan = self._plans.get(name)
        if plan is not None and plan.pid == pid and plan.shape == shape:
            return plan
        counters = plan_from_schema(session.command("perf schema"), self.priority)
        # The schema's pid: if the daemon restarted between dump and schema, the next
        # scrape's dump comes from that pid and its shape decides whether to refetch.
        plan = _Plan(session.peer_pid, shape, counters)
        self._plans[name] = plan
        return plan

    def collect_daemon(self, session: DaemonSession, sink: MetricSink) -> None:
        dump = session.command("perf dump")
        if not isinstance(dump, dict):
            raise ValueError(f"{session.daemon.name}: perf dump is not an object")
        plan = self._plan(session, dump)
        label = session.daemon_label
        for c in plan.counters:
            group = dump.get(c.collection)
            if not isinstance(group, dict):
                continue
            value = group.get(c.counter)
            if value is None:
                # Schema and dump from different daemon lives: emit what both know.
                continue
            if c.is_average:
                if not isinstance(value, dict):
                    continue
                total = _number(value.get("sum"))
                count = _number(value.get("avgcount"))
                if total is None or count is None:
                    continue
                sink.family(c.metric + "_sum", c.metric_type, c.description + " Total") \
                    .add_rendered(label, total)
                sink.family(c.metric + "_count", COUNTER, c.description + " Count") \
                    .add_rendered(label, count)
            else:
                number = _number(value)
                if number is None:
                    continue
                sink.family(c.metric, c.metric_type, c.description).add_rendered(label, number)


COLLECTOR = PerfCollector
