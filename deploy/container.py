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
import tempfile
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
            raise ContainerError(f"podman run {image} failed: {tail_of(proc.stderr)}")

    def exec(self, name: str, argv: Sequence[str], timeout: float) -> subprocess.CompletedProcess[bytes]:
        return self.run("exec", name, *argv, timeout=timeout)

    def remove(self, name: str) -> None:
        """Stop and remove a container of ours; quiet when it is already gone."""
        self.run("rm", "--force", "--time", "5", "--ignore", name, timeout=120)


def tail_of(data: bytes, lines: int = 3) -> str:
    text = data.decode(errors="replace").strip().splitlines()
    return " | ".join(text[-lines:]) or "(no output)"


def debian_base_image(podman: Podman, suite: str = "bookworm", ref: str | None = None,
                      lent_ca: Path | None = None,
                      log: Callable[[str], None] = lambda msg: print(msg, flush=True),
                      timeout: float = 1200) -> str:
    """`ref` (default `localhost/cephscope-base:<suite>-minbase`), imported from a cached
    mmdebstrap tarball (built when absent) unless podman already has it.

    `lent_ca`: a CA bundle this machine trusts (it may reach PyPI through a TLS proxy), put in
    the image with an `/etc/pip.conf` naming it, so a Dockerfile's `pip install` works here
    unchanged. Such an image is for building on this machine only."""
    ref = ref or f"localhost/cephscope-base:{suite}-minbase"
    if podman.image_exists(ref):
        return ref
    cache = images_cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    flavour = f"{suite}-minbase{'-lent-ca' if lent_ca else ''}"
    tarball = cache / f"debian-{flavour}.tar"
    with open(cache / f".{flavour}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not tarball.exists():
            _build_tarball(suite, tarball, lent_ca, log, timeout)
        proc = podman.run("import", "--quiet", str(tarball), ref, timeout=600)
        if proc.returncode != 0:
            raise ContainerError(f"podman import {tarball} failed: {tail_of(proc.stderr)}")
    log(f"container: imported {ref} from {tarball}")
    return ref


LENT_CA_IN_IMAGE = "/etc/cephscope-lent-ca.crt"


def _build_tarball(suite: str, tarball: Path, lent_ca: Path | None, log: Callable[[str], None],
                   timeout: float) -> None:
    absent = host_commands.missing(["mmdebstrap"])
    if absent:
        raise ContainerError(host_commands.missing_packages_message(absent))
    # The sources a Debian machine of this suite has: point releases and security updates.
    sources = [f"deb {DEBIAN_MIRROR} {suite} main", f"deb {DEBIAN_MIRROR} {suite}-updates main",
               f"deb {DEBIAN_SECURITY_MIRROR} {suite}-security main"]
    partial = tarball.with_name(f".{tarball.name}.{os.getpid()}")
    hooks: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        if lent_ca:
            pip_conf = Path(tmp) / "pip.conf"
            pip_conf.write_text(f"[global]\ncert = {LENT_CA_IN_IMAGE}\n")
            # mmdebstrap's own `upload` hook copies a file in: no shell involved.
            hooks = [f"--customize-hook=upload {lent_ca} {LENT_CA_IN_IMAGE}",
                     f"--customize-hook=upload {pip_conf} /etc/pip.conf"]
        log(f"container: building Debian {suite} minbase with mmdebstrap into {tarball}")
        started = time.monotonic()
        try:
            proc = subprocess.run(["mmdebstrap", "--variant=minbase", "--quiet", "--format=tar",
                                   *hooks, suite, str(partial), *sources],
                                  capture_output=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired as exc:
            partial.unlink(missing_ok=True)
            raise ContainerError(f"mmdebstrap {suite} minbase timed out after {timeout:.0f} s") from exc
    if proc.returncode != 0:
        partial.unlink(missing_ok=True)
        raise ContainerError(f"mmdebstrap {suite} minbase failed: {tail_of(proc.stderr)}")
    partial.rename(tarball)
    log(f"container: {tarball.name} built in {time.monotonic() - started:.0f} s")
