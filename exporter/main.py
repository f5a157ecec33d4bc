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
from dataclasses import dataclass

from cephscope import __version__
from cephscope.exporter.collectors import add_collector_arguments, enabled_collectors
from cephscope.exporter.fdlimit import raise_open_files_limit
from cephscope.exporter.http import (
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
from cephscope.exporter.settings import (
    AsokSettings,
    LogSettings,
    ScrapeFlags,
    WebSettings,
    add_flags,
    add_host_flags,
    from_args,
)
from cephscope.exporter.webconfig import WebConfigError, load_web_config

log = logging.getLogger("cephscope.exporter")


@dataclass(frozen=True)
class ExporterFlags:
    """Every global flag of the exporter, typed (collectors read theirs through
    `enabled_collectors`)."""

    web: WebSettings
    asok: AsokSettings
    scrape: ScrapeFlags
    log: LogSettings


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cephscope-exporter",
        description="Prometheus exporter for Ceph daemons on this host, via their admin sockets.",
    )
    parser.add_argument("--version", action="version", version=f"cephscope-exporter {__version__}")
    add_flags(parser.add_argument_group("web"), "web", WebSettings)
    add_flags(parser.add_argument_group("ceph"), "ceph", AsokSettings)
    add_flags(parser.add_argument_group("scrape"), "scrape", ScrapeFlags)
    add_flags(parser.add_argument_group("log"), "log", LogSettings)
    add_host_flags(parser)
    add_collector_arguments(parser)
    return parser


def exporter_flags(args: argparse.Namespace) -> ExporterFlags:
    return ExporterFlags(web=from_args(args, "web", WebSettings),
                         asok=from_args(args, "ceph", AsokSettings),
                         scrape=from_args(args, "scrape", ScrapeFlags),
                         log=from_args(args, "log", LogSettings))


def settings_from_args(args: argparse.Namespace) -> ScrapeSettings:
    flags = exporter_flags(args)
    types = frozenset(t.strip() for t in flags.asok.daemon_types.split(",") if t.strip())
    return ScrapeSettings(
        asok_dir=flags.asok.asok_dir,
        daemon_types=types or None,
        call_timeout=flags.asok.asok_timeout,
        max_response_bytes=flags.asok.max_response_bytes,
        default_timeout=flags.scrape.default_timeout,
        timeout_offset=flags.web.timeout_offset,
        max_parallel=flags.scrape.max_parallel,
    )


def make_server(args: argparse.Namespace) -> ExporterServer:
    """Build scraper and HTTP server from parsed args (raises ValueError on bad input)."""
    flags = exporter_flags(args)
    web = flags.web
    if not web.telemetry_path.startswith("/") or web.telemetry_path == "/":
        raise ValueError(
            f"--web.telemetry-path {web.telemetry_path!r}: must start with / and not be /"
        )
    if flags.asok.asok_timeout <= 0 or flags.scrape.default_timeout <= 0 \
            or flags.scrape.max_parallel < 1:
        raise ValueError("--ceph.asok-timeout, --scrape.default-timeout must be > 0 and "
                         "--scrape.max-parallel >= 1")
    if web.max_requests < 1 or web.max_queued_requests < 0 or web.read_header_timeout <= 0:
        raise ValueError("--web.max-requests must be >= 1, --web.max-queued-requests >= 0 and"
                         " --web.read-header-timeout > 0")
    address = parse_listen_address(web.listen_address)
    web_config = load_web_config(web.config_file or None)
    scraper = Scraper(enabled_collectors(args), settings_from_args(args))
    try:
        return ExporterServer(address, scraper, web_config, HttpSettings(
            telemetry_path=web.telemetry_path,
            max_requests=web.max_requests,
            max_queued_requests=web.max_queued_requests,
            read_header_timeout=web.read_header_timeout,
        ))
    except OSError as err:
        scraper.close()
        raise ValueError(f"cannot listen on {web.listen_address}: {err.strerror}") from None


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    flags = exporter_flags(args)
    configure_logging(flags.log.level, flags.log.format)
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
        "address": f"[{host}]:{port}", "path": flags.web.telemetry_path,
        "asok_dir": flags.asok.asok_dir,
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
