"""Histogram bucket points from a range query, classic or native: a real run's stored OSD
latency histograms turned into the native (NHCB) shape Prometheus 3 answers with give the same
report figures as the classic series they came from."""

from __future__ import annotations

import json
import math
import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from cephscope.runner.histogram_points import bucket_points
from cephscope.runner.report.build import load_rows

RUN = Path(__file__).resolve().parents[2] / "fixtures" / "runs" / "iterations"


def _bound_text(bound: float) -> str:
    return "+Inf" if math.isinf(bound) else repr(bound)


def native_shape(classic: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The classic `le` series of a range query as Prometheus 3 answers for the same histograms
    stored native: one series per label set without `le`, per timestamp the total count and
    the non-empty buckets [rule, lower, upper, count] (lowest lower edge -Inf)."""
    groups: dict[tuple[tuple[str, str], ...], dict[float, dict[float, float]]] = defaultdict(dict)
    for series in classic:
        labels = {k: v for k, v in series["metric"].items() if k != "le"}
        le = float(series["metric"]["le"])
        for stamp, value in series["values"]:
            groups[tuple(sorted(labels.items()))].setdefault(float(stamp), {})[le] = float(value)
    out = []
    for labels, by_time in groups.items():
        histograms = []
        for stamp in sorted(by_time):
            cumulative = by_time[stamp]
            buckets, lower, below = [], -math.inf, 0.0
            for upper in sorted(cumulative):
                count = cumulative[upper] - below
                if count:
                    buckets.append([0, _bound_text(lower), _bound_text(upper), repr(count)])
                lower, below = upper, cumulative[upper]
            histograms.append([stamp, {"count": repr(cumulative[math.inf]), "sum": "0",
                                       "buckets": buckets}])
        out.append({"metric": dict(labels), "histograms": histograms})
    return out


def test_native_buckets_become_cumulative_points_at_every_edge() -> None:
    series = {"metric": {"ceph_daemon": "osd.0"}, "histograms": [
        [10.0, {"count": "3", "sum": "0.01",
                "buckets": [[0, "0.001", "0.002", "2"], [0, "0.002", "0.004", "1"]]}],
        [15.0, {"count": "7", "sum": "0.03",
                "buckets": [[0, "-Inf", "0.001", "1"], [0, "0.001", "0.002", "2"],
                            [0, "0.002", "0.004", "1"], [0, "0.008", "+Inf", "3"]]}],
    ]}
    points = bucket_points(series)
    assert points == {
        0.001: [(10.0, 0.0), (15.0, 1.0)],
        0.002: [(10.0, 2.0), (15.0, 3.0)],
        0.004: [(10.0, 3.0), (15.0, 4.0)],
        0.008: [(10.0, 3.0), (15.0, 4.0)],
        math.inf: [(10.0, 3.0), (15.0, 7.0)],
    }
    classic = {"metric": {"le": "0.002"}, "values": [[10.0, "2"], [15.0, "3"]]}
    assert bucket_points(classic) == {0.002: [(10.0, 2.0), (15.0, 3.0)]}
    assert bucket_points({"metric": {"op": "w"}, "values": [[1, "1"]]}) == {}


def test_garbage_in_a_native_answer_costs_only_its_sample() -> None:
    series = {"metric": {}, "histograms": [
        [10.0, {"count": "2", "buckets": [[0, "0.001", "0.002", "2"]]}],
        [15.0, {"count": "NaN-ish", "buckets": []}],
        [20.0, "not a histogram"],
        ["later", {"count": "1"}],
        [25.0, {"count": "4", "buckets": [[0, "0.001", "0.002", "4"]]}],
    ]}
    assert bucket_points(series) == {0.001: [(10.0, 0.0), (25.0, 0.0)],
                                     0.002: [(10.0, 2.0), (25.0, 4.0)],
                                     math.inf: [(10.0, 2.0), (25.0, 4.0)]}


def test_the_report_gives_the_same_osd_percentiles_from_native_histograms(tmp_path: Path) -> None:
    native_run = tmp_path / "native"
    shutil.copytree(RUN, native_run)
    converted = 0
    for path in native_run.glob("step-*/prometheus.json"):
        stored = json.loads(path.read_text())
        entry = stored["queries"]["osd_op_latency_bucket"]
        entry["result"] = native_shape(entry["result"])
        converted += len(entry["result"])
        path.write_text(json.dumps(stored))
    assert converted > 0
    _run, classic_rows = load_rows(RUN)
    _run, native_rows = load_rows(native_run)
    compared = 0
    for classic, native in zip(classic_rows, native_rows, strict=True):
        assert (classic.step.id, classic.mode) == (native.step.id, native.mode)
        if classic.status != "done":
            continue
        for quantile in ("50", "99", "99.9"):
            assert native.osd_percentile(quantile) == pytest.approx(classic.osd_percentile(quantile))
        assert native.system.osd_p99_by_daemon == pytest.approx(classic.system.osd_p99_by_daemon)
        assert native.system.osd_latency_count == pytest.approx(classic.system.osd_latency_count)
        compared += classic.osd_percentile("99") is not None
    assert compared == 24
