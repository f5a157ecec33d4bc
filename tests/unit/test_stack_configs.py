"""The configs the local stack writes and the ones docker-compose.yml mounts pass
promtool / amtool, and point where they should."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import yaml

from cephscope.deploy.stack import ALERTS_DIR, EXPORTER_JOB, NODE_JOB, RUNNER_JOB, Stack

REPO = Path(__file__).resolve().parents[2]


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


def compose_mounts(service: dict) -> dict[str, Path]:
    """container path -> host path (relative to the repo) of the service's bind mounts."""
    mounts = {}
    for volume in service.get("volumes", []):
        host, container = volume.split(":")[:2]
        if host.startswith("./"):
            mounts[container] = REPO / host[2:]
    return mounts


def test_docker_compose_parses_and_its_mounted_configs_pass(tmp_path: Path) -> None:
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    services = compose["services"]
    assert set(services) == {"prometheus", "alertmanager", "grafana", "node-exporter", "cephscope-exporter"}
    for name, service in services.items():
        assert service.get("network_mode") == "host", name
        for mount in compose_mounts(service).values():
            assert mount.exists(), f"{name} mounts {mount}, which does not exist"
    exporter = services["cephscope-exporter"]
    assert "/var/run/ceph:/var/run/ceph:ro" in exporter["volumes"]
    assert (REPO / exporter["build"] / "Dockerfile").exists()
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
