"""fio with the rbd engine (CBT name `librbdfio`).

Parameters follow CBT's benchmark/librbdfio.py: `mode` (fio rw=), `op_size` (bytes or '4k'),
`iodepth` (per fio process), `numjobs`, `volumes` (CBT: `volumes_per_client`),
`procs_per_volume`, `vol_size` (MiB), `vol_object_size` (RBD object size: an order like 22,
bytes, or '4M'), `rwmixread`, `time`, `time_based`, `ramp`, `norandommap`,
`random_distribution`, `rate_iops`, `end_fsync`, `use_existing_volumes` + `rbdname`,
`prefill`, `cmd_path`. `pool_profile` / `poolname` are accepted for CBT files; the runner
decides the pool.

Volumes: unless `use_existing_volumes`, prepare() creates one image per volume
(`cephscope-<step>-<n>`, `rbd create --size --object-size`), so the object size can be a sweep
axis, and cleanup() removes them. Reads of never-written RBD extents are answered without
touching the OSDs' disks, so images are prefilled with 4 MiB sequential writes before any mode
that reads (`prefill: false` skips that, `prefill: true` forces it).

fio runs with `--output-format=json+ --status-interval=1 --lat_percentiles=1`: it prints a full
JSON report every second (used for live figures, deltas between reports) and the final report
last; `json+` adds latency bins so percentiles of several processes and directions are merged
exactly. Latencies are fio's total latency (submission + completion), ns -> seconds.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from cephscope.runner.benchmarks.base import (
    BenchContext,
    Benchmark,
    BenchmarkError,
    BenchResult,
    LiveSample,
    Slot,
    client_aggregators,
    client_slots,
    fan_out,
)
from cephscope.runner.benchmarks.paramcheck import parse_size, positive, type_problems
from cephscope.runner.benchmarks.toolproc import (
    ToolCommand,
    resolve_tool,
    run_quick,
    run_tools,
    stderr_tail,
)
from cephscope.runner.hostexec import HostExec

MIB = 1024 * 1024
NS = 1e-9
READ_MODES = ("read", "randread")
MIXED_MODES = ("rw", "readwrite", "randrw")
WRITE_MODES = ("write", "randwrite", "trim", "randtrim")
FIO_MODES = READ_MODES + MIXED_MODES + WRITE_MODES
DIRECTIONS = ("read", "write", "trim")
# fio's default percentile list, as reported keys
PERCENTILES = ("1", "5", "10", "20", "30", "40", "50", "60", "70", "80", "90", "95", "99",
               "99.5", "99.9", "99.95", "99.99")
PREFILL_BLOCK = 4 * MIB
STARTUP_SECONDS = 3.0
# a rough floor for prefill speed, only for estimates
PREFILL_BYTES_PER_SECOND = 100 * MIB


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


def result_from_reports(mode: str, reports: Sequence[Mapping[str, Any]]) -> BenchResult:
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
        benchmark="librbdfio",
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


class _StreamScanner:
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


class LibrbdFio(Benchmark):
    name: ClassVar[str] = "librbdfio"
    pool_application: ClassVar[str] = "rbd"
    load_parameters: ClassVar[tuple[str, ...]] = (
        "iodepth", "numjobs", "procs_per_volume", "volumes", "volumes_per_client", "rate_iops")
    parameters: ClassVar[Mapping[str, tuple[type, ...]]] = {
        "mode": (str,),
        "op_size": (int, str),
        "iodepth": (int,),
        "numjobs": (int,),
        "volumes": (int,),
        "volumes_per_client": (int,),
        "procs_per_volume": (int,),
        "vol_size": (int,),
        "vol_object_size": (int, str),
        "rwmixread": (int,),
        "time": (int, float),
        "time_based": (bool,),
        "ramp": (int, float),
        "norandommap": (bool,),
        "random_distribution": (str,),
        "rate_iops": (int,),
        "end_fsync": (int,),
        "use_existing_volumes": (bool,),
        "rbdname": (str,),
        "prefill": (bool,),
        "cmd_path": (str,),
        "pool_profile": (str,),
        "data_pool_profile": (str,),
        "poolname": (str,),
    }
    defaults: ClassVar[Mapping[str, Any]] = {
        "mode": "write",
        "op_size": 4 * MIB,
        "iodepth": 16,
        "numjobs": 1,
        "volumes": 1,
        "procs_per_volume": 1,
        "vol_size": 1024,
        "vol_object_size": 22,
        "rwmixread": 50,
        "time": 60,
        "time_based": True,
        "norandommap": False,
        "end_fsync": 0,
        "use_existing_volumes": False,
        "rbdname": "",
        "cmd_path": "fio",
    }

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        given = {k: v for k, v in params.items() if v is not None}
        if "volumes_per_client" in given and "volumes" not in given:
            given["volumes"] = given["volumes_per_client"]
        self.settings: dict[str, Any] = {**self.defaults, **given}
        self._created_images: list[str] = []

    # -- spec side -------------------------------------------------------------------------
    @classmethod
    def validate(cls, params: Mapping[str, Any]) -> list[str]:
        problems = type_problems(cls.name, params, cls.parameters)
        for key in ("iodepth", "numjobs", "volumes", "volumes_per_client", "procs_per_volume",
                    "vol_size", "time", "rate_iops"):
            problems += positive(cls.name, params, key)
        for key in ("ramp", "end_fsync"):
            problems += positive(cls.name, params, key, allow_zero=True)
        mode = params.get("mode")
        if isinstance(mode, str) and mode not in FIO_MODES:
            problems.append(f"{cls.name}: mode must be one of {', '.join(FIO_MODES)}, got {mode!r}")
        mix = params.get("rwmixread")
        if isinstance(mix, int) and not isinstance(mix, bool) and not 0 <= mix <= 100:
            problems.append(f"{cls.name}: rwmixread must be 0..100, got {mix!r}")
        if isinstance(params.get("op_size"), int | str) and not isinstance(params.get("op_size"), bool):
            try:
                if parse_size(params["op_size"]) <= 0:
                    problems.append(f"{cls.name}: op_size must be > 0, got {params['op_size']!r}")
            except ValueError as exc:
                problems.append(f"{cls.name}: op_size: {exc}")
        if "vol_object_size" in params and isinstance(params["vol_object_size"], int | str):
            try:
                object_size_bytes(params["vol_object_size"])
            except ValueError as exc:
                problems.append(f"{cls.name}: vol_object_size: {exc}")
        if params.get("use_existing_volumes") is True and not params.get("rbdname"):
            problems.append(f"{cls.name}: use_existing_volumes needs rbdname")
        for key in ("rbdname", "cmd_path", "random_distribution"):
            value = params.get(key)
            if isinstance(value, str) and value and not re.fullmatch(r"[A-Za-z0-9_.:/-]+", value):
                problems.append(f"{cls.name}: {key} {value!r} may hold only letters, digits, _ . : / -")
        return problems

    @classmethod
    def estimated_seconds(cls, params: Mapping[str, Any]) -> float:
        bench = cls(params)
        seconds = float(bench.settings["time"]) + float(bench.settings.get("ramp") or 0)
        seconds += STARTUP_SECONDS
        if bench.needs_prefill():
            size = int(bench.settings["vol_size"]) * MIB * int(bench.settings["volumes"])
            seconds += size / PREFILL_BYTES_PER_SECOND + STARTUP_SECONDS
        return seconds

    def modes(self) -> Sequence[str]:
        return [str(self.settings["mode"])]

    def needs_prefill(self) -> bool:
        explicit = self.settings.get("prefill")
        if explicit is not None:
            return bool(explicit)
        return not self.settings["use_existing_volumes"] and self.settings["mode"] in READ_MODES + MIXED_MODES

    # -- lifecycle -------------------------------------------------------------------------
    def client_images(self, ctx: BenchContext, client: HostExec | None) -> list[str]:
        """The volumes one client writes: its own, so clients never share an image."""
        volumes = int(self.settings["volumes"])
        if self.settings["use_existing_volumes"]:
            base = str(self.settings["rbdname"])
            return [base] if volumes == 1 else [f"{base}-{i}" for i in range(volumes)]
        tag = "" if client is None else f"{client.name}-"
        return [f"cephscope-{ctx.step_id}-{tag}{i}" for i in range(volumes)]

    def image_names(self, ctx: BenchContext) -> list[str]:
        names: list[str] = []
        for client in list(ctx.clients) or [None]:
            names += [n for n in self.client_images(ctx, client) if n not in names]
        return names

    def tool_env(self, ctx: BenchContext) -> dict[str, str]:
        # fio's rbd engine reads the cluster config from CEPH_CONF, extra options from CEPH_ARGS
        env = {"CEPH_CONF": str(ctx.cluster.conf_path)}
        if ctx.cluster.keyring_path is not None:
            env["CEPH_ARGS"] = f"--keyring={ctx.cluster.keyring_path}"
        env.update(ctx.env)
        return env

    def client_id(self, ctx: BenchContext) -> str:
        name = ctx.cluster.client_name
        return name.split(".", 1)[1] if name.startswith("client.") else name

    def _rbd(self, ctx: BenchContext, *args: str) -> list[str]:
        return [resolve_tool("rbd"), *ctx.cluster.common_args(), *args]

    def prepare(self, ctx: BenchContext) -> None:
        ctx.step_dir.mkdir(parents=True, exist_ok=True)
        images = self.image_names(ctx)
        timeout = min(ctx.timeout_seconds, 300)
        if self.settings["use_existing_volumes"]:
            for image in images:
                spec = f"{ctx.pool}/{image}"
                info = run_quick(self._rbd(ctx, "info", spec), timeout, "librbdfio prepare", ctx.env)
                if info.returncode != 0:
                    reason = info.stderr.strip()[-500:]
                    raise BenchmarkError(f"librbdfio: existing volume {spec} not usable: {reason}")
        else:
            object_size = object_size_bytes(self.settings["vol_object_size"])
            for image in images:
                spec = f"{ctx.pool}/{image}"
                # a leftover of an interrupted attempt of this same step: start clean
                run_quick(self._rbd(ctx, "rm", "--no-progress", spec), timeout, "librbdfio prepare", ctx.env)
                data_pool = ["--data-pool", ctx.data_pool] if ctx.data_pool else []
                created = run_quick(
                    self._rbd(ctx, "create", "--size", f"{int(self.settings['vol_size'])}M",
                              "--object-size", str(object_size), *data_pool, spec),
                    timeout, "librbdfio prepare", ctx.env,
                )
                if created.returncode != 0:
                    reason = created.stderr.strip()[-500:]
                    raise BenchmarkError(f"librbdfio: rbd create {spec} failed: {reason}")
                self._created_images.append(image)
        if self.needs_prefill():
            self._prefill(ctx, images)

    def _prefill(self, ctx: BenchContext, images: Sequence[str]) -> None:
        fio = resolve_tool(str(self.settings["cmd_path"]))
        commands = []
        for index, image in enumerate(images):
            argv = [
                *ctx.cluster.tool_prefix, fio, f"--name=prefill-{index}", "--ioengine=rbd",
                f"--clientname={self.client_id(ctx)}",
                f"--pool={ctx.pool}", f"--rbdname={image}", "--invalidate=0", "--rw=write",
                f"--bs={PREFILL_BLOCK}", "--iodepth=16", "--direct=1",
                f"--size={int(self.settings['vol_size'])}M", "--output-format=json",
            ]
            commands.append(
                ToolCommand(argv, ctx.step_dir / f"fio-prefill.{index}.json",
                            ctx.step_dir / f"fio-prefill.{index}.stderr", env=self.tool_env(ctx))
            )
        run_tools(commands, ctx.timeout_seconds, "librbdfio prefill")

    def argv(self, ctx: BenchContext, fio: str, image: str, name: str, local: bool = True) -> list[str]:
        s = self.settings
        argv = [
            # The cluster's own client tools (a dev cluster release's root filesystem) run here only.
            *(ctx.cluster.tool_prefix if local else ()), fio, f"--name={name}", "--ioengine=rbd",
            f"--clientname={self.client_id(ctx)}",
            f"--pool={ctx.pool}", f"--rbdname={image}", "--invalidate=0", f"--rw={s['mode']}",
            f"--bs={parse_size(s['op_size'])}", f"--iodepth={int(s['iodepth'])}",
            f"--numjobs={int(s['numjobs'])}", "--direct=1", "--group_reporting",
            "--lat_percentiles=1", "--output-format=json+", "--status-interval=1",
            f"--runtime={s['time']:g}",
        ]
        if s["time_based"]:
            argv.append("--time_based")
        if s.get("ramp"):
            argv.append(f"--ramp_time={s['ramp']:g}")
        if s["mode"] in MIXED_MODES:
            argv.append(f"--rwmixread={int(s['rwmixread'])}")
        if s["norandommap"]:
            argv.append("--norandommap")
        if s.get("random_distribution"):
            argv.append(f"--random_distribution={s['random_distribution']}")
        if s.get("rate_iops"):
            argv.append(f"--rate_iops={int(s['rate_iops'])}")
        if s["end_fsync"]:
            argv.append(f"--end_fsync={int(s['end_fsync'])}")
        return argv

    def slots(self, ctx: BenchContext) -> list[Slot]:
        return client_slots(ctx, int(self.settings["volumes"]) * int(self.settings["procs_per_volume"]))

    def slot_paths(self, mode: str, ctx: BenchContext, slot: Slot) -> tuple[Path, Path]:
        base = f"fio-{mode}.{slot.label}{slot.index}"
        return ctx.step_dir / f"{base}.json", ctx.step_dir / f"{base}.stderr"

    def output_paths(self, mode: str, ctx: BenchContext) -> list[tuple[Path, Path]]:
        return [self.slot_paths(mode, ctx, slot) for slot in self.slots(ctx)]

    def run(self, mode: str, ctx: BenchContext) -> list[Path]:
        local_fio = resolve_tool(str(self.settings["cmd_path"]))
        slots = self.slots(ctx)
        paths = self.output_paths(mode, ctx)
        aggregator = LiveAggregator(mode, len(paths), ctx.report_progress)
        per_client = client_aggregators(
            ctx, slots, lambda processes, report: LiveAggregator(mode, processes, report))
        commands = []
        for slot, (stdout_path, stderr_path) in zip(slots, paths, strict=True):
            images = self.client_images(ctx, slot.client)
            image = images[slot.index % len(images)]
            feeds = [_StreamScanner(slot.overall, aggregator).feed]
            if slot.client is not None:
                feeds.append(_StreamScanner(slot.index, per_client[slot.client.name]).feed)
            # a client resolves the tool on its own PATH
            fio = local_fio if slot.client is None else str(self.settings["cmd_path"])
            commands.append(
                ToolCommand(
                    self.argv(ctx, fio, image, f"cephscope-{slot.index}", local=slot.client is None),
                    stdout_path, stderr_path, on_output=fan_out(*feeds), env=self.tool_env(ctx),
                    host=slot.client,
                )
            )
        try:
            run_tools(commands, ctx.timeout_seconds, f"librbdfio {mode}", abort=ctx.abort)
        finally:
            for each in (aggregator, *per_client.values()):
                each.flush()
        return [p for pair in paths for p in pair]

    def parse(self, mode: str, ctx: BenchContext) -> BenchResult:
        return self._parse_slots(mode, ctx, self.slots(ctx))

    def _parse_slots(self, mode: str, ctx: BenchContext, slots: Sequence[Slot]) -> BenchResult:
        # Every process's json+ latency bins together: percentiles of the aggregate are exact.
        reports = [parse_report_file(*self.slot_paths(mode, ctx, slot)) for slot in slots]
        try:
            return result_from_reports(mode, reports)
        except ValueError as exc:
            raise BenchmarkError(f"librbdfio {mode}: {exc} (files under {ctx.step_dir})") from exc

    def parse_clients(self, mode: str, ctx: BenchContext) -> dict[str, BenchResult]:
        if not ctx.clients:
            return {}
        slots = self.slots(ctx)
        return {client.name: self._parse_slots(mode, ctx, [s for s in slots if s.client is client])
                for client in ctx.clients}

    def cleanup(self, ctx: BenchContext) -> None:
        errors = []
        for image in list(self._created_images):
            spec = f"{ctx.pool}/{image}"
            done = run_quick(self._rbd(ctx, "rm", "--no-progress", spec),
                             min(ctx.timeout_seconds, 600), "librbdfio cleanup", ctx.env)
            if done.returncode == 0 or "No such file" in done.stderr:
                self._created_images.remove(image)
            else:
                errors.append(f"{spec}: {done.stderr.strip()[-300:]}")
        if errors:
            raise BenchmarkError("librbdfio cleanup failed: " + " | ".join(errors))


def object_size_bytes(value: Any) -> int:
    """RBD object size from an order (12..25, as CBT's vol_object_size), bytes, or '4M'."""
    if isinstance(value, bool):
        raise ValueError(f"expected an order or a size, got {value!r}")
    size = 1 << value if isinstance(value, int) and 0 <= value <= 32 else parse_size(value)
    if size < 4096 or size > 32 * MIB or size & (size - 1):
        raise ValueError(f"RBD object size must be a power of two from 4K to 32M, got {value!r}")
    return size


def parse_report_file(path: Path, stderr_path: Path | None = None) -> dict[str, Any]:
    """The final report of one fio process's saved output; errors name the file."""
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        raise BenchmarkError(f"librbdfio: cannot read output {path}: {exc}") from exc
    try:
        return final_report(text)
    except ValueError as exc:
        tail = stderr_tail(stderr_path) if stderr_path else ""
        detail = f"; stderr: {tail}" if tail else ""
        raise BenchmarkError(f"librbdfio: unparseable output in {path}: {exc}{detail}") from exc
