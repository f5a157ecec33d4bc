"""Client endpoints: what fio runs against on each client, made before a step and removed
after it (CBT's client_endpoints). A driver makes every client's endpoints in `create` and
removes them in `remove`, which is always called, also after a failure; every change outside
the run dir (a mount, a filesystem's pool) is in the run's journal (`UndoLog`) before it is
made, so a killed run's successor or the restore undoes it.

An endpoint is an RBD image fio reaches with its rbd engine, a file (an image exposed by a FUSE
or kernel driver), or a directory fio makes its files in (CephFS). Paths on a client are
cephscope's own, under the run dir (`client-work/<client>/`): never a path from the cluster.
"""

from __future__ import annotations

import abc
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from cephscope.runner.benchmarks.base import BenchContext, BenchmarkError
from cephscope.runner.endpoints.settings import EndpointSpec
from cephscope.runner.endpoints.undo import MonCommand, UndoLog
from cephscope.runner.hostexec import HostExec, HostExecError, LocalHost

# a client's name as it goes into a path or an RBD image name
SAFE_NAME = re.compile(r"[^A-Za-z0-9_.-]")
HOST_SECONDS = 120.0
WORK_DIR = "client-work"


def safe(name: str) -> str:
    return SAFE_NAME.sub("_", name)


@dataclass(frozen=True)
class Client:
    """One client of the step: `host` None is this machine."""

    host: HostExec | None

    @property
    def name(self) -> str:
        return "local" if self.host is None else self.host.name

    def exec(self) -> HostExec:
        return LocalHost() if self.host is None else self.host

    def run(self, argv: Sequence[str], what: str, timeout: float = HOST_SECONDS,
            env: dict[str, str] | None = None) -> str:
        """Run on the client; its stdout, or BenchmarkError naming the client and `what`."""
        try:
            done = self.exec().run(argv, timeout=timeout, env=env)
        except HostExecError as exc:
            raise BenchmarkError(f"{what}: {exc}") from exc
        return done.stdout.decode(errors="replace")


@dataclass(frozen=True)
class Endpoint:
    """One endpoint on one client: `kind` rbd (pool + image), file or directory (path)."""

    client: Client
    index: int
    kind: str
    pool: str = ""
    image: str = ""
    path: str = ""

    def fio_args(self, client_id: str) -> list[str]:
        """The fio options that point a job at this endpoint."""
        if self.kind == "rbd":
            return ["--ioengine=rbd", f"--clientname={client_id}", f"--pool={self.pool}",
                    f"--rbdname={self.image}", "--invalidate=0"]
        if self.kind == "file":
            return [f"--filename={self.path}"]
        return [f"--directory={self.path}"]


@dataclass
class EndpointSite:
    """What a driver works with: the step's context, the endpoint section, the clients, the
    run's journal of changes and (for the CephFS drivers) the cluster's mon commands."""

    ctx: BenchContext
    spec: EndpointSpec
    undo: UndoLog
    ceph: MonCommand | None = None
    # profile name, application -> the pool made (or reused) for it
    ensure_pool: Callable[[str, str], str] | None = None
    # CBT's cluster.cephfs_pools as {"cephfs_data": profile, "cephfs_metadata": profile}
    cephfs_pools: dict[str, str] = field(default_factory=dict)
    log: Callable[[str], None] = lambda line: None

    @property
    def clients(self) -> list[Client]:
        return [Client(h) for h in self.ctx.clients] or [Client(None)]

    def client(self, host: HostExec | None) -> Client:
        return Client(host)

    def work_dir(self, client: Client) -> Path:
        """cephscope's own dir for this client's mounts and logs, beside the step dirs (a
        resumed step's dir is emptied: nothing mounted may live in it)."""
        return self.ctx.step_dir.parent / WORK_DIR / safe(client.name)

    def mountpoint(self, client: Client, index: int) -> str:
        return str(self.work_dir(client) / "mnt" / f"{self.ctx.step_id}-{index}")

    def image_name(self, client: Client, index: int) -> str:
        """An image of this step on this client: clients never share one."""
        return f"cephscope-{self.ctx.step_id}-{safe(client.name)}-{index}"


class Driver(abc.ABC):
    """One kind of client endpoint."""

    name: ClassVar[str]
    #: the pool application of the pools its endpoints live in (None: no pool of the step)
    pool_application: ClassVar[str | None] = "rbd"

    def __init__(self, site: EndpointSite) -> None:
        self.site = site

    @abc.abstractmethod
    def create(self) -> None:
        """Make every client's endpoints (each change journaled before it is made)."""

    @abc.abstractmethod
    def endpoints(self, client: Client) -> list[Endpoint]:
        """The endpoints of one client, in order."""

    @abc.abstractmethod
    def remove(self) -> list[str]:
        """Remove what `create` made (whatever part of it was made); problems, not raised."""

    def env(self) -> dict[str, str]:
        """The environment of the driver's tools on a client (cluster config, keyring)."""
        ctx = self.site.ctx
        env = {"CEPH_CONF": str(ctx.cluster.conf_path)}
        if ctx.cluster.keyring_path is not None:
            env["CEPH_ARGS"] = f"--keyring={ctx.cluster.keyring_path}"
        return env
