"""``cephscope-exporter``: HTTP server exposing Ceph admin-socket metrics to Prometheus.

Default port 9967: not 9283 (mgr prometheus module), 9926 (ceph-exporter) or 9128
(digitalocean/ceph_exporter), so it runs next to all of them; it is free in Prometheus'
default port allocation list as of this writing. It listens on 127.0.0.1 unless told
otherwise.
"""

from __future__ import annotations

import argparse
import logging
import sys

from cephscope import __version__
from cephscope.exporter.asok import (
    DEFAULT_ASOK_DIR,
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_TIMEOUT_SECONDS,
)
from cephscope.exporter.collectors import add_collector_arguments, enabled_collectors
from cephscope.exporter.fdlimit import raise_open_files_limit
from cephscope.exporter.http import (
    TIMEOUT_HEADER,
    ExporterServer,
    HttpSettings,
    parse_listen_address,
)
from cephscope.exporter.logs import configure_logging
from cephscope.exporter.scrape import (
    Scraper,
    ScrapeSettings,
    limit_malloc_arenas,
    tune_gc_for_scrapes,
)
from cephscope.exporter.settings import add_host_flags
from cephscope.exporter.webconfig import WebConfigError, load_web_config

DEFAULT_LISTEN_ADDRESS = "127.0.0.1:9967"

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
        metavar="HOST:PORT",
        help="address to listen on; :PORT = every interface, [::]:PORT, HOST:PORT"
        " (default: %(default)s)",
    )
    web.add_argument(
        "--web.max-requests", dest="max_requests", type=int, default=40, metavar="N",
        help="requests answered at once; more wait (default: %(default)s)",
    )
    web.add_argument(
        "--web.max-queued-requests", dest="max_queued_requests", type=int, default=200,
        metavar="N",
        help="requests waiting beyond --web.max-requests; more get 503 (default: %(default)s)",
    )
    web.add_argument(
        "--web.read-header-timeout", dest="read_header_timeout", type=float, default=10.0,
        metavar="SECONDS",
        help="close a connection whose request header is not complete by then"
        " (default: %(default)s)",
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
    parser.add_argument(
        "--log.format", dest="log_format", default="logfmt", choices=["logfmt", "json"],
        help="log line format (default: %(default)s)",
    )
    add_host_flags(parser)
    add_collector_arguments(parser)
    return parser


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
    if args.max_requests < 1 or args.max_queued_requests < 0 or args.read_header_timeout <= 0:
        raise ValueError("--web.max-requests must be >= 1, --web.max-queued-requests >= 0 and"
                         " --web.read-header-timeout > 0")
    address = parse_listen_address(args.listen_address)
    web_config = load_web_config(args.web_config_file)
    scraper = Scraper(enabled_collectors(args), settings_from_args(args))
    try:
        return ExporterServer(address, scraper, web_config, HttpSettings(
            telemetry_path=args.telemetry_path,
            max_requests=args.max_requests,
            max_queued_requests=args.max_queued_requests,
            read_header_timeout=args.read_header_timeout,
        ))
    except OSError as err:
        scraper.close()
        raise ValueError(f"cannot listen on {args.listen_address}: {err.strerror}") from None


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure_logging(args.log_level, args.log_format)
    # Before the server sizes its connection limit from it (see fdlimit).
    open_files = raise_open_files_limit()
    try:
        server = make_server(args)
    except (ValueError, WebConfigError) as err:
        print(f"cephscope-exporter: {err}", file=sys.stderr)
        return 2
    tune_gc_for_scrapes()
    limit_malloc_arenas()
    host, port = server.server_address[:2]
    log.info("listening", extra={"fields": {
        "address": f"[{host}]:{port}", "path": args.telemetry_path, "asok_dir": args.asok_dir,
        "collectors": ",".join(c.name for c in server.scraper.collectors),
        "open_files_limit": open_files, "max_connections": server.max_connections,
    }})
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
