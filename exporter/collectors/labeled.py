"""Collector ``labeled``: labeled perf counters (``counter dump`` + ``counter schema``, Reef and
later), named and labelled as ceph-exporter does.

``counter dump`` maps each key to a list of ``{"labels": {...}, "counters": {...}}`` entries;
``counter schema`` has the same shape with each counter's type, metric_type, priority and
description. Entries with an empty ``labels`` object are the counters ``perf dump`` already
gives (exported by the ``perf`` collector); this collector exports the others, e.g. (with
``--collector.labeled.exclude-collections=``) one ``AsyncMessenger::Worker`` entry per
messenger worker ``{"id": "0"}``:

    ceph_AsyncMessenger_Worker_msgr_connection_idle_timeouts{ceph_daemon="osd.0",id="0"} 0

Names follow ``promethize`` of the perf collector (``ceph_<key>_<counter>``), averages become
``_sum`` / ``_count``, the priority threshold is the perf collector's, and the counter's labels
are added beside ``ceph_daemon`` (a gateway's: ``instance_id``; src/exporter/DaemonMetricCollector.cc
does the same), e.g. Tentacle's per-user and per-bucket RGW op counters (with
``rgw_user_counters_cache`` / ``rgw_bucket_counters_cache`` on):

    ceph_rgw_op_per_bucket_put_obj_ops{instance_id="a",bucket="b1"} 4

Keys matched by ``--collector.labeled.exclude-collections`` are not exported: by default the
messenger's per-worker entries and Tentacle's per-level scrub entries (docs/metrics.md, *Series
per OSD*). Daemons without the command (Pacific) are remembered per daemon life and not asked
again. The schema is kept per daemon life and read again when the dump holds a labeled entry it
does not list: a gateway makes its per-bucket and per-user entries as buckets and users are used.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cephscope.exporter.asok import AsokCommandError, Daemon
from cephscope.exporter.collector import DaemonCollector, DaemonSession
from cephscope.exporter.collectors.perf import (
    Labels,
    _number,
    exclusion_regex,
    exported_kind,
    fixed_name,
    promethize,
)
from cephscope.exporter.exposition import COUNTER, MetricSink
from cephscope.exporter.settings import HostSettings, option

_LABEL_NAME = re.compile(r"[^A-Za-z0-9_]")


# Keys (collections) left out by default (docs/metrics.md, *Series per OSD*): the messenger's
# per-worker connection timeouts (2 per worker: 6 per daemon with the default 3 workers) and
# Tentacle's scrub counters per level and pool type (20 per OSD).
DEFAULT_EXCLUDED_COLLECTIONS = "AsyncMessenger::Worker|osd_scrub_.*"


@dataclass(frozen=True)
class LabeledSettings:
    priority: int = option(
        5, "export labeled counters with priority >= N (as --collector.perf.priority)", metavar="N")
    exclude_collections: str = option(
        DEFAULT_EXCLUDED_COLLECTIONS, "counter dump keys (collections) not exported, a regex "
        "matching the whole key; '' exports every key", metavar="REGEX")


@dataclass(frozen=True)
class _Series:
    """One labeled counter: where it is in the dump and how it is exported."""

    key: str
    labels: Labels
    counter: str
    metric: str
    is_average: bool
    metric_type: str
    description: str
    extra_labels: Labels = ()


def _labels_key(labels: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(labels, dict):
        return ()
    return tuple(sorted((str(k), str(v)) for k, v in labels.items()))


def plan_from_counter_schema(schema: Any, priority: int,
                             excluded: re.Pattern[str] | None = None) -> tuple[_Series, ...]:
    """The labeled counters of a ``counter schema`` reply at or above ``priority``, but those
    of the keys ``excluded`` matches."""
    if not isinstance(schema, dict):
        raise ValueError(f"counter schema is a {type(schema).__name__}, not an object")
    series: list[_Series] = []
    for key, entries in schema.items():
        if not isinstance(entries, list):
            continue
        if excluded is not None and excluded.fullmatch(key):
            continue
        for entry in entries:
            if not isinstance(entry, dict):
                continue
            labels = _labels_key(entry.get("labels"))
            counters = entry.get("counters")
            if not labels or not isinstance(counters, dict):
                continue  # unlabeled: perf dump's counters, exported by the perf collector
            for counter, info in counters.items():
                kind = exported_kind(info, priority)
                if kind is None:
                    continue
                metric, extra_labels = fixed_name(promethize(f"{key}_{counter}"))
                series.append(_Series(
                    key, labels, counter, metric, *kind,
                    str(info.get("description") or f"{key} {counter}"), extra_labels,
                ))
    return tuple(series)


def labeled_entries(reply: Any) -> frozenset[tuple[str, tuple[tuple[str, str], ...]]]:
    """(key, labels) of every labeled entry of a ``counter dump`` or ``counter schema`` reply."""
    if not isinstance(reply, dict):
        return frozenset()
    return frozenset((key, labels) for key, entries in reply.items() if isinstance(entries, list)
                     for entry in entries if isinstance(entry, dict)
                     if (labels := _labels_key(entry.get("labels"))))


@dataclass(frozen=True)
class _Plan:
    """What one daemon life's schema says: the series to export and every labeled entry it
    listed (those with no counter at the priority too)."""

    pid: int | None
    series: tuple[_Series, ...]
    entries: frozenset[tuple[str, tuple[tuple[str, str], ...]]]


class LabeledPerfCollector(DaemonCollector):
    name = "labeled"
    help = "labeled perf counters from counter dump/counter schema (Reef and later)"
    default_enabled = True
    daemon_types = frozenset({"osd", "mon", "mds", "rgw"})

    settings_type = LabeledSettings

    def __init__(self, settings: LabeledSettings | None = None,
                 host: HostSettings | None = None) -> None:
        super().__init__(settings, host)
        self.priority = self.settings.priority
        self.excluded = exclusion_regex(self.settings.exclude_collections,
                                        "--collector.labeled.exclude-collections")
        # daemon -> its schema's plan; daemon -> pid of a life without `counter dump`
        self._plans: dict[str, _Plan] = {}
        self._unsupported: dict[str, int | None] = {}

    def forget_daemon(self, daemon_name: str) -> None:
        self._plans.pop(daemon_name, None)
        self._unsupported.pop(daemon_name, None)

    def prefetch(self, daemon: Daemon) -> Sequence[tuple[str, dict[str, Any]]]:
        if daemon.name in self._unsupported:
            return ()
        if daemon.name in self._plans:
            return (("counter dump", {}),)
        return (("counter dump", {}), ("counter schema", {}))

    def collect_daemon(self, session: DaemonSession, sink: MetricSink) -> None:
        name = session.daemon.name
        pid = session.pid()
        if name in self._unsupported and self._unsupported[name] == pid:
            return
        try:
            dump = session.command("counter dump")
        except AsokCommandError:
            self._unsupported[name] = pid  # Pacific: no labeled counters in this life
            return
        self._unsupported.pop(name, None)
        if not isinstance(dump, dict):
            raise ValueError(f"{name}: counter dump is not an object")
        cached = self._plans.get(name)
        if cached is None or cached.pid != pid or not labeled_entries(dump) <= cached.entries:
            # the entries are the schema's own, excluded ones too: they are known, not new
            schema = session.command("counter schema")
            cached = _Plan(pid, plan_from_counter_schema(schema, self.priority, self.excluded),
                           labeled_entries(schema))
            self._plans[name] = cached
        values: dict[tuple[str, tuple[tuple[str, str], ...]], dict[str, Any]] = {}
        for key, entries in dump.items():
            if isinstance(entries, list):
                for entry in entries:
                    if isinstance(entry, dict) and isinstance(entry.get("counters"), dict):
                        values[(key, _labels_key(entry.get("labels")))] = entry["counters"]
        for series in cached.series:
            counters = values.get((series.key, series.labels))
            if counters is None or series.counter not in counters:
                continue  # schema and dump from different lives: emit what both know
            labels = dict(session.daemon.counter_labels)
            for label, value in (*series.labels, *series.extra_labels):
                labels.setdefault(_LABEL_NAME.sub("_", label), value)
            value = counters[series.counter]
            if series.is_average:
                if not isinstance(value, dict):
                    continue
                total, count = _number(value.get("sum")), _number(value.get("avgcount"))
                if total is None or count is None:
                    continue
                sink.family(series.metric + "_sum", series.metric_type,
                            series.description + " Total").add(total, labels)
                sink.family(series.metric + "_count", COUNTER,
                            series.description + " Count").add(count, labels)
            else:
                number = _number(value)
                if number is not None:
                    sink.family(series.metric, series.metric_type, series.description).add(
                        number, labels)


COLLECTOR = LabeledPerfCollector
