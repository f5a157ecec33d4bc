"""getput (github.com/markseger/getput) against the gateway's Swift API: CBT's `getput`
benchmark, its keys as CBT's benchmark/getput.py reads them.

Parameters (CBT's): `cmd_path` (default `getput`), `runtime` (--runtime, seconds per test),
`ops_per_proc` (-n), `procs` (--procs), `test` (-t, getput's comma-separated tests: p g d,
P G D random; default `p`), `op_size` (-s, default 4 MiB), `ctype` (--ctype), `debug`,
`logops`, `grace` (passed on as CBT does), `container_prefix` / `object_prefix` (default
`cbt-getput`; the step id and client are appended, so the step's containers are its own).
Where the gateway is and how to log in are CBT's getput keys too — `auth` (an auth URL or a
list: the first is used), `user` (the Swift user is `<user>:swift`, CBT's subuser) and `key`
— and they are not step parameters: they go to the run's gateway endpoint
(runner/rgw_endpoint.py), never into a step's id, labels or files. `pool_profile` (CBT reads
it and does nothing with it) is refused: the gateway writes to its own pools.

Each test of `test` is a mode of the step (`put`, `get`, `del`, `putr`, `getr`, `delr`; a
repeated test `put.2`, ...), in one getput process per client (see `phased`). The keys reach
getput in its credentials file (`--creds`, `export ST_AUTH=… ST_USER=… ST_KEY=…`, mode 0600).

Output (stdout): after each test one line `Rank Test Clts Proc OSize Start End MB/Sec Ops
Ops/Sec Errs Latency Median LatRange %CPU Ret`, latencies in seconds (average, median,
min-max). So: ops/s, MiB/s, average latency, median (as p50), min and max per test; no other
percentile; no live figures (getput prints nothing while a test runs). A test with errors fails
the step.

getput is a Python 2 program, not in Debian nor on PyPI: a spec naming it is accepted, and a
run is refused before anything changes when `cmd_path` is not on every client. The cleanup
removes the step's containers with python-swiftclient.
"""

from __future__ import annotations

import re
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
from cephscope.runner.benchmarks.swift_containers import remove_containers
from cephscope.runner.rgw_endpoint import RgwEndpoint

MIB = 1024 * 1024
# getput's test letters -> the step's mode, and its output names for them
TESTS = {"p": "put", "g": "get", "d": "del", "P": "putr", "G": "getr", "D": "delr"}
OUTPUT_NAMES = {"put": "p", "get": "g", "del": "d", "putR": "P", "getR": "G", "delR": "D"}
# one result line (getput's print_line: rank, test, clients, procs, size, start, end, MB/s,
# ops, ops/s, errors, latency, median, min-max, [--ldist columns], %CPU, [utc], retries)
RESULT_RE = re.compile(
    r"^\s*(\S+)\s+(put|putR|get|getR|del|delR)\s+(\d+)\s+(\d+)\s+(\S+)\s+"
    r"(\d\d:\d\d:\d\d)\s+(\d\d:\d\d:\d\d)\s+([\d.]+)\s+(\d+)\s+([\d.]+)\s+(\d+)\s+"
    r"([\d.]+)\s+([\d.]+)\s+([\d.]+)-([\d.]+)(?:\s+.*)?$")
PREFIX = re.compile(r"[A-Za-z0-9_.-]{1,64}")
CTYPES = ("shared", "bynode", "byproc")
NAME_CHARS = re.compile(r"[^A-Za-z0-9_.-]")
# characters getput's credentials parser cannot carry in a value (it splits at the last '='
# and strips quotes and semicolons)
CREDS_UNSAFE = frozenset("=;'\"")
STARTUP_SECONDS = 5.0
# a guessed rate for count-bound tests (no runtime): the ETA only
ESTIMATED_OPS_PER_SECOND = 50.0


@dataclass(frozen=True)
class GetputLine:
    test: str  # getput's name: put, putR, get, ...
    procs: int
    mib_per_second: float
    ops: int
    ops_per_second: float
    errors: int
    latency_avg: float  # seconds
    latency_median: float
    latency_min: float
    latency_max: float


def parse_result_line(line: str) -> GetputLine | None:
    match = RESULT_RE.match(line)
    if not match:
        return None
    g = match.groups()
    return GetputLine(g[1], int(g[3]), float(g[7]), int(g[8]), float(g[9]), int(g[10]),
                      float(g[11]), float(g[12]), float(g[13]), float(g[14]))


def step_modes(test: str) -> list[tuple[str, str]]:
    """(getput test letter, step mode) of every test in `test`, in run order."""
    seen: dict[str, int] = {}
    out = []
    for letter in (t for t in test.split(",") if t):
        seen[letter] = seen.get(letter, 0) + 1
        name = TESTS[letter]
        out.append((letter, name if seen[letter] == 1 else f"{name}.{seen[letter]}"))
    return out


def results_per_test(text: str, test: str) -> dict[str, GetputLine]:
    """step mode -> the result line of that test in one process's output."""
    lines = (line for line in map(parse_result_line, text.splitlines()) if line is not None)
    return match_phases(step_modes(test), ((OUTPUT_NAMES[line.test], line) for line in lines))


def result_from_lines(mode: str, lines: Sequence[GetputLine]) -> BenchResult:
    if not lines:
        raise ValueError("no result line")
    errors = sum(line.errors for line in lines)
    if errors:
        raise ValueError(f"{errors} {mode} requests failed (getput's Errs): the test measured "
                         f"errors")
    ops = sum(line.ops for line in lines)
    weighted = [line for line in lines if line.ops]
    return BenchResult(
        benchmark="getput", mode=mode, iops=sum(line.ops_per_second for line in lines),
        bandwidth_bytes_per_second=sum(line.mib_per_second for line in lines) * MIB,
        latency_avg_seconds=(sum(line.latency_avg * line.ops for line in weighted) / ops
                             if ops else None),
        latency_min_seconds=min(line.latency_min for line in weighted) if weighted else None,
        latency_max_seconds=max(line.latency_max for line in weighted) if weighted else None,
        # getput's median is exact for one client; over several, their op-weighted mean
        latency_percentiles_seconds=(
            {"50": sum(line.latency_median * line.ops for line in weighted) / ops}
            if ops else {}),
        ops=ops,
        extra={"clients": len(lines), "per_client": [line.__dict__ for line in lines],
               "percentile_method": "getput" if len(lines) == 1 else "weighted-approximation",
               "failed_requests": errors})


def credentials_text(rgw: RgwEndpoint) -> str:
    return (f"export ST_AUTH={rgw.swift_auth_url}\n"
            f"export ST_USER={rgw.swift_user}\n"
            f"export ST_KEY={rgw.swift_key}\n")


class GetPut(PhasedBenchmark):
    name: ClassVar[str] = "getput"
    label: ClassVar[str] = "getput"
    tool_origin: ClassVar[str] = ("github.com/markseger/getput (a Python 2 program; neither "
                                  "Debian nor PyPI has it)")
    pool_application: ClassVar[str | None] = None
    # argv[0] only, never a shell's: not metacharacter-checked (CBT's example path holds
    # `<user>`), looked up on every client before anything changes
    tool_path_keys: ClassVar[frozenset[str]] = frozenset({"cmd_path"})
    rgw_api: ClassVar[str | None] = "swift"
    endpoint_keys: ClassVar[frozenset[str]] = frozenset({"auth", "user", "key"})
    report_notes: ClassVar[tuple[str, ...]] = (
        "getput reports an average, a median (the p50 column) and min-max latency per test: "
        "no other percentile.",)
    parameters: ClassVar[Mapping[str, tuple[type, ...]]] = {
        "cmd_path": (str,), "runtime": (int,), "ops_per_proc": (int,), "procs": (int,),
        "test": (str,), "op_size": (int, str), "ctype": (str,), "debug": (int,),
        "logops": (int, str), "grace": (int,), "container_prefix": (str,),
        "object_prefix": (str,), "pool_profile": (str,),
    }
    defaults: ClassVar[Mapping[str, Any]] = {
        "cmd_path": "getput", "procs": 1, "test": "p", "op_size": 4 * MIB,
        "container_prefix": "cbt-getput", "object_prefix": "cbt-getput",
    }

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        self.settings = {**self.defaults, **{k: v for k, v in params.items() if v is not None}}
        # process -> test letter -> result lines seen (getput prints them on stdout only)
        self._counts: dict[int, dict[str, int]] = {}

    @classmethod
    def validate(cls, params: Mapping[str, Any]) -> list[str]:
        problems = type_problems(cls.name, params, cls.parameters)
        for key in ("runtime", "ops_per_proc", "procs", "grace"):
            problems += positive(cls.name, params, key)
        test = params.get("test")
        if isinstance(test, str) and not re.fullmatch(r"[pgdPGD](,[pgdPGD])*", test):
            problems.append(f"{cls.name}: test {test!r}: getput's tests, comma-separated "
                            f"(p g d, P G D)")
        merged = {**cls.defaults, **params}
        if merged.get("runtime") is None and merged.get("ops_per_proc") is None:
            problems.append(f"{cls.name}: give runtime or ops_per_proc (getput needs one)")
        ctype = params.get("ctype")
        if isinstance(ctype, str) and ctype not in CTYPES:
            problems.append(f"{cls.name}: ctype {ctype!r}: one of {', '.join(CTYPES)}")
        for key in ("container_prefix", "object_prefix"):
            value = params.get(key)
            if isinstance(value, str) and not PREFIX.fullmatch(value):
                problems.append(f"{cls.name}: {key} {value!r} does not match {PREFIX.pattern}")
        cmd = params.get("cmd_path")
        if isinstance(cmd, str) and not re.fullmatch(r"[^\s\x00]+", cmd):
            problems.append(f"{cls.name}: cmd_path {cmd!r}: a path without blanks")
        size = params.get("op_size")
        if isinstance(size, int | str) and not isinstance(size, bool):
            try:
                parse_size(size)
            except ValueError as exc:
                problems.append(f"{cls.name}: op_size: {exc}")
        if "pool_profile" in params:
            problems.append(f"{cls.name}: pool_profile has no effect: the gateway writes to its "
                            f"own pools")
        return problems

    @classmethod
    def estimated_seconds(cls, params: Mapping[str, Any]) -> float:
        bench = cls(params)
        runtime = bench.settings.get("runtime")
        per_test = (float(runtime) if runtime else
                    float(bench.settings["ops_per_proc"]) / ESTIMATED_OPS_PER_SECOND)
        return STARTUP_SECONDS + len(bench.modes()) * per_test

    @classmethod
    def endpoint_problems(cls, rgw: RgwEndpoint) -> list[str]:
        missing = rgw.missing("swift")
        if missing:
            return [f"{cls.name} drives the gateway's Swift API and lacks {', '.join(missing)}"]
        if any(c in CREDS_UNSAFE for c in str(rgw.swift_key) + str(rgw.swift_user)):
            return [f"{cls.name}: getput's credentials file cannot carry a key or user holding "
                    f"= ; ' or \""]
        return []

    def modes(self) -> Sequence[str]:
        return [name for _l, name in step_modes(str(self.settings["test"]))]

    def processes_per_client(self) -> int:
        return 1  # getput's own --procs makes its processes

    def command_path(self) -> str:
        return str(self.settings["cmd_path"])

    def key_file(self, rgw: RgwEndpoint) -> tuple[str, str] | None:
        return "getput.creds", credentials_text(rgw)

    def container_prefix(self, step_id: str) -> str:
        return f"{self.settings['container_prefix']}-{step_id}"

    def tool_argv(self, ctx: BenchContext, slot: Slot, tool: str, key_path: str | None
                  ) -> list[str]:
        if key_path is None:
            raise BenchmarkError("getput: its credentials file was not written (prepare)")
        s = self.settings
        client = "" if slot.client is None else "-" + NAME_CHARS.sub("-", slot.client.name)
        argv = [tool, "-c", f"{self.container_prefix(ctx.step_id)}{client}",
                "-o", f"{s['object_prefix']}{client or '-local'}",
                "-s", str(parse_size(s["op_size"])), "-t", str(s["test"]),
                "--procs", str(s["procs"])]
        for key, flag in (("ops_per_proc", "-n"), ("runtime", "--runtime"), ("ctype", "--ctype"),
                          ("debug", "--debug"), ("logops", "--logops"), ("grace", "--grace")):
            if s.get(key) is not None:
                argv += [flag, str(s[key])]
        return [*argv, "--creds", key_path]

    def scan_line(self, process: int, line: str
                  ) -> tuple[str | None, tuple[str, LiveSample] | None]:
        parsed = parse_result_line(line)
        if parsed is None:
            return None, None
        return self._counted(process, OUTPUT_NAMES[parsed.test]), None

    def _counted(self, process: int, letter: str) -> str | None:
        """The step mode of this process's next result line of test `letter`."""
        counts = self._counts.setdefault(process, {})
        counts[letter] = counts.get(letter, 0) + 1
        names = [name for lt, name in step_modes(str(self.settings["test"])) if lt == letter]
        return names[counts[letter] - 1] if counts[letter] <= len(names) else None

    def parse_slots(self, mode: str, ctx: BenchContext, slots: Sequence[Slot]) -> BenchResult:
        lines = []
        for slot in slots:
            path = self.output_paths(ctx, slot)[0]
            found = results_per_test(read_output(path), str(self.settings["test"])).get(mode)
            if found is None:
                raise BenchmarkError(f"getput {mode}: no result line for its test in {path}")
            lines.append(found)
        try:
            return result_from_lines(mode, lines)
        except ValueError as exc:
            raise BenchmarkError(f"getput {mode}: {exc} (output under {ctx.step_dir})") from exc

    def remove_objects(self, ctx: BenchContext) -> None:
        remove_containers(self.rgw_of(ctx), self.container_prefix(ctx.step_id),
                          timeout_seconds=min(ctx.timeout_seconds, 600))
