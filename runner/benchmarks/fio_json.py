"""fio's JSON reports and the fio processes that stream them, for every benchmark that runs
fio (`librbdfio`, `fio`, `rawfio`).

fio runs with `--output-format=json+ --status-interval=1 --lat_percentiles=1`: it prints a full
JSON report every second (live figures: deltas between reports) and the final report last;
`json+` adds latency bins, so percentiles of several processes and directions are merged
exactly. Latencies are fio's total latency (submission + completion), ns -> seconds.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cephscope.runner.benchmarks.base import (
    BenchContext,
    BenchmarkError,
    BenchResult,
    LiveSample,
    Slot,
    client_aggregators,
    fan_out,
)
from cephscope.runner.benchmarks.toolproc import ToolCommand, run_tools, stderr_tail

NS = 1e-9
READ_MODES = ("read", "randread")
MIXED_MODES = ("rw", "readwrite", "randrw")
WRITE_MODES = ("write", "randwrite", "trim", "randtrim")
FIO_MODES = READ_MODES + MIXED_MODES + WRITE_MODES
DIRECTIONS = ("read", "write", "trim")
# fio's default percentile list, as reported keys
PERCENTILES = ("1", "5", "10", "20", "30", "40", "50", "60", "70", "80", "90", "95", "99",
               "99.5", "99.9", "99.95", "99.99")


def percentile_key(raw: str | float) -> str:
    """'99.900000' -> '99.9', '50.000000' -> '50'."""
    return f"{float(raw):.6f}".rstrip("0").rstrip(".")


def iter_json_objects(text: str) -> Iterator[dict[str, Any]]:
    """Every top-level JSON object in a stream (fio prints one per status interval and may
    print plain warning lines between them)."""
    decoder = json.JSONDecoder()
    pos = 0
    while True:
        start = text.find("{", pos)
        if start < 0:
            return
        try:
            obj, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            # not JSON here (a warning line holding '{', or a truncated tail): move on
            pos = start + 1
            continue
        if isinstance(obj, dict):
            yield obj
        pos = end


def final_report(text: str) -> dict[str, Any]:
    """The last complete fio report of a stream; ValueError when there is none."""
    last: dict[str, Any] | None = None
    for obj in iter_json_objects(text):
        if isinstance(obj.get("jobs"), list):
            last = obj
    if last is None:
        raise ValueError("no fio JSON report (an object with 'jobs') in output")
    return last


def _merge_stats(parts: Sequence[Mapping[str, Any]]) -> dict[str, float | None]:
    """Combine fio latency stats (min/max/mean/stddev/N, ns) of several sources."""
    used = [p for p in parts if p and float(p.get("N", 0) or 0) > 0]
    if not used:
        return {"n": 0, "mean": None, "min": None, "max": None, "stddev": None}
    total = sum(float(p["N"]) for p in used)
    mean = sum(float(p["mean"]) * float(p["N"]) for p in used) / total
    pooled = sum(
        float(p["N"]) * (float(p.get("stddev", 0.0)) ** 2 + (float(p["mean"]) - mean) ** 2)
        for p in used
    )
    return {
        "n": total,
        "mean": mean,
        "min": min(float(p["min"]) for p in used),
        "max": max(float(p["max"]) for p in used),
        "stddev": math.sqrt(pooled / total),
    }


def percentiles_from_bins(bins: Mapping[float, float]) -> dict[str, float]:
    """Percentiles (ns) the way fio computes them: first bin whose running count reaches p%."""
    total = sum(bins.values())
    if total <= 0:
        return {}
    ordered = sorted(bins.items())
    result: dict[str, float] = {}
    for key in PERCENTILES:
        threshold = float(key) / 100.0 * total
        running = 0.0
        for value, count in ordered:
            running += count
            if running >= threshold:
                result[key] = value
                break
    return result


def _latency_block(direction: Mapping[str, Any]) -> Mapping[str, Any]:
    """Total latency when fio has it with percentiles, else completion latency."""
    lat = direction.get("lat_ns") or {}
    if "percentile" in lat or "bins" in lat:
        return lat
    return direction.get("clat_ns") or lat


def result_from_reports(mode: str, reports: Sequence[Mapping[str, Any]],
                        benchmark: str = "librbdfio") -> BenchResult:
    """Combine the final reports of all fio processes of one step into one result."""
    if not reports:
        raise ValueError("no fio report to combine")
    iops = 0.0
    bandwidth = 0.0
    ops = 0
    runtime_ms = 0.0
    lat_parts: list[Mapping[str, Any]] = []
    bins: dict[float, float] = {}
    bins_complete = True
    percentile_sources: list[tuple[float, dict[str, float]]] = []
    per_direction: dict[str, list[Mapping[str, Any]]] = {}
    per_direction_totals: dict[str, dict[str, float]] = {}
    cpu_usr: list[float] = []
    cpu_sys: list[float] = []
    for report_index, report in enumerate(reports):
        for job in report.get("jobs", []):
            if int(job.get("error", 0) or 0):
                raise ValueError(
                    f"report {report_index}: job {job.get('jobname')!r} error {job.get('error')}"
                )
            cpu_usr.append(float(job.get("usr_cpu", 0.0)))
            cpu_sys.append(float(job.get("sys_cpu", 0.0)))
            for name in DIRECTIONS:
                direction = job.get(name)
                if not isinstance(direction, dict) or not direction.get("total_ios"):
                    continue
                iops += float(direction.get("iops", 0.0))
                bandwidth += float(direction.get("bw_bytes", 0.0))
                ops += int(direction.get("total_ios", 0))
                runtime_ms = max(runtime_ms, float(direction.get("runtime", 0.0)))
                totals = per_direction_totals.setdefault(name, {"iops": 0.0, "bw_bytes": 0.0, "ops": 0})
                totals["iops"] += float(direction.get("iops", 0.0))
                totals["bw_bytes"] += float(direction.get("bw_bytes", 0.0))
                totals["ops"] += int(direction.get("total_ios", 0))
                block = _latency_block(direction)
                lat_parts.append(block)
                per_direction.setdefault(name, []).append(block)
                if "bins" in block:
                    for value, count in block["bins"].items():
                        bins[float(value)] = bins.get(float(value), 0.0) + float(count)
                else:
                    bins_complete = False
                if "percentile" in block:
                    percentile_sources.append(
                        (float(block.get("N", 0) or 0),
                         {percentile_key(k): float(v) for k, v in block["percentile"].items()})
                    )
    if ops == 0:
        raise ValueError("fio completed no I/O")

    merged = _merge_stats(lat_parts)
    percentile_method = "none"
    percentiles_ns: dict[str, float] = {}
    if len(percentile_sources) == 1:
        percentiles_ns = percentile_sources[0][1]
        percentile_method = "fio"
    elif bins and bins_complete:
        percentiles_ns = percentiles_from_bins(bins)
        percentile_method = "merged-bins"
    elif percentile_sources:
        # without bins, the op-count-weighted mean of the sources' percentiles (approximate)
        total = sum(n for n, _p in percentile_sources) or 1.0
        keys = set.intersection(*(set(p) for _n, p in percentile_sources))
        percentiles_ns = {k: sum(n * p[k] for n, p in percentile_sources) / total for k in keys}
        percentile_method = "weighted-approximation"

    directions_extra = {}
    for name, blocks in per_direction.items():
        stats = _merge_stats(blocks)
        directions_extra[name] = {
            **per_direction_totals[name],
            "latency_avg_seconds": _seconds(stats["mean"]),
            "latency_max_seconds": _seconds(stats["max"]),
        }
    return BenchResult(
        benchmark=benchmark,
        mode=mode,
        iops=iops,
        bandwidth_bytes_per_second=bandwidth,
        latency_avg_seconds=_seconds(merged["mean"]),
        latency_min_seconds=_seconds(merged["min"]),
        latency_max_seconds=_seconds(merged["max"]),
        latency_stddev_seconds=_seconds(merged["stddev"]),
        latency_percentiles_seconds={
            k: v * NS for k, v in sorted(percentiles_ns.items(), key=lambda kv: float(kv[0]))
        },
        runtime_seconds=runtime_ms / 1000.0,
        ops=ops,
        extra={
            "processes": len(reports),
            "directions": directions_extra,
            "percentile_method": percentile_method,
            "client_cpu_usr_percent": sum(cpu_usr),
            "client_cpu_sys_percent": sum(cpu_sys),
            "fio_version": reports[0].get("fio version"),
        },
    )


def _seconds(ns: float | None) -> float | None:
    return None if ns is None else ns * NS


def _cumulative(report: Mapping[str, Any]) -> tuple[float, float, float]:
    """(ops, bytes, latency-sum ns) so far, over all jobs and directions of a report."""
    ops = data = lat_sum = 0.0
    for job in report.get("jobs", []):
        for name in DIRECTIONS:
            direction = job.get(name)
            if not isinstance(direction, dict):
                continue
            ops += float(direction.get("total_ios", 0) or 0)
            data += float(direction.get("io_bytes", 0) or 0)
            lat = direction.get("lat_ns") or {}
            lat_sum += float(lat.get("mean", 0.0) or 0.0) * float(lat.get("N", 0) or 0)
    return ops, data, lat_sum


class LiveAggregator:
    """Per-interval figures from fio's cumulative status reports, summed over processes.

    Interval k is reported once every process has printed its k-th report (or at flush)."""

    def __init__(self, mode: str, processes: int, report: Callable[[str, LiveSample], None]):
        self.mode = mode
        self.processes = processes
        self.report = report
        self._lock = threading.Lock()
        self._previous: dict[int, tuple[float, float, float, float]] = {}
        self._count: dict[int, int] = {}
        self._pending: dict[int, dict[int, tuple[float, float, float, float]]] = {}
        self._reported_up_to = -1

    def add(self, proc_index: int, status: Mapping[str, Any]) -> None:
        with self._lock:
            now_ms = float(status.get("timestamp_ms", time.time() * 1000))
            ops, data, lat_sum = _cumulative(status)
            previous = self._previous.get(proc_index)
            self._previous[proc_index] = (now_ms, ops, data, lat_sum)
            if previous is None:
                # first report: figures since the start of the job
                start_ms = now_ms - 1000.0 * max(
                    (float(j.get("elapsed", 1) or 1) for j in status.get("jobs", [])), default=1.0
                )
                previous = (start_ms, 0.0, 0.0, 0.0)
            dt = max(1e-3, (now_ms - previous[0]) / 1000.0)
            delta = (dt, ops - previous[1], data - previous[2], lat_sum - previous[3])
            index = self._count.get(proc_index, 0)
            self._count[proc_index] = index + 1
            self._pending.setdefault(index, {})[proc_index] = delta
            for k in sorted(k for k, v in self._pending.items() if len(v) >= self.processes):
                self._emit(k)

    def flush(self) -> None:
        with self._lock:
            for k in sorted(self._pending):
                self._emit(k)

    def _emit(self, index: int) -> None:
        parts = self._pending.pop(index, {})
        if not parts or index <= self._reported_up_to:
            return
        self._reported_up_to = index
        ops_per_second = sum(d_ops / dt for dt, d_ops, _b, _l in parts.values())
        bytes_per_second = sum(d_bytes / dt for dt, _o, d_bytes, _l in parts.values())
        total_ops = sum(d_ops for _t, d_ops, _b, _l in parts.values())
        total_lat = sum(d_lat for _t, _o, _b, d_lat in parts.values())
        latency = total_lat / total_ops * NS if total_ops > 0 else None
        self.report(
            self.mode,
            LiveSample(
                timestamp=time.time(),
                ops_per_second=ops_per_second,
                bytes_per_second=bytes_per_second,
                latency_seconds=latency,
            ),
        )


class StreamScanner:
    """Finds complete fio reports in a process's stdout as it streams."""

    # fio closes each top-level report with a '}' alone on a line
    _END_RE = re.compile(r"^\}\s*$", re.MULTILINE)

    def __init__(self, proc_index: int, aggregator: LiveAggregator):
        self.proc_index = proc_index
        self.aggregator = aggregator
        self.buffer = ""

    def feed(self, chunk: str) -> None:
        self.buffer += chunk
        while True:
            end = self._END_RE.search(self.buffer)
            if end is None:
                return
            candidate, self.buffer = self.buffer[: end.end()], self.buffer[end.end() :]
            for report in iter_json_objects(candidate):
                if isinstance(report.get("jobs"), list):
                    self.aggregator.add(self.proc_index, report)



def parse_report_file(path: Path, stderr_path: Path | None = None,
                      benchmark: str = "librbdfio") -> dict[str, Any]:
    """The final report of one fio process's saved output; errors name the file."""
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        raise BenchmarkError(f"{benchmark}: cannot read output {path}: {exc}") from exc
    try:
        return final_report(text)
    except ValueError as exc:
        tail = stderr_tail(stderr_path) if stderr_path else ""
        detail = f"; stderr: {tail}" if tail else ""
        raise BenchmarkError(f"{benchmark}: unparseable output in {path}: {exc}{detail}") from exc


@dataclass(frozen=True)
class FioProcess:
    """One fio process of a step: where it runs (its slot), its argv, where its output goes."""

    slot: Slot
    argv: Sequence[str]
    stdout_path: Path
    stderr_path: Path


def run_fio(processes: Sequence[FioProcess], ctx: BenchContext, mode: str,
            env: Mapping[str, str], what: str) -> None:
    """Run the processes at once (each on its slot's client), their status reports feeding the
    step's live figures and each client's own; BenchmarkError when one fails."""
    aggregator = LiveAggregator(mode, len(processes), ctx.report_progress)
    per_client = client_aggregators(
        ctx, [p.slot for p in processes],
        lambda count, report: LiveAggregator(mode, count, report))
    commands = []
    for p in processes:
        feeds = [StreamScanner(p.slot.overall, aggregator).feed]
        if p.slot.client is not None:
            feeds.append(StreamScanner(p.slot.index, per_client[p.slot.client.name]).feed)
        commands.append(ToolCommand(p.argv, p.stdout_path, p.stderr_path,
                                    on_output=fan_out(*feeds), env=env, host=p.slot.client))
    try:
        run_tools(commands, ctx.timeout_seconds, what, abort=ctx.abort)
    finally:
        for each in (aggregator, *per_client.values()):
            each.flush()


def result_of_processes(benchmark: str, mode: str, processes: Sequence[tuple[Path, Path]],
                        where: Path) -> BenchResult:
    """One result from the saved output (stdout, stderr) of several fio processes: every
    process's json+ latency bins together, so the aggregate's percentiles are exact."""
    reports = [parse_report_file(out, err, benchmark) for out, err in processes]
    try:
        return result_from_reports(mode, reports, benchmark)
    except ValueError as exc:
        raise BenchmarkError(f"{benchmark} {mode}: {exc} (files under {where})") from exc
