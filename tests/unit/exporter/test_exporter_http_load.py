"""HTTP under load and abuse: single flight, 503 beyond --web.max-requests, idle and
half-open connections, header timeout, keep-alive, gzip, bad requests, listen addresses."""

from __future__ import annotations

import gzip
import http.client
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cephscope.exporter.scrape import SingleFlight
from tests.unit.exporter_fakes import serve, stop
from tests.unit.fake_asok import FakeCluster, parse_samples


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[FakeCluster]:
    fake = FakeCluster(tmp_path / "run")
    for osd in range(3):
        fake.add_osd(osd)
    yield fake
    fake.stop()


def fetch(port: int, path: str = "/metrics", headers: dict[str, str] | None = None,
          method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    try:
        conn.request(method, path, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def test_single_flight_shares_one_collection_between_concurrent_callers() -> None:
    calls: list[float] = []
    entered, release = threading.Event(), threading.Event()

    def collect(deadline: float, arrived: float) -> int:
        calls.append(time.monotonic())
        entered.set()
        release.wait(10)
        return len(calls)

    flight: SingleFlight[int] = SingleFlight(collect)
    results: list[int | None] = []
    lock = threading.Lock()

    def scrape(arrived: float) -> None:
        value = flight.get(arrived, time.monotonic() + 10)
        with lock:
            results.append(value)

    first = threading.Thread(target=scrape, args=(time.monotonic(),))
    first.start()
    assert entered.wait(10)
    # Nineteen more arrive while collection 1 is in flight. Whether a thread reaches get()
    # before the collection ends (it joins it) or after (it waited for a worker, say) is up
    # to the scheduler: either way it gets collection 1.
    arrived = time.monotonic()
    threads = [threading.Thread(target=scrape, args=(arrived,)) for _ in range(19)]
    for thread in threads:
        thread.start()
    time.sleep(0.05)
    release.set()
    for thread in [first, *threads]:
        thread.join()
    assert len(calls) == 1
    assert results == [1] * 20
    # A request arriving after it ended starts a fresh one.
    assert flight.get(time.monotonic(), time.monotonic() + 10) == 2


def test_single_flight_waiter_gives_up_at_its_deadline() -> None:
    release = threading.Event()

    def collect(deadline: float, arrived: float) -> str:
        release.wait(5)
        return "done"

    flight: SingleFlight[str] = SingleFlight(collect)
    leader = threading.Thread(target=flight.get, args=(time.monotonic(), time.monotonic() + 10))
    leader.start()
    time.sleep(0.05)
    started = time.monotonic()
    assert flight.get(time.monotonic(), time.monotonic() + 0.3) is None
    assert 0.25 < time.monotonic() - started < 2
    release.set()
    leader.join()


def test_concurrent_scrapes_share_collections_and_all_daemons_stay_up(
    tmp_path: Path,
) -> None:
    fake = FakeCluster(tmp_path / "run")
    for osd in range(3):
        fake.add_osd(osd, fault="slow:0.3")
    server = serve(fake.dir)
    port = server.server_address[1]
    replies: list[tuple[int, dict[str, str], bytes]] = []
    try:
        threads = [
            threading.Thread(target=lambda: replies.append(fetch(port))) for _ in range(12)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert [r[0] for r in replies] == [200] * 12
        for _, _, body in replies:
            samples = parse_samples(body.decode())
            assert all(samples[f'cephscope_daemon_up{{ceph_daemon="osd.{n}"}}'] == 1
                       for n in range(3))
        _, _, body = fetch(port)
        collections = parse_samples(body.decode())["cephscope_scrape_collections_total"]
        assert collections <= 4  # 13 requests, at most 3 collections before this one
    finally:
        stop(server)
        fake.stop()


def test_requests_beyond_max_requests_wait_in_the_queue(tmp_path: Path) -> None:
    fake = FakeCluster(tmp_path / "run")
    fake.add_osd(0, fault="slow:0.5")
    server = serve(fake.dir, "--web.max-requests", "1")
    port = server.server_address[1]
    try:
        statuses: list[int] = []
        threads = [threading.Thread(target=lambda: statuses.append(fetch(port)[0]))
                   for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert statuses == [200] * 6
    finally:
        stop(server)
        fake.stop()


def test_requests_beyond_max_requests_and_queue_get_503(tmp_path: Path) -> None:
    fake = FakeCluster(tmp_path / "run")
    fake.add_osd(0, fault="slow:1")
    server = serve(fake.dir, "--web.max-requests", "1", "--web.max-queued-requests", "0")
    port = server.server_address[1]
    try:
        first: list[int] = []
        slow = threading.Thread(target=lambda: first.append(fetch(port)[0]))
        slow.start()
        time.sleep(0.3)
        status, _, body = fetch(port)
        assert status == 503 and b"Service Unavailable" in body
        slow.join()
        assert first == [200]
        samples = parse_samples(fetch(port)[2].decode())
        assert samples["cephscope_http_requests_rejected_total"] == 1
    finally:
        stop(server)
        fake.stop()


def test_idle_and_half_open_connections_cost_no_thread(cluster: FakeCluster) -> None:
    server = serve(cluster.dir)
    port = server.server_address[1]
    idle: list[socket.socket] = []
    try:
        fetch(port)  # warm the worker pool
        threads_before = threading.active_count()
        for n in range(300):
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            if n % 2:
                sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # half a header
            idle.append(sock)
        time.sleep(0.3)
        started = time.monotonic()
        status, _, body = fetch(port)
        assert status == 200 and time.monotonic() - started < 5
        assert parse_samples(body.decode())['cephscope_daemon_up{ceph_daemon="osd.2"}'] == 1
        assert threading.active_count() <= threads_before + 2
    finally:
        for sock in idle:
            sock.close()
        stop(server)


def test_incomplete_header_is_closed_after_the_header_timeout(cluster: FakeCluster) -> None:
    server = serve(cluster.dir, "--web.read-header-timeout", "0.5")
    port = server.server_address[1]
    try:
        sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        sock.sendall(b"GET /metrics HTTP/1.1\r\n")
        started = time.monotonic()
        assert sock.recv(100) == b""  # closed by the server
        assert 0.3 < time.monotonic() - started < 3
        sock.close()
    finally:
        stop(server)


def test_keep_alive_and_gzip(cluster: FakeCluster) -> None:
    server = serve(cluster.dir)
    port = server.server_address[1]
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    try:
        conn.request("GET", "/metrics")
        plain = conn.getresponse()
        plain_body = plain.read()
        assert plain.status == 200 and plain.getheader("Content-Encoding") is None
        conn.request("GET", "/metrics", headers={"Accept-Encoding": "gzip"})  # same connection
        packed = conn.getresponse()
        packed_body = packed.read()
        assert packed.getheader("Content-Encoding") == "gzip"
        assert len(packed_body) * 4 < len(plain_body)
        unpacked = parse_samples(gzip.decompress(packed_body).decode())
        assert 'ceph_osd_op_w{ceph_daemon="osd.1"}' in unpacked
        conn.request("GET", "/metrics", headers={"Accept-Encoding": "gzip;q=0, identity"})
        refused = conn.getresponse()
        refused.read()
        assert refused.getheader("Content-Encoding") is None
    finally:
        conn.close()
        stop(server)


def test_bad_requests(cluster: FakeCluster) -> None:
    server = serve(cluster.dir)
    port = server.server_address[1]
    try:
        assert fetch(port, method="POST")[0] == 405
        assert fetch(port, "/nope")[0] == 404
        status, headers, body = fetch(port, method="HEAD")
        assert status == 200 and body == b"" and int(headers["content-length"]) > 1000
        for garbage in (b"\x16\x03\x01garbage\r\n\r\n", b"GET\r\n\r\n", b"GET / SPDY/9\r\n\r\n",
                        b"GET /metrics HTTP/1.1\r\n" + b"X: " + b"a" * 20000):
            with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                sock.sendall(garbage)
                reply = sock.recv(200)
            assert reply.startswith((b"HTTP/1.1 400", b"HTTP/1.1 431")), reply
        assert fetch(port)[0] == 200  # still serving
    finally:
        stop(server)


def _exchange(port: int, raw: bytes) -> tuple[bytes, bool]:
    """Send raw bytes on one connection; (everything read, whether the server closed it)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(raw)
        sock.settimeout(1)
        reply = b""
        try:
            while chunk := sock.recv(65536):
                reply += chunk
        except TimeoutError:
            return reply, False
    return reply, True


@pytest.mark.parametrize(
    "framing",
    [b"Content-Length: 44\r\n", b"Transfer-Encoding: chunked\r\n",
     b"Content-Length: x\r\n", b"Content-Length: 0\r\nContent-Length: 44\r\n"],
)
@pytest.mark.parametrize("method", [b"GET", b"HEAD"])
def test_get_or_head_with_a_body_is_refused_and_closed(
    cluster: FakeCluster, method: bytes, framing: bytes
) -> None:
    # The "body" is itself a request: served as one, it would desync a proxy in front.
    smuggled = b"GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
    body = smuggled if b"chunked" not in framing else (
        f"{len(smuggled):x}\r\n".encode() + smuggled + b"\r\n0\r\n\r\n")
    server = serve(cluster.dir)
    port = server.server_address[1]
    try:
        reply, closed = _exchange(
            port, method + b" / HTTP/1.1\r\nHost: x\r\n" + framing + b"\r\n" + body)
        assert reply.startswith(b"HTTP/1.1 400 "), reply[:100]
        assert reply.count(b"HTTP/1.1 ") == 1, "the body was answered as a second request"
        assert closed
    finally:
        stop(server)


def test_get_with_content_length_zero_is_served_and_kept_alive(cluster: FakeCluster) -> None:
    server = serve(cluster.dir)
    port = server.server_address[1]
    try:
        reply, closed = _exchange(port, b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"
                                  b"GET /next HTTP/1.1\r\nHost: x\r\n\r\n")
        assert reply.startswith(b"HTTP/1.1 200 ") and b"HTTP/1.1 404 " in reply
        assert not closed
    finally:
        stop(server)


def test_colon_port_listens_on_every_interface_in_a_private_netns(tmp_path: Path) -> None:
    assert shutil.which("unshare"), "util-linux unshare is needed (Debian: util-linux)"
    # A fresh network namespace: "every interface" is its own loopback only.
    script = (
        "import socket, subprocess\n"
        "subprocess.run(['ip', 'link', 'set', 'lo', 'up'], check=True)\n"
        "from cephscope.exporter.http import bind_listener, parse_listen_address\n"
        "sock = bind_listener(*parse_listen_address(':0'), 16)\n"
        "port = sock.getsockname()[1]\n"
        "print(sock.family.name, sock.getsockname()[0])\n"
        "for host in ('127.0.0.1', '::1'):\n"
        "    socket.create_connection((host, port), timeout=2).close()\n"
        "print('both')\n"
    )
    done = subprocess.run(["unshare", "--net", sys.executable, "-c", script],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["AF_INET6", "::", "both"]


def test_daemon_stays_up_when_only_the_exporter_runs_late(
    cluster: FakeCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cephscope.exporter.collectors import perf

    original = perf.PerfCollector.collect_daemon

    def slow(self, session, sink) -> None:  # type: ignore[no-untyped-def]
        time.sleep(2)  # the exporter's own slowness: replies were all received
        original(self, session, sink)

    monkeypatch.setattr(perf.PerfCollector, "collect_daemon", slow)
    server = serve(cluster.dir)
    try:
        status, _, body = fetch(server.server_address[1],
                                headers={"X-Prometheus-Scrape-Timeout-Seconds": "1.5"})
        samples = parse_samples(body.decode())
        assert status == 200
        assert samples['cephscope_daemon_up{ceph_daemon="osd.0"}'] == 1
        assert samples['cephscope_scrape_collector_success{collector="perf"}'] == 0
    finally:
        stop(server)
