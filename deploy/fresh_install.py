"""Does `deploy/install.sh` install everything cephscope runs, on a Debian 12 that has nothing?

A machine where the project has run for a while hides a package that install.sh never names
(it was installed by hand once). This runs install.sh in a fresh Debian 12 minbase container
(podman, host network) on a copy of the project's tracked files, then
`python -m cephscope.host_commands --check` in it: every program the project and its tests run
must resolve. It then removes one package with dpkg and checks that the same check notices.

The container lacks what a fresh machine of this kind has and install.sh relies on; it is lent
read-only: the Go toolchain (builds compose-config) and the machine's trusted CA bundle with
the pip/TLS settings that point at it (`SSL_CERT_FILE`, `PIP_CERT`, …), without which pip and
Go's module download fail their certificate checks.

    python -m cephscope.deploy.fresh_install     # prints what it found; exit 1 on a failure
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cephscope.deploy.container import ContainerError, Mount, Podman, debian_base_image, images_cache_dir

REPO_ROOT = Path(__file__).resolve().parent.parent
SRC = "/src"
LENT = "/run/cephscope-lent"
# Environment a fresh machine of this kind carries for TLS and package clients.
LENT_ENV = ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_TRUSTED_HOST", "PIP_DEFAULT_TIMEOUT",
            "GOPROXY", "GOSUMDB", "GONOSUMDB", "GOPRIVATE", "GOINSECURE")
# Variables that name a CA file: the file is lent and the variable points at the lent copy.
CA_ENV = ("SSL_CERT_FILE", "PIP_CERT", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")
# Download caches kept between runs (what was fetched, never what was installed): the
# container's installed state is fresh every time.
DOWNLOAD_CACHES = {"apt-archives": "/var/cache/apt/archives", "pip": "/root/.cache/pip",
                   "go-mod": "/root/go/pkg/mod"}
# The package the negative check takes away, and what the check must then name.
REMOVED_PACKAGE = "openssh-server"


class FreshInstallError(RuntimeError):
    """The check could not be run (not: the check found something missing)."""


@dataclass
class FreshInstallResult:
    install_returncode: int
    install_seconds: float
    install_output: str
    check_returncode: int
    check_output: str
    # after `dpkg --remove REMOVED_PACKAGE`: the same check must fail naming it
    removed_returncode: int
    removed_output: str

    @property
    def ok(self) -> bool:
        return (self.install_returncode == 0 and self.check_returncode == 0
                and self.removed_returncode != 0 and REMOVED_PACKAGE in self.removed_output)


def copy_tracked_tree(repo: Path, dest: Path) -> int:
    """The files git tracks in `repo` (as they are in the work tree; symlinks kept) into
    `dest`: what a fresh clone holds, plus uncommitted edits. Returns the file count."""
    listed = subprocess.run(["git", "-C", str(repo), "ls-files", "-z"], capture_output=True,
                            timeout=60, check=False)
    if listed.returncode != 0:
        raise FreshInstallError(f"{repo} is not a git checkout: {listed.stderr.decode().strip()}")
    names = [n for n in listed.stdout.decode().split("\0") if n]
    for name in names:
        source, target = repo / name, dest / name
        if not os.path.lexists(source):  # deleted in the work tree, not yet in git
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            target.symlink_to(os.readlink(source))
        else:
            shutil.copy2(source, target)
    return len(names)


def lent_mounts_and_env(environ: dict[str, str]) -> tuple[list[Mount], dict[str, str]]:
    mounts: list[Mount] = []
    env = {key: environ[key] for key in LENT_ENV if environ.get(key)}
    lent_files: dict[str, str] = {}
    for key in CA_ENV:
        path = environ.get(key)
        if path and Path(path).is_file():
            if path not in lent_files:
                lent_files[path] = f"{LENT}/ca-{len(lent_files)}.crt"
                mounts.append(Mount(Path(path), lent_files[path]))
            env[key] = lent_files[path]
    path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    go = shutil.which("go", path=environ.get("PATH"))
    if go:
        goroot = subprocess.run([go, "env", "GOROOT"], capture_output=True, text=True, timeout=60,
                                check=False).stdout.strip()
        if goroot:
            mounts.append(Mount(Path(goroot), f"{LENT}/go"))
            path = f"{LENT}/go/bin:{path}"
    env["PATH"] = path
    return mounts, env


def run_check(repo: Path = REPO_ROOT, suite: str = "bookworm",
              log: Callable[[str], None] = lambda msg: print(msg, flush=True),
              install_timeout: float = 1800) -> FreshInstallResult:
    podman = Podman.here()
    image = debian_base_image(podman, suite, log=log)
    name = f"cephscope-fresh-install-{os.getpid()}-{int(time.time())}"
    with tempfile.TemporaryDirectory(prefix="cephscope-fresh-") as tmp:
        src = Path(tmp) / "src"
        src.mkdir()
        count = copy_tracked_tree(repo, src)
        log(f"fresh install: {count} tracked files of {repo} in {image} ({name})")
        mounts, env = lent_mounts_and_env(dict(os.environ))
        for cache_name, target in DOWNLOAD_CACHES.items():
            cache = images_cache_dir() / "fresh-install" / cache_name
            cache.mkdir(parents=True, exist_ok=True)
            mounts.append(Mount(cache, target, read_only=False))
        podman.start(name, image, [Mount(src, SRC, read_only=False), *mounts], env)
        try:
            started = time.monotonic()
            install = podman.exec(name, ["bash", f"{SRC}/deploy/install.sh"], timeout=install_timeout)
            install_seconds = time.monotonic() - started
            log(f"fresh install: install.sh exited {install.returncode} after {install_seconds:.0f} s")
            check_argv = [f"{SRC}/.venv/bin/python", "-m", "cephscope.host_commands", "--check"]
            check = podman.exec(name, check_argv, timeout=120)
            podman.exec(name, ["dpkg", "--remove", "--force-depends", REMOVED_PACKAGE], timeout=300)
            removed = podman.exec(name, check_argv, timeout=120)
        finally:
            podman.remove(name)
            # The container wrote the venv as root into the copy; the temp dir goes with it.
    return FreshInstallResult(
        install_returncode=install.returncode, install_seconds=install_seconds,
        install_output=(install.stdout + install.stderr).decode(errors="replace"),
        check_returncode=check.returncode,
        check_output=(check.stdout + check.stderr).decode(errors="replace"),
        removed_returncode=removed.returncode,
        removed_output=(removed.stdout + removed.stderr).decode(errors="replace"),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cephscope.deploy.fresh_install",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", default="bookworm")
    parser.add_argument("--repo", type=Path, default=REPO_ROOT)
    args = parser.parse_args(argv)
    try:
        result = run_check(args.repo, args.suite)
    except (ContainerError, FreshInstallError) as exc:
        print(f"fresh install: {exc}", file=sys.stderr)
        return 2
    print(result.install_output.strip()[-2000:])
    print(result.check_output.strip())
    print(f"after dpkg --remove {REMOVED_PACKAGE}: exit {result.removed_returncode}: "
          f"{result.removed_output.strip()}")
    print(f"fresh install: {'ok' if result.ok else 'FAILED'} (install.sh {result.install_seconds:.0f} s)")
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
