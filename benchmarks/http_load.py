"""The exporter under hostile and long-running scrapes, through its real HTTP server.

    .venv/bin/python benchmarks/http_load.py burst [--osds 60] [--idle 1000] [--scrapes 50]
    .venv/bin/python benchmarks/http_load.py soak [--osds 60] [--scrapes 10000]

A child process serves N fake OSD admin sockets replaying real captures
(tests/unit/fake_asok.py); ``cephscope-exporter`` runs as its own process with default
flags (only the socket directory and a free 127.0.0.1 port given).

burst: the median of 10 lone scrapes; then ``--idle`` connections that each send half a
request header and stay open, and ``--scrapes`` concurrent scrapes while they are open.
Printed: every reply complete (status 200, every daemon ``cephscope_daemon_up 1``), p50/p99
of the concurrent scrapes and p99 / lone, collections run for them, exporter peak RSS.
Targets: all complete, p99 <= 2x lone, RSS <= 300 MB.

soak: sequential scrapes; exporter RSS after 100 and after ``--scrapes``. Targets: ratio
<= 1.2, RSS <= 100 MB at 60 OSDs.
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
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from benchmarks.scrape_cost import percentile, start_fakes  # noqa: E402

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


def burst(port: int, pid: int, args: argparse.Namespace) -> None:
    lone = [scrape(port)[0] for _ in range(10)]
    lone_med = statistics.median(lone)
    before = sample(scrape(port)[2], b"cephscope_scrape_collections_total")
    idle: list[socket.socket] = []
    for _ in range(args.idle):
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        idle.append(sock)
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


def soak(port: int, pid: int, args: argparse.Namespace) -> None:
    at_100 = float("nan")
    started = time.monotonic()
    for n in range(1, args.scrapes + 1):
        _, status, _ = scrape(port)
        if status != 200:
            print(f"scrape {n}: status {status}")
        if n == 100:
            at_100 = rss_mb(pid)
        if n % 1000 == 0 or n == args.scrapes:
            print(f"after {n:>6} scrapes: RSS {rss_mb(pid):.1f} MB "
                  f"({(time.monotonic() - started) / n * 1000:.0f} ms/scrape)", flush=True)
    final = rss_mb(pid)
    print(f"RSS after 100: {at_100:.1f} MB, after {args.scrapes}: {final:.1f} MB, "
          f"ratio {final / at_100:.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["burst", "soak"])
    parser.add_argument("--osds", type=int, default=60)
    parser.add_argument("--idle", type=int, default=1000)
    parser.add_argument("--scrapes", type=int, default=None)
    args = parser.parse_args()
    if args.scrapes is None:
        args.scrapes = 50 if args.mode == "burst" else 10_000
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"cephscope-exporter {args.mode}: {args.osds} fake OSDs, default collectors, "
          f"{os.cpu_count()} CPUs (load average {load})")
    with tempfile.TemporaryDirectory(prefix="cephscope-bench-") as tmp:
        fakes = start_fakes(Path(tmp), args.osds)
        exporter = start_exporter(Path(tmp), free_port())
        port = int(exporter.args[2].rpartition(":")[2])
        try:
            (burst if args.mode == "burst" else soak)(port, exporter.pid, args)
        finally:
            exporter.terminate()
            exporter.wait(timeout=30)
            fakes.terminate()
            fakes.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
