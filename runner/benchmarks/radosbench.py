"""`rados bench` (CBT name `radosbench`): write, then seq or rand reads of what was written.

Parameters follow CBT's benchmark/radosbench.py: `op_size` (bytes, default 4 MiB),
`concurrent_ops` (-t, default 16), `concurrent_procs` (parallel rados processes, each with its
own run name, default 1), `time` (seconds per mode, default 300; `write_time` / `read_time`
override it per mode), `write_only`, `readmode` (seq|rand), `max_objects`, `write_omap`,
`object_set_id` (run-name prefix), `cmd_path`. cephscope adds `object_size` (rados -O).
`pool_profile` / `target_pool` are accepted for CBT files; the runner decides the pool.

Output format: Pacific's rados bench supports `--format json`, but it writes the per-second
objects without flushing them (they reach a pipe only when the run ends) and its `stddev_iops`
is printed with `%d` from a double (garbage, e.g. 1382458288). The plain-text output ends
every line with std::endl, so it streams second by second; cephscope therefore runs the text
format and parses it. The JSON format is parsed too (auto-detected), e.g. for saved outputs.
rados bench keeps no latency histogram, so it cannot report percentiles: only average, stddev,
min and max latency.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from cephscope.runner.benchmarks.base import (
    BenchContext,
    Benchmark,
    BenchmarkError,
    BenchResult,
    ClusterAccess,
    LiveSample,
    Slot,
    client_aggregators,
    client_slots,
    fan_out,
)
from cephscope.runner.benchmarks.paramcheck import positive, type_problems
from cephscope.runner.benchmarks.toolproc import (
    ToolCommand,
    resolve_tool,
    run_quick,
    run_tools,
)
from cephscope.runner.hostexec import HostExec

MIB = 1024 * 1024
READ_MODES = ("seq", "rand")
NO_PERCENTILES_NOTE = "rados bench reports no latency percentiles (it keeps no histogram)"
# seconds a mode takes beyond its run time (connect, drain, metadata)
MODE_OVERHEAD_SECONDS = 3.0

# one per-second object of `rados bench --format json` (flat, all values quoted)
_JSON_SAMPLE_RE = re.compile(r'\{"sec":[^{}\[\]]*\}')
# one per-second line of the plain-text output (optionally prefixed by --show-time)
_TEXT_SAMPLE_RE = re.compile(
    r"^(?:\S+ \S+ )?\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*$"
)
_TEXT_SUMMARY_RE = re.compile(r"^(?:\S+ \S+ )?\s*([A-Z][A-Za-z /()]+?):?\s{2,}(-?[\d.]+(?:e[-+]?\d+)?)\s*$")


@dataclass
class RadosBenchOutput:
    """What one rados bench process printed, normalised to rados's JSON key names."""

    summary: dict[str, float]
    samples: list[dict[str, float]] = field(default_factory=list)


def _normalise_key(text_key: str) -> str:
    key = text_key.strip().lower()
    for noise in ("(mb/sec)", "(s)"):
        key = key.replace(noise, "")
    key = key.strip().rstrip(":").strip()
    return re.sub(r"\s+", "_", key)


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


def parse_json_output(text: str) -> RadosBenchOutput:
    """Parse `rados bench --format json` output; ValueError when it is not that."""
    match = re.search(r"^\{", text, re.MULTILINE)
    start = match.start() if match else -1
    if start < 0:
        raise ValueError("no JSON object in output")
    try:
        doc, _end = json.JSONDecoder().raw_decode(text[start:])
    except json.JSONDecodeError as exc:
        raise ValueError(f"invalid JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise ValueError("top-level JSON value is not an object")
    bench = doc.get("bench", doc)
    if not isinstance(bench, dict):
        raise ValueError("'bench' is not an object")
    summary: dict[str, float] = {}
    for key, value in bench.items():
        number = _number(value)
        if number is not None:
            # older releases spell one key "max_latency:"
            summary[key.rstrip(":")] = number
    samples = []
    for entry in bench.get("datas", []) or []:
        if isinstance(entry, dict):
            sample = {k: n for k, v in entry.items() if (n := _number(v)) is not None}
            if "sec" in sample:
                samples.append(sample)
    # Pacific prints stddev_iops with "%d" from a double: garbage. Recompute it like rados
    # does (sample stddev of the per-second op counts) from the per-second objects.
    if "stddev_iops" in summary:
        summary["stddev_iops"] = _stddev(_per_second_ops(samples))
    return RadosBenchOutput(summary=summary, samples=samples)


def _per_second_ops(samples: Sequence[Mapping[str, float]]) -> list[float]:
    finished = [s.get("finished", 0.0) for s in samples]
    return [b - a for a, b in itertools.pairwise(finished)]


def _sum_per_second(outputs: Sequence[RadosBenchOutput]) -> list[float]:
    series = [_per_second_ops(o.samples) for o in outputs]
    length = min((len(s) for s in series), default=0)
    return [sum(s[i] for s in series) for i in range(length)]


def _stddev(values: Sequence[float]) -> float:
    if len(values) < 2:
        return 0.0
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def parse_text_sample(line: str) -> dict[str, float] | None:
    match = _TEXT_SAMPLE_RE.match(line)
    if not match:
        return None
    names = ("sec", "cur_ops", "started", "finished", "avg_bw", "cur_bw", "last_lat", "avg_lat")
    sample: dict[str, float] = {}
    for name, raw in zip(names, match.groups(), strict=True):
        number = _number(raw)
        # "-" means no op finished in that second
        sample[name] = 0.0 if number is None else number
    return sample


def parse_text_output(text: str) -> RadosBenchOutput:
    summary: dict[str, float] = {}
    samples: list[dict[str, float]] = []
    in_summary = False
    for line in text.splitlines():
        if "Total time run" in line:
            in_summary = True
        if in_summary:
            match = _TEXT_SUMMARY_RE.match(line)
            if match:
                number = _number(match.group(2))
                if number is not None:
                    summary[_normalise_key(match.group(1))] = number
            continue
        sample = parse_text_sample(line)
        if sample is not None:
            samples.append(sample)
    return RadosBenchOutput(summary=summary, samples=samples)


def parse_output(text: str) -> RadosBenchOutput:
    """Parse JSON or plain-text rados bench output (auto-detected)."""
    # rados prints "hints = 1" before the JSON document
    if re.search(r"^\{", text, re.MULTILINE):
        return parse_json_output(text)
    return parse_text_output(text)


def _total_ops(summary: Mapping[str, float]) -> float | None:
    for key in ("total_writes_made", "total_reads_made"):
        if key in summary:
            return summary[key]
    return None


def result_from_outputs(mode: str, outputs: Sequence[RadosBenchOutput]) -> BenchResult:
    """Combine the outputs of the concurrent processes of one mode into one result.

    IOPS and bandwidth add up; the average latency is weighted by each process's op count;
    the stddev is the pooled one (within + between processes); min/max are the extremes.
    """
    if not outputs:
        raise ValueError("no rados bench output to combine")
    iops_total = 0.0
    bandwidth_total = 0.0
    ops_total = 0.0
    runtime = 0.0
    weighted_latency = 0.0
    latency_counts: list[tuple[float, float, float | None]] = []  # (n, mean, stddev)
    mins: list[float] = []
    maxes: list[float] = []
    per_proc: list[dict[str, float]] = []
    for index, output in enumerate(outputs):
        summary = output.summary
        run_time = summary.get("total_time_run")
        ops = _total_ops(summary)
        op_size = summary.get("write_size", summary.get("read_size"))
        if run_time is None or ops is None or run_time <= 0:
            raise ValueError(f"process {index}: summary lacks total time / ops made")
        iops = ops / run_time
        # rados's "MB/sec" is MiB/s; ops x op size is exact
        bandwidth = (
            ops * op_size / run_time if op_size is not None else summary.get("bandwidth", 0.0) * MIB
        )
        iops_total += iops
        bandwidth_total += bandwidth
        ops_total += ops
        runtime = max(runtime, run_time)
        avg = summary.get("average_latency")
        if avg is not None and ops > 0:
            weighted_latency += avg * ops
            latency_counts.append((ops, avg, summary.get("stddev_latency")))
        if "min_latency" in summary and ops > 0:
            mins.append(summary["min_latency"])
        if "max_latency" in summary and ops > 0:
            maxes.append(summary["max_latency"])
        per_proc.append(dict(summary))

    latency_avg = weighted_latency / ops_total if ops_total and latency_counts else None
    latency_stddev: float | None = None
    if latency_avg is not None and all(sd is not None for _n, _m, sd in latency_counts):
        if len(latency_counts) == 1:
            latency_stddev = latency_counts[0][2]
        else:
            pooled = sum(n * ((sd or 0.0) ** 2 + (m - latency_avg) ** 2) for n, m, sd in latency_counts)
            latency_stddev = math.sqrt(pooled / ops_total)
    return BenchResult(
        benchmark="radosbench",
        mode=mode,
        iops=iops_total,
        bandwidth_bytes_per_second=bandwidth_total,
        latency_avg_seconds=latency_avg,
        latency_min_seconds=min(mins) if mins else None,
        latency_max_seconds=max(maxes) if maxes else None,
        latency_stddev_seconds=latency_stddev,
        latency_percentiles_seconds={},
        runtime_seconds=runtime,
        ops=int(ops_total),
        extra={
            "processes": len(outputs),
            "per_process": per_proc,
            # ops finished in each second, all processes added (a warm-up can be cut off)
            "per_second_ops": _sum_per_second(outputs),
            "note": NO_PERCENTILES_NOTE,
        },
    )


class LiveAggregator:
    """Turns the per-second samples of N concurrent processes into one figure per second.

    A second is reported once every still-running process has printed it (or at flush).
    """

    def __init__(self, mode: str, processes: int, op_size: int, report: Callable[[str, LiveSample], None]):
        self.mode = mode
        self.processes = processes
        self.op_size = op_size
        self.report = report
        self._lock = threading.Lock()
        self._pending: dict[int, dict[int, dict[str, float]]] = {}
        self._last_finished: dict[int, float] = {}
        self._reported_up_to = -1

    def add(self, proc_index: int, sample: Mapping[str, float]) -> None:
        with self._lock:
            sec = int(sample.get("sec", -1))
            if sec <= self._reported_up_to:
                return
            finished = sample.get("finished", 0.0)
            done_this_second = max(0.0, finished - self._last_finished.get(proc_index, 0.0))
            self._last_finished[proc_index] = finished
            entry = dict(sample)
            entry["ops_this_second"] = done_this_second
            self._pending.setdefault(sec, {})[proc_index] = entry
            ready = [s for s, procs in self._pending.items() if len(procs) >= self.processes]
            for s in sorted(ready):
                self._emit(s)

    def flush(self) -> None:
        with self._lock:
            for s in sorted(self._pending):
                self._emit(s)

    def _emit(self, sec: int) -> None:
        procs = self._pending.pop(sec, {})
        if not procs or sec <= self._reported_up_to:
            return
        self._reported_up_to = sec
        ops = sum(p["ops_this_second"] for p in procs.values())
        in_flight = sum(p.get("cur_ops", 0.0) for p in procs.values())
        latencies = [
            (p["ops_this_second"], p.get("last_lat", 0.0))
            for p in procs.values()
            if p["ops_this_second"] > 0 and p.get("last_lat", 0.0) > 0
        ]
        weight = sum(n for n, _lat in latencies)
        latency = sum(n * lat for n, lat in latencies) / weight if weight else None
        sample = LiveSample(
            timestamp=time.time(),
            ops_per_second=ops,
            bytes_per_second=ops * self.op_size,
            latency_seconds=latency,
            ops_in_flight=in_flight,
        )
        self.report(self.mode, sample)


class _StreamScanner:
    """Finds per-second samples in a process's stdout as it streams (JSON or text)."""

    def __init__(self, proc_index: int, aggregator: LiveAggregator):
        self.proc_index = proc_index
        self.aggregator = aggregator
        self.buffer = ""

    def feed(self, chunk: str) -> None:
        self.buffer += chunk
        while True:
            json_match = _JSON_SAMPLE_RE.search(self.buffer)
            if json_match:
                try:
                    raw = json.loads(json_match.group(0))
                except json.JSONDecodeError:
                    raw = {}
                sample = {k: n for k, v in raw.items() if (n := _number(v)) is not None}
                if "sec" in sample:
                    self.aggregator.add(self.proc_index, sample)
                self.buffer = self.buffer[json_match.end() :]
                continue
            newline = self.buffer.find("\n")
            if newline < 0 or self.buffer.lstrip().startswith("{"):
                # JSON output: keep the (small) unfinished tail only
                self.buffer = self.buffer[-4096:]
                return
            line, self.buffer = self.buffer[:newline], self.buffer[newline + 1 :]
            text_sample = parse_text_sample(line)
            if text_sample is not None:
                self.aggregator.add(self.proc_index, text_sample)


class RadosBench(Benchmark):
    name: ClassVar[str] = "radosbench"
    report_notes: ClassVar[tuple[str, ...]] = (
        "rados bench reports no latency percentiles: its client p50/p99 columns are empty; the "
        "OSD-side columns come from the OSDs' latency histograms.",)
    load_parameters: ClassVar[tuple[str, ...]] = ("concurrent_ops", "concurrent_procs")
    parameters: ClassVar[Mapping[str, tuple[type, ...]]] = {
        "op_size": (int,),
        "object_size": (int,),
        "concurrent_ops": (int,),
        "concurrent_procs": (int,),
        "time": (int, float),
        "write_time": (int, float),
        "read_time": (int, float),
        "write_only": (bool,),
        "readmode": (str,),
        "max_objects": (int,),
        "write_omap": (bool,),
        "object_set_id": (str,),
        "cmd_path": (str,),
        "pool_profile": (str,),
        "target_pool": (str,),
    }
    defaults: ClassVar[Mapping[str, Any]] = {
        "op_size": 4 * MIB,
        "concurrent_ops": 16,
        "concurrent_procs": 1,
        "time": 300,
        "write_only": False,
        "readmode": "seq",
        "write_omap": False,
        "object_set_id": "",
        "cmd_path": "rados",
    }

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        self.settings = {**self.defaults, **{k: v for k, v in params.items() if v is not None}}
        self._pids: dict[int, int] = {}

    @classmethod
    def validate(cls, params: Mapping[str, Any]) -> list[str]:
        problems = type_problems(cls.name, params, cls.parameters)
        for key in ("op_size", "object_size", "concurrent_ops", "concurrent_procs", "max_objects"):
            problems += positive(cls.name, params, key)
        for key in ("time", "write_time", "read_time"):
            problems += positive(cls.name, params, key)
        readmode = params.get("readmode")
        if isinstance(readmode, str) and readmode not in READ_MODES:
            problems.append(f"{cls.name}: readmode must be one of {', '.join(READ_MODES)}, got {readmode!r}")
        op_size, object_size = params.get("op_size"), params.get("object_size")
        if (
            isinstance(op_size, int)
            and isinstance(object_size, int)
            and not isinstance(op_size, bool)
            and op_size > 0
            and object_size > 0
            and object_size % op_size
        ):
            problems.append(
                f"{cls.name}: object_size ({object_size}) must be a multiple of op_size ({op_size})"
            )
        for key in ("object_set_id", "cmd_path"):
            value = params.get(key)
            if isinstance(value, str) and value and not re.fullmatch(r"[A-Za-z0-9_./-]+", value):
                problems.append(f"{cls.name}: {key} {value!r} may hold only letters, digits, _ . / -")
        return problems

    @classmethod
    def estimated_seconds(cls, params: Mapping[str, Any]) -> float:
        bench = cls(params)
        return sum(bench._mode_seconds(mode) + MODE_OVERHEAD_SECONDS for mode in bench.modes())

    def modes(self) -> Sequence[str]:
        if self.settings["write_only"]:
            return ["write"]
        return ["write", self.settings["readmode"]]

    def _mode_seconds(self, mode: str) -> float:
        key = "write_time" if mode == "write" else "read_time"
        return float(self.settings.get(key, self.settings["time"]))

    def slots(self, ctx: BenchContext) -> list[Slot]:
        return client_slots(ctx, int(self.settings["concurrent_procs"]))

    def run_name(self, ctx: BenchContext, proc_index: int, client: HostExec | None = None) -> str:
        """Distinct per process and client: each reads back and cleans up its own objects."""
        tag = "" if client is None else f"{client.name}-"
        return f"{self.settings['object_set_id']}cephscope-{ctx.step_id}-{tag}{proc_index}"

    def output_paths(self, mode: str, ctx: BenchContext, proc_index: int,
                     client: HostExec | None = None) -> tuple[Path, Path]:
        base = f"radosbench-{mode}.{'' if client is None else client.name + '.'}{proc_index}"
        return ctx.step_dir / f"{base}.txt", ctx.step_dir / f"{base}.stderr"

    def argv(self, mode: str, ctx: BenchContext, proc_index: int, rados: str,
             client: HostExec | None = None) -> list[str]:
        seconds = self._mode_seconds(mode)
        # The cluster's own client tools (a dev cluster release's root filesystem) run here only.
        prefix = ctx.cluster.tool_prefix if client is None else ()
        argv = [*prefix, rados, *ctx.cluster.common_args(), "-p", ctx.pool, "bench", f"{seconds:g}", mode]
        argv += ["-t", str(self.settings["concurrent_ops"])]
        if mode == "write":
            argv += ["-b", str(self.settings["op_size"]), "--no-cleanup"]
            if self.settings.get("object_size"):
                argv += ["-O", str(self.settings["object_size"])]
            if self.settings.get("max_objects"):
                argv += ["--max-objects", str(self.settings["max_objects"])]
            if self.settings["write_omap"]:
                argv.append("--write-omap")
        # plain text on purpose: it is flushed every second (see the module docstring)
        argv += ["--run-name", self.run_name(ctx, proc_index, client)]
        return argv

    def run(self, mode: str, ctx: BenchContext) -> list[Path]:
        local_rados = resolve_tool(self.settings["cmd_path"])
        slots = self.slots(ctx)
        op_size = int(self.settings["op_size"])
        aggregator = LiveAggregator(mode, len(slots), op_size, ctx.report_progress)
        per_client = client_aggregators(
            ctx, slots, lambda processes, report: LiveAggregator(mode, processes, op_size, report))
        commands = []
        for slot in slots:
            stdout_path, stderr_path = self.output_paths(mode, ctx, slot.index, slot.client)
            feeds = [_StreamScanner(slot.overall, aggregator).feed]
            if slot.client is not None:
                feeds.append(_StreamScanner(slot.index, per_client[slot.client.name]).feed)
            rados = local_rados if slot.client is None else str(self.settings["cmd_path"])
            commands.append(
                ToolCommand(
                    argv=self.argv(mode, ctx, slot.index, rados, slot.client),
                    stdout_path=stdout_path,
                    stderr_path=stderr_path,
                    on_output=fan_out(*feeds),
                    env=dict(ctx.env),
                    host=slot.client,
                )
            )
        try:
            outcomes = run_tools(commands, ctx.timeout_seconds, f"radosbench {mode}",
                                 abort=ctx.abort)
        finally:
            for each in (aggregator, *per_client.values()):
                each.flush()
        for slot, outcome in zip(slots, outcomes, strict=False):
            if slot.client is None:  # the pid names the objects' prefix on this machine only
                self._pids[slot.index] = outcome.pid
        return [path for command in commands for path in (command.stdout_path, command.stderr_path)]

    def parse(self, mode: str, ctx: BenchContext) -> BenchResult:
        return self._parse_slots(mode, ctx, self.slots(ctx))

    def _parse_slots(self, mode: str, ctx: BenchContext, slots: Sequence[Slot]) -> BenchResult:
        outputs = [parse_output_file(self.output_paths(mode, ctx, s.index, s.client)[0])
                   for s in slots]
        try:
            return result_from_outputs(mode, outputs)
        except ValueError as exc:
            raise BenchmarkError(f"radosbench {mode}: {exc} (files under {ctx.step_dir})") from exc

    def parse_clients(self, mode: str, ctx: BenchContext) -> dict[str, BenchResult]:
        if not ctx.clients:
            return {}
        slots = self.slots(ctx)
        return {client.name: self._parse_slots(mode, ctx, [s for s in slots if s.client is client])
                for client in ctx.clients}

    def cleanup(self, ctx: BenchContext) -> None:
        """Remove this step's bench objects, one run name per process.

        When a write was cut short its metadata object may be missing; then the object prefix
        (benchmark_data_<host>_<pid>) of the process we started is removed instead.
        """
        rados = resolve_tool(self.settings["cmd_path"])
        errors = []
        for slot in self.slots(ctx):
            index = slot.index
            base = [*ctx.cluster.tool_prefix, rados, *ctx.cluster.common_args(), "-p", ctx.pool,
                    "cleanup"]
            done = run_quick(
                [*base, "--run-name", self.run_name(ctx, index, slot.client)],
                min(ctx.timeout_seconds, 600),
                "radosbench cleanup",
                ctx.env,
            )
            if done.returncode == 0:
                continue
            pid = self._pids.get(index) if slot.client is None else None
            if pid is not None:
                prefix = f"benchmark_data_{socket.gethostname()[:29]}_{pid}"
                done = run_quick(
                    [*base, "--prefix", prefix], min(ctx.timeout_seconds, 600), "radosbench cleanup", ctx.env
                )
                if done.returncode == 0:
                    continue
            errors.append(done.stderr.strip()[-500:])
        if errors:
            raise BenchmarkError("radosbench cleanup failed: " + " | ".join(errors))


def parse_output_file(path: Path) -> RadosBenchOutput:
    """Parse one process's saved output; a clear error naming the file when it is garbage."""
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        raise BenchmarkError(f"radosbench: cannot read output {path}: {exc}") from exc
    try:
        output = parse_output(text)
    except ValueError as exc:
        raise BenchmarkError(f"radosbench: unparseable output in {path}: {exc}") from exc
    if "total_time_run" not in output.summary or _total_ops(output.summary) is None:
        raise BenchmarkError(
            f"radosbench: no summary (total time run / ops made) in {path}; "
            "the tool was cut short or printed something else"
        )
    return output


def prefill_argv(cluster: ClusterAccess, pool: str, *, object_size: int, threads: int,
                 max_objects: int, seconds: int = 600) -> list[str]:
    """`rados bench write` that leaves `max_objects` objects in `pool` (the recovery test's
    prefill: CBT's `prefill_recovery_*` pool-profile keys)."""
    return [*cluster.tool_prefix, "rados", *cluster.common_args(), "-p", pool,
            "bench", str(seconds), "write", "--no-cleanup", "-b", str(object_size),
            "-t", str(threads), "--max-objects", str(max_objects)]
