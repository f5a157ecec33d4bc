"""Exporter flags in node_exporter's shape: global --path.* / --ceph.* once, typed settings
per collector, hidden old names, an explicit registry, --collector.disable-defaults."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from cephscope.exporter.collectors import COLLECTORS, enabled_collectors, settings_prefix
from cephscope.exporter.collectors.opqueue import OpQueueCollector
from cephscope.exporter.collectors.perf import PerfCollector
from cephscope.exporter.collectors.threads import ThreadsCollector
from cephscope.exporter.collectors.topology import TopologyCollector
from cephscope.exporter.main import build_parser, exporter_flags
from cephscope.exporter.settings import (
    AsokSettings,
    CephSettings,
    LogSettings,
    PathSettings,
    ScrapeFlags,
    WebSettings,
    flag_name,
)

COLLECTORS_DIR = Path(__file__).resolve().parents[3] / "exporter" / "collectors"


def enabled(*flags: str) -> dict[str, object]:
    return {c.name: c for c in enabled_collectors(build_parser().parse_args(list(flags)))}


def test_registry_lists_every_collector_module_by_its_name() -> None:
    modules = sorted(p.stem for p in COLLECTORS_DIR.glob("*.py") if p.stem != "__init__")
    assert sorted(cls.name for cls in COLLECTORS) == modules
    for cls in COLLECTORS:
        assert cls.__module__ == f"cephscope.exporter.collectors.{cls.name}"


def test_every_flag_is_defined_once_and_old_names_are_hidden() -> None:
    parser = build_parser()
    flags = [opt for action in parser._actions for opt in action.option_strings]
    assert len(flags) == len(set(flags))
    help_text = parser.format_help()
    for flag in ("--path.procfs", "--path.sysfs", "--path.udev.data", "--ceph.conf",
                 "--ceph.mon-timeout", "--collector.perf.priority",
                 "--collector.opqueue.min-interval", "--collector.topology.refresh-interval",
                 "--collector.disable-defaults"):
        assert flag in help_text
    assert "--ceph.perf-priority" not in help_text
    assert "proc-root" not in help_text
    # defaults shown in --help are the dataclass defaults (written once)
    assert re.search(r"--collector\.perf\.priority N\s+.*?\(default: 5\)", help_text, re.S)


def test_defaults_come_from_the_settings_dataclasses() -> None:
    collectors = enabled()
    perf = collectors["perf"]
    assert isinstance(perf, PerfCollector) and perf.priority == 5
    opqueue = collectors["opqueue"]
    assert isinstance(opqueue, OpQueueCollector) and opqueue.min_interval == 5.0
    topology = collectors["topology"]
    assert isinstance(topology, TopologyCollector)
    assert topology.host.paths == PathSettings() and topology.host.ceph == CephSettings()
    assert topology.refresh_interval_seconds == 60.0


def test_new_and_old_flag_names() -> None:
    perf = enabled("--collector.perf.priority", "0")["perf"]
    assert isinstance(perf, PerfCollector) and perf.priority == 0
    old = enabled("--ceph.perf-priority", "10")["perf"]
    assert isinstance(old, PerfCollector) and old.priority == 10

    threads = enabled("--path.procfs", "/host/proc")["threads"]
    assert isinstance(threads, ThreadsCollector) and threads.proc_root == "/host/proc"
    aliased = enabled("--collector.threads.proc-root", "/old/proc")["threads"]
    assert isinstance(aliased, ThreadsCollector) and aliased.proc_root == "/old/proc"

    topology = enabled("--path.procfs", "/host/proc", "--path.udev.data", "/host/run/udev/data",
                       "--ceph.conf", "/x/ceph.conf", "--ceph.mon-timeout", "1.5")["topology"]
    assert isinstance(topology, TopologyCollector)
    # one procfs flag serves every collector that reads /proc
    assert topology.proc_root == "/host/proc" and topology.resolver.udev_data == "/host/run/udev/data"
    assert (topology.mon.conffile, topology.mon.timeout) == ("/x/ceph.conf", 1.5)


def test_disable_defaults_keeps_only_the_named_collectors() -> None:
    assert set(enabled("--collector.disable-defaults")) == set()
    assert set(enabled("--collector.disable-defaults", "--collector.perf",
                       "--collector.ops")) == {"perf", "ops"}
    everything = {cls.name for cls in COLLECTORS}
    assert set(enabled("--no-collector.topology")) == everything - {"topology"}


def test_bad_flag_values_are_refused_by_the_parser(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--collector.perf.priority", "high"])
    assert "--collector.perf.priority" in capsys.readouterr().err


def test_settings_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        PathSettings().procfs = "/elsewhere"  # type: ignore[misc]


def test_every_value_flag_is_a_settings_option() -> None:
    """Every flag that takes a value is a field made with option() (the collectors'
    on/off switches and --collector.disable-defaults are the registry's)."""
    parser = build_parser()
    fields = [(flag_name(prefix, f), f.type) for prefix, settings in (
        ("web", WebSettings), ("ceph", AsokSettings), ("scrape", ScrapeFlags),
        ("log", LogSettings), ("path", PathSettings), ("ceph", CephSettings),
        *((settings_prefix(c), c.settings_type) for c in COLLECTORS))
        for f in dataclasses.fields(settings)]
    takes_value = {opt for action in parser._actions if action.nargs != 0
                   and action.help != "==SUPPRESS=="
                   for opt in action.option_strings}
    assert takes_value == {flag for flag, kind in fields if kind != "bool"}
    # bool options are switches, node_exporter's way: --x.y / --no-x.y
    switches = {opt for action in parser._actions if action.nargs == 0
                for opt in action.option_strings}
    for flag in (flag for flag, kind in fields if kind == "bool"):
        assert {flag, "--no-" + flag[2:]} <= switches, flag
    parsed = exporter_flags(parser.parse_args(["--web.config.file", "/x.yml", "--log.level",
                                               "warn", "--ceph.daemon-types", "osd"]))
    assert (parsed.web.config_file, parsed.log.level, parsed.asok.daemon_types) == (
        "/x.yml", "warn", "osd")
    with pytest.raises(SystemExit):
        parser.parse_args(["--log.level", "loud"])


def test_a_bool_option_is_a_switch_defaulting_to_its_field() -> None:
    histogram = enabled()["histogram"]
    assert histogram.settings.size is False  # type: ignore[attr-defined]
    assert enabled("--collector.histogram.size")["histogram"].settings.size is True  # type: ignore[attr-defined]
    assert enabled("--collector.histogram.size", "--no-collector.histogram.size")[
        "histogram"].settings.size is False  # type: ignore[attr-defined]
    assert re.search(r"--collector\.histogram\.size.*?\(default: off\)", build_parser().format_help(),
                     re.S)


def test_udev_data_is_the_database_directory_as_node_exporters() -> None:
    assert PathSettings().udev_data == "/run/udev/data"
    topology = enabled("--path.udev.data", "/host/run/udev/data")["topology"]
    assert isinstance(topology, TopologyCollector)
    assert topology.resolver.udev_data == "/host/run/udev/data"
