"""Process helpers shared by the dev cluster and the local stack: find our own daemons by pid
file and command line, stop them by pid, check ports. Nothing here ends a process it cannot
prove is ours."""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any


def exporter_binary() -> str:
    """cephscope-exporter of this installation (beside the running interpreter), else PATH's."""
    beside = Path(sys.executable).parent / "cephscope-exporter"
    return str(beside) if beside.exists() else "cephscope-exporter"


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


# How long a just-started process may show an empty command line (see pid_from_file).
EXEC_SETTLE_SECONDS = 2.0


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie is not alive for our purposes -- but a leader thread can be a zombie while the
    # process's other threads still run (and still hold the OSD's pid-file lock): the process
    # is alive while any of its threads is not a zombie.
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return False
    for task in tasks:
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue
        if stat.rsplit(")", 1)[1].split()[0] != "Z":
            return True
    return False


def pid_from_file(pid_file: Path, cmdline_must_contain: str) -> int | None:
    """The live pid recorded in pid_file, if its command line names `cmdline_must_contain`
    (a pid file can outlive its process and the pid be recycled by a stranger)."""
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return None
    if not pid_alive(pid):
        return None
    cmdline = proc_cmdline(pid)
    # A process still inside execve has an empty command line for a moment (its new argv is
    # not set up yet), and a loaded machine makes that moment long: wait it out.
    deadline = time.monotonic() + EXEC_SETTLE_SECONDS
    while not cmdline and pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.01)
        cmdline = proc_cmdline(pid)
    if cmdline_must_contain not in cmdline:
        return None
    return pid


def terminate(pid: int, timeout: float, log: Any = None) -> None:
    """SIGTERM one process of ours and wait for it; SIGKILL after `timeout`."""
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    killed = False
    while pid_alive(pid):
        if not killed and time.monotonic() > deadline:
            if log:
                log(f"pid {pid} ignored SIGTERM for {timeout:.0f}s; sending SIGKILL")
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            killed = True
        time.sleep(0.05)
    # Reap it when it is our child (tests start daemons in-process).
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def pid_file_locked(path: Path) -> bool:
    """Whether a process holds the POSIX lock a Ceph daemon takes on its pid file."""
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return False
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    else:
        fcntl.lockf(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def proc_cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]
