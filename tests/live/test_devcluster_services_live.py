"""CephFS and the RADOS gateway of the dev cluster, for real (`mds=True, rgw=True`), on two
clusters: the session's (this machine's Pacific packages, one host) and a Tentacle cluster
from its root filesystem on namespace hosts (2 hosts + 1 client, made for this module).

On each: the filesystem mounted with ceph-fuse (write, read back, unmount, nothing left
mounted), an S3 PUT/GET/DELETE round trip with boto3 and a Swift auth + PUT/GET over plain
HTTP with the keys from rgw.json, both daemons' admin sockets answering `perf dump`. On the
namespace hosts also: the gateway listens on the first host's public address, and a client
host reaches it over the hosts' network.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config

from cephscope.deploy import rootfs
from cephscope.deploy.devcluster import DevCluster
from cephscope.deploy.procs import pid_alive, proc_cmdline
from cephscope.exporter.asok import AsokClient
from tests.live.conftest import free_port_base


@pytest.fixture(scope="module")
def tentacle_hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    """Tentacle on 2 namespace hosts (pools of size 2 need two) and a client, 1 file OSD each."""
    rootfs.build("tentacle")
    cluster = DevCluster(tmp_path_factory.mktemp("services-tentacle"), port_base=free_port_base(100),
                         num_osds=2, backing="file", hosts=2, clients=1, release="tentacle",
                         mds=True, rgw=True)
    try:
        seconds = cluster.up()
        print(f"\nlive: tentacle, 2 hosts + 1 client, with MDS and gateway: HEALTH_OK in {seconds:.1f}s")
        yield cluster
    finally:
        if cluster.state_file.exists():
            cluster.purge()


@pytest.fixture(scope="module", params=["pacific", "tentacle-hosts"])
def services(request: pytest.FixtureRequest) -> DevCluster:
    """The session's Pacific cluster, then the Tentacle one on namespace hosts."""
    return request.getfixturevalue("devcluster" if request.param == "pacific" else "tentacle_hosts")


def mounted_under(path: Path, mountinfo: Path = Path("/proc/self/mountinfo")) -> list[str]:
    """Mount points at or below `path` in the mount namespace `mountinfo` belongs to."""
    points = [line.split()[4] for line in mountinfo.read_text().splitlines()]
    return [p for p in points if p == str(path) or p.startswith(f"{path}/")]


def fuse_clients_of(mountpoint: Path) -> list[int]:
    """ceph-fuse processes whose command line names `mountpoint`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            cmdline = proc_cmdline(int(entry.name))
            if cmdline[:1] and cmdline[0].endswith("ceph-fuse") and str(mountpoint) in cmdline:
                found.append(int(entry.name))
    return found


def admin_socket(cluster: DevCluster, daemon: str, *command: str) -> Any:
    """A command the exporter's read-only client refuses, through the release's `ceph`."""
    argv = cluster.admin_command(["ceph", "--admin-daemon", str(cluster.daemon_asok(daemon)), *command])
    return json.loads(subprocess.run(argv, check=True, capture_output=True, timeout=30).stdout)


def test_cephfs_mounted_with_ceph_fuse_reads_back_what_was_written(services: DevCluster) -> None:
    cluster = services
    # Under the state dir: a release root sees it at the same path.
    mountpoint = cluster.state_dir / f"mnt-{uuid.uuid4().hex[:8]}"
    mountpoint.mkdir()
    argv = cluster.admin_command(["ceph-fuse", "-c", str(cluster.conf_path), "--client_fs",
                                  cluster.cephfs_name, str(mountpoint)])
    # ceph-fuse returns once the mount is made; its daemon half serves it
    subprocess.run(argv, check=True, capture_output=True, timeout=60)
    client, = fuse_clients_of(mountpoint)
    in_root = cluster.release.root is not None
    # Another release's client mounts inside its own private mount namespace (as its daemons
    # run): nothing appears on the host; its files are reached through the process's root.
    files = Path(f"/proc/{client}/root{mountpoint}") if in_root else mountpoint
    try:
        assert mounted_under(mountpoint, Path(f"/proc/{client}/mountinfo")) != []
        assert mounted_under(mountpoint) == ([] if in_root else [str(mountpoint)])
        payload = os.urandom(1 << 20)
        with open(files / "probe.bin", "wb") as out:
            out.write(payload)
            out.flush()
            os.fsync(out.fileno())
        assert hashlib.sha256((files / "probe.bin").read_bytes()).digest() == \
            hashlib.sha256(payload).digest()
        # the MDS serves this client
        sessions = admin_socket(cluster, "mds.a", "session", "ls")
        assert any(s.get("client_metadata", {}).get("mount_point") == str(mountpoint) for s in sessions)
        (files / "probe.bin").unlink()
    finally:
        if in_root:  # the namespace and its mount end with the process
            with contextlib.suppress(ProcessLookupError):
                os.kill(client, signal.SIGTERM)
        else:
            subprocess.run(["umount", str(mountpoint)], capture_output=True, timeout=60, check=False)
        deadline = time.monotonic() + 30
        while pid_alive(client) and time.monotonic() < deadline:
            time.sleep(0.2)
    assert not pid_alive(client) and fuse_clients_of(mountpoint) == []
    assert mounted_under(mountpoint) == []
    mountpoint.rmdir()


def test_s3_put_get_delete_with_the_users_keys(services: DevCluster) -> None:
    access = services.rgw_access()
    assert access.endpoint == services.rgw_endpoint
    assert access.endpoint == f"http://{services.hosts[0].public_addr}:{services.port_base + 99}"
    s3 = boto3.client("s3", endpoint_url=access.endpoint, aws_access_key_id=access.access_key,
                      aws_secret_access_key=access.secret_key, region_name="default",
                      config=Config(retries={"max_attempts": 1}, connect_timeout=10, read_timeout=30))
    bucket = f"live-{uuid.uuid4().hex[:12]}"
    body = os.urandom(256 << 10)
    s3.create_bucket(Bucket=bucket)
    try:
        s3.put_object(Bucket=bucket, Key="object", Body=body)
        assert s3.get_object(Bucket=bucket, Key="object")["Body"].read() == body
        s3.delete_object(Bucket=bucket, Key="object")
        assert s3.list_objects_v2(Bucket=bucket).get("KeyCount") == 0
    finally:
        s3.delete_bucket(Bucket=bucket)
    # a wrong secret is refused: the keys are what makes the round trip work
    wrong = boto3.client("s3", endpoint_url=access.endpoint, aws_access_key_id=access.access_key,
                         aws_secret_access_key=access.secret_key + "x", region_name="default",
                         config=Config(retries={"max_attempts": 1}))
    with pytest.raises(wrong.exceptions.ClientError, match="SignatureDoesNotMatch"):
        wrong.list_buckets()


def swift(method: str, url: str, headers: dict[str, str], data: bytes | None = None) -> Any:
    request = urllib.request.Request(url, method=method, headers=headers, data=data)
    return urllib.request.urlopen(request, timeout=30)


def test_swift_auth_then_put_and_get_over_plain_http(services: DevCluster) -> None:
    access = services.rgw_access()
    assert access.swift_auth_url == f"{access.endpoint}/auth/1.0" and access.swift_user == "cephscope:swift"
    with swift("GET", access.swift_auth_url,
               {"X-Auth-User": access.swift_user, "X-Auth-Key": access.swift_key}) as auth:
        token = auth.headers["X-Auth-Token"]
        storage_url = auth.headers["X-Storage-Url"]
    assert token and storage_url.startswith(access.endpoint + "/swift/")
    headers = {"X-Auth-Token": token}
    container = f"{storage_url}/live-{uuid.uuid4().hex[:12]}"
    body = os.urandom(64 << 10)
    with swift("PUT", container, headers) as made:
        assert made.status in (201, 202)
    try:
        with swift("PUT", f"{container}/object", headers, body) as put:
            assert put.status == 201
        with swift("GET", f"{container}/object", headers) as got:
            assert got.read() == body
        with swift("DELETE", f"{container}/object", headers) as deleted:
            assert deleted.status == 204
    finally:
        swift("DELETE", container, headers).close()
    with pytest.raises(urllib.error.HTTPError, match="401"):
        swift("GET", access.swift_auth_url, {"X-Auth-User": access.swift_user, "X-Auth-Key": "wrong"})


def test_mds_and_gateway_admin_sockets_answer_perf_dump(services: DevCluster) -> None:
    cluster = services
    mds = AsokClient(cluster.daemon_asok("mds.a"), timeout=10).command("perf dump")
    assert {"mds", "mds_server", "mds_cache"} <= set(mds)
    gateway = AsokClient(cluster.daemon_asok("client.rgw.a"), timeout=10)
    before = gateway.command("perf dump")["rgw"]["req"]
    with urllib.request.urlopen(cluster.rgw_endpoint + "/", timeout=10) as answer:
        assert answer.status == 200  # anonymous: an empty bucket list
    dump = gateway.command("perf dump")
    assert dump["rgw"]["req"] >= before + 1
    if cluster.release.name == "tentacle":
        assert "rgw_op" in dump  # Tentacle's per-operation counters
    # in the first host's socket dir (its exporter's), named as packages name them
    names = {p.name for p in cluster.asok_dir_of(cluster.hosts[0].name).glob("*.asok")}
    assert {"ceph-mds.a.asok", "ceph-client.rgw.a.asok"} <= names


def test_a_client_host_reaches_the_gateway_on_the_first_hosts_address(tentacle_hosts: DevCluster) -> None:
    cluster = tentacle_hosts
    access = cluster.rgw_access()
    first = cluster.hosts[0]
    # listening on host1's public address, inside host1's namespace, and nowhere on this machine
    listening = subprocess.run(["nsenter", f"--net=/run/netns/{first.netns}", "ss", "-Hltn",
                                f"sport = :{cluster.port_base + 99}"],
                               check=True, capture_output=True, text=True, timeout=30).stdout
    assert listening.split()[3] == f"{first.public_addr}:{cluster.port_base + 99}"
    here = subprocess.run(["ss", "-Hltn", f"sport = :{cluster.port_base + 99}"], check=True,
                          capture_output=True, text=True, timeout=30).stdout
    assert here.strip() == ""
    # a Swift auth from client1, over SSH as the runner reaches it (the key travels on stdin)
    client = cluster.client_names[0]
    curl = ["ssh", "-F", str(cluster.ssh_config), client, "curl", "-s", "-o", "/dev/null", "-D", "-",
            "-H", "@-", access.swift_auth_url]
    headers = f"X-Auth-User: {access.swift_user}\nX-Auth-Key: {access.swift_key}\n"
    answer = subprocess.run(curl, input=headers, check=True, capture_output=True, text=True,
                            timeout=60).stdout
    assert answer.startswith("HTTP/1.1 204") and "X-Auth-Token: AUTH_" in answer
