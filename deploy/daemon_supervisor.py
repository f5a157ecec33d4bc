"""Where each Ceph daemon of a dev cluster runs and how it is started, stopped and found.

`DaemonPlacement` is the seam: the dev cluster decides *when* (mon before mgr before OSDs
before MDS and gateway on `up`, the reverse on `down`, stop-all-then-start on a restart) and a
placement decides *where and how*. `ProcessDaemons` runs each daemon as a process on its host -- this
machine, or a namespace host entered with nsenter (deploy/placement.py) -- from the cluster's
release, and finds it again by its pid file and command line. Another placement (a daemon in a
container, or a recording fake in the unit tests) implements the same four methods.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Protocol

from cephscope.deploy.cluster_commands import ClusterCommands
from cephscope.deploy.cluster_layout import ClusterLayout, DevClusterError
from cephscope.deploy.placement import DevHost
from cephscope.deploy.procs import pid_file_locked, pid_from_file, terminate

BINARIES = {"mon": "ceph-mon", "mgr": "ceph-mgr", "osd": "ceph-osd", "mds": "ceph-mds"}
# A RADOS gateway is a client of the cluster (`client.rgw.<id>`), started by its full name.
GATEWAY_PREFIX = "client.rgw."
GATEWAY_BINARY = "radosgw"


class DaemonPlacement(Protocol):
    """Where the daemons of one dev cluster ("mon.a", "mgr.x", "osd.3", "mds.a",
    "client.rgw.a") run."""

    def host_of(self, daemon: str) -> DevHost:
        """The host the daemon lives on."""
        ...

    def start(self, daemon: str, env: Mapping[str, str] | None = None) -> None:
        """Start the daemon (extra environment `env`) and return once it runs; raise
        DevClusterError if it does not."""
        ...

    def stop(self, daemon: str, timeout: float = 30) -> bool:
        """Stop the daemon if it runs (SIGKILL after `timeout`); whether it was running."""
        ...

    def pid(self, daemon: str) -> int | None:
        """The daemon's pid on this machine while it runs, else None."""
        ...


def daemon_argv(layout: ClusterLayout, daemon: str, env: Mapping[str, str] | None = None) -> list[str]:
    """The argv that starts `daemon`. `env K=V … binary`: the environment reaches the daemon
    wherever it is placed (a namespace, a release root), without a shell."""
    kind, _, ident = daemon.partition(".")
    with_env = ["env", *(f"{k}={v}" for k, v in env.items())] if env else []
    if daemon.startswith(GATEWAY_PREFIX) and daemon != GATEWAY_PREFIX:
        return [*with_env, GATEWAY_BINARY, "-c", str(layout.conf_path), "-n", daemon]
    if kind not in BINARIES or not ident:
        raise DevClusterError(f"no daemon kind for {daemon!r}")
    return [*with_env, BINARIES[kind], "-c", str(layout.conf_path), "-i", ident,
            *(layout.osd_release_args() if kind == "osd" else [])]


class ProcessDaemons:
    """Daemons as processes on their hosts (this machine or namespace hosts), each found by
    its pid file in the state dir AND a command line that names the cluster's conf."""

    def __init__(self, layout: ClusterLayout, commands: ClusterCommands,
                 log: Callable[[str], None], start_timeout: float = 30) -> None:
        self.layout = layout
        self.commands = commands
        self._log = log
        self.start_timeout = start_timeout

    def host_of(self, daemon: str) -> DevHost:
        return self.layout.host_of(daemon)

    def pid(self, daemon: str) -> int | None:
        return pid_from_file(self.layout.pid_file(daemon), str(self.layout.conf_path))

    def start(self, daemon: str, env: Mapping[str, str] | None = None) -> None:
        argv = daemon_argv(self.layout, daemon, env)
        # The daemons fork into the background themselves and write their pid files.
        for attempt in range(3):
            try:
                self.commands.run_on(self.host_of(daemon), argv, timeout=120)
                break
            except DevClusterError as exc:
                # The previous instance's last threads can hold the pid-file lock for a moment
                # after it was reaped.
                if "failed to lock pidfile" not in str(exc) or attempt == 2:
                    raise
                time.sleep(1)
        deadline = time.monotonic() + self.start_timeout
        while self.pid(daemon) is None:
            if time.monotonic() > deadline:
                raise DevClusterError(
                    f"{daemon} did not start; see {self.layout.log_dir}/ceph-{daemon}.log"
                )
            time.sleep(0.1)

    def stop(self, daemon: str, timeout: float = 30) -> bool:
        pid = self.pid(daemon)
        if pid is None:
            return False
        terminate(pid, timeout, log=self._log)
        # The next start must not find the old instance's lock (see `start`).
        deadline = time.monotonic() + 10
        while pid_file_locked(self.layout.pid_file(daemon)) and time.monotonic() < deadline:
            time.sleep(0.05)
        return True
