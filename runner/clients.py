"""The hosts a sweep's benchmarks run on: built from the spec's `cluster:` keys and the SSH
flags, checked before the sweep changes anything, and their start/end per step."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cephscope.runner.benchmarks.toolproc import guard_times
from cephscope.runner.hostexec import LOCAL_HOST_NAMES, HostExec, SshHost, check_reachable
from cephscope.runner.spec import HostsSpec


class ClientsError(RuntimeError):
    """A client cannot be used; the message names it."""


@dataclass(frozen=True)
class SshSettings:
    """How the runner reaches other hosts; flags win over the spec's `cluster:` keys."""

    config_file: Path | None = None
    user: str | None = None
    port: int | None = None
    identity_file: Path | None = None
    options: tuple[str, ...] = ()
    connect_timeout: int = 10
    # one multiplexed master connection per client for the run (ControlMaster)
    multiplex: bool = True

    def merged(self, hosts: HostsSpec, default_config: Path | None = None) -> SshSettings:
        return SshSettings(
            config_file=self.config_file
            or (Path(hosts.ssh_config) if hosts.ssh_config else default_config),
            user=self.user or hosts.user,
            port=self.port or hosts.ssh_port,
            identity_file=self.identity_file
            or (Path(hosts.ssh_identity_file) if hosts.ssh_identity_file else None),
            options=(*hosts.ssh_options, *self.options),
            connect_timeout=self.connect_timeout,
            multiplex=self.multiplex,
        )


def build_clients(names: Sequence[str], ssh: SshSettings, control_dir: Path | None) -> list[HostExec]:
    """One HostExec per client name; none for a sweep that runs on this machine alone."""
    if not names or list(names) in ([n] for n in LOCAL_HOST_NAMES):
        return []
    locals_named = [n for n in names if n in LOCAL_HOST_NAMES]
    if locals_named:
        raise ClientsError(f"client {locals_named[0]!r} with other clients: name this machine "
                           "as other hosts reach it, or run on it alone")
    return [SshHost(name, user=ssh.user, port=ssh.port, identity_file=ssh.identity_file,
                    options=ssh.options, control_dir=control_dir,
                    connect_timeout=ssh.connect_timeout, config_file=ssh.config_file)
            for name in names]


def ssh_control_dir(run_key: Path) -> Path:
    """A short private dir for ssh's multiplexing sockets of one run (a unix socket path must
    stay under 108 bytes, and %C names a 40-character socket), the same for the run and its
    `--resume`, so that a resumed run reuses and then ends the masters of the killed one.

    Its name is predictable, so another local user could make it first and then see every
    remote command of the run and answer in the hosts' place: it is used only if it is a real
    directory (not a symlink: `lstat`) owned by this user with no access for anyone else."""
    digest = hashlib.sha256(str(Path(run_key).resolve()).encode()).hexdigest()[:12]
    path = Path(tempfile.gettempdir()) / f"cephscope-ssh-{digest}"
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700)
    st = os.lstat(path)
    problem = None
    if not stat.S_ISDIR(st.st_mode):
        problem = "not a directory (a symlink or a file)"
    elif st.st_uid != os.geteuid():
        problem = f"owned by uid {st.st_uid}, not by this user (uid {os.geteuid()})"
    elif st.st_mode & 0o077:
        problem = f"not private (mode {st.st_mode & 0o777:o})"
    if problem:
        raise ClientsError(f"{path}: {problem}; refusing it for ssh's multiplexing sockets "
                           f"(remove it, or run with --no-ssh-multiplex)")
    return path


def close_clients(clients: Sequence[HostExec], control_dir: Path | None) -> None:
    """End every client's multiplexing master and remove the run's socket dir."""
    for client in clients:
        if isinstance(client, SshHost):
            client.close()
    if control_dir is not None:
        with contextlib.suppress(OSError):
            shutil.rmtree(control_dir)


def require_reachable(clients: Sequence[HostExec], timeout: float = 30) -> None:
    """Raise naming every client that cannot run a command (before any config change)."""
    problems = check_reachable(clients, timeout=timeout)
    if problems:
        raise ClientsError("cannot reach client(s): " + "; ".join(problems))


def client_windows(files: Iterable[Path], client_names: Sequence[str]) -> dict[str, dict[str, float]]:
    """Per client, when its first tool process started and its last ended (client clock), from
    the remote guard's lines in the stderr files of one mode of a step."""
    windows: dict[str, dict[str, float]] = {}
    for path in files:
        if path.suffix != ".stderr":
            continue
        owner = next((n for n in client_names if f".{n}." in path.name), None)
        if owner is None:
            continue
        times = guard_times(path)
        window = windows.setdefault(owner, {})
        if "started" in times:
            window["started"] = min(window.get("started", times["started"]), times["started"])
        if "ended" in times:
            window["ended"] = max(window.get("ended", times["ended"]), times["ended"])
    return windows


def start_skew(windows: Mapping[str, Mapping[str, float]]) -> float | None:
    """Seconds between the first and the last client's start (None with fewer than two)."""
    starts = [w["started"] for w in windows.values() if "started" in w]
    return max(starts) - min(starts) if len(starts) >= 2 else None


def per_client_rows(step_id: str, benchmark: str, results: Iterable[Mapping[str, Any]],
                    modes: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Rows of summary-clients.csv for one step: one per mode and client."""
    rows = []
    for result in results:
        mode = result.get("mode")
        windows = (modes.get(str(mode)) or {}).get("clients", {})
        for client, r in (result.get("clients") or {}).items():
            pct = r.get("latency_percentiles_seconds") or {}
            rows.append({
                "step": step_id, "benchmark": benchmark, "mode": mode, "client": client,
                "iops": r.get("iops"),
                "bandwidth_bytes_per_second": r.get("bandwidth_bytes_per_second"),
                "latency_avg_seconds": r.get("latency_avg_seconds"),
                "latency_p99_seconds": pct.get("99", pct.get("99.0")),
                "latency_max_seconds": r.get("latency_max_seconds"),
                "ops": r.get("ops"),
                "start": (windows.get(client) or {}).get("started"),
                "end": (windows.get(client) or {}).get("ended"),
            })
    return rows
