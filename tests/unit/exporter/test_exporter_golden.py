"""Golden exposition of the whole exporter: all six collectors on, like node_exporter's e2e.

Fake admin sockets replay the ``load`` captures of osd.0 and osd.1; the threads collector
reads the /proc capture of those OSDs; topology reads the sysfs fixture host and a mon that
answers from the captured ``osd metadata``. The file is checked by promtool and by
prometheus_client's parser; ``CEPHSCOPE_UPDATE_GOLDEN=1`` rewrites it (review the diff).
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from cephscope.exporter.collectors import COLLECTORS, enabled_collectors
from cephscope.exporter.collectors.topology import TopologyCollector, TopologySettings
from cephscope.exporter.exposition import render
from cephscope.exporter.main import settings_from_args
from cephscope.exporter.scrape import Scraper
from cephscope.exporter.settings import HostSettings, PathSettings
from tests.unit.exporter_fakes import CEPH_COMPAT_LINT, FakeMon, addresses, edited_metadata, normalise
from tests.unit.fake_asok import (
    CEPH_VERSION,
    FIXTURES_ROOT,
    FakeCluster,
    check_exposition_golden,
    exporter_args,
)

GOLDEN = FIXTURES_ROOT / "golden" / f"{CEPH_VERSION}-exporter.prom"
PROC = Path(__file__).resolve().parents[2] / "fixtures" / "proc" / "ops_load_after"


def scrape_everything(run: Path, host1: Path) -> str:
    args = exporter_args(run, "--path.procfs", str(PROC))
    collectors = [c for c in enabled_collectors(args) if c.name != "topology"]
    # Topology reads the fixture host's sysfs/udev/dev and a mon answering from captures.
    paths = PathSettings(sysfs=str(host1 / "sys"), devfs=str(host1 / "dev"),
                         udev_data=str(host1 / "run" / "udev" / "data"), procfs=str(host1 / "proc"),
                         rootfs=str(host1 / "host"))
    mon = FakeMon(edited_metadata(host1))  # OSDs on the fixture host's NVMe, SAS and SATA disks
    collectors.append(TopologyCollector(TopologySettings(nodename="host1"),
                                        HostSettings(paths=paths), mon=mon, addresses=addresses))
    scraper = Scraper(collectors, settings_from_args(args))
    try:
        return render(scraper.scrape(time.monotonic() + 30)).decode()
    finally:
        scraper.close()


@pytest.fixture(scope="module")
def exposition(tmp_path_factory: pytest.TempPathFactory, sysfs_host1: Path) -> str:
    work = tmp_path_factory.mktemp("golden")
    host1 = work / "host1"  # a private copy: edited_metadata links a data file's st_dev
    shutil.copytree(sysfs_host1, host1, symlinks=True)
    run = work / "run"
    cluster = FakeCluster(run)
    for osd in (0, 1):
        cluster.add_osd(osd, scenario="load")
    try:
        return normalise(scrape_everything(run, host1))
    finally:
        cluster.stop()


def test_whole_exporter_matches_golden(exposition: str) -> None:
    for cls in COLLECTORS:
        assert f'cephscope_scrape_collector_success{{collector="{cls.name}"}} 1' in exposition, \
            cls.name
    assert 'cephscope_daemon_up{ceph_daemon="osd.1"} 1' in exposition
    check_exposition_golden(GOLDEN, exposition)


def test_golden_passes_promtool() -> None:
    promtool = shutil.which("promtool")
    assert promtool, "promtool (Debian package prometheus) is required: bash deploy/install.sh"
    proc = subprocess.run([promtool, "check", "metrics"], input=GOLDEN.read_bytes(),
                          capture_output=True, timeout=60)
    findings = [line for line in (proc.stdout + proc.stderr).decode().splitlines() if line.strip()]
    unexpected = [line for line in findings if not CEPH_COMPAT_LINT.match(line)]
    assert not unexpected, unexpected


def test_golden_parses_with_prometheus_client() -> None:
    text = GOLDEN.read_text()
    families = list(text_string_to_metric_families(text))
    sample_lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert sum(len(f.samples) for f in families) == len(sample_lines)
    types = {f.name: f.type for f in families}
    assert types["cephscope_osd_op_latency_seconds"] == "histogram"
    assert types["cephscope_osd_device_info"] == "gauge"
    # every collector contributed families
    prefixes = ("ceph_osd_", "cephscope_osd_op_latency", "cephscope_osd_op_queue_",
                "cephscope_osd_ops_", "cephscope_osd_thread", "cephscope_osd_device_info")
    for prefix in prefixes:
        assert any(name.startswith(prefix) for name in types), prefix
