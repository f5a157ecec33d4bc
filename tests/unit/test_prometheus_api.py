"""The Prometheus API client against a small HTTP server answering as Prometheus does (the
live tests use a real Prometheus): data on success, Prometheus' own error text on a bad query,
"unreachable" only when nothing answers."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from cephscope.prometheus_api import PrometheusAPI, PrometheusError, PrometheusUnreachable


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path.startswith("/api/v1/query?query=up"):
            self._send(200, {"status": "success", "data": {"resultType": "vector", "result": [
                {"metric": {"job": "node"}, "value": [1.0, "1"]}]}})
        elif self.path.startswith("/api/v1/query?"):
            self._send(400, {"status": "error", "errorType": "bad_data",
                             "error": "1:1: parse error: unexpected"})
        elif self.path == "/api/v1/targets?state=active":
            self._send(200, {"status": "success", "data": {"activeTargets": [
                {"scrapeInterval": "5s"}]}})
        else:
            self.send_response(502)
            self.end_headers()
            self.wfile.write(b"<html>bad gateway</html>")

    def _send(self, code: int, body: dict[str, Any]) -> None:
        raw = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def api() -> Iterator[PrometheusAPI]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield PrometheusAPI(f"http://127.0.0.1:{server.server_address[1]}/", 5.0)
    finally:
        server.shutdown()
        server.server_close()


def test_answers_and_errors_are_told_apart(api: PrometheusAPI) -> None:
    assert api.query("up") == [{"metric": {"job": "node"}, "value": [1.0, "1"]}]
    assert api.active_targets() == [{"scrapeInterval": "5s"}]
    with pytest.raises(PrometheusError, match="parse error") as bad:
        api.query("(up")
    assert not isinstance(bad.value, PrometheusUnreachable)
    with pytest.raises(PrometheusError, match="HTTP 502: not JSON"):
        api.get("series", {"match[]": "up"})


def test_nothing_answering_is_unreachable() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed when the block ends: connections are refused
    with pytest.raises(PrometheusUnreachable):
        PrometheusAPI(f"http://127.0.0.1:{port}", 2.0).query("up")
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)  # accepts, never answers
        with pytest.raises(PrometheusUnreachable, match="timed out"):
            PrometheusAPI(f"http://127.0.0.1:{silent.getsockname()[1]}", 0.3).query("up")
