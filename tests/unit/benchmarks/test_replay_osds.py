"""The scale simulation's replaying OSD sockets (benchmarks/replay_osds.py): counters advance,
latency histograms move, OSDs differ, and the exporter reads them as it reads real OSDs."""

from __future__ import annotations

import importlib.util
import json
import sys
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.unit.fake_asok import parse_samples, scrape_once

REPLAY = Path(__file__).resolve().parents[3] / "benchmarks" / "replay_osds.py"


@pytest.fixture(scope="module")
def replay() -> ModuleType:
    spec = importlib.util.spec_from_file_location("replay_osds", REPLAY)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["replay_osds"] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


def _answer(osd: Any, prefix: str, elapsed: float) -> Any:
    return json.loads(osd.answer({"prefix": prefix, "format": "json"}, elapsed))


def _latency_rows(histogram_dump: dict[str, Any]) -> list[int]:
    values = histogram_dump["osd"]["op_w_latency_in_bytes_histogram"]["values"]
    return [sum(row) for row in values]


def _quantile_bucket(rows: list[int], q: float) -> int:
    total, running = sum(rows), 0
    for index, count in enumerate(rows):
        running += count
        if running >= q * total:
            return index
    raise AssertionError("empty histogram")


def test_time_splits_into_normal_and_slow_and_only_grows(replay: ModuleType) -> None:
    load = replay.OsdLoad(1.0, period=90.0, phase=40.0)
    previous = (0.0, 0.0)
    for elapsed in range(0, 2000, 7):
        normal, slow = load.times(float(elapsed))
        assert normal + slow == pytest.approx(elapsed)
        assert normal >= previous[0] - 1e-9 and slow >= previous[1] - 1e-9
        previous = (normal, slow)
    assert previous[1] / 1995 == pytest.approx(replay.SLOW_SHARE, abs=0.03)


def test_counters_advance_gauges_stay_and_every_osd_differs(replay: ModuleType) -> None:
    osd0, osd9 = replay.simulated_osds([0, 9], "20.2.4")  # both replay captured osd.0
    assert osd0.source is osd9.source
    first, later = _answer(osd0, "perf dump", 0.0), _answer(osd0, "perf dump", 30.0)
    assert later["osd"]["op_w"] > first["osd"]["op_w"] > 0
    assert later["osd"]["op_w_latency"]["avgcount"] > first["osd"]["op_w_latency"]["avgcount"]
    assert later["osd"]["op_w_latency"]["sum"] > first["osd"]["op_w_latency"]["sum"]
    assert later["osd"]["numpg"] == first["osd"]["numpg"]  # a gauge
    other = _answer(osd9, "perf dump", 30.0)
    assert other["osd"]["op_w"] != later["osd"]["op_w"]
    # what does not move replays the capture, compact as Ceph's "format": "json"
    assert _answer(osd0, "dump_op_pq_state", 5.0) == _answer(osd0, "dump_op_pq_state", 50.0)
    assert osd0.answer({"prefix": "no such thing"}, 1.0).startswith(b"ERROR: (22)")


def test_latency_histograms_move_up_while_an_osd_is_slow(replay: ModuleType) -> None:
    (osd,) = replay.simulated_osds([3], "20.2.4")
    load = osd.load
    slow = replay.SLOW_SHARE * load.period

    def increase(start: float, end: float) -> list[int]:
        before = _latency_rows(_answer(osd, "perf histogram dump", start))
        after = _latency_rows(_answer(osd, "perf histogram dump", end))
        assert all(a >= b for a, b in zip(after, before, strict=True))
        return [a - b for a, b in zip(after, before, strict=True)]

    # the schedule is slow for the first third of each period, counted from -phase
    slow_start = load.period - load.phase
    fast = increase(slow_start + slow + 1, slow_start + load.period - 1)
    slowed = increase(slow_start + 1, slow_start + slow - 1)
    assert sum(fast) > 0 and sum(slowed) > 0
    assert _quantile_bucket(slowed, 0.99) == _quantile_bucket(fast, 0.99) + 1


def test_the_exporter_reads_every_replaying_osd(replay: ModuleType, tmp_path: Path) -> None:
    server = replay.ReplayServer(tmp_path / "run", replay.simulated_osds(range(5), "20.2.4"),
                                 time.monotonic)
    stop = threading.Event()
    thread = threading.Thread(target=server.serve, args=(stop,), daemon=True)
    thread.start()
    try:
        first = parse_samples(scrape_once(tmp_path / "run"))
        time.sleep(1.5)
        second = parse_samples(scrape_once(tmp_path / "run"))
    finally:
        stop.set()
        thread.join()
        server.close()
    assert not list((tmp_path / "run").iterdir())  # sockets removed
    for osd in range(5):
        up = f'cephscope_daemon_up{{ceph_daemon="osd.{osd}"}}'
        writes = f'ceph_osd_op_w{{ceph_daemon="osd.{osd}"}}'
        count = f'cephscope_osd_op_latency_seconds_count{{ceph_daemon="osd.{osd}",op="w"}}'
        assert first[up] == 1.0
        assert second[writes] > first[writes] and second[count] > first[count]
    assert len({first[f'ceph_osd_op_w{{ceph_daemon="osd.{osd}"}}'] for osd in range(5)}) == 5
