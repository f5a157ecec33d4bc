"""Mounts of a step's endpoints on its clients (FUSE daemons, kernel mounts): each journaled
before it is made and forgotten once unmounted, at a mountpoint of cephscope's own."""

from __future__ import annotations

from collections.abc import Sequence

from cephscope.runner.benchmarks.base import BenchmarkError
from cephscope.runner.endpoints.base import Client, EndpointSite
from cephscope.runner.endpoints.undo import unmount
from cephscope.runner.hostexec import HostExecError

MOUNT_SECONDS = 120.0


def mount_entry(client: Client, path: str) -> dict[str, str]:
    return {"kind": "mount", "host": client.name, "path": path}


def is_mounted(client: Client, path: str) -> bool:
    try:
        return client.exec().run(["mountpoint", "-q", path], timeout=MOUNT_SECONDS,
                                 check=False).returncode == 0
    except HostExecError as exc:
        raise BenchmarkError(f"mount check of {path}: {exc}") from exc


def mount(site: EndpointSite, client: Client, path: str, argv: Sequence[str],
          env: dict[str, str] | None = None) -> None:
    """Mount at `path` on the client with `argv` (a tool that returns once mounted): the
    mountpoint made, a leftover mount of a killed attempt there unmounted first, the mount
    journaled before it is made; BenchmarkError when nothing is mounted afterwards."""
    leftover = unmount(client.exec(), path)
    if leftover is not None:
        raise BenchmarkError(f"a mount left at {path} on {client.name}: {leftover}")
    client.run(["mkdir", "-p", path], f"mkdir {path} on {client.name}")
    site.undo.add(mount_entry(client, path))
    client.run(argv, f"mount {path} on {client.name}", timeout=MOUNT_SECONDS, env=env)
    if not is_mounted(client, path):
        raise BenchmarkError(f"{argv[0]} returned but nothing is mounted at {path} on "
                             f"{client.name}")


def unmount_all(site: EndpointSite, mounts: Sequence[tuple[Client, str]]) -> list[str]:
    """Unmount each (client, path); problems, each mount left in the journal for the restore."""
    problems = []
    for client, path in mounts:
        problem = unmount(client.exec(), path)
        if problem is None:
            site.undo.remove(mount_entry(client, path))
        else:
            problems.append(problem)
    return problems
