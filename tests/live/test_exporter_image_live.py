"""The exporter's image, built from the project's Dockerfile by podman, run against the dev
cluster by the newcomer's one command (`make exporter-container`,
`cephscope.deploy.exporter_container`, which says which mounts and why), exports what the
exporter run on the host exports."""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Iterator

import pytest

from cephscope.deploy import exporter_container
from cephscope.deploy.container import Podman
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
    build_exporter_image(podman)  # the Dockerfile, built (podman's layer cache: seconds)
    port = free_port_base(1, avoid={devcluster.port_base})
    name = f"cephscope-exporter-test-{port}"
    # The newcomer's one command (`make exporter-container`), on the session's dev cluster:
    # it finds the cluster running and the image built, and starts the container.
    assert exporter_container.main(["--state-dir", str(devcluster.state_dir),
                                    "--port", str(port), "--name", name]) == 0
    try:
        yield f"http://127.0.0.1:{port}/metrics"
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
