"""The exporter's image, built from the project's Dockerfile by podman on this machine.

The Dockerfile starts `FROM debian:12-slim`. No image registry is reachable here, so that base
is made from Debian's archive (`deploy/container.py`: mmdebstrap minbase, cached) and tagged
`localhost/debian:12-slim`; it carries this machine's CA bundle and an `/etc/pip.conf` naming
it, because this machine may reach PyPI through a TLS proxy. The Dockerfile itself stays as a
user builds it on their own network. podman's layer cache makes a rebuild of an unchanged
tree take seconds.

    python -m cephscope.deploy.image          # builds localhost/cephscope-exporter:dev
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from cephscope.deploy.container import ContainerError, Podman, debian_base_image, tail_of

REPO_ROOT = Path(__file__).resolve().parent.parent
EXPORTER_IMAGE = "localhost/cephscope-exporter:dev"
DOCKERFILE_BASE = "localhost/debian:12-slim"


def lent_ca_bundle(environ: dict[str, str]) -> Path | None:
    """The CA bundle this machine's TLS clients are told to trust, if any."""
    for key in ("PIP_CERT", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE"):
        path = environ.get(key)
        if path and Path(path).is_file():
            return Path(path)
    return None


def build_exporter_image(podman: Podman, repo: Path = REPO_ROOT, tag: str = EXPORTER_IMAGE,
                         log: Callable[[str], None] = lambda msg: print(msg, flush=True),
                         timeout: float = 1800) -> str:
    debian_base_image(podman, "bookworm", ref=DOCKERFILE_BASE,
                      lent_ca=lent_ca_bundle(dict(os.environ)), log=log)
    started = time.monotonic()
    # --pull=never: `FROM debian:12-slim` must resolve to the local base, never a registry.
    proc = podman.run("build", "--network", "host", "--pull=never", "--tag", tag,
                      "--file", str(repo / "Dockerfile"), str(repo), timeout=timeout)
    if proc.returncode != 0:
        raise ContainerError(f"podman build of {repo / 'Dockerfile'} failed: "
                             f"{tail_of(proc.stdout + proc.stderr)}")
    log(f"image: {tag} built in {time.monotonic() - started:.0f} s")
    return tag


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cephscope.deploy.image",
                                     description="Build the exporter's image with podman.")
    parser.add_argument("--tag", default=EXPORTER_IMAGE)
    args = parser.parse_args(argv)
    try:
        print(build_exporter_image(Podman.here(), tag=args.tag))
    except ContainerError as exc:
        print(f"image: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
