"""Ceph container images made from the cached release root filesystems (`deploy/rootfs.py`).

No image registry is reachable here, and Debian's archive already gave us a root filesystem
per release (Reef from trixie, Tentacle from sid), so an image is that directory imported into
podman's store as it is: `tar -C ROOT -c . | podman import - TAG`. The tag carries a digest of
the root's build marker (release, Ceph version, build time), so a rebuilt root gets a new image
and an unchanged one is never imported twice.

    python -m cephscope.deploy.ceph_image --release tentacle   # prints the tag
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import subprocess
import sys
import time
from collections.abc import Callable

from cephscope.deploy.container import ContainerError, Podman, images_cache_dir, tail_of
from cephscope.deploy.rootfs import MARKER, RootfsError, release_spec, rootfs_path

IMAGE_REPOSITORY = "localhost/cephscope-ceph"


def image_tag(release: str) -> str:
    """`localhost/cephscope-ceph:<release>-<digest of the root's marker>`."""
    release_spec(release)  # an unknown release is refused by name
    marker = rootfs_path(release) / MARKER
    try:
        digest = hashlib.sha256(marker.read_bytes()).hexdigest()[:12]
    except OSError as exc:
        raise ContainerError(f"no root filesystem for {release} ({marker}: {exc.strerror}); "
                             f"build it: cephscope devcluster rootfs --release {release}") from exc
    return f"{IMAGE_REPOSITORY}:{release}-{digest}"


def ceph_release_image(podman: Podman, release: str,
                       log: Callable[[str], None] = lambda msg: print(msg, flush=True),
                       timeout: float = 900) -> str:
    """The image of `release`'s root filesystem, imported when podman lacks it."""
    try:
        tag = image_tag(release)
    except RootfsError as exc:
        raise ContainerError(str(exc)) from exc
    if podman.image_exists(tag):
        return tag
    cache = images_cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    # Two sessions importing the same root would both spend a minute on it.
    with open(cache / f".ceph-{release}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if podman.image_exists(tag):
            return tag
        started = time.monotonic()
        root = rootfs_path(release)
        log(f"ceph image: importing {root} as {tag}")
        tar = subprocess.Popen(["tar", "-C", str(root), "--numeric-owner", "-c", "."],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            proc = subprocess.run(podman.argv("import", "--quiet", "-", tag), stdin=tar.stdout,
                                  capture_output=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired as exc:
            tar.kill()
            raise ContainerError(f"podman import of {root} timed out after {timeout:.0f} s") from exc
        finally:
            assert tar.stdout is not None
            tar.stdout.close()
            tar_status = tar.wait(timeout=60)
        if tar_status != 0 or proc.returncode != 0:
            assert tar.stderr is not None
            why = tail_of(proc.stderr) if proc.returncode != 0 else tail_of(tar.stderr.read())
            raise ContainerError(f"importing {root} as {tag} failed: {why}")
        log(f"ceph image: {tag} imported in {time.monotonic() - started:.0f} s")
    return tag


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cephscope.deploy.ceph_image",
                                     description="Import a release root filesystem as a "
                                                 "Ceph container image.")
    parser.add_argument("--release", default="tentacle")
    args = parser.parse_args(argv)
    try:
        print(ceph_release_image(Podman.here(), args.release))
    except ContainerError as exc:
        print(f"ceph image: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
