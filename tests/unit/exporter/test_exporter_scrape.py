"""Scrape orchestration: faults cost only their daemon, deadlines hold, framework metrics."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from cephscope.exporter.collector import (
    CachedHostCollector,
    DaemonCollector,
    DaemonSession,
    HostContext,
)
from cephscope.exporter.collectors import collector_classes, enabled_collectors
from cephscope.exporter.exposition import MetricSink, render
from cephscope.exporter.main import build_parser, settings_from_args
from cephscope.exporter.scrape import Scraper, ScrapeSettings
from tests.unit.fake_asok import (
    FakeCluster,
    exporter_args,
    only_collectors,
    parse_samples,
    scrape_once,
)

PERF_AND_HISTOGRAM = only_collectors("perf", "histogram")


def osd_series(samples: dict[str, float], osd: str) -> dict[str, float]:
    return {k: v for k, v in samples.items() if f'ceph_daemon="{osd}"' in k and
            not k.startswith("cephscope_daemon_up")}


def test_faulty_daemons_cost_only_their_own_series(tmp_path: Path) -> None:
    run = tmp_path / "run"
    cluster = FakeCluster(run)
    try:
        cluster.add_osd(0)
        cluster.add_osd(1)
        clean = parse_samples(scrape_once(run, *PERF_AND_HISTOGRAM))
        faults = {
            2: "hang",
            3: "close_mid_frame",
            4: "huge_length",
            5: "garbage",
            6: "schema_mismatch",
        }
        for osd_id, fault in faults.items():
            cluster.add_osd(osd_id, source_osd="osd.0", fault=fault)
        cluster.add_dead_socket("ceph-osd.7.asok")
        started = time.monotonic()
        text = scrape_once(
            run, *PERF_AND_HISTOGRAM, "--ceph.asok-timeout", "1", timeout=3.0
        )
        elapsed = time.monotonic() - started
    finally:
        cluster.stop()
    assert elapsed < 3.0, f"scrape took {elapsed:.2f}s, deadline 3s"
    samples = parse_samples(text)
    up = {k: v for k, v in samples.items() if k.startswith("cephscope_daemon_up")}
    assert up == {
        'cephscope_daemon_up{ceph_daemon="osd.0"}': 1,
        'cephscope_daemon_up{ceph_daemon="osd.1"}': 1,
        'cephscope_daemon_up{ceph_daemon="osd.2"}': 0,
        'cephscope_daemon_up{ceph_daemon="osd.3"}': 0,
        'cephscope_daemon_up{ceph_daemon="osd.4"}': 0,
        'cephscope_daemon_up{ceph_daemon="osd.5"}': 0,
        'cephscope_daemon_up{ceph_daemon="osd.6"}': 1,
        'cephscope_daemon_up{ceph_daemon="osd.7"}': 0,
    }
    # Healthy daemons are untouched by their broken neighbours.
    for osd in ("osd.0", "osd.1"):
        assert osd_series(samples, osd) == osd_series(clean, osd)
        assert len(osd_series(samples, osd)) > 100
    for osd in ("osd.2", "osd.3", "osd.4", "osd.5", "osd.7"):
        assert osd_series(samples, osd) == {}
    # The restarted-between-schema-and-dump daemon still exports what both agree on.
    def osd_names(osd: str) -> set[str]:
        return {k.split("{")[0] for k in osd_series(samples, osd) if k.startswith("ceph_osd_")}

    assert 10 < len(osd_names("osd.6")) < len(osd_names("osd.0"))
    assert osd_names("osd.6") < osd_names("osd.0")
    assert samples['cephscope_scrape_collector_success{collector="perf"}'] == 1
    assert samples['cephscope_scrape_collector_success{collector="histogram"}'] == 1
    assert 'cephscope_scrape_collector_duration_seconds{collector="perf"}' in samples


def test_scrape_returns_by_the_deadline_even_if_the_socket_timeout_is_longer(
    tmp_path: Path,
) -> None:
    run = tmp_path / "run"
    cluster = FakeCluster(run)
    args = exporter_args(run, *PERF_AND_HISTOGRAM, "--ceph.asok-timeout", "10")
    scraper = Scraper(enabled_collectors(args), settings_from_args(args))
    try:
        cluster.add_osd(0)
        cluster.add_osd(1, fault="slow:3")
        started = time.monotonic()
        text = render(scraper.scrape(started + 1.0)).decode()
        elapsed = time.monotonic() - started
    finally:
        scraper.close()
        cluster.stop()
    assert elapsed < 1.0 + 0.3  # the deadline, plus scheduling slack on a loaded machine
    samples = parse_samples(text)
    assert samples['cephscope_daemon_up{ceph_daemon="osd.0"}'] == 1
    assert samples['cephscope_daemon_up{ceph_daemon="osd.1"}'] == 0
    assert 'ceph_osd_op_w{ceph_daemon="osd.0"}' in samples


def test_deadline_from_prometheus_header() -> None:
    scraper = Scraper([], ScrapeSettings(asok_dir="/nonexistent", default_timeout=7,
                                         timeout_offset=0.5))
    try:
        # header -> seconds from the call (the header minus the offset; else the default's)
        for header, seconds in (("2", 1.5), (None, 6.5), ("garbage", 6.5), ("0.1", 0.05)):
            before = time.monotonic()
            deadline = scraper.deadline_from(header)
            after = time.monotonic()
            assert before + seconds - 1e-6 <= deadline <= after + seconds + 1e-6, header
    finally:
        scraper.close()


def test_empty_or_missing_socket_dir_still_reports_collectors(tmp_path: Path) -> None:
    text = scrape_once(tmp_path / "missing", *PERF_AND_HISTOGRAM)
    samples = parse_samples(text)
    assert samples['cephscope_scrape_collector_success{collector="perf"}'] == 1
    assert not any(k.startswith("cephscope_daemon_up") for k in samples)
    assert any(k.startswith("cephscope_exporter_build_info") for k in samples)
    assert samples["cephscope_daemons_found"] == 0


def test_no_daemon_socket_is_logged_once_and_counted(tmp_path: Path,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    asok_dir = tmp_path / "run"
    asok_dir.mkdir()
    (asok_dir / "client.admin.4242.asok").touch()  # a client's socket is not a daemon
    args = exporter_args(asok_dir, *PERF_AND_HISTOGRAM)
    scraper = Scraper(enabled_collectors(args), settings_from_args(args))
    try:
        with caplog.at_level("INFO", logger="cephscope"):
            for _ in range(3):
                samples = parse_samples(render(scraper.scrape(time.monotonic() + 5)).decode())
                assert samples["cephscope_daemons_found"] == 0
        warnings = [r for r in caplog.records if "no Ceph daemon admin socket" in r.getMessage()]
        assert len(warnings) == 1 and str(asok_dir) in warnings[0].getMessage()
    finally:
        scraper.close()


class ExplodingCollector(DaemonCollector):
    name = "exploding"
    help = "raises on osd.1"

    def collect_daemon(self, session: DaemonSession, sink: MetricSink) -> None:
        session.command("version")
        if session.daemon.name == "osd.1":
            raise KeyError("unexpected shape")
        sink.gauge("cephscope_test_value", "test").add(1, {"ceph_daemon": session.daemon.name})


class CountingCachedCollector(CachedHostCollector):
    name = "counting"
    help = "counts refreshes"
    refresh_interval_seconds = 3600.0

    def __init__(self) -> None:
        super().__init__()
        self.refreshes = 0
        self.fail_next = False

    def refresh(self, ctx: HostContext, sink: MetricSink) -> None:
        self.refreshes += 1
        if self.fail_next:
            raise RuntimeError("refresh failed")
        sink.gauge("cephscope_test_daemons", "daemons seen").add(len(ctx.daemons))


def test_collector_exception_fails_only_that_collector_on_that_daemon(tmp_path: Path) -> None:
    run = tmp_path / "run"
    cluster = FakeCluster(run)
    args = exporter_args(run, *PERF_AND_HISTOGRAM)
    exploding = ExplodingCollector()
    cached = CountingCachedCollector()
    scraper = Scraper([*enabled_collectors(args), exploding, cached], settings_from_args(args))
    try:
        cluster.add_osd(0)
        cluster.add_osd(1)
        samples = parse_samples(render(scraper.scrape(time.monotonic() + 5)).decode())
        assert samples['cephscope_scrape_collector_success{collector="exploding"}'] == 0
        assert samples['cephscope_scrape_collector_success{collector="perf"}'] == 1
        assert samples['cephscope_test_value{ceph_daemon="osd.0"}'] == 1
        assert 'cephscope_test_value{ceph_daemon="osd.1"}' not in samples
        assert samples['cephscope_daemon_up{ceph_daemon="osd.1"}'] == 1
        assert 'ceph_osd_op_w{ceph_daemon="osd.1"}' in samples
        # Cached host collector: refreshed once, served from cache afterwards.
        assert samples["cephscope_test_daemons"] == 2
        assert samples['cephscope_scrape_collector_success{collector="counting"}'] == 1
        render(scraper.scrape(time.monotonic() + 5))
        assert cached.refreshes == 1
        # A failed refresh keeps serving the last good series but reports failure.
        cached.refresh_interval_seconds = 0
        cached.fail_next = True
        samples = parse_samples(render(scraper.scrape(time.monotonic() + 5)).decode())
        assert cached.refreshes == 2
        assert samples["cephscope_test_daemons"] == 2
        assert samples['cephscope_scrape_collector_success{collector="counting"}'] == 0
    finally:
        scraper.close()
        cluster.stop()


def test_session_memoises_and_fails_fast_after_transport_error(tmp_path: Path) -> None:
    run = tmp_path / "run"
    cluster = FakeCluster(run)
    try:
        good = cluster.add_osd(0)
        hung = cluster.add_osd(1, fault="hang")
        from cephscope.exporter.asok import AsokTimeoutError, discover_daemons

        osd0, osd1 = discover_daemons(run)
        session = DaemonSession(osd0, deadline=time.monotonic() + 5, call_timeout=1,
                                max_response_bytes=1 << 26)
        assert session.command("perf dump") is session.command("perf dump")
        assert session.pid() is not None
        assert [r["prefix"] for r in good.requests] == ["perf dump"]
        assert good.requests[0] == {"prefix": "perf dump", "format": "json"}
        slow = DaemonSession(osd1, deadline=time.monotonic() + 5, call_timeout=0.2,
                             max_response_bytes=1 << 26)
        with pytest.raises(AsokTimeoutError):
            slow.command("perf dump")
        started = time.monotonic()
        with pytest.raises(AsokTimeoutError):
            slow.command("perf histogram dump")
        assert time.monotonic() - started < 0.05
        assert len(hung.requests) == 1
    finally:
        cluster.stop()


def test_collector_flags_like_node_exporter() -> None:
    names = [cls.name for cls in collector_classes()]
    assert names[:3] == ["perf", "labeled", "histogram"]
    args = build_parser().parse_args(["--no-collector.histogram"])
    enabled = [c.name for c in enabled_collectors(args)]
    assert "perf" in enabled and "histogram" not in enabled
    args = build_parser().parse_args(["--collector.histogram", "--no-collector.perf"])
    enabled = [c.name for c in enabled_collectors(args)]
    assert "histogram" in enabled and "perf" not in enabled
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--collector.nonexistent"])
