"""The CephFS / RGW traffic helpers against stand-ins: a local HTTP server speaking the part of
Swift the rounds use (v1 auth, container and object PUT/GET/DELETE, listing) and a plain
directory for the file rounds. The real gateway and ceph-fuse are exercised by the live
dashboards module and the captures."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from cephscope.deploy.service_traffic import (
    BackgroundTraffic,
    CephFuseMount,
    SwiftAccount,
    TrafficError,
    file_round,
    swift_login,
    swift_round,
)

USER, KEY, TOKEN = "tester:swift", "s3cr3t", "AUTH_tk_test"


class FakeSwift:
    """Objects kept in memory; `faults` bends answers: {"auth": "no_token"}, {"GET": 503},
    {"short_get": True}."""

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}
        self.requests: list[tuple[str, str]] = []
        self.faults: dict[str, Any] = {}
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _reply(self, code: int, body: bytes = b"", headers: dict[str, str] | None = None
                       ) -> None:
                self.send_response(code)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _authorised(self) -> bool:
                if self.headers.get("X-Auth-Token") != TOKEN:
                    self._reply(401)
                    return False
                return True

            def do_GET(self) -> None:
                fake.requests.append(("GET", self.path))
                if self.path == "/auth/1.0":
                    if (self.headers.get("X-Auth-User"), self.headers.get("X-Auth-Key")) != (USER, KEY):
                        self._reply(401)
                    elif fake.faults.get("auth") == "no_token":
                        self._reply(204)
                    else:
                        port = self.server.server_address[1]
                        self._reply(204, headers={"X-Storage-Url": f"http://127.0.0.1:{port}/swift/v1",
                                                  "X-Auth-Token": TOKEN})
                    return
                if not self._authorised():
                    return
                if "GET" in fake.faults:
                    self._reply(fake.faults["GET"], b"busy")
                elif self.path in fake.objects:
                    body = fake.objects[self.path]
                    self._reply(200, body[:-1] if fake.faults.get("short_get") else body)
                else:
                    names = [p for p in fake.objects if p.startswith(self.path + "/")]
                    self._reply(200 if names else 204, "\n".join(names).encode())

            def do_PUT(self) -> None:
                fake.requests.append(("PUT", self.path))
                if not self._authorised():
                    return
                length = int(self.headers.get("Content-Length", "0"))
                fake.objects[self.path] = self.rfile.read(length)
                self._reply(201)

            def do_DELETE(self) -> None:
                fake.requests.append(("DELETE", self.path))
                if not self._authorised():
                    return
                fake.objects.pop(self.path, None)
                self._reply(204)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.account = SwiftAccount(f"http://127.0.0.1:{self.server.server_address[1]}/auth/1.0",
                                    USER, KEY)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def swift() -> Iterator[FakeSwift]:
    fake = FakeSwift()
    yield fake
    fake.close()


def test_swift_round_puts_gets_lists_and_deletes_everything(swift: FakeSwift) -> None:
    counts = swift_round(swift.account, "bucket-1", objects=3, size=1000)
    assert (counts.puts, counts.gets, counts.deletes, counts.other) == (3, 3, 3, 4)
    assert (counts.bytes_put, counts.bytes_got) == (3000, 3000)
    methods = [m for m, _ in swift.requests]
    assert methods.count("PUT") == 4 and methods.count("DELETE") == 4 and methods.count("GET") == 5
    assert swift.objects == {}  # nothing left behind


def test_swift_errors_name_the_request(swift: FakeSwift) -> None:
    with pytest.raises(TrafficError, match=r"GET http://127\.0\.0\.1:\d+/auth/1\.0: HTTP 401"):
        swift_login(SwiftAccount(swift.account.auth_url, USER, "wrong"))
    swift.faults = {"auth": "no_token"}
    with pytest.raises(TrafficError, match="no X-Storage-Url / X-Auth-Token"):
        swift_login(swift.account)
    swift.faults = {"GET": 503}
    with pytest.raises(TrafficError, match=r"GET .*/swift/v1/bucket-2/obj-0: HTTP 503"):
        swift_round(swift.account, "bucket-2", objects=1, size=10)
    swift.faults = {"short_get": True}
    with pytest.raises(TrafficError, match="9 bytes, 10 were written"):
        swift_round(swift.account, "bucket-3", objects=1, size=10)
    with pytest.raises(TrafficError, match="only http://"):
        swift_login(SwiftAccount("file:///etc/passwd", USER, KEY))
    closed = FakeSwift()
    closed.close()
    with pytest.raises(TrafficError, match=r"auth/1\.0: "):
        swift_login(closed.account)


def test_file_round_leaves_the_directory_as_it_was(tmp_path: Path) -> None:
    assert file_round(tmp_path, files=5, size=4096) == 5
    assert list(tmp_path.iterdir()) == []


def test_background_traffic_counts_rounds_and_raises_what_a_round_met(
        swift: FakeSwift, tmp_path: Path) -> None:
    traffic = BackgroundTraffic(swift.account, tmp_path, interval=0.05, objects=2, files=2).start()
    deadline = time.monotonic() + 10
    while traffic.rounds < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    traffic.stop()
    assert traffic.rounds >= 3
    assert traffic.counts.puts == 2 * traffic.rounds and traffic.files_done == 2 * traffic.rounds
    swift.faults = {"GET": 500}
    failing = BackgroundTraffic(swift.account, None, interval=0.05).start()
    deadline = time.monotonic() + 10
    while failing.error is None and time.monotonic() < deadline:
        time.sleep(0.05)
    with pytest.raises(TrafficError, match=r"traffic round 0 failed: .*HTTP 500"):
        failing.stop()


def test_ceph_fuse_mount_argv_and_failures(tmp_path: Path) -> None:
    mount = CephFuseMount(tmp_path / "ceph.conf", tmp_path / "mnt", client_id="admin")
    assert mount.argv() == ["ceph-fuse", "-c", str(tmp_path / "ceph.conf"), "--id", "admin",
                            str(tmp_path / "mnt")]
    failing = CephFuseMount(tmp_path / "ceph.conf", tmp_path / "mnt2", argv_prefix=["false"])
    with pytest.raises(TrafficError, match=r"false -c .* exited 1"), failing:
        pass
    # a mount point that already is one (here: /proc) is refused before anything runs
    with pytest.raises(TrafficError, match="already a mount point"), \
            CephFuseMount(tmp_path / "ceph.conf", Path("/proc"), argv_prefix=["true"]):
        pass
