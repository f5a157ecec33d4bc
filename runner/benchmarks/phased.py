"""A tool whose one run goes through several phases, each phase a mode of the step.

swift-bench PUTs its objects, GETs them and DELETEs them in one process (the GETs read the
names the PUTs made, kept in that process's memory); hsbench runs its `-m` modes in order,
getput its `-t` tests. Each phase is a mode of the step, so `cephscope_step_info{mode=…}` tags
its window: the process (one per slot: client x process) starts with the first mode's
`run`, and each `run(mode)` returns once every process has said that phase ended (the tool's
summary line of it), so the runner's window of a mode ends when the tool's phase does and the
next mode's window starts there. A phase a process skips (it ended first) fails the step.

On several clients (or several processes) a process that finishes a phase first goes on with
the next while the others finish theirs: those windows overlap by the spread of the phase
ends, which each mode's `phase_end_spread_seconds` records.

The processes run under `run_tools` in a thread of their own: the same deadline, the same
kill of every process of the step when one fails or the step is aborted, the same guard on a
client. `stop` ends them (a failed step's cleanup).
"""

from __future__ import annotations

import abc
import functools
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from cephscope.host_commands import which_here
from cephscope.runner.benchmarks.base import (
    BenchContext,
    Benchmark,
    BenchmarkError,
    BenchResult,
    LiveSample,
    Slot,
    client_slots,
)
from cephscope.runner.benchmarks.private_files import (
    ENV_LAUNCHER,
    PrivateFile,
    env_file_content,
    place,
    remove,
)
from cephscope.runner.benchmarks.toolproc import ToolCommand, run_tools
from cephscope.runner.rgw_endpoint import RgwEndpoint

# How long `stop` waits for the tools' thread once it told it to kill them.
STOP_TIMEOUT_SECONDS = 30.0
POLL_SECONDS = 0.2


class LineFeed:
    """Chunks of a stream in, whole lines out (the tail kept until its newline)."""

    def __init__(self, on_line: Callable[[str], None]) -> None:
        self.on_line = on_line
        self.buffer = ""

    def __call__(self, chunk: str) -> None:
        self.buffer += chunk
        *lines, self.buffer = self.buffer.split("\n")
        for line in lines:
            self.on_line(line.rstrip("\r"))
        if len(self.buffer) > 1 << 20:  # a line that never ends is no line of these tools
            self.buffer = ""


class RateSum:
    """Live figures of several processes as one: per mode, each process's latest figure,
    summed (ops and bytes) or weighted by ops (latency), reported whenever one of them
    reports (processes of one step may be in different phases for a moment)."""

    def __init__(self, report: Callable[[str, LiveSample], None]) -> None:
        self.report = report
        self._latest: dict[str, dict[int, LiveSample]] = {}
        self._lock = threading.Lock()

    def add(self, mode: str, process: int, sample: LiveSample) -> None:
        with self._lock:
            latest = self._latest.setdefault(mode, {})
            latest[process] = sample
            samples = list(latest.values())
        ops = [s.ops_per_second for s in samples if s.ops_per_second is not None]
        moved = [s.bytes_per_second for s in samples if s.bytes_per_second is not None]
        weighted = [(s.ops_per_second or 0.0, s.latency_seconds) for s in samples
                    if s.latency_seconds is not None]
        weight = sum(w for w, _lat in weighted)
        self.report(mode, LiveSample(
            timestamp=sample.timestamp,
            ops_per_second=sum(ops) if ops else None,
            bytes_per_second=sum(moved) if moved else None,
            latency_seconds=(sum(w * lat for w, lat in weighted) / weight if weight
                             else None),
        ))


class PhasedRun:
    """The processes of one step, run once through all phases (see the module docstring)."""

    def __init__(self, commands: Sequence[ToolCommand], what: str, timeout_seconds: float) -> None:
        self.commands = list(commands)
        self.what = what
        self.timeout_seconds = timeout_seconds
        self._ended: list[dict[str, float]] = [{} for _c in self.commands]
        self._cond = threading.Condition()
        self._kill = threading.Event()
        self._done = False
        self._error: BenchmarkError | None = None
        self._thread: threading.Thread | None = None

    @property
    def started(self) -> bool:
        return self._thread is not None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._body, name=f"phased-{self.what}",
                                        daemon=True)
        self._thread.start()

    def _body(self) -> None:
        try:
            run_tools(self.commands, self.timeout_seconds, self.what, abort=self._kill)
        except BenchmarkError as exc:
            self._error = exc
        except Exception as exc:
            self._error = BenchmarkError(f"{self.what}: {type(exc).__name__}: {exc}")
        finally:
            with self._cond:
                self._done = True
                self._cond.notify_all()

    def phase_ended(self, index: int, phase: str) -> None:
        """Process `index` said its phase `phase` ended (called from its reader thread)."""
        with self._cond:
            self._ended[index].setdefault(phase, time.time())
            self._cond.notify_all()

    def ends_of(self, phase: str) -> list[float]:
        with self._cond:
            return [ended[phase] for ended in self._ended if phase in ended]

    def wait(self, phase: str, abort: threading.Event | None = None) -> None:
        """Until every process ended `phase`; raises the tools' failure, or says which process
        ended without that phase. `abort` set: the processes are killed and this raises."""
        while True:
            with self._cond:
                if all(phase in ended for ended in self._ended):
                    return
                if self._done:
                    if self._error is not None:
                        raise self._error
                    missing = next(c for c, ended in zip(self.commands, self._ended, strict=True)
                                   if phase not in ended)
                    raise BenchmarkError(
                        f"{self.what}: {missing.argv[0].rsplit('/', 1)[-1]}{missing.where} "
                        f"ended without finishing its {phase} phase (output in "
                        f"{missing.stderr_path} and {missing.stdout_path})")
                self._cond.wait(POLL_SECONDS)
            if abort is not None and abort.is_set():
                self._kill.set()

    def finish(self) -> None:
        """After the last phase: until the processes have exited (they may still remove
        their containers); their failure is raised."""
        if self._thread is None:
            return
        self._thread.join()
        if self._error is not None:
            raise self._error

    def stop(self) -> None:
        """Kill what still runs and wait for it (a failed or interrupted step)."""
        self._kill.set()
        if self._thread is not None:
            self._thread.join(STOP_TIMEOUT_SECONDS)


class PhasedBenchmark(Benchmark):
    """A benchmark whose tool goes through the step's modes in one process per slot (client
    x process): the lifecycle of the module docstring, the key file on every client, the
    live figures and the raw output per process (`<label>.[<client>.]<n>.out` / `.log`)."""

    #: file-name part of the raw output ("swiftbench")
    label: ClassVar[str]
    #: where the tool comes from, for the error when it is missing
    tool_origin: ClassVar[str]

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        self._run: PhasedRun | None = None
        self._keys: dict[str, PrivateFile] = {}  # by client name ("" here)
        self.phase_spread: dict[str, float] = {}

    # ---- what each tool says

    @abc.abstractmethod
    def processes_per_client(self) -> int:
        """Tool processes on each client."""

    @abc.abstractmethod
    def command_path(self) -> str:
        """The tool's command (`cmd_path`)."""

    @abc.abstractmethod
    def key_file(self, rgw: RgwEndpoint) -> tuple[str, str] | None:
        """(file name, content) of the file holding the tool's keys; None: it takes them
        through its environment (`tool_env`)."""

    @abc.abstractmethod
    def tool_argv(self, ctx: BenchContext, slot: Slot, tool: str, key_path: str | None
                  ) -> list[str]:
        """The tool's argv for one process (`key_path`: its key file on that host)."""

    def tool_env(self, rgw: RgwEndpoint) -> dict[str, str]:
        """Environment the tool reads its keys from (none by default)."""
        return {}

    @abc.abstractmethod
    def scan_line(self, process: int, line: str) -> tuple[str | None, tuple[str, LiveSample] | None]:
        """One line of a process's output: (the mode whose phase it ends, or None; a live
        figure (mode, sample), or None). Called from that process's reader threads."""

    @abc.abstractmethod
    def parse_slots(self, mode: str, ctx: BenchContext, slots: Sequence[Slot]) -> BenchResult:
        """The result of `mode` over these processes, from their raw output."""

    def remove_objects(self, ctx: BenchContext) -> None:
        """Remove what the step left on the gateway (containers, buckets, objects)."""

    @classmethod
    def tools(cls, params: Mapping[str, Any]) -> Sequence[tuple[str, str]]:
        return [(cls(params).command_path(), cls.tool_origin)]

    # ---- the lifecycle

    def slots(self, ctx: BenchContext) -> list[Slot]:
        return client_slots(ctx, self.processes_per_client())

    def output_paths(self, ctx: BenchContext, slot: Slot) -> tuple[Path, Path]:
        base = ctx.step_dir / f"{self.label}.{slot.label}{slot.index}"
        return base.with_suffix(".out"), base.with_suffix(".log")

    def rgw_of(self, ctx: BenchContext) -> RgwEndpoint:
        if ctx.rgw is None:
            raise BenchmarkError(f"{self.name}: no RADOS Gateway endpoint was handed to the step")
        return ctx.rgw

    def prepare(self, ctx: BenchContext) -> None:
        key_file = self.key_file(self.rgw_of(ctx))
        if key_file is None:
            return
        name, content = key_file
        hosts = {(s.client.name if s.client else ""): s.client for s in self.slots(ctx)}
        for host_name, host in hosts.items():
            self._keys[host_name] = place(host, name, content, ctx.step_dir)

    def run(self, mode: str, ctx: BenchContext) -> list[Path]:
        if self._run is None:
            self._run = self._start(ctx)
        self._run.wait(mode, ctx.abort)
        ends = self._run.ends_of(mode)
        self.phase_spread[mode] = max(ends) - min(ends) if ends else 0.0
        if mode == list(self.modes())[-1]:
            self._run.finish()
        return [p for slot in self.slots(ctx) for p in self.output_paths(ctx, slot)]

    def tool_for(self, slot: Slot) -> str:
        """The tool's path here (found on PATH or in the venv), its command on a client."""
        if slot.client is not None:
            return self.command_path()
        found = which_here(self.command_path())
        if found is None:
            raise BenchmarkError(missing_tool_message(self.command_path(), self.tool_origin))
        return found

    def launch(self, ctx: BenchContext, slot: Slot, argv: list[str], tag: str = ""
               ) -> tuple[list[str], dict[str, str]]:
        """(argv, environment) that run `argv` for `slot` with the tool's key environment
        (`tool_env`): here in the process's environment; on a client through a key file the
        launcher reads and removes (a client's environment would travel on the SSH command
        line)."""
        env = dict(ctx.env)
        tool_env = self.tool_env(self.rgw_of(ctx))
        if not tool_env:
            return argv, env
        if slot.client is None:
            return argv, {**env, **tool_env}
        key = place(slot.client, f"{self.label}.env", env_file_content(tool_env), ctx.step_dir)
        self._keys[f"{slot.client.name}#{tag}{slot.index}"] = key
        return ["python3", "-c", ENV_LAUNCHER, key.path, *argv], env

    def _start(self, ctx: BenchContext) -> PhasedRun:
        slots = self.slots(ctx)
        aggregate = RateSum(ctx.report_progress)
        per_client = {c.name: RateSum(functools.partial(ctx.report_client_progress, c.name))
                      for c in ctx.clients}
        commands: list[ToolCommand] = []
        holder: list[PhasedRun] = []
        for n, slot in enumerate(slots):
            key = self._keys.get(slot.client.name if slot.client else "")
            argv, env = self.launch(ctx, slot, self.tool_argv(ctx, slot, self.tool_for(slot),
                                                              key.path if key else None))

            def on_line(line: str, n: int = n, slot: Slot = slot) -> None:
                ended, live = self.scan_line(n, line)
                if live is not None:
                    aggregate.add(live[0], n, live[1])
                    if slot.client is not None:
                        per_client[slot.client.name].add(live[0], slot.index, live[1])
                if ended is not None and holder:
                    holder[0].phase_ended(n, ended)

            stdout_path, stderr_path = self.output_paths(ctx, slot)
            commands.append(ToolCommand(argv, stdout_path, stderr_path, on_output=LineFeed(on_line),
                                        env=env, host=slot.client, on_stderr=LineFeed(on_line)))
        run = PhasedRun(commands, self.name, ctx.timeout_seconds)
        holder.append(run)
        run.start()
        return run

    def parse(self, mode: str, ctx: BenchContext) -> BenchResult:
        result = self.parse_slots(mode, ctx, self.slots(ctx))
        if len(self.slots(ctx)) > 1 and mode in self.phase_spread:
            result.extra["phase_end_spread_seconds"] = self.phase_spread[mode]
        return result

    def parse_clients(self, mode: str, ctx: BenchContext) -> dict[str, BenchResult]:
        if not ctx.clients:
            return {}
        slots = self.slots(ctx)
        return {c.name: self.parse_slots(mode, ctx, [s for s in slots if s.client is c])
                for c in ctx.clients}

    def cleanup(self, ctx: BenchContext) -> None:
        """The processes ended, the step's objects removed, the key files removed; every
        problem said at once."""
        problems = []
        if self._run is not None:
            self._run.stop()
        # what a tool that never started left: nothing (a killed run's leftovers of the same
        # step are removed after the step runs again: the names are the step's)
        if ctx.rgw is not None and self._run is not None:
            try:
                self.remove_objects(ctx)
            except Exception as exc:
                problems.append(f"{self.name}: removing the step's objects: "
                                f"{type(exc).__name__}: {exc}")
        for private in self._keys.values():
            try:
                remove(private)
            except BenchmarkError as exc:
                problems.append(str(exc))
        self._keys.clear()
        if problems:
            raise BenchmarkError("; ".join(problems))


def missing_tool_message(command: str, origin: str) -> str:
    return f"tool {command!r} not found on PATH; it comes from {origin}"


def read_output(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError as exc:
        raise BenchmarkError(f"cannot read output {path}: {exc.strerror}") from exc


Result = TypeVar("Result")


def match_phases(order: Sequence[tuple[str, str]],
                 results: Iterable[tuple[str, Result]]) -> dict[str, Result]:
    """step mode -> result: the n-th result of a kind (a tool's letter for a test) goes to the
    n-th step mode of that kind in `order` ((letter, step mode) pairs in run order); results
    beyond the modes of their kind are ignored."""
    counts: dict[str, int] = {}
    found: dict[str, Result] = {}
    for letter, result in results:
        counts[letter] = counts.get(letter, 0) + 1
        names = [name for kind, name in order if kind == letter]
        if counts[letter] <= len(names):
            found[names[counts[letter] - 1]] = result
    return found
