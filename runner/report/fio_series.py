"""fio's own time series in the report: per step and mode whose fio wrote logs (`log_avg_msec`),
fio's IOPS and mean latency per averaging window beside the OSDs' op rate and op latency that
Prometheus recorded over the same window (the step's prometheus.json), on one time axis:
seconds since the mode started. What the client saw next to what the cluster did."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cephscope.runner.benchmarks.fio_logs import FioSeries, step_series
from cephscope.runner.report.plots import _pyplot, _save
from cephscope.runner.report.step_system import mode_window, read_stored
from cephscope.runner.window_rates import raw_points

if TYPE_CHECKING:
    from cephscope.runner.report.build import Row

# the stored queries drawn beside fio's series: OSD ops per second, OSD op latency
OSD_OPS = "osd_ops_per_second"
OSD_LATENCY = "osd_op_latency_seconds"


@dataclass
class StepSeries:
    """One (step, mode)'s fio series and the Prometheus series of its window, as
    (seconds since the mode started, value)."""

    fio_iops: list[tuple[float, float]]
    fio_latency_seconds: list[tuple[float, float]]
    osd_ops: list[tuple[float, float]]
    osd_latency_seconds: list[tuple[float, float]]


def _combined(entry: Mapping[str, Any] | None, how: str) -> dict[float, float]:
    """timestamp -> the sum (or mean) over every series of a stored query_range result."""
    per_time: dict[float, list[float]] = {}
    for series in (entry or {}).get("result", []) or []:
        for t, v in raw_points(series):
            per_time.setdefault(t, []).append(v)
    combine = sum if how == "sum" else statistics.fmean
    return {t: combine(values) for t, values in per_time.items() if values}


def step_series_of(row: Row, run_dir: Path) -> StepSeries | None:
    """The series of a report row, None when its step has no fio logs for its mode."""
    if row.status != "done" or not row.mode:
        return None
    step_dir = run_dir / row.step.dir_name
    interval = row.step.params.get("log_avg_msec")
    series = step_series(step_dir, row.mode, int(interval) if isinstance(interval, int) else None)
    if series is None or not series.times:
        return None
    result = read_stored(step_dir / "result.json") or {}
    window = mode_window(result, row.mode)
    start, end = window if window else (None, None)
    # fio's epoch times sit on the mode's window; relative ones start with it
    base = start if series.epoch and start is not None else series.times[0]
    queries = (read_stored(step_dir / "prometheus.json") or {}).get("queries") or {}

    def inside(points: Mapping[float, float]) -> list[tuple[float, float]]:
        if start is None:
            return []
        return sorted((t - start, v) for t, v in points.items()
                      if start <= t and (end is None or t <= end))

    return StepSeries(
        fio_iops=_points(series, series.iops, base),
        fio_latency_seconds=_points(series, series.latency_seconds, base),
        osd_ops=inside(_combined(queries.get(OSD_OPS), "sum")),
        osd_latency_seconds=inside(_combined(queries.get(OSD_LATENCY), "mean")),
    )


def _points(series: FioSeries, values: Sequence[float | None], offset: float
            ) -> list[tuple[float, float]]:
    return [(t - offset, v) for t, v in zip(series.times, values, strict=True) if v is not None]


def plot_fio_series(rows: Sequence[Row], run_dir: Path, out_dir: Path) -> list[Path]:
    """One figure per (step, mode) with fio logs: IOPS (fio, OSD ops) and latency (fio mean,
    OSD op latency) against seconds since the mode started."""
    written: list[Path] = []
    for row in rows:
        found = step_series_of(row, run_dir)
        if found is None:
            continue
        plt = _pyplot()
        fig, (ax_iops, ax_lat) = plt.subplots(1, 2, figsize=(11, 4.0))
        ax_iops.plot(*zip(*found.fio_iops, strict=True), marker=".", label="fio IOPS (its log)")
        if found.osd_ops:
            ax_iops.plot(*zip(*found.osd_ops, strict=True), marker="x", linestyle="--",
                         label="OSD ops/s (Prometheus)")
        if found.fio_latency_seconds:
            ax_lat.plot(*zip(*[(t, v * 1e3) for t, v in found.fio_latency_seconds], strict=True),
                        marker=".", label="fio mean latency (its log)")
        if found.osd_latency_seconds:
            ax_lat.plot(*zip(*[(t, v * 1e3) for t, v in found.osd_latency_seconds], strict=True),
                        marker="x", linestyle="--", label="OSD op latency (Prometheus)")
        for ax, label in ((ax_iops, "IOPS"), (ax_lat, "latency (ms)")):
            ax.set_xlabel("seconds since the mode started")
            ax.set_ylabel(label)
            ax.set_ylim(bottom=0)
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=7)
        fig.suptitle(f"{row.step.benchmark} {row.mode}, step {row.step.id} "
                     f"({row.step.short_params()}): fio's time series beside the cluster's")
        fig.tight_layout()
        written.append(_save(fig, out_dir, f"fio-series-{row.step.id}-{row.mode}"))
    return written
