"""Ceph admin-socket client speaking the raw protocol, and socket discovery.

Protocol (src/common/admin_socket.cc): connect to the AF_UNIX socket, send the JSON
command followed by a NUL byte, read a 4-byte big-endian length and then that many bytes
of response. The daemon closes the connection after one command, so every command is
one connection. No ``ceph daemon`` subprocess: that costs 100-160 ms per call, the raw
socket well under a millisecond for a ``perf dump``.

Only read-only commands are allowed (:data:`READ_ONLY_COMMANDS`); the exporter and the
runner's ``config get`` verification share this client, and neither may change a daemon.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import selectors
import socket
import struct
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_ASOK_DIR = "/var/run/ceph"
DEFAULT_TIMEOUT_SECONDS = 2.0
# A perf dump of an OSD is ~100-300 KiB and config show ~100 KiB; historic ops can be a few
# MiB. Anything beyond this is a broken length prefix, not a response worth reading.
DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024 * 1024

# Commands (the "prefix" of the JSON command) that only read state. `config set`,
# `injectargs`, `flush_*`, `perf reset` and friends are deliberately absent.
READ_ONLY_COMMANDS: frozenset[str] = frozenset(
    {
        "perf dump",
        "perf schema",
        "perf histogram dump",
        "perf histogram schema",
        "counter dump",
        "counter schema",
        "dump_op_pq_state",
        "dump_ops_in_flight",
        "ops",
        "dump_blocked_ops",
        "dump_historic_ops",
        "dump_historic_ops_by_duration",
        "dump_historic_slow_ops",
        "status",
        "version",
        "git_version",
        "config get",
        "config show",
        "config diff",
        "get_command_descriptions",
        "dump_mempools",
        "dump_osd_network",
        "dump_scrubs",
        "dump_recovery_reservations",
        "dump_reservations",
        "objecter_requests",
        "bluestore bluefs device info",
        "bluefs stats",
    }
)

_LENGTH = struct.Struct(">I")
_PEERCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


class AsokError(Exception):
    """Any failure talking to an admin socket. ``path`` names the socket."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path


class AsokNotAllowedError(AsokError):
    """The command is not in the read-only allowlist (never sent)."""


class AsokConnectError(AsokError):
    """The socket file is missing or nothing listens on it."""


class AsokTimeoutError(AsokError):
    """The daemon did not answer completely within the timeout."""


class AsokProtocolError(AsokError):
    """The response frame is broken: short read, closed mid-frame, oversized length."""


class AsokJSONError(AsokError):
    """The response is not the JSON the command should return."""


class AsokCommandError(AsokError):
    """The daemon answered but refused or failed the command (e.g. unknown command)."""


def _recv_exactly(sock: socket.socket, size: int, deadline: float, path: str) -> bytes:
    chunks: list[bytes] = []
    remaining = size
    while remaining > 0:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AsokTimeoutError(path, f"timed out with {size - remaining}/{size} bytes read")
        sock.settimeout(left)
        try:
            chunk = sock.recv(min(remaining, 1 << 20))
        except TimeoutError:
            raise AsokTimeoutError(
                path, f"timed out with {size - remaining}/{size} bytes read"
            ) from None
        except OSError as err:
            raise AsokProtocolError(path, f"read failed: {err}") from None
        if not chunk:
            raise AsokProtocolError(
                path, f"connection closed after {size - remaining} of {size} bytes"
            )
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


@dataclass(frozen=True)
class RawResponse:
    """One command's response bytes and the pid of the process that answered."""

    payload: bytes
    # SO_PEERCRED pid of the daemon (0 if it lives in a pid namespace we cannot see).
    peer_pid: int | None


def request_raw(
    path: str,
    command: dict[str, Any],
    *,
    timeout: float = DEFAULT_TIMEOUT_SECONDS,
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
) -> RawResponse:
    """Send one allowlisted command and return the raw response (one connection)."""
    prefix = command.get("prefix")
    if prefix not in READ_ONLY_COMMANDS:
        raise AsokNotAllowedError(path, f"command {prefix!r} is not an allowed read-only command")
    deadline = time.monotonic() + timeout
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(max(timeout, 0.001))
        try:
            sock.connect(path)
        except TimeoutError:
            raise AsokTimeoutError(path, "timed out connecting") from None
        except (FileNotFoundError, ConnectionRefusedError) as err:
            raise AsokConnectError(path, f"cannot connect: {err.strerror}") from None
        except OSError as err:
            raise AsokConnectError(path, f"cannot connect: {err}") from None
        peer_pid: int | None = None
        try:
            creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            peer_pid = struct.unpack("3i", creds)[0]
        except OSError:
            peer_pid = None
        try:
            sock.sendall(json.dumps(command).encode() + b"\0")
        except TimeoutError:
            raise AsokTimeoutError(path, "timed out sending the command") from None
        except OSError as err:
            raise AsokProtocolError(path, f"send failed: {err}") from None
        (length,) = _LENGTH.unpack(_recv_exactly(sock, _LENGTH.size, deadline, path))
        if length > max_response_bytes:
            raise AsokProtocolError(
                path, f"response length {length} exceeds the limit of {max_response_bytes} bytes"
            )
        payload = _recv_exactly(sock, length, deadline, path)
        return RawResponse(payload, peer_pid)
    finally:
        sock.close()


def decode_response(path: str, prefix: str, payload: bytes) -> Any:
    """Parse a response payload as JSON; an ``ERROR...`` text is a command failure."""
    if payload.startswith(b"ERROR"):
        text = payload[:200].decode(errors="replace").strip()
        raise AsokCommandError(path, f"{prefix!r} failed: {text}")
    try:
        return json.loads(payload)
    except (ValueError, UnicodeDecodeError, RecursionError) as err:  # deep nesting: Recursion
        head = payload[:60].decode(errors="replace")
        raise AsokJSONError(path, f"{prefix!r} returned invalid JSON ({err}): {head!r}") from None


class AsokClient:
    """Client of one admin socket. Thread-safe: holds no connection between commands."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    ) -> None:
        self.path = os.fspath(path)
        self.timeout = timeout
        self.max_response_bytes = max_response_bytes

    def command_raw(self, prefix: str, *, timeout: float | None = None, **args: Any) -> RawResponse:
        cmd = {"prefix": prefix, **args}
        return request_raw(
            self.path,
            cmd,
            timeout=self.timeout if timeout is None else timeout,
            max_response_bytes=self.max_response_bytes,
        )

    def command(self, prefix: str, *, timeout: float | None = None, **args: Any) -> Any:
        """Run one command and return its parsed JSON (``format`` json is implied)."""
        raw = self.command_raw(prefix, timeout=timeout, **args)
        return decode_response(self.path, prefix, raw.payload)

    def config_get(self, option: str, *, timeout: float | None = None) -> str:
        """The running value of one config option, as the daemon reports it (a string)."""
        result = self.command("config get", var=option, timeout=timeout)
        if not isinstance(result, dict) or option not in result:
            raise AsokJSONError(self.path, f"'config get {option}' returned {result!r}")
        return str(result[option])


# Packages and cephadm name sockets <cluster>-<type>.<id>.asok (ceph-osd.3.asok, ceph-mon.a.asok);
# Ceph's vstart.sh and many hand-written `admin_socket` settings use <type>.<id>.asok (osd.0.asok).
# Client sockets (ceph-client.admin.<pid>.<cookie>.asok, vstart's client.admin.<pid>.asok) are
# short-lived tools: skipped, except a gateway's (see daemon_from_asok_path).
_ASOK_NAME = re.compile(
    r"^(?:(?P<cluster>[A-Za-z0-9_]+)-)?(?P<type>[a-z_-]+)\.(?P<id>[^/]+)\.asok$"
)
# Entity types of a RADOS Gateway: client.rgw.<id> (packages, cephadm, Rook, vstart.sh's
# client.rgw.<port>) and the old client.radosgw.<id>; vstart.sh's socket is radosgw.<port>.asok.
RGW_ENTITY_TYPES = ("rgw", "radosgw")


@dataclass(frozen=True, order=True)
class Daemon:
    """One Ceph daemon found by its admin socket."""

    name: str  # "osd.3": the ceph_daemon label value
    type: str  # "osd"
    id: str  # "3"
    cluster: str  # "ceph"
    asok_path: str
    # A gateway's instance_id label (ceph-exporter's, see rgw_instance_id); None for the others.
    instance_id: str | None = None

    @property
    def counter_labels(self) -> dict[str, str]:
        """The labels ceph-exporter puts on this daemon's perf counters: ``instance_id`` alone
        for a gateway, ``ceph_daemon`` for every other daemon."""
        if self.instance_id is not None:
            return {"instance_id": self.instance_id}
        return {"ceph_daemon": self.name}


def rgw_instance_id(entity: str) -> str:
    """A gateway's ``instance_id`` from its entity name without ``client.`` (``rgw.<id>``,
    ``radosgw.<id>``), as ceph-exporter derives it from the socket name
    (DaemonMetricCollector::get_extra_labels): a ``radosgw`` name's last dot-separated field;
    an ``rgw`` name's fourth field, the random suffix of cephadm's
    ``rgw.<service>.<host>.<suffix>[.<pid>.<cctid>]``. A shorter ``rgw.<id>`` (packages, a
    hand-started or vstart gateway) has no fourth field: ceph-exporter then exports none of the
    gateway's counters; here its ``<id>`` is the instance_id, as for ``radosgw.<id>``. ``""``
    when the name has none (an empty field)."""
    fields = entity.split(".")
    if fields[0] == "radosgw":
        return fields[-1]
    return fields[3] if len(fields) >= 4 else ".".join(fields[1:])


def daemon_from_asok_path(path: str | os.PathLike[str]) -> Daemon | None:
    """Parse a socket file name; None for names that are not a daemon's socket.

    Names are untrusted (anyone who can write the socket dir chooses them): one that is not
    printable text (control characters, bytes that are not UTF-8) is not a daemon's either.
    """
    path = os.fspath(path)
    base = os.path.basename(path)
    if not base.isprintable():
        return None
    match = _ASOK_NAME.match(base)
    if not match:
        return None
    dtype, did, cluster = match["type"], match["id"], match["cluster"] or "ceph"
    if dtype == "client" or dtype == "radosgw":
        entity = did if dtype == "client" else f"radosgw.{did}"
        entity_type, _, gateway_id = entity.partition(".")
        if entity_type not in RGW_ENTITY_TYPES or not gateway_id:
            return None  # a client tool's socket
        instance_id = rgw_instance_id(entity)
        if not instance_id:
            return None
        return Daemon(entity, "rgw", gateway_id, cluster, path, instance_id)
    return Daemon(f"{dtype}.{did}", dtype, did, cluster, path)


def discover_daemons(
    asok_dir: str | os.PathLike[str], daemon_types: Iterable[str] | None = None
) -> list[Daemon]:
    """Daemons with a socket in ``asok_dir`` or one level below (cephadm's <fsid>/ dirs).

    Sorted by name; when two sockets give the same daemon name the first path wins.
    """
    wanted = None if daemon_types is None else frozenset(daemon_types)
    base = Path(asok_dir)
    found: dict[str, Daemon] = {}
    candidates: list[Path] = []
    try:
        entries = sorted(base.iterdir())
    except OSError:
        return []
    for entry in entries:
        if entry.name.endswith(".asok"):
            candidates.append(entry)
        elif entry.is_dir():
            try:
                candidates.extend(sorted(entry.glob("*.asok")))
            except OSError:
                continue
    for path in candidates:
        daemon = daemon_from_asok_path(path)
        if daemon is None or (wanted is not None and daemon.type not in wanted):
            continue
        found.setdefault(daemon.name, daemon)
    return sorted(found.values())


class _Exchange:
    """One command on one socket, driven by :func:`fetch_concurrently`'s event loop."""

    __slots__ = ("buf", "deadline", "expected", "out", "path", "peer_pid", "sock", "state")

    def __init__(self, path: str, command: dict[str, Any], deadline: float) -> None:
        self.path = path
        self.deadline = deadline
        self.out = json.dumps(command).encode() + b"\0"
        self.buf = bytearray()
        self.expected = -1  # payload length once the prefix is read
        self.peer_pid: int | None = None
        self.sock: socket.socket | None = None
        self.state = "connect"


def fetch_concurrently(
    commands: dict[str, list[dict[str, Any]]],
    *,
    deadline: float,
    call_timeout: float,
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    max_parallel: int = 64,
) -> dict[str, list[RawResponse | AsokError]]:
    """Run lists of commands on many sockets at once, in this one thread.

    ``commands`` maps a socket path to its commands, run one after the other on that
    socket (an admin socket serves one connection at a time) while all sockets proceed in
    parallel (at most ``max_parallel`` sockets at a time); a non-blocking event loop
    instead of a thread per socket, so that I/O waits cost no GIL hand-offs. Each command
    gets ``call_timeout`` seconds, all end by ``deadline`` (monotonic). After a socket's
    first failure its remaining commands get the same error without being sent. Results
    come back in the order of the commands.
    """
    for path, cmds in commands.items():
        for cmd in cmds:
            if cmd.get("prefix") not in READ_ONLY_COMMANDS:
                raise AsokNotAllowedError(
                    path, f"command {cmd.get('prefix')!r} is not an allowed read-only command"
                )
    results: dict[str, list[RawResponse | AsokError]] = {path: [] for path in commands}
    pending: dict[str, list[dict[str, Any]]] = {p: list(c) for p, c in commands.items() if c}
    selector = selectors.DefaultSelector()
    waiting_connect: list[_Exchange] = []
    not_started = list(pending)

    def start_path() -> None:
        if not_started:
            start_next(not_started.pop(0))

    def start_next(path: str) -> None:
        queue = pending.get(path)
        if not queue:
            pending.pop(path, None)
            start_path()  # this socket is done: its slot goes to the next one
            return
        cmd = queue.pop(0)
        now = time.monotonic()
        ex = _Exchange(path, cmd, min(deadline, now + call_timeout))
        connect(ex)

    def finish(ex: _Exchange, outcome: RawResponse | AsokError) -> None:
        if ex.sock is not None:
            with contextlib.suppress(KeyError, ValueError):
                selector.unregister(ex.sock)
            ex.sock.close()
            ex.sock = None
        results[ex.path].append(outcome)
        if isinstance(outcome, AsokError):
            # The socket is broken for this round: the rest fail without being sent.
            for _ in pending.pop(ex.path, []):
                results[ex.path].append(outcome)
            start_path()
            return
        start_next(ex.path)

    def connect(ex: _Exchange) -> None:
        if ex.sock is None:
            ex.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            ex.sock.setblocking(False)
        try:
            ex.sock.connect(ex.path)
        except (BlockingIOError, InterruptedError):
            # Listen backlog full (a stuck daemon): retry until the call's deadline.
            waiting_connect.append(ex)
            return
        except (FileNotFoundError, ConnectionRefusedError) as err:
            finish(ex, AsokConnectError(ex.path, f"cannot connect: {err.strerror}"))
            return
        except OSError as err:
            finish(ex, AsokConnectError(ex.path, f"cannot connect: {err}"))
            return
        with contextlib.suppress(OSError):
            creds = ex.sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size)
            ex.peer_pid = _PEERCRED.unpack(creds)[0]
        ex.state = "send"
        selector.register(ex.sock, selectors.EVENT_WRITE, ex)

    def on_ready(ex: _Exchange) -> None:
        sock = ex.sock
        assert sock is not None
        if ex.state == "send":
            try:
                sent = sock.send(ex.out)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as err:
                finish(ex, AsokProtocolError(ex.path, f"send failed: {err}"))
                return
            ex.out = ex.out[sent:]
            if not ex.out:
                ex.state = "recv"
                selector.modify(sock, selectors.EVENT_READ, ex)
            return
        want = 4 - len(ex.buf) if ex.expected < 0 else ex.expected - len(ex.buf)
        try:
            chunk = sock.recv(min(max(want, 1), 1 << 20))
        except (BlockingIOError, InterruptedError):
            return
        except OSError as err:
            finish(ex, AsokProtocolError(ex.path, f"read failed: {err}"))
            return
        if not chunk:
            total = 4 if ex.expected < 0 else ex.expected
            finish(ex, AsokProtocolError(
                ex.path, f"connection closed after {len(ex.buf)} of {total} bytes"
            ))
            return
        ex.buf += chunk
        if ex.expected < 0 and len(ex.buf) >= 4:
            (ex.expected,) = _LENGTH.unpack(ex.buf[:4])
            del ex.buf[:4]
            if ex.expected > max_response_bytes:
                finish(ex, AsokProtocolError(
                    ex.path,
                    f"response length {ex.expected} exceeds the limit of "
                    f"{max_response_bytes} bytes",
                ))
                return
        if ex.expected >= 0 and len(ex.buf) >= ex.expected:
            finish(ex, RawResponse(bytes(ex.buf[: ex.expected]), ex.peer_pid))

    try:
        for _ in range(max(1, max_parallel)):
            start_path()
        while selector.get_map() or waiting_connect:
            now = time.monotonic()
            # Expire exchanges past their deadline.
            for key in list(selector.get_map().values()):
                ex = key.data
                if now >= ex.deadline:
                    finish(ex, AsokTimeoutError(ex.path, _timeout_text(ex)))
            retry, waiting_connect[:] = list(waiting_connect), []
            for ex in retry:
                if now >= ex.deadline:
                    finish(ex, AsokTimeoutError(ex.path, "timed out connecting"))
                else:
                    connect(ex)
            if not selector.get_map():
                if waiting_connect:
                    time.sleep(0.005)
                continue
            next_deadline = min(k.data.deadline for k in selector.get_map().values())
            timeout = max(0.0, next_deadline - time.monotonic())
            if waiting_connect:
                timeout = min(timeout, 0.005)
            for key, _ in selector.select(timeout):
                if key.data.sock is not None:
                    on_ready(key.data)
    finally:
        for key in list(selector.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]
        for ex in waiting_connect:
            if ex.sock is not None:
                ex.sock.close()
        selector.close()
        # The nested functions reach each other through closure cells: a reference cycle
        # that would keep ``results`` (every reply of the scrape) alive until a full GC
        # pass. Break it so the replies go as soon as the caller drops them.
        start_path = start_next = finish = connect = on_ready = None  # type: ignore[assignment]
    return results


def _timeout_text(ex: _Exchange) -> str:
    if ex.state == "send":
        return "timed out sending the command"
    total = "?" if ex.expected < 0 else str(ex.expected)
    return f"timed out with {len(ex.buf)}/{total} bytes read"
