"""Per-second rates of cumulative counters over one measurement window, from the raw scrapes
that fall inside it.

A Prometheus rate() evaluated inside a short step looks back over its whole rate window (4 scrape
intervals by default): for a step of 6 s at a 5 s interval that window starts in the quiet gap
or the OSD restart before the step, and a restart is a counter reset whose new value (the new
process's boot work) rate() counts as increase. Here only scrapes taken at or after the window's
start and at or before its end count: the rate is the counter's increase from the first such
scrape to the last, divided by the time between them, so nothing from before the measurement
leaks in. A window holding fewer than two scrapes of a series has no rate: it is reported as
too short, not filled from neighbouring time.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Window = tuple[float, float]


@dataclass(frozen=True)
class WindowRate:
    """A counter's increase over the scrapes inside a window."""

    increase: float
    seconds: float  # between the first and the last scrape inside the window
    scrapes: int  # how many scrapes the figure rests on
    first: float  # timestamp of the first scrape used
    last: float  # timestamp of the last scrape used
    resets: int = 0  # counter drops inside the window (the process restarted mid-window)

    @property
    def per_second(self) -> float:
        return self.increase / self.seconds


def raw_points(series: Mapping[str, Any]) -> list[tuple[float, float]]:
    """(timestamp, value) of a Prometheus matrix series, finite values only, in time order."""
    points = []
    for point in series.get("values", []) or []:
        try:
            stamp, value = float(point[0]), float(point[1])
        except (TypeError, ValueError, IndexError):
            continue
        if math.isfinite(value):
            points.append((stamp, value))
    return sorted(points)


def window_rate(points: Sequence[tuple[float, float]], window: Window) -> WindowRate | None:
    """Increase of a counter over its scrapes inside [start, end]; None under two scrapes. A
    drop between two scrapes is a reset: the later value counts from zero (as rate() does)."""
    inside = [p for p in points if window[0] <= p[0] <= window[1]]
    if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
        return None
    increase, resets = 0.0, 0
    for (_t0, v0), (_t1, v1) in itertools.pairwise(inside):
        if v1 >= v0:
            increase += v1 - v0
        else:
            increase += v1
            resets += 1
    return WindowRate(increase, inside[-1][0] - inside[0][0], len(inside), inside[0][0],
                      inside[-1][0], resets)


def scrapes_inside(points: Sequence[tuple[float, float]], window: Window) -> int:
    return sum(1 for t, _v in points if window[0] <= t <= window[1])


@dataclass(frozen=True)
class SeriesRate:
    labels: dict[str, str]
    rate: WindowRate


def series_rates(result: Iterable[Mapping[str, Any]], window: Window
                 ) -> tuple[list[SeriesRate], list[int]]:
    """Window rates of every series of a stored matrix result, and the scrape counts of the
    series left out for having fewer than two scrapes inside the window."""
    rates: list[SeriesRate] = []
    short: list[int] = []
    for series in result:
        points = raw_points(series)
        found = window_rate(points, window)
        if found is None:
            short.append(scrapes_inside(points, window))
            continue
        rates.append(SeriesRate(dict(series.get("metric", {})), found))
    return rates, short
