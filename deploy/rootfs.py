"""Root filesystems holding a Ceph release other than this machine's packages.

`cephscope devcluster rootfs --release reef` builds (or finds) a Debian root filesystem with
that release's daemons and client tools, made by mmdebstrap from Debian's archive, and cached
under the user's cache dir (`$XDG_CACHE_HOME/cephscope/rootfs/<release>`, else
`~/.cache/cephscope/rootfs/<release>`) so clusters and test sessions reuse it.

A build goes into a temporary directory next to the cache entry and is renamed into place only
when mmdebstrap succeeded and the tree holds the expected Ceph version: an interrupted build is
never mistaken for a good one. Builds of one release are serialised with a lock file. The
marker lists the packages the root was built with: a cached root that lacks one the project now
needs (a daemon added to `BASE_PACKAGES`) is rebuilt, not used.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cephscope.deploy.placement import HOST_RELEASE, Release

DEBIAN_MIRROR = "http://deb.debian.org/debian"
MARKER = ".cephscope-rootfs.json"
# What every release root holds: the daemons (with CephFS's MDS and the RADOS gateway), the
# admin tools, and the clients the runner drives (rados bench, fio's rbd engine, the FUSE
# clients, python3-rados for config checks).
BASE_PACKAGES = (
    "ceph-mon",
    "ceph-mgr",
    "ceph-osd",
    "ceph-mds",
    "radosgw",
    "ceph-common",
    "ceph-base",
    "ceph-fuse",
    "rbd-fuse",
    "python3-rados",
    "python3-rbd",
    "fio",
)
# Documentation and translations are a third of a root's size and never read.
PATH_EXCLUDES = ("/usr/share/doc/*", "/usr/share/man/*", "/usr/share/locale/*", "/usr/share/info/*")


class RootfsError(RuntimeError):
    """A root filesystem cannot be built or used; the message is one clear line."""


@dataclass(frozen=True)
class ReleaseSpec:
    """A Ceph release as Debian ships it: which suite, which Ceph major, what else to install."""

    name: str
    suite: str
    ceph_major: int
    extra_packages: tuple[str, ...] = ()
    # Release files of a rolling suite can be past their Valid-Until on a snapshot mirror.
    ignore_valid_until: bool = False
    # Health checks this release raises on the dev cluster for reasons outside the cluster
    # itself; the dev cluster mutes them (and says so).
    muted_health_checks: tuple[str, ...] = ()
    # Extra ceph-authtool arguments for the client.admin key, which this machine's own Ceph
    # libraries (the exporter's and runner's python3-rados, the host's ceph CLI) must read.
    admin_key_args: tuple[str, ...] = ()
    # Extra monmaptool arguments for the dev cluster's first monmap.
    monmap_args: tuple[str, ...] = ()
    # Boolean gateway options this release has (and defaults to false) that the dev cluster's
    # gateway turns on.
    gateway_flags: tuple[str, ...] = ()


RELEASES: dict[str, ReleaseSpec] = {
    "pacific": ReleaseSpec("pacific", "bookworm", 16),
    # Debian's Reef mgr modules load PyO3 extensions in sub-interpreters, which PyO3 refuses:
    # MGR_MODULE_DEPENDENCY for modules the dev cluster never enables.
    "reef": ReleaseSpec("reef", "trixie", 18, muted_health_checks=("MGR_MODULE_DEPENDENCY",)),
    # sid also carries Prometheus 3 (`cephscope stack up --prometheus-release 3`).
    # Tentacle makes aes256k keys by default, which older clients (this machine's Pacific
    # libraries) reject as "Malformed input"; the admin key is an aes key, which the monmap must
    # allow, and the mon then warns about it.
    "tentacle": ReleaseSpec(
        "tentacle",
        "sid",
        20,
        extra_packages=("prometheus",),
        ignore_valid_until=True,
        admin_key_args=("--key-type", "aes"),
        monmap_args=("--auth-allowed-ciphers", "aes,aes256k"),
        muted_health_checks=(
            "AUTH_INSECURE_CLIENT_KEY_TYPE",
            "AUTH_INSECURE_KEYS_ALLOWED",
            "AUTH_INSECURE_KEYS_CREATABLE",
        ),
        # Squid and later: the labeled per-user and per-bucket op counters (rgw_op_per_user,
        # rgw_op_per_bucket) exist only with their caches on (src/common/options/rgw.yaml.in).
        gateway_flags=("rgw_user_counters_cache", "rgw_bucket_counters_cache"),
    ),
}


def release_spec(name: str) -> ReleaseSpec:
    try:
        return RELEASES[name]
    except KeyError:
        raise RootfsError(f"unknown release {name!r} (known: {', '.join(RELEASES)})") from None


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "cephscope" / "rootfs"


def host_ceph_version() -> str | None:
    """The version of this machine's ceph-osd package, if installed."""
    return dpkg_version(Path("/"), "ceph-osd")


def dpkg_version(root: Path, package: str) -> str | None:
    """A package's installed version in the dpkg database under `root` (no chroot needed)."""
    try:
        status = (root / "var/lib/dpkg/status").read_text(errors="replace")
    except OSError:
        return None
    for stanza in status.split("\n\n"):
        if re.search(rf"^Package: {re.escape(package)}$", stanza, re.M) and re.search(
            r"^Status: install ok installed$", stanza, re.M
        ):
            match = re.search(r"^Version: (\S+)$", stanza, re.M)
            if match:
                return match.group(1)
    return None


def upstream_major(version: str | None) -> int | None:
    """16 for "16.2.15+ds-0+deb12u1", 20 for "20.2.4-1"."""
    match = re.match(r"(?:\d+:)?(\d+)\.", version or "")
    return int(match.group(1)) if match else None


def rootfs_path(name: str) -> Path:
    return cache_dir() / name


def read_marker(root: Path) -> dict[str, object] | None:
    try:
        marker = json.loads((root / MARKER).read_text())
    except (OSError, ValueError):
        return None
    return marker if isinstance(marker, dict) else None


def wanted_packages(spec: ReleaseSpec) -> tuple[str, ...]:
    return (*BASE_PACKAGES, *spec.extra_packages)


def current_marker(root: Path, spec: ReleaseSpec) -> dict[str, object] | None:
    """The root's marker if the root holds every package the project wants in it, else None
    (not built, interrupted, or built before a package was added)."""
    marker = read_marker(root)
    if marker is None:
        return None
    packages = marker.get("packages")
    if not isinstance(packages, list) or not set(wanted_packages(spec)) <= set(packages):
        return None
    return marker


def find_release(name: str) -> Release:
    """The release to run: this machine's packages when they are that release, else its cached
    root filesystem (which must exist: `cephscope devcluster rootfs --release NAME` builds it)."""
    spec = release_spec(name)
    if upstream_major(host_ceph_version()) == spec.ceph_major:
        return Release(name=name, root=None)
    root = rootfs_path(name)
    if current_marker(root, spec) is None:
        raise RootfsError(
            f"no root filesystem for {name} in {root} (or one built without a package it now "
            f"needs); build it with "
            f"`cephscope devcluster rootfs --release {name}` (about 1 minute, 600-900 MB)"
        )
    return Release(name=name, root=root)


def release_for(name: str | None) -> Release:
    """`None` or "host" is this machine's packages."""
    if name in (None, "", HOST_RELEASE.name):
        return HOST_RELEASE
    return find_release(name)


def ceph_version_of(release: Release) -> str | None:
    return dpkg_version(release.root or Path("/"), "ceph-osd")


def _check_archive(spec: ReleaseSpec, mirror: str, timeout: float = 15) -> None:
    url = f"{mirror}/dists/{spec.suite}/InRelease"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout):
            pass
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise RootfsError(
            f"cannot reach Debian's archive for {spec.name} ({url}): {reason}; the root filesystem "
            f"for {spec.name} needs it once (afterwards it is cached in {cache_dir()})"
        ) from exc


def _mounts_under(path: Path) -> list[str]:
    prefix = str(path.resolve()) + "/"
    found = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        fields = line.split()
        if len(fields) > 4 and (fields[4] + "/").startswith(prefix):
            found.append(fields[4])
    return found


def _remove_stale_builds(parent: Path, name: str, log: Callable[[str], None]) -> None:
    for stale in parent.glob(f".{name}.build-*"):
        pid = stale.name.rsplit("-", 1)[-1]
        if pid.isdigit() and Path(f"/proc/{pid}").exists():
            continue
        mounts = _mounts_under(stale)
        if mounts:
            # An interrupted mmdebstrap can leave /proc or /dev mounted inside: never delete
            # through a mount point.
            log(f"rootfs: leaving {stale} alone, still mounted: {', '.join(mounts[:3])}")
            continue
        log(f"rootfs: removing interrupted build {stale}")
        shutil.rmtree(stale, ignore_errors=True)


def build(
    name: str,
    mirror: str = DEBIAN_MIRROR,
    log: Callable[[str], None] = lambda msg: print(msg, flush=True),
    timeout: float = 1800,
) -> Path:
    """Build the release's root filesystem unless a good one is cached; return its path."""
    spec = release_spec(name)
    root = rootfs_path(name)
    if current_marker(root, spec) is not None:
        return root
    if shutil.which("mmdebstrap") is None:
        raise RootfsError("mmdebstrap not found (Debian package mmdebstrap; deploy/install.sh installs it)")
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        # Another process may have finished the same build while we waited for the lock.
        if current_marker(root, spec) is not None:
            return root
        _remove_stale_builds(root.parent, name, log)
        if root.exists():
            if _mounts_under(root):
                raise RootfsError(
                    f"{root} must be rebuilt (it lacks a package or was never finished) but a "
                    f"cluster runs from it: stop that cluster first")
            # A tree without a current marker was never finished, was damaged, or lacks a
            # package: build afresh.
            shutil.rmtree(root, ignore_errors=True)
        _check_archive(spec, mirror)
        tmp = root.parent / f".{name}.build-{os.getpid()}"
        packages = ",".join(wanted_packages(spec))
        argv = [
            "mmdebstrap",
            "--mode=root",
            "--variant=apt",
            f"--include={packages}",
            *(f"--dpkgopt=path-exclude={pattern}" for pattern in PATH_EXCLUDES),
        ]
        if spec.ignore_valid_until:
            argv.append('--aptopt=Acquire::Check-Valid-Until "false"')
        argv += [spec.suite, str(tmp), mirror]
        log(f"rootfs: building {name} (Debian {spec.suite}) in {root} with mmdebstrap")
        started = time.monotonic()
        build_log = root.parent / f"{name}.build.log"
        with build_log.open("wb") as out:
            try:
                proc = subprocess.run(
                    argv, stdout=out, stderr=subprocess.STDOUT, timeout=timeout, check=False
                )
            except subprocess.TimeoutExpired as exc:
                raise RootfsError(
                    f"mmdebstrap for {name} timed out after {timeout:.0f}s; see {build_log}"
                ) from exc
        if proc.returncode != 0:
            tail = build_log.read_text(errors="replace").strip().splitlines()[-3:]
            if not _mounts_under(tmp):
                shutil.rmtree(tmp, ignore_errors=True)
            raise RootfsError(f"mmdebstrap for {name} failed ({proc.returncode}): {' | '.join(tail)}")
        version = dpkg_version(tmp, "ceph-osd")
        if upstream_major(version) != spec.ceph_major:
            shutil.rmtree(tmp, ignore_errors=True)
            raise RootfsError(
                f"Debian {spec.suite} serves ceph-osd {version}, not Ceph {spec.ceph_major} ({spec.name})"
            )
        marker = {
            "release": name,
            "suite": spec.suite,
            "ceph_version": version,
            "prometheus_version": dpkg_version(tmp, "prometheus"),
            "packages": sorted(wanted_packages(spec)),
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "build_seconds": round(time.monotonic() - started, 1),
        }
        (tmp / MARKER).write_text(json.dumps(marker, indent=2) + "\n")
        tmp.rename(root)
        log(f"rootfs: {name} = Ceph {version} built in {marker['build_seconds']}s")
        return root
