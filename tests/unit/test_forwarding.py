"""Past one Prometheus (cephscope/forwarding.py): an edge forwards every series a dashboard, the
cookbook, the report or a central rule reads and nothing else; every rule runs in exactly one
place; the edge's and the central store's configs pass promtool."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from cephscope import forwarding
from cephscope.dashboards import rule_names
from cephscope.dashboards.queries import (
    annotation_queries,
    cookbook_queries,
    load_dashboards,
    panel_queries,
    variable_queries,
)
from cephscope.deploy.stack import ALERTS_DIR, EXPORTER_JOB, Stack, StackError
from cephscope.runner.system_metrics import counter_series, render_queries
from tests.unit.prometheus3_tools import promtool3

REPO = Path(__file__).resolve().parents[2]
PROMQL_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or",
                   "unless", "bool", "offset", "inf", "nan"}


def metric_names(expr: str) -> set[str]:
    """Metric names a PromQL expression reads: bare identifiers that are not functions,
    keywords or label lists; a `__name__=~"re"` matcher gives its regex's alternatives."""
    names = set()
    for regex in re.findall(r'__name__\s*=~?\s*"([^"]*)"', expr):
        stem, _sep, optional = regex.partition("(")
        names.add(stem)
        names |= {stem + alt for alt in optional.rstrip(")?").split("|") if alt}
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', expr)
    text = re.sub(r"\{[^{}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    for name in re.findall(r"(?<![\w:.$])([a-zA-Z_:][a-zA-Z0-9_:]*)(?![a-zA-Z0-9_:]|\s*\()", text):
        if name.lower() not in PROMQL_KEYWORDS:
            names.add(name)
    return names


def test_metric_names_of_a_query() -> None:
    assert metric_names('histogram_quantile(0.99, sum by (le, op) (rate(a_bucket{job="x"}[5m])) '
                        'or sum by (op) (rate(a{job=~"y|z"}[$__rate_interval])))') == {"a_bucket", "a"}
    assert metric_names('b * on(run) group_left(step) max by (run) (c:d:rate offset 5m) > bool 1') \
        == {"b", "c:d:rate"}
    assert metric_names('{__name__=~"h(_bucket)?", op="w"}') == {"h", "h_bucket"}


def read_by_the_central_store() -> dict[str, set[str]]:
    """Metric name -> where it is read: panels, annotations and variables of every dashboard,
    cookbook queries, the report's queries, central rules and alerts."""
    reads: dict[str, set[str]] = {}

    def note(where: str, expr: str) -> None:
        for name in metric_names(expr):
            reads.setdefault(name, set()).add(where)

    for dashboard in load_dashboards(REPO / "dashboards" / "json").values():
        for query in panel_queries(dashboard) + annotation_queries(dashboard):
            note(query.name, query.expr)
        for variable in variable_queries(dashboard):
            if variable.selector:
                note(f"{dashboard['uid']} ${variable.name}", variable.selector)
    for expr in cookbook_queries((REPO / "docs" / "promql-cookbook.md").read_text()):
        note("cookbook", expr)
    for name, expr in {**render_queries("20s"), **counter_series()}.items():
        note(f"report {name}", expr)
    for path in ALERTS_DIR.glob("*.rules.yml"):
        central = forwarding.rules_for(forwarding.CENTRAL, yaml.safe_load(path.read_text()))
        for group in central["groups"]:
            for rule in group["rules"]:
                note(f"{path.name} {rule.get('record') or rule.get('alert')}", rule["expr"])
    return reads


def test_every_series_the_central_store_reads_is_forwarded() -> None:
    reads = read_by_the_central_store()
    assert len(reads) > 50
    assert {"cephscope_osd_op_latency_seconds", "cephscope_osd_op_latency_seconds_bucket",
            "node_cpu_seconds_total", "cephscope_step_info", rule_names.OSD_OP_LATENCY_P99} <= set(reads)
    left_behind = {name: sorted(where)[:3] for name, where in reads.items()
                   if not forwarding.is_forwarded(name)}
    assert not left_behind, left_behind


def test_what_nothing_reads_stays_on_the_edge() -> None:
    for name in ("cephscope_osd_op_size_bytes_bucket", "cephscope_osd_op_size_bytes",
                 "ceph_osd_subop_w", "ceph_bluestore_kv_final_lat_sum", "node_filesystem_avail_bytes",
                 "node_uname_info", "cephscope_osd_thread_rss_bytes", "go_goroutines",
                 "ceph_osd_op_wip"):
        assert not forwarding.is_forwarded(name), name
    assert forwarding.is_forwarded("cephscope_step_client_ops_per_second")


def test_every_rule_runs_in_exactly_one_place() -> None:
    step_names = {v for k, v in vars(rule_names).items() if k.startswith("STEP_")}
    other_names = {v for k, v in vars(rule_names).items() if k.isupper() and k not in
                   {n for n in vars(rule_names) if n.startswith("STEP_")} and isinstance(v, str)}
    assert step_names and all(n.startswith(forwarding.CLUSTER_WIDE_RECORDING_PREFIX) for n in step_names)
    assert not any(n.startswith(forwarding.CLUSTER_WIDE_RECORDING_PREFIX) for n in other_names)
    total = edge = central = 0
    for path in ALERTS_DIR.glob("*.rules.yml"):
        document = yaml.safe_load(path.read_text())
        total += sum(len(g["rules"]) for g in document["groups"])
        shares = {role: forwarding.rules_for(role, document)
                  for role in (forwarding.EDGE, forwarding.CENTRAL)}
        edge_rules = [r for g in shares[forwarding.EDGE]["groups"] for r in g["rules"]]
        central_rules = [r for g in shares[forwarding.CENTRAL]["groups"] for r in g["rules"]]
        assert all("record" in r and not r["record"].startswith("cephscope_step:") for r in edge_rules)
        # what an edge records leaves it
        assert all(forwarding.is_forwarded(r["record"]) for r in edge_rules)
        edge, central = edge + len(edge_rules), central + len(central_rules)
    assert edge and central and edge + central == total
    with pytest.raises(ValueError, match="edge or central"):
        forwarding.rules_for("both", {"groups": []})


def test_an_edge_forwards_and_a_receiver_receives(tmp_path: Path) -> None:
    receiver = Stack(tmp_path / "central", port_base=23100, remote_write_receiver=True)
    edge = Stack(tmp_path / "edge", port_base=23000, asok_dir=tmp_path,
                 remote_write_url=f"{receiver.prometheus_url}/api/v1/write")
    assert [c.name for c in receiver._components()] == ["prometheus", "alertmanager"]
    prometheus = receiver._components()[0]
    assert "--web.enable-remote-write-receiver" in receiver._argv(prometheus)
    assert "--web.enable-remote-write-receiver" not in edge._argv(prometheus)
    central_config, edge_config = receiver.prometheus_config(), edge.prometheus_config()
    assert [j["job_name"] for j in central_config["scrape_configs"]] == ["prometheus"]
    assert EXPORTER_JOB in {j["job_name"] for j in edge_config["scrape_configs"]}
    (write,) = edge_config["remote_write"]
    assert write["url"] == "http://127.0.0.1:23100/api/v1/write"
    assert write["write_relabel_configs"][0]["action"] == "keep"
    # Prometheus 2 stores classic histograms: remote write 1.0, which every receiver speaks
    assert "send_native_histograms" not in write and "protobuf_message" not in write
    for stack, config in ((receiver, central_config), (edge, edge_config)):
        written = stack.write_rule_files()
        assert written and all(p.parent == tmp_path / stack.state_dir.name / "rules" for p in written)
        path = stack.state_dir / "prometheus.yml"
        path.write_text(yaml.safe_dump(config))
        proc = subprocess.run(["promtool", "check", "config", str(path)], capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert all(p.name in proc.stdout for p in written)
    alerts = yaml.safe_load((receiver.rules_dir / "cephscope-alerts.rules.yml").read_text())
    assert alerts["groups"][0]["rules"]
    assert not (edge.rules_dir / "cephscope-alerts.rules.yml").exists()


def test_a_native_histogram_edge_sends_them_and_promtool_3_accepts_it(tmp_path: Path) -> None:
    edge = Stack(tmp_path / "edge", port_base=23000, asok_dir=tmp_path, prometheus_release="3",
                 remote_write_url="http://127.0.0.1:23100/api/v1/write")
    (write,) = edge.prometheus_config()["remote_write"]
    # remote write 1.0 cannot carry custom bucket bounds: a receiver refuses the batch
    assert write["send_native_histograms"] is True
    assert write["protobuf_message"] == forwarding.REMOTE_WRITE_2
    receiver = Stack(tmp_path / "central", port_base=23100, prometheus_release="3",
                     remote_write_receiver=True)
    argv = receiver._argv(receiver._components()[0])
    for message in (forwarding.REMOTE_WRITE_1, forwarding.REMOTE_WRITE_2):
        assert f"--web.remote-write-receiver.accepted-protobuf-messages={message}" in argv
    edge.write_rule_files()
    path = edge.state_dir / "prometheus.yml"
    path.write_text(yaml.safe_dump(edge.prometheus_config()))
    proc = promtool3("check", "config", str(path), binds=(tmp_path,))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_stack_forwards_or_receives_and_forwards_to_a_url(tmp_path: Path) -> None:
    with pytest.raises(StackError, match="not both"):
        Stack(tmp_path, remote_write_url="http://127.0.0.1:1/api/v1/write",
              remote_write_receiver=True)
    for bad in ("127.0.0.1:9090", "ftp://host/write", "http://"):
        with pytest.raises(StackError, match="an http"):
            Stack(tmp_path, remote_write_url=bad)


def test_status_and_down_of_a_central_store_know_its_two_daemons(tmp_path: Path) -> None:
    """`cephscope stack status|down` build the stack from the state dir alone: the central
    store's role is saved with its port base."""
    central = Stack(tmp_path / "central", port_base=23100, remote_write_receiver=True)
    central.state_dir.mkdir()
    (central.state_dir / "stack.json").write_text(
        '{"port_base": 23100, "remote_write_receiver": true}\n')
    again = Stack(tmp_path / "central", port_base=18000)
    assert again.port_base == 23100 and again.remote_write_receiver
    assert [c.name for c in again._components()] == ["prometheus", "alertmanager"]
