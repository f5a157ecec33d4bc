"""Live tests: one real dev cluster + one real stack per test session (per xdist worker), on
free ports (each worker its own range).

Fixtures:
- `devcluster`: a started `DevCluster` (HEALTH_OK, pools created) in a tmp state dir, with an
  MDS (file system `cephfs`) and a RADOS gateway (`rgw_access()`): the CephFS and RGW modules
  (fio on cephfs-fuse, swift-bench, the dashboards' service traffic) share it.
- `devcluster6`: the same with 6 OSDs, per module.
- `stack`: a started `Stack` scraping that cluster's exporter, node_exporter, and the runner
  endpoint on `stack.runner_port`; `stack.webhook` records what Alertmanager sends to the
  example `webhook` receiver.
Every test in this directory is marked `live`.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from cephscope.deploy.devcluster import DevCluster
from cephscope.deploy.procs import port_is_free
from cephscope.deploy.stack import Stack
from tests.live.cluster_checks import osd_db_entries, shard_counts

# The slowest modules, slowest first (pytest --durations on 2 cores): `make test` runs the
# tests on two xdist workers with `--dist loadfile --no-loadscope-reorder`, each module whole
# on one worker (its module fixtures made once), handed out in collection order; starting
# with the longest keeps the two workers' ends close. Only the order depends on this list.
SLOWEST_FIRST = (
    "test_fault_loop_live", "test_report_live", "test_dashboards_live", "test_sweep_live",
    # the multi-host modules share a session cluster on one worker, and test_multihost_live's
    # last test takes it down: the knobs module goes first
    "test_multihost_knobs_live", "test_multihost_live", "test_search_live",
    "test_fio_endpoints_live", "test_study_examples_live", "test_lost_cluster_live",
    "test_devcluster_services_live", "test_releases_live",
    "test_recovery_live", "test_crash_live", "test_release_sweep_live", "test_fresh_install_live",
    "test_rgw_bench_live",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    rank = {name: index for index, name in enumerate(SLOWEST_FIRST)}

    def order(item: pytest.Item) -> int:
        if here not in Path(str(item.fspath)).parents:
            return len(rank) + 1
        return rank.get(Path(str(item.fspath)).stem, len(rank))

    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.live)
    items.sort(key=order)  # stable: a module's tests keep their order


def worker_port_range() -> range:
    """This xdist worker's share of 20000-31999 (all of it outside xdist), so that two workers
    never pick the same free base between the check and the bind."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    index = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0
    share = (32000 - 20000) // max(count, 1) // 100 * 100
    start = 20000 + min(index, count - 1) * share
    return range(start, start + share, 100)


def free_port_base(span: int, avoid: set[int] | None = None) -> int:
    """A base such that base..base+span-1 are all free on 127.0.0.1."""
    rng = random.Random()
    bases = worker_port_range()
    for _ in range(200):
        base = rng.choice(bases)
        if avoid and any(abs(base - a) < 200 for a in avoid):
            continue
        if all(port_is_free(p) for p in range(base, base + span)):
            return base
    raise RuntimeError("no free port range found")


class WebhookRecorder:
    """A local Alertmanager webhook receiver that keeps every notification it gets."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                try:
                    payload = json.loads(body)
                except ValueError:
                    payload = {"raw": body.decode(errors="replace")}
                with recorder._lock:
                    recorder.received.append(payload)
                self.send_response(200)
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/alerts"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def alerts(self, alertname: str | None = None, status: str | None = None) -> list[dict[str, Any]]:
        with self._lock:
            payloads = list(self.received)
        found = []
        for payload in payloads:
            for alert in payload.get("alerts", []):
                if alertname and alert.get("labels", {}).get("alertname") != alertname:
                    continue
                if status and alert.get("status") != status:
                    continue
                found.append(alert)
        return found

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="session")
def devcluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    state_dir = tmp_path_factory.mktemp("devcluster")
    # With the MDS and the gateway, for the CephFS and RGW modules: measured by
    # benchmarks/devcluster_services_cost.py (3 paired rounds, 2 cores under a load of ~10),
    # HEALTH_OK -1.8 s (sd 4.9 s: within the noise) and +0.8 % of a core idle (MDS 0.13 %,
    # gateway 0.2-0.4 %, the rest OSD and mon work for them).
    cluster = DevCluster(state_dir, port_base=free_port_base(100), num_osds=3, mds=True, rgw=True)
    started = time.monotonic()
    try:
        cluster.up()
        print(f"\nlive: dev cluster HEALTH_OK in {time.monotonic() - started:.1f}s ({state_dir})")
        yield cluster
    finally:
        if cluster.state_file.exists():
            cluster.purge()


@pytest.fixture(scope="module")
def devcluster6(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    """A 6-OSD dev cluster (EC k+m = 6 on failure domain osd), for one module at a time: six
    idle OSDs would load the 2-core machine under every later test."""
    cluster = DevCluster(tmp_path_factory.mktemp("devcluster6"), port_base=free_port_base(100),
                         num_osds=6, osd_size_gib=4)
    try:
        cluster.up()
        yield cluster
    finally:
        if cluster.state_file.exists():
            cluster.purge()


@pytest.fixture(scope="session")
def stack(devcluster: DevCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    webhook = WebhookRecorder()
    stack = Stack(
        tmp_path_factory.mktemp("stack"),
        port_base=free_port_base(8, avoid={devcluster.port_base}),
        asok_dir=devcluster.asok_dir,
        ceph_conf=devcluster.conf_path,
        webhook_url=webhook.url,
    )
    stack.webhook = webhook  # type: ignore[attr-defined]
    try:
        stack.up()
        # Prometheus needs a few scrapes before new targets are up.
        stack.wait_for_series('up{job="node"} == 1', timeout=60)
        yield stack
    finally:
        stack.purge()
        webhook.close()


@pytest.fixture(scope="session")
def multihost(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    """A multi-host dev cluster: 3 namespace hosts x 1 OSD + 2 client namespaces, each with
    sshd, and (hosts) cephscope-exporter and node_exporter on its public address."""
    state_dir = tmp_path_factory.mktemp("multihost")
    cluster = DevCluster(state_dir, port_base=free_port_base(100), num_osds=3, hosts=3, clients=2)
    started = time.monotonic()
    try:
        cluster.up()
        cluster.up_seconds = time.monotonic() - started  # type: ignore[attr-defined]
        print(f"\nlive: 3 hosts + 2 clients HEALTH_OK in {cluster.up_seconds:.1f}s ({state_dir})")
        yield cluster
    finally:
        if cluster.state_file.exists():
            cluster.purge()


@pytest.fixture(scope="session")
def multihost_stack(multihost: DevCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """A stack scraping the multi-host cluster's hosts through its file_sd targets."""
    stack = Stack(tmp_path_factory.mktemp("multihost-stack"),
                  port_base=free_port_base(8, avoid={multihost.port_base}),
                  targets_dir=multihost.state_dir / "targets")
    try:
        stack.up()
        stack.wait_for_series('count(up{job="cephscope-exporter"} == 1) == 3', timeout=90)
        yield stack
    finally:
        stack.purge()


@pytest.fixture
def restore_shards(devcluster: DevCluster) -> Iterator[tuple[dict[int, int], list[dict[str, Any]]]]:
    """Whatever happens in the test, leave the shared cluster with its shard count."""
    before = shard_counts(devcluster)
    db_before = osd_db_entries(devcluster)
    yield before, db_before
    if osd_db_entries(devcluster) != db_before or shard_counts(devcluster) != before:
        with contextlib.suppress(Exception):
            devcluster.ceph("config", "rm", "osd", "osd_op_num_shards")
        for attempt in (1, 2):  # a start can race the old process's pid-file lock once
            try:
                devcluster.restart_osds(devcluster.osd_ids())
                break
            except Exception:
                if attempt == 2:
                    raise
                time.sleep(3)
        devcluster.wait_pgs_active_clean()
