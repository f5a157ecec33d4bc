"""Run benchmark tools (argv lists, never a shell) in parallel, streaming their stdout.

Each process's stdout goes to a file and, chunk by chunk as it arrives, to a callback so the
benchmark can report live per-second figures. The whole group shares one deadline; on timeout
every process of the group is killed (only those, by pid) and a `BenchmarkError` is raised.

A command for another host runs there through its `HostExec` (SSH) under a small guard
(`REMOTE_GUARD`, python3 on the client): the tool runs in its own process group, which the
guard kills as soon as the SSH session ends — when the runner kills the local ssh, dies, or
the connection drops — so no benchmark outlives its step on any client. The guard also writes
the tool's start and end time (the client's clock) to stderr, from which the start skew
across clients is measured. A tool on this machine gets SIGKILL from the kernel when the
runner's thread that started it dies (Linux parent-death signal), so a runner killed with
SIGKILL leaves no benchmark running here either.

Start barrier: SSH sessions take from a few ms to over a second to set up on a loaded machine,
so the guards do not start their tool on arrival. Each says `ready` on stderr and waits for a
line on stdin; once every remote guard of the group is ready, the runner writes `go` to all of
them at once, so the tools start within the time one line takes through SSH. The start instant
is the runner's, not a clock's: real hosts need synchronised clocks (NTP) only for the skew
*measurement* (guard timestamps), not for starting together.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cephscope import host_commands
from cephscope.runner.benchmarks.base import BenchmarkError
from cephscope.runner.hostexec import HostExec, is_local

STDERR_TAIL_CHARS = 2000
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
# Longest wait for every remote guard to be ready (SSH connected, python3 started).
BARRIER_TIMEOUT_SECONDS = 60.0
GUARD_MARK = "cephscope-guard:"
# Runs on the client: `python3 -c REMOTE_GUARD tool args…` (every element quoted by HostExec).
REMOTE_GUARD = """\
import os, signal, subprocess, sys, threading, time
sys.stderr.write("%s ready %.6f\\n" % (MARK, time.time())); sys.stderr.flush()
line = b""
while not line.endswith(b"\\n"):  # the start barrier: "go\\n", or EOF (the runner is gone)
    byte = os.read(0, 1)
    if not byte:
        os._exit(255)
    line += byte
tool = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL, start_new_session=True)
sys.stderr.write("%s started %.6f pid %d\\n" % (MARK, time.time(), tool.pid)); sys.stderr.flush()
def watch():
    while os.read(0, 65536):  # until EOF: the SSH session is gone
        pass
    try:
        os.killpg(tool.pid, signal.SIGKILL)
    except OSError:
        pass
threading.Thread(target=watch, daemon=True).start()
code = tool.wait()
sys.stderr.write("%s ended %.6f status %d\\n" % (MARK, time.time(), code)); sys.stderr.flush()
os._exit(code if code >= 0 else 128 - code)
""".replace("MARK", repr(GUARD_MARK))


@dataclass
class ToolCommand:
    """One process to start: its argv and where its output goes."""

    argv: Sequence[str]
    stdout_path: Path
    stderr_path: Path
    # called with every decoded chunk of stdout as it arrives (from a reader thread)
    on_output: Callable[[str], None] | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    host: HostExec | None = None  # None: this machine
    # the same for stderr, for tools that report on it (swift-bench's and hsbench's logs);
    # stderr still goes to `stderr_path` as it arrives
    on_stderr: Callable[[str], None] | None = None

    @property
    def where(self) -> str:
        return "" if self.host is None or is_local(self.host) else f" on {self.host.name}"


@dataclass
class ToolOutcome:
    command: ToolCommand
    returncode: int
    pid: int
    elapsed_seconds: float


def _local_argv(command: ToolCommand) -> tuple[list[str], dict[str, str] | None]:
    """The argv to start here and the environment to give it."""
    if command.host is None or is_local(command.host):
        env = dict(os.environ)
        env.update(command.env)
        return list(command.argv), env
    # Remotely only the tool's own settings travel (CEPH_CONF, CEPH_ARGS), not our environment.
    remote_env = {k: v for k, v in command.env.items() if k.startswith("CEPH_")}
    return command.host.argv(["python3", "-c", REMOTE_GUARD, *command.argv], env=remote_env), None


def die_with_parent() -> Callable[[], None] | None:
    """A `preexec_fn` that makes the child get SIGKILL when its parent (thread) dies; None
    where prctl is not available. The child only calls prctl through the libc loaded here,
    getppid and _exit."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def arm() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the signal was armed
            os._exit(137)

    return arm


def guard_times(stderr_path: Path) -> dict[str, float]:
    """`started` / `ended` (client clock) of a remote tool, from its guard's stderr lines."""
    times: dict[str, float] = {}
    with contextlib.suppress(OSError):
        for line in stderr_path.read_text(errors="replace").splitlines():
            if line.startswith(GUARD_MARK):
                parts = line.split()
                with contextlib.suppress(IndexError, ValueError):
                    times[parts[1]] = float(parts[2])
    return times


def resolve_tool(name_or_path: str) -> str:
    """Absolute path of a tool, or a clear error when it is not installed."""
    found = shutil.which(name_or_path)
    if found is None:
        package = host_commands.package_of(Path(name_or_path).name)
        raise BenchmarkError(
            f"tool {name_or_path!r} not found on PATH; install it (Debian: apt-get install {package})"
        )
    return found


def stderr_tail(path: Path, limit: int = STDERR_TAIL_CHARS) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return text[-limit:].strip()


def _pump(stream, out_path: Path, on_output: Callable[[str], None] | None) -> None:
    """Copy a pipe to a file, handing each chunk to the callback; callback errors are ignored
    so that a live-figure problem never loses the raw output."""
    decoder_buffer = b""
    with out_path.open("wb") as out:
        while True:
            chunk = stream.read1(65536)
            if not chunk:
                break
            out.write(chunk)
            out.flush()
            if on_output is None:
                continue
            data = decoder_buffer + chunk
            # keep an incomplete UTF-8 sequence for the next chunk
            try:
                text = data.decode()
                decoder_buffer = b""
            except UnicodeDecodeError as exc:
                text = data[: exc.start].decode(errors="replace")
                decoder_buffer = data[exc.start :]
            with contextlib.suppress(Exception):
                on_output(text)
    stream.close()


def run_tools(
    commands: Sequence[ToolCommand], timeout_seconds: float, what: str,
    abort: threading.Event | None = None,
) -> list[ToolOutcome]:
    """Start all commands at once, wait for all; raise BenchmarkError on timeout or failure,
    or as soon as `abort` is set (the tools are killed).

    A non-zero exit of any process raises with that process's stderr tail.
    """
    procs: list[tuple[ToolCommand, subprocess.Popen[bytes], threading.Thread]] = []
    stderr_readers: list[threading.Thread] = []
    started = time.monotonic()
    try:
        for command in commands:
            command.stdout_path.parent.mkdir(parents=True, exist_ok=True)
            argv, env = _local_argv(command)
            stderr_file = command.stderr_path.open("wb")
            try:
                proc = subprocess.Popen(
                    argv,
                    # A remote guard ends its tool when this pipe closes (never written to).
                    stdin=subprocess.DEVNULL if env is not None else subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=stderr_file if command.on_stderr is None else subprocess.PIPE,
                    env=env,
                    start_new_session=True,
                    # a local tool dies with the runner; a remote one with its SSH session
                    preexec_fn=die_with_parent() if env is not None else None,
                )
            except FileNotFoundError as exc:
                raise BenchmarkError(f"{what}: tool not found: {command.argv[0]}") from exc
            except OSError as exc:
                raise BenchmarkError(f"{what}: cannot start {command.argv[0]}: {exc}") from exc
            finally:
                stderr_file.close()
            reader = threading.Thread(
                target=_pump,
                args=(proc.stdout, command.stdout_path, command.on_output),
                name=f"toolproc-{proc.pid}",
                daemon=True,
            )
            reader.start()
            if command.on_stderr is not None:
                err_reader = threading.Thread(
                    target=_pump, args=(proc.stderr, command.stderr_path, command.on_stderr),
                    name=f"toolproc-err-{proc.pid}", daemon=True)
                err_reader.start()
                stderr_readers.append(err_reader)
            procs.append((command, proc, reader))

        deadline = started + timeout_seconds
        _release_barrier([(c, p) for c, p, _r in procs if p.stdin is not None],
                         min(deadline, time.monotonic() + BARRIER_TIMEOUT_SECONDS), what)
        finished: dict[int, ToolOutcome] = {}
        # Poll them all: the first failure (a client gone mid-step) ends the others at once.
        while len(finished) < len(procs):
            for index, (command, proc, _reader) in enumerate(procs):
                if index not in finished and (returncode := proc.poll()) is not None:
                    finished[index] = ToolOutcome(command, returncode, proc.pid,
                                                  time.monotonic() - started)
            if any(o.returncode != 0 for o in finished.values()):
                break
            if len(finished) < len(procs):
                if abort is not None and abort.is_set():
                    raise BenchmarkError(f"{what}: stopped (killed): the step was aborted")
                if time.monotonic() > deadline:
                    command = next(c for i, (c, _p, _r) in enumerate(procs) if i not in finished)
                    raise BenchmarkError(
                        f"{what}: {Path(command.argv[0]).name}{command.where} did not finish "
                        f"within {timeout_seconds:g} s (killed); output so far in "
                        f"{command.stdout_path}")
                time.sleep(0.05)
        for index, (_command, _proc, reader) in enumerate(procs):
            if index in finished:
                reader.join(timeout=max(1.0, deadline - time.monotonic()))
        outcomes = [finished[i] for i in sorted(finished)]
    finally:
        # kill whatever of ours is still running (timeout, error, Ctrl-C)
        for _command, proc, _reader in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            if proc.stdin is not None:  # EOF for a remote guard: it ends its tool
                proc.stdin.close()
        for _command, _proc, reader in procs:
            reader.join(timeout=5)
        for reader in stderr_readers:
            reader.join(timeout=5)

    for outcome in outcomes:
        if outcome.returncode != 0:
            command = outcome.command
            tail = stderr_tail(command.stderr_path)
            if command.where and outcome.returncode == 255 and "ended" not in guard_times(
                    command.stderr_path):
                reason = f"lost the SSH connection to {command.host.name}"  # type: ignore[union-attr]
            else:
                reason = f"exited with status {outcome.returncode}"
            raise BenchmarkError(
                f"{what}: {Path(command.argv[0]).name}{command.where} {reason} "
                f"(stderr {command.stderr_path}):\n{tail}"
            )
    return outcomes


def _release_barrier(remote: Sequence[tuple[ToolCommand, subprocess.Popen[bytes]]],
                     deadline: float, what: str) -> None:
    """Wait until every remote guard says `ready`, then tell them all `go` (see the module
    docstring). A process that ends meanwhile is left to the caller's failure handling; the
    others then never get `go` and end with their SSH session."""
    waiting = list(remote)
    while waiting:
        if any(proc.poll() is not None for _c, proc in waiting):
            return
        waiting = [(c, proc) for c, proc in waiting if "ready" not in guard_times(c.stderr_path)]
        if not waiting:
            break
        if time.monotonic() > deadline:
            names = ", ".join(sorted({c.where.removeprefix(" on ") for c, _p in waiting}))
            raise BenchmarkError(f"{what}: no answer from {names} within "
                                 f"{BARRIER_TIMEOUT_SECONDS:g} s (SSH session not set up)")
        time.sleep(0.01)
    for _command, proc in remote:
        assert proc.stdin is not None
        with contextlib.suppress(OSError):  # a guard already gone fails its own way
            proc.stdin.write(b"go\n")
            proc.stdin.flush()


def run_quick(
    argv: Sequence[str], timeout_seconds: float, what: str, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run a short helper command (rbd create, rados cleanup) and capture its output."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    try:
        return subprocess.run(
            list(argv),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout_seconds,
            env=full_env,
            check=False,
        )
    except FileNotFoundError as exc:
        raise BenchmarkError(f"{what}: tool not found: {argv[0]}") from exc
    except subprocess.TimeoutExpired as exc:
        raise BenchmarkError(f"{what}: {Path(argv[0]).name} timed out after {timeout_seconds:g} s") from exc
