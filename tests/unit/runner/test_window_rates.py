"""Per-step rates from the raw scrapes inside a measurement window: nothing from before the
window (a restart, a quiet gap) enters, a window under two scrapes has no rate, and the
report's system figures built from them say so."""

from __future__ import annotations

import pytest

from cephscope.runner.report.step_system import summarize_system
from cephscope.runner.window_rates import window_rate


def matrix(labels: dict[str, str], points: list[tuple[float, float]]) -> dict:
    return {"metric": labels, "values": [[t, str(v)] for t, v in points]}


def test_rate_uses_only_scrapes_inside_the_window() -> None:
    # an OSD restarted at t=5 (counter reset, boot work 0.3 s), the step runs 20..31
    points = [(0, 2.0), (5, 2.5), (10, 0.3), (15, 0.3), (20, 0.3), (25, 0.8), (30, 1.3),
              (35, 1.4)]
    found = window_rate(points, (20.0, 31.0))
    assert found is not None
    assert (found.scrapes, found.first, found.last, found.resets) == (3, 20.0, 30.0, 0)
    assert found.per_second == pytest.approx(0.1)


def test_under_two_scrapes_no_rate() -> None:
    points = [(0, 1.0), (5, 2.0), (10, 3.0)]
    assert window_rate(points, (4.0, 9.0)) is None  # one scrape inside
    assert window_rate(points, (6.0, 9.0)) is None  # none


def test_reset_inside_the_window_counts_from_zero() -> None:
    found = window_rate([(0, 5.0), (5, 6.0), (10, 1.0)], (0.0, 10.0))
    assert found is not None and found.resets == 1
    assert found.increase == pytest.approx(2.0)


def stored(points_by_group: dict[str, list[tuple[float, float]]], start: float, end: float,
           cpu_points: list[tuple[float, float]] | None = None) -> dict:
    counters = {"osd_thread_cpu_seconds": {"result": [
        matrix({"instance": "h:9", "ceph_daemon": "osd.0", "thread_group": g}, pts)
        for g, pts in points_by_group.items()]}}
    if cpu_points is not None:
        counters["cpu_seconds"] = {"result": [
            matrix({"instance": "h:1", "cpu": "0", "mode": "user"}, cpu_points),
            matrix({"instance": "h:1", "cpu": "0", "mode": "idle"},
                   [(t, t - v) for t, v in cpu_points])]}
    # the rate() means the old way would have used: deliberately wrong, must not be used
    rates = {"osd_thread_cpu_seconds_per_second": {"result": [matrix(
        {"instance": "h:9", "ceph_daemon": "osd.0", "thread_group": "ceph-osd"},
        [(start, 0.05), (end, 0.05)])]}}
    return {"start": start, "end": end, "queries": rates, "counters": counters}


def test_thread_groups_after_a_restart_are_the_steps_own() -> None:
    # the demo's shape: restart (boot work on the main thread `ceph-osd`), quiet gap, step
    prom = stored({"ceph-osd": [(0, 0.07), (5, 0.11), (10, 0.33), (15, 0.33), (20, 0.33),
                                (25, 0.33)],
                   "tp_osd_tp": [(0, 1.04), (5, 0.0), (10, 0.0), (15, 0.3), (20, 0.8),
                                 (25, 1.3)]}, 0, 30,
                  cpu_points=[(10, 1.0), (15, 2.0), (20, 3.0), (25, 4.0)])
    figures = summarize_system(prom, window=(14.0, 26.0), mode="write")
    groups = {g: v for (_h, _d, g), v in figures.thread_groups.items()}
    assert groups["tp_osd_tp"] == pytest.approx(0.1)
    assert groups["ceph-osd"] == pytest.approx(0.0)  # its boot work is outside the window
    assert figures.source == "scrapes" and figures.scrapes == 3 and not figures.too_short
    assert figures.cpu_busy_ratio == pytest.approx(0.2)
    assert figures.cores == {("h:1", "0"): pytest.approx(0.2)}


def test_window_under_two_scrapes_is_flagged_not_filled() -> None:
    prom = stored({"tp_osd_tp": [(0, 0.0), (5, 0.5), (10, 1.0), (15, 1.5)]}, 0, 15,
                  cpu_points=[(0, 0.0), (5, 1.0), (10, 2.0), (15, 3.0)])
    figures = summarize_system(prom, window=(6.0, 11.0), mode="write")
    assert figures.too_short and figures.scrapes == 1
    assert figures.thread_groups == {} and figures.cpu_busy_ratio is None
    assert figures.cores == {}


def test_report_shows_the_scrapes_and_flags_short_windows() -> None:
    from cephscope.runner.report.build import Row, bottleneck, window_text
    from cephscope.runner.steps import Step

    step = Step("abc123", "radosbench", 0, {"op_size": 4096}, None, {}, {"radosbench.op_size": 4096})
    prom = stored({"tp_osd_tp": [(0, 0.0), (5, 0.5), (10, 1.0), (15, 1.5)]}, 0, 15)
    short = Row(step, "write", "done", {"iops": 1.0},
                summarize_system(prom, window=(6.0, 11.0)), window_seconds=5.0)
    assert bottleneck(short)[0] == "window < 2 scrapes"
    assert "fewer than 2 scrapes" in window_text(short)
    long = Row(step, "write", "done", {"iops": 1.0},
               summarize_system(prom, window=(0.0, 15.0)), window_seconds=15.0)
    assert window_text(long) == "15.0 s window: 4 scrapes inside, 15.0 s apart at the ends"


def test_a_target_with_one_scrape_inside_leaves_its_figures_empty_and_says_so() -> None:
    from cephscope.runner.report.build import Row, bottleneck, window_text
    from cephscope.runner.steps import Step

    # the exporter scraped at 5, 10 (two inside 4..11); node_exporter at 2, 7, 12 (one inside)
    prom = stored({"tp_osd_tp": [(0, 0.0), (5, 0.5), (10, 1.0)]}, 0, 12,
                  cpu_points=[(2, 1.0), (7, 2.0), (12, 3.0)])
    figures = summarize_system(prom, window=(4.0, 11.0), mode="write")
    assert figures.thread_groups and figures.scrapes == 2 and not figures.too_short
    assert figures.cpu_busy_ratio is None and figures.cores == {}
    assert figures.short_counters == ["cpu_seconds"]
    row = Row(Step("abc123", "radosbench", 0, {}, None, {}, {}), "write", "done", {},
              figures, window_seconds=7.0)
    assert bottleneck(row)[0] == "window < 2 scrapes"
    assert "fewer than 2 scrapes inside for cpu_seconds" in window_text(row)
