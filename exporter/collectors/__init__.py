"""The one registry of collectors: which exist, their flags, their construction.

:data:`COLLECTORS` lists every collector class, imported explicitly (a missing module is an
ImportError at start-up, not a collector silently absent). Each module defines ``COLLECTOR``,
a subclass of :class:`cephscope.exporter.collector.DaemonCollector` or ``HostCollector`` (see
the docstring of ``cephscope.exporter.collector`` for how to write one). The registry makes
``--collector.<name>`` / ``--no-collector.<name>``, ``--collector.disable-defaults`` and each
collector's ``--collector.<name>.<option>`` flags, like node_exporter.
"""

from __future__ import annotations

import argparse

from cephscope.exporter.collector import Collector
from cephscope.exporter.collectors import histogram, labeled, opqueue, ops, perf, threads, topology
from cephscope.exporter.settings import add_flags, from_args, host_settings

# Order here is the order of the series in the exposition.
COLLECTORS: tuple[type[Collector], ...] = (
    perf.COLLECTOR,
    labeled.COLLECTOR,
    histogram.COLLECTOR,
    opqueue.COLLECTOR,
    ops.COLLECTOR,
    threads.COLLECTOR,
    topology.COLLECTOR,
)


def collector_classes() -> list[type[Collector]]:
    """Every collector class, in exposition order."""
    return list(COLLECTORS)


def settings_prefix(cls: type[Collector]) -> str:
    return f"collector.{cls.name}"


def add_collector_arguments(parser: argparse.ArgumentParser) -> None:
    """``--[no-]collector.<name>`` for each collector, then each collector's own flags."""
    group = parser.add_argument_group("collectors")
    group.add_argument(
        "--collector.disable-defaults", dest="collector_disable_defaults", action="store_true",
        help="start from no collector; only those named with --collector.<name> run",
    )
    for cls in COLLECTORS:
        state = "enabled" if cls.default_enabled else "disabled"
        group.add_argument(
            f"--collector.{cls.name}",
            dest=f"collector_{cls.name}",
            action=argparse.BooleanOptionalAction,
            default=None,  # None = not given: the default (or --collector.disable-defaults) decides
            help=f"{cls.help} (default: {state})",
        )
    for cls in COLLECTORS:
        add_flags(parser.add_argument_group(f"{cls.name} collector"), settings_prefix(cls),
                  cls.settings_type)


def is_enabled(cls: type[Collector], args: argparse.Namespace) -> bool:
    chosen = getattr(args, f"collector_{cls.name}", None)
    if chosen is not None:
        return bool(chosen)
    return cls.default_enabled and not getattr(args, "collector_disable_defaults", False)


def enabled_collectors(args: argparse.Namespace) -> list[Collector]:
    """Instances of the collectors switched on in ``args``, with their settings."""
    host = host_settings(args)
    return [cls(from_args(args, settings_prefix(cls), cls.settings_type), host)
            for cls in COLLECTORS if is_enabled(cls, args)]
