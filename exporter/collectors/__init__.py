"""The one registry of collectors: module names, their flags, their construction.

Each module in :data:`COLLECTOR_MODULES` defines ``COLLECTOR``, a subclass of
:class:`cephscope.exporter.collector.DaemonCollector` or ``HostCollector`` (see the
docstring of ``cephscope.exporter.collector`` for how to write one). The registry makes
``--collector.<name>`` / ``--no-collector.<name>`` for each, like node_exporter.
"""

from __future__ import annotations

import argparse
import importlib

from cephscope.exporter.collector import Collector

# Order here is the order of the series in the exposition.
COLLECTOR_MODULES: tuple[str, ...] = (
    "perf",
    "histogram",
    "opqueue",
    "ops",
    "threads",
    "topology",
)


def collector_classes() -> list[type[Collector]]:
    """The collector classes of every module in :data:`COLLECTOR_MODULES`."""
    classes: list[type[Collector]] = []
    for module_name in COLLECTOR_MODULES:
        qualified = f"{__name__}.{module_name}"
        try:
            module = importlib.import_module(qualified)
        except ModuleNotFoundError as err:
            # A collector module not written yet; any other missing import is a real error.
            if err.name == qualified:
                continue
            raise
        cls = module.COLLECTOR
        if cls.name != module_name:
            raise RuntimeError(f"{qualified}: COLLECTOR.name is {cls.name!r}, not {module_name!r}")
        classes.append(cls)
    return classes


def add_collector_arguments(parser: argparse.ArgumentParser) -> None:
    """``--[no-]collector.<name>`` for each collector, then each collector's own flags."""
    group = parser.add_argument_group("collectors")
    for cls in collector_classes():
        state = "enabled" if cls.default_enabled else "disabled"
        group.add_argument(
            f"--collector.{cls.name}",
            dest=f"collector_{cls.name}",
            action=argparse.BooleanOptionalAction,
            default=cls.default_enabled,
            help=f"{cls.help} (default: {state})",
        )
    for cls in collector_classes():
        cls.add_arguments(parser)


def enabled_collectors(args: argparse.Namespace) -> list[Collector]:
    """Instances of the collectors switched on in ``args``."""
    return [
        cls(args)
        for cls in collector_classes()
        if getattr(args, f"collector_{cls.name}", cls.default_enabled)
    ]
