"""docker-compose.yml, up: podman-compose runs every service but Grafana (none can be had here)
with images made from Debian's packages under the names the file uses, the exporter pointed at
the dev cluster's sockets; every target is up, every rule group loaded, the exporter's series
in the compose Prometheus. Grafana's provisioning is validated by the unit tests."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from cephscope.deploy.compose_stack import ComposeProject, build_stand_ins, containers_conf
from cephscope.deploy.container import Podman
from cephscope.deploy.devcluster import DevCluster
from cephscope.deploy.procs import port_is_free
from cephscope.prometheus_api import PrometheusAPI

REPO = Path(__file__).resolve().parents[2]
PROMETHEUS = "http://127.0.0.1:9090"
# The compose file's fixed listen ports (prometheus, alertmanager, node_exporter, exporter).
PORTS = (9090, 9093, 9100, 9967)


def api(path: str, **params: str) -> Any:
    return PrometheusAPI(PROMETHEUS).get(path, params)


@pytest.fixture(scope="module")
def compose_up(devcluster: DevCluster) -> Iterator[ComposeProject]:
    busy = [p for p in PORTS if not port_is_free(p)]
    assert not busy, f"the compose file's ports {busy} are taken on 127.0.0.1: stop what holds them"
    podman = Podman.here()
    build_stand_ins(podman)
    with tempfile.TemporaryDirectory(prefix="cephscope-compose-") as tmp:
        project = ComposeProject(
            name=f"cephscope-test-{devcluster.port_base}",
            env={"CONTAINERS_CONF": str(containers_conf(podman, Path(tmp))),
                 "CEPHSCOPE_ASOK_DIR": str(devcluster.asok_dir),
                 "CEPHSCOPE_CEPH_CONF_DIR": str(devcluster.state_dir),
                 # the dev cluster's sockets are root's
                 "CEPH_UID": "0", "CEPH_GID": "0"})
        try:
            project.up()
            yield project
        finally:
            proc = project.down(podman)
            listed = podman.run("ps", "--all", "--filter", f"label=io.podman.compose.project={project.name}",
                                "--format", "{{.Names}}", timeout=60)
            assert proc.returncode == 0, (proc.stdout + proc.stderr).decode()[-2000:]
            assert not listed.stdout.decode().split(), listed.stdout.decode()
            networks = podman.run("network", "ls", "--format", "{{.Name}}", timeout=60).stdout.decode()
            assert f"{project.name}_default" not in networks.split()


def test_compose_stack_scrapes_every_target_and_loads_every_rule(devcluster: DevCluster,
                                                                compose_up: ComposeProject) -> None:
    expected_jobs = {"prometheus", "alertmanager", "cephscope-exporter", "node"}
    deadline = time.monotonic() + 90
    while True:
        try:
            targets = api("targets")["activeTargets"]
        except OSError:
            targets = []
        up = {t["labels"]["job"] for t in targets if t["health"] == "up"}
        if expected_jobs <= up or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert expected_jobs <= up, [(t["labels"]["job"], t["health"], t.get("lastError")) for t in targets]

    # Every rule group of every rule file the compose Prometheus mounts.
    rule_files = sorted((REPO / "alerts").glob("*.rules.yml"))
    groups = {g["name"] for f in rule_files for g in yaml.safe_load(f.read_text())["groups"]}
    loaded = {g["name"] for g in api("rules")["groups"]}
    assert groups == loaded, (groups ^ loaded)

    osds = {f"osd.{i}" for i in devcluster.osd_ids()}
    deadline = time.monotonic() + 60
    while True:
        result = api("query", query='cephscope_daemon_up{job="cephscope-exporter"} == 1')["result"]
        seen = {r["metric"]["ceph_daemon"] for r in result}
        if osds <= seen or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert osds <= seen, seen
    assert api("query", query='count(ceph_osd_op_w{job="cephscope-exporter"})')["result"]
