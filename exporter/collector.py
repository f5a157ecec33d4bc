"""Collector framework of cephscope-exporter.

How to add a collector
----------------------
1. Create ``exporter/collectors/<name>.py`` with one class deriving from
   :class:`DaemonCollector` (runs once per daemon per scrape, e.g. perf counters of
   ``osd.3``) or :class:`HostCollector` (runs once per scrape for the whole host, e.g.
   topology), or :class:`CachedHostCollector` (a host collector that refreshes on a slow
   interval and serves its cached series in between).
2. Set the class attributes ``name`` (flag and label value: ``--collector.<name>``),
   ``help`` (one line for ``--help``), ``default_enabled``, and for daemon collectors
   ``daemon_types`` (e.g. ``frozenset({"osd"})``; ``None`` = every discovered type).
3. Optionally ``settings_type``: a frozen dataclass of the collector's own settings, its
   fields made with :func:`cephscope.exporter.settings.option` (default and help written
   once); the registry makes ``--collector.<name>.<field>`` flags of them. The instance
   receives its settings and the global :class:`~cephscope.exporter.settings.HostSettings`
   (``--path.*``, ``--ceph.*`` mon connection) in ``__init__(settings, host)``.
4. Implement ``collect_daemon(session, sink)`` / ``collect_host(ctx, sink)`` (or
   ``refresh(ctx, sink)`` for cached host collectors): call ``session.command("perf dump")``
   (allowlisted admin-socket commands only, memoised per daemon and scrape so collectors
   that need the same output share one round trip; list them in ``prefetch(daemon)`` too,
   so the scraper fetches them for all daemons at once) and add samples to
   ``sink.gauge(...)`` / ``sink.counter(...)`` / ``sink.histogram(...)``. Label daemon
   series with ``ceph_daemon=session.daemon.name`` (``session.daemon_label`` is that pair
   pre-rendered for :meth:`MetricFamily.add_rendered`); Ceph's own counters under
   ceph-exporter's names carry ``session.counter_label`` instead (``instance_id`` for a gateway).
5. End the module with ``COLLECTOR = YourCollector`` and add it to ``COLLECTORS`` in
   ``exporter/collectors/__init__.py``.

What the framework does for you
-------------------------------
* Every scrape discovers sockets, runs all daemons in parallel (one thread each, their
  daemon collectors in sequence, sharing one :class:`DaemonSession`) and host collectors
  in parallel with them, under the scrape deadline (Prometheus'
  ``X-Prometheus-Scrape-Timeout-Seconds`` minus ``--web.timeout-offset``). Each admin
  socket call is limited to ``--ceph.asok-timeout`` and to what is left of the deadline.
* Failures: a transport/JSON error (:class:`~cephscope.exporter.asok.AsokError` other than
  :class:`~cephscope.exporter.asok.AsokCommandError`) marks the daemon down
  (``cephscope_daemon_up`` 0) and drops the series of the collector it happened in; the
  session then fails fast for the rest of that scrape, so a hung daemon costs one timeout.
  Any other exception (including a command the daemon refuses) fails the collector
  (``cephscope_scrape_collector_success`` 0) and drops its series for that daemon only;
  other daemons and collectors are unaffected. Let errors propagate instead of catching
  them broadly. A failing host collector keeps what it added to the sink (so a cached
  collector serves its last good series) but reports success 0.
* Keep per-daemon state (caches) on the collector instance keyed by daemon name; the
  instance lives as long as the exporter. :meth:`DaemonCollector.forget_daemon` is called
  when a daemon's socket disappears. Per-daemon calls for *different* daemons run
  concurrently: do not share mutable objects across daemons without a lock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any, ClassVar

from cephscope.exporter.asok import (
    AsokCommandError,
    AsokError,
    AsokTimeoutError,
    Daemon,
    RawResponse,
    decode_response,
    request_raw,
)
from cephscope.exporter.exposition import MetricSink, render_labels
from cephscope.exporter.settings import HostSettings, NoSettings


class Collector:
    """Base of every collector: identity, settings type, construction from settings."""

    name: ClassVar[str] = ""
    help: ClassVar[str] = ""
    default_enabled: ClassVar[bool] = True
    settings_type: ClassVar[type[Any]] = NoSettings

    def __init__(self, settings: Any = None, host: HostSettings | None = None) -> None:
        self.settings = self.settings_type() if settings is None else settings
        self.host = HostSettings() if host is None else host


class DaemonSession:
    """One daemon's admin socket for the duration of one scrape.

    Commands are memoised by (prefix, args): the second collector asking for ``perf dump``
    gets the first one's parsed result (treat results as read-only). After a transport
    error every further command fails immediately with the same error.
    """

    def __init__(
        self,
        daemon: Daemon,
        *,
        deadline: float,
        call_timeout: float,
        max_response_bytes: int,
    ) -> None:
        self.daemon = daemon
        self.daemon_label = render_labels({"ceph_daemon": daemon.name})
        # ceph-exporter's labels of the daemon's perf counters (a gateway: instance_id).
        self.counter_label = render_labels(daemon.counter_labels)
        self.deadline = deadline
        self.call_timeout = call_timeout
        self.max_response_bytes = max_response_bytes
        self.transport_error: AsokError | None = None
        self.peer_pid: int | None = None
        self._memo: dict[tuple[str, str], Any] = {}
        self._raw: dict[tuple[str, str], bytes] = {}  # prefetched, decoded on first use

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    @staticmethod
    def memo_key(prefix: str, args: dict[str, Any]) -> tuple[str, str]:
        return (prefix, repr(sorted(args.items())) if args else "")

    def preload(self, prefix: str, args: dict[str, Any], outcome: RawResponse | AsokError) -> None:
        """Store a command's outcome fetched ahead (see ``DaemonCollector.prefetch``)."""
        if isinstance(outcome, AsokError):
            if isinstance(outcome, AsokCommandError):
                self._memo[self.memo_key(prefix, args)] = outcome
            elif self.transport_error is None:
                self.transport_error = outcome
            return
        if outcome.peer_pid:
            self.peer_pid = outcome.peer_pid
        self._raw[self.memo_key(prefix, args)] = outcome.payload

    def command(self, prefix: str, **args: Any) -> Any:
        """Parsed JSON of an allowlisted command (raises AsokError subclasses)."""
        key = self.memo_key(prefix, args)
        if key in self._memo:
            cached = self._memo[key]
            if isinstance(cached, AsokError):
                raise cached
            return cached
        payload = self._raw.pop(key, None)
        try:
            if payload is not None:
                result = decode_response(self.daemon.asok_path, prefix, payload)
            elif self.transport_error is not None:
                raise self.transport_error
            else:
                result = self._fetch(prefix, args)
        except AsokCommandError as err:
            self._memo[key] = err
            raise
        except AsokError as err:
            self.transport_error = err
            raise
        self._memo[key] = result
        return result

    def _fetch(self, prefix: str, args: dict[str, Any]) -> Any:
        path = self.daemon.asok_path
        timeout = min(self.call_timeout, self.remaining())
        if timeout <= 0:
            raise AsokTimeoutError(path, f"scrape deadline reached before {prefix!r}")
        # Compact JSON: Ceph's default json-pretty is ~40 % more bytes to send and parse.
        raw = request_raw(
            path,
            {"prefix": prefix, "format": "json", **args},
            timeout=timeout,
            max_response_bytes=self.max_response_bytes,
        )
        if raw.peer_pid:
            self.peer_pid = raw.peer_pid
        return decode_response(path, prefix, raw.payload)

    def release(self) -> None:
        """Drop replies and errors once the daemon's collectors are done (idempotent).

        A memoised error that was raised holds its traceback, whose frames hold this
        session: a reference cycle keeping every reply of the scrape (megabytes per OSD)
        alive until a full GC pass, which ``tune_gc_for_scrapes`` makes rare. That was the
        exporter's memory growth (~2 MB per scrape); clearing here frees them at once.
        """
        self._memo.clear()
        self._raw.clear()
        err: BaseException | None = self.transport_error
        while err is not None:  # the error and what it was raised from or during
            err.__traceback__ = None
            err = err.__cause__ or err.__context__

    def pid(self) -> int | None:
        """The daemon's pid (SO_PEERCRED of its socket), asking ``version`` if needed.

        None when the daemon is in a pid namespace this process cannot see.
        """
        if self.peer_pid is None:
            self.command("version")
        return self.peer_pid


class DaemonCollector(Collector):
    """Runs once per matching daemon per scrape."""

    daemon_types: ClassVar[frozenset[str] | None] = frozenset({"osd"})

    def handles(self, daemon: Daemon) -> bool:
        return self.daemon_types is None or daemon.type in self.daemon_types

    def prefetch(self, daemon: Daemon) -> Sequence[tuple[str, dict[str, Any]]]:
        """Commands ``collect_daemon`` will ask for, as (prefix, args).

        The scraper fetches them for all daemons at once in one event loop before the
        collectors run (cheaper than blocking reads in many threads); anything not listed
        is still fetched on demand by ``session.command``.
        """
        return ()

    def collect_daemon(self, session: DaemonSession, sink: MetricSink) -> None:
        raise NotImplementedError

    def forget_daemon(self, daemon_name: str) -> None:
        """The daemon's socket is gone: drop whatever is cached for it."""


class HostContext:
    """What a host collector may use: the daemons found this scrape and their sockets."""

    def __init__(
        self,
        daemons: list[Daemon],
        *,
        asok_dir: str,
        deadline: float,
        call_timeout: float,
        max_response_bytes: int,
    ) -> None:
        self.daemons = daemons
        self.asok_dir = asok_dir
        self.deadline = deadline
        self._call_timeout = call_timeout
        self._max_response_bytes = max_response_bytes

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def session(self, daemon: Daemon) -> DaemonSession:
        """A fresh session on one daemon (not shared with the per-daemon collectors)."""
        return DaemonSession(
            daemon,
            deadline=self.deadline,
            call_timeout=self._call_timeout,
            max_response_bytes=self._max_response_bytes,
        )


class HostCollector(Collector):
    """Runs once per scrape, in parallel with the daemons."""

    def collect_host(self, ctx: HostContext, sink: MetricSink) -> None:
        raise NotImplementedError


class CachedHostCollector(HostCollector):
    """Host collector whose series change rarely: ``refresh`` runs at most every
    ``refresh_interval_seconds`` (a failed refresh is retried next scrape); between
    refreshes the last good series are served again.
    """

    refresh_interval_seconds: float = 60.0

    def __init__(self, settings: Any = None, host: HostSettings | None = None) -> None:
        super().__init__(settings, host)
        self._cached: MetricSink | None = None
        self._refreshed_at = float("-inf")
        # Two concurrent scrapes must not refresh twice or see a half-built cache.
        self._lock = threading.Lock()

    def refresh(self, ctx: HostContext, sink: MetricSink) -> None:
        raise NotImplementedError

    def collect_host(self, ctx: HostContext, sink: MetricSink) -> None:
        with self._lock:
            now = time.monotonic()
            if self._cached is None or now - self._refreshed_at >= self.refresh_interval_seconds:
                fresh = MetricSink()
                try:
                    self.refresh(ctx, fresh)
                except Exception:
                    # Keep serving the previous series, but report the failure.
                    if self._cached is not None:
                        sink.extend(self._cached.families.values())
                    raise
                self._cached = fresh
                self._refreshed_at = now
            sink.extend(self._cached.families.values())
