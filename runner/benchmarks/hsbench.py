"""hsbench (github.com/markhpc/hsbench, Go) against the gateway's S3 API: CBT's `hsbench`
benchmark, its keys as CBT's benchmark/hsbench.py reads them.

Parameters (CBT's): `cmd_path` (default `hsbench`), `buckets` (-b), `bucket_prefix` (-bp;
default `cephscope-<step>-`, so the step's buckets are its own), `duration` (-d, seconds per
phase, -1 unlimited), `loop` (-l), `modes` (-m, hsbench's mode letters; default `cxipgdx`),
`max_keys` (-mk), `objects` (-n, -1 unlimited; not both unlimited), `object_prefix` (-op),
`per_client_object_prefix` (default true: `<client>-<process>-` appended, as CBT appends its
host and endpoint), `region` (-r), `report_intervals` (-ri; CBT's example writes
`report_interval`, accepted alike), `threads` (-t), `size` (-z, e.g. '4K'), `prefill` /
`prefill_modes` (a run of those modes, default `cxip`, before the measured one),
`client_endpoints` (the name of CBT's `client_endpoints` section of driver `s3` holding the
endpoint and keys: see runner/rgw_endpoint.py). cephscope adds `concurrent_procs` (hsbench
processes per client, each with its own object prefix).

Each measured hsbench mode is a mode of the step, in the order `modes` (times `loop`) runs
them: `p` put, `l` list, `g` get, `d` del (a repeated letter: `put.2`, ...); `c`, `x`, `i`
(clear, delete, create the buckets) are housekeeping inside the neighbouring windows. The keys
go to hsbench through its environment (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, which it
reads), never argv; on a client through a key file the launcher reads and removes.

Output (hsbench logs to stderr): per report interval and per phase (`Int: TOTAL`; `ALL` in
older builds) `Loop: L, Int: I, Dur(s): S, Mode: M, Ops: N, MB/s: X, IO/s: Y, Lat(ms): [ min:
A, avg: B, 99%: C, max: D ], Slowdowns: E`. A phase's figures are its TOTAL line; latency
average, p99, min, max in ms at 0.1 ms resolution; with several processes the p99 is their
op-weighted mean (an approximation: hsbench keeps no histogram to merge). Slowdowns are
failed requests: a phase with any fails the step. Live figures: the interval lines.

hsbench is not in Debian nor served by the Go module proxy here: a spec naming it is
accepted, and a run is refused before anything changes when `cmd_path` is not on every
client. The cleanup removes the step's buckets with hsbench itself (`-m cx`).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from cephscope.runner.benchmarks.base import (
    BenchContext,
    BenchmarkError,
    BenchResult,
    LiveSample,
    Slot,
)
from cephscope.runner.benchmarks.paramcheck import parse_size, positive, type_problems
from cephscope.runner.benchmarks.phased import PhasedBenchmark, match_phases, read_output
from cephscope.runner.benchmarks.toolproc import ToolCommand, run_tools
from cephscope.runner.rgw_endpoint import RgwEndpoint

MIB = 1024 * 1024  # hsbench's MB/s is bytefmt.MEGABYTE per second: 2^20
MS = 1e-3
# measured hsbench modes -> the step's mode name
MEASURED = {"p": "put", "l": "list", "g": "get", "d": "del"}
HOUSEKEEPING = frozenset("cxi")
HSBENCH_MODE_NAMES = {"PUT": "p", "LIST": "l", "GET": "g", "DEL": "d"}
DEFAULT_MODES = "cxipgdx"
STAT_RE = re.compile(
    r"Loop: (\d+), Int: (\w+), Dur\(s\): ([\d.]+), Mode: (\w+), Ops: (\d+), "
    r"MB/s: ([\d.]+), IO/s: ([\d.]+), Lat\(ms\): \[ min: ([\d.]+), avg: ([\d.]+), "
    r"99%: ([\d.]+), max: ([\d.]+) \], Slowdowns: (\d+)")
TOTAL_INTERVALS = ("TOTAL", "ALL")
BUCKET_PREFIX = re.compile(r"[a-z0-9][a-z0-9.-]{0,29}")
OBJECT_PREFIX = re.compile(r"[A-Za-z0-9_.-]{1,64}")
REGION = re.compile(r"[a-z0-9-]{1,32}")
NAME_CHARS = re.compile(r"[^A-Za-z0-9_.-]")
STARTUP_SECONDS = 5.0
CLEANUP_SECONDS = 600
NO_UNLIMITED_NOTE = "objects and duration cannot both be -1 (unlimited)"


@dataclass(frozen=True)
class HsbenchStat:
    """One stats line of hsbench's log."""

    loop: int
    interval: str
    seconds: float
    mode: str  # hsbench's: PUT, GET, DEL, LIST, BINIT, BCLR, BDEL
    ops: int
    mib_per_second: float
    iops: float
    lat_min_ms: float
    lat_avg_ms: float
    lat_p99_ms: float
    lat_max_ms: float
    slowdowns: int

    @property
    def total(self) -> bool:
        return self.interval in TOTAL_INTERVALS


def parse_stat(line: str) -> HsbenchStat | None:
    match = STAT_RE.search(line)
    if not match:
        return None
    g = match.groups()
    return HsbenchStat(int(g[0]), g[1], float(g[2]), g[3], int(g[4]), float(g[5]), float(g[6]),
                       float(g[7]), float(g[8]), float(g[9]), float(g[10]), int(g[11]))


def step_modes(modes: str, loops: int) -> list[tuple[str, str]]:
    """(hsbench mode letter, step mode name) of every measured phase, in run order."""
    seen: dict[str, int] = {}
    out = []
    for _loop in range(loops):
        for letter in modes:
            if letter in MEASURED:
                seen[letter] = seen.get(letter, 0) + 1
                name = MEASURED[letter]
                out.append((letter, name if seen[letter] == 1 else f"{name}.{seen[letter]}"))
    return out


def phase_totals(text: str, modes: str, loops: int) -> dict[str, HsbenchStat]:
    """step mode -> the TOTAL line of that phase in one process's log."""
    totals = (stat for stat in map(parse_stat, text.splitlines())
              if stat is not None and stat.total and stat.mode in HSBENCH_MODE_NAMES)
    return match_phases(step_modes(modes, loops),
                        ((HSBENCH_MODE_NAMES[stat.mode], stat) for stat in totals))


def result_from_totals(mode: str, totals: Sequence[HsbenchStat]) -> BenchResult:
    if not totals:
        raise ValueError("no TOTAL line")
    failed = sum(t.slowdowns for t in totals)
    if failed:
        raise ValueError(f"{failed} {mode} requests failed (hsbench's Slowdowns): the phase "
                         f"measured errors")
    ops = sum(t.ops for t in totals)
    iops = sum(t.ops / t.seconds for t in totals if t.seconds > 0)
    weighted = [t for t in totals if t.ops]
    avg = sum(t.lat_avg_ms * t.ops for t in weighted) / ops if ops else None
    p99 = sum(t.lat_p99_ms * t.ops for t in weighted) / ops if ops else None
    return BenchResult(
        benchmark="hsbench", mode=mode, iops=iops,
        bandwidth_bytes_per_second=sum(t.mib_per_second for t in totals) * MIB,
        latency_avg_seconds=avg * MS if avg is not None else None,
        latency_min_seconds=min(t.lat_min_ms for t in weighted) * MS if weighted else None,
        latency_max_seconds=max(t.lat_max_ms for t in weighted) * MS if weighted else None,
        latency_percentiles_seconds={"99": p99 * MS} if p99 is not None else {},
        runtime_seconds=max(t.seconds for t in totals), ops=ops,
        extra={"processes": len(totals),
               "per_process": [t.__dict__ for t in totals],
               "percentile_method": "hsbench" if len(totals) == 1 else "weighted-approximation",
               "failed_requests": failed})


class HsBench(PhasedBenchmark):
    name: ClassVar[str] = "hsbench"
    label: ClassVar[str] = "hsbench"
    tool_origin: ClassVar[str] = ("github.com/markhpc/hsbench (`go build`; neither Debian nor "
                                  "the Go module proxy here serves it)")
    pool_application: ClassVar[str | None] = None
    # argv[0] only, never a shell's: not metacharacter-checked (CBT's example path holds
    # `<user>`), looked up on every client before anything changes
    tool_path_keys: ClassVar[frozenset[str]] = frozenset({"cmd_path"})
    rgw_api: ClassVar[str | None] = "s3"
    # CBT's name of its client endpoint section: where the gateway is, not a step parameter
    endpoint_keys: ClassVar[frozenset[str]] = frozenset({"client_endpoints"})
    # -1 means unlimited for these (hsbench's own convention, CBT's example uses it)
    unlimited_keys: ClassVar[frozenset[str]] = frozenset({"duration", "objects"})
    parameters: ClassVar[Mapping[str, tuple[type, ...]]] = {
        "cmd_path": (str,), "buckets": (int,), "bucket_prefix": (str,), "duration": (int,),
        "loop": (int,), "modes": (str,), "max_keys": (int,), "objects": (int,),
        "object_prefix": (str,), "per_client_object_prefix": (bool,), "region": (str,),
        "report_intervals": (int, float), "report_interval": (int, float), "threads": (int,),
        "size": (int, str), "prefill": (bool,), "prefill_modes": (str,),
        "concurrent_procs": (int,), "pool_profile": (str,),
    }
    defaults: ClassVar[Mapping[str, Any]] = {
        "cmd_path": "hsbench", "buckets": 1, "duration": 60, "loop": 1, "modes": DEFAULT_MODES,
        "objects": -1, "per_client_object_prefix": True, "threads": 1, "size": "1M",
        "prefill": False, "prefill_modes": "cxip", "concurrent_procs": 1,
    }

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        self.settings = {**self.defaults, **{k: v for k, v in params.items() if v is not None}}
        if "report_interval" in self.settings and "report_intervals" not in self.settings:
            self.settings["report_intervals"] = self.settings["report_interval"]
        self._seen: dict[int, dict[str, int]] = {}
        self._lock = threading.Lock()

    @classmethod
    def validate(cls, params: Mapping[str, Any]) -> list[str]:
        problems = type_problems(cls.name, params, cls.parameters)
        for key in ("buckets", "loop", "max_keys", "threads", "concurrent_procs",
                    "report_intervals", "report_interval"):
            problems += positive(cls.name, params, key)
        for key in ("duration", "objects"):
            value = params.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and (value == 0
                                                                           or value < -1):
                problems.append(f"{cls.name}: {key} must be > 0, or -1 for unlimited")
        merged = {**cls.defaults, **params}
        if merged.get("duration") == -1 and merged.get("objects") == -1:
            problems.append(f"{cls.name}: {NO_UNLIMITED_NOTE}")
        for key in ("modes", "prefill_modes"):
            value = params.get(key)
            if isinstance(value, str) and not re.fullmatch(r"[cxiplgd]+", value):
                problems.append(f"{cls.name}: {key} {value!r}: hsbench mode letters only "
                                f"(c x i p l g d)")
        modes = params.get("modes", DEFAULT_MODES)
        if isinstance(modes, str) and not any(m in MEASURED for m in modes):
            problems.append(f"{cls.name}: modes {modes!r} measures nothing (p, l, g or d)")
        for key, pattern in (("bucket_prefix", BUCKET_PREFIX), ("object_prefix", OBJECT_PREFIX),
                             ("region", REGION),
                             ("cmd_path", re.compile(r"[^\s\x00]+"))):
            value = params.get(key)
            if isinstance(value, str) and not pattern.fullmatch(value):
                problems.append(f"{cls.name}: {key} {value!r} does not match {pattern.pattern}")
        size = params.get("size")
        if isinstance(size, int | str) and not isinstance(size, bool):
            try:
                parse_size(size)
            except ValueError as exc:
                problems.append(f"{cls.name}: size: {exc}")
        if "pool_profile" in params:
            problems.append(f"{cls.name}: pool_profile has no effect: the gateway writes to its "
                            f"own pools")
        return problems

    @classmethod
    def estimated_seconds(cls, params: Mapping[str, Any]) -> float:
        bench = cls(params)
        duration = int(bench.settings["duration"])
        # a count-bound phase (duration -1) is guessed at a minute
        return STARTUP_SECONDS + len(bench.modes()) * (duration if duration > 0 else 60)

    @classmethod
    def endpoint_problems(cls, rgw: RgwEndpoint) -> list[str]:
        missing = rgw.missing("s3")
        return ([f"{cls.name} drives the gateway's S3 API and lacks {', '.join(missing)}"]
                if missing else [])

    def modes(self) -> Sequence[str]:
        return [name for _l, name in step_modes(self.settings["modes"], int(self.settings["loop"]))]

    def processes_per_client(self) -> int:
        return int(self.settings["concurrent_procs"])

    def command_path(self) -> str:
        return str(self.settings["cmd_path"])

    def key_file(self, rgw: RgwEndpoint) -> tuple[str, str] | None:
        return None

    def tool_env(self, rgw: RgwEndpoint) -> dict[str, str]:
        return {"AWS_ACCESS_KEY_ID": str(rgw.access_key),
                "AWS_SECRET_ACCESS_KEY": str(rgw.secret_key)}

    def bucket_prefix(self, step_id: str) -> str:
        return str(self.settings.get("bucket_prefix") or f"cephscope-{step_id}-")

    def object_prefix(self, slot: Slot) -> str | None:
        base = self.settings.get("object_prefix") or ""
        if not self.settings["per_client_object_prefix"]:
            return base or None
        client = "local" if slot.client is None else NAME_CHARS.sub("-", slot.client.name)
        return f"{base}{'-' if base else ''}{client}-{slot.index}-"

    def base_argv(self, tool: str, rgw: RgwEndpoint, step_id: str, modes: str) -> list[str]:
        s = self.settings
        argv = [tool, "-u", str(rgw.s3_url), "-b", str(s["buckets"]),
                "-bp", self.bucket_prefix(step_id), "-d", str(s["duration"]),
                "-n", str(s["objects"]), "-t", str(s["threads"]), "-z", str(s["size"]),
                "-l", str(s["loop"]), "-m", modes]
        for key, flag in (("max_keys", "-mk"), ("region", "-r"), ("report_intervals", "-ri")):
            if s.get(key) is not None:
                argv += [flag, f"{s[key]:g}" if isinstance(s[key], float) else str(s[key])]
        return argv

    def tool_argv(self, ctx: BenchContext, slot: Slot, tool: str, key_path: str | None
                  ) -> list[str]:
        argv = self.base_argv(tool, self.rgw_of(ctx), ctx.step_id, str(self.settings["modes"]))
        prefix = self.object_prefix(slot)
        return argv + (["-op", prefix] if prefix else [])

    def prepare(self, ctx: BenchContext) -> None:
        super().prepare(ctx)
        if not self.settings["prefill"]:
            return
        rgw = self.rgw_of(ctx)
        commands = []
        for slot in self.slots(ctx):
            argv = self.base_argv(self.tool_for(slot), rgw, ctx.step_id,
                                  str(self.settings["prefill_modes"]))
            prefix = self.object_prefix(slot)
            argv, env = self.launch(ctx, slot, argv + (["-op", prefix] if prefix else []),
                                    "prefill")
            out, log = self.output_paths(ctx, slot)
            commands.append(ToolCommand(argv, out.with_name("prefill." + out.name),
                                        log.with_name("prefill." + log.name), env=env,
                                        host=slot.client))
        run_tools(commands, ctx.timeout_seconds, "hsbench prefill", abort=ctx.abort)

    def scan_line(self, process: int, line: str
                  ) -> tuple[str | None, tuple[str, LiveSample] | None]:
        stat = parse_stat(line)
        if stat is None or stat.mode not in HSBENCH_MODE_NAMES:
            return None, None
        letter = HSBENCH_MODE_NAMES[stat.mode]
        names = [name for lt, name in step_modes(self.settings["modes"], int(self.settings["loop"]))
                 if lt == letter]
        with self._lock:
            seen = self._seen.setdefault(process, {})
            index = seen.get(letter, 0)
            if stat.total:
                seen[letter] = index + 1
        if index >= len(names):
            return None, None
        mode = names[index]
        if stat.total:
            return mode, None
        return None, (mode, LiveSample(timestamp=time.time(), ops_per_second=stat.iops,
                                       bytes_per_second=stat.mib_per_second * MIB,
                                       latency_seconds=stat.lat_avg_ms * MS))

    def parse_slots(self, mode: str, ctx: BenchContext, slots: Sequence[Slot]) -> BenchResult:
        totals = []
        for slot in slots:
            path = self.output_paths(ctx, slot)[1]
            found = phase_totals(read_output(path), str(self.settings["modes"]),
                                 int(self.settings["loop"])).get(mode)
            if found is None:
                raise BenchmarkError(f"hsbench {mode}: no TOTAL line for its phase in {path}")
            totals.append(found)
        try:
            return result_from_totals(mode, totals)
        except ValueError as exc:
            raise BenchmarkError(f"hsbench {mode}: {exc} (logs under {ctx.step_dir})") from exc

    def remove_objects(self, ctx: BenchContext) -> None:
        """hsbench's own bucket clear and delete (`-m cx`) on the first slot's host."""
        slot = self.slots(ctx)[0]
        rgw = self.rgw_of(ctx)
        argv, env = self.launch(ctx, slot, [
            self.tool_for(slot), "-u", str(rgw.s3_url), "-b", str(self.settings["buckets"]),
            "-bp", self.bucket_prefix(ctx.step_id), "-d", str(CLEANUP_SECONDS),
            "-t", str(self.settings["threads"]), "-m", "cx"], "cleanup")
        out, log = self.output_paths(ctx, slot)
        run_tools([ToolCommand(argv, out.with_name("cleanup." + out.name),
                               log.with_name("cleanup." + log.name), env=env, host=slot.client)],
                  CLEANUP_SECONDS + 60, "hsbench cleanup")
