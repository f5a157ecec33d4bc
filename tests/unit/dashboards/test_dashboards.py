"""Dashboards: checked-in JSON in sync with the builder, and structural rules of every panel."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from cephscope.cli import main as cli_main
from cephscope.dashboards import build, definitions
from cephscope.dashboards.common import iter_panels
from cephscope.dashboards.config import DEFAULT_CONFIG
from cephscope.dashboards.queries import (
    load_dashboards,
    panel_queries,
    substitute,
    variable_queries,
)

REPO = Path(__file__).resolve().parents[3]
JSON_DIR = REPO / "dashboards" / "json"
EXPECTED_UIDS = {
    "cephscope-sweep-overview",
    "cephscope-osd-internals",
    "cephscope-devices-network",
    "cephscope-sweep-comparison",
}


@pytest.fixture(scope="module")
def dashboards() -> dict[str, dict[str, Any]]:
    return load_dashboards(JSON_DIR)


def test_checked_in_files_match_the_builder() -> None:
    files = build.generated_files(DEFAULT_CONFIG, JSON_DIR, REPO / "alerts")
    stale = build.stale_files(files)
    assert not stale, "stale generated files, run `cephscope dashboards --in-tree`:\n" + "\n".join(
        diff for _, diff in stale
    )


def test_check_flag_fails_on_a_stale_file_and_passes_after_rebuild(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dirs = ["--dashboards-dir", str(tmp_path / "json"), "--alerts-dir", str(tmp_path / "alerts")]
    assert cli_main(["dashboards", "--check", *dirs]) == 1  # nothing written yet
    assert cli_main(["dashboards", *dirs]) == 0
    assert cli_main(["dashboards", "--check", *dirs]) == 0
    target = tmp_path / "json" / "sweep-overview.json"
    data = json.loads(target.read_text())
    data["title"] = "edited by hand"
    target.write_text(json.dumps(data))
    capsys.readouterr()
    assert cli_main(["dashboards", "--check", *dirs]) == 1
    assert "sweep-overview.json" in capsys.readouterr().err


def test_writing_into_the_source_tree_needs_a_flag(capsys: pytest.CaptureFixture[str]) -> None:
    before = {p: p.stat().st_mtime_ns for p in JSON_DIR.glob("*.json")}
    assert cli_main(["dashboards"]) == 2
    assert "--in-tree" in capsys.readouterr().err
    assert {p: p.stat().st_mtime_ns for p in JSON_DIR.glob("*.json")} == before


def test_build_is_deterministic() -> None:
    first = definitions.all_dashboards(DEFAULT_CONFIG)
    second = definitions.all_dashboards(DEFAULT_CONFIG)
    assert json.dumps(first, sort_keys=True) == json.dumps(second, sort_keys=True)


def test_uids_are_stable_and_match_file_names(dashboards: dict[str, dict[str, Any]]) -> None:
    assert set(dashboards) == EXPECTED_UIDS
    for path in JSON_DIR.glob("*.json"):
        assert json.loads(path.read_text())["uid"] == f"cephscope-{path.stem}"


def test_every_panel_queries_through_the_datasource_variable(
    dashboards: dict[str, dict[str, Any]],
) -> None:
    for uid, dashboard in dashboards.items():
        panels = [p for p in iter_panels(dashboard) if p["type"] != "row"]
        assert panels, uid
        for panel in panels:
            where = f"{uid} / {panel['title']}"
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, where
            assert panel["targets"], f"{where}: no query"
            for target in panel["targets"]:
                assert target["datasource"]["uid"] == "${datasource}", where
                assert target["expr"].strip(), where
            ref_ids = [t["refId"] for t in panel["targets"]]
            assert len(set(ref_ids)) == len(ref_ids) and all(ref_ids), where


def test_panel_ids_unique_and_grid_inside_24_columns(dashboards: dict[str, dict[str, Any]]) -> None:
    for uid, dashboard in dashboards.items():
        ids = [p["id"] for p in iter_panels(dashboard)]
        assert len(ids) == len(set(ids)), uid
        for panel in iter_panels(dashboard):
            grid = panel["gridPos"]
            assert grid["x"] + grid["w"] <= 24, f"{uid} / {panel['title']}"


def test_template_variables(dashboards: dict[str, dict[str, Any]]) -> None:
    for uid, dashboard in dashboards.items():
        variables = {v["name"]: v for v in dashboard["templating"]["list"]}
        assert variables["datasource"]["type"] == "datasource"
        assert variables["datasource"]["query"] == "prometheus"
        assert variables["datasource"]["current"]["value"] == DEFAULT_CONFIG.datasource_uid
        assert "run" in variables, uid
        if uid != "cephscope-sweep-comparison":
            assert {"job", "instance", "ceph_daemon"} <= set(variables), uid
        # Every variable a query uses is defined (or is one of Grafana's built-ins).
        known = set(variables) | {"__rate_interval", "__range", "__interval"}
        for query in panel_queries(dashboard):
            used = set(re.findall(r"\$\{?(\w+)", query.expr))
            assert used <= known, f"{query.name}: undefined {used - known}"
        for variable in variable_queries(dashboard):
            # the exporter's series (a histogram's in either storage: figures.
            # histogram_selector), or node_exporter's for the per-host rows
            assert variable.selector is None or variable.selector.startswith(
                ("cephscope_", '{__name__=~"cephscope_', "node_cpu_seconds_total")), variable


def test_links_tags_heatmap_and_per_host_rows(dashboards: dict[str, dict[str, Any]]) -> None:
    for uid, dashboard in dashboards.items():
        assert {"cephscope", "ceph", "performance"} < set(dashboard["tags"]), uid
        (link,) = dashboard["links"]
        # every cephscope dashboard, carrying $run (and the other variables) and the time range
        assert link["type"] == "dashboards" and link["tags"] == ["cephscope"]
        assert link["includeVars"] and link["keepTime"]
    osd = dashboards["cephscope-osd-internals"]
    (heat,) = [p for p in iter_panels(osd) if p["type"] == "heatmap"]
    assert heat["repeat"] == "ceph_daemon"
    (target,) = heat["targets"]
    assert target["format"] == "heatmap" and target["legendFormat"] == "{{le}}"
    assert target["expr"].startswith("sum by (le) (increase(cephscope_osd_op_latency_seconds_bucket")
    assert 'op=~"$op"' in target["expr"]
    assert any("thread_group" in t["expr"] and p["title"].startswith("OSD CPU by thread group")
               for p in iter_panels(osd) for t in p.get("targets", []))
    overview = dashboards["cephscope-sweep-overview"]
    rows = [p for p in overview["panels"] if p["type"] == "row" and p.get("repeat") == "host"]
    assert len(rows) == 1 and rows[0]["title"] == "Host $host"
    cores = [p for p in iter_panels(overview) if p["title"] == "Busy per CPU core on $host"]
    assert cores and "sum by (instance, cpu)" in cores[0]["targets"][0]["expr"]


def test_rates_use_rate_interval(dashboards: dict[str, dict[str, Any]]) -> None:
    for dashboard in dashboards.values():
        for query in panel_queries(dashboard):
            for window in re.findall(r"\b(?:rate|increase|irate)\([^\[]*\[([^\]]+)\]", query.expr):
                assert window == "$__rate_interval", query.name


def test_expressions_have_balanced_brackets(dashboards: dict[str, dict[str, Any]]) -> None:
    pairs = {")": "(", "]": "[", "}": "{"}
    for dashboard in dashboards.values():
        for query in panel_queries(dashboard):
            stack: list[str] = []
            in_string = False
            for char in query.expr:
                if char == '"':
                    in_string = not in_string
                elif in_string:
                    continue
                elif char in "([{":
                    stack.append(char)
                elif char in pairs:
                    assert stack and stack.pop() == pairs[char], query.name
            assert not stack and not in_string, query.name


def test_step_regions_come_from_step_info_and_runner_annotations(
    dashboards: dict[str, dict[str, Any]],
) -> None:
    for uid, dashboard in dashboards.items():
        annotations = dashboard["annotations"]["list"]
        prom = [a for a in annotations if a["datasource"]["type"] == "prometheus"]
        assert [a["expr"] for a in prom] == ['cephscope_step_info{run=~"$run"}'], uid
        assert "{{step}}" in prom[0]["titleFormat"]
        grafana = [a for a in annotations if a.get("target", {}).get("type") == "tags"]
        assert grafana and grafana[0]["target"]["tags"] == [DEFAULT_CONFIG.runner_annotation_tag]


def test_sweep_comparison_joins_step_params(dashboards: dict[str, dict[str, Any]]) -> None:
    queries = panel_queries(dashboards["cephscope-sweep-comparison"])
    joins = [q for q in queries if "group_left" in q.expr and "cephscope_step_info" in q.expr]
    assert joins, "the comparison must join figures with cephscope_step_info"
    assert all(q.instant for q in joins)


def test_sweep_overview_has_the_required_views(dashboards: dict[str, dict[str, Any]]) -> None:
    exprs = " ".join(q.expr for q in panel_queries(dashboards["cephscope-sweep-overview"]))
    for needle in (
        "cephscope_client_ops_per_second",
        "cephscope_client_latency_seconds",
        "ceph_osd_op_w",
        "histogram_quantile(0.99",
        "histogram_quantile(0.5",
        "node_cpu_seconds_total",
        "cephscope_step_info",
    ):
        assert needle in exprs, needle


def test_substitute_replaces_every_form_and_rejects_unknown() -> None:
    expr = 'rate(x{job=~"$job", d=~"${ceph_daemon}"}[$__rate_interval])'
    values = {"job": ".*", "ceph_daemon": "osd.0", "__rate_interval": "1m"}
    assert substitute(expr, values) == 'rate(x{job=~".*", d=~"osd.0"}[1m])'
    with pytest.raises(KeyError, match="run"):
        substitute('x{run="$run"}', values)


def test_provisioning_matches_the_dashboards() -> None:
    import yaml

    provisioning = REPO / "dashboards" / "provisioning"
    datasources = yaml.safe_load((provisioning / "datasources" / "cephscope.yml").read_text())
    (prometheus,) = datasources["datasources"]
    assert prometheus["type"] == "prometheus"
    assert prometheus["uid"] == DEFAULT_CONFIG.datasource_uid
    providers = yaml.safe_load((provisioning / "dashboards" / "cephscope.yml").read_text())
    (provider,) = providers["providers"]
    assert provider["type"] == "file" and provider["options"]["path"].startswith("/")


class _SeriesAPI:
    """Answers the series API with the given series (what label_values() asks)."""

    def __init__(self, series: list[dict[str, str]]) -> None:
        self.series = series
        self.url = "http://fake"

    def get(self, endpoint: str, params: Any = ()) -> Any:
        assert endpoint == "series", endpoint
        return self.series


def test_variables_resolve_as_grafana_would_and_an_empty_one_only_when_allowed(
        dashboards: dict[str, dict[str, Any]]) -> None:
    from cephscope.dashboards.queries import NO_VALUE, resolve_variables

    overview = dashboards["cephscope-sweep-overview"]
    osds = [{"run": "r1", "job": "cephscope-exporter", "instance": "h1:9967",
             "ceph_daemon": f"osd.{i}", "host": "h1"} for i in range(3)]
    api = _SeriesAPI(osds)
    with pytest.raises(ValueError, match="has no values"):  # no MDS: its variable is empty
        resolve_variables(api, overview, "r1", 0.0, 1.0)  # type: ignore[arg-type]
    values = resolve_variables(api, overview, "r1", 0.0, 1.0, allow_empty=True)  # type: ignore[arg-type]
    assert values["run"] == "r1"
    empty = [name for name, value in values.items() if value == NO_VALUE]
    assert empty and all(not v.selector or "osd" not in v.selector
                         for v in variable_queries(overview) if v.name in empty)
