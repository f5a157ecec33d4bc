"""docker-compose.yml run by podman-compose on this machine, with local stand-in images.

No image registry is reachable here, so the compose file's registry images are replaced by
images made from Debian's packages in a locally made Debian 12 minbase (`deploy/container.py`)
and tagged with the names the compose file uses: `prom/prometheus` runs Debian's `prometheus`
(2.42, not the tag's version), `prom/alertmanager` Debian's `prometheus-alertmanager`,
`prom/node-exporter` Debian's `prometheus-node-exporter`; the exporter's image is built from the
project's Dockerfile. Grafana has no Debian package and no image can be had: its service is
left out of `up` (its provisioning files are validated by the unit tests). A user with a
registry runs the file unchanged.

podman runs with runc and rlimits it may set (`containers_conf`), as everywhere in the project.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from cephscope import host_commands
from cephscope.deploy.container import ULIMITS, ContainerError, Podman, debian_base_image, tail_of
from cephscope.deploy.image import DOCKERFILE_BASE, build_exporter_image, lent_ca_bundle

REPO_ROOT = Path(__file__).resolve().parent.parent
COMPOSE_FILE = REPO_ROOT / "docker-compose.yml"
# Services that run here; grafana cannot (no package, no registry).
RUNNABLE_SERVICES = ("prometheus", "alertmanager", "node-exporter", "cephscope-exporter")


@dataclass(frozen=True)
class StandIn:
    """A registry image replaced by Debian's package of the same program."""

    service: str
    package: str
    binary: str


STAND_INS = (
    StandIn("prometheus", "prometheus", "/usr/bin/prometheus"),
    StandIn("alertmanager", "prometheus-alertmanager", "/usr/bin/prometheus-alertmanager"),
    StandIn("node-exporter", "prometheus-node-exporter", "/usr/bin/prometheus-node-exporter"),
)


def compose_images(compose_file: Path = COMPOSE_FILE) -> dict[str, str]:
    """service -> the image name the compose file gives it."""
    services = yaml.safe_load(compose_file.read_text())["services"]
    return {name: str(service["image"]) for name, service in services.items() if "image" in service}


def containerfile(stand_in: StandIn) -> str:
    # Package scripts must not start daemons in a build (there is no init anyway).
    return (f"FROM {DOCKERFILE_BASE}\n"
            "RUN printf '#!/bin/sh\\nexit 101\\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d"
            " && apt-get update"
            f" && apt-get install -y --no-install-recommends {stand_in.package}"
            " && rm -rf /var/lib/apt/lists/* /usr/sbin/policy-rc.d\n"
            f'ENTRYPOINT ["{stand_in.binary}"]\n')


def build_stand_ins(podman: Podman, compose_file: Path = COMPOSE_FILE,
                    log: Callable[[str], None] = lambda msg: print(msg, flush=True),
                    timeout: float = 1200) -> dict[str, str]:
    """Build every stand-in and the exporter's image under the compose file's names."""
    images = compose_images(compose_file)
    debian_base_image(podman, "bookworm", ref=DOCKERFILE_BASE,
                      lent_ca=lent_ca_bundle(dict(os.environ)), log=log)
    built: dict[str, str] = {}
    for stand_in in STAND_INS:
        tag = images[stand_in.service]
        with tempfile.TemporaryDirectory() as ctx:
            (Path(ctx) / "Containerfile").write_text(containerfile(stand_in))
            proc = podman.run("build", "--network", "host", "--pull=never", "--tag", tag, ctx,
                              timeout=timeout)
        if proc.returncode != 0:
            raise ContainerError(f"building the stand-in {tag} ({stand_in.package}) failed: "
                                 f"{tail_of(proc.stdout + proc.stderr)}")
        built[stand_in.service] = tag
    built["cephscope-exporter"] = build_exporter_image(
        podman, tag=images["cephscope-exporter"], log=log, timeout=timeout)
    log(f"compose: images {', '.join(sorted(built.values()))}")
    return built


def containers_conf(podman: Podman, directory: Path) -> Path:
    """A containers.conf that makes podman-compose's podman calls use runc and settable
    rlimits (podman-compose passes no runtime flags of its own)."""
    path = directory / "containers.conf"
    ulimits = ", ".join(f'"{u}"' for u in ULIMITS)
    path.write_text(f'[containers]\ndefault_ulimits = [{ulimits}]\n\n'
                    f'[engine]\nruntime = "{podman.runtime}"\n')
    return path


@dataclass
class ComposeProject:
    """One `podman-compose -p NAME` project of the compose file, with its environment."""

    name: str
    env: Mapping[str, str]
    compose_file: Path = COMPOSE_FILE

    def argv(self, *args: str) -> list[str]:
        # podman-compose comes from PyPI into the venv (Debian's 1.0.3 cannot do host networking)
        venv_bin = str(Path(sys.prefix) / "bin")
        program = shutil.which("podman-compose", path=venv_bin) or "podman-compose"
        return [program, "--file", str(self.compose_file), "--project-name", self.name, *args]

    def run(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[bytes]:
        if host_commands.missing(["podman-compose"]):
            raise ContainerError("podman-compose not found (the dev extra: run `make setup`)")
        try:
            return subprocess.run(self.argv(*args), capture_output=True, timeout=timeout, check=False,
                                  env={**os.environ, **self.env}, cwd=self.compose_file.parent)
        except subprocess.TimeoutExpired as exc:
            raise ContainerError(f"podman-compose {args[0]} timed out after {timeout:.0f} s") from exc

    def up(self, services: Sequence[str] = RUNNABLE_SERVICES) -> None:
        proc = self.run("up", "-d", "--no-build", *services)
        if proc.returncode != 0:
            raise ContainerError(f"podman-compose up failed: {tail_of(proc.stdout + proc.stderr, 6)}")

    def down(self, podman: Podman) -> subprocess.CompletedProcess[bytes]:
        """Stop and remove the project's containers, its named volumes, and the project
        network podman-compose defines even when every service uses the host's."""
        proc = self.run("down", "--volumes")
        if podman.run("network", "exists", f"{self.name}_default", timeout=60).returncode == 0:
            podman.run("network", "rm", "--force", f"{self.name}_default", timeout=60)
        return proc
