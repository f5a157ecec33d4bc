"""Collector ``opqueue``: per-shard OSD op-queue state from ``dump_op_pq_state``.

The OSD's sharded op work queue dumps one object per shard, ``"OSD:ShardedOpWQ:<i>"``,
holding whatever its scheduler dumps (src/osd/OSD.h ``ShardedOpWQ::dump``):

* ``wpq`` (Pacific's default, src/common/WeightedPriorityQueue.h): ``high_queues`` (strict
  queue, ops at or above ``osd_op_queue_cut_off``) and ``queues`` (weighted queue). Each is
  written into a JSON *array* section, so the ``dump_int`` names are dropped and the array
  is flat: ``[total_priority, max_cost, {"priority", "num_keys", "first_item_cost"},
  total_priority, max_cost, {...}, ...]``, one object per non-empty priority. ``num_keys``
  is the number of items queued for the priority's *next* class (client), so summing it
  over priorities gives a lower bound of the queue length (exact with one client per
  priority, as in a single rados bench).
* ``mclock_scheduler``: Pacific dumps an empty object; later releases dump
  ``queue_sizes`` (``immediate`` or, Reef and Tentacle, ``high_priority_queue``: ops that
  bypass mClock; ``scheduler`` = requests queued in mClock), ``mClockClients.client_count``
  and ``mClockClients.clients``, dmclock's text dump of one record per client:
  ``{ client:{ class_id: C client_id: I profile_id: P }, record:{ … req_count:N … } }``.
  ``class_id`` is ``op_scheduler_class`` (src/osd/scheduler/OpSchedulerItem.h: 0
  background_recovery, 1 background_best_effort, 2 immediate, 3 client); summing
  ``req_count`` per class gives the queued requests per class (verified on Reef 18.2.7 and
  Tentacle 20.2.4 under rados bench: the sum equals ``queue_sizes.scheduler``). The dump holds
  no per-request tags or wait times and no per-client identity beyond the class (the OSD
  keys all client ops of one class as one dmclock client), so neither is exported.
  The scheduler's profile (``osd_mclock_profile``: high_client_ops, balanced,
  high_recovery_ops, custom) comes from ``config get`` and labels the info series.

By default one queue per shard is exported, the one client ops wait in (wpq ``normal``,
mclock ``scheduler``); the strict queues (``--collector.opqueue.strict-queues``) and wpq's
per-priority detail (``--collector.opqueue.priorities``) are one flag away (docs/metrics.md,
*Series per OSD*).

The dump takes each shard's lock, so it is rate-limited per daemon by
``--collector.opqueue.min-interval``: between dumps the cached values are served again
(dropped when the OSD's pid changes, so a restart with another ``osd_op_num_shards`` shows
at once). Queue wait per op type is not here: it is the recording rule
``ceph_daemon:cephscope_osd_op_queue_wait_seconds:avg_rate`` (alerts/opqueue.rules.yml),
op latency minus op process latency from the perf counters.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cephscope.exporter.asok import AsokCommandError, Daemon
from cephscope.exporter.collector import DaemonCollector, DaemonSession
from cephscope.exporter.exposition import MetricSink, render_labels
from cephscope.exporter.settings import HostSettings, option


@dataclass(frozen=True)
class OpQueueSettings:
    min_interval: float = option(
        5.0, "at most one dump_op_pq_state per OSD in this many seconds (it takes every "
        "shard's lock); scrapes in between serve the cached values", metavar="SECONDS")
    strict_queues: bool = option(
        False, "also export each shard's strict queue (wpq high, mclock immediate/high: ops "
        "that bypass the weighted or mClock queue)")
    priorities: bool = option(
        False, "also export wpq's per-priority detail (cephscope_osd_op_queue_priorities, "
        "cephscope_osd_op_queue_priority_items)")


# Queues of ops that bypass the shard's scheduler (peering and other high-priority messages):
# all but empty under client load, one series per shard each.
STRICT_QUEUES = frozenset({"high", "immediate"})


_SHARD_KEY = re.compile(r"^OSD:ShardedOpWQ:(\d+)$")
_MCLOCK_CLIENT = re.compile(
    r"\{ client:\{ class_id: (\d+) client_id: \d+ profile_id: \d+ \}, record:\{.*?req_count:(\d+)"
)
# src/osd/scheduler/OpSchedulerItem.h op_scheduler_class, Quincy to Tentacle.
MCLOCK_CLASSES = {0: "background_recovery", 1: "background_best_effort", 2: "immediate", 3: "client"}
# Queue priorities are unsigned and, in practice, 0..255 (CEPH_MSG_PRIO_*); anything else
# is not a priority and would make the label unbounded.
MAX_PRIORITY = 255


@dataclass(frozen=True)
class PriorityQueue:
    """One non-empty priority of a wpq queue."""

    priority: int
    items: int  # num_keys: items queued for the priority's next class
    first_item_cost: int | None


@dataclass(frozen=True)
class ShardQueue:
    """One queue of one shard: items (lower bound for wpq) and per-priority detail."""

    items: int
    priorities: tuple[PriorityQueue, ...] = ()


@dataclass(frozen=True)
class ShardState:
    shard: int
    scheduler: str  # "wpq", "mclock" or "unknown"
    # queue label -> state: wpq "normal"/"high"; mclock "scheduler"/"immediate"/"high".
    queues: dict[str, ShardQueue]
    mclock_clients: int | None = None
    # op_scheduler_class name -> requests queued in mClock (releases that dump the records)
    mclock_class_items: dict[str, int] | None = None


def _int(value: Any, what: str) -> int:
    # bool is an int subclass in Python but never a count in these dumps.
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{what} is {value!r}, not an integer")
    return value


def parse_wpq_queue(entries: Any, what: str) -> ShardQueue:
    """The flat array of a wpq ``queues`` / ``high_queues`` section."""
    if not isinstance(entries, list):
        raise ValueError(f"{what} is {type(entries).__name__}, not a list")
    priorities: list[PriorityQueue] = []
    for entry in entries:
        if isinstance(entry, dict):
            priority = _int(entry.get("priority"), f"{what} priority")
            if not 0 <= priority <= MAX_PRIORITY:
                raise ValueError(f"{what} priority {priority} is outside 0..{MAX_PRIORITY}")
            items = _int(entry.get("num_keys"), f"{what} num_keys")
            cost = entry.get("first_item_cost")
            priorities.append(
                PriorityQueue(
                    priority,
                    items,
                    None if cost is None else _int(cost, f"{what} first_item_cost"),
                )
            )
        else:
            # total_priority / max_cost of the queue, repeated before each priority.
            _int(entry, f"{what} element")
    return ShardQueue(sum(p.items for p in priorities), tuple(priorities))


def parse_shard(shard: int, body: Any) -> ShardState:
    what = f"shard {shard}"
    if not isinstance(body, dict):
        raise ValueError(f"{what} is {type(body).__name__}, not an object")
    if "queues" in body or "high_queues" in body:
        return ShardState(
            shard,
            "wpq",
            {
                "normal": parse_wpq_queue(body.get("queues", []), f"{what} queues"),
                "high": parse_wpq_queue(body.get("high_queues", []), f"{what} high_queues"),
            },
        )
    sizes = body.get("queue_sizes")
    if isinstance(sizes, dict):
        queues = {
            "scheduler": ShardQueue(_int(sizes.get("scheduler", 0), f"{what} scheduler")),
        }
        if "immediate" in sizes:
            queues["immediate"] = ShardQueue(_int(sizes["immediate"], f"{what} immediate"))
        if "high_priority_queue" in sizes:
            queues["high"] = ShardQueue(_int(sizes["high_priority_queue"], f"{what} high_priority_queue"))
        clients = body.get("mClockClients")
        count = clients.get("client_count") if isinstance(clients, dict) else None
        records = clients.get("clients") if isinstance(clients, dict) else None
        return ShardState(
            shard,
            "mclock",
            queues,
            None if count is None else _int(count, f"{what} client_count"),
            parse_mclock_clients(records) if isinstance(records, str) else None,
        )
    if not body:
        # Pacific's mClockScheduler::dump writes nothing.
        return ShardState(shard, "mclock", {})
    return ShardState(shard, "unknown", {})


def parse_mclock_clients(text: str) -> dict[str, int]:
    """Queued requests per scheduler class from dmclock's text dump of its client records."""
    per_class: dict[str, int] = {}
    for class_id, req_count in _MCLOCK_CLIENT.findall(text):
        name = MCLOCK_CLASSES.get(int(class_id), f"class_{int(class_id)}")
        per_class[name] = per_class.get(name, 0) + int(req_count)
    return per_class


def parse_op_pq_state(doc: Any) -> list[ShardState]:
    """``dump_op_pq_state`` → shard states sorted by shard index."""
    if not isinstance(doc, dict):
        raise ValueError(f"dump_op_pq_state is {type(doc).__name__}, not an object")
    shards = []
    for key, body in doc.items():
        match = _SHARD_KEY.match(key)
        if match is None:
            continue
        shards.append(parse_shard(int(match[1]), body))
    if doc and not shards:
        raise ValueError(f"dump_op_pq_state has no OSD:ShardedOpWQ:<i> sections: {list(doc)[:5]}")
    return sorted(shards, key=lambda s: s.shard)


def emit(
    shards: list[ShardState], daemon_label: str, sink: MetricSink, age: float, profile: str = "",
    *, strict_queues: bool = True, priorities: bool = True,
) -> None:
    """Add the series of one daemon's parsed dump to ``sink``; the strict queues and wpq's
    per-priority detail only when asked."""
    sink.gauge(
        "cephscope_osd_op_shards",
        "Number of op queue shards of the OSD (OSD:ShardedOpWQ sections in dump_op_pq_state).",
    ).add_rendered(daemon_label, len(shards))
    sink.gauge(
        "cephscope_osd_op_queue_dump_age_seconds",
        "Age of the dump_op_pq_state snapshot served (cached up to "
        "--collector.opqueue.min-interval).",
    ).add_rendered(daemon_label, round(age, 6))
    schedulers = sorted({s.scheduler for s in shards})
    info = sink.gauge(
        "cephscope_osd_op_queue_info",
        "Op queue scheduler as seen in dump_op_pq_state (wpq, mclock, unknown) and, for "
        "mclock, its osd_mclock_profile; always 1.",
    )
    for scheduler in schedulers:
        labels = f'{daemon_label},scheduler="{scheduler}"'
        if scheduler == "mclock":
            labels += "," + render_labels({"profile": profile})
        info.add_rendered(labels, 1)
    items = sink.gauge(
        "cephscope_osd_op_queue_items",
        "Ops queued in one shard queue at the snapshot. wpq: sum over priorities of the "
        "items queued for each priority's next client (exact with one client per priority, "
        "else a lower bound); mclock: the dump's queue sizes.",
    )
    active = sink.gauge(
        "cephscope_osd_op_queue_priorities",
        "Non-empty priority levels in one wpq shard queue at the snapshot.",
    )
    per_priority = sink.gauge(
        "cephscope_osd_op_queue_priority_items",
        "Items queued for the next client of one non-empty wpq priority level "
        "(present only while that priority has queued ops).",
    )
    clients = sink.gauge(
        "cephscope_osd_op_queue_mclock_clients",
        "mClock clients known to one shard's scheduler (releases that dump it).",
    )
    class_items = sink.gauge(
        "cephscope_osd_op_queue_mclock_class_items",
        "Requests queued in one shard's mClock scheduler per op_scheduler_class "
        "(client, background_recovery, background_best_effort) at the snapshot.",
    )
    for state in shards:
        shard_label = f'{daemon_label},shard="{state.shard}"'
        for queue, sq in state.queues.items():
            if queue in STRICT_QUEUES and not strict_queues:
                continue
            labels = f'{shard_label},queue="{queue}"'
            items.add_rendered(labels, sq.items)
            if state.scheduler == "wpq" and priorities:
                active.add_rendered(labels, len(sq.priorities))
                for pq in sq.priorities:
                    per_priority.add_rendered(f'{labels},priority="{pq.priority}"', pq.items)
        if state.mclock_clients is not None:
            clients.add_rendered(shard_label, state.mclock_clients)
        for op_class, queued in sorted((state.mclock_class_items or {}).items()):
            class_items.add_rendered(f'{shard_label},class="{op_class}"', queued)


class _Cached:
    __slots__ = ("fetched_at", "pid", "profile", "shards")

    def __init__(self, shards: list[ShardState], pid: int | None, fetched_at: float,
                 profile: str = "") -> None:
        self.shards = shards
        self.pid = pid
        self.fetched_at = fetched_at
        self.profile = profile


class OpQueueCollector(DaemonCollector):
    name = "opqueue"
    help = "per-shard OSD op queue state from dump_op_pq_state (rate-limited)"
    default_enabled = True
    daemon_types = frozenset({"osd"})

    settings_type = OpQueueSettings

    def __init__(self, settings: OpQueueSettings | None = None,
                 host: HostSettings | None = None) -> None:
        super().__init__(settings, host)
        self.min_interval = max(self.settings.min_interval, 0.0)
        self._cache: dict[str, _Cached] = {}
        self._lock = threading.Lock()

    def forget_daemon(self, daemon_name: str) -> None:
        with self._lock:
            self._cache.pop(daemon_name, None)

    def prefetch(self, daemon: Daemon) -> Sequence[tuple[str, dict[str, Any]]]:
        with self._lock:
            cached = self._cache.get(daemon.name)
        if cached is not None and time.monotonic() - cached.fetched_at < self.min_interval:
            return ()  # served from the cache (unless the pid changed: then fetched on demand)
        return (("dump_op_pq_state", {}),)

    def collect_daemon(self, session: DaemonSession, sink: MetricSink) -> None:
        name = session.daemon.name
        pid = session.pid()
        now = time.monotonic()
        with self._lock:
            cached = self._cache.get(name)
        if cached is None or cached.pid != pid or now - cached.fetched_at >= self.min_interval:
            shards = parse_op_pq_state(session.command("dump_op_pq_state"))
            profile = self._mclock_profile(session) if any(s.scheduler == "mclock" for s in shards) else ""
            cached = _Cached(shards, pid, time.monotonic(), profile)
            with self._lock:
                self._cache[name] = cached
        emit(cached.shards, session.daemon_label, sink, time.monotonic() - cached.fetched_at,
             cached.profile, strict_queues=self.settings.strict_queues,
             priorities=self.settings.priorities)

    @staticmethod
    def _mclock_profile(session: DaemonSession) -> str:
        """osd_mclock_profile, or "" when the daemon does not answer it (not a scrape failure)."""
        try:
            reply = session.command("config get", var="osd_mclock_profile")
        except AsokCommandError:
            return ""
        value = reply.get("osd_mclock_profile") if isinstance(reply, dict) else None
        return str(value) if isinstance(value, str) else ""


COLLECTOR = OpQueueCollector
