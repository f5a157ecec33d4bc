"""deploy/rook: the exporter's DaemonSet, Service and ServiceMonitor, validated offline by
kubeconform (strict) against schemas deploy/install.sh generates from Kubernetes' OpenAPI spec
and prometheus-operator's CRD; and the paths they mount checked against the exporter's flags."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cephscope.deploy import k8s_schemas
from cephscope.exporter.main import build_parser

REPO = Path(__file__).resolve().parents[3]
ROOK = REPO / "deploy" / "rook"
KUBECONFORM = Path(sys.prefix) / "bin" / "kubeconform"
SCHEMAS = Path(sys.prefix) / "share" / "kubeconform-schemas"
EXPORTER_JOB = "cephscope-exporter"  # what the project's alert rules select on


def kubeconform(*paths: Path) -> subprocess.CompletedProcess[str]:
    """kubeconform -strict on ``paths`` with only the generated schemas (nothing fetched)."""
    assert KUBECONFORM.exists(), f"{KUBECONFORM} missing: deploy/install.sh builds it (make setup)"
    assert (SCHEMAS / ".sources").exists(), f"{SCHEMAS} missing: deploy/install.sh generates it"
    return subprocess.run(
        [str(KUBECONFORM), "-strict", "-summary", "-output", "json",
         "-schema-location", f"{SCHEMAS}/{{{{ .ResourceKind }}}}{{{{ .KindSuffix }}}}.json",
         *map(str, paths)],
        capture_output=True, text=True, timeout=120)


def manifests() -> dict[str, dict]:
    docs = [d for f in sorted(ROOK.glob("*.yaml")) for d in yaml.safe_load_all(f.read_text()) if d]
    return {d["kind"]: d for d in docs}


def test_rook_manifests_pass_kubeconform_strict() -> None:
    proc = kubeconform(ROOK)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads(proc.stdout)["summary"]
    # every resource validated against a schema: none skipped for want of one
    assert summary == {"valid": 3, "invalid": 0, "errors": 0, "skipped": 0}, summary


@pytest.mark.parametrize(("file", "old", "new", "complaint"), [
    ("daemonset.yaml", "hostPID: true", 'hostPID: "yes"', "want boolean"),
    ("daemonset.yaml", "      hostNetwork: true\n", "      hostNetwork: true\n      hostNetwerk: true\n",
     "'hostNetwerk' not allowed"),
    ("daemonset.yaml", "runAsUser: 167", "runAsUser: ceph", "want integer"),
    ("service.yaml", "  clusterIP: None\n", "  clusterIP: None\n  bogus: 1\n", "'bogus' not allowed"),
    ("servicemonitor.yaml", "interval: 15s", "interval: fifteen", "does not match pattern"),
    ("servicemonitor.yaml", "      path: /metrics\n", "      path: /metrics\n      scrapeEvery: 5s\n",
     "'scrapeEvery' not allowed"),
])
def test_kubeconform_refuses_a_broken_manifest(tmp_path: Path, file: str, old: str, new: str,
                                               complaint: str) -> None:
    text = (ROOK / file).read_text()
    assert old in text
    bad = tmp_path / file
    bad.write_text(text.replace(old, new, 1))
    proc = kubeconform(bad)
    assert proc.returncode != 0 and complaint in proc.stdout, proc.stdout + proc.stderr


def test_a_kind_without_a_generated_schema_is_an_error(tmp_path: Path) -> None:
    other = tmp_path / "configmap.yaml"
    other.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    proc = kubeconform(other)
    assert proc.returncode != 0 and "could not find schema" in proc.stdout


def test_daemonset_reads_the_socket_dir_rook_mounts_with_the_exporters_flags() -> None:
    docs = manifests()
    pod = docs["DaemonSet"]["spec"]["template"]["spec"]
    assert pod["hostNetwork"] is True and pod["hostPID"] is True
    assert pod["securityContext"]["runAsUser"] == 167  # Rook's ceph user, the sockets' owner
    (container,) = pod["containers"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: volumes[m["name"]] for m in container["volumeMounts"]}
    # Rook: hostPath <dataDirHostPath>/exporter (default /var/lib/rook) mounted at /run/ceph
    assert mounts["/run/ceph"]["hostPath"]["path"] == "/var/lib/rook/exporter"
    assert all(m.get("readOnly") for m in container["volumeMounts"])
    flags = build_parser().parse_args(container["args"])
    assert flags.ceph_asok_dir == "/run/ceph"
    for path in (flags.path_rootfs, flags.path_sysfs):
        assert any(Path(path).is_relative_to(m) for m in mounts if m != "/run/ceph"), path
    port = next(p for p in container["ports"] if p["name"] == "metrics")["containerPort"]
    assert flags.web_listen_address == f":{port}"


def test_service_monitor_scrapes_the_exporter_job() -> None:
    docs = manifests()
    service, monitor, daemonset = docs["Service"], docs["ServiceMonitor"], docs["DaemonSet"]
    pod_labels = daemonset["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["namespaceSelector"]["matchNames"] == [service["metadata"]["namespace"]]
    ports = {p["name"] for p in service["spec"]["ports"]}
    assert {e["port"] for e in monitor["spec"]["endpoints"]} <= ports
    # prometheus-operator's job label is the Service's name
    assert service["metadata"]["name"] == EXPORTER_JOB
    assert f'job="{EXPORTER_JOB}"' in (REPO / "alerts" / "cephscope-alerts.rules.yml").read_text()


SWAGGER = {
    "definitions": {
        "io.k8s.api.x.v1.Thing": {
            "type": "object",
            "x-kubernetes-group-version-kind": [{"group": "x.example", "version": "v1", "kind": "Thing"}],
            "properties": {"spec": {"$ref": "#/definitions/io.k8s.api.x.v1.Spec"}},
        },
        "io.k8s.api.x.v1.Spec": {
            "type": "object",
            "properties": {"port": {"$ref": "#/definitions/io.k8s.util.IntOrString"},
                           "labels": {"type": "object", "additionalProperties": {"type": "string"}}},
        },
        "io.k8s.util.IntOrString": {"type": "string", "format": "int-or-string"},
        "io.k8s.api.x.v1.Unrelated": {"type": "object", "properties": {"a": {"type": "string"}}},
    }
}


def test_schema_generator_is_strict_standalone_and_named_as_kubeconform_looks(tmp_path: Path) -> None:
    (path,) = k8s_schemas.write_schemas(SWAGGER, ["Thing"], tmp_path)
    assert path.name == "thing-x-v1.json"
    assert k8s_schemas.schema_name("Service", "", "v1") == "service-v1.json"
    schema = json.loads(path.read_text())
    definitions = schema["definitions"]
    assert set(definitions) == {"io.k8s.api.x.v1.Thing", "io.k8s.api.x.v1.Spec", "io.k8s.util.IntOrString"}
    assert definitions["io.k8s.api.x.v1.Spec"]["additionalProperties"] is False
    # a map keeps its own additionalProperties
    assert definitions["io.k8s.api.x.v1.Spec"]["properties"]["labels"]["additionalProperties"] == {
        "type": "string"}
    assert definitions["io.k8s.util.IntOrString"] == {"oneOf": [{"type": "string"}, {"type": "integer"}]}
    with pytest.raises(KeyError):
        k8s_schemas.write_schemas(SWAGGER, ["Nothing"], tmp_path)
