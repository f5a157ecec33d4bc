"""Ceph Tentacle's (and on request Reef's) mon, mgr and two OSDs in podman containers, laid
out as cephadm lays them out (deploy/container_cluster.py), under a root prefix in a tmp dir.

The exporter on the host, pointed at `<root>/var/run/ceph`, finds every socket one level down
(`<fsid>/ceph-osd.N.asok`), sees every OSD up, and maps each OSD to its loop device through the
container's root (`/proc/<pid>/root`, the pid from the socket's peer credentials: the OSD runs
in the container's own pid namespace); so does the exporter in its own container. The
runner's `podman` restart method restarts the OSD containers (`podman restart
ceph-<fsid>-osd-N`) and the restart API sees them up again with a newer epoch.

Measured cost: ≈37 s in all on a quiet machine (cluster up ≈20 s, the tests ≈10 s, teardown
≈6 s), ≈65 s under load; the Ceph image is imported once (≈25 s) and cached by tag."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from cephscope.deploy.container import Podman
from cephscope.deploy.container_cluster import ContainerCluster
from cephscope.deploy.exporter_container import ClusterFiles, run_exporter_container
from cephscope.deploy.image import build_exporter_image
from cephscope.deploy.procs import exporter_binary, terminate
from cephscope.runner.cephclient import CephCli
from cephscope.runner.restart import OsdRestarter, make_restart_method
from tests.live.conftest import free_port_base


def scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as resp:
        return resp.read().decode()


# Tentacle in `make test`; CEPHSCOPE_CONTAINER_RELEASES=tentacle,reef runs Reef too (≈+60 s,
# plus a one-time ≈40 s image import).
RELEASES = os.environ.get("CEPHSCOPE_CONTAINER_RELEASES", "tentacle").split(",")


@pytest.fixture(scope="module", params=RELEASES)
def cluster(request: pytest.FixtureRequest) -> Iterator[ContainerCluster]:
    # Short: the host path of an admin socket (<root>/var/run/ceph/<fsid>/ceph-osd.N.asok)
    # must fit in sockaddr_un; pytest's tmp dirs are too deep.
    root = Path(tempfile.mkdtemp(prefix="cephadm-", dir="/tmp"))
    podman = Podman.here()
    cluster = ContainerCluster(root, podman, release=request.param,
                               port_base=free_port_base(100), num_osds=2)
    started = time.monotonic()
    try:
        cluster.up()
        print(f"\nlive: containerised {request.param} cluster HEALTH_OK in "
              f"{time.monotonic() - started:.1f}s")
        yield cluster
    finally:
        loops = (json.loads(cluster.state_file.read_text())["osds"]
                 if cluster.state_file.exists() else [])
        removed = cluster.purge()
        for daemon in ("mon-a", "mgr-x", "osd-0", "osd-1"):
            name = f"ceph-{cluster.fsid}-{daemon}"
            assert podman.run("container", "exists", name, timeout=30).returncode != 0, name
        for osd in loops:
            backing = Path(f"/sys/block/{Path(osd['loop_device']).name}/loop/backing_file")
            assert not (backing.exists() and backing.read_text().strip() == osd["image"]), removed
        for path in (cluster.run_dir, cluster.data_dir, cluster.log_dir):
            assert not path.exists(), path
        shutil.rmtree(root)


@pytest.fixture(scope="module")
def exporter(cluster: ContainerCluster) -> Iterator[str]:
    port = free_port_base(1, avoid={cluster.port_base})
    proc = subprocess.Popen([exporter_binary(), f"--web.listen-address=127.0.0.1:{port}",
                             f"--ceph.asok-dir={cluster.asok_root}",
                             f"--ceph.conf={cluster.conf_path}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                scrape(url)
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
                assert time.monotonic() < deadline, "exporter never answered"
                time.sleep(0.5)
        yield url
    finally:
        terminate(proc.pid, 10)
        proc.wait(timeout=10)


def test_cephadm_layout(cluster: ContainerCluster) -> None:
    fsid = cluster.fsid
    for osd_id in cluster.osd_ids():
        assert (cluster.asok_root / fsid / f"ceph-osd.{osd_id}.asok").is_socket()
        assert (cluster.root / "var/lib/ceph" / fsid / f"osd.{osd_id}" / "block").is_symlink()
        state = cluster.podman.run("inspect", "--format",
                                   "{{.State.Running}} {{.HostConfig.Privileged}}",
                                   f"ceph-{fsid}-osd-{osd_id}", timeout=30)
        assert state.stdout.decode().split() == ["true", "true"]
    assert (cluster.root / "var/log/ceph" / fsid).is_dir()


def test_host_exporter_sees_containerised_osds(cluster: ContainerCluster, exporter: str) -> None:
    scrape(exporter)  # the topology collector fills its cache on the first scrape
    text = scrape(exporter)
    loops = {f"osd.{o['osd_id']}": Path(o["loop_device"]).name
             for o in json.loads(cluster.state_file.read_text())["osds"]}
    for daemon, loop in loops.items():
        assert f'cephscope_daemon_up{{ceph_daemon="{daemon}"}} 1' in text
        device_lines = [line for line in text.splitlines()
                        if line.startswith("cephscope_osd_device_info{")
                        and f'ceph_daemon="{daemon}"' in line and 'role="data"' in line]
        assert len(device_lines) == 1 and f'device="{loop}"' in device_lines[0], device_lines
    # The daemons run in the containers' own pid namespaces, not ours: the device was found
    # through the container's root.
    pid = cluster.container_pid("osd.0")
    assert os.readlink(f"/proc/{pid}/ns/pid") != os.readlink("/proc/self/ns/pid")


def test_exporter_in_its_container_sees_containerised_osds(cluster: ContainerCluster) -> None:
    """The exporter's image (podman's layer cache: seconds when the image test built it), with
    the cluster's `<root>/var/run/ceph` at /var/run/ceph: sockets one level down, as cephadm's
    hosts have them when the whole /var/run/ceph is mounted."""
    podman = cluster.podman
    image = build_exporter_image(podman)
    port = free_port_base(1, avoid={cluster.port_base})
    name = f"cephscope-exporter-cephadm-test-{port}"
    files = ClusterFiles(cluster.asok_root, cluster.conf_path, cluster.admin_dir)
    try:
        url = run_exporter_container(podman, files, image, name, port)
        scrape(url)
        text = scrape(url)
        for osd_id in cluster.osd_ids():
            assert f'cephscope_daemon_up{{ceph_daemon="osd.{osd_id}"}} 1' in text
            assert any(line.startswith("cephscope_osd_device_info{")
                       and f'ceph_daemon="osd.{osd_id}"' in line and 'kind="loop"' in line
                       for line in text.splitlines()), f"osd.{osd_id} not mapped to its loop"
    finally:
        podman.remove(name)


def test_podman_restart_method_restarts_osd_containers(cluster: ContainerCluster) -> None:
    cli = CephCli(cluster.conf_path, keyring_path=cluster.admin_keyring,
                  tool_prefix=tuple(cluster.admin_command([])))
    method = make_restart_method("podman", cli, fsid=cluster.fsid)
    restarter = OsdRestarter(cli, method, cluster.osd_asok, timeout_seconds=120)
    ids = cluster.osd_ids()
    before = restarter.up_from(ids)
    pids = {i: cluster.container_pid(f"osd.{i}") for i in ids}
    restart_s, wait_s = restarter.restart_osds(ids)
    after = restarter.up_from(ids)
    print(f"\nlive: podman restart of {len(ids)} OSD containers {restart_s:.1f}s, "
          f"up+clean {wait_s:.1f}s")
    assert all(after[i] > before[i] for i in ids), (before, after)
    assert all(cluster.container_pid(f"osd.{i}") != pids[i] for i in ids)
