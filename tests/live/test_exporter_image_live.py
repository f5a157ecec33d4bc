"""The exporter's image, built from the project's Dockerfile by podman, run against the dev
cluster with the documented mounts, exports what the exporter run on the host exports.

The dev cluster's daemons run as root, so its sockets are root's: the container runs with
`--user 0:0` here (the image's default user is ceph, uid 167, for clusters whose sockets are
ceph's). `--pid host` lets it read each OSD's threads and, through `/proc/<pid>/root`, the OSD's
device paths; the host's root at /host (`--path.rootfs=/host`, as node_exporter's) gives loop
devices' backing files, so their parent disk."""

from __future__ import annotations

import re
import time
import urllib.request
from collections.abc import Iterator

import pytest

from cephscope.deploy.container import Mount, Podman
from cephscope.deploy.devcluster import DevCluster
from cephscope.deploy.image import build_exporter_image
from cephscope.deploy.stack import Stack
from tests.live.conftest import free_port_base

SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? ")


def scrape(url: str, timeout: float = 30) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return resp.read().decode()


def metric_names(text: str) -> set[str]:
    return {m.group(1) for line in text.splitlines() if (m := SAMPLE.match(line))}


def series(text: str, name: str) -> list[str]:
    return sorted(line.rsplit(" ", 1)[0] for line in text.splitlines() if line.startswith(name + "{"))


@pytest.fixture(scope="module")
def image_exporter(devcluster: DevCluster) -> Iterator[str]:
    podman = Podman.here()
    image = build_exporter_image(podman)
    port = free_port_base(1, avoid={devcluster.port_base})
    name = f"cephscope-exporter-test-{port}"
    args = ["run", "--detach", "--name", name, "--network", "host", "--pid", "host",
            "--user", "0:0", "--ulimit=nofile=16384:16384", "--ulimit=nproc=4096:4096",
            "--volume", Mount(devcluster.asok_dir, "/var/run/ceph").option(),
            # the conf names its keyring by absolute path: the state dir at the same place
            "--volume", Mount(devcluster.state_dir, str(devcluster.state_dir)).option(),
            # loop devices' backing files (their parent disk), as node_exporter's --path.rootfs
            "--volume", "/:/host:ro,rslave",
            image, f"--web.listen-address=127.0.0.1:{port}", "--ceph.asok-dir=/var/run/ceph",
            f"--ceph.conf={devcluster.conf_path}", "--path.rootfs=/host",
            # podman masks /sys/dev/block (major:minor -> device) in its own /sys
            "--path.sysfs=/host/sys"]
    proc = podman.run(*args, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                scrape(url, timeout=5)
                break
            except OSError:
                if time.monotonic() > deadline:
                    logs = podman.run("logs", name, timeout=30)
                    raise AssertionError(f"exporter in {image} never answered: "
                                         f"{(logs.stdout + logs.stderr).decode()[-2000:]}") from None
                time.sleep(1)
        yield url
    finally:
        podman.remove(name)
        assert podman.run("container", "exists", name, timeout=30).returncode != 0


def test_image_exports_what_the_host_exporter_exports(devcluster: DevCluster, stack: Stack,
                                                      image_exporter: str) -> None:
    osds = {f"osd.{i}" for i in devcluster.osd_ids()}
    # Two scrapes each: the topology collector fills its cache on the first.
    scrape(image_exporter)
    scrape(stack.exporter_url + "/metrics")
    in_image = scrape(image_exporter)
    on_host = scrape(stack.exporter_url + "/metrics")

    up = {s for s in series(in_image, "cephscope_daemon_up")
          if s in {f'cephscope_daemon_up{{ceph_daemon="{o}"}}' for o in osds}}
    assert len(up) == len(osds), series(in_image, "cephscope_daemon_up")
    for osd in osds:
        assert f'cephscope_daemon_up{{ceph_daemon="{osd}"}} 1' in in_image

    missing = metric_names(on_host) - metric_names(in_image)
    assert not missing, f"the image's exporter lacks {sorted(missing)[:20]}"
    assert any(n.startswith("ceph_osd_op_w") for n in metric_names(in_image))

    # Each OSD mapped to its loop device, as on the host.
    devices_in_image = [s for s in series(in_image, "cephscope_osd_device_info") if 'kind="loop"' in s]
    assert len(devices_in_image) >= len(osds), series(in_image, "cephscope_osd_device_info")
    assert devices_in_image == [s for s in series(on_host, "cephscope_osd_device_info")
                                if 'kind="loop"' in s]
