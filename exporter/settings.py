"""Typed settings of the exporter and the flags made from them, node_exporter's way.

A settings class is a frozen dataclass whose fields are made with :func:`option`: the
default and the help are written there once, and :func:`add_flags` turns every field into
``--<prefix>.<field>`` (underscores become dashes unless the option names its flag), while
:func:`from_args` reads the parsed values back into the dataclass. Global flags
(``--path.*``, ``--ceph.*`` for the mon connection) are :class:`PathSettings` and
:class:`CephSettings`, added once by ``exporter/main.py``; each collector's own flags are
its ``settings_type`` under ``--collector.<name>.``.
"""

from __future__ import annotations

import argparse
import dataclasses
import typing
from dataclasses import dataclass
from typing import Any, TypeVar

from cephscope.exporter.asok import (
    DEFAULT_ASOK_DIR,
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_TIMEOUT_SECONDS,
)

SettingsT = TypeVar("SettingsT")


def option(default: Any, help: str, *, metavar: str | None = None, flag: str | None = None,
           hidden_aliases: tuple[str, ...] = (), choices: tuple[str, ...] | None = None) -> Any:
    """A settings field: its default, its ``--help`` line, optionally its flag's own name
    (after the prefix), old flag names still accepted but not listed, and the values it
    accepts. A bool field is a switch (``--x.y`` / ``--no-x.y``)."""
    return dataclasses.field(default=default, metadata={
        "help": help, "metavar": metavar, "flag": flag, "hidden_aliases": hidden_aliases,
        "choices": choices})


def flag_name(prefix: str, field: dataclasses.Field[Any]) -> str:
    return f"--{prefix}.{field.metadata.get('flag') or field.name.replace('_', '-')}"


def dest_of(prefix: str, field: dataclasses.Field[Any]) -> str:
    return f"{prefix.replace('.', '_').replace('-', '_')}_{field.name}"


def add_flags(parser: argparse.ArgumentParser | argparse._ArgumentGroup, prefix: str,
              settings_type: type[Any]) -> None:
    """One flag per field of ``settings_type``, plus its hidden aliases."""
    hints = typing.get_type_hints(settings_type)
    for field in dataclasses.fields(settings_type):
        kind = hints[field.name]
        if kind not in (str, int, float, bool):
            raise TypeError(f"{settings_type.__name__}.{field.name}: flags are str, int, float "
                            "or bool")
        dest = dest_of(prefix, field)
        if kind is bool:
            # a switch, node_exporter's way: --<prefix>.<name> / --no-<prefix>.<name>
            state = "on" if field.default else "off"
            parser.add_argument(flag_name(prefix, field), dest=dest, default=field.default,
                                action=argparse.BooleanOptionalAction,
                                help=f"{field.metadata['help']} (default: {state})")
            continue
        choices = field.metadata.get("choices")
        # an empty default means "not set" (no file, every type): nothing to show
        shown = " (default: %(default)s)" if field.default != "" else ""
        parser.add_argument(
            flag_name(prefix, field), dest=dest, type=kind, default=field.default,
            choices=choices,
            metavar=None if choices else field.metadata.get("metavar") or field.name.upper(),
            help=f"{field.metadata['help']}{shown}")
        for alias in field.metadata.get("hidden_aliases", ()):
            parser.add_argument(alias, dest=dest, type=kind, default=field.default,
                                help=argparse.SUPPRESS)


def from_args(args: argparse.Namespace, prefix: str, settings_type: type[SettingsT]) -> SettingsT:
    """The settings as parsed; fields whose flag was never added keep their defaults."""
    values = {}
    for field in dataclasses.fields(settings_type):  # type: ignore[arg-type]
        dest = dest_of(prefix, field)
        if hasattr(args, dest):
            values[field.name] = getattr(args, dest)
    return settings_type(**values)


@dataclass(frozen=True)
class WebSettings:
    """HTTP serving, exporter-toolkit's flag names (``--web.*``)."""

    listen_address: str = option(
        "127.0.0.1:9967", "address to listen on; :PORT = every interface, [::]:PORT, HOST:PORT",
        metavar="HOST:PORT")
    max_requests: int = option(40, "requests answered at once; more wait", metavar="N")
    max_queued_requests: int = option(
        200, "requests waiting beyond --web.max-requests; more get 503", metavar="N")
    read_header_timeout: float = option(
        10.0, "close a connection whose request header is not complete by then",
        metavar="SECONDS")
    telemetry_path: str = option("/metrics", "path under which to expose metrics",
                                 metavar="PATH")
    config_file: str = option("", "exporter-toolkit web config (TLS, basic auth with bcrypt "
                              "hashes)", metavar="FILE", flag="config.file")
    timeout_offset: float = option(
        0.5, "subtract from Prometheus' scrape timeout to leave room for the reply",
        metavar="SECONDS")


@dataclass(frozen=True)
class AsokSettings:
    """The admin sockets (``--ceph.*`` beside the mon connection's)."""

    asok_dir: str = option(DEFAULT_ASOK_DIR, "directory of admin sockets, searched one level "
                           "down too, e.g. cephadm's <fsid>/", metavar="DIR")
    asok_timeout: float = option(DEFAULT_TIMEOUT_SECONDS, "timeout of one admin-socket command",
                                 metavar="SECONDS")
    max_response_bytes: int = option(DEFAULT_MAX_RESPONSE_BYTES, "refuse admin-socket responses longer "
                                     "than this", metavar="BYTES")
    daemon_types: str = option("", "comma-separated daemon types to scrape (default: every "
                               "type a collector handles)", metavar="TYPES")


@dataclass(frozen=True)
class ScrapeFlags:
    """The whole scrape (``--scrape.*``)."""

    default_timeout: float = option(
        10.0, "scrape deadline when the request has no X-Prometheus-Scrape-Timeout-Seconds",
        metavar="SECONDS")
    max_parallel: int = option(16, "daemons scraped at the same time", metavar="N")


@dataclass(frozen=True)
class LogSettings:
    """Logging (``--log.*``, as Prometheus' exporters)."""

    level: str = option("info", "log level", choices=("debug", "info", "warn", "error"))
    format: str = option("logfmt", "log line format", choices=("logfmt", "json"))


@dataclass(frozen=True)
class NoSettings:
    """Settings of a collector that has no flags of its own."""


@dataclass(frozen=True)
class PathSettings:
    """Where the host's pseudo filesystems are (a containerised exporter mounts them)."""

    procfs: str = option("/proc", "procfs mount point", metavar="DIR",
                         hidden_aliases=("--collector.threads.proc-root",))
    sysfs: str = option("/sys", "sysfs mount point", metavar="DIR")
    devfs: str = option("/dev", "devtmpfs mount point", metavar="DIR")
    udev_data: str = option("/run/udev/data", "udev database directory (node_exporter's "
                            "--path.udev.data)", metavar="DIR", flag="udev.data")
    rootfs: str = option("/", "host root for OSD data dirs and loop backing files",
                         metavar="DIR")


@dataclass(frozen=True)
class CephSettings:
    """The mon connection (topology's `osd metadata`); admin sockets need none of it."""

    conf: str = option("/etc/ceph/ceph.conf", "ceph.conf used to reach the mon", metavar="FILE")
    name: str = option("client.admin", "cephx user for the mon connection", metavar="NAME")
    keyring: str = option("", "keyring of --ceph.name (empty: as ceph.conf says)",
                          metavar="FILE")
    mon_timeout: float = option(3.0, "seconds to wait for the mon before using admin sockets",
                                metavar="SECONDS")


@dataclass(frozen=True)
class HostSettings:
    """The global settings every collector may read."""

    paths: PathSettings = dataclasses.field(default_factory=PathSettings)
    ceph: CephSettings = dataclasses.field(default_factory=CephSettings)


def add_host_flags(parser: argparse.ArgumentParser) -> None:
    add_flags(parser.add_argument_group("paths"), "path", PathSettings)
    add_flags(parser.add_argument_group("ceph mon connection"), "ceph", CephSettings)


def host_settings(args: argparse.Namespace) -> HostSettings:
    return HostSettings(paths=from_args(args, "path", PathSettings),
                        ceph=from_args(args, "ceph", CephSettings))
