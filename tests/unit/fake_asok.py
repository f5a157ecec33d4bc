"""Fake Ceph admin sockets replaying real captures (tests/fixtures/asok), with fault modes.

Each fake daemon listens on a real AF_UNIX socket named like Ceph's
(``ceph-osd.N.asok``) in a directory of its own, speaks the real protocol (command + NUL
in; 4-byte big-endian length + payload out; one command per connection) and answers from
the capture files of one OSD (``<fixtures>/<version>/<scenario>/osd.N/<command>.json``).
Commands without a capture get Ceph's own error text (``ERROR: (22) Invalid argument``).

Fault modes (``FakeDaemon.fault``):
  ``hang``             accept and read the command, never answer (connection kept open)
  ``close_mid_frame``  send a length prefix and part of the payload, then close
  ``huge_length``      send a 2 GiB length prefix and a few bytes, then keep quiet
  ``garbage``          a well-formed frame whose payload is not JSON
  ``schema_mismatch``  ``perf schema`` from another daemon life (counters missing, others
                       added): the OSD restarted between ``perf schema`` and ``perf dump``
  ``new_life``         schema and dump both carry one extra collection (a restarted daemon
                       whose counter set changed)
  ``slow:<seconds>``   answer correctly after a delay
Also :meth:`FakeCluster.add_dead_socket`: a socket file with no listener.

Run as a script to serve N fake OSDs until killed (the scrape-cost benchmark does)::

    python tests/unit/fake_asok.py --dir DIR --osds 60 [--scenario load] [--osd-processes]

With ``--osd-processes`` each fake OSD is its own process shaped like a ``ceph-osd`` in
/proc: its comm is ``ceph-osd`` and it runs ``--threads-per-osd`` (default 70) threads
named like a Pacific OSD's (``tp_osd_tp``, ``msgr-worker-N``, ``bstore_kv_sync``,
``rocksdb:low0`` ...), so the threads collector reads a real /proc/<pid>/task per OSD.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import struct
import sys
import threading
import time
from pathlib import Path

from cephscope.deploy.capture_fixtures import fixture_name

REPO_ROOT = Path(__file__).resolve().parents[2]
FIXTURES_ROOT = REPO_ROOT / "tests" / "fixtures" / "asok"
CEPH_VERSION = "16.2.15"


UNKNOWN_COMMAND = b"ERROR: (22) Invalid argument\nunknown command prefix %s\n"


def capture_dir(scenario: str = "load", osd: str = "osd.0", version: str = CEPH_VERSION) -> Path:
    return FIXTURES_ROOT / version / scenario / osd


def load_capture(directory: Path) -> dict[str, bytes]:
    """File name -> bytes of every capture in one OSD's directory."""
    if not directory.is_dir():
        raise FileNotFoundError(f"no captures in {directory}")
    return {p.name: p.read_bytes() for p in directory.glob("*.json")}


def mismatched_schema(schema_bytes: bytes) -> bytes:
    """The schema of "another life" of the daemon: half of the osd counters gone, a new
    collection and a new osd counter present."""
    schema = json.loads(schema_bytes)
    osd = schema.get("osd", {})
    schema["osd"] = {k: v for i, (k, v) in enumerate(sorted(osd.items())) if i % 2 == 0}
    template = {"type": 10, "metric_type": "counter", "value_type": "integer",
                "description": "appeared after restart", "nick": "", "priority": 8,
                "units": "none"}
    schema["osd"]["new_after_restart"] = template
    schema["collection_after_restart"] = {"brand_new": template}
    return json.dumps(schema).encode()


NEW_LIFE_COLLECTION = "throttle-after_restart"


def with_new_life_collection(payload: bytes, schema: bool) -> bytes:
    document = json.loads(payload)
    if schema:
        document[NEW_LIFE_COLLECTION] = {
            "val": {"type": 2, "metric_type": "gauge", "value_type": "integer",
                    "description": "Currently available throttle", "nick": "",
                    "priority": 5, "units": "none"}
        }
    else:
        document[NEW_LIFE_COLLECTION] = {"val": 42}
    return json.dumps(document).encode()


class FakeDaemon:
    """One fake admin socket served by a thread."""

    def __init__(self, path: Path, responses: dict[str, bytes], fault: str | None = None) -> None:
        self.path = path
        self.responses = responses
        self.fault = fault
        self.requests: list[dict[str, object]] = []
        self._compact: dict[str, bytes] = {}
        self._held: list[socket.socket] = []
        self._stop = threading.Event()
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(path))
        self._listener.listen(64)
        self._listener.settimeout(0.2)
        self._thread = threading.Thread(target=self._serve, name=f"fake-{path.name}", daemon=True)
        self._thread.start()

    def replace_responses(self, responses: dict[str, bytes]) -> None:
        """Answer with `responses` from now on (the same daemon, later in its life)."""
        self.responses = responses
        self._compact.clear()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._listener.close()
        for conn in self._held:
            conn.close()
        self._held.clear()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                self._handle(conn)
            except OSError:
                conn.close()

    def _read_command(self, conn: socket.socket) -> dict[str, object] | None:
        conn.settimeout(5)
        data = b""
        while not data.endswith(b"\0"):
            chunk = conn.recv(4096)
            if not chunk:
                return None
            data += chunk
        return json.loads(data[:-1])

    def _answer(self, cmd: dict[str, object]) -> bytes:
        prefix = str(cmd.get("prefix", ""))
        args = {k: v for k, v in cmd.items() if k not in ("prefix", "format")}
        name = fixture_name(prefix, args)
        if self.fault == "schema_mismatch" and name == "perf_schema.json":
            return mismatched_schema(self.responses[name])
        payload = self.responses.get(name)
        if payload is None:
            return UNKNOWN_COMMAND % prefix.encode()
        if self.fault == "new_life" and name in ("perf_schema.json", "perf_dump.json"):
            return with_new_life_collection(payload, schema=name == "perf_schema.json")
        if cmd.get("format") == "json" and payload[:1] in (b"{", b"["):
            # Like Ceph: "json" is compact, the default (captured) is json-pretty.
            compact = self._compact.get(name)
            if compact is None:
                compact = self._compact[name] = json.dumps(
                    json.loads(payload), separators=(",", ":")
                ).encode()
            return compact
        return payload

    def _handle(self, conn: socket.socket) -> None:
        cmd = self._read_command(conn)
        if cmd is None:
            conn.close()
            return
        self.requests.append(cmd)
        fault = self.fault or ""
        if fault == "hang":
            self._held.append(conn)  # never answered, closed at stop()
            return
        if fault == "huge_length":
            conn.sendall(struct.pack(">I", 2 * 1024**3) + b'{"osd": ')
            self._held.append(conn)
            return
        payload = self._answer(cmd)
        if fault == "close_mid_frame":
            conn.sendall(struct.pack(">I", len(payload)) + payload[: len(payload) // 3])
            conn.close()
            return
        if fault == "garbage":
            payload = b"\x00\xffthis is not json {{{"
        if fault.startswith("slow:"):
            time.sleep(float(fault.split(":", 1)[1]))
        conn.sendall(struct.pack(">I", len(payload)) + payload)
        conn.close()


class FakeCluster:
    """A directory of fake OSD sockets."""

    def __init__(self, directory: Path) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.daemons: dict[str, FakeDaemon] = {}
        self._dead: list[Path] = []

    def add_osd(
        self,
        osd_id: int,
        *,
        scenario: str = "load",
        source_osd: str | None = None,
        fault: str | None = None,
        subdir: str | None = None,
    ) -> FakeDaemon:
        """Serve ``osd.<osd_id>`` from the captures of ``source_osd`` (default: same id,
        wrapping around the captured OSDs)."""
        if source_osd is None:
            captured = sorted(p.name for p in (FIXTURES_ROOT / CEPH_VERSION / scenario).iterdir())
            source_osd = captured[osd_id % len(captured)]
        responses = load_capture(capture_dir(scenario, source_osd))
        where = self.dir / subdir if subdir else self.dir
        where.mkdir(parents=True, exist_ok=True)
        daemon = FakeDaemon(where / f"ceph-osd.{osd_id}.asok", responses, fault)
        self.daemons[f"osd.{osd_id}"] = daemon
        return daemon

    def add_dead_socket(self, name: str) -> Path:
        """A socket file nothing listens on (the daemon died without cleaning up)."""
        path = self.dir / name
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(str(path))
        sock.close()
        self._dead.append(path)
        return path

    def restart(self, name: str, *, scenario: str = "load", fault: str | None = None) -> None:
        """Replace a daemon by a new life with other captures (same socket path)."""
        old = self.daemons[name]
        osd_id = int(name.split(".")[1])
        old.stop()
        source = old.path.parent.name if old.path.parent != self.dir else None
        self.add_osd(osd_id, scenario=scenario, fault=fault, subdir=source)

    def stop(self) -> None:
        for daemon in self.daemons.values():
            daemon.stop()
        self.daemons.clear()
        for path in self._dead:
            path.unlink(missing_ok=True)


OSD_COMM_NAME = "ceph-osd"
# Thread names of a Pacific ceph-osd on an SSD (8 shards x 2 op threads), one per thread.
OSD_THREAD_NAMES: tuple[str, ...] = (
    "log", "service", "admin_socket", "signal_handler", "msgr-worker-0", "msgr-worker-1",
    "msgr-worker-2", "io_context_pool", "io_context_pool", "ms_dispatch", "ms_local",
    "safe_timer", "safe_timer", "safe_timer", "safe_timer", "safe_timer", "fn_anonymous",
    "bstore_aio", "bstore_aio", "bstore_discard", "bstore_kv_sync", "bstore_kv_final",
    "bstore_mempool", "rocksdb:low0", "rocksdb:low1", "rocksdb:high0", "rocksdb:dump_st",
    "finisher", "finisher", "finisher", "cfin", "osd_srv_heartbt", "osd_srv_agent",
    "tp_osd_cmd", "OpHistorySvc", "ceph-osd", "ms_dispatch", "ms_local",
    *(["tp_osd_tp"] * 16), *(["tp_pg_recov"] * 2), "balancer", "PGBackend",
)


def _set_thread_comm(name: str) -> None:
    """Name the calling thread in /proc (its ``comm``; the kernel keeps 15 bytes)."""
    with open(f"/proc/self/task/{threading.get_native_id()}/comm", "w") as comm:
        comm.write(name[:15])


def _osd_process(cluster: FakeCluster, osd_id: int, scenario: str, fault: str | None,
                 threads: int) -> None:
    """Body of one forked fake OSD: ceph-osd-shaped threads, one socket, until SIGTERM."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    _set_thread_comm(OSD_COMM_NAME)

    def idle_thread(name: str) -> None:
        _set_thread_comm(name)
        stop.wait()

    names = [OSD_THREAD_NAMES[i % len(OSD_THREAD_NAMES)] for i in range(max(threads - 2, 0))]
    for name in names:
        threading.Thread(target=idle_thread, args=(name,), daemon=True).start()
    cluster.add_osd(osd_id, scenario=scenario, fault=fault)  # + its serving thread
    stop.wait()
    cluster.stop()


def serve_osd_processes(cluster: FakeCluster, osds: int, scenario: str, fault: str | None,
                        threads: int) -> list[int]:
    """Fork one OSD-shaped process per fake OSD; their pids (call before any thread)."""
    pids = []
    for osd_id in range(osds):
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                _osd_process(cluster, osd_id, scenario, fault, threads)
            except BaseException:
                code = 1
            os._exit(code)
        pids.append(pid)
    return pids


def main() -> int:
    parser = argparse.ArgumentParser(description="serve fake OSD admin sockets until killed")
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--osds", type=int, default=3)
    parser.add_argument("--scenario", default="load")
    parser.add_argument("--fault", default=None, help="fault mode of every fake OSD")
    parser.add_argument("--osd-processes", action="store_true",
                        help="one ceph-osd-shaped process per fake OSD")
    parser.add_argument("--threads-per-osd", type=int, default=70)
    args = parser.parse_args()
    cluster = FakeCluster(args.dir)
    children: list[int] = []
    if args.osd_processes:
        children = serve_osd_processes(
            cluster, args.osds, args.scenario, args.fault, args.threads_per_osd
        )
        expected = {f"ceph-osd.{i}.asok" for i in range(args.osds)}
        for _ in range(600):  # every child's socket bound
            if expected <= {p.name for p in args.dir.iterdir()}:
                break
            time.sleep(0.05)
    else:
        for i in range(args.osds):
            cluster.add_osd(i, scenario=args.scenario, fault=args.fault)
    print("ready", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with contextlib.suppress(KeyboardInterrupt):
        stop.wait()
    for pid in children:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    for pid in children:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
    cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())


def exporter_args(asok_dir: Path | str, *flags: str) -> argparse.Namespace:
    """Parsed cephscope-exporter flags for ``asok_dir`` plus ``flags``."""
    from cephscope.exporter.main import build_parser

    return build_parser().parse_args(["--ceph.asok-dir", str(asok_dir), *flags])


def scrape_once(asok_dir: Path | str, *flags: str, timeout: float = 10.0) -> str:
    """One scrape of ``asok_dir`` with a fresh exporter, as exposition text."""
    from cephscope.exporter.collectors import enabled_collectors
    from cephscope.exporter.exposition import render
    from cephscope.exporter.main import settings_from_args
    from cephscope.exporter.scrape import Scraper

    args = exporter_args(asok_dir, *flags)
    scraper = Scraper(enabled_collectors(args), settings_from_args(args))
    try:
        return render(scraper.scrape(time.monotonic() + timeout)).decode()
    finally:
        scraper.close()


def parse_samples(text: str) -> dict[str, float]:
    """``name{labels}`` -> value of every sample line of an exposition."""
    samples: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        key, _, value = line.rpartition(" ")
        samples[key] = float(value)
    return samples


def types_of(text: str) -> dict[str, str]:
    """Family name -> TYPE of an exposition."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, mtype = line.split(" ", 3)
            found[name] = mtype
    return found


def only_collectors(*names: str) -> list[str]:
    """Flags that switch on exactly ``names`` (whatever collectors exist)."""
    from cephscope.exporter.collectors import collector_classes

    return [
        f"--collector.{cls.name}" if cls.name in names else f"--no-collector.{cls.name}"
        for cls in collector_classes()
    ]


def check_exposition_golden(golden: Path, text: str) -> None:
    """``text`` equals the golden file; ``CEPHSCOPE_UPDATE_GOLDEN=1`` rewrites the file."""
    if os.environ.get("CEPHSCOPE_UPDATE_GOLDEN") == "1":
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
    assert golden.exists(), f"{golden} missing: run with CEPHSCOPE_UPDATE_GOLDEN=1"
    assert text == golden.read_text(), f"exposition differs from {golden}"
