"""The report's per-OSD tables stay bounded at any number of OSDs: every OSD up to N, else the
N with the highest figure and the spread over all of them (runner/report/per_osd.py)."""

from __future__ import annotations

import argparse
import statistics

import pytest

from cephscope.runner.report.build import Row, _fmt, system_tables
from cephscope.runner.report.per_osd import (
    TOP_OSDS,
    device_tables,
    osd_p99_tables,
    quantile,
    spread,
    thread_group_tables,
)
from cephscope.runner.report.step_system import DeviceFigures, SystemFigures
from cephscope.runner.report_cli import add_arguments
from cephscope.runner.steps import Step

GROUPS = {"tp_osd_tp": 0.40, "msgr-worker": 0.20, "bstore_kv_sync": 0.10, "other": 0.0005}


def figures(osds: int) -> SystemFigures:
    """`osds` OSDs, 20 per host, OSD i slower and busier with i (osd.{n-1} is the worst)."""
    s = SystemFigures(cpu_busy_ratio=0.5)
    for i in range(osds):
        host, daemon = f"host{i // 20}", f"osd.{i}"
        s.osd_p99_by_daemon[daemon] = 0.001 * (1 + i)
        for group, cpu in GROUPS.items():
            s.thread_groups[(host, daemon, group)] = cpu * (1 + i / osds)
        s.devices.append(DeviceFigures(host, f"sd{i}", iops=100.0 + i, await_seconds=0.001,
                                       util_ratio=i / osds, read_bytes_per_second=0.0,
                                       write_bytes_per_second=2.0**20, osds=daemon))
    s.osd_devices_only = True
    return s


def test_quantiles_are_numpys_linear_ones() -> None:
    assert quantile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert quantile([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0], 0.9) == pytest.approx(9.1)
    assert spread([5.0]) == (5.0, 5.0, 5.0, 5.0)
    values = [float(v) for v in range(101)]
    assert spread(values) == (0.0, 50.0, 90.0, 100.0)
    assert quantile(values, 0.5) == statistics.median(values)


def test_up_to_n_osds_every_osd_has_its_row() -> None:
    s = figures(TOP_OSDS)
    [(title, header, body)] = osd_p99_tables(s, _fmt)
    assert (title, header) == ("OSD-side p99 per OSD", ["OSD", "p99 ms"])
    assert [line[0] for line in body] == sorted(s.osd_p99_by_daemon)
    [(title, _header, body)] = thread_group_tables(s, _fmt)
    assert title.startswith("OSD thread groups (>=")
    assert {line[1] for line in body} == set(s.osd_p99_by_daemon)
    [(title, _header, body)] = device_tables(s, _fmt)
    assert title == "OSD devices" and len(body) == TOP_OSDS


def test_beyond_n_osds_the_slowest_n_and_the_spread() -> None:
    s = figures(1000)
    (spread_title, spread_header, [line]), (top_title, _h, slowest) = osd_p99_tables(s, _fmt)
    assert spread_title == "OSD-side p99 over 1000 OSDs"
    assert spread_header == ["figure", "OSDs", "min ms", "p50 ms", "p90 ms", "max ms"]
    # 1 ms .. 1000 ms, linear: p50 500.5 ms, p90 900.1 ms
    assert line == ["p99", "1000", "1.00", "500.50", "900.10", "1,000.00"]
    assert top_title == f"OSD-side p99: the slowest {TOP_OSDS} of 1000 OSDs"
    assert [d for d, _v in slowest] == [f"osd.{i}" for i in range(999, 999 - TOP_OSDS, -1)]


def test_thread_groups_beyond_n_osds() -> None:
    s = figures(1000)
    (title, header, body), (top_title, _h, busiest) = thread_group_tables(s, _fmt)
    assert title == "OSD thread groups over 1000 OSDs (CPU s/s per OSD)"
    assert header == ["thread group", "OSDs", "all OSDs", "min", "p50", "p90", "max"]
    tp = next(line for line in body if line[0] == "tp_osd_tp")
    values = [v for (_h, _d, g), v in s.thread_groups.items() if g == "tp_osd_tp"]
    assert tp[1:3] == ["1000", f"{sum(values):,.3f}"]
    assert tp[3:] == [f"{v:,.3f}" for v in spread(values)]
    # a group is in the spread when all OSDs together pass the threshold, though no one does
    assert [line[0] for line in body] == ["tp_osd_tp", "msgr-worker", "bstore_kv_sync", "other"]
    # the busiest N OSDs, each with its groups above the threshold, busiest group first
    assert top_title.startswith(f"OSD thread groups of the busiest {TOP_OSDS} of 1000 OSDs")
    osds = list(dict.fromkeys(line[1] for line in busiest))
    assert osds == [f"osd.{i}" for i in range(999, 999 - TOP_OSDS, -1)]
    assert [line[2] for line in busiest[:3]] == ["tp_osd_tp", "msgr-worker", "bstore_kv_sync"]
    assert len(busiest) == 3 * TOP_OSDS


def test_devices_beyond_n() -> None:
    s = figures(1000)
    (title, header, body), (top_title, top_header, busiest) = device_tables(s, _fmt)
    assert title == "OSD devices over 1000 devices"
    assert header == ["figure", "devices", "min", "p50", "p90", "max"]
    util = next(line for line in body if line[0] == "util %")
    # i / 1000 for i in 0..999: p50 at rank 499.5, p90 at rank 899.1
    assert util == ["util %", "1000", "0.0", f"{49.95:,.1f}", "89.9", "99.9"]
    assert top_title == f"OSD devices: the busiest {TOP_OSDS} of 1000 by util"
    assert top_header[:3] == ["host", "device", "OSDs"]
    assert [line[1] for line in busiest] == [f"sd{i}" for i in range(999, 999 - TOP_OSDS, -1)]


def test_a_steps_tables_do_not_grow_with_the_osds() -> None:
    step = Step(id="x", benchmark="radosbench", iteration=0, params={}, pool_profile=None,
                ceph_config={})

    def lines(osds: int, top: int = TOP_OSDS) -> int:
        row = Row(step, "write", "done", {"iops": 1.0}, figures(osds))
        return sum(len(body) for _t, _h, body in system_tables(row, top))

    assert lines(100) == lines(1000) == lines(5000)
    assert lines(1000, top=3) < lines(1000)
    assert lines(5) < lines(100)


def test_top_osds_flag_takes_a_positive_whole_number(capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert parser.parse_args(["run"]).top_osds == TOP_OSDS
    assert parser.parse_args(["run", "--top-osds", "3"]).top_osds == 3
    for bad in ("0", "-2", "many"):
        with pytest.raises(SystemExit):
            parser.parse_args(["run", "--top-osds", bad])
        assert "--top-osds" in capsys.readouterr().err
