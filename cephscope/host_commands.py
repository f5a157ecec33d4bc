"""Every program cephscope and its tests run, and the Debian package that installs it.

One place names them: the dev cluster's and the stack's preflight, the runner's tool lookup and
the fresh-install check (`python -m cephscope.host_commands --check`, run by the test suite in
a fresh Debian container after `deploy/install.sh`) all read this table, and a unit test scans
the source for argv lists whose program is not in it. `deploy/install.sh` must name every
package below (a unit test holds it to that). Standard library only: the exporter uses it too.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType


@dataclass(frozen=True)
class HostCommand:
    name: str
    # The Debian package that installs it; None: not installed by deploy/install.sh (the
    # machine's own toolchain, or a program of the user's cluster hosts).
    package: str | None
    used_for: str
    # False: only on a user's cluster (a restart method), never run on this machine.
    needed_here: bool = True


COMMANDS: tuple[HostCommand, ...] = (
    # Ceph: the dev cluster's daemons and admin tools, the runner's benchmarks and CLI calls
    HostCommand("ceph-mon", "ceph-mon", "dev cluster mon"),
    HostCommand("ceph-mgr", "ceph-mgr", "dev cluster mgr"),
    HostCommand("ceph-osd", "ceph-osd", "dev cluster OSDs"),
    HostCommand("ceph-mds", "ceph-mds", "dev cluster MDS (CephFS targets)"),
    HostCommand("radosgw", "radosgw", "dev cluster RADOS gateway (S3/Swift targets)"),
    HostCommand("radosgw-admin", "ceph-common", "dev cluster gateway user and keys"),
    HostCommand("ceph-fuse", "ceph-fuse", "CephFS FUSE client endpoints"),
    HostCommand("rbd-fuse", "rbd-fuse", "RBD FUSE client endpoints"),
    HostCommand("ceph", "ceph-common", "ceph CLI (dev cluster, runner, environment)"),
    HostCommand("ceph-authtool", "ceph-common", "dev cluster keys"),
    HostCommand("monmaptool", "ceph-base", "dev cluster monmap"),
    HostCommand("rados", "ceph-common", "rados bench, recovery prefill"),
    HostCommand("rbd", "ceph-common", "librbd fio images"),
    HostCommand("fio", "fio", "fio benchmark (rbd engine)"),
    # the local stack and the rule/config checks
    HostCommand("prometheus", "prometheus", "local stack"),
    HostCommand("promtool", "prometheus", "rule tests, config and exposition checks"),
    HostCommand("prometheus-alertmanager", "prometheus-alertmanager", "local stack"),
    HostCommand("amtool", "prometheus-alertmanager", "Alertmanager config check"),
    HostCommand("prometheus-node-exporter", "prometheus-node-exporter", "local stack, namespace hosts"),
    # devices, namespaces and hosts of the dev cluster
    HostCommand("losetup", "mount", "loop-device OSDs"),
    HostCommand("umount", "mount", "namespace hosts' UTS mounts"),
    HostCommand("nsenter", "util-linux", "daemons in namespace hosts"),
    HostCommand("unshare", "util-linux", "namespace hosts' host names; exporter fd-limit test"),
    HostCommand("setpriv", "util-linux", "dev cluster bad-input test"),
    HostCommand("ip", "iproute2", "namespace networks; exporter NIC topology; environment"),
    HostCommand("ss", "iproute2", "listening-address test"),
    HostCommand("sysctl", "procps", "environment capture on every host"),
    HostCommand("sshd", "openssh-server", "namespace hosts (reached over SSH like real hosts)"),
    HostCommand("ssh", "openssh-client", "runner to cluster and client hosts"),
    HostCommand("ssh-keygen", "openssh-client", "namespace hosts' keys"),
    # other releases and containers
    HostCommand("mmdebstrap", "mmdebstrap", "release root filesystems, container base images"),
    HostCommand("podman", "podman", "fresh-install check, the exporter's image"),
    HostCommand("runc", "runc", "podman's runtime (crun refuses hybrid cgroups)"),
    HostCommand("tar", "tar", "release root filesystems imported as Ceph images"),
    HostCommand("git", "git", "fresh-install check (the tracked files)"),
    # test-only clients
    HostCommand("curl", "curl", "TLS tests"),
    HostCommand("openssl", "openssl", "test certificates"),
    HostCommand("chromium", "chromium", "the report opened in a browser"),
    HostCommand("chromedriver", "chromium-driver", "Selenium's driver for chromium (report tests)"),
    # run on every host the runner reaches (Debian's essential packages)
    HostCommand("python3", "python3", "remote benchmark guard on client hosts"),
    HostCommand("cat", "coreutils", "knob and environment reads"),
    HostCommand("tee", "coreutils", "knob writes, cache drop"),
    HostCommand("sync", "coreutils", "cache drop"),
    HostCommand("stat", "coreutils", "knob reads"),
    HostCommand("uname", "coreutils", "environment"),
    HostCommand("nproc", "coreutils", "environment"),
    HostCommand("env", "coreutils", "remote environment"),
    HostCommand("true", "coreutils", "reachability check"),
    HostCommand("grep", "grep", "device queue settings"),
    HostCommand("mkdir", "coreutils", "client endpoints' mountpoints and log dirs"),
    HostCommand("rmdir", "coreutils", "client endpoints' mountpoints"),
    HostCommand("rm", "coreutils", "client endpoints' files and log dirs"),
    HostCommand("test", "coreutils", "client endpoints' files and kernel modules"),
    HostCommand("ls", "coreutils", "rbd-tcmu block device lookup"),
    HostCommand("mountpoint", "util-linux", "client endpoints' mounts"),
    HostCommand("sh", "dash", "tests' fake tools"),
    # the machine's toolchain: builds compose-config (install.sh says so when it is missing)
    HostCommand("go", None, "builds deploy/compose-config and deploy/kubeconform (Go >= 1.24)"),
    # built into the venv by deploy/install.sh from deploy/kubeconform (Go module proxy)
    HostCommand("systemd-analyze", "systemd", "checks the exporter's unit (deploy/systemd)"),
    HostCommand("kubeconform", None, "validates the Rook manifests (deploy/rook)"),
    # from PyPI into the venv (the dev extra)
    HostCommand("podman-compose", None, "docker-compose.yml run in the tests"),
    # kernel client endpoint drivers: their modules are absent here (refused before a run)
    HostCommand("mount", "mount", "rbd-kernel/rbd-nbd/rbd-tcmu XFS and cephfs-kernel mounts",
                needed_here=False),
    HostCommand("mkfs.xfs", None, "XFS on kernel-mapped RBD images (Debian: xfsprogs)",
                needed_here=False),
    HostCommand("rbd-nbd", None, "rbd-nbd client endpoints (Debian: rbd-nbd)",
                needed_here=False),
    HostCommand("targetcli", None, "rbd-tcmu client endpoints (Debian: targetcli-fb)",
                needed_here=False),
    # from PyPI into the venv (the runner extra)
    HostCommand("swift-bench", None, "swiftbench benchmark (the RADOS Gateway's Swift API)"),
    # S3/Swift load generators of CBT that no registry here serves: run where a user has them
    HostCommand("hsbench", None, "hsbench benchmark (github.com/markhpc/hsbench)",
                needed_here=False),
    HostCommand("getput", None, "getput benchmark (github.com/markseger/getput, Python 2)",
                needed_here=False),
    # restart methods that run on a user's cluster, never here
    HostCommand("systemctl", None, "restart methods systemd and cephadm-systemd", needed_here=False),
)

BY_NAME: MappingProxyType[str, HostCommand] = MappingProxyType({c.name: c for c in COMMANDS})


class UnknownCommandError(KeyError):
    """A program the table does not name: add it (and its package to deploy/install.sh)."""


def command(name: str) -> HostCommand:
    try:
        return BY_NAME[name]
    except KeyError:
        raise UnknownCommandError(f"{name!r} is not in cephscope.host_commands.COMMANDS") from None


def package_of(name: str) -> str:
    """The Debian package to name in an error about a missing `name`."""
    found = BY_NAME.get(name)
    return found.package if found and found.package else name


def which_here(name: str) -> str | None:
    """``name`` on PATH, or in this venv's bin, where deploy/install.sh builds its tools."""
    return shutil.which(name) or shutil.which(name, path=str(Path(sys.prefix) / "bin"))


def missing(names: Sequence[str] | None = None,
            which: Callable[[str], str | None] = which_here) -> list[HostCommand]:
    """The commands (all needed here, or those named) that do not resolve on PATH."""
    wanted = [command(n) for n in names] if names is not None else [c for c in COMMANDS if c.needed_here]
    return [c for c in wanted if which(c.name) is None]


def missing_packages_message(absent: Sequence[HostCommand]) -> str:
    """'missing Debian packages: a b (commands x, y)'; the machine's toolchain named apart."""
    packages = sorted({c.package for c in absent if c.package})
    other = [c.name for c in absent if not c.package]
    parts = []
    if packages:
        parts.append(f"missing Debian packages: {' '.join(packages)} "
                     f"(commands {', '.join(c.name for c in absent if c.package)})")
    if other:
        parts.append(f"missing from PATH: {', '.join(other)}")
    return "; ".join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cephscope.host_commands",
        description="List the programs cephscope runs; --check: exit 1 naming any not on PATH.")
    parser.add_argument("--check", action="store_true", help="check every command needed here")
    args = parser.parse_args(argv)
    if not args.check:
        for c in COMMANDS:
            print(f"{c.name}\t{c.package or '-'}\t{c.used_for}")
        return 0
    absent = missing()
    found = [c for c in COMMANDS if c.needed_here and c not in absent]
    print(f"host commands: {len(found)} of {len(found) + len(absent)} found on PATH")
    if absent:
        print(missing_packages_message(absent), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
