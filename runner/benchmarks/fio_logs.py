"""fio's own time series: the IOPS, bandwidth and latency logs fio writes per job with
`--write_iops_log/--write_bw_log/--write_lat_log PREFIX --log_avg_msec=N --log_unix_epoch=1`.

fio names them `PREFIX_<kind>.<job>.log` (kind iops, bw, lat, clat, slat; job numbered from 1
across the process's jobs) and writes one line per averaging window and data direction:
`time, value, direction, block size, offset[, priority]` with time in ms (since the epoch with
log_unix_epoch, else since the job started), direction 0 read / 1 write / 2 trim, and the value
in IOPS, KiB/s or nanoseconds. A mixed workload writes one line per direction per window.

The step's series sums the jobs (IOPS, bandwidth) per window and averages their latency
weighted by each job's IOPS in that window; the jobs of several processes and clients log at
slightly different instants, so windows are aligned on multiples of the averaging interval.
A line that is not a log line is counted and skipped, never fatal.
"""

from __future__ import annotations

import itertools
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

KINDS = ("iops", "bw", "lat", "clat", "slat")
DIRECTIONS = {0: "read", 1: "write", 2: "trim"}
LOG_NAME = re.compile(r"^(?P<prefix>.+)_(?P<kind>iops|bw|lat|clat|slat)\.(?P<job>\d+)\.log$")
# Below this a log's times are relative to the job's start (fio without log_unix_epoch).
EPOCH_MS_FLOOR = 10**11
KIB = 1024
NS = 1e-9


@dataclass(frozen=True)
class LogSample:
    time_ms: int
    value: float
    direction: int


@dataclass(frozen=True)
class LogFile:
    path: Path
    prefix: str  # the PREFIX fio was given (its file-name part)
    kind: str
    job: int


def parse_log(text: str) -> tuple[list[LogSample], int]:
    """(samples, lines that were not log lines) of one log file."""
    samples: list[LogSample] = []
    bad = 0
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = [p.strip() for p in line.split(",")]
        try:
            time_ms, value, direction = int(parts[0]), float(parts[1]), int(parts[2])
        except (IndexError, ValueError):
            bad += 1
            continue
        if time_ms < 0 or value < 0 or direction not in DIRECTIONS or value != value:
            bad += 1
            continue
        samples.append(LogSample(time_ms, value, direction))
    return samples, bad


def log_files(directory: Path, prefix_start: str = "") -> list[LogFile]:
    """Every fio log file in `directory` whose prefix starts with `prefix_start`, by name."""
    found = []
    try:
        names = sorted(p.name for p in directory.iterdir() if p.is_file())
    except OSError:
        return []
    for name in names:
        match = LOG_NAME.match(name)
        if match and match["prefix"].startswith(prefix_start):
            found.append(LogFile(directory / name, match["prefix"], match["kind"],
                                 int(match["job"])))
    return found


@dataclass
class FioSeries:
    """The step's series, one point per averaging window (`times`: window instants, unix
    seconds when fio logged epoch times, else seconds since the jobs started)."""

    interval_ms: int
    epoch: bool
    times: list[float] = field(default_factory=list)
    iops: list[float | None] = field(default_factory=list)
    bytes_per_second: list[float | None] = field(default_factory=list)
    latency_seconds: list[float | None] = field(default_factory=list)
    # direction name -> {"iops": [...], "latency_seconds": [...]} on the same times
    directions: dict[str, dict[str, list[float | None]]] = field(default_factory=dict)
    jobs: int = 0
    skipped_lines: int = 0

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def mean_iops(self) -> float | None:
        values = [v for v in self.iops if v is not None]
        return statistics.fmean(values) if values else None


def _window(time_ms: int, interval_ms: int) -> int:
    return round(time_ms / interval_ms)


def _interval(samples: Iterable[Sequence[LogSample]]) -> int:
    """The averaging interval: the median step between one job's successive windows."""
    steps = []
    for job in samples:
        times = sorted({s.time_ms for s in job})
        steps += [b - a for a, b in itertools.pairwise(times)]
    # fio's windows drift by a ms or two: the interval asked for is a round number
    return max(10, round(statistics.median(steps) / 10) * 10) if steps else 1000


# (job key, direction) -> window -> mean value of that job's samples in the window
PerJob = dict[tuple[tuple[str, int], int], dict[int, float]]


def _per_job(files: Sequence[LogFile], samples: Mapping[Path, list[LogSample]],
             interval_ms: int) -> PerJob:
    out: dict[tuple[tuple[str, int], int], dict[int, list[float]]] = {}
    for f in files:
        for s in samples[f.path]:
            out.setdefault(((f.prefix, f.job), s.direction), {}).setdefault(
                _window(s.time_ms, interval_ms), []).append(s.value)
    return {key: {w: statistics.fmean(v) for w, v in windows.items()}
            for key, windows in out.items()}


def combine(files: Sequence[LogFile], interval_ms: int | None = None) -> FioSeries:
    """The step's series from its jobs' iops, bw and lat logs (other kinds are ignored)."""
    samples: dict[Path, list[LogSample]] = {}
    skipped = 0
    for f in files:
        if f.kind not in ("iops", "bw", "lat"):
            continue
        try:
            parsed, bad = parse_log(f.path.read_text(errors="replace"))
        except OSError:
            parsed, bad = [], 1
        samples[f.path] = parsed
        skipped += bad
    by_kind = {kind: [f for f in files if f.kind == kind and f.path in samples]
               for kind in ("iops", "bw", "lat")}
    interval = interval_ms or _interval(samples[f.path] for f in by_kind["iops"] or
                                        by_kind["lat"] or by_kind["bw"])
    first = [s.time_ms for found in samples.values() for s in found[:1]]
    series = FioSeries(interval_ms=interval, epoch=bool(first) and min(first) >= EPOCH_MS_FLOOR,
                       jobs=len({(f.prefix, f.job) for f in files}), skipped_lines=skipped)
    iops = _per_job(by_kind["iops"], samples, interval)
    bw = _per_job(by_kind["bw"], samples, interval)
    lat = _per_job(by_kind["lat"], samples, interval)
    windows = sorted({w for part in (iops, bw, lat) for per in part.values() for w in per})
    directions = sorted({d for part in (iops, lat) for (_job, d) in part})
    for w in windows:
        series.times.append(w * interval / 1000.0)
        series.iops.append(_sum(iops, w))
        bandwidth = _sum(bw, w)
        series.bytes_per_second.append(None if bandwidth is None else bandwidth * KIB)
        series.latency_seconds.append(_weighted_latency(lat, iops, w))
    for d in directions:
        name = DIRECTIONS[d]
        series.directions[name] = {
            "iops": [_sum(iops, w, d) for w in windows],
            "latency_seconds": [_weighted_latency(lat, iops, w, d) for w in windows],
        }
    return series


def _sum(per_job: PerJob, window: int, direction: int | None = None) -> float | None:
    values = [per[window] for (_job, d), per in per_job.items()
              if window in per and (direction is None or d == direction)]
    return sum(values) if values else None


def _weighted_latency(lat: PerJob, iops: PerJob, window: int,
                      direction: int | None = None) -> float | None:
    """Mean latency (s) of the window over jobs and directions, each weighted by its IOPS in
    the window (equal weights where a job has no IOPS log)."""
    total = weight = 0.0
    for key, per in lat.items():
        if window not in per or (direction is not None and key[1] != direction):
            continue
        w = iops.get(key, {}).get(window, 1.0) if iops else 1.0
        total += per[window] * w
        weight += w
    if weight <= 0:
        return None
    return total / weight * NS


def step_series(step_dir: Path, mode: str, interval_ms: int | None = None) -> FioSeries | None:
    """The series of one mode of a step from the logs in its dir (None when it has none)."""
    files = log_files(step_dir, f"fio-{mode}.")
    if not any(f.kind in ("iops", "lat") for f in files):
        return None
    return combine(files, interval_ms)
