"""Podman as this project runs it, and Debian base images made without a registry.

Podman runs with the runc runtime (crun refuses hybrid cgroup hierarchies), with rlimits it is
allowed to set (raising RLIMIT_NOFILE/NPROC needs CAP_SYS_RESOURCE, which the machines that run
the tests lack), on the host network. Base images come from Debian's archive with mmdebstrap
(`--variant=minbase`), so no image registry is needed; the tarball is cached under the user's
cache dir (`$XDG_CACHE_HOME/cephscope/images`, else `~/.cache/cephscope/images`) and imported
into podman's store when the image is not there.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cephscope import host_commands
from cephscope.deploy.rootfs import DEBIAN_MIRROR

DEBIAN_SECURITY_MIRROR = "http://deb.debian.org/debian-security"
# Limits a container may have without CAP_SYS_RESOURCE on the host.
ULIMITS = ("nofile=16384:16384", "nproc=4096:4096")


class ContainerError(RuntimeError):
    """A container or image step failed; the message is one clear line."""


def images_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "cephscope" / "images"


@dataclass(frozen=True)
class Mount:
    source: Path
    target: str
    read_only: bool = True

    def option(self) -> str:
        return f"{self.source}:{self.target}{':ro' if self.read_only else ''}"


@dataclass(frozen=True)
class Podman:
    """`podman` with the runtime and limits that work here; argv lists only."""

    runtime: str

    @classmethod
    def here(cls) -> Podman:
        absent = host_commands.missing(["podman", "runc"])
        runc = shutil.which("runc")
        if absent or runc is None:
            raise ContainerError(host_commands.missing_packages_message(absent)
                                 + " (run `make setup` as root)")
        return cls(runtime=runc)

    def argv(self, *args: str) -> list[str]:
        return ["podman", "--runtime", self.runtime, *args]

    def run(self, *args: str, timeout: float, input: bytes | None = None,
            ) -> subprocess.CompletedProcess[bytes]:
        try:
            return subprocess.run(self.argv(*args), input=input, capture_output=True,
                                  timeout=timeout, check=False)
        except subprocess.TimeoutExpired as exc:
            raise ContainerError(f"podman {args[0]} timed out after {timeout:.0f} s") from exc

    def image_exists(self, ref: str) -> bool:
        return self.run("image", "exists", ref, timeout=60).returncode == 0

    def start(self, name: str, image: str, mounts: Sequence[Mount] = (),
              env: Mapping[str, str] | None = None, timeout: float = 120) -> None:
        """A detached container on the host network that waits to be exec'd into."""
        args = ["run", "--detach", "--name", name, "--network", "host",
                *(f"--ulimit={u}" for u in ULIMITS)]
        for mount in mounts:
            args += ["--volume", mount.option()]
        for key, value in (env or {}).items():
            args += ["--env", f"{key}={value}"]
        proc = self.run(*args, image, "sleep", "infinity", timeout=timeout)
        if proc.returncode != 0:
            self.remove(name)
            raise ContainerError(f"podman run {image} failed: {_tail(proc.stderr)}")

    def exec(self, name: str, argv: Sequence[str], timeout: float) -> subprocess.CompletedProcess[bytes]:
        return self.run("exec", name, *argv, timeout=timeout)

    def remove(self, name: str) -> None:
        """Stop and remove a container of ours; quiet when it is already gone."""
        self.run("rm", "--force", "--time", "5", "--ignore", name, timeout=120)


def _tail(data: bytes, lines: int = 3) -> str:
    text = data.decode(errors="replace").strip().splitlines()
    return " | ".join(text[-lines:]) or "(no output)"


def debian_base_image(podman: Podman, suite: str = "bookworm",
                      log: Callable[[str], None] = lambda msg: print(msg, flush=True),
                      timeout: float = 1200) -> str:
    """`localhost/cephscope-base:<suite>-minbase`, imported from a cached mmdebstrap tarball
    (built when absent) unless podman already has it."""
    ref = f"localhost/cephscope-base:{suite}-minbase"
    if podman.image_exists(ref):
        return ref
    cache = images_cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    tarball = cache / f"debian-{suite}-minbase.tar"
    with open(cache / f".{suite}-minbase.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not tarball.exists():
            _build_tarball(suite, tarball, log, timeout)
        proc = podman.run("import", "--quiet", str(tarball), ref, timeout=600)
        if proc.returncode != 0:
            raise ContainerError(f"podman import {tarball} failed: {_tail(proc.stderr)}")
    log(f"container: imported {ref} from {tarball}")
    return ref


def _build_tarball(suite: str, tarball: Path, log: Callable[[str], None], timeout: float) -> None:
    absent = host_commands.missing(["mmdebstrap"])
    if absent:
        raise ContainerError(host_commands.missing_packages_message(absent))
    # The sources a Debian machine of this suite has: point releases and security updates.
    sources = [f"deb {DEBIAN_MIRROR} {suite} main", f"deb {DEBIAN_MIRROR} {suite}-updates main",
               f"deb {DEBIAN_SECURITY_MIRROR} {suite}-security main"]
    partial = tarball.with_name(f".{tarball.name}.{os.getpid()}")
    log(f"container: building Debian {suite} minbase with mmdebstrap into {tarball}")
    started = time.monotonic()
    try:
        proc = subprocess.run(["mmdebstrap", "--variant=minbase", "--quiet", "--format=tar", suite,
                               str(partial), *sources],
                              capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        partial.unlink(missing_ok=True)
        raise ContainerError(f"mmdebstrap {suite} minbase timed out after {timeout:.0f} s") from exc
    if proc.returncode != 0:
        partial.unlink(missing_ok=True)
        raise ContainerError(f"mmdebstrap {suite} minbase failed: {_tail(proc.stderr)}")
    partial.rename(tarball)
    log(f"container: {tarball.name} built in {time.monotonic() - started:.0f} s")
