"""One scrape: discover daemons, run collectors in parallel under a deadline, merge.

Always emitted, whatever fails: ``cephscope_daemon_up{ceph_daemon}``,
``cephscope_scrape_collector_success{collector}``,
``cephscope_scrape_collector_duration_seconds{collector}`` and
``cephscope_exporter_build_info``.
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import gc
import logging
import platform
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from cephscope import __version__
from cephscope.exporter.asok import (
    AsokCommandError,
    AsokError,
    Daemon,
    discover_daemons,
    fetch_concurrently,
)
from cephscope.exporter.collector import (
    Collector,
    DaemonCollector,
    DaemonSession,
    HostCollector,
    HostContext,
)
from cephscope.exporter.exposition import MetricFamily, MetricSink, render_labels

log = logging.getLogger("cephscope.exporter")


def tune_gc_for_scrapes() -> None:
    """Make the cyclic GC run less often (process-wide; called by ``main``).

    A scrape of 60 OSDs allocates ~10^5 short-lived containers (parsed JSON, samples);
    with the default gen-0 threshold of 700 the collector runs hundreds of times per scrape
    and walks the long-lived caches each time: ~15 % of a scrape's CPU. Nothing here makes
    reference cycles, so fewer collections cost no memory.
    """
    gc.set_threshold(50_000, 50, 100)


def _fields(collector: Collector, daemon: Daemon, err: BaseException) -> dict[str, Any]:
    # str(err): a record kept by a handler must not hold the traceback (and the scrape).
    return {"fields": {"collector": collector.name, "ceph_daemon": daemon.name, "err": str(err)}}


def limit_malloc_arenas(arenas: int = 2) -> None:
    """Cap glibc's malloc arenas (process-wide; called by ``main`` before any thread starts).

    Each scrape thread otherwise gets its own arena (up to 8 per core) and the replies'
    megabytes fragment across them: RSS crept up ~8 MB per 1000 scrapes at 12 OSDs; with two
    arenas it stays flat (56 -> 59 MB over 1000 scrapes). Not glibc: nothing to do.
    """
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt(_M_ARENA_MAX, arenas)
    except (OSError, AttributeError):
        pass


_M_ARENA_MAX = -8  # glibc malloc.h


@dataclass
class ScrapeSettings:
    asok_dir: str
    daemon_types: frozenset[str] | None = None  # None: every type a collector handles
    call_timeout: float = 2.0
    max_response_bytes: int = 64 * 1024 * 1024
    default_timeout: float = 10.0  # when Prometheus sends no timeout header
    timeout_offset: float = 0.5
    max_parallel: int = 16


@dataclass
class _DaemonOutcome:
    up: bool = True
    sinks: list[MetricSink] = field(default_factory=list)
    # collector name -> (succeeded, seconds)
    results: dict[str, tuple[bool, float]] = field(default_factory=dict)


class Scraper:
    """Runs scrapes. Owns the collectors (and so their caches) and a thread pool."""

    def __init__(self, collectors: list[Collector], settings: ScrapeSettings) -> None:
        self.settings = settings
        self.collectors = collectors
        self.daemon_collectors = [c for c in collectors if isinstance(c, DaemonCollector)]
        self.host_collectors = [c for c in collectors if isinstance(c, HostCollector)]
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=max(1, settings.max_parallel), thread_name_prefix="scrape"
        )
        self._known_daemons: set[str] = set()
        self._reported_no_daemons = False

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def deadline_from(self, timeout_header: str | None) -> float:
        """Monotonic deadline from ``X-Prometheus-Scrape-Timeout-Seconds`` (or default)."""
        timeout = self.settings.default_timeout
        if timeout_header:
            try:
                timeout = float(timeout_header)
            except ValueError:
                log.warning("ignoring bad scrape timeout header",
                            extra={"fields": {"header": timeout_header[:80]}})
        budget = max(timeout - self.settings.timeout_offset, 0.05)
        return time.monotonic() + budget

    def wanted_daemon_types(self) -> frozenset[str] | None:
        types: set[str] = set()
        for collector in self.daemon_collectors:
            if collector.daemon_types is None:
                return self.settings.daemon_types
            types |= collector.daemon_types
        if self.settings.daemon_types is not None:
            types &= self.settings.daemon_types
        return frozenset(types)

    def _new_session(self, daemon: Daemon, deadline: float) -> DaemonSession:
        return DaemonSession(
            daemon,
            deadline=deadline,
            call_timeout=self.settings.call_timeout,
            max_response_bytes=self.settings.max_response_bytes,
        )

    def _prefetch(self, sessions: list[DaemonSession], deadline: float) -> None:
        """Fetch every collector's declared commands for all daemons in one event loop."""
        wanted: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        by_path: dict[str, DaemonSession] = {}
        for session in sessions:
            daemon = session.daemon
            commands: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}
            for collector in self.daemon_collectors:
                if collector.handles(daemon):
                    for prefix, args in collector.prefetch(daemon):
                        commands.setdefault(DaemonSession.memo_key(prefix, args), (prefix, args))
            if commands:
                wanted[daemon.asok_path] = list(commands.values())
                by_path[daemon.asok_path] = session
        if not wanted:
            return
        outcomes = fetch_concurrently(
            {
                path: [{"prefix": p, "format": "json", **a} for p, a in cmds]
                for path, cmds in wanted.items()
            },
            deadline=deadline,
            call_timeout=self.settings.call_timeout,
            max_response_bytes=self.settings.max_response_bytes,
            max_parallel=self.settings.max_parallel,
        )
        for path, results in outcomes.items():
            session = by_path[path]
            for (prefix, args), outcome in zip(wanted[path], results, strict=False):
                session.preload(prefix, args, outcome)

    def _scrape_daemon(self, session: DaemonSession) -> _DaemonOutcome:
        daemon = session.daemon
        outcome = _DaemonOutcome()
        for collector in self.daemon_collectors:
            if not collector.handles(daemon):
                continue
            sink = MetricSink()
            started = time.monotonic()
            ok = True
            try:
                collector.collect_daemon(session, sink)
            except AsokCommandError as err:
                ok = False
                log.warning("admin socket command refused", extra=_fields(collector, daemon, err))
            except AsokError as err:
                # The daemon's fault (dead, hung, garbage): costs its series, not the collector.
                log.info("daemon not answering", extra=_fields(collector, daemon, err))
            except (ValueError, OSError) as err:
                # Expected failures (unparsable reply, process not found): the message says
                # it all; a traceback per daemon per scrape would drown the log.
                ok = False
                log.warning("collector failed", extra=_fields(collector, daemon, err))
            except Exception as err:
                ok = False
                log.exception("collector failed unexpectedly",
                              extra=_fields(collector, daemon, err))
            else:
                outcome.sinks.append(sink)
            outcome.results[collector.name] = (ok, time.monotonic() - started)
        outcome.up = session.transport_error is None
        # Its collectors are done: drop the parsed replies now, not at the end of the
        # scrape, so at most --scrape.max-parallel daemons' replies (~1 MB of Python
        # objects each) are alive at once instead of every daemon's (the RSS peak).
        session.release()
        return outcome

    def _scrape_host(self, collector: HostCollector, ctx: HostContext) -> tuple[MetricSink, bool]:
        sink = MetricSink()
        try:
            collector.collect_host(ctx, sink)
        except (ValueError, OSError) as err:
            log.warning("collector failed",
                        extra={"fields": {"collector": collector.name, "err": str(err)}})
            return sink, False
        except Exception:
            log.exception("collector failed unexpectedly",
                          extra={"fields": {"collector": collector.name}})
            return sink, False
        return sink, True

    def scrape(self, deadline: float) -> list[MetricFamily]:
        """All families of one scrape; returns by ``deadline`` (monotonic seconds)."""
        scrape_started = time.monotonic()
        daemons = discover_daemons(self.settings.asok_dir, self.wanted_daemon_types())
        self._log_discovery_change(len(daemons))
        names = {d.name for d in daemons}
        for gone in self._known_daemons - names:
            for collector in self.daemon_collectors:
                collector.forget_daemon(gone)
        self._known_daemons = names

        ctx = HostContext(
            daemons,
            asok_dir=self.settings.asok_dir,
            deadline=deadline,
            call_timeout=self.settings.call_timeout,
            max_response_bytes=self.settings.max_response_bytes,
        )
        host_futures = {
            self._pool.submit(self._timed_host, c, ctx): c for c in self.host_collectors
        }
        sessions = [
            self._new_session(d, deadline)
            for d in daemons
            if any(c.handles(d) for c in self.daemon_collectors)
        ]
        # Leave the collectors part of the budget: a daemon that hangs until the end of
        # the prefetch must not take the healthy daemons' collection time with it.
        budget = deadline - time.monotonic()
        self._prefetch(sessions, deadline - min(0.5, max(budget, 0) * 0.2))
        daemon_futures = {
            self._pool.submit(self._scrape_daemon, session): session for session in sessions
        }
        all_futures = [*daemon_futures, *host_futures]
        concurrent.futures.wait(all_futures, timeout=max(deadline - time.monotonic(), 0))

        # Per-daemon families are rendered as groups by name: no merged copies needed.
        collected: list[MetricFamily] = []
        success: dict[str, bool] = {c.name: True for c in self.collectors}
        duration: dict[str, float] = {c.name: 0.0 for c in self.collectors}
        up_family = MetricFamily(
            "cephscope_daemon_up",
            "gauge",
            "1 if the daemon's admin socket answered every command of this scrape, else 0.",
        )
        outcomes: dict[str, _DaemonOutcome] = {}
        late: list[str] = []
        for future, session in daemon_futures.items():
            name = session.daemon.name
            if future.done() and not future.cancelled() and future.exception() is None:
                outcomes[name] = future.result()
                continue
            future.cancel()
            # Down only if its socket failed: a daemon whose replies arrived but whose
            # collectors did not finish in time (the exporter's own slowness) is up, and
            # its collectors report failure instead.
            outcome = _DaemonOutcome(up=session.transport_error is None)
            for collector in self.daemon_collectors:
                if collector.handles(session.daemon):
                    outcome.results[collector.name] = (False, time.monotonic() - scrape_started)
            outcomes[name] = outcome
            late.append(name)
        if late:
            log.warning(
                "collectors not finished before the scrape deadline (exporter too slow)",
                extra={"fields": {"daemons": ",".join(sorted(late)), "count": len(late)}},
            )
        for future, session in daemon_futures.items():
            if future.done():
                session.release()
        # Collector order first, daemons sorted within: stable exposition.
        for collector in self.daemon_collectors:
            for name in sorted(outcomes):
                result = outcomes[name].results.get(collector.name)
                if result is not None:
                    ok, seconds = result
                    success[collector.name] &= ok
                    # Daemons run in parallel: the slowest daemon is the collector's cost.
                    duration[collector.name] = max(duration[collector.name], seconds)
        for name in sorted(outcomes):
            for sink in outcomes[name].sinks:
                collected.extend(sink.families.values())
            up_family.add_rendered(
                render_labels({"ceph_daemon": name}), 1 if outcomes[name].up else 0
            )
        for future, collector in host_futures.items():
            if future.done() and not future.cancelled() and future.exception() is None:
                sink, ok, seconds = future.result()
                collected.extend(sink.families.values())
                success[collector.name] = ok
                duration[collector.name] = seconds
            else:
                future.cancel()
                success[collector.name] = False
                duration[collector.name] = time.monotonic() - scrape_started
                log.warning("collector not done before the scrape deadline",
                            extra={"fields": {"collector": collector.name}})

        success_family = MetricFamily(
            "cephscope_scrape_collector_success",
            "gauge",
            "1 if the collector succeeded on every daemon it ran on in this scrape, else 0.",
        )
        duration_family = MetricFamily(
            "cephscope_scrape_collector_duration_seconds",
            "gauge",
            "Wall time of the collector in this scrape (slowest daemon for per-daemon ones).",
        )
        for collector in self.collectors:
            label = render_labels({"collector": collector.name})
            success_family.add_rendered(label, 1 if success[collector.name] else 0)
            duration_family.add_rendered(label, round(duration[collector.name], 6))
        build_family = MetricFamily(
            "cephscope_exporter_build_info",
            "gauge",
            "cephscope-exporter version and Python version, always 1.",
        )
        build_family.add(
            1, {"version": __version__, "pythonversion": platform.python_version()}
        )
        found_family = MetricFamily(
            "cephscope_daemons_found",
            "gauge",
            "Ceph daemons whose admin socket was found in the socket dir in this scrape.",
        )
        found_family.add(len(daemons), {})
        gateway_family = MetricFamily(
            "cephscope_rgw_instance_info",
            "gauge",
            "A gateway's instance_id (the label of its ceph_rgw_* series, as ceph-exporter "
            "derives it from the socket name) and its daemon name, always 1.",
        )
        for daemon in daemons:
            if daemon.instance_id is not None:
                gateway_family.add(1, {"ceph_daemon": daemon.name, "instance_id": daemon.instance_id})
        return [
            *collected,
            found_family,
            *([gateway_family] if gateway_family.samples else []),
            up_family,
            success_family,
            duration_family,
            build_family,
        ]

    def _log_discovery_change(self, found: int) -> None:
        """Say once (not every scrape) that the socket dir holds no daemon socket, and once
        when sockets appear again."""
        if found == 0 and not self._reported_no_daemons:
            log.warning(
                "no Ceph daemon admin socket in %s (looked for <cluster>-<type>.<id>.asok, "
                "<type>.<id>.asok and cephadm's <fsid>/ subdirs); see --ceph.asok-dir",
                self.settings.asok_dir,
            )
            self._reported_no_daemons = True
        elif found and self._reported_no_daemons:
            log.info("found %d Ceph daemon admin socket(s) in %s", found, self.settings.asok_dir)
            self._reported_no_daemons = False

    def _timed_host(
        self, collector: HostCollector, ctx: HostContext
    ) -> tuple[MetricSink, bool, float]:
        started = time.monotonic()
        sink, ok = self._scrape_host(collector, ctx)
        return sink, ok, time.monotonic() - started


T = TypeVar("T")


class _Flight(Generic[T]):
    __slots__ = ("done", "error", "finished", "result", "started")

    def __init__(self, started: float) -> None:
        self.started = started
        self.finished = float("inf")
        self.done = False
        self.result: T | None = None
        self.error: BaseException | None = None


class SingleFlight(Generic[T]):
    """Concurrent requests share one collection.

    A request arriving while a collection is in flight joins it and gets its result; one
    arriving when none is in flight starts one. A request that waited for a worker thread
    (``--web.max-requests`` busy) gets the result of the collection that was in flight when
    it arrived, even if that has ended meanwhile. N concurrent scrapers therefore cost one
    collection, and each waits at most one collection. The price: a reply's data may have
    been collected up to one collection (well under a second) before its request arrived,
    less than the jitter of Prometheus' own scrape timing; a scrape that must see a change
    made before it arrived waits for any collection in flight to end first (sequential
    scrapes always do). ``collect(deadline, arrived)`` runs in the thread of the request
    that starts the collection, with that request's deadline and arrival time.
    """

    def __init__(self, collect: Callable[[float, float], T]) -> None:
        self._collect = collect
        self._cond = threading.Condition()
        self._flight: _Flight[T] | None = None
        self._last: _Flight[T] | None = None  # the last finished collection

    def get(self, arrived: float, deadline: float) -> T | None:
        """The result of the collection in flight, or of a new one; None if it is not
        finished by ``deadline`` (monotonic seconds)."""
        with self._cond:
            flight = self._flight
            last = self._last
            leader = False
            if flight is None:
                if last is not None and last.started <= arrived <= last.finished:
                    flight = last  # in flight when this request arrived
                else:
                    flight = self._flight = _Flight(time.monotonic())
                    leader = True
        if leader:
            try:
                flight.result = self._collect(deadline, arrived)
            except BaseException as err:
                flight.error = err
            finally:
                with self._cond:
                    flight.done = True
                    flight.finished = time.monotonic()
                    self._flight = None
                    self._last = flight
                    self._cond.notify_all()
        else:
            with self._cond:
                while not flight.done:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return None
                    self._cond.wait(left)
        if flight.error is not None:
            raise flight.error
        return flight.result
