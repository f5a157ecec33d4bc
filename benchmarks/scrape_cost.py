"""Scrape cost of cephscope-exporter against N fake OSDs replaying real captures.

    .venv/bin/python benchmarks/scrape_cost.py [--osds 1,12,24,60] [--scrapes 30]
        [--collectors default|perf,histogram,...] [--osd-processes/--no-osd-processes]
        [--threads-per-osd 70] [--flag=--collector.threads.min-interval=0 ...]

For each N: fake OSD admin sockets (tests/unit/fake_asok.py, replaying
tests/fixtures/asok/<version>/load) are served by N OSD-shaped processes (each named
``ceph-osd`` in /proc with ``--threads-per-osd`` threads named like an OSD's thread groups,
so the threads collector reads a real /proc/<pid>/task per OSD), or with
``--no-osd-processes`` by one process. This process scrapes them the way the HTTP handler
does (discover, collect in parallel, render). Printed per N: median and p99 wall time per
scrape, CPU seconds of this process per scrape, bytes and series per scrape, and the raw
floor: the admin-socket commands the exporter actually sent in its last scrape (recorded)
sent again in parallel on raw sockets and parsed with json.loads, plus the /proc reads of
the threads collector (stat, statm, comm, every task's stat) done raw, nothing else; then
each collector's share of the scrape's CPU (thread CPU time inside the collector, JSON
decoding of the replies it asks for first included), the prefetch's and the rendering's.
Figures, not a test.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cephscope.exporter.asok import AsokError, discover_daemons, request_raw
from cephscope.exporter.collector import DaemonCollector, DaemonSession
from cephscope.exporter.collectors import collector_classes, enabled_collectors
from cephscope.exporter.exposition import render
from cephscope.exporter.main import build_parser, settings_from_args
from cephscope.exporter.scrape import Scraper, tune_gc_for_scrapes

REPO_ROOT = Path(__file__).resolve().parents[1]
FAKE_SERVER = REPO_ROOT / "tests" / "unit" / "fake_asok.py"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def start_fakes(directory: Path, osds: int, *, osd_processes: bool = False,
                threads_per_osd: int = 70) -> subprocess.Popen[bytes]:
    argv = [sys.executable, str(FAKE_SERVER), "--dir", str(directory), "--osds", str(osds)]
    if osd_processes:
        argv += ["--osd-processes", "--threads-per-osd", str(threads_per_osd)]
    child = subprocess.Popen(argv, stdout=subprocess.PIPE)
    assert child.stdout is not None
    if child.stdout.readline().strip() != b"ready":
        child.kill()
        raise SystemExit("fake admin sockets did not start")
    return child


class CommandLog:
    """The admin-socket commands of the current scrape, per socket path (thread-safe)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.commands: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.pids: dict[str, int] = {}

    def record(self, path: str, prefix: str, args: dict[str, Any]) -> None:
        with self.lock:
            self.commands[path].append({"prefix": prefix, "format": "json", **args})


def record_commands(log: CommandLog) -> Callable[[], None]:
    """Record every command a DaemonSession sends (prefetched or on demand) into ``log``;
    returns the undo."""
    preload, fetch = DaemonSession.preload, DaemonSession._fetch

    def logged_preload(self: DaemonSession, prefix: str, args: dict[str, Any],
                       outcome: Any) -> None:
        log.record(self.daemon.asok_path, prefix, args)
        preload(self, prefix, args, outcome)
        if self.peer_pid:
            log.pids[self.daemon.asok_path] = self.peer_pid

    def logged_fetch(self: DaemonSession, prefix: str, args: dict[str, Any]) -> Any:
        log.record(self.daemon.asok_path, prefix, args)
        try:
            return fetch(self, prefix, args)
        finally:
            if self.peer_pid:
                log.pids[self.daemon.asok_path] = self.peer_pid

    DaemonSession.preload = logged_preload  # type: ignore[method-assign]
    DaemonSession._fetch = logged_fetch  # type: ignore[method-assign]

    def undo() -> None:
        DaemonSession.preload = preload  # type: ignore[method-assign]
        DaemonSession._fetch = fetch  # type: ignore[method-assign]

    return undo


class CpuShares:
    """Thread CPU seconds spent inside each collector (and the scraper's phases)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seconds: Counter[str] = Counter()

    def wrap(self, name: str, func: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.thread_time()
            try:
                return func(*args, **kwargs)
            finally:
                with self.lock:
                    self.seconds[name] += time.thread_time() - started

        return timed

    def take(self) -> Counter[str]:
        with self.lock:
            taken, self.seconds = self.seconds, Counter()
        return taken


def read_proc_raw(pid: int) -> int:
    """The threads collector's /proc reads for one process, raw; bytes read."""
    def read(path: str) -> bytes:
        fd = os.open(path, os.O_RDONLY)
        try:
            return os.read(fd, 65536)
        finally:
            os.close(fd)

    base = f"/proc/{pid}"
    total = len(read(f"{base}/comm")) + len(read(f"{base}/stat")) + len(read(f"{base}/statm"))
    for tid in os.listdir(f"{base}/task"):
        with contextlib.suppress(OSError):  # the thread exited meanwhile
            total += len(read(f"{base}/task/{tid}/stat"))
    return total


def measure(directory: Path, collectors: list[str] | None, scrapes: int, parallel: int,
            extra_flags: tuple[str, ...] = ()) -> dict:
    """Exporter scrapes and floor rounds alternately, so load from elsewhere on the machine
    hits both alike. ``collectors`` None: the exporter's defaults."""
    flags = list(extra_flags)
    if collectors is not None:
        names = [cls.name for cls in collector_classes()]
        flags = [f"--collector.{n}" if n in collectors else f"--no-collector.{n}" for n in names]
    args = build_parser().parse_args(
        ["--ceph.asok-dir", str(directory), "--scrape.max-parallel", str(parallel), *flags]
    )
    scraper = Scraper(enabled_collectors(args), settings_from_args(args))
    shares = CpuShares()
    for collector in scraper.collectors:
        if isinstance(collector, DaemonCollector):
            collector.collect_daemon = shares.wrap(  # type: ignore[method-assign]
                collector.name, collector.collect_daemon)
        else:
            collector.collect_host = shares.wrap(  # type: ignore[attr-defined]
                collector.name, collector.collect_host)  # type: ignore[attr-defined]
    scraper._prefetch = shares.wrap("(prefetch I/O)", scraper._prefetch)  # type: ignore[method-assign]
    commands = CommandLog()
    undo = record_commands(commands)
    daemons = discover_daemons(directory, ["osd"])
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=parallel)
    floor_commands: dict[str, list[dict[str, Any]]] = {}
    floor_pids: dict[str, int] = {}
    threads_on = any(c.name == "threads" for c in scraper.collectors)

    def floor_one(path: str) -> None:
        for command in floor_commands.get(path, []):
            try:
                payload = request_raw(path, command, timeout=10).payload
            except AsokError:
                continue  # the exporter got the same refusal (e.g. counter dump on Pacific)
            with contextlib.suppress(ValueError):
                json.loads(payload)
        pid = floor_pids.get(path)
        if threads_on and pid:
            read_proc_raw(pid)

    def floor_round() -> None:
        list(pool.map(floor_one, [d.asok_path for d in daemons]))

    def exporter_scrape() -> bytes:
        with commands.lock:
            commands.commands.clear()
        families = scraper.scrape(time.monotonic() + 30)
        started = time.thread_time()
        body = render(families)
        with shares.lock:
            shares.seconds["(render)"] += time.thread_time() - started
        return body

    out: dict[str, Any] = {k: [] for k in ("wall", "cpu", "bytes", "fwall", "fcpu", "series")}
    share_total: Counter[str] = Counter()
    try:
        for _ in range(2):  # warm-up: schemas cached, second scrape is steady state
            body = exporter_scrape()
        shares.take()
        for _ in range(scrapes):
            cpu0, wall0 = time.process_time(), time.perf_counter()
            body = exporter_scrape()
            out["wall"].append(time.perf_counter() - wall0)
            out["cpu"].append(time.process_time() - cpu0)
            out["bytes"].append(len(body))
            share_total.update(shares.take())
            with commands.lock:
                floor_commands = {k: list(v) for k, v in commands.commands.items()}
                floor_pids = dict(commands.pids)
            cpu0, wall0 = time.process_time(), time.perf_counter()
            floor_round()
            out["fwall"].append(time.perf_counter() - wall0)
            out["fcpu"].append(time.process_time() - cpu0)
        lines = [ln for ln in body.split(b"\n") if ln and not ln.startswith(b"#")]
        out["series"] = len(lines)
        out["series_per_osd"] = sum(b'ceph_daemon="osd.0"' in ln for ln in lines)
        out["commands_per_osd"] = statistics.median(len(v) for v in floor_commands.values())
        out["shares"] = {k: v / scrapes for k, v in share_total.items()}
        up = [ln for ln in lines if ln.startswith(b"cephscope_daemon_up{")]
        if len(up) != len(daemons) or any(not ln.endswith(b" 1") for ln in up):
            print("warning: some daemon was down during the benchmark", file=sys.stderr)
        failed = [ln.decode() for ln in lines
                  if ln.startswith(b"cephscope_scrape_collector_success{") and ln.endswith(b" 0")]
        if failed:
            print(f"warning: collectors failed: {failed}", file=sys.stderr)
    finally:
        undo()
        scraper.close()
        pool.shutdown()
    return out


def series_per_osd(directory: Path) -> list[tuple[str, int]]:
    """Series of osd.0 with each collector alone, and with the knobs that bound them."""
    variants: list[tuple[str, list[str]]] = [
        (cls.name, [f"--collector.{cls.name}"]) for cls in collector_classes()]
    variants += [
        ("perf, --collector.perf.priority=0", ["--collector.perf", "--collector.perf.priority=0"]),
        ("perf, --collector.perf.priority=10",
         ["--collector.perf", "--collector.perf.priority=10"]),
    ]
    counts = []
    for label, flags in variants:
        args = build_parser().parse_args(
            ["--ceph.asok-dir", str(directory), "--collector.disable-defaults", *flags])
        scraper = Scraper(enabled_collectors(args), settings_from_args(args))
        try:
            body = render(scraper.scrape(time.monotonic() + 30))
        finally:
            scraper.close()
        counts.append((label, sum(
            1 for line in body.split(b"\n")
            if b'ceph_daemon="osd.0"' in line and not line.startswith(b"#")
            and not line.startswith(b"cephscope_daemon_up"))))
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--osds", default="1,12,24,60")
    parser.add_argument("--scrapes", type=int, default=30)
    parser.add_argument("--collectors", default="default",
                        help="comma-separated collectors, or 'default' (the exporter's)")
    parser.add_argument("--parallel", type=int, default=16, help="--scrape.max-parallel")
    parser.add_argument("--osd-processes", action=argparse.BooleanOptionalAction, default=True,
                        help="one OSD-shaped process per fake OSD (default) or one for all")
    parser.add_argument("--threads-per-osd", type=int, default=70)
    parser.add_argument("--flag", action="append", default=[],
                        help="an exporter flag, e.g. --flag=--collector.threads.min-interval=0")
    args = parser.parse_args()
    collectors = None if args.collectors == "default" else [
        c.strip() for c in args.collectors.split(",") if c.strip()]
    tune_gc_for_scrapes()  # as cephscope-exporter's main() does
    logging.getLogger("cephscope").setLevel(logging.ERROR)  # no mon here: topology warns
    shape = (f"{args.threads_per_osd} threads per OSD process" if args.osd_processes
             else "all OSDs in one process")
    print(f"cephscope-exporter scrape cost: collectors {args.collectors} {' '.join(args.flag)}, {shape}, "
          f"{args.scrapes} scrapes per N, {os.cpu_count()} CPUs, max-parallel {args.parallel}")
    header = (f"{'OSDs':>5} {'median ms':>10} {'p99 ms':>8} {'CPU s/scrape':>13} "
              f"{'KiB/scrape':>11} {'series':>7} {'per OSD':>7} | {'floor med ms':>12} "
              f"{'floor p99':>9} {'floor CPU':>9} {'ratio':>6} {'load':>5}")
    print(header)
    print("-" * len(header))
    shares_by_n = {}
    by_collector: list[tuple[str, int]] = []
    for osds in [int(n) for n in args.osds.split(",")]:
        with tempfile.TemporaryDirectory(prefix="cephscope-bench-") as tmp:
            directory = Path(tmp)
            child = start_fakes(directory, osds, osd_processes=args.osd_processes,
                                threads_per_osd=args.threads_per_osd)
            try:
                m = measure(directory, collectors, args.scrapes, args.parallel, tuple(args.flag))
                if not by_collector:
                    by_collector = series_per_osd(directory)
            finally:
                child.terminate()
                child.wait(timeout=60)
        med = statistics.median(m["wall"]) * 1000
        floor_med = statistics.median(m["fwall"]) * 1000
        print(
            f"{osds:>5} {med:>10.1f} {percentile(m['wall'], 0.99) * 1000:>8.1f} "
            f"{statistics.median(m['cpu']):>13.4f} {statistics.median(m['bytes']) / 1024:>11.0f} "
            f"{m['series']:>7} {m['series_per_osd']:>7} | "
            f"{floor_med:>12.1f} {percentile(m['fwall'], 0.99) * 1000:>9.1f} "
            f"{statistics.median(m['fcpu']):>9.4f} {med / floor_med:>6.2f} "
            f"{os.getloadavg()[0]:>5.1f}", flush=True
        )
        shares_by_n[osds] = (m["shares"], statistics.median(m["cpu"]), m["commands_per_osd"])
    print("\nCPU share of a scrape (thread CPU seconds inside each part / process CPU):")
    for osds, (shares, cpu, commands) in shares_by_n.items():
        parts = ", ".join(f"{name} {seconds * 1000:.0f} ms ({seconds / cpu:.0%})"
                          for name, seconds in sorted(shares.items(), key=lambda kv: -kv[1]))
        print(f"{osds:>5} OSDs ({commands:.0f} commands per OSD): {parts}")
    print("\nSeries of one OSD (osd.0 of the load capture) by collector alone:")
    print(", ".join(f"{label} {count}" for label, count in by_collector))
    return 0


if __name__ == "__main__":
    sys.exit(main())
