"""CephFS and the RADOS gateway of the dev cluster, for real (`mds=True, rgw=True`), on two
clusters: the session's (this machine's Pacific packages, one host) and a Tentacle cluster
from its root filesystem on namespace hosts (2 hosts + 1 client, made for this module).

On each: the filesystem mounted with ceph-fuse (write, read back, unmount, nothing left
mounted), an S3 PUT/GET/DELETE round trip with boto3 and a Swift auth + PUT/GET over plain
HTTP with the keys from rgw.json, both daemons' admin sockets answering `perf dump`. On the
namespace hosts also: the gateway listens on the first host's public address, and a client
host reaches it over the hosts' network.

Then one sweep on Tentacle from both client hosts over SSH, scraped by a stack of its own
(the hosts' exporters through the cluster's file_sd targets): a swift-bench step (PUT, GET and
DEL phases from both clients at once) and a fio step on cephfs-fuse endpoints of both clients,
with its report: the gateway's GET/PUT figures from Tentacle's `rgw_op` counters, its labeled
per-user and per-bucket counters, and the MDS's and gateway's series recorded with each step.
The clients' ceph-fuse is this machine's (Pacific), as any client's own tools would be.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config

from cephscope.dashboards import rule_names as names
from cephscope.deploy import rootfs
from cephscope.deploy.devcluster import DevCluster
from cephscope.deploy.procs import pid_alive, proc_cmdline
from cephscope.deploy.stack import Stack
from cephscope.exporter.asok import AsokClient
from cephscope.runner.report.build import write_report
from cephscope.runner.report.fio_series import step_series_of
from tests.live.conftest import free_port_base
from tests.live.sweeps import SweepRun, gateway_figures, prometheus_get, run_sweep, step_maxima


@pytest.fixture(scope="module")
def tentacle_hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    """Tentacle on 2 namespace hosts (pools of size 2 need two) and 2 clients, 1 file OSD each."""
    rootfs.build("tentacle")
    cluster = DevCluster(tmp_path_factory.mktemp("services-tentacle"), port_base=free_port_base(100),
                         num_osds=2, backing="file", hosts=2, clients=2, release="tentacle",
                         mds=True, rgw=True)
    try:
        seconds = cluster.up()
        print(f"\nlive: tentacle, 2 hosts + 2 clients, with MDS and gateway: HEALTH_OK in {seconds:.1f}s")
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


# One sweep, two steps, from both client hosts. swift-bench counts requests, it does not run for
# a time: Tentacle's gateway did 320-440 PUTs/s and 480-1010 GETs/s from the two clients on a
# quiet machine (a phase of 2.5-3 s, two scrapes or more at the stack's 1 s), 70-100/s when the
# other test worker loads the two cores (a phase of 15-30 s).
TENTACLE_SWEEP = """\
cluster:
  clients: [client1, client2]
client_endpoints:
  fs:
    driver: cephfs-fuse
    endpoints_per_client: 1
    endpoint_size: 64
benchmarks:
  swiftbench:
    op_size: 4096
    concurrent_ops: 8
    put_count: {puts}
    get_count: {gets}
    containers: 2
    cmd_path: {swift_bench}
  fio:
    client_endpoints: fs
    mode: randwrite
    bs: 4k
    iodepth: 8
    size: 32
    time: 5
    time_based: true
    prefill: false
    log_avg_msec: 1000
"""
PUTS, GETS = 600, 1300
CLIENTS = ["client1", "client2"]
QUICK = ("--metrics-linger", "2", "--no-drop-caches", "--quiet-gap", "0", "--idle-baseline", "0")


@pytest.fixture(scope="module")
def tentacle_stack(tentacle_hosts: DevCluster, tmp_path_factory: pytest.TempPathFactory
                   ) -> Iterator[Stack]:
    """A stack scraping the Tentacle hosts' exporters and node_exporters through the cluster's
    file_sd targets, every second (a rate over a phase of a few seconds needs two scrapes)."""
    stack = Stack(tmp_path_factory.mktemp("tentacle-stack"),
                  port_base=free_port_base(8, avoid={tentacle_hosts.port_base}),
                  targets_dir=tentacle_hosts.state_dir / "targets", scrape_interval_seconds=1)
    try:
        stack.up()
        stack.wait_for_series('count(up{job="cephscope-exporter"} == 1) == 2', timeout=90)
        yield stack
    finally:
        stack.purge()


@dataclass(frozen=True)
class TentacleRun:
    run: SweepRun
    report: Any
    swift_step: str
    fio_step: str


@pytest.fixture(scope="module")
def tentacle_sweep(tentacle_hosts: DevCluster, tentacle_stack: Stack,
                   tmp_path_factory: pytest.TempPathFactory) -> TentacleRun:
    # swift-bench lives in the runner's venv, which the client hosts see (one file system)
    spec = TENTACLE_SWEEP.format(puts=PUTS, gets=GETS,
                                 swift_bench=Path(sys.executable).parent / "swift-bench")
    run = run_sweep(tentacle_hosts, tentacle_stack, spec,
                    tmp_path_factory.mktemp("tentacle-runs") / "run", timeout=600,
                    extra_args=QUICK)
    # no plots (test_fio_endpoints_live draws fio's series): the tables and figures
    report = write_report(run.run_dir, tentacle_stack.prometheus_url, plots=False)
    steps = {r["benchmark"]: r["step"] for r in run.steps}
    return TentacleRun(run, report, steps["swiftbench"], steps["fio"])


def instant(stack: Stack, query: str, at: float) -> list[dict[str, Any]]:
    return prometheus_get(stack, "/api/v1/query", {"query": query, "time": f"{at:.3f}"})["result"]


def test_swiftbench_from_both_client_hosts_on_tentacle_with_its_report(
        tentacle_sweep: TentacleRun, tentacle_stack: Stack) -> None:
    run, stack = tentacle_sweep.run, tentacle_stack
    step_dir = run.run_dir / f"step-{tentacle_sweep.swift_step}"
    result = json.loads((step_dir / "result.json").read_text())
    by_mode = {r["mode"]: r for r in result["results"]}
    assert list(by_mode) == ["put", "get", "del"]
    for mode, count in (("put", PUTS), ("get", GETS), ("del", PUTS)):
        # one swift-bench on each client host, each through all its requests
        assert {c: r["ops"] for c, r in by_mode[mode]["clients"].items()} == \
            {c: count for c in CLIENTS}, mode
        assert by_mode[mode]["ops"] == 2 * count and by_mode[mode]["extra"]["failed_requests"] == 0
    windows = result["timestamps"]["modes"]
    # each phase tagged in Prometheus, the gateway's GET counters (Tentacle's rgw_op) scraped in it
    get = windows["get"]
    tagged = prometheus_get(stack, "/api/v1/query_range", {
        "query": f'cephscope_step_info{{run="{run.run_id}", mode="get"}}',
        "start": f"{get['start']:.3f}", "end": f"{get['end']:.3f}", "step": "1"})["result"]
    assert tagged, "no cephscope_step_info{mode=get} in the GET phase"

    # the report: the gateway's own figures from rgw_op (Tentacle has no rgw get/put)
    rows = {r.mode: r for r in tentacle_sweep.report.rows if r.step.id == tentacle_sweep.swift_step}
    for op in ("put", "get"):
        gateway = rows[op].system.rgw_ops_per_second.get(op)
        assert gateway is not None, (op, rows[op].system)
        # the phase's requests over its window (from the first start to the last client's end:
        # the sum of the clients' own rates is higher when one of them ends first)
        sent = by_mode[op]["ops"] / (windows[op]["end"] - windows[op]["start"])
        assert 0.75 < gateway / sent < 1.25, (op, gateway, sent, by_mode[op]["iops"])
        assert rows[op].system.rgw_latency_seconds[op] > 0
    assert not instant(stack, "ceph_rgw_get", get["end"])  # the figures came from rgw_op
    markdown = tentacle_sweep.report.markdown_path.read_text()
    assert "RGW op/s" in markdown and "RGW GET lat ms" in markdown

    # Tentacle's labeled counters (their caches on in the dev cluster's conf): per bucket,
    # every PUT of the step's containers; per user, every GET of the test user
    step = tentacle_sweep.swift_step
    start, end = result["timestamps"]["started"], result["timestamps"]["ended"]
    window = f"[{int(end - start) + 4}s]"
    buckets = instant(stack, f'max by (bucket) (max_over_time(ceph_rgw_op_per_bucket_put_obj_ops'
                             f'{{bucket=~"cephscope-{step}-.+"}}{window}))', end + 2)
    assert sorted(b["metric"]["bucket"] for b in buckets) == sorted(
        f"cephscope-{step}-{c}-0_{n}" for c in CLIENTS for n in (0, 1))
    assert sum(float(b["value"][1]) for b in buckets) == 2 * PUTS
    user = 'ceph_rgw_op_per_user_get_obj_ops{user="cephscope"}'
    (moved,) = instant(stack, f"max_over_time({user}{window}) - min_over_time({user}{window})",
                       end + 2)
    assert float(moved["value"][1]) == 2 * GETS, moved

    # the gateway's and the MDS's series joined with the step
    rgw = step_maxima(stack, names.STEP_RGW_OPS, run.run_id, [step])
    mds = step_maxima(stack, names.STEP_MDS_REQUESTS, run.run_id, [step])
    assert rgw.get(step, 0) > 0 and step in mds, (rgw, mds)
    print(f"\nlive swiftbench tentacle, 2 client hosts: {gateway_figures(rows.values())}, "
          f"MDS req/s {mds[step]:.1f}")


def test_cephfs_fuse_on_both_client_hosts_on_tentacle_with_its_report(
        tentacle_sweep: TentacleRun, tentacle_stack: Stack) -> None:
    run, stack = tentacle_sweep.run, tentacle_stack
    step = tentacle_sweep.fio_step
    step_dir = run.run_dir / f"step-{step}"
    (agg,) = json.loads((step_dir / "result.json").read_text())["results"]
    assert sorted(agg["clients"]) == CLIENTS
    assert all(r["iops"] > 0 for r in agg["clients"].values())
    assert agg["extra"]["endpoint"]["driver"] == "cephfs-fuse"
    # fio's logs written on each client host, copied into the step dir
    assert {p.name.split("_")[0] for p in step_dir.glob("*_iops.1.log")} == {
        f"fio-randwrite.{c}.0" for c in CLIENTS}
    (row,) = [r for r in tentacle_sweep.report.rows if r.step.id == step]
    found = step_series_of(row, run.run_dir)
    assert found is not None and len(found.fio_iops) >= 3 and found.osd_ops, step
    # the MDS served the step (its request rate recorded with the step's labels); nothing left
    # mounted (the clients are network namespaces: their mounts are this machine's)
    mds = step_maxima(stack, names.STEP_MDS_REQUESTS, run.run_id, [step])
    assert mds.get(step, 0) > 0, mds
    assert mounted_under(run.run_dir) == []
    assert json.loads((run.run_dir / "state.json").read_text())["endpoints"] == []
    print(f"\nlive fio cephfs-fuse tentacle, 2 client hosts: {round(agg['iops'])} IOPS, "
          f"{agg['latency_avg_seconds'] * 1e3:.2f} ms avg, "
          f"{agg['latency_percentiles_seconds']['99'] * 1e3:.2f} ms p99, per client "
          f"{ {c: round(r['iops']) for c, r in agg['clients'].items()} }, MDS req/s {mds[step]:.1f}")
