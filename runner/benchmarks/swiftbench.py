"""swift-bench (OpenStack's, PyPI `swift-bench`) against the RADOS Gateway's Swift API
(cephscope name `swiftbench`; CBT has no swift-bench benchmark, so its keys take CBT's words
where CBT has one).

Parameters: `op_size` (object size, bytes or '4K'; CBT's word, swift-bench's -s),
`concurrent_ops` (requests in flight per process, CBT radosbench's word; -c),
`concurrent_procs` (swift-bench processes per client, as rados bench's), `put_count`
(objects each process PUTs; -n), `get_count` (GETs each process makes of them, 0: no GET
phase; -g), `containers` (containers each process spreads its objects over; -C), `delete`
(false: no DEL phase, -x; the objects are removed in cleanup), `cmd_path`. swift-bench runs
counts, not a duration: CBT's `time` is refused (hsbench's `duration` and getput's `runtime`
are time-based); `pool_profile` too (the gateway writes to its own pools).

One swift-bench process per slot goes through PUT, GET and DEL (the GETs pick among the names
its PUTs made, so the phases cannot be separate runs): each phase is a mode of the step
(`put`, `get`, `del`; see `phased`). Its config file — the Swift auth URL, user and key —
is written mode 0600 into the step dir (into a private directory on a client) and removed
after the step; everything else is argv. Its containers are `cephscope-<step>-[<client>-]<n>`
(swift-bench appends `_<i>` with more than one); swift-bench deletes them itself, and the
cleanup removes whatever a failed or interrupted step left (python-swiftclient, from the
runner's host).

What swift-bench reports, on stderr, per phase: a status line every 15 s (the first about 2 s
into the phase) with the requests done, failed, and their average rate so far, and a FINAL
line with the totals. So: ops/s per phase (the average of the whole phase, requests that
failed included: a phase with a failed request fails the step), no latency (swift-bench
measures none; `extra.latency_little_seconds` is concurrency / ops/s, Little's law, not a
measurement: the gateway's own latency is in the step's RGW figures), live figures at its 15 s
status interval (the rate between two status lines).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from cephscope.runner.benchmarks.base import (
    BenchContext,
    BenchmarkError,
    BenchResult,
    LiveSample,
    Slot,
)
from cephscope.runner.benchmarks.paramcheck import parse_size, positive, type_problems
from cephscope.runner.benchmarks.phased import PhasedBenchmark, read_output
from cephscope.runner.benchmarks.swift_containers import remove_containers
from cephscope.runner.rgw_endpoint import RgwEndpoint

KIB = 1024
# swift-bench's name for each phase -> the step's mode
PHASES = {"PUTS": "put", "GETS": "get", "DEL": "del"}
# one status or FINAL line of swift-bench's log (its format: 'swift-bench %(asctime)s
# %(levelname)s %(message)s', message '%(complete)s %(title)s [%(fail)s failures], %(rate).01f/s')
STATUS_RE = re.compile(
    r"^swift-bench (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) INFO (\d+) (PUTS|GETS|DEL)"
    r"( \*\*FINAL\*\*)? \[(\d+) failures\], (\d+(?:\.\d+)?)/s\s*$")
# a rough rate for the ETA and the step's time limit (measured on the 1-OSD dev cluster:
# 90 PUTs, 100 GETs, 120 DELs a second with 8 in flight)
ESTIMATED_OPS_PER_SECOND = 100.0
STARTUP_SECONDS = 5.0
NO_LATENCY_NOTE = ("swift-bench measures no latency: only requests done and their average "
                   "rate per phase (latency_little_seconds = concurrency / ops/s, Little's law)")
NAME_CHARS = re.compile(r"[^A-Za-z0-9_.-]")


class SwiftBenchLine:
    """A parsed status or FINAL line."""

    __slots__ = ("count", "failures", "final", "mode", "rate", "timestamp")

    def __init__(self, match: re.Match[str]) -> None:
        stamp, millis, count, phase, final, failures, rate = match.groups()
        # swift-bench logs local time
        self.timestamp = time.mktime(time.strptime(stamp, "%Y-%m-%d %H:%M:%S")) + int(millis) / 1000
        self.count = int(count)
        self.mode = PHASES[phase]
        self.final = bool(final)
        self.failures = int(failures)
        self.rate = float(rate)


def parse_line(line: str) -> SwiftBenchLine | None:
    match = STATUS_RE.match(line)
    return SwiftBenchLine(match) if match else None


def final_lines(text: str) -> dict[str, SwiftBenchLine]:
    """mode -> the FINAL line of that phase in one process's log."""
    found = {}
    for raw in text.splitlines():
        parsed = parse_line(raw)
        if parsed is not None and parsed.final:
            found[parsed.mode] = parsed
    return found


def container_base(step_id: str, slot: Slot) -> str:
    client = "" if slot.client is None else NAME_CHARS.sub("-", slot.client.name) + "-"
    return f"cephscope-{step_id}-{client}{slot.index}"


def config_text(rgw: RgwEndpoint) -> str:
    """swift-bench's config file: the Swift auth and key (its ConfigParser interpolates
    '%': doubled)."""
    def value(text: str | None) -> str:
        return str(text).replace("%", "%%")

    return ("[bench]\n"
            f"auth = {value(rgw.swift_auth_url)}\n"
            f"user = {value(rgw.swift_user)}\n"
            f"key = {value(rgw.swift_key)}\n"
            "auth_version = 1.0\n"
            "log_level = INFO\n")


def result_from_finals(mode: str, finals: Sequence[SwiftBenchLine], op_size: int,
                       concurrency: int) -> BenchResult:
    """One mode's result over the FINAL lines of its processes: rates and counts summed."""
    if not finals:
        raise ValueError("no FINAL line")
    failures = sum(f.failures for f in finals)
    if failures:
        total = sum(f.count for f in finals)
        raise ValueError(f"{failures} of {total} {mode.upper()} requests failed: the phase "
                         f"measured errors (swift-bench logs them at debug level only; see the "
                         f"gateway's log)")
    rate = sum(f.rate for f in finals)
    ops = sum(f.count for f in finals)
    moves_data = mode in ("put", "get")
    return BenchResult(
        benchmark="swiftbench", mode=mode, iops=rate,
        bandwidth_bytes_per_second=rate * op_size if moves_data else 0.0,
        runtime_seconds=max(f.count / f.rate for f in finals if f.rate > 0) if rate else None,
        ops=ops,
        extra={
            "processes": len(finals),
            "per_process": [{"ops": f.count, "failures": f.failures, "ops_per_second": f.rate}
                            for f in finals],
            "failed_requests": failures,
            "latency_little_seconds": concurrency * len(finals) / rate if rate else None,
            "note": NO_LATENCY_NOTE,
        })


class SwiftBench(PhasedBenchmark):
    name: ClassVar[str] = "swiftbench"
    label: ClassVar[str] = "swiftbench"
    tool_origin: ClassVar[str] = ("PyPI: pip install swift-bench (the cephscope[runner] extra "
                                  "installs it)")
    pool_application: ClassVar[str | None] = None
    rgw_api: ClassVar[str | None] = "swift"
    report_notes: ClassVar[tuple[str, ...]] = (
        "swift-bench measures no latency (client latency columns are empty for its steps): "
        "the RGW columns are the gateway's own figures over each phase's window.",)
    parameters: ClassVar[Mapping[str, tuple[type, ...]]] = {
        "op_size": (int, str),
        "concurrent_ops": (int,),
        "concurrent_procs": (int,),
        "put_count": (int,),
        "get_count": (int,),
        "containers": (int,),
        "delete": (bool,),
        "cmd_path": (str,),
        "time": (int, float),
        "pool_profile": (str,),
    }
    defaults: ClassVar[Mapping[str, Any]] = {
        "op_size": 4 * KIB,
        "concurrent_ops": 16,
        "concurrent_procs": 1,
        "put_count": 1000,
        "get_count": 1000,
        "containers": 1,
        "delete": True,
        "cmd_path": "swift-bench",
    }

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        self.settings = {**self.defaults, **{k: v for k, v in params.items() if v is not None}}
        self._previous: dict[int, SwiftBenchLine] = {}
        self._lock = threading.Lock()

    @classmethod
    def validate(cls, params: Mapping[str, Any]) -> list[str]:
        problems = type_problems(cls.name, params, cls.parameters)
        for key in ("concurrent_ops", "concurrent_procs", "put_count", "containers"):
            problems += positive(cls.name, params, key)
        problems += positive(cls.name, params, "get_count", allow_zero=True)
        if "op_size" in params and isinstance(params["op_size"], int | str):
            try:
                if parse_size(params["op_size"]) <= 0:
                    problems.append(f"{cls.name}: op_size must be > 0")
            except ValueError as exc:
                problems.append(f"{cls.name}: op_size: {exc}")
        if "time" in params:
            problems.append(f"{cls.name}: swift-bench runs a count of requests, not for a time:"
                            f" size its phases with put_count and get_count (hsbench's duration "
                            f"and getput's runtime are time-based)")
        if "pool_profile" in params:
            problems.append(f"{cls.name}: pool_profile has no effect: the gateway writes to its "
                            f"own pools")
        cmd = params.get("cmd_path")
        if isinstance(cmd, str) and not re.fullmatch(r"[A-Za-z0-9_./-]+", cmd):
            problems.append(f"{cls.name}: cmd_path {cmd!r} may hold only letters, digits, _ . / -")
        return problems

    @classmethod
    def estimated_seconds(cls, params: Mapping[str, Any]) -> float:
        bench = cls(params)
        requests = sum(bench.requests(mode) for mode in bench.modes())
        return STARTUP_SECONDS + requests / ESTIMATED_OPS_PER_SECOND

    @classmethod
    def endpoint_problems(cls, rgw: RgwEndpoint) -> list[str]:
        missing = rgw.missing("swift")
        return ([f"{cls.name} drives the gateway's Swift API and lacks {', '.join(missing)}"]
                if missing else [])

    def requests(self, mode: str) -> int:
        """Requests one process makes in `mode`."""
        return int(self.settings["get_count"] if mode == "get" else self.settings["put_count"])

    def modes(self) -> Sequence[str]:
        modes = ["put"]
        if self.settings["get_count"]:
            modes.append("get")
        if self.settings["delete"]:
            modes.append("del")
        return modes

    def op_size(self) -> int:
        return parse_size(self.settings["op_size"])

    def processes_per_client(self) -> int:
        return int(self.settings["concurrent_procs"])

    def command_path(self) -> str:
        return str(self.settings["cmd_path"])

    def key_file(self, rgw: RgwEndpoint) -> tuple[str, str] | None:
        return "swiftbench.conf", config_text(rgw)

    def tool_argv(self, ctx: BenchContext, slot: Slot, tool: str, key_path: str | None
                  ) -> list[str]:
        if key_path is None:
            raise BenchmarkError("swiftbench: its config file was not written (prepare)")
        s = self.settings
        argv = [tool, "-c", str(s["concurrent_ops"]), "-s", str(self.op_size()),
                "-n", str(s["put_count"]), "-g", str(s["get_count"]),
                "-C", str(s["containers"]),
                "--container-name", container_base(ctx.step_id, slot)]
        if not s["delete"]:
            argv.append("-x")
        return [*argv, key_path]

    def scan_line(self, process: int, line: str
                  ) -> tuple[str | None, tuple[str, LiveSample] | None]:
        parsed = parse_line(line)
        if parsed is None:
            return None, None
        with self._lock:
            previous = self._previous.get(process)
            self._previous[process] = parsed
        if previous is not None and previous.mode == parsed.mode \
                and parsed.timestamp > previous.timestamp:
            rate = (parsed.count - previous.count) / (parsed.timestamp - previous.timestamp)
        else:
            rate = parsed.rate  # the phase's first status: its average so far
        moved = rate * self.op_size() if parsed.mode in ("put", "get") else None
        live = (parsed.mode, LiveSample(timestamp=time.time(), ops_per_second=rate,
                                        bytes_per_second=moved))
        return (parsed.mode if parsed.final else None), live

    def parse_slots(self, mode: str, ctx: BenchContext, slots: Sequence[Slot]) -> BenchResult:
        finals = []
        for slot in slots:
            path = self.output_paths(ctx, slot)[1]
            found = final_lines(read_output(path)).get(mode)
            if found is None:
                raise BenchmarkError(f"swiftbench {mode}: no FINAL line for its phase in {path}")
            finals.append(found)
        try:
            return result_from_finals(mode, finals, self.op_size(),
                                      int(self.settings["concurrent_ops"]))
        except ValueError as exc:
            raise BenchmarkError(f"swiftbench {mode}: {exc} (logs under {ctx.step_dir})") from exc

    def remove_objects(self, ctx: BenchContext) -> None:
        remove_containers(self.rgw_of(ctx), f"cephscope-{ctx.step_id}-",
                          timeout_seconds=min(ctx.timeout_seconds, 600))
