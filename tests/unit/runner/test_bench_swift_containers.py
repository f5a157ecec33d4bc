"""Removing a step's Swift containers: python-swiftclient against a small stand-in for the
gateway's Swift API (v1 auth, account and container listings with markers, deletes): only
the step's containers go, objects first; a refused key is an error, a 404 is not."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

import pytest
from swiftclient.exceptions import ClientException

from cephscope.runner.benchmarks.swift_containers import remove_containers
from cephscope.runner.rgw_endpoint import endpoint

KEY = "k3y"


class FakeSwift(ThreadingHTTPServer):
    """Containers name -> object names; a listing page holds at most 2 entries."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.containers: dict[str, list[str]] = {}
        self.deleted_objects: list[str] = []
        self.gone_midway: set[str] = set()  # objects deleted by someone else meanwhile


class Handler(BaseHTTPRequestHandler):
    server: FakeSwift

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, status: int, body: object = None, headers: dict[str, str] | None = None
              ) -> None:
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        if body is not None:
            self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(data)

    def _page(self, names: list[str], query: dict[str, list[str]]) -> list[str]:
        prefix = query.get("prefix", [""])[0]
        marker = query.get("marker", [""])[0]
        return [n for n in sorted(names) if n.startswith(prefix) and n > marker][:2]

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        if url.path == "/auth/1.0":
            if self.headers.get("X-Auth-Key") != KEY:
                self._send(401)
                return
            port = self.server.server_address[1]
            self._send(204, headers={"X-Storage-Url": f"http://127.0.0.1:{port}/v1/AUTH_b",
                                     "X-Auth-Token": "tok"})
            return
        parts = [unquote(p) for p in url.path.split("/")[3:] if p]
        if not parts:
            page = self._page(list(self.server.containers), query)
            self._send(200, [{"name": n, "count": 0, "bytes": 0} for n in page])
        elif parts[0] in self.server.containers:
            page = self._page(self.server.containers[parts[0]], query)
            self._send(200, [{"name": n, "bytes": 1} for n in page])
        else:
            self._send(404)

    def do_DELETE(self) -> None:
        parts = [unquote(p) for p in urlsplit(self.path).path.split("/")[3:] if p]
        objects = self.server.containers.get(parts[0])
        if objects is None:
            self._send(404)
        elif len(parts) == 2:
            if parts[1] in self.server.gone_midway or parts[1] not in objects:
                self._send(404)
            else:
                objects.remove(parts[1])
                self.server.deleted_objects.append(f"{parts[0]}/{parts[1]}")
                self._send(204)
        elif objects:
            self._send(409)
        else:
            del self.server.containers[parts[0]]
            self._send(204)


@pytest.fixture()
def swift() -> Iterator[FakeSwift]:
    server = FakeSwift()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _rgw(server: FakeSwift, key: str = KEY):
    port = server.server_address[1]
    return endpoint("test", swift_auth_url=f"http://127.0.0.1:{port}/auth/1.0",
                    swift_user="bench:swift", swift_key=key)


def test_only_the_steps_containers_go_objects_first(swift: FakeSwift) -> None:
    swift.containers = {
        "cephscope-abc123-0_0": ["o1", "o2", "o3"],
        "cephscope-abc123-0_1": ["o4", "o5"],
        "cephscope-abc123-c1-0": [],
        "cephscope-abc124-0": ["keep"],
        "users-data": ["keep"],
    }
    swift.gone_midway = {"o2"}  # deleted meanwhile: a 404 is fine
    swift.containers["cephscope-abc123-0_0"].remove("o2")
    assert remove_containers(_rgw(swift), "cephscope-abc123-") == 3
    assert sorted(swift.containers) == ["cephscope-abc124-0", "users-data"]
    assert sorted(swift.deleted_objects) == ["cephscope-abc123-0_0/o1", "cephscope-abc123-0_0/o3",
                                             "cephscope-abc123-0_1/o4", "cephscope-abc123-0_1/o5"]


def test_a_refused_key_is_an_error_and_no_prefix_is_refused(swift: FakeSwift) -> None:
    swift.containers = {"cephscope-abc123-0": ["o1"]}
    with pytest.raises(ClientException, match="401"):
        remove_containers(_rgw(swift, key="wrong"), "cephscope-abc123-")
    assert swift.containers == {"cephscope-abc123-0": ["o1"]}
    with pytest.raises(ValueError, match="without a name prefix"):
        remove_containers(_rgw(swift), "")
