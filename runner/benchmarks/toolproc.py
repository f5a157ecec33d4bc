"""Run benchmark tools (argv lists, never a shell) in parallel, streaming their stdout.

Each process's stdout goes to a file and, chunk by chunk as it arrives, to a callback so the
benchmark can report live per-second figures. The whole group shares one deadline; on timeout
every process of the group is killed (only those, by pid) and a `BenchmarkError` is raised.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cephscope.runner.benchmarks.base import BenchmarkError

STDERR_TAIL_CHARS = 2000


@dataclass
class ToolCommand:
    """One process to start: its argv and where its output goes."""

    argv: Sequence[str]
    stdout_path: Path
    stderr_path: Path
    # called with every decoded chunk of stdout as it arrives (from a reader thread)
    on_output: Callable[[str], None] | None = None
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass
class ToolOutcome:
    command: ToolCommand
    returncode: int
    pid: int
    elapsed_seconds: float


def resolve_tool(name_or_path: str) -> str:
    """Absolute path of a tool, or a clear error when it is not installed."""
    found = shutil.which(name_or_path)
    if found is None:
        package = "ceph-common" if Path(name_or_path).name in ("rados", "rbd") else name_or_path
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
    commands: Sequence[ToolCommand], timeout_seconds: float, what: str
) -> list[ToolOutcome]:
    """Start all commands at once, wait for all; raise BenchmarkError on timeout or failure.

    A non-zero exit of any process raises with that process's stderr tail.
    """
    procs: list[tuple[ToolCommand, subprocess.Popen[bytes], threading.Thread]] = []
    started = time.monotonic()
    try:
        for command in commands:
            command.stdout_path.parent.mkdir(parents=True, exist_ok=True)
            env = dict(os.environ)
            env.update(command.env)
            stderr_file = command.stderr_path.open("wb")
            try:
                proc = subprocess.Popen(
                    list(command.argv),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=stderr_file,
                    env=env,
                    start_new_session=True,
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
            procs.append((command, proc, reader))

        deadline = started + timeout_seconds
        outcomes: list[ToolOutcome] = []
        for command, proc, reader in procs:
            remaining = max(0.0, deadline - time.monotonic())
            try:
                returncode = proc.wait(timeout=remaining)
            except subprocess.TimeoutExpired as exc:
                raise BenchmarkError(
                    f"{what}: {Path(command.argv[0]).name} did not finish within "
                    f"{timeout_seconds:g} s (killed); output so far in {command.stdout_path}"
                ) from exc
            reader.join(timeout=max(1.0, deadline - time.monotonic()))
            outcomes.append(
                ToolOutcome(command, returncode, proc.pid, time.monotonic() - started)
            )
    finally:
        # kill whatever of ours is still running (timeout, error, Ctrl-C)
        for _command, proc, _reader in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        for _command, _proc, reader in procs:
            reader.join(timeout=5)

    for outcome in outcomes:
        if outcome.returncode != 0:
            tail = stderr_tail(outcome.command.stderr_path)
            raise BenchmarkError(
                f"{what}: {Path(outcome.command.argv[0]).name} exited with status "
                f"{outcome.returncode} (stderr {outcome.command.stderr_path}):\n{tail}"
            )
    return outcomes


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
