"""How the runner reaches one Ceph cluster: the mon client, the `ceph` CLI, and the handle the
CLI builds (conf, identity, admin sockets, hosts, restart method) and hands to the sweep.

The runner never imports the dev cluster: `cephscope sweep --devcluster` builds a `CephTarget`
in the composition root (`cephscope.sweep_command`); for any other cluster `CephTarget.plain`
makes one from a ceph.conf.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from cephscope.monclient import (
    CALL_GRACE_SECONDS,
    DEFAULT_CLUSTER_TIMEOUT_SECONDS,
    MonCommandError,
    MonTimeout,
    bounded_call,
    bounded_env,
    connect,
    decode_json,
    mon_command,
    raised_from,
    whole_seconds,
)
from cephscope.runner.benchmarks.base import ClusterAccess
from cephscope.runner.hostexec import HostExec, LocalHost, host_exec
from cephscope.runner.mon_relay import RelayedRados
from cephscope.runner.rgw_endpoint import RgwEndpoint

if TYPE_CHECKING:
    from cephscope.runner.restart import RestartMethod


class CephError(RuntimeError):
    """A ceph command failed or the cluster did not reach the wanted state."""


class ClusterLost(CephError):
    """No mon answered a call within its bound: the cluster went away (or we were cut off).
    Retrying the step cannot help; the run stops."""


def cluster_lost(exc: BaseException) -> bool:
    """`exc` says the cluster is lost (a ClusterLost or a MonTimeout, or anything raised from
    one)."""
    return raised_from(exc, (ClusterLost, MonTimeout))


class CephCli:
    """Talks to the mons through librados (`mon_command`, ~1 ms) with one connection for the
    sweep; the `ceph` CLI (0.5-1.5 s per call) only for what librados cannot do here
    (`ceph tell`, argv templates). Errors carry Ceph's own message.

    `tool_prefix` (a cluster of another release, its client tools in a root filesystem): the
    `ceph` CLI runs under it, and librados is the release's own, held by a relay under the
    release's python3 (runner/mon_relay.py), since its binding cannot load into this Python.

    Bounded: no call waits longer than `timeout_seconds` (the cluster timeout: librados'
    mount and mon op timeouts, the CLI's connect timeout, and the wait for either); one that
    no mon answered raises ClusterLost naming the command and the mons. `limit_to` caps every
    later call by one shared deadline (the restore after a signal or a lost cluster)."""

    def __init__(self, conf_path: Path | str, client_name: str = "client.admin",
                 keyring_path: Path | str | None = None, ceph_bin: str = "ceph",
                 timeout_seconds: float = DEFAULT_CLUSTER_TIMEOUT_SECONDS,
                 tool_prefix: Sequence[str] = (),
                 grace_seconds: float = CALL_GRACE_SECONDS) -> None:
        self.conf_path = Path(conf_path)
        self.client_name = client_name
        self.keyring_path = Path(keyring_path) if keyring_path else None
        self.ceph_bin = ceph_bin
        self.timeout_seconds = timeout_seconds
        # beyond a call's timeout, how long we wait for librados' own ETIMEDOUT
        self.grace_seconds = grace_seconds
        self.tool_prefix = tuple(tool_prefix)
        self._rados: Any = None
        self._lock = threading.Lock()
        self._deadline: float | None = None  # time.monotonic() no call may outlast

    def limit_to(self, seconds: float | None) -> None:
        """Every later call ends within `seconds` from now, all of them together (None: no
        shared limit, each call its own bound)."""
        self._deadline = None if seconds is None else time.monotonic() + seconds

    def _bound(self, what: str, timeout: float | None = None) -> float:
        """The timeout of one call: the cluster timeout, or the call's own when longer (a
        slow `ceph tell`), capped by the shared deadline; CephError when that has passed (the
        call is not tried). Never shorter than the cluster timeout otherwise: a call that gives
        up says the cluster is lost, and a mon restart (~10-30 s) is not that."""
        bound = max(timeout or 0.0, self.timeout_seconds)
        if self._deadline is not None:
            left = self._deadline - time.monotonic()
            if left <= 0:
                raise CephError(f"{what}: not tried, the time given to it is used up")
            bound = min(bound, left)
        return bound

    def _cluster(self) -> Any:
        with self._lock:
            if self._rados is None:
                keyring = str(self.keyring_path) if self.keyring_path else None
                timeout = self._bound(f"connecting to the cluster of {self.conf_path}")
                try:
                    if self.tool_prefix:
                        self._rados = RelayedRados(self.tool_prefix, str(self.conf_path),
                                                   self.client_name, keyring, timeout)
                    else:
                        self._rados = connect(str(self.conf_path), self.client_name, keyring,
                                              timeout)
                except MonTimeout as exc:
                    raise ClusterLost(str(exc)) from exc
                except MonCommandError as exc:
                    raise CephError(str(exc)) from exc
            return self._rados

    def command(self, prefix: str, timeout: float | None = None, **args: Any) -> Any:
        """One mon command; JSON result parsed (None when it prints nothing). `timeout` is
        kept for callers' sake: librados bounds every mon op of a handle alike (the cluster
        timeout)."""
        bound = self._bound(f"`ceph {prefix}`")
        try:
            return mon_command(self._cluster(), prefix, bound, self.grace_seconds, **args)
        except MonTimeout as exc:
            raise ClusterLost(str(exc)) from exc
        except MonCommandError as exc:
            raise CephError(str(exc)) from exc

    def client_info(self) -> dict[str, Any]:
        """Which client this runner talks to the cluster with: the `ceph` CLI's version and,
        through a relay, where its librados binding was loaded from."""
        info: dict[str, Any] = {"tool_prefix": list(self.tool_prefix)}
        try:
            info["ceph_version"] = subprocess.run(
                [*self.tool_prefix, self.ceph_bin, "--version"], capture_output=True, text=True,
                check=False, timeout=30).stdout.strip()
        except (OSError, subprocess.TimeoutExpired) as exc:
            info["ceph_version"] = {"error": str(exc)}
        if self.tool_prefix:
            try:
                info["librados"] = self._cluster().client_info
            except CephError as exc:
                info["librados"] = {"error": str(exc)}
        else:
            try:
                import rados  # this machine's binding, the one `connect` loads
            except ImportError as exc:
                info["librados"] = {"error": str(exc)}
            else:
                info["librados"] = {"rados_module": rados.__file__}
        return info

    def close(self) -> None:
        """Shut the handle down; bounded too (a shutdown may wait for an abandoned call)."""
        with self._lock:
            rados, self._rados = self._rados, None
        if rados is not None:
            # a shutdown that hangs is left to the abandoned call's own timeout (or the exit)
            with contextlib.suppress(MonTimeout):
                bounded_call(rados.shutdown, self.grace_seconds, "closing the cluster handle")

    # ---- the ceph CLI --------------------------------------------------------------------------

    def argv(self, *args: str) -> list[str]:
        return [*self.tool_prefix, self.ceph_bin, *self.access().common_args(),
                "--connect-timeout", whole_seconds(self.timeout_seconds), *args]

    def tool_env(self) -> dict[str, str]:
        """The environment of the `ceph` CLI: CEPH_ARGS bounding its librados calls as the
        runner's own (`cephscope.monclient.client_conf`)."""

        return bounded_env(os.environ, self.timeout_seconds)

    def access(self) -> ClusterAccess:
        """The same identity, as benchmarks take it."""
        return ClusterAccess(self.conf_path, self.client_name, self.keyring_path,
                             self.tool_prefix)

    def run(self, *args: str, timeout: float | None = None) -> str:
        argv = self.argv(*args)
        # the CLI's own --connect-timeout ends it first; this only if it hangs past that
        bound = self._bound(f"`ceph {' '.join(args)}`", timeout) + self.grace_seconds
        try:
            # subprocess.run waits in Python (poll + sleep slices): signals are taken
            proc = subprocess.run(argv, capture_output=True, text=True, check=False,
                                  timeout=bound, env=self.tool_env())
        except subprocess.TimeoutExpired as exc:
            raise ClusterLost(f"`ceph {' '.join(args)}` timed out after {exc.timeout:.0f} s: "
                              f"no answer from the cluster of {self.conf_path}") from exc
        except OSError as exc:
            raise CephError(f"cannot run {argv[0]}: {exc.strerror}") from exc
        if proc.returncode != 0:
            tail = " | ".join(proc.stderr.strip().splitlines()[-3:])
            raise CephError(f"`ceph {' '.join(args)}` failed ({proc.returncode}): {tail}")
        return proc.stdout

    def json(self, *args: str, timeout: float | None = None) -> Any:
        try:
            return decode_json(" ".join(args),
                               self.run(*args, "--format", "json", timeout=timeout))
        except MonCommandError as exc:
            raise CephError(str(exc)) from exc


class ReleaseSwitch(Protocol):
    """How a sweep across Ceph releases gets a cluster of each (the dev cluster, rebuilt with
    the same shape); given by the caller that owns the cluster."""

    def problems(self, releases: Sequence[str], prepare: bool) -> list[str]:
        """One line per release that cannot be run (unknown; its client and daemon root
        filesystem cannot be built). `prepare`: build what is missing now. Changes nothing
        on the cluster."""
        ...

    def switch(self, release: str) -> tuple[CephTarget, bool]:
        """The cluster now runs `release`: how to reach it, and whether it was rebuilt (False:
        it already ran that release and was left as it was)."""
        ...


def cluster_version(cli: CephCli) -> str:
    """The version the cluster's daemons report (`ceph versions`): "18.2.7"; several (a mixed
    cluster) joined by "+"."""
    overall = (cli.command("versions") or {}).get("overall") or {}
    numbers = []
    for text in overall:  # "ceph version 18.2.7 (6b0e98…) reef (stable)"
        words = str(text).split()
        numbers.append(words[2] if len(words) > 2 and words[:2] == ["ceph", "version"] else text)
    return "+".join(sorted(numbers))


@dataclass
class CephTarget:
    """Everything the sweep needs to know about reaching one cluster, decided by the caller."""

    conf_path: Path
    client_name: str = "client.admin"
    keyring_path: Path | None = None
    # the admin socket of an OSD on this machine (None: not here; `ceph tell` is used)
    osd_asok: Callable[[int], Path | None] = field(default=lambda osd_id: None)
    # how to run commands on the host an OSD's metadata names (`hostname`)
    host_for: Callable[[str], HostExec] = field(default=lambda hostname: LocalHost())
    # the restart this cluster provides when the spec does not name one (dev cluster: its own)
    default_restart: RestartMethod | None = None
    # an ssh_config naming the cluster's hosts (a multi-host dev cluster writes one): the
    # default for reaching clients when neither the spec nor a flag names one
    ssh_config: Path | None = None
    # argv prefix that runs the cluster's own client tools (ceph, rados bench, fio, the mon
    # relay) on this machine
    tool_prefix: tuple[str, ...] = ()
    # a dev cluster that can be rebuilt on another release (`devcluster: {release: [...]}`)
    releases: ReleaseSwitch | None = None
    # the cluster's RADOS Gateway and a user's keys, when the caller knows them (a dev cluster
    # up with --rgw); the spec and the flags fill in or override (runner/rgw_endpoint.py)
    rgw: RgwEndpoint | None = None

    @classmethod
    def plain(cls, conf_path: Path, client_name: str, keyring_path: Path | None,
              asok_dir: Path, cluster_name: str, local_hosts: frozenset[str] = frozenset(),
              ssh_settings: dict[str, Any] | None = None) -> CephTarget:
        """A cluster given by its ceph.conf: admin sockets `<dir>/<cluster>-osd.N.asok`;
        hosts named in `local_hosts` (and this machine's own name) run here, others over SSH."""
        import socket

        here = {socket.gethostname(), socket.getfqdn(), *local_hosts}

        def asok(osd_id: int) -> Path | None:
            return asok_dir / f"{cluster_name}-osd.{osd_id}.asok"

        def host_for(hostname: str) -> HostExec:
            if hostname in here:
                return LocalHost(hostname)
            return host_exec(hostname, **(ssh_settings or {}))

        return cls(conf_path, client_name, keyring_path, osd_asok=asok, host_for=host_for)
