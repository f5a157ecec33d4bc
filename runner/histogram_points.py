"""Cumulative bucket counts of a histogram series from a Prometheus range query, whichever way
Prometheus stores the histogram.

A classic histogram comes back as one series per bucket: `le` label, float `values`. A native
histogram (Prometheus 3 storing the exporter's classic histograms as native histograms with
custom buckets, NHCB) comes back as one series whose `histograms` hold, per timestamp, the total
`count` and the non-empty buckets `[boundary rule, lower, upper, count]` (counts per bucket, not
cumulative). Both become the same thing here: upper bound -> (timestamp, cumulative count)
points, +Inf holding the total, so the report takes the same deltas and quantiles of either.

The bounds of a native series are every finite edge that any of its samples shows (a bucket's
lower edge too: the classic series of an empty bucket below a full one is where a quantile's
interpolation starts), each evaluated in every sample.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from cephscope.runner.window_rates import raw_points

Points = list[tuple[float, float]]


def _bound(text: Any) -> float | None:
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(value) else value


def _native_sample(point: Any) -> tuple[float, float, list[tuple[float, float]]] | None:
    """(timestamp, total count, [(upper, count)...]) of one `histograms` entry; None if bad."""
    try:
        stamp, histogram = float(point[0]), point[1]
        total = float(histogram["count"])
        buckets = [(float(b[2]), float(b[3])) for b in histogram.get("buckets") or []]
    except (TypeError, ValueError, IndexError, KeyError, AttributeError):
        return None
    if not math.isfinite(total) or any(math.isnan(u) or not math.isfinite(c) for u, c in buckets):
        return None
    return stamp, total, sorted(buckets)


def _native_bounds(points: list[Any]) -> set[float]:
    bounds: set[float] = set()
    for point in points:
        try:
            buckets = point[1].get("buckets") or []
        except (TypeError, IndexError, AttributeError):
            continue
        for bucket in buckets:
            for edge in bucket[1:3] if isinstance(bucket, list | tuple) else ():
                value = _bound(edge)
                if value is not None and math.isfinite(value):
                    bounds.add(value)
    return bounds


def bucket_points(series: Mapping[str, Any]) -> dict[float, Points]:
    """Upper bound (math.inf for +Inf) -> time-ordered (timestamp, cumulative count) of one
    series of a range query: a classic bucket series gives its `le`, a native one every bound
    it has. A series that is neither (no `le`, no histograms) gives nothing."""
    histograms = series.get("histograms")
    if not histograms:
        le = _bound((series.get("metric") or {}).get("le"))
        return {} if le is None else {le: raw_points(series)}
    samples = [s for s in map(_native_sample, histograms) if s is not None]
    bounds = sorted(_native_bounds(histograms))
    out: dict[float, Points] = {bound: [] for bound in (*bounds, math.inf)}
    for stamp, total, buckets in sorted(samples):
        for bound in bounds:
            out[bound].append((stamp, sum(count for upper, count in buckets if upper <= bound)))
        out[math.inf].append((stamp, total))
    return out


def add_cumulative(histograms: list[Mapping[float, float]]) -> dict[float, float]:
    """The sum of cumulative bucket maps that may each list only some of the shared edges (a
    native histogram lists the edges of its non-empty buckets): at an edge a map does not list,
    its count is the one at its highest listed edge below (0 below all), exact because every
    OSD's histogram has the same edges."""
    bounds = sorted({b for h in histograms for b in h})
    total = dict.fromkeys(bounds, 0.0)
    for histogram in histograms:
        count = 0.0
        for bound in bounds:
            count = histogram.get(bound, count)
            total[bound] += count
    return total
