"""Exporter logs: logfmt quoting and RFC 3339 time, JSON lines, repeats folded per daemon,
no traceback per OSD when the threads collector cannot find an OSD process."""

from __future__ import annotations

import io
import json
import logging
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cephscope.exporter.logs import RepeatFilter, configure_logging
from tests.unit.fake_asok import FakeCluster, only_collectors, scrape_once


@pytest.fixture(autouse=True)
def restore_logger() -> Iterator[None]:
    """configure_logging changes the process-wide 'cephscope' logger: put it back."""
    logger = logging.getLogger("cephscope")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    yield
    logger.handlers[:] = saved[0]
    logger.level, logger.propagate = saved[1], saved[2]


LOGFMT_PAIR = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)')


def parse_logfmt(line: str) -> dict[str, str]:
    return {k: v[1:-1] if v.startswith('"') else v for k, v in LOGFMT_PAIR.findall(line)}


def test_logfmt_quotes_values_and_uses_rfc3339() -> None:
    stream = io.StringIO()
    configure_logging("info", "logfmt", stream)
    logging.getLogger("cephscope.exporter").warning(
        "daemon not answering",
        extra={"fields": {"ceph_daemon": "osd.3", "err": 'x: "a=b" failed', "empty": ""}},
    )
    line = stream.getvalue().strip()
    pairs = parse_logfmt(line)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", pairs["ts"])
    assert pairs["level"] == "warn" and pairs["msg"] == "daemon not answering"
    assert pairs["ceph_daemon"] == "osd.3" and pairs["caller"].startswith("test_exporter_logs")
    assert 'err="x: \\"a=b\\" failed"' in line and 'empty=""' in line


def test_json_format() -> None:
    stream = io.StringIO()
    configure_logging("info", "json", stream)
    logging.getLogger("cephscope.exporter").info("listening", extra={"fields": {"port": 9967}})
    record = json.loads(stream.getvalue())
    assert record["msg"] == "listening" and record["port"] == 9967 and record["level"] == "info"
    assert record["ts"].endswith("Z")


def test_repeats_are_written_once_per_interval_per_daemon_with_a_count() -> None:
    repeat = RepeatFilter(interval=0.2)
    logger = logging.getLogger("cephscope.test.repeat")

    def record(daemon: str) -> logging.LogRecord:
        return logger.makeRecord(logger.name, logging.WARNING, __file__, 1, "down", (), None,
                                 extra={"fields": {"ceph_daemon": daemon}})

    assert repeat.filter(record("osd.1"))
    assert repeat.filter(record("osd.2"))  # another daemon: its own line
    assert not any(repeat.filter(record("osd.1")) for _ in range(5))
    time.sleep(0.25)
    later = record("osd.1")
    assert repeat.filter(later) and later.repeated == 5


def test_threads_collector_without_osd_process_logs_one_line_without_traceback(
    tmp_path: Path,
) -> None:
    cluster = FakeCluster(tmp_path / "run")
    for osd in range(3):
        cluster.add_osd(osd)
    (tmp_path / "proc").mkdir()
    stream = io.StringIO()
    configure_logging("info", "logfmt", stream)
    try:
        for _ in range(4):
            scrape_once(cluster.dir, *only_collectors("perf", "threads"),
                        "--collector.threads.proc-root", str(tmp_path / "proc"))
    finally:
        cluster.stop()
    lines = stream.getvalue().splitlines()
    assert "Traceback" not in stream.getvalue()
    failed = [parse_logfmt(line) for line in lines if 'msg="collector failed"' in line]
    # One line per OSD for four scrapes, naming the daemon and the reason.
    assert sorted(p["ceph_daemon"] for p in failed) == ["osd.0", "osd.1", "osd.2"]
    assert all(p["collector"] == "threads" and "ceph-osd" in p["err"] for p in failed)
