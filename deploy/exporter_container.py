"""The exporter in its container against the dev cluster: the newcomer's one command.

    make exporter-container       # = python -m cephscope.deploy.exporter_container

brings the dev cluster up when it is not running (its default state dir), builds the exporter's
image when podman lacks it (`deploy/image.py`), runs the container with the documented mounts
and prints the URL. The live image test runs the container through `run_exporter_container`,
the same code.

The dev cluster's daemons run as root, so its sockets are root's: the container runs with
`--user 0:0` (the image's default user is ceph, uid 167, for clusters whose sockets are ceph's).
`--pid host` lets it read each OSD's threads and, through `/proc/<pid>/root`, the OSD's device
paths; the host's root at /host (`--path.rootfs=/host`, as node_exporter's) gives loop devices'
backing files, so their parent disk.
"""

from __future__ import annotations

import argparse
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cephscope.deploy.container import ULIMITS, ContainerError, Mount, Podman, tail_of
from cephscope.deploy.devcluster import DevCluster, DevClusterError, default_state_dir
from cephscope.deploy.image import EXPORTER_IMAGE, build_exporter_image

CONTAINER_NAME = "cephscope-exporter"
DEFAULT_PORT = 9967


@dataclass(frozen=True)
class ClusterFiles:
    """What the container needs of a cluster: its socket dir (mounted at /var/run/ceph), its
    conf, and the dir holding conf and keyring (mounted at its own path: the conf names the
    keyring by absolute path)."""

    asok_dir: Path
    conf_path: Path
    conf_dir: Path

    @classmethod
    def of_dev_cluster(cls, cluster: DevCluster) -> ClusterFiles:
        return cls(cluster.asok_dir, cluster.conf_path, cluster.state_dir)


def exporter_container_args(files: ClusterFiles, image: str, name: str, port: int) -> list[str]:
    """`podman run` arguments: host network (it listens on 127.0.0.1:port), host pids, the
    socket dir at /var/run/ceph, the conf's dir at its own path, the host's root read-only at
    /host."""
    return ["run", "--detach", "--name", name, "--network", "host", "--pid", "host",
            "--user", "0:0", *(f"--ulimit={u}" for u in ULIMITS),
            "--volume", Mount(files.asok_dir, "/var/run/ceph").option(),
            "--volume", Mount(files.conf_dir, str(files.conf_dir)).option(),
            "--volume", "/:/host:ro,rslave",
            image, f"--web.listen-address=127.0.0.1:{port}", "--ceph.asok-dir=/var/run/ceph",
            f"--ceph.conf={files.conf_path}", "--path.rootfs=/host",
            # podman masks /sys/dev/block (major:minor -> device) in its own /sys
            "--path.sysfs=/host/sys"]


def run_exporter_container(podman: Podman, files: ClusterFiles, image: str, name: str,
                           port: int, timeout: float = 60) -> str:
    """Start the container; return its /metrics URL once it answers (else remove it)."""
    proc = podman.run(*exporter_container_args(files, image, name, port), timeout=120)
    if proc.returncode != 0:
        podman.remove(name)
        raise ContainerError(f"podman run {image} failed: {tail_of(proc.stderr)}")
    url = f"http://127.0.0.1:{port}/metrics"
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5):
                return url
        except OSError:
            if time.monotonic() > deadline:
                logs = podman.run("logs", name, timeout=30)
                podman.remove(name)
                raise ContainerError(f"the exporter in {image} never answered on {url}: "
                                     f"{tail_of(logs.stdout + logs.stderr, 5)}") from None
            time.sleep(1)


def ensure_dev_cluster(cluster: DevCluster, log: Callable[[str], None]) -> None:
    """Up when absent or stopped; left alone when it runs."""
    if cluster.state_file.exists() and cluster.running_daemons():
        log(f"dev cluster: running ({cluster.state_dir})")
        return
    log(f"dev cluster: bringing it up in {cluster.state_dir}")
    seconds = cluster.up()
    log(f"dev cluster: HEALTH_OK in {seconds:.0f} s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cephscope.deploy.exporter_container",
        description="Run the exporter's image against the dev cluster (bringing the cluster "
                    "up and building the image when needed).")
    parser.add_argument("--state-dir", default=str(default_state_dir()),
                        help="the dev cluster's state dir (default: %(default)s)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                        help="port on 127.0.0.1 the exporter listens on (default: %(default)s)")
    parser.add_argument("--name", default=CONTAINER_NAME)
    parser.add_argument("--image", default=EXPORTER_IMAGE)
    args = parser.parse_args(argv)

    def log(msg: str) -> None:
        print(msg, flush=True)

    try:
        podman = Podman.here()
        cluster = DevCluster(args.state_dir, log=log)
        ensure_dev_cluster(cluster, log)
        if podman.run("container", "exists", args.name, timeout=30).returncode == 0:
            raise ContainerError(f"a container named {args.name} exists already; remove it "
                                 f"(podman rm -f {args.name}) or pass --name")
        image = args.image
        if not podman.image_exists(image):
            image = build_exporter_image(podman, tag=image, log=log)
        url = run_exporter_container(podman, ClusterFiles.of_dev_cluster(cluster), image,
                                     args.name, args.port)
    except (ContainerError, DevClusterError) as exc:
        print(f"exporter-container: {exc}", file=sys.stderr)
        return 1
    print(f"exporter: {url}  (podman logs {args.name}; stop: podman rm -f {args.name})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
