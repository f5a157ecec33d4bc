"""Where a dev-cluster process runs and from which Ceph release: the one seam for "start this
daemon on that host from that release".

Every process the dev cluster starts — daemons, `ceph`/`rados`/`rbd` admin commands, mkfs,
keyring tools — is built by `Placement.command(host, release, argv)`:

- a `DevHost` is this machine (`netns=None`) or a network namespace that the dev cluster made,
  with its own public (and cluster) address and hostname; the command enters both namespaces
  with `nsenter` (`host_command`);
- a `Release` is the machine's own packages (`root=None`) or a root filesystem holding another
  Ceph release; the command runs chrooted into it, with the cluster's state dir visible at the
  same path (`release_command`).

Nothing outside this module knows how either is done, so a host that is a namespace and a
release that is a root filesystem compose: `nsenter --net=… --uts=… -- <chroot wrapper> ceph-osd …`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path


class PlacementError(RuntimeError):
    """A command could not be placed or failed; the message is one clear line."""


@dataclass(frozen=True)
class Release:
    """Where a release's binaries come from: `root=None` is this machine's own packages."""

    name: str = "host"
    root: Path | None = None


HOST_RELEASE = Release()


@dataclass(frozen=True)
class DevHost:
    """One host of the dev cluster: this machine, or a network namespace of its own."""

    name: str
    netns: str | None = None
    public_addr: str = "127.0.0.1"
    cluster_addr: str | None = None
    # A bind-mounted UTS namespace that gives the host its own hostname (None: the machine's).
    uts_file: Path | None = None


def host_command(host: DevHost, argv: Sequence[str]) -> list[str]:
    """The argv that runs `argv` inside `host`'s namespaces (as it is on this machine)."""
    if host.netns is None:
        return list(argv)
    enter = ["nsenter", f"--net=/run/netns/{host.netns}"]
    if host.uts_file is not None:
        enter.append(f"--uts={host.uts_file}")
    return [*enter, "--", *argv]


def this_machine() -> DevHost:
    """The admin host and the single-host cluster's only host: no namespace, 127.0.0.1."""
    return DevHost(name=os.uname().nodename)


def release_command(release: Release, argv: Sequence[str], binds: Sequence[Path]) -> list[str]:
    """The argv that runs `argv` from `release`'s root filesystem with `binds` visible inside.

    A release on this machine's packages runs as it is. Another release runs through
    `cephscope.deploy.rootexec`, which enters a private mount namespace, binds /proc, /sys, /dev
    and `binds` into the root at the same paths, and chroots: the binds vanish with the process.
    """
    if release.root is None:
        return list(argv)
    return [
        sys.executable,
        "-m",
        "cephscope.deploy.rootexec",
        "--root",
        str(release.root),
        *(f"--bind={path}" for path in binds),
        "--",
        *argv,
    ]


@dataclass
class Placement:
    """Builds and runs the commands of one dev cluster (whose state lives in `state_dir`)."""

    state_dir: Path
    extra_binds: list[Path] = field(default_factory=list)

    def command(self, host: DevHost, release: Release, argv: Sequence[str]) -> list[str]:
        return host_command(host, release_command(release, argv, [self.state_dir, *self.extra_binds]))

    def run(
        self,
        host: DevHost,
        release: Release,
        argv: Sequence[str],
        timeout: float = 60,
        input_bytes: bytes | None = None,
    ) -> subprocess.CompletedProcess[bytes]:
        """Run to completion; raise PlacementError naming the host on failure or timeout."""
        cmd = self.command(host, release, argv)
        where = "" if host.netns is None else f" on {host.name}"
        try:
            proc = subprocess.run(cmd, capture_output=True, timeout=timeout, input=input_bytes, check=False)
        except subprocess.TimeoutExpired as exc:
            raise PlacementError(
                f"{argv[0]}{where} timed out after {timeout:.0f}s: {' '.join(argv)}"
            ) from exc
        except OSError as exc:
            raise PlacementError(f"{argv[0]}{where} could not start: {exc}") from exc
        if proc.returncode != 0:
            tail = proc.stderr.decode(errors="replace").strip().splitlines()[-3:]
            raise PlacementError(f"{' '.join(argv)}{where} failed ({proc.returncode}): {' | '.join(tail)}")
        return proc
