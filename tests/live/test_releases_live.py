"""Newer Ceph releases (Reef from Debian trixie, Tentacle from sid) run from their root
filesystems, one dev cluster per release shared by these tests (`release_cluster`).

Per release: every daemon runs chrooted in its own private mount namespace and nothing of it is
mounted on the host; the exporter resolves every OSD to its own loop device through
/proc/<pid>/root when its own view of the OSD's paths is empty; the exporter's write IOPS agree
with the release's own rados bench; mclock's queue and profile are exported under load, where
the whole exporter's default holds the series budget per OSD; a
vstart-named socket dir is found; a real `cephscope sweep` step of osd_op_num_shards x
osd_op_num_threads_per_shard restarts the OSDs (through the root filesystem) and verifies the
running values.

CEPHSCOPE_LIVE_RELEASES (comma-separated, default "reef,tentacle") chooses the releases; the
first run builds the root filesystems (cached afterwards, see deploy/rootfs.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cephscope.deploy import rootfs
from cephscope.deploy.capture_fixtures import parse_bench_output
from cephscope.deploy.devcluster import DevCluster
from cephscope.deploy.stack import Stack
from cephscope.exporter.asok import AsokClient
from cephscope.exporter.cardinality import BUDGET_SERIES_PER_OSD, count_series
from tests.live.conftest import free_port_base
from tests.unit.fake_asok import exporter_args, parse_samples

RELEASES = [r for r in os.environ.get("CEPHSCOPE_LIVE_RELEASES", "reef,tentacle").split(",") if r]
EXPECTED_MAJOR = {"reef": "18.", "tentacle": "20."}


@pytest.fixture(scope="session", params=RELEASES)
def release_cluster(request: pytest.FixtureRequest,
                    tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    release = request.param
    started = time.monotonic()
    rootfs.build(release)
    built = time.monotonic() - started
    state_dir = tmp_path_factory.mktemp(f"devcluster-{release}")
    cluster = DevCluster(state_dir, port_base=free_port_base(100), num_osds=3, release=release)
    try:
        seconds = cluster.up()
        print(f"\nlive: {release} rootfs ready in {built:.1f}s, cluster HEALTH_OK in {seconds:.1f}s")
        yield cluster
    finally:
        if cluster.state_file.exists():
            cluster.purge()


def scrape_text(asok_dir: Path, *flags: str) -> str:
    from cephscope.exporter.collectors import enabled_collectors
    from cephscope.exporter.exposition import render
    from cephscope.exporter.main import settings_from_args
    from cephscope.exporter.scrape import Scraper

    args = exporter_args(asok_dir, *flags)
    scraper = Scraper(enabled_collectors(args), settings_from_args(args))
    try:
        return render(scraper.scrape(time.monotonic() + 20)).decode()
    finally:
        scraper.close()


def scrape(asok_dir: Path, *flags: str) -> dict[str, float]:
    return parse_samples(scrape_text(asok_dir, *flags))


def rados_bench(cluster: DevCluster, seconds: int, threads: int) -> subprocess.Popen[bytes]:
    """The release's own rados (from its root filesystem), 4 KiB writes."""
    return subprocess.Popen(
        cluster.rados_argv("-p", cluster.bench_pool, "bench", str(seconds), "write",
                           "-b", "4096", "-t", str(threads), "--no-cleanup"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )


def client_roots(conf: Path) -> dict[str, set[str]]:
    """Root directories of the runner's client processes for the cluster of `conf` running
    now, by kind: `rados … bench …` and the mon relay (`python3 -c …relay_main…`); other
    clusters on this machine run their own."""
    roots: dict[str, set[str]] = {"bench": set(), "relay": set()}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            if str(conf).encode() not in argv:
                continue
            if Path(argv[0].decode()).name == "rados" and b"bench" in argv:
                roots["bench"].add(os.readlink(proc / "root"))
            elif Path(argv[0].decode()).name.startswith("python3") and argv[1] == b"-c" \
                    and b"def relay_main" in argv[2]:
                roots["relay"].add(os.readlink(proc / "root"))
        except (OSError, IndexError):
            continue
    return roots


def test_daemons_run_from_the_release_root(release_cluster: DevCluster) -> None:
    cluster = release_cluster
    root = cluster.release.root
    assert root is not None and (root / rootfs.MARKER).exists()
    assert json.loads(cluster.state_file.read_text())["release"] == cluster.release.name
    own_ns = os.readlink("/proc/self/ns/mnt")
    running = cluster.running_daemons()
    assert sorted(running) == sorted(["mon.a", "mgr.x", *(f"osd.{i}" for i in cluster.osd_ids())])
    for name, pid in running.items():
        # The daemon forked into the background and stayed in its private namespace, chrooted.
        assert os.readlink(f"/proc/{pid}/root") == str(root), name
        assert os.readlink(f"/proc/{pid}/exe").startswith(str(root) + "/"), name
        assert os.readlink(f"/proc/{pid}/ns/mnt") != own_ns, name
    # Nothing of it is mounted in the host's namespace.
    assert str(root) not in Path("/proc/self/mountinfo").read_text()
    versions = cluster.ceph_json("versions")
    assert all(v.split()[2].startswith(EXPECTED_MAJOR[cluster.release.name]) for v in versions["osd"])
    health = cluster.ceph_json("health")
    assert health["status"] == "HEALTH_OK"
    for code in cluster.muted_health_checks():
        if code in health.get("checks", {}):
            assert health["checks"][code]["muted"]


def test_topology_maps_each_osd_to_its_loop_device_through_proc_pid_root(
    release_cluster: DevCluster, tmp_path: Path
) -> None:
    """The exporter's own root is an empty dir (as when it runs in a container itself without
    the host's paths): only /proc/<pid>/root leads to each OSD's data dir and device."""
    cluster = release_cluster
    empty_root = tmp_path / "exporter-root"
    empty_root.mkdir()
    samples = scrape(cluster.asok_dir, "--path.rootfs", str(empty_root),
                     "--ceph.conf", str(cluster.conf_path))
    state = cluster.load_state()
    assert state.backing == "loop"
    for backing in state.osds:
        device = Path(str(backing.loop_device)).name
        keys = [k for k in samples if k.startswith("cephscope_osd_device_info{")
                and f'ceph_daemon="osd.{backing.osd_id}"' in k]
        assert len(keys) == 1, keys
        assert f'device="{device}"' in keys[0] and 'role="data"' in keys[0], keys
        # major:minor of the loop device as the host's sysfs names it (node_exporter's view)
        assert Path(f"/sys/class/block/{device}/dev").exists()
    assert samples["cephscope_daemons_found"] >= len(state.osds)


def test_exporter_write_iops_match_rados_bench(release_cluster: DevCluster) -> None:
    cluster = release_cluster
    seconds = 10

    def writes() -> float:
        samples = scrape(cluster.asok_dir, "--no-collector.topology")
        return sum(v for k, v in samples.items() if k.startswith("ceph_osd_op_w{"))

    before = writes()
    bench = rados_bench(cluster, seconds, 16)
    out, err = bench.communicate(timeout=seconds + 120)
    assert bench.returncode == 0, err.decode(errors="replace")[-2000:]
    result = parse_bench_output(out.decode(errors="replace"))
    total = result["total_writes"]
    assert total > 0, result
    done = writes() - before
    # pool size 1: one client write is one OSD write op
    assert abs(done - total) <= 0.10 * total, (done, total, result)


def test_mclock_queue_and_profile_under_load(release_cluster: DevCluster) -> None:
    """mclock's queue, classes and profile under 128 writes in flight; the default exposition
    of the whole exporter under that load holds the series budget per OSD."""
    cluster = release_cluster
    profile = AsokClient(cluster.osd_asok(0)).config_get("osd_mclock_profile")
    bench = rados_bench(cluster, 25, 128)
    seen_queued = 0.0
    seen_client_class = 0.0
    try:
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline and bench.poll() is None:
            samples = scrape(cluster.asok_dir, "--no-collector.topology",
                             "--collector.opqueue.min-interval", "0",
                             "--collector.opqueue.mclock-detail")
            for osd in cluster.osd_ids():
                label = f'ceph_daemon="osd.{osd}"'
                assert samples[f'cephscope_osd_op_queue_info{{{label},scheduler="mclock",'
                               f'profile="{profile}"}}'] == 1
            seen_queued = max(seen_queued, sum(
                v for k, v in samples.items()
                if k.startswith("cephscope_osd_op_queue_items{") and 'queue="scheduler"' in k))
            seen_client_class = max(seen_client_class, sum(
                v for k, v in samples.items()
                if k.startswith("cephscope_osd_op_queue_mclock_class_items{") and 'class="client"' in k))
            if seen_queued and seen_client_class:
                break
            time.sleep(0.2)
        # the whole exporter at its defaults, under the same load, holds the series budget
        assert bench.poll() is None, "rados bench ended before the default scrape"
        per_osd = count_series(scrape_text(cluster.asok_dir, "--ceph.conf", str(cluster.conf_path)))
    finally:
        bench.kill()
        bench.wait(30)
    assert seen_queued > 0, "no op ever seen queued in mclock under 128 concurrent writes"
    assert seen_client_class > 0
    assert per_osd.osds == [f"osd.{i}" for i in cluster.osd_ids()]
    by_collector = {c: per_osd.mean_per_osd(collector=c) for c in {c for c, _ in per_osd.families()}}
    assert "unknown" not in by_collector, per_osd.families()
    assert 0 < per_osd.max_per_osd() <= BUDGET_SERIES_PER_OSD, (per_osd.osd_totals(), by_collector)


def test_vstart_named_socket_dir_is_found(release_cluster: DevCluster, tmp_path: Path) -> None:
    """vstart.sh names sockets $name.asok: a dir of such names (links to the real sockets)."""
    cluster = release_cluster
    vstart_dir = tmp_path / "asok"
    vstart_dir.mkdir()
    for osd in cluster.osd_ids():
        (vstart_dir / f"osd.{osd}.asok").symlink_to(cluster.osd_asok(osd))
    (vstart_dir / "client.admin.4242.asok").touch()
    samples = scrape(vstart_dir, "--no-collector.topology")
    assert samples["cephscope_daemons_found"] == len(cluster.osd_ids())
    for osd in cluster.osd_ids():
        assert samples[f'cephscope_daemon_up{{ceph_daemon="osd.{osd}"}}'] == 1
        assert samples[f'ceph_osd_op{{ceph_daemon="osd.{osd}"}}'] >= 0


def test_shard_thread_step_restarts_and_verifies(release_cluster: DevCluster, tmp_path: Path) -> None:
    cluster = release_cluster
    pids = {i: cluster.osd_pid(i) for i in cluster.osd_ids()}
    spec = tmp_path / "step.yaml"
    spec.write_text(
        "cluster:\n  use_existing: true\n  head: head\n"
        "ceph_config:\n  osd_op_num_shards: [3]\n  osd_op_num_threads_per_shard: [2]\n"
        "benchmarks:\n  radosbench:\n    op_size: [4096]\n    time: 3\n"
        "    concurrent_ops: 8\n    write_only: true\n"
    )
    results = tmp_path / "run"
    log = tmp_path / "sweep.log"
    with log.open("w") as out:
        sweep = subprocess.Popen(
            [sys.executable, "-m", "cephscope.cli", "sweep", str(spec), "--devcluster",
             str(cluster.state_dir), "--results-dir", str(results)],
            stdout=out, stderr=subprocess.STDOUT,
        )
        # The runner's rados bench and its mon client (the relay holding the release's
        # librados) run from the release's root filesystem too.
        roots: dict[str, set[str]] = {"bench": set(), "relay": set()}
        deadline = time.monotonic() + 600
        while sweep.poll() is None and time.monotonic() < deadline:
            for kind, found in client_roots(cluster.conf_path).items():
                roots[kind] |= found
            time.sleep(0.2)
        if sweep.poll() is None:
            sweep.kill()
        sweep.wait(30)
    assert sweep.returncode == 0, log.read_text()[-3000:]
    assert roots == {"bench": {str(cluster.release.root)}, "relay": {str(cluster.release.root)}}
    # The `ceph config set/get` of the step went through the release's own client: its ceph
    # CLI and its librados, on its own Python (the host's is 3.11, Debian's Reef/Tentacle 3.13).
    client = json.loads((results / "environment.json").read_text())["client"]
    assert client["ceph_version"].startswith(f"ceph version {EXPECTED_MAJOR[cluster.release.name]}")
    assert client["tool_prefix"][-1] == "--" and str(cluster.release.root) in client["tool_prefix"]
    assert client["librados"]["rados_module"].startswith("/usr/lib/python3/dist-packages/rados.")
    assert client["librados"]["python"].split(".")[:2] != list(map(str, sys.version_info[:2]))
    (step,) = json.loads((results / "run.json").read_text())["steps"]
    result = json.loads((results / f"step-{step['id']}" / "result.json").read_text())
    assert result["status"] == "done"
    assert set(result["config"]) == {f"osd.{i}" for i in cluster.osd_ids()}
    for values in result["config"].values():
        assert values["osd_op_num_shards"] == "3" and values["osd_op_num_threads_per_shard"] == "2"
    (write,) = result["results"]
    assert write["iops"] > 0
    # Restarted (new pids, still from the release's root) and restored after the sweep.
    for osd, pid in pids.items():
        new = cluster.osd_pid(osd)
        assert new is not None and new != pid
        assert os.readlink(f"/proc/{new}/root") == str(cluster.release.root)
    assert "osd_op_num_shards" not in {e["name"] for e in cluster.ceph_json("config", "dump")}


def test_prometheus_3_stack_scrapes_the_release_and_evaluates_every_rule(
    release_cluster: DevCluster, tmp_path: Path
) -> None:
    """`cephscope stack up --prometheus-release 3`: Prometheus 3.5 from the sid root filesystem
    scrapes this cluster's exporter and evaluates every shipped rule without an error."""
    cluster = release_cluster
    stack = Stack(tmp_path / "stack", port_base=free_port_base(8, avoid={cluster.port_base}),
                  asok_dir=cluster.asok_dir, ceph_conf=cluster.conf_path, prometheus_release="3")
    try:
        stack.up()
        pid = stack.running()["prometheus"]
        assert os.readlink(f"/proc/{pid}/root") == str(rootfs.rootfs_path("tentacle"))
        assert stack.prometheus.get("status/buildinfo")["version"].startswith("3.")
        profile = AsokClient(cluster.osd_asok(0)).config_get("osd_mclock_profile")
        series = stack.wait_for_series(
            f'cephscope_osd_op_queue_info{{scheduler="mclock",profile="{profile}"}}', timeout=90)
        assert len(series) == len(cluster.osd_ids())
        deadline = time.monotonic() + 90
        while True:
            groups = stack.prometheus.get("rules")["groups"]
            rules = [rule for group in groups for rule in group["rules"]]
            if rules and all(rule.get("health") == "ok" for rule in rules):
                break
            bad = [(rule["name"], rule.get("health"), rule.get("lastError")) for rule in rules
                   if rule.get("health") != "ok"]
            assert time.monotonic() < deadline, bad[:5]
            time.sleep(2)
    finally:
        stack.purge()
