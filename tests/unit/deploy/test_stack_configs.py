"""The configs the local stack writes and the ones docker-compose.yml mounts pass
promtool / amtool, and point where they should."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cephscope.deploy.stack import ALERTS_DIR, EXPORTER_JOB, NODE_JOB, RUNNER_JOB, Stack

REPO = Path(__file__).resolve().parents[3]


def run_tool(*argv: str) -> subprocess.CompletedProcess[str]:
    assert shutil.which(argv[0]), f"{argv[0]} missing (prometheus / prometheus-alertmanager package)"
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=60)


def test_local_stack_prometheus_config_passes_promtool(tmp_path: Path) -> None:
    stack = Stack(tmp_path / "s", port_base=23000, asok_dir=tmp_path)
    config = stack.prometheus_config()
    path = tmp_path / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    proc = run_tool("promtool", "check", "config", str(path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # The rule files of alerts/ are loaded: promtool reports each one it found.
    rule_files = sorted(p.name for p in ALERTS_DIR.glob("*.rules.yml"))
    assert rule_files
    for name in rule_files:
        assert name in proc.stdout
    targets = {j["job_name"]: j["static_configs"][0]["targets"][0] for j in config["scrape_configs"]}
    assert targets[NODE_JOB] == "127.0.0.1:23003"
    assert targets[EXPORTER_JOB] == "127.0.0.1:23004"
    assert targets[RUNNER_JOB] == "127.0.0.1:23005"
    assert all(t.startswith("127.0.0.1:") for t in targets.values())


def test_local_stack_alertmanager_config_points_webhook_at_the_given_url(tmp_path: Path) -> None:
    stack = Stack(tmp_path / "s", port_base=23000, webhook_url="http://127.0.0.1:1234/hook")
    config = stack.alertmanager_config()
    hooks = [r for r in config["receivers"] if r["name"] == "webhook"]
    assert hooks and hooks[0]["webhook_configs"][0]["url"] == "http://127.0.0.1:1234/hook"
    path = tmp_path / "alertmanager.yml"
    path.write_text(yaml.safe_dump(config))
    proc = run_tool("amtool", "check-config", str(path))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_node_exporter_keeps_loop_disks_and_lo() -> None:
    stack = Stack(Path("/nonexistent"), port_base=23000)
    node = next(c for c in stack._components() if c.name == "node_exporter")
    argv = stack._argv(node)
    assert "--no-collector.systemd" in argv
    exclude = next(a for a in argv if a.startswith("--collector.diskstats.device-exclude="))
    assert "loop" not in exclude
    assert "--collector.netdev.device-exclude=^$" in argv


COMPOSE_CONFIG = Path(sys.prefix) / "bin" / "compose-config"


def compose_config(path: Path) -> subprocess.CompletedProcess[str]:
    """`docker compose config` of ``path`` by compose-go (built by deploy/install.sh)."""
    assert COMPOSE_CONFIG.exists(), f"{COMPOSE_CONFIG} missing: deploy/install.sh builds it (make setup)"
    # A clean environment: COMPOSE_* variables of the caller must not change the result.
    return subprocess.run([str(COMPOSE_CONFIG), str(path)], capture_output=True, text=True,
                          timeout=60, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})


def compose_mounts(service: dict) -> dict[str, Path]:
    """container path -> host path of the service's bind mounts from the repository."""
    return {v["target"]: Path(v["source"]) for v in service.get("volumes", [])
            if v["type"] == "bind" and Path(v["source"]).is_relative_to(REPO)}


def test_compose_config_rejects_what_the_compose_spec_rejects(tmp_path: Path) -> None:
    text = (REPO / "docker-compose.yml").read_text()
    bad = tmp_path / "docker-compose.yml"
    bad.write_text(text.replace("    network_mode: host\n", "    network_mode: host\n    bogus_key: 1\n", 1))
    proc = compose_config(bad)
    assert proc.returncode != 0 and "bogus_key" in proc.stderr, proc.stderr
    bad.write_text(text.replace("restart: unless-stopped", "restart: [unless-stopped]", 1))
    proc = compose_config(bad)
    assert proc.returncode != 0 and "restart" in proc.stderr, proc.stderr


def test_docker_compose_is_valid_and_its_mounted_configs_pass(tmp_path: Path) -> None:
    proc = compose_config(REPO / "docker-compose.yml")
    assert proc.returncode == 0, proc.stderr
    compose = yaml.safe_load(proc.stdout)
    assert compose["name"] == "cephscope"  # the top-level key docker-compose 1.x rejects
    services = compose["services"]
    assert set(services) == {"prometheus", "alertmanager", "grafana", "node-exporter", "cephscope-exporter"}
    for name, service in services.items():
        assert service.get("network_mode") == "host", name
        for mount in compose_mounts(service).values():
            assert mount.exists(), f"{name} mounts {mount}, which does not exist"
    exporter = services["cephscope-exporter"]
    assert {"type": "bind", "source": "/var/run/ceph", "target": "/var/run/ceph",
            "read_only": True} in [{k: v for k, v in m.items() if k != "bind"}
                                   for m in exporter["volumes"]]
    assert exporter["build"]["context"] == str(REPO)
    assert (REPO / exporter["build"]["dockerfile"]).exists()
    # Everything listens on 127.0.0.1 only.
    for name in ("prometheus", "alertmanager", "node-exporter", "cephscope-exporter"):
        listen = [a for a in services[name]["command"] if a.startswith("--web.listen-address=")]
        assert listen and listen[0].split("=", 1)[1].startswith("127.0.0.1:"), name
    assert services["grafana"]["environment"]["GF_SERVER_HTTP_ADDR"] == "127.0.0.1"

    # Prometheus's config with the container paths mapped back to the repo.
    mounts = compose_mounts(services["prometheus"])
    text = mounts["/etc/prometheus/prometheus.yml"].read_text()
    text = text.replace("/etc/prometheus/alerts", str(mounts["/etc/prometheus/alerts"]))
    prom = tmp_path / "prometheus.yml"
    prom.write_text(text)
    proc = run_tool("promtool", "check", "config", str(prom))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout and "rule files found" in proc.stdout

    am = compose_mounts(services["alertmanager"])["/etc/alertmanager/alertmanager.yml"]
    proc = run_tool("amtool", "check-config", str(am))
    assert proc.returncode == 0, proc.stdout + proc.stderr

    # Grafana's provisioning: a Prometheus datasource on the compose Prometheus, a file provider
    # reading the mounted dashboards dir.
    grafana = compose_mounts(services["grafana"])
    provisioning = grafana["/etc/grafana/provisioning"]
    datasources = [yaml.safe_load(p.read_text()) for p in (provisioning / "datasources").glob("*.y*ml")]
    prom_sources = [d for f in datasources for d in f["datasources"] if d["type"] == "prometheus"]
    assert prom_sources and prom_sources[0]["url"] == "http://127.0.0.1:9090"
    providers = [yaml.safe_load(p.read_text()) for p in (provisioning / "dashboards").glob("*.y*ml")]
    paths = [p["options"]["path"] for f in providers for p in f["providers"]]
    assert "/var/lib/grafana/dashboards/cephscope" in paths
    assert list(grafana["/var/lib/grafana/dashboards/cephscope"].glob("*.json"))


def test_exporter_image_and_compose_service_run_as_the_ceph_user_not_root() -> None:
    # Admin sockets belong to the ceph user (uid 167 in Ceph's images); root is never needed.
    users = [line.split()[1] for line in (REPO / "Dockerfile").read_text().splitlines()
             if line.startswith("USER ")]
    assert users and users[-1] == "167:167", users
    proc = compose_config(REPO / "docker-compose.yml")
    assert proc.returncode == 0, proc.stderr
    exporter = yaml.safe_load(proc.stdout)["services"]["cephscope-exporter"]
    assert exporter["user"] == "167:167"


def test_prometheus_3_stack_stores_the_exporters_histograms_native(tmp_path: Path) -> None:
    """Prometheus 3's stack converts the exporter job's classic histograms to native ones with
    custom buckets, and turns on the feature 3.5 needs to keep them at all; promtool 3.5
    accepts the config. Prometheus 2 stays classic and refuses native."""
    from cephscope.deploy.stack import NATIVE_HISTOGRAMS_FEATURE, StackError
    from tests.unit.prometheus3_tools import promtool3

    targets = tmp_path / "targets"
    targets.mkdir()
    (targets / "exporter.json").write_text('[{"targets": ["10.0.0.1:9967"]}]')
    stack = Stack(tmp_path / "s", port_base=23000, targets_dir=targets, prometheus_release="3")
    assert stack.native_histograms
    config = stack.prometheus_config()
    jobs = {j["job_name"]: j for j in config["scrape_configs"]}
    assert jobs[EXPORTER_JOB]["convert_classic_histograms_to_nhcb"] is True
    # only the exporter's histograms: Prometheus' own and node_exporter's stay as they are
    assert [n for n, j in jobs.items() if "convert_classic_histograms_to_nhcb" in j] == [EXPORTER_JOB]
    prometheus = next(c for c in stack._components() if c.name == "prometheus")
    assert NATIVE_HISTOGRAMS_FEATURE in stack._argv(prometheus)
    path = tmp_path / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    proc = promtool3("check", "config", str(path), binds=(tmp_path,))
    assert proc.returncode == 0, proc.stdout + proc.stderr

    classic3 = Stack(tmp_path / "c", port_base=23000, asok_dir=tmp_path, prometheus_release="3",
                     native_histograms=False)
    assert "convert_classic_histograms_to_nhcb" not in str(classic3.prometheus_config())
    classic2 = Stack(tmp_path / "two", port_base=23000, asok_dir=tmp_path)
    assert not classic2.native_histograms
    assert NATIVE_HISTOGRAMS_FEATURE not in classic2._argv(prometheus)
    with pytest.raises(StackError, match="native histograms need --prometheus-release 3"):
        Stack(tmp_path / "bad", port_base=23000, native_histograms=True)
