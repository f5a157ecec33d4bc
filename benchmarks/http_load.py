"""The exporter under hostile and long-running scrapes, through its real HTTP server.

    .venv/bin/python benchmarks/http_load.py burst [--osds 60] [--idle 1000] [--scrapes 50]
    .venv/bin/python benchmarks/http_load.py soak [--osds 60] [--scrapes 10000] [--trace]

N fake OSD admin sockets replaying real captures (tests/unit/fake_asok.py), each served by
its own OSD-shaped process (comm ``ceph-osd``, 70 threads named like an OSD's, so the
threads collector reads a real /proc/<pid>/task; ``--no-osd-processes``: one process for
all); ``cephscope-exporter`` runs as its own process with default flags (only the socket
directory and a free 127.0.0.1 port given).

burst: the median of 10 lone scrapes (5.6 s apart, so each reads /proc and dumps the op
queues afresh like the burst's collection: REFRESH_GAP_SECONDS); then ``--idle``
connections that each send half a request header and stay open, and ``--scrapes``
concurrent scrapes while they are open.
Printed: every reply complete (status 200, every daemon ``cephscope_daemon_up 1``), p50/p99
of the concurrent scrapes and p99 / lone, collections run for them, exporter peak RSS.
Targets: all complete, p99 <= 2x lone, RSS <= 300 MB.

soak: sequential scrapes; exporter RSS after 100 and after ``--scrapes``. Targets: ratio
<= 1.2, RSS <= 100 MB at 60 OSDs. With ``--trace`` the exporter's server runs in this
process (as ``cephscope-exporter``'s main sets it up) under tracemalloc, snapshots are taken
after 100 scrapes and at the end, and the 10 tracebacks whose memory grew most in between
are printed (what is left of a leak); its RSS then includes the benchmark's client.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import http.client
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from benchmarks.scrape_cost import percentile, start_fakes  # noqa: E402
from cephscope.exporter.logs import configure_logging  # noqa: E402
from cephscope.exporter.main import build_parser, exporter_flags, make_server  # noqa: E402
from cephscope.exporter.scrape import limit_malloc_arenas, tune_gc_for_scrapes  # noqa: E402

EXPORTER = Path(sys.executable).parent / "cephscope-exporter"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_exporter(asok_dir: Path, port: int) -> subprocess.Popen[bytes]:
    child = subprocess.Popen(
        [str(EXPORTER), f"--ceph.asok-dir={asok_dir}", f"--web.listen-address=127.0.0.1:{port}",
         "--log.level=error"],
        stdin=subprocess.DEVNULL,
    )
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return child
        except OSError:
            time.sleep(0.05)
    child.kill()
    raise SystemExit("exporter did not start")


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def scrape(port: int) -> tuple[float, int, bytes]:
    started = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request("GET", "/metrics", headers={"X-Prometheus-Scrape-Timeout-Seconds": "60"})
        resp = conn.getresponse()
        body = resp.read()
        return time.perf_counter() - started, resp.status, body
    finally:
        conn.close()


def complete(status: int, body: bytes, osds: int) -> bool:
    up = [line for line in body.splitlines() if line.startswith(b"cephscope_daemon_up{")]
    return (status == 200 and body.endswith(b"\n") and len(up) == osds
            and all(line.endswith(b" 1") for line in up))


def sample(body: bytes, name: bytes) -> float:
    for line in body.splitlines():
        if line.startswith(name + b" "):
            return float(line.split()[-1])
    return float("nan")


# Longer than the default --collector.threads.min-interval and opqueue.min-interval (5 s):
# every lone scrape and the burst's collection read /proc and dump the op queues afresh,
# as with Prometheus' 15 s interval, so the lone baseline costs what the burst does.
REFRESH_GAP_SECONDS = 5.6


def burst(port: int, pid: int, args: argparse.Namespace) -> None:
    lone = []
    scrape(port)  # first scrape: schemas fetched, not part of the baseline
    for _ in range(10):
        time.sleep(REFRESH_GAP_SECONDS)
        lone.append(scrape(port)[0])
    lone_med = statistics.median(lone)
    before = sample(scrape(port)[2], b"cephscope_scrape_collections_total")
    last_scrape = time.monotonic()
    idle: list[socket.socket] = []
    for _ in range(args.idle):
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        idle.append(sock)
    time.sleep(max(0.0, last_scrape + REFRESH_GAP_SECONDS - time.monotonic()))
    with concurrent.futures.ThreadPoolExecutor(args.scrapes) as pool:
        results = list(pool.map(lambda _: scrape(port), range(args.scrapes)))
    peak = rss_mb(pid, "VmHWM")
    for sock in idle:
        sock.close()
    after = sample(scrape(port)[2], b"cephscope_scrape_collections_total")
    times = [r[0] for r in results]
    ok = sum(complete(status, body, args.osds) for _, status, body in results)
    p99 = percentile(times, 0.99)
    print(f"lone scrape median {lone_med * 1000:.0f} ms; {args.idle} half-open connections held")
    print(f"{args.scrapes} concurrent scrapes: {ok}/{args.scrapes} complete with all "
          f"{args.osds} daemons up; p50 {statistics.median(times) * 1000:.0f} ms, "
          f"p99 {p99 * 1000:.0f} ms = {p99 / lone_med:.2f}x lone; "
          f"{after - before - 1:.0f} collections for them")
    print(f"exporter peak RSS {peak:.0f} MB")


def print_growth(old: tracemalloc.Snapshot, new: tracemalloc.Snapshot) -> None:
    total = sum(s.size for s in new.statistics("filename")) - sum(
        s.size for s in old.statistics("filename"))
    print(f"tracemalloc: Python-level allocations grew {total / 1024:.0f} KiB; "
          "largest growths by traceback:")
    for diff in new.compare_to(old, "traceback")[:10]:
        frames = " <- ".join(f"{Path(f.filename).name}:{f.lineno}" for f in diff.traceback[:4])
        print(f"  {diff.size_diff / 1024:+9.0f} KiB {diff.count_diff:+7d} blocks  {frames}")


def soak(port: int, pid: int, args: argparse.Namespace) -> None:
    at_100 = float("nan")
    started = time.monotonic()
    first_trace: tracemalloc.Snapshot | None = None
    for n in range(1, args.scrapes + 1):
        _, status, _ = scrape(port)
        if status != 200:
            print(f"scrape {n}: status {status}")
        if n == 100:
            at_100 = rss_mb(pid)
            if args.trace:
                first_trace = tracemalloc.take_snapshot()
        if n % 1000 == 0 or n == args.scrapes:
            print(f"after {n:>6} scrapes: RSS {rss_mb(pid):.1f} MB "
                  f"({(time.monotonic() - started) / n * 1000:.0f} ms/scrape)", flush=True)
    final = rss_mb(pid)
    print(f"RSS after 100: {at_100:.1f} MB, after {args.scrapes}: {final:.1f} MB, "
          f"ratio {final / at_100:.2f}; peak {rss_mb(pid, 'VmHWM'):.1f} MB; "
          f"load average {os.getloadavg()[0]:.1f}")
    if first_trace is not None:
        print_growth(first_trace, tracemalloc.take_snapshot())


def soak_in_process(asok_dir: Path, args: argparse.Namespace) -> None:
    """The soak against the exporter's server in this process, under tracemalloc."""
    tracemalloc.start(8)
    server_args = build_parser().parse_args(
        [f"--ceph.asok-dir={asok_dir}", "--web.listen-address=127.0.0.1:0", "--log.level=error"])
    log = exporter_flags(server_args).log
    configure_logging(log.level, log.format)
    server = make_server(server_args)
    tune_gc_for_scrapes()
    limit_malloc_arenas()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        soak(server.server_address[1], os.getpid(), args)
    finally:
        server.shutdown()
        server.server_close()
        server.scraper.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["burst", "soak"])
    parser.add_argument("--osds", type=int, default=60)
    parser.add_argument("--idle", type=int, default=1000)
    parser.add_argument("--scrapes", type=int, default=None)
    parser.add_argument("--osd-processes", action=argparse.BooleanOptionalAction, default=True,
                        help="one OSD-shaped process per fake OSD (default) or one for all")
    parser.add_argument("--trace", action="store_true",
                        help="soak: tracemalloc snapshots after 100 scrapes and at the end")
    args = parser.parse_args()
    if args.scrapes is None:
        args.scrapes = 50 if args.mode == "burst" else 10_000
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"cephscope-exporter {args.mode}: {args.osds} fake OSDs, default collectors, "
          f"{os.cpu_count()} CPUs (load average {load})")
    with tempfile.TemporaryDirectory(prefix="cephscope-bench-") as tmp:
        asok_dir = Path(tmp)
        fakes = start_fakes(asok_dir, args.osds, osd_processes=args.osd_processes)
        try:
            if args.trace:
                args.mode = "soak"
                soak_in_process(asok_dir, args)
                return 0
            exporter = start_exporter(asok_dir, free_port())
            port = int(exporter.args[2].rpartition(":")[2])
            try:
                (burst if args.mode == "burst" else soak)(port, exporter.pid, args)
            finally:
                exporter.terminate()
                exporter.wait(timeout=30)
        finally:
            fakes.terminate()
            fakes.wait(timeout=60)
    return 0


if __name__ == "__main__":
    sys.exit(main())
