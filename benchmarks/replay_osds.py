"""Replaying OSD admin sockets for the scale simulation (benchmarks/scale_sim.py): one process
serves M OSDs of one simulated host, each answering from the real captures of a Ceph release
(tests/fixtures/asok/<version>/load), with its counters advancing and its latency histograms
moving, and no two OSDs alike.

    python benchmarks/replay_osds.py --dir DIR --osds 0-49 [--release 20.2.4] [--seed 1]

prints ``ready`` once every socket (``DIR/ceph-osd.N.asok``) listens, and serves until SIGTERM.

What moves, per OSD (closed form in the time since the server started, so every reply is
consistent with every earlier one whenever the exporter asks):
- `perf dump`: every counter (schema type bit COUNTER) and both halves of every long-run
  average (`avgcount`, `sum`) grow as if the captured totals had accumulated over
  `CAPTURE_SECONDS`; gauges keep their captured values.
- `perf histogram dump`: every bucket grows the same way, and for a share of each period
  (`SLOW_SHARE` of `period`, different per OSD) the OSD is slow: its op latency histograms
  grow one latency bucket higher (2x, the buckets are powers of two), and the latency sums
  grow `SLOW_FACTOR` times faster. p50/p99 per OSD therefore change over time, and OSDs
  differ.
- Per OSD: a load factor (0.5-1.5) on every captured total and rate, the period and its phase.
Other commands (op queue, ops in flight, historic ops, versions, `counter dump`) replay their
captures unchanged. The captures are read once per source OSD and shared by every simulated
OSD replaying it; a reply costs one pass over the numbers that move.

The process looks like an OSD to the exporter's threads collector: its comm is ``ceph-osd``
and it runs threads named like an OSD's (``tp_osd_tp``, ``msgr-worker-N``, ...), so each
simulated OSD has the thread-group series a real one has (all M of a host read the same
process: their values are alike, their count is right).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import selectors
import signal
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # run as a script: the fake OSD pieces of the unit tests
    sys.path.insert(0, str(REPO_ROOT))

from cephscope.deploy.capture_fixtures import fixture_name  # noqa: E402
from tests.unit.fake_asok import (  # noqa: E402
    FIXTURES_ROOT,
    OSD_COMM_NAME,
    OSD_THREAD_NAMES,
    UNKNOWN_COMMAND,
    _set_thread_comm,
    load_capture,
)

DEFAULT_RELEASE = "20.2.4"
SCENARIO = "load"
# The captured totals count as this many seconds of load (20.2.4's osd.0: 11468 writes in
# 60 s, ~190 writes/s per OSD).
CAPTURE_SECONDS = 60.0
SLOW_SHARE = 1 / 3
SLOW_FACTOR = 2.0
PERIOD_SECONDS = (60.0, 180.0)
LOAD_FACTOR = (0.5, 1.5)
# perf counter type bits (common/perf_counters_collection.h)
PERFCOUNTER_TIME, PERFCOUNTER_LONGRUNAVG, PERFCOUNTER_COUNTER = 0x1, 0x4, 0x8
DYNAMIC = ("perf_dump.json", "perf_histogram_dump.json")
SENTINEL = "\x00"


@dataclass(frozen=True)
class Leaf:
    """A number that moves: value = load x (base + normal x t_normal + slow x t_slow)."""

    base: float
    normal: float
    slow: float
    integer: bool


class AdvancingReply:
    """A captured reply as compact JSON text with its moving numbers cut out."""

    def __init__(self, document: Any, leaf_of: Callable[[tuple[Any, ...], Any], Leaf | None]) -> None:
        leaves: list[Leaf] = []

        def walk(node: Any, path: tuple[Any, ...]) -> Any:
            if isinstance(node, dict):
                return {k: walk(v, (*path, k)) for k, v in node.items()}
            if isinstance(node, list):
                return [walk(v, (*path, i)) for i, v in enumerate(node)]
            leaf = leaf_of(path, node)
            if leaf is None:
                return node
            leaves.append(leaf)
            return SENTINEL

        text = json.dumps(walk(document, ()), separators=(",", ":"))
        self.parts = text.split(json.dumps(SENTINEL))
        self.leaves = tuple(leaves)
        if len(self.parts) != len(self.leaves) + 1:
            raise ValueError("a captured reply holds the sentinel text itself")

    def render(self, load: float, t_normal: float, t_slow: float) -> bytes:
        out = [self.parts[0]]
        for leaf, part in zip(self.leaves, self.parts[1:], strict=True):
            value = load * (leaf.base + leaf.normal * t_normal + leaf.slow * t_slow)
            out.append(str(int(value)) if leaf.integer else f"{value:.9f}")
            out.append(part)
        return "".join(out).encode()


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def perf_dump_reply(dump: dict[str, Any], schema: dict[str, Any]) -> AdvancingReply:
    def leaf_of(path: tuple[Any, ...], value: Any) -> Leaf | None:
        if not _number(value) or len(path) < 2:
            return None
        counter = schema.get(path[0], {}).get(path[1], {})
        kind = counter.get("type", 0) if isinstance(counter, dict) else 0
        rate = value / CAPTURE_SECONDS
        if kind & PERFCOUNTER_LONGRUNAVG and len(path) == 3:
            if path[2] == "avgcount":
                return Leaf(value, rate, rate, True)
            if path[2] == "sum":  # a latency sum grows faster while the OSD is slow
                return Leaf(value, rate, rate * SLOW_FACTOR, isinstance(value, int))
            return None
        if kind & PERFCOUNTER_COUNTER and len(path) == 2:
            return Leaf(value, rate, rate, isinstance(value, int))
        return None

    return AdvancingReply(dump, leaf_of)


def perf_histogram_dump_reply(dump: dict[str, Any]) -> AdvancingReply:
    """Every bucket grows; an op latency histogram (first axis latency) grows one latency
    bucket higher while the OSD is slow."""
    def leaf_of(path: tuple[Any, ...], value: Any) -> Leaf | None:
        # (collection, histogram, "values", latency row, size column)
        if not _number(value) or len(path) != 5 or path[2] != "values":
            return None
        histogram = dump[path[0]][path[1]]
        rows = histogram["values"]
        row, column = path[3], path[4]
        latency = str(histogram.get("axes", [{}])[0].get("name", "")).lower().startswith("latency")
        if not latency:
            return Leaf(value, value / CAPTURE_SECONDS, value / CAPTURE_SECONDS, True) if value else None
        # while slow, the ops of row r land in row r + 1 (the last row holds what overflows)
        shifted = (rows[row - 1][column] if row > 0 else 0) + (value if row == len(rows) - 1 else 0)
        if not value and not shifted:
            return None
        return Leaf(value, value / CAPTURE_SECONDS, shifted / CAPTURE_SECONDS, True)

    return AdvancingReply(dump, leaf_of)


@dataclass(frozen=True)
class Source:
    """One captured OSD: static replies (compact JSON) and the two that advance."""

    static: dict[str, bytes]
    perf_dump: AdvancingReply
    histogram_dump: AdvancingReply

    @classmethod
    def load(cls, directory: Path) -> Source:
        captured = load_capture(directory)
        static = {}
        for name, payload in captured.items():
            try:  # Ceph answers "format": "json" compactly
                static[name] = json.dumps(json.loads(payload), separators=(",", ":")).encode()
            except ValueError:
                static[name] = payload
        return cls(static,
                   perf_dump_reply(json.loads(captured["perf_dump.json"]),
                                   json.loads(captured["perf_schema.json"])),
                   perf_histogram_dump_reply(json.loads(captured["perf_histogram_dump.json"])))


@dataclass(frozen=True)
class OsdLoad:
    """What makes one simulated OSD its own: its load and when it is slow."""

    load: float
    period: float
    phase: float

    @classmethod
    def of(cls, osd_id: int, seed: int) -> OsdLoad:
        rng = random.Random(f"{seed}:{osd_id}")
        period = rng.uniform(*PERIOD_SECONDS)
        return cls(rng.uniform(*LOAD_FACTOR), period, rng.uniform(0, period))

    def _slow_before(self, u: float) -> float:
        """Seconds spent slow in [0, u) of a schedule slow at the start of every period."""
        slow = SLOW_SHARE * self.period
        return math.floor(u / self.period) * slow + min(u % self.period, slow)

    def times(self, elapsed: float) -> tuple[float, float]:
        """(seconds normal, seconds slow) in the `elapsed` seconds since the server started."""
        t_slow = self._slow_before(elapsed + self.phase) - self._slow_before(self.phase)
        return elapsed - t_slow, t_slow


class SimulatedOsd:
    def __init__(self, osd_id: int, source: Source, load: OsdLoad) -> None:
        self.osd_id = osd_id
        self.source = source
        self.load = load

    def answer(self, command: dict[str, Any], elapsed: float) -> bytes:
        prefix = str(command.get("prefix", ""))
        name = fixture_name(prefix, {k: v for k, v in command.items() if k != "prefix"})
        if name in DYNAMIC:
            reply = self.source.perf_dump if name == DYNAMIC[0] else self.source.histogram_dump
            return reply.render(self.load.load, *self.load.times(elapsed))
        payload = self.source.static.get(name)
        return UNKNOWN_COMMAND % prefix.encode() if payload is None else payload


def capture_dirs(release: str) -> list[Path]:
    root = FIXTURES_ROOT / release / SCENARIO
    if not root.is_dir():
        known = sorted(p.name for p in FIXTURES_ROOT.iterdir() if (p / SCENARIO).is_dir())
        raise SystemExit(f"no {SCENARIO} captures of release {release!r}; one of {', '.join(known)}")
    return sorted(p for p in root.iterdir() if p.is_dir())


def simulated_osds(osd_ids: Iterable[int], release: str = DEFAULT_RELEASE,
                   seed: int = 1) -> list[SimulatedOsd]:
    """OSD n replays captured OSD n mod (number captured) of the release."""
    sources = [Source.load(d) for d in capture_dirs(release)]
    return [SimulatedOsd(i, sources[i % len(sources)], OsdLoad.of(i, seed)) for i in osd_ids]


def _read_command(conn: socket.socket) -> dict[str, Any] | None:
    data = b""
    while not data.endswith(b"\0"):
        chunk = conn.recv(4096)
        if not chunk:
            return None
        data += chunk
    command = json.loads(data[:-1])
    return command if isinstance(command, dict) else None


class ReplayServer:
    """Every simulated OSD's socket in `directory`, served by one thread (the exporter asks
    each socket once per command; one command per connection, as Ceph's admin socket)."""

    def __init__(self, directory: Path, osds: list[SimulatedOsd],
                 clock: Callable[[], float]) -> None:
        self.directory = directory
        self.osds = osds
        self._clock = clock
        self._started = clock()
        self._selector = selectors.DefaultSelector()
        self._listeners: list[socket.socket] = []
        directory.mkdir(parents=True, exist_ok=True)
        for osd in osds:
            path = directory / f"ceph-osd.{osd.osd_id}.asok"
            path.unlink(missing_ok=True)
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(str(path))
            listener.listen(64)
            listener.setblocking(False)
            self._selector.register(listener, selectors.EVENT_READ, osd)
            self._listeners.append(listener)

    def serve(self, stop: threading.Event) -> None:
        while not stop.is_set():
            for key, _events in self._selector.select(timeout=0.2):
                with contextlib.suppress(BlockingIOError):
                    conn, _ = key.fileobj.accept()  # type: ignore[union-attr]
                    self._handle(conn, key.data)

    def _handle(self, conn: socket.socket, osd: SimulatedOsd) -> None:
        with conn:
            conn.setblocking(True)
            conn.settimeout(5)
            try:
                command = _read_command(conn)
                if command is None:
                    return
                payload = osd.answer(command, self._clock() - self._started)
                conn.sendall(struct.pack(">I", len(payload)) + payload)
            except (OSError, ValueError):
                return  # a client that went away or sent garbage costs only its connection

    def close(self) -> None:
        for listener in self._listeners:
            path = listener.getsockname()
            self._selector.unregister(listener)
            listener.close()
            with contextlib.suppress(OSError):
                os.unlink(path)


def parse_ids(text: str) -> list[int]:
    """"0-49" or "3,7,9-11" -> OSD ids."""
    ids: list[int] = []
    for part in text.split(","):
        first, _sep, last = part.partition("-")
        ids += range(int(first), int(last or first) + 1)
    return ids


def _osd_shaped_threads(stop: threading.Event, count: int) -> None:
    """Threads named like an OSD's, idle until `stop`."""
    _set_thread_comm(OSD_COMM_NAME)

    def idle(name: str) -> None:
        _set_thread_comm(name)
        stop.wait()

    for i in range(max(count - 1, 0)):
        threading.Thread(target=idle, args=(OSD_THREAD_NAMES[i % len(OSD_THREAD_NAMES)],),
                         daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, required=True, help="socket directory")
    parser.add_argument("--osds", required=True, help="OSD ids, e.g. 0-49")
    parser.add_argument("--release", default=DEFAULT_RELEASE,
                        help="Ceph version of the captures (default %(default)s)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=len(OSD_THREAD_NAMES),
                        help="OSD-shaped threads of the process (default %(default)s)")
    args = parser.parse_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    server = ReplayServer(args.dir, simulated_osds(parse_ids(args.osds), args.release, args.seed),
                          time.monotonic)
    _osd_shaped_threads(stop, args.threads)
    print("ready", flush=True)
    try:
        server.serve(stop)
    finally:
        server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
