"""Alert and recording rules: promtool/amtool checks, test coverage of every alert, runbooks."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

from cephscope.dashboards import rule_names, rules
from cephscope.dashboards.config import DEFAULT_CONFIG

REPO = Path(__file__).resolve().parents[3]
ALERTS = REPO / "alerts"
RULE_FILES = sorted(ALERTS.glob("*.rules.yml"))
TEST_FILES = sorted((ALERTS / "tests").glob("*.test.yml"))


def _tool(name: str) -> str:
    path = shutil.which(name)
    # Installed by deploy/install.sh with Prometheus / Alertmanager: missing means a broken setup.
    assert path, f"{name} not found on PATH (run `make setup`)"
    return path


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=REPO)


def _alerts() -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for path in RULE_FILES:
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                if "alert" in rule:
                    assert rule["alert"] not in found, f"duplicate alert {rule['alert']}"
                    found[rule["alert"]] = rule
    return found


def test_promtool_check_rules() -> None:
    assert RULE_FILES
    result = _run([_tool("promtool"), "check", "rules", *map(str, RULE_FILES)])
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_test_rules() -> None:
    assert TEST_FILES
    result = _run([_tool("promtool"), "test", "rules", *map(str, TEST_FILES)])
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_test_detects_a_broken_threshold(tmp_path: Path) -> None:
    """The tests really exercise the rules: flipping a threshold makes them fail."""
    rules_dir = tmp_path / "alerts"
    (rules_dir / "tests").mkdir(parents=True)
    for path in RULE_FILES:
        text = path.read_text()
        if path.name == "cephscope-alerts.rules.yml":
            text = text.replace("cephscope_daemon_up == 0", "cephscope_daemon_up == 1")
        (rules_dir / path.name).write_text(text)
    for path in TEST_FILES:
        shutil.copy(path, rules_dir / "tests" / path.name)
    result = _run(
        [_tool("promtool"), "test", "rules", *map(str, sorted((rules_dir / "tests").iterdir()))]
    )
    assert result.returncode != 0
    assert "CephscopeDaemonDown" in result.stdout + result.stderr


def test_every_alert_has_firing_and_quiet_cases() -> None:
    firing: set[str] = set()
    quiet: set[str] = set()
    for path in TEST_FILES:
        for case in yaml.safe_load(path.read_text())["tests"]:
            for check in case.get("alert_rule_test", []):
                (firing if check.get("exp_alerts") else quiet).add(check["alertname"])
    alerts = set(_alerts())
    assert alerts >= set(rules.ALERT_NAMES)
    assert not alerts - firing, f"alerts without a firing test case: {sorted(alerts - firing)}"
    assert not alerts - quiet, f"alerts without a not-firing test case: {sorted(alerts - quiet)}"
    assert not (firing | quiet) - alerts, "test cases for alerts that do not exist"


def test_the_generated_rule_files_are_under_test() -> None:
    loaded = {
        (path.parent / name).resolve()
        for path in TEST_FILES
        for name in yaml.safe_load(path.read_text())["rule_files"]
    }
    assert {path.resolve() for path in RULE_FILES} <= loaded


def test_every_rule_file_is_generated_from_the_config() -> None:
    generated = rules.rule_files(DEFAULT_CONFIG)
    assert {path.name for path in RULE_FILES} == set(generated)
    for name, data in generated.items():
        assert yaml.safe_load((ALERTS / name).read_text()) == data, f"{name} is stale"


def _exprs(data: dict[str, Any]) -> str:
    return "\n".join(r["expr"] for g in data["groups"] for r in g["rules"])


def test_rule_windows_come_from_the_config() -> None:
    window = f"[{DEFAULT_CONFIG.rate_window}]"
    for name, data in rules.rule_files(DEFAULT_CONFIG).items():
        windows = set(re.findall(r"\[(\d+[smhd])\]", _exprs(data)))
        assert windows <= {DEFAULT_CONFIG.rate_window, DEFAULT_CONFIG.baseline_lookback}, name
    assert window in (ALERTS / "opqueue.rules.yml").read_text()
    assert window in (ALERTS / "osd_devices.rules.yml").read_text()
    other = type(DEFAULT_CONFIG)(rate_window="2m", node_job_selector='job="nodes"')
    for name in ("opqueue.rules.yml", "osd_devices.rules.yml"):
        text = _exprs(rules.rule_files(other)[name])
        assert "[2m]" in text and "[30s]" not in text, name
    assert 'job="nodes"' in _exprs(rules.rule_files(other)["osd_devices.rules.yml"])


def test_recorded_names_are_the_constants_the_dashboards_use() -> None:
    constants = {v for k, v in vars(rule_names).items() if k.isupper()}
    recorded = {r["record"] for data in rules.rule_files(DEFAULT_CONFIG).values()
                for g in data["groups"] for r in g["rules"] if "record" in r}
    assert recorded == constants
    dashboards = " ".join(p.read_text() for p in (REPO / "dashboards" / "json").glob("*.json"))
    used = set(re.findall(r"\b(?:ceph_daemon\w*|cephscope_step):\w+(?::\w+)?", dashboards))
    assert used and used <= recorded, sorted(used - recorded)
    # and the dashboards module names them through the constants, not by string literal
    source = (REPO / "dashboards" / "definitions.py").read_text()
    assert not [name for name in recorded if f'"{name}' in source or f"'{name}" in source]


def test_every_alert_has_severity_summary_description_and_runbook() -> None:
    docs = (REPO / "docs" / "alerts.md").read_text()
    anchors = {h.strip().lower() for h in re.findall(r"^## (\S+)\s*$", docs, re.MULTILINE)}
    for name, rule in _alerts().items():
        assert rule["labels"]["severity"] in {"critical", "warning", "info"}, name
        annotations = rule["annotations"]
        assert annotations["summary"].strip() and annotations["description"].strip(), name
        url, _, anchor = annotations["runbook_url"].partition("#")
        assert url == DEFAULT_CONFIG.runbook_base_url == "docs/alerts.md", name
        assert anchor in anchors, f"{name}: no section '## ...' for #{anchor} in docs/alerts.md"


def test_thresholds_come_from_the_config() -> None:
    generated = rules.alert_rules(DEFAULT_CONFIG)["groups"][0]["rules"]
    by_name = {r["alert"]: r for r in generated}
    assert f"> {DEFAULT_CONFIG.latency_regression_ratio}" in (
        by_name["CephscopeStepLatencyRegression"]["expr"]
    )
    assert by_name["CephscopeStepLatencyRegression"]["for"] == DEFAULT_CONFIG.latency_regression_for
    assert DEFAULT_CONFIG.exporter_job_selector in by_name["CephscopeExporterDown"]["expr"]
    changed = rules.alert_rules(type(DEFAULT_CONFIG)(latency_regression_ratio=2.5))
    expr = {r["alert"]: r for r in changed["groups"][0]["rules"]}[
        "CephscopeStepLatencyRegression"
    ]["expr"]
    assert "> 2.5" in expr
    elsewhere = type(DEFAULT_CONFIG)(runbook_base_url="https://example.org/runbooks/alerts.md")
    urls = {r["annotations"]["runbook_url"]
            for r in rules.alert_rules(elsewhere)["groups"][0]["rules"]}
    assert "https://example.org/runbooks/alerts.md#cephscopedaemondown" in urls


def test_amtool_check_config() -> None:
    result = _run([_tool("amtool"), "check-config", str(ALERTS / "alertmanager.yml")])
    assert result.returncode == 0, result.stdout + result.stderr


def test_alertmanager_groups_inhibits_and_has_webhook_receiver() -> None:
    config = yaml.safe_load((ALERTS / "alertmanager.yml").read_text())
    route = config["route"]
    assert set(route["group_by"]) == {"alertname", "run"}
    receivers = {r["name"]: r for r in config["receivers"]}
    assert route["receiver"] == "webhook"
    assert receivers["webhook"]["webhook_configs"][0]["url"].startswith("http://127.0.0.1:")
    alerts = set(_alerts())
    per_daemon = [
        rule for rule in config["inhibit_rules"] if rule.get("equal") == ["ceph_daemon"]
    ]
    assert per_daemon, "latency alerts of a down daemon must be inhibited"
    for rule in config["inhibit_rules"]:
        for matcher in rule["source_matchers"] + rule["target_matchers"]:
            name, op, value = re.match(r'(\w+)(=~|=)"(.*)"', matcher).groups()
            assert name == "alertname"
            names = set(value.split("|")) if op == "=~" else {value}
            assert names <= alerts, f"inhibit rule names unknown alerts: {names - alerts}"
    source = per_daemon[0]["source_matchers"][0]
    targets = per_daemon[0]["target_matchers"][0]
    assert "CephscopeDaemonDown" in source
    for name in rules.PER_DAEMON_LATENCY_ALERTS:
        assert name in targets
