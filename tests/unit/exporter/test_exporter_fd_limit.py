"""Descriptor exhaustion: the exporter under a low open-files limit and a flood of idle
connections keeps answering its keep-alive scraper, does not spin, and serves new
connections again once the idle ones time out."""

from __future__ import annotations

import http.client
import os
import resource
import socket
import subprocess
import sys
import time
from pathlib import Path

from cephscope.exporter.fdlimit import MIN_CONNECTIONS, connection_limit
from tests.unit.fake_asok import FakeCluster, only_collectors, parse_samples

SOFT, HARD = 128, 256  # the exporter must raise the soft limit to the hard one
HOSTILE = 250  # more than the descriptors the exporter may have at all


def _low_fd_limit() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (SOFT, HARD))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _soft_nofile(pid: int) -> int:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            return int(line.split()[3])
    raise AssertionError("no 'Max open files' line in /proc/<pid>/limits")


def _wait_listening(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        assert proc.poll() is None, "exporter exited"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError("exporter did not listen within 20 s")


def test_connection_limit_leaves_room_for_the_scrape() -> None:
    assert connection_limit(4096, 1024, 20, 16) == 1024 - 20 - 32 - 64
    assert connection_limit(100, 20000, 20, 16) == 100
    assert connection_limit(4096, 64, 20, 16) == MIN_CONNECTIONS


def test_idle_connection_flood_at_the_fd_limit_neither_spins_nor_stops_scrapes(
    tmp_path: Path,
) -> None:
    cluster = FakeCluster(tmp_path / "run")
    cluster.add_osd(0)
    port = _free_port()
    log = (tmp_path / "exporter.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "cephscope.exporter.main", "--ceph.asok-dir", str(cluster.dir),
         "--web.listen-address", f"127.0.0.1:{port}", "--web.read-header-timeout", "3",
         *only_collectors("perf")],
        preexec_fn=_low_fd_limit, stdout=log, stderr=subprocess.STDOUT,
    )
    hostile: list[socket.socket] = []
    prometheus = None
    try:
        _wait_listening(port, proc)
        assert _soft_nofile(proc.pid) == HARD, "soft RLIMIT_NOFILE not raised to the hard one"
        # Prometheus keeps its connection alive between scrapes.
        prometheus = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        prometheus.request("GET", "/metrics")
        assert prometheus.getresponse().read()
        for _ in range(HOSTILE):  # accepted up to the limit, the rest wait in the backlog
            hostile.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        time.sleep(0.3)
        cpu, wall = _cpu_seconds(proc.pid), time.monotonic()
        time.sleep(2)
        ratio = (_cpu_seconds(proc.pid) - cpu) / (time.monotonic() - wall)
        assert ratio < 0.3, f"exporter used {ratio:.0%} of a core while at its fd limit"
        # The keep-alive scraper goes on, and the scrape still has descriptors for the sockets.
        prometheus.request("GET", "/metrics")
        reply = prometheus.getresponse()
        samples = parse_samples(reply.read().decode())
        assert reply.status == 200
        assert samples['cephscope_daemon_up{ceph_daemon="osd.0"}'] == 1
        # A new connection waits in the backlog until idle ones time out, then is served.
        started = time.monotonic()
        fresh = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
        fresh.request("GET", "/metrics")
        assert fresh.getresponse().status == 200
        fresh.close()
        assert time.monotonic() - started < 15
        assert proc.poll() is None
    finally:
        for sock in hostile:
            sock.close()
        if prometheus is not None:
            prometheus.close()
        proc.terminate()
        proc.wait(10)
        log.close()
        cluster.stop()
