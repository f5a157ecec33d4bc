"""HTTP serving of cephscope-exporter: listener, connection handling, routes.

One event-loop thread owns the listening socket and every connection that has not yet sent
a complete request header (new connections, TLS handshakes, idle keep-alive connections):
an idle or half-open connection costs a file descriptor and a few hundred bytes, never a
thread. A connection whose header is complete goes to a pool of ``max_requests`` worker
threads; beyond that up to ``max_queued_requests`` wait for a worker (scrapes share one
collection, so waiting is cheap) and any more are answered 503 at once (like
node_exporter's ``--web.max-requests``). A header not complete within ``read_header_timeout`` of the first
byte (or of the accept) closes the connection.

Open client connections (idle, being read, queued or answered) are capped at
``max_connections``, lowered at start to what fits in the open-files limit beside the
scrape's own descriptors (:mod:`~cephscope.exporter.fdlimit`). At the cap, and after an
accept fails for lack of descriptors (EMFILE, ENFILE, ENOBUFS, ENOMEM), the event loop
stops watching the listener: new connections wait in the kernel's backlog until a
connection closes (or, after an error, a back-off of 5 ms doubling to 1 s, like Go's
``http.Server``) instead of the loop spinning on a listener that stays readable.

A GET or HEAD request with a body (``Content-Length`` other than 0, or any
``Transfer-Encoding``) is answered 400 and the connection closed: the server never reads
request bodies, so the body's bytes would otherwise be parsed as a second request.

Scrapes of the telemetry path go through :class:`~cephscope.exporter.scrape.SingleFlight`:
concurrent scrapers share one collection and one rendered (and gzipped) body, so N
Prometheus servers cost one.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import gzip
import html
import http.client
import io
import logging
import selectors
import socket
import ssl
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http import HTTPStatus

from cephscope import __version__
from cephscope.exporter import fdlimit
from cephscope.exporter.exposition import CONTENT_TYPE, MetricFamily, render
from cephscope.exporter.scrape import Scraper, SingleFlight
from cephscope.exporter.webconfig import WebConfig

TIMEOUT_HEADER = "X-Prometheus-Scrape-Timeout-Seconds"
# Longest request header accepted (Go's net/http default is 1 MiB; a scrape needs < 1 KiB).
MAX_HEADER_BYTES = 16 * 1024
# accept() errors that mean "no descriptor or buffer now": retrying at once would spin.
_ACCEPT_RESOURCE_ERRORS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
# Back-off after such an error: Go's http.Server's (5 ms doubling to 1 s).
ACCEPT_BACKOFF_MIN = 0.005
ACCEPT_BACKOFF_MAX = 1.0

log = logging.getLogger("cephscope.exporter")


def parse_listen_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` -> (host, port); host ``""`` means every interface (``:PORT``).

    As in the Prometheus ecosystem: ``:9967`` listens on all interfaces, ``[::]:9967`` on
    all IPv6 (and, dual-stack, IPv4) addresses, ``127.0.0.1:9967`` / ``[::1]:9967`` /
    ``name:9967`` on that address only.
    """
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"--web.listen-address {text!r}: expected HOST:PORT, [IPv6]:PORT or :PORT")
    if host.startswith("[") != host.endswith("]"):
        raise ValueError(f"--web.listen-address {text!r}: unbalanced brackets")
    if host.startswith("["):
        host = host[1:-1]
        if not host:
            raise ValueError(f"--web.listen-address {text!r}: empty IPv6 address")
    elif ":" in host:
        raise ValueError(f"--web.listen-address {text!r}: write an IPv6 address as [ADDR]:PORT")
    return host, int(port)


def bind_listener(host: str, port: int, backlog: int) -> socket.socket:
    """A listening TCP socket; ``host`` ``""`` binds every interface (dual-stack if possible)."""
    candidates: list[tuple[socket.AddressFamily, tuple]] = []
    if host in ("", "::") and socket.has_ipv6:
        candidates.append((socket.AF_INET6, ("::", port, 0, 0)))
    if host in ("", "0.0.0.0"):
        candidates.append((socket.AF_INET, ("0.0.0.0", port)))
    if not candidates:
        try:
            infos = socket.getaddrinfo(
                host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
            )
        except socket.gaierror as err:
            raise OSError(errno.EADDRNOTAVAIL, f"cannot resolve {host!r}: {err}") from None
        candidates = [(info[0], info[4]) for info in infos]
    last: OSError | None = None
    for family, sockaddr in candidates:
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6 and sockaddr[0] == "::":
                # "all interfaces": IPv4 too, through v4-mapped addresses.
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            sock.bind(sockaddr)
            sock.listen(backlog)
        except OSError as err:
            sock.close()
            last = err
            continue
        sock.setblocking(False)
        return sock
    assert last is not None
    raise last


@dataclass
class HttpSettings:
    telemetry_path: str = "/metrics"
    max_requests: int = 40
    max_queued_requests: int = 200  # complete requests waiting for a worker; more get 503
    read_header_timeout: float = 10.0
    idle_timeout: float = 120.0  # keep-alive connection with no new request
    write_timeout: float = 60.0
    # Open client connections; lowered to what fits in RLIMIT_NOFILE (see fdlimit).
    max_connections: int = 4096
    backlog: int = 1024


LANDING_PAGE = """<!DOCTYPE html>
<html><head><title>cephscope exporter</title></head>
<body><h1>cephscope exporter</h1>
<p>Version {version}. Admin sockets in <code>{asok_dir}</code>.</p>
<p><a href="{path}">Metrics</a></p>
<p>Collectors: {collectors}</p>
</body></html>
"""


class Exposition:
    """One collection's rendered body, shared by every request that joined it."""

    def __init__(self, body: bytes) -> None:
        self.body = body
        self._gzipped: bytes | None = None
        self._lock = threading.Lock()

    def gzipped(self) -> bytes:
        with self._lock:
            if self._gzipped is None:
                # Level 1: ~10x smaller for this text at a fraction of level 9's CPU.
                self._gzipped = gzip.compress(self.body, compresslevel=1, mtime=0)
            return self._gzipped


@dataclass
class _Conn:
    sock: socket.socket
    peer: str
    deadline: float
    buf: bytearray = field(default_factory=bytearray)
    handshaking: bool = False
    idle: bool = True  # no byte of the next request yet
    closed: bool = False


@dataclass
class _Request:
    method: str
    path: str
    version: str
    headers: http.client.HTTPMessage
    arrived: float


@dataclass
class _Counters:
    requests: collections.Counter[str] = field(default_factory=collections.Counter)
    rejected: int = 0
    collections: int = 0
    waited_seconds: float = 0.0


def accepts_gzip(header: str | None) -> bool:
    """True if an ``Accept-Encoding`` header allows gzip (``gzip`` or ``*``, q > 0)."""
    if not header:
        return False
    for item in header.split(","):
        coding, _, params = item.strip().partition(";")
        if coding.strip().lower() not in ("gzip", "*"):
            continue
        q = params.strip()
        if q.startswith("q="):
            try:
                return float(q[2:]) > 0
            except ValueError:
                return False
        return True
    return False


class ExporterServer:
    """The exporter's HTTP server: ``serve_forever`` in one thread, ``shutdown`` from another."""

    def __init__(
        self,
        address: tuple[str, int],
        scraper: Scraper,
        web_config: WebConfig,
        settings: HttpSettings | None = None,
    ) -> None:
        self.scraper = scraper
        self.web_config = web_config
        self.settings = settings or HttpSettings()
        self.telemetry_path = self.settings.telemetry_path
        self.ssl_context = web_config.ssl_context()
        self._listener = bind_listener(address[0], address[1], self.settings.backlog)
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._returned: collections.deque[_Conn] = collections.deque()
        self._conns: dict[int, _Conn] = {}
        self._lock = threading.Lock()
        self._in_flight = 0
        self._queued: collections.deque[tuple[_Conn, float]] = collections.deque()
        self._counters = _Counters()
        # Client sockets accepted and not yet closed (event loop, queue and workers).
        self._open = 0
        self.max_connections = fdlimit.connection_limit(
            self.settings.max_connections, fdlimit.open_files_limit(),
            fdlimit.open_descriptors(), scraper.settings.max_parallel,
        )
        self._listening = False
        self._accept_backoff = 0.0
        self._accept_resume_at = 0.0  # monotonic time to retry after an accept error
        self._stop = threading.Event()
        self._stopped = threading.Event()
        self._pool = ThreadPoolExecutor(
            max_workers=self.settings.max_requests, thread_name_prefix="http"
        )
        self.flight: SingleFlight[Exposition] = SingleFlight(self._collect)

    @property
    def server_address(self) -> tuple:
        return self._listener.getsockname()

    # ----------------------------------------------------------------- event loop
    def serve_forever(self) -> None:
        sel = self._selector
        sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._update_listening()
        next_sweep = 0.0
        try:
            while not self._stop.is_set():
                timeout = 0.5
                if not self._listening and self._accept_resume_at:
                    timeout = min(timeout, max(self._accept_resume_at - time.monotonic(), 0))
                for key, _ in sel.select(timeout):
                    if key.data == "listen":
                        self._accept()
                    elif key.data == "wake":
                        self._take_returned()
                    else:
                        self._on_readable(key.data)
                now = time.monotonic()
                if now >= next_sweep:
                    next_sweep = now + 0.25
                    for conn in [c for c in self._conns.values() if c.deadline <= now]:
                        self._close(conn)
                self._update_listening()
        finally:
            for conn in list(self._conns.values()):
                self._close(conn)
            self._stopped.set()

    def shutdown(self) -> None:
        self._stop.set()
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        self._stopped.wait(5)

    def server_close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._selector.close()
        for sock in (self._listener, self._wake_r, self._wake_w):
            sock.close()

    def _update_listening(self) -> None:
        """Watch the listener only while a connection fits and no accept back-off runs."""
        if self._accept_resume_at and time.monotonic() >= self._accept_resume_at:
            self._accept_resume_at = 0.0
        with self._lock:
            room = self._open < self.max_connections
        want = room and not self._accept_resume_at
        if want == self._listening:
            return
        if want:
            self._selector.register(self._listener, selectors.EVENT_READ, "listen")
        else:
            self._selector.unregister(self._listener)
        self._listening = want

    def _accept(self) -> None:
        for _ in range(256):  # a burst of connections must not starve the others
            with self._lock:
                if self._open >= self.max_connections:
                    break  # the rest wait in the backlog; the listener is unwatched below
            try:
                sock, peer = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                break
            except OSError as err:
                if err.errno not in _ACCEPT_RESOURCE_ERRORS:  # e.g. ECONNABORTED: next one
                    log.debug("accept failed: %s", err)
                    continue
                self._accept_backoff = min(
                    max(self._accept_backoff * 2, ACCEPT_BACKOFF_MIN), ACCEPT_BACKOFF_MAX
                )
                self._accept_resume_at = time.monotonic() + self._accept_backoff
                log.warning("accept failed: %s; retrying in %.3f s", err.strerror,
                            self._accept_backoff)
                break
            self._accept_backoff = 0.0
            with self._lock:
                self._open += 1
            sock.setblocking(False)
            if self.ssl_context is not None:
                sock = self.ssl_context.wrap_socket(
                    sock, server_side=True, do_handshake_on_connect=False
                )
            conn = _Conn(
                sock, _peer_text(peer), time.monotonic() + self.settings.read_header_timeout,
                handshaking=self.ssl_context is not None,
            )
            self._watch(conn)
        self._update_listening()

    def _watch(self, conn: _Conn, events: int = selectors.EVENT_READ) -> None:
        self._conns[conn.sock.fileno()] = conn
        self._selector.register(conn.sock, events, conn)

    def _unwatch(self, conn: _Conn) -> None:
        with contextlib.suppress(KeyError, ValueError, OSError):
            self._selector.unregister(conn.sock)
        self._conns.pop(conn.sock.fileno(), None)

    def _close(self, conn: _Conn) -> None:
        self._unwatch(conn)
        self._close_socket(conn)

    def _close_socket(self, conn: _Conn) -> None:
        """Close a client socket once (event loop or worker) and free its slot."""
        with self._lock:
            if conn.closed:
                return
            conn.closed = True
            self._open -= 1
            wake = not self._listening
        with contextlib.suppress(OSError):
            conn.sock.close()
        if wake:  # the event loop may be waiting with the listener unwatched
            with contextlib.suppress(OSError):
                self._wake_w.send(b"x")

    def _take_returned(self) -> None:
        with contextlib.suppress(OSError):
            while self._wake_r.recv(4096):
                pass
        while True:
            with self._lock:
                if not self._returned:
                    return
                conn = self._returned.popleft()
            conn.sock.setblocking(False)
            conn.idle = True
            conn.deadline = time.monotonic() + self.settings.idle_timeout
            self._watch(conn)

    def _on_readable(self, conn: _Conn) -> None:
        sock = conn.sock
        if conn.handshaking:
            assert isinstance(sock, ssl.SSLSocket)
            try:
                sock.do_handshake()
            except ssl.SSLWantReadError:
                self._selector.modify(sock, selectors.EVENT_READ, conn)
                return
            except ssl.SSLWantWriteError:
                self._selector.modify(sock, selectors.EVENT_WRITE, conn)
                return
            except (ssl.SSLError, OSError) as err:
                log.debug("TLS handshake with %s failed: %s", conn.peer, err)
                self._close(conn)
                return
            conn.handshaking = False
            if not self.web_config.client_allowed(sock.getpeercert()):
                log.info("client certificate not in client_allowed_sans",
                         extra={"fields": {"peer": conn.peer}})
                self._close(conn)
                return
            self._selector.modify(sock, selectors.EVENT_READ, conn)
        while True:
            try:
                chunk = sock.recv(65536)
            except (BlockingIOError, InterruptedError, ssl.SSLWantReadError):
                return
            except (ssl.SSLError, OSError):
                self._close(conn)
                return
            if not chunk:
                self._close(conn)
                return
            if conn.idle:
                conn.idle = False
                conn.deadline = time.monotonic() + self.settings.read_header_timeout
            conn.buf += chunk
            if b"\r\n\r\n" in conn.buf:
                self._unwatch(conn)
                self._dispatch(conn)
                return
            if len(conn.buf) > MAX_HEADER_BYTES:
                self._unwatch(conn)
                self._refuse(conn, HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE)
                return

    def _dispatch(self, conn: _Conn) -> None:
        arrived = time.monotonic()
        with self._lock:
            busy = queued = False
            if self._in_flight < self.settings.max_requests:
                self._in_flight += 1
            elif len(self._queued) < self.settings.max_queued_requests:
                # Single flight makes a waiting scrape cheap: queue it rather than fail it.
                self._queued.append((conn, arrived))
                queued = True
            else:
                self._counters.rejected += 1
                self._counters.requests["503"] += 1
                busy = True
        if busy:
            self._refuse(conn, HTTPStatus.SERVICE_UNAVAILABLE)
        elif not queued:
            self._pool.submit(self._serve_connection, conn, arrived)

    def _refuse(self, conn: _Conn, status: HTTPStatus) -> None:
        """Answer from the event loop without blocking it, then close."""
        body = f"{status.phrase}\n".encode()
        head = (
            f"HTTP/1.1 {status.value} {status.phrase}\r\nContent-Type: text/plain\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        ).encode()
        with contextlib.suppress(OSError, ssl.SSLError):
            conn.sock.send(head + body)
        self._close(conn)

    # ----------------------------------------------------------------- workers
    def _serve_connection(self, conn: _Conn, arrived: float) -> None:
        keep = False
        try:
            conn.sock.setblocking(True)
            conn.sock.settimeout(self.settings.write_timeout)
            while True:
                head, sep, rest = bytes(conn.buf).partition(b"\r\n\r\n")
                if not sep:
                    keep = True
                    conn.buf = bytearray(head)
                    break
                conn.buf = bytearray(rest)
                keep = self._serve_one(conn, head, arrived)
                if not keep:
                    break
                arrived = time.monotonic()
        except (OSError, ssl.SSLError) as err:
            log.debug("connection from %s: %s", conn.peer, err)
            keep = False
        except Exception:
            log.exception("request from %s failed", conn.peer)
            keep = False
        finally:
            with self._lock:
                if keep:
                    self._returned.append(conn)
                if self._queued:  # this worker's slot goes to the oldest waiting request
                    self._pool.submit(self._serve_connection, *self._queued.popleft())
                else:
                    self._in_flight -= 1
        if keep:
            with contextlib.suppress(OSError):
                self._wake_w.send(b"x")
        else:
            self._close_socket(conn)

    def _serve_one(self, conn: _Conn, head: bytes, arrived: float) -> bool:
        """Answer one request; True to keep the connection open for the next one."""
        request = _parse_request(head, arrived)
        if request is None:
            self._send(conn, None, HTTPStatus.BAD_REQUEST, b"Bad Request\n", "text/plain")
            return False
        keep = request.version == "HTTP/1.1" and (
            request.headers.get("Connection", "").lower() != "close"
        )
        if request.method not in ("GET", "HEAD"):
            self._send(conn, request, HTTPStatus.METHOD_NOT_ALLOWED, b"Method Not Allowed\n",
                       "text/plain", extra={"Allow": "GET, HEAD", "Connection": "close"})
            return False  # a body may follow; we do not read it
        if _has_body(request.headers):
            # Its bytes would be read as the next request (desync): refuse and close.
            self._send(conn, request, HTTPStatus.BAD_REQUEST,
                       b"GET and HEAD requests must not have a body\n", "text/plain",
                       extra={"Connection": "close"})
            return False
        if not self.web_config.check_authorization(request.headers.get("Authorization")):
            self._send(conn, request, HTTPStatus.UNAUTHORIZED, b"Unauthorized\n", "text/plain",
                       extra={"WWW-Authenticate": 'Basic realm="cephscope-exporter"'})
            return keep
        if request.path == self.telemetry_path:
            deadline = self.scraper.deadline_from(request.headers.get(TIMEOUT_HEADER))
            try:
                exposition = self.flight.get(request.arrived, deadline)
            except Exception:
                log.exception("scrape failed")
                self._send(conn, request, HTTPStatus.INTERNAL_SERVER_ERROR,
                           b"scrape failed\n", "text/plain")
                return keep
            if exposition is None:
                self._send(conn, request, HTTPStatus.SERVICE_UNAVAILABLE,
                           b"previous scrape still running at the deadline\n", "text/plain")
                return keep
            if accepts_gzip(request.headers.get("Accept-Encoding")):
                self._send(conn, request, HTTPStatus.OK, exposition.gzipped(), CONTENT_TYPE,
                           extra={"Content-Encoding": "gzip", "Vary": "Accept-Encoding"})
            else:
                self._send(conn, request, HTTPStatus.OK, exposition.body, CONTENT_TYPE,
                           extra={"Vary": "Accept-Encoding"})
        elif request.path == "/":
            self._send(conn, request, HTTPStatus.OK, self.landing_page(),
                       "text/html; charset=utf-8")
        else:
            self._send(conn, request, HTTPStatus.NOT_FOUND, b"Not Found\n", "text/plain")
        return keep

    def _send(
        self,
        conn: _Conn,
        request: _Request | None,
        status: HTTPStatus,
        body: bytes,
        content_type: str,
        extra: dict[str, str] | None = None,
    ) -> None:
        with self._lock:
            self._counters.requests[str(status.value)] += 1
        lines = [
            f"HTTP/1.1 {status.value} {status.phrase}",
            f"Server: cephscope-exporter/{__version__}",
            f"Content-Type: {content_type}",
            f"Content-Length: {len(body)}",
        ]
        lines += [f"{k}: {v}" for k, v in (extra or {}).items()]
        lines += [f"{k}: {v}" for k, v in self.web_config.headers.items()]
        header = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "replace")
        if request is not None and request.method == "HEAD":
            conn.sock.sendall(header)
        else:
            conn.sock.sendall(header + body if len(body) < 65536 else header)
            if len(body) >= 65536:
                conn.sock.sendall(body)

    # ----------------------------------------------------------------- content
    def _collect(self, deadline: float, arrived: float) -> Exposition:
        started = time.monotonic()
        families = self.scraper.scrape(deadline)
        families.extend(self._http_families(max(started - arrived, 0.0)))
        return Exposition(render(families))

    def _http_families(self, waited: float) -> list[MetricFamily]:
        with self._lock:
            self._counters.collections += 1
            self._counters.waited_seconds += waited
            counters = _Counters(
                collections.Counter(self._counters.requests), self._counters.rejected,
                self._counters.collections, self._counters.waited_seconds,
            )
            in_flight = self._in_flight
        waiting = MetricFamily(
            "cephscope_scrape_waiting_seconds", "gauge",
            "Seconds the request that started this collection waited for it to start"
            " (for a free worker thread); high means the exporter is the"
            " bottleneck, not the daemons.",
        )
        waiting.add(round(waited, 6))
        waited_total = MetricFamily(
            "cephscope_scrape_waiting_seconds_total", "counter",
            "Sum of cephscope_scrape_waiting_seconds over all collections.",
        )
        waited_total.add(round(counters.waited_seconds, 6))
        runs = MetricFamily(
            "cephscope_scrape_collections_total", "counter",
            "Collections run; concurrent scrapes share one (fewer than scrape requests).",
        )
        runs.add(counters.collections)
        requests = MetricFamily(
            "cephscope_http_requests_total", "counter",
            "HTTP requests answered, by status code (before this collection).",
        )
        for code in sorted(counters.requests):
            requests.add(counters.requests[code], {"code": code})
        rejected = MetricFamily(
            "cephscope_http_requests_rejected_total", "counter",
            "Requests answered 503 because --web.max-requests were in flight and"
            " --web.max-queued-requests waiting.",
        )
        rejected.add(counters.rejected)
        flight = MetricFamily(
            "cephscope_http_requests_in_flight", "gauge", "HTTP requests being answered."
        )
        flight.add(in_flight)
        return [waiting, waited_total, runs, requests, rejected, flight]

    def landing_page(self) -> bytes:
        names = ", ".join(html.escape(c.name) for c in self.scraper.collectors) or "none"
        return LANDING_PAGE.format(
            version=html.escape(__version__),
            asok_dir=html.escape(self.scraper.settings.asok_dir),
            path=html.escape(self.telemetry_path),
            collectors=names,
        ).encode()


def _parse_request(head: bytes, arrived: float) -> _Request | None:
    line, _, rest = head.partition(b"\r\n")
    try:
        method, target, version = line.decode("ascii").split(" ")
        headers = http.client.parse_headers(io.BytesIO(rest + b"\r\n\r\n"))
    except (ValueError, UnicodeDecodeError, http.client.HTTPException):
        return None
    if version not in ("HTTP/1.0", "HTTP/1.1") or not target.startswith("/"):
        return None
    return _Request(method, target.split("?", 1)[0], version, headers, arrived)


def _has_body(headers: http.client.HTTPMessage) -> bool:
    """True if the request announces a body: any Transfer-Encoding, a Content-Length not 0."""
    if headers.get_all("Transfer-Encoding"):
        return True
    return any(value.strip() != "0" for value in headers.get_all("Content-Length") or ())


def _peer_text(peer: object) -> str:
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return str(peer)
