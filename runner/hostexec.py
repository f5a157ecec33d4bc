"""Running commands on a host: this machine, or another one over SSH.

Everything the runner runs on a host — benchmarks on clients, knobs and cache drops on OSD
hosts, restarts, environment capture — goes through a `HostExec`, so the runner has one way to
reach a host and never knows whether that host is a real machine or a network namespace.

SSH is the OpenSSH client binary, so the user's ~/.ssh/config, agent, ProxyJump and
known_hosts apply. The remote side hands the command line to a shell: every argv element is
quoted with `shlex.quote`, so a value from a spec is one argument there as it is here.

The destination always follows `--` (`ssh <options> -- NAME 'remote line'`): a host name comes
from places cephscope does not control (an OSD's metadata reports whatever its container's
NODE_NAME says), and without `--` a name like `-oProxyCommand=…` would be an ssh option run
here as root. After `--` OpenSSH takes the next word as the destination and everything after it
as the remote command, parsing no option there.
"""

from __future__ import annotations

import contextlib
import shlex
import subprocess
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

T = TypeVar("T")

LOCAL_HOST_NAMES = ("local", "localhost")
# A peer that stops answering (host gone, cable pulled) is given up after INTERVAL x COUNT
# seconds: without it a session (or the multiplexing master carrying every session to that
# host) would wait for TCP's own timeout, minutes.
SERVER_ALIVE_INTERVAL = 2
SERVER_ALIVE_COUNT_MAX = 3
# An idle multiplexing master stays this long (a killed runner leaves it behind this long).
CONTROL_PERSIST_SECONDS = 30


class HostExecError(RuntimeError):
    """A command could not run on a host, or failed there; the message names the host."""


class HostExec(Protocol):
    name: str

    def argv(self, argv: Sequence[str], env: Mapping[str, str] | None = None) -> list[str]:
        """The local argv that runs `argv` on this host."""
        ...

    def run(self, argv: Sequence[str], *, timeout: float, input: bytes | None = None,
            check: bool = True, env: Mapping[str, str] | None = None,
            ) -> subprocess.CompletedProcess[bytes]:
        ...

    def popen(self, argv: Sequence[str], env: Mapping[str, str] | None = None,
              **kwargs: Any) -> subprocess.Popen[bytes]:
        ...


def _with_env(argv: Sequence[str], env: Mapping[str, str] | None) -> list[str]:
    """`env K=V … argv`: environment for the command alone, the same locally and remotely."""
    if not env:
        return list(argv)
    return ["env", *(f"{key}={value}" for key, value in env.items()), *argv]


def _run(host: str, local_argv: list[str], shown: Sequence[str], timeout: float,
         input: bytes | None, check: bool) -> subprocess.CompletedProcess[bytes]:
    try:
        proc = subprocess.run(local_argv, capture_output=True, timeout=timeout, input=input,
                              check=False)
    except subprocess.TimeoutExpired as exc:
        raise HostExecError(f"{host}: timed out after {timeout:.0f}s: {shlex.join(shown)}") from exc
    except OSError as exc:
        raise HostExecError(f"{host}: cannot run {local_argv[0]}: {exc.strerror}") from exc
    if check and proc.returncode != 0:
        tail = " | ".join(proc.stderr.decode(errors="replace").strip().splitlines()[-3:])
        raise HostExecError(f"{host}: {shlex.join(shown)} failed ({proc.returncode}): {tail}")
    return proc


@dataclass
class LocalHost:
    """This machine."""

    name: str = "local"

    def argv(self, argv: Sequence[str], env: Mapping[str, str] | None = None) -> list[str]:
        return _with_env(argv, env)

    def run(self, argv: Sequence[str], *, timeout: float, input: bytes | None = None,
            check: bool = True, env: Mapping[str, str] | None = None,
            ) -> subprocess.CompletedProcess[bytes]:
        return _run(self.name, self.argv(argv, env), argv, timeout, input, check)

    def popen(self, argv: Sequence[str], env: Mapping[str, str] | None = None,
              **kwargs: Any) -> subprocess.Popen[bytes]:
        return subprocess.Popen(self.argv(argv, env), **kwargs)


@dataclass
class SshHost:
    """Another host, reached with the OpenSSH client: BatchMode (never a password prompt), a
    connect timeout, keep-alives, and with a `control_dir` one multiplexed master connection
    per host (ControlMaster), ended by `close`. The user's `options` come first: ssh keeps the
    first value it is given for an option, so they override these defaults."""

    name: str
    user: str | None = None
    port: int | None = None
    identity_file: Path | None = None
    options: Sequence[str] = field(default_factory=tuple)  # extra `-o Key=Value` settings
    control_dir: Path | None = None
    connect_timeout: int = 10
    ssh_bin: str = "ssh"
    config_file: Path | None = None  # `ssh -F`: e.g. the ssh_config a multi-host dev cluster writes

    def ssh_argv(self) -> list[str]:
        """`ssh … -- host`: everything but the remote command."""
        return [*self.ssh_options_argv(), "--", self.name]

    def ssh_options_argv(self) -> list[str]:
        """`ssh …`: the binary and its options, no destination."""
        argv = [self.ssh_bin]
        if self.config_file is not None:
            argv += ["-F", str(self.config_file)]
        for option in self.options:
            argv += ["-o", option]
        argv += ["-o", "BatchMode=yes", "-o", f"ConnectTimeout={self.connect_timeout}",
                 "-o", f"ServerAliveInterval={SERVER_ALIVE_INTERVAL}",
                 "-o", f"ServerAliveCountMax={SERVER_ALIVE_COUNT_MAX}"]
        if self.control_dir is not None:
            argv += ["-o", "ControlMaster=auto",
                     "-o", f"ControlPersist={CONTROL_PERSIST_SECONDS}",
                     "-o", f"ControlPath={self.control_dir}/%C"]
        if self.user:
            argv += ["-l", self.user]
        if self.port:
            argv += ["-p", str(self.port)]
        if self.identity_file:
            argv += ["-i", str(self.identity_file)]
        return argv

    def close(self) -> None:
        """End the multiplexing master connection, if one runs (`ssh -O exit`)."""
        if self.control_dir is None:
            return
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            subprocess.run([*self.ssh_options_argv(), "-O", "exit", "--", self.name],
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=10, check=False)

    def argv(self, argv: Sequence[str], env: Mapping[str, str] | None = None) -> list[str]:
        # ssh joins its arguments with spaces for the remote shell: hand it one quoted line.
        return [*self.ssh_argv(), shlex.join(_with_env(argv, env))]

    def run(self, argv: Sequence[str], *, timeout: float, input: bytes | None = None,
            check: bool = True, env: Mapping[str, str] | None = None,
            ) -> subprocess.CompletedProcess[bytes]:
        return _run(self.name, self.argv(argv, env), argv, timeout, input, check)

    def popen(self, argv: Sequence[str], env: Mapping[str, str] | None = None,
              **kwargs: Any) -> subprocess.Popen[bytes]:
        return subprocess.Popen(self.argv(argv, env), **kwargs)


def is_local(host: HostExec) -> bool:
    return isinstance(host, LocalHost)


def check_reachable(hosts: Sequence[HostExec], timeout: float = 30) -> list[str]:
    """One line per host that cannot run `true` (unreachable, key refused, host key mismatch),
    naming the host and ssh's own reason; all hosts are tried at once."""
    procs = []
    for host in hosts:
        procs.append((host, subprocess.Popen(host.argv(["true"]), stdin=subprocess.DEVNULL,
                                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)))
    problems = []
    for host, proc in procs:
        try:
            _out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            problems.append(f"{host.name}: no answer within {timeout:.0f}s")
            continue
        if proc.returncode != 0:
            lines = [line for line in err.decode(errors="replace").strip().splitlines() if line.strip()]
            reason = lines[-1] if lines else f"exit status {proc.returncode}"
            problems.append(f"{host.name}: cannot run commands there: {reason}")
    return problems


def on_each_host(work: Mapping[str, Callable[[], T]]) -> dict[str, T]:
    """Each host's work at once, one thread per host (each mostly waits on its ssh; an ssh
    connection costs seconds on a loaded machine, and hosts add up). Results in `work`'s order;
    once every host is done, the first failure in that order is raised."""
    if len(work) <= 1:
        return {key: fn() for key, fn in work.items()}
    with ThreadPoolExecutor(max_workers=len(work)) as pool:
        futures = {key: pool.submit(fn) for key, fn in work.items()}
    return {key: future.result() for key, future in futures.items()}


def host_exec(name: str | None, **ssh_settings: Any) -> HostExec:
    """The HostExec for a host name from a spec or flag: local names run here, others over SSH."""
    if not name or name in LOCAL_HOST_NAMES:
        return LocalHost()
    return SshHost(name, **ssh_settings)
