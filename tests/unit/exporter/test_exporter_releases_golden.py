"""Golden expositions of Reef 18.2.7 and Tentacle 20.2.4 OSDs: the daemon collectors (perf,
labeled, histogram, opqueue, ops) over fake admin sockets replaying the real ``load`` captures of
osd.0 and osd.1 (tests/fixtures/asok/<version>, made by deploy/capture_fixtures.py).
``CEPHSCOPE_UPDATE_GOLDEN=1`` rewrites them (review the diff)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from cephscope.exporter.collectors import enabled_collectors
from cephscope.exporter.exposition import render
from cephscope.exporter.main import settings_from_args
from cephscope.exporter.scrape import Scraper
from tests.unit.exporter_fakes import EVERY_SERIES_FLAGS, normalise
from tests.unit.fake_asok import (
    FIXTURES_ROOT,
    FakeDaemon,
    capture_dir,
    check_exposition_golden,
    exporter_args,
    load_capture,
)

DAEMON_COLLECTORS = ("perf", "labeled", "histogram", "opqueue", "ops")


@pytest.mark.parametrize("version", ["18.2.7", "20.2.4"])
def test_release_exposition_matches_golden(tmp_path: Path, version: str) -> None:
    run = tmp_path / "run"
    run.mkdir()
    daemons = [FakeDaemon(run / f"ceph-{osd}.asok", load_capture(capture_dir("load", osd, version)))
               for osd in ("osd.0", "osd.1")]
    try:
        # every series the collectors can give (the default's are a subset, see
        # test_exporter_golden): what each release's captures hold
        flags = ["--collector.disable-defaults", "--collector.opqueue.min-interval", "0",
                 *EVERY_SERIES_FLAGS]
        for name in DAEMON_COLLECTORS:
            flags.append(f"--collector.{name}")
        args = exporter_args(run, *flags)
        scraper = Scraper(enabled_collectors(args), settings_from_args(args))
        try:
            text = normalise(render(scraper.scrape(time.monotonic() + 30)).decode())
        finally:
            scraper.close()
    finally:
        for daemon in daemons:
            daemon.stop()
    for name in DAEMON_COLLECTORS:
        assert f'cephscope_scrape_collector_success{{collector="{name}"}} 1' in text
    assert 'cephscope_osd_op_queue_info{ceph_daemon="osd.0",scheduler="mclock",profile=' in text
    assert 'ceph_AsyncMessenger_Worker_msgr_connection_idle_timeouts{ceph_daemon="osd.0",id="0"}' in text
    assert list(text_string_to_metric_families(text))  # parses as Prometheus text
    check_exposition_golden(FIXTURES_ROOT / "golden" / f"{version}-daemons.prom", text)
