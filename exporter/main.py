"""``cephscope-exporter``: HTTP server exposing Ceph admin-socket metrics to Prometheus.

Default port 9967: not 9283 (mgr prometheus module), 9926 (ceph-exporter) or 9128
(digitalocean/ceph_exporter), so it runs next to all of them; it is free in Prometheus'
default port allocation list as of this writing. It listens on 127.0.0.1 unless told
otherwise.
"""

from __future__ import annotations

import argparse
import html
import logging
import sys
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from cephscope import __version__
from cephscope.exporter.asok import (
    DEFAULT_ASOK_DIR,
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_TIMEOUT_SECONDS,
)
from cephscope.exporter.collectors import add_collector_arguments, enabled_collectors
from cephscope.exporter.exposition import CONTENT_TYPE, render
from cephscope.exporter.scrape import Scraper, ScrapeSettings, tune_gc_for_scrapes
from cephscope.exporter.webconfig import WebConfig, WebConfigError, load_web_config

DEFAULT_LISTEN_ADDRESS = "127.0.0.1:9967"
TIMEOUT_HEADER = "X-Prometheus-Scrape-Timeout-Seconds"

log = logging.getLogger("cephscope.exporter")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cephscope-exporter",
        description="Prometheus exporter for Ceph daemons on this host, via their admin sockets.",
    )
    parser.add_argument("--version", action="version", version=f"cephscope-exporter {__version__}")
    web = parser.add_argument_group("web")
    web.add_argument(
        "--web.listen-address", dest="listen_address", default=DEFAULT_LISTEN_ADDRESS,
        metavar="HOST:PORT", help="address to listen on (default: %(default)s)",
    )
    web.add_argument(
        "--web.telemetry-path", dest="telemetry_path", default="/metrics",
        help="path under which to expose metrics (default: %(default)s)",
    )
    web.add_argument(
        "--web.config.file", dest="web_config_file", default=None, metavar="FILE",
        help="exporter-toolkit web config (TLS, basic auth with bcrypt hashes)",
    )
    web.add_argument(
        "--web.timeout-offset", dest="timeout_offset", type=float, default=0.5, metavar="SECONDS",
        help="subtract from Prometheus' scrape timeout to leave room for the reply"
        " (default: %(default)s)",
    )
    ceph = parser.add_argument_group("ceph")
    ceph.add_argument(
        "--ceph.asok-dir", dest="asok_dir", default=DEFAULT_ASOK_DIR, metavar="DIR",
        help="directory of admin sockets, searched one level down too, e.g. cephadm's"
        " <fsid>/ (default: %(default)s)",
    )
    ceph.add_argument(
        "--ceph.asok-timeout", dest="asok_timeout", type=float, default=DEFAULT_TIMEOUT_SECONDS,
        metavar="SECONDS", help="timeout of one admin-socket command (default: %(default)s)",
    )
    ceph.add_argument(
        "--ceph.max-response-bytes", dest="max_response_bytes", type=int,
        default=DEFAULT_MAX_RESPONSE_BYTES, metavar="BYTES",
        help="refuse admin-socket responses longer than this (default: %(default)s)",
    )
    ceph.add_argument(
        "--ceph.daemon-types", dest="daemon_types", default=None, metavar="TYPES",
        help="comma-separated daemon types to scrape (default: every type a collector handles)",
    )
    scrape = parser.add_argument_group("scrape")
    scrape.add_argument(
        "--scrape.default-timeout", dest="default_timeout", type=float, default=10.0,
        metavar="SECONDS",
        help=f"scrape deadline when the request has no {TIMEOUT_HEADER} (default: %(default)s)",
    )
    scrape.add_argument(
        "--scrape.max-parallel", dest="max_parallel", type=int, default=16, metavar="N",
        help="daemons scraped at the same time (default: %(default)s)",
    )
    parser.add_argument(
        "--log.level", dest="log_level", default="info",
        choices=["debug", "info", "warn", "error"], help="log level (default: %(default)s)",
    )
    add_collector_arguments(parser)
    return parser


def parse_listen_address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"--web.listen-address {text!r}: expected HOST:PORT")
    host = host.strip("[]") or "127.0.0.1"
    return host, int(port)


LANDING_PAGE = """<!DOCTYPE html>
<html><head><title>cephscope exporter</title></head>
<body><h1>cephscope exporter</h1>
<p>Version {version}. Admin sockets in <code>{asok_dir}</code>.</p>
<p><a href="{path}">Metrics</a></p>
<p>Collectors: {collectors}</p>
</body></html>
"""


class ExporterServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        scraper: Scraper,
        telemetry_path: str,
        web_config: WebConfig,
    ) -> None:
        self.scraper = scraper
        self.telemetry_path = telemetry_path
        self.web_config = web_config
        self.ssl_context = web_config.ssl_context()
        super().__init__(address, _Handler)

    def finish_request(self, request: Any, client_address: Any) -> None:
        # TLS handshake here, in the request's thread: a client that never completes its
        # handshake must not block the accept loop.
        if self.ssl_context is None:
            super().finish_request(request, client_address)
            return
        request.settimeout(30)
        tls = self.ssl_context.wrap_socket(request, server_side=True)
        try:
            super().finish_request(tls, client_address)
        finally:
            tls.close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("request from %s failed", client_address, exc_info=True)

    def landing_page(self) -> bytes:
        names = ", ".join(html.escape(c.name) for c in self.scraper.collectors) or "none"
        return LANDING_PAGE.format(
            version=html.escape(__version__),
            asok_dir=html.escape(self.scraper.settings.asok_dir),
            path=html.escape(self.telemetry_path),
            collectors=names,
        ).encode()


class _Handler(BaseHTTPRequestHandler):
    server: ExporterServer
    protocol_version = "HTTP/1.1"
    server_version = f"cephscope-exporter/{__version__}"

    def log_message(self, format: str, *args: object) -> None:
        log.debug("%s %s", self.address_string(), format % args)

    def _reply(self, status: HTTPStatus, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in self.server.web_config.headers.items():
            self.send_header(key, value)
        if status == HTTPStatus.UNAUTHORIZED:
            self.send_header("WWW-Authenticate", 'Basic realm="cephscope-exporter"')
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        if not self.server.web_config.check_authorization(self.headers.get("Authorization")):
            self._reply(HTTPStatus.UNAUTHORIZED, b"Unauthorized\n", "text/plain")
            return
        path = self.path.split("?", 1)[0]
        if path == self.server.telemetry_path:
            scraper = self.server.scraper
            deadline = scraper.deadline_from(self.headers.get(TIMEOUT_HEADER))
            try:
                body = render(scraper.scrape(deadline))
            except Exception:
                log.exception("scrape failed")
                self._reply(HTTPStatus.INTERNAL_SERVER_ERROR, b"scrape failed\n", "text/plain")
                return
            self._reply(HTTPStatus.OK, body, CONTENT_TYPE)
        elif path == "/":
            self._reply(HTTPStatus.OK, self.server.landing_page(), "text/html; charset=utf-8")
        else:
            self._reply(HTTPStatus.NOT_FOUND, b"Not Found\n", "text/plain")


def settings_from_args(args: argparse.Namespace) -> ScrapeSettings:
    types = None
    if args.daemon_types:
        types = frozenset(t.strip() for t in args.daemon_types.split(",") if t.strip())
    return ScrapeSettings(
        asok_dir=args.asok_dir,
        daemon_types=types,
        call_timeout=args.asok_timeout,
        max_response_bytes=args.max_response_bytes,
        default_timeout=args.default_timeout,
        timeout_offset=args.timeout_offset,
        max_parallel=args.max_parallel,
    )


def make_server(args: argparse.Namespace) -> ExporterServer:
    """Build scraper and HTTP server from parsed args (raises ValueError on bad input)."""
    if not args.telemetry_path.startswith("/") or args.telemetry_path == "/":
        raise ValueError(
            f"--web.telemetry-path {args.telemetry_path!r}: must start with / and not be /"
        )
    if args.asok_timeout <= 0 or args.default_timeout <= 0 or args.max_parallel < 1:
        raise ValueError("--ceph.asok-timeout, --scrape.default-timeout must be > 0 and "
                         "--scrape.max-parallel >= 1")
    address = parse_listen_address(args.listen_address)
    web_config = load_web_config(args.web_config_file)
    scraper = Scraper(enabled_collectors(args), settings_from_args(args))
    try:
        return ExporterServer(address, scraper, args.telemetry_path, web_config)
    except OSError as err:
        scraper.close()
        raise ValueError(f"cannot listen on {args.listen_address}: {err.strerror}") from None


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    level = {"warn": logging.WARNING}.get(args.log_level, getattr(logging, args.log_level.upper()))
    logging.basicConfig(
        stream=sys.stderr, level=level,
        format="ts=%(asctime)s level=%(levelname)s caller=%(module)s msg=%(message)s",
    )
    try:
        server = make_server(args)
    except (ValueError, WebConfigError) as err:
        print(f"cephscope-exporter: {err}", file=sys.stderr)
        return 2
    tune_gc_for_scrapes()
    host, port = server.server_address[:2]
    log.info(
        "listening on %s:%s%s (collectors: %s; asok dir %s)", host, port, args.telemetry_path,
        ", ".join(c.name for c in server.scraper.collectors), args.asok_dir,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        server.scraper.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
