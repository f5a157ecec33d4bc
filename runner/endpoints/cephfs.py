"""CephFS endpoints: the filesystem a step's files go to, and the `cephfs-fuse` driver (a
`ceph-fuse` mount per endpoint and client; fio makes its files in a directory per endpoint).

Which filesystem, and which pool its files use (CBT's `cluster.cephfs_pools`):
- the cluster has a filesystem (the endpoint section's `filesystem`, else the first of `ceph fs
  ls`): without cephfs_pools, the step's files go where the filesystem puts them; with it, a
  pool made from the `cephfs_data` profile (`cephscope-<profile>-cephfs-data`: an RBD pool of
  the same profile could not be a CephFS data pool) is added to that filesystem (`fs add_data_pool`) and
  the step's directory gets it as its layout (`ceph.dir.layout.pool`), so the profile decides
  where the data lives; the metadata profile is not applied (the filesystem's metadata pool
  stays), which is said in the log. The data pool is taken out of the filesystem at the end.
- the cluster has none: with cephfs_pools, a filesystem `cephscope` (or the section's
  `filesystem`) is made from a metadata pool and a data pool of those profiles, and removed at
  the end (an MDS must be there to take it); without, the sweep is refused before any change.
Both changes are in the run's journal before they are made. Each step's files live in
`/cephscope-<run>-<step>/<client>-<n>`, removed with the step.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from cephscope.runner.benchmarks.base import BenchmarkError
from cephscope.runner.endpoints.base import Client, Driver, Endpoint, EndpointSite, safe
from cephscope.runner.endpoints.mounts import is_mounted, mount, unmount_all
from cephscope.runner.endpoints.undo import MonCommand

NEW_FILESYSTEM = "cephscope"
LAYOUT_XATTR = "ceph.dir.layout.pool"
MDS_ACTIVE_SECONDS = 60.0
# Sets a directory's layout pool on the client, through its mount (argv: path, pool).
SET_LAYOUT = (f"import os, sys; os.setxattr(sys.argv[1], {LAYOUT_XATTR!r}, "
              f"sys.argv[2].encode()); print(os.getxattr(sys.argv[1], {LAYOUT_XATTR!r}).decode())")


@dataclass(frozen=True)
class Filesystem:
    name: str
    # the pool the step's directory is laid out on (None: the filesystem's default)
    layout_pool: str | None = None


def filesystems(ceph: MonCommand) -> list[Mapping[str, Any]]:
    found = ceph("fs ls") or []
    return [f for f in found if isinstance(f, Mapping) and isinstance(f.get("name"), str)]


def filesystem_problem(ceph: MonCommand, wanted: str | None, has_pools: bool) -> str | None:
    """Why the cephfs drivers cannot run on this cluster (asked before any change), or None."""
    names = [f["name"] for f in filesystems(ceph)]
    if has_pools:
        return None
    if wanted is not None and wanted not in names:
        return (f"the cluster has no CephFS filesystem {wanted!r} (it has: "
                f"{', '.join(names) or 'none'}); give cluster.cephfs_pools to have one made")
    if not names:
        return ("the cluster has no CephFS filesystem; make one (an MDS and `ceph fs new`) or "
                "give cluster.cephfs_pools to have the sweep make one")
    return None


def wait_active(ceph: MonCommand, name: str, seconds: float = MDS_ACTIVE_SECONDS) -> None:
    deadline = time.monotonic() + seconds
    while True:
        mdsmap = (ceph("fs get", fs_name=name) or {}).get("mdsmap") or {}
        states = [i.get("state") for i in (mdsmap.get("info") or {}).values()]
        if "up:active" in states:
            return
        if time.monotonic() > deadline:
            raise BenchmarkError(f"filesystem {name}: no MDS became active within {seconds:g} s "
                                 f"(MDS states: {states or 'none'}; is a standby MDS running?)")
        time.sleep(1.0)


def ensure_filesystem(site: EndpointSite) -> Filesystem:
    """The filesystem of the step's files, made or given its data pool as the module says."""
    if site.ceph is None:
        raise BenchmarkError("cephfs endpoints need the cluster's mon commands")
    # a failed mon command raises the cluster's own error (the step fails with it)
    ceph, wanted = site.ceph, site.spec.filesystem
    found = {f["name"]: f for f in filesystems(ceph)}
    name = wanted if wanted in found else (None if wanted else next(iter(found), None))
    if name is not None:
        if not site.cephfs_pools or site.ensure_pool is None:
            return Filesystem(name)
        pool = site.ensure_pool(site.cephfs_pools["cephfs_data"], "cephfs", "cephfs-data")
        if pool not in (found[name].get("data_pools") or []):
            entry = {"kind": "cephfs_data_pool", "fs": name, "pool": pool}
            site.undo.add(entry)
            ceph("fs add_data_pool", fs_name=name, pool=pool)
        site.log(f"filesystem {name}: the step's files go to pool {pool} (profile "
                 f"{site.cephfs_pools['cephfs_data']}); its metadata pool stays as it is "
                 f"(cephfs_metadata profile {site.cephfs_pools['cephfs_metadata']} not "
                 "applied to an existing filesystem)")
        return Filesystem(name, pool)
    if not site.cephfs_pools or site.ensure_pool is None:
        raise BenchmarkError(filesystem_problem(ceph, wanted, False)
                             or "no filesystem to use")
    name = wanted or NEW_FILESYSTEM
    metadata = site.ensure_pool(site.cephfs_pools["cephfs_metadata"], "cephfs",
                                "cephfs-metadata")
    data = site.ensure_pool(site.cephfs_pools["cephfs_data"], "cephfs", "cephfs-data")
    site.undo.add({"kind": "filesystem", "fs": name})
    ceph("fs new", fs_name=name, metadata=metadata, data=data)
    site.log(f"filesystem {name}: made from pools {metadata} (metadata) and {data} (data); "
             "removed at the end of the run")
    wait_active(ceph, name, MDS_ACTIVE_SECONDS)
    return Filesystem(name)


def ceph_fuse_argv(conf: str, client_name: str, keyring: str | None, fs_name: str,
                   mountpoint: str) -> list[str]:
    keyring_args = ["-k", keyring] if keyring else []
    # several mounts of one client name: no pid file or admin socket of the conf's (the
    # second mount would find them taken and fail)
    return ["ceph-fuse", "-c", conf, "-n", client_name, *keyring_args, "--pid_file=",
            "--admin_socket=", f"--client_fs={fs_name}", mountpoint]


class CephfsFuseDriver(Driver):
    name: ClassVar[str] = "cephfs-fuse"
    pool_application: ClassVar[str | None] = "cephfs"

    def __init__(self, site: EndpointSite) -> None:
        super().__init__(site)
        self.mounts: list[tuple[Client, str]] = []
        self.base = f"cephscope-{safe(site.ctx.run_id)}-{site.ctx.step_id}"

    def mount_argv(self, fs_name: str, path: str) -> list[str]:
        cluster = self.site.ctx.cluster
        keyring = str(cluster.keyring_path) if cluster.keyring_path else None
        return ceph_fuse_argv(str(cluster.conf_path), cluster.client_name, keyring, fs_name,
                              path)

    def directory(self, client: Client, index: int) -> str:
        return f"{self.site.mountpoint(client, index)}/{self.base}/{safe(client.name)}-{index}"

    def create(self) -> None:
        site = self.site
        fs = ensure_filesystem(site)
        for client in site.clients:
            for index in range(site.spec.endpoints_per_client):
                path = site.mountpoint(client, index)
                self.mounts.append((client, path))
                mount(site, client, path, self.mount_argv(fs.name, path))
        first, first_path = self.mounts[0]
        base = f"{first_path}/{self.base}"
        # a leftover of an interrupted attempt of this same step: start clean
        first.run(["rm", "-rf", "--one-file-system", base], f"rm {base} on {first.name}")
        first.run(["mkdir", base], f"mkdir {base} on {first.name}")
        if fs.layout_pool is not None:
            shown = first.run(["python3", "-c", SET_LAYOUT, base, fs.layout_pool],
                              f"layout of {base} on {first.name}").strip()
            if shown != fs.layout_pool:
                raise BenchmarkError(f"{base}: layout pool reads {shown!r}, not "
                                     f"{fs.layout_pool!r}")
        for client in site.clients:
            for index in range(site.spec.endpoints_per_client):
                path = self.directory(client, index)
                client.run(["mkdir", "-p", path], f"mkdir {path} on {client.name}")

    def endpoints(self, client: Client) -> list[Endpoint]:
        return [Endpoint(client, i, "directory", path=self.directory(client, i))
                for i in range(self.site.spec.endpoints_per_client)]

    def remove(self) -> list[str]:
        problems: list[str] = []
        mounted = [(c, p) for c, p in self.mounts if _mounted_quietly(c, p)]
        if mounted:
            client, path = mounted[0]
            base = f"{path}/{self.base}"
            try:
                client.run(["rm", "-rf", "--one-file-system", base], f"rm {base}",
                           timeout=600)
            except BenchmarkError as exc:
                problems.append(str(exc))
        problems += unmount_all(self.site, self.mounts)
        self.mounts = []
        return problems


def _mounted_quietly(client: Client, path: str) -> bool:
    try:
        return is_mounted(client, path)
    except BenchmarkError:
        return False
