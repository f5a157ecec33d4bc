"""deploy/cephadm: the exporter's custom-container service spec, checked by cephadm's own code
(Debian's python3-ceph-common, cephadm and ceph-mgr-cephadm, Ceph 16.2), and the Prometheus
template for mgr/cephadm checked by the mgr's template code and promtool."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import subprocess
import sys
import uuid
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from ceph.deployment.service_spec import CustomContainerSpec, ServiceSpec

from cephscope.exporter.main import build_parser

REPO = Path(__file__).resolve().parents[3]
SPEC = REPO / "deploy" / "cephadm" / "cephscope-exporter.yaml"
JOB_TEMPLATE = REPO / "deploy" / "cephadm" / "prometheus-cephscope-job.yml.j2"
# Debian's packages of the same Ceph release: the cephadm script a host runs, and the mgr
# module with its stock Prometheus template.
CEPHADM_SCRIPT = Path("/usr/sbin/cephadm")
MGR_CEPHADM = Path("/usr/share/ceph/mgr/cephadm")
STOCK_TEMPLATE = MGR_CEPHADM / "templates" / "services" / "prometheus" / "prometheus.yml.j2"
FSID = str(uuid.UUID(int=0x5EED_CAFE))
HOST = "host1"


def spec_text(fsid: str = FSID) -> str:
    return SPEC.read_text().replace("@FSID@", fsid)


def load_spec(text: str) -> ServiceSpec:
    """What `ceph orch apply -i` does with the file: ServiceSpec.from_json, then validate."""
    spec = ServiceSpec.from_json(yaml.safe_load(text))
    spec.validate()
    return spec


def _load_source(name: str, path: Path) -> ModuleType:
    loader = importlib.machinery.SourceFileLoader(name, str(path))
    module_spec = importlib.util.spec_from_loader(name, loader)
    assert module_spec is not None
    module = importlib.util.module_from_spec(module_spec)
    loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def cephadm() -> ModuleType:
    assert CEPHADM_SCRIPT.exists(), "cephadm missing: deploy/install.sh installs it"
    return _load_source("cephadm_script", CEPHADM_SCRIPT)


def podman_run_line(cephadm: ModuleType, spec: CustomContainerSpec) -> list[str]:
    """The `podman run` line cephadm's deploy builds for one daemon of ``spec``, from the
    arguments mgr/cephadm passes it (serve.py: `--config-json` from the spec's config_json(),
    `--tcp-ports`, one `--extra-entrypoint-args=` per word). Nothing is run."""
    argv = ["--image", spec.image, "deploy", "--fsid", FSID,
            "--name", f"container.{spec.service_id}.{HOST}",
            "--config-json", json.dumps(spec.config_json()),
            "--tcp-ports", " ".join(map(str, spec.ports))]
    argv += [f"--extra-entrypoint-args={word}" for arg in spec.extra_entrypoint_args or []
             for word in arg.split(" ") if word]
    ctx = cephadm.cephadm_init_ctx(argv)
    engine = cephadm.Podman.__new__(cephadm.Podman)
    engine.path, engine._version = "/usr/bin/podman", (4, 3, 1)  # Debian 12's podman
    ctx.container_engine = engine
    container = cephadm.get_deployment_container(ctx, FSID, "container", f"{spec.service_id}.{HOST}")
    return container.run_cmd()


def test_spec_is_a_custom_container_spec_cephadm_accepts() -> None:
    spec = load_spec(spec_text())
    assert isinstance(spec, CustomContainerSpec)
    assert spec.service_name() == "container.cephscope-exporter"
    assert spec.placement.host_pattern == "*"
    assert (spec.uid, spec.gid) == (167, 167)
    assert spec.ports == [9967]
    # the round trip `ceph orch ls --export` makes
    again = ServiceSpec.from_json(spec.to_json())
    assert again.config_json() == spec.config_json()
    assert again.extra_entrypoint_args == spec.extra_entrypoint_args


def test_cephadm_builds_the_documented_container(cephadm: ModuleType) -> None:
    spec = load_spec(spec_text())
    assert isinstance(spec, CustomContainerSpec)
    run = podman_run_line(cephadm, spec)
    image_at = run.index(spec.image)
    runtime, entrypoint_args = run[:image_at], run[image_at + 1:]
    # cephadm gives a custom container neither host networking nor the host's pids by itself
    assert {"--net=host", "--pid=host"} <= set(runtime)
    mounts = [runtime[i + 1] for i, a in enumerate(runtime) if a == "--mount"]
    assert mounts == [
        f"type=bind,source=/var/run/ceph/{FSID},destination=/var/run/ceph,ro=true",
        "type=bind,source=/etc/ceph,destination=/etc/ceph,ro=true",
        "type=bind,source=/,destination=/host,ro=true,bind-propagation=rslave",
    ]
    assert "--entrypoint" not in runtime and "--user" not in runtime  # the image's, 167:167
    assert "--privileged" not in runtime
    # the exporter accepts what cephadm passes it, and every path it reads is mounted
    flags = build_parser().parse_args(entrypoint_args)
    assert flags.web_listen_address == ":9967"  # the host's addresses: Prometheus runs elsewhere
    destinations = [Path(dict(o.split("=", 1) for o in m.split(","))["destination"]) for m in mounts]
    for path in (flags.ceph_asok_dir, flags.ceph_conf, flags.ceph_keyring, flags.path_rootfs,
                 flags.path_sysfs):
        assert any(Path(path).is_relative_to(d) for d in destinations), path
    assert flags.ceph_asok_dir == "/var/run/ceph" and flags.path_sysfs == "/host/sys"


@pytest.mark.parametrize("change", [
    pytest.param(lambda d: d["spec"].update(bogus=1), id="unknown-field"),
    pytest.param(lambda d: d["spec"].pop("image"), id="no-image"),
    pytest.param(lambda d: d.update(placement={"count": "all"}), id="count-not-a-number"),
    pytest.param(lambda d: d.update(service_type="containers"), id="unknown-service-type"),
])
def test_cephadm_refuses_a_broken_spec(change: Any) -> None:
    data = yaml.safe_load(spec_text())
    change(data)
    # cephadm raises SpecValidationError, ServiceSpecValidationError or a bare AssertionError
    with pytest.raises(Exception) as refused:
        load_spec(yaml.safe_dump(data))
    assert refused.type.__module__.startswith("ceph.") or refused.type is AssertionError


@pytest.fixture(scope="module")
def template_mgr() -> type:
    """mgr/cephadm's TemplateMgr, loaded without the mgr (its module needs the C bindings)."""
    assert STOCK_TEMPLATE.exists(), "ceph-mgr-cephadm missing: deploy/install.sh installs it"
    if "cephadm" not in sys.modules:
        package = importlib.util.spec_from_file_location(
            "cephadm", MGR_CEPHADM / "__init__.py", submodule_search_locations=[str(MGR_CEPHADM)])
        assert package is not None
        sys.modules["cephadm"] = importlib.util.module_from_spec(package)  # not executed
    return _load_source("cephadm.template", MGR_CEPHADM / "template.py").TemplateMgr


class _Mgr:
    """The key-value store `ceph config-key set mgr/cephadm/<name> -i FILE` writes to."""

    def __init__(self, store: dict[str, str]) -> None:
        self.store = store

    def get_store(self, key: str, default: str | None = None) -> str | None:
        return self.store.get(key, default)


CONTEXT = {  # PrometheusService.generate_config's context: two hosts, IPv4 and IPv6
    "alertmgr_targets": ["'10.0.0.1:9093'"],
    "mgr_scrape_list": ["10.0.0.1:9283"],
    "haproxy_targets": [],
    "nodes": [{"hostname": "host1", "url": "10.0.0.1:9100"},
              {"hostname": "host2", "url": "[fd00::2]:9100"}],
}


def render(template_mgr: type, custom: str | None, tmp_path: Path) -> Path:
    store = {"services/prometheus/prometheus.yml": custom} if custom else {}
    text = template_mgr(_Mgr(store)).render("services/prometheus/prometheus.yml.j2", CONTEXT)
    out = tmp_path / "prometheus.yml"
    out.write_text(text)
    return out


def promtool_check(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["promtool", "check", "config", str(path)],
                          capture_output=True, text=True, timeout=60)


def test_custom_prometheus_template_adds_the_exporter_job(template_mgr: type, tmp_path: Path) -> None:
    # What docs/deploy.md has the user store: the stock template with the job appended.
    custom = STOCK_TEMPLATE.read_text() + JOB_TEMPLATE.read_text()
    rendered = render(template_mgr, custom, tmp_path)
    proc = promtool_check(rendered)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    config = yaml.safe_load(rendered.read_text())
    jobs = {j["job_name"]: j for j in config["scrape_configs"]}
    # the stock jobs are all still there
    stock = yaml.safe_load(render(template_mgr, None, tmp_path).read_text())
    assert {j["job_name"] for j in stock["scrape_configs"]} | {"cephscope-exporter"} == set(jobs)
    # the name the project's alert rules select on
    assert "cephscope-exporter" in (REPO / "alerts" / "cephscope-alerts.rules.yml").read_text()
    targets = {c["labels"]["instance"]: c["targets"] for c in jobs["cephscope-exporter"]["static_configs"]}
    assert targets == {"host1": ["10.0.0.1:9967"], "host2": ["[fd00::2]:9967"]}


def test_promtool_refuses_a_broken_template(template_mgr: type, tmp_path: Path) -> None:
    job = JOB_TEMPLATE.read_text().replace("static_configs:", "static_config:")
    proc = promtool_check(render(template_mgr, STOCK_TEMPLATE.read_text() + job, tmp_path))
    assert proc.returncode != 0 and "static_config" in proc.stdout + proc.stderr


def test_a_template_context_without_nodes_is_an_error_not_a_missing_job(template_mgr: type) -> None:
    # A release whose template context has no `nodes` must fail loudly, not drop the job: the
    # mgr's engine (StrictUndefined) on the appended job alone.
    engine = template_mgr(_Mgr({})).engine
    with pytest.raises(Exception, match="'nodes' is undefined"):
        engine.render_plain(JOB_TEMPLATE.read_text(), {k: v for k, v in CONTEXT.items() if k != "nodes"})
    assert "cephscope-exporter" in engine.render_plain(JOB_TEMPLATE.read_text(), CONTEXT)
