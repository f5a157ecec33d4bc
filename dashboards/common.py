"""Shared pieces of the dashboards: datasource, variables, panel factories, JSON finishing.

Dashboards are built with grafana-foundation-sdk's typed builders (pinned to the Grafana 11.6
schema); `finish()` turns a builder into plain JSON and fills in what the SDK leaves to the
caller (stable panel ids, refIds, Prometheus annotation fields the SDK has no setter for).
"""

from __future__ import annotations

import json
import string
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from grafana_foundation_sdk.builders import dashboard as gdash
from grafana_foundation_sdk.builders import heatmap as gheatmap
from grafana_foundation_sdk.builders import prometheus as gprom
from grafana_foundation_sdk.builders import statetimeline as gstatetimeline
from grafana_foundation_sdk.builders import table as gtable
from grafana_foundation_sdk.builders import timeseries as gtimeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.common import VisibilityMode
from grafana_foundation_sdk.models.dashboard import (
    DashboardLinkType,
    DataSourceRef,
    DataTransformerConfig,
    VariableOption,
    VariableRefresh,
    VariableSort,
)
from grafana_foundation_sdk.models.prometheus import PromQueryFormat

from cephscope.dashboards.config import MixinConfig

# Every panel, variable and annotation query goes through the `$datasource` variable.
DATASOURCE_REF = DataSourceRef(type_val="prometheus", uid="${datasource}")
SCHEMA_TAG = "cephscope"


@dataclass(frozen=True)
class Query:
    """One PromQL target of a panel."""

    expr: str
    legend: str = ""
    instant: bool = False
    table: bool = False
    heatmap: bool = False


def sel(*matchers: str) -> str:
    """Join label matchers into a `{...}` selector body, skipping empty ones."""
    return "{" + ", ".join(m for m in matchers if m) + "}"


# Selectors of the template variables, used by every OSD-side query.
OSD_SEL = 'job=~"$job", instance=~"$instance", ceph_daemon=~"$ceph_daemon"'
# ... by the CephFS and RGW panels: MDSs by ceph_daemon, gateways by ceph-exporter's instance_id.
MDS_SEL = 'job=~"$job", instance=~"$instance", ceph_daemon=~"$mds"'
RGW_SEL = 'job=~"$job", instance=~"$instance", instance_id=~"$rgw"'
RUN_SEL = 'run=~"$run"'


def _target(query: Query) -> gprom.Dataquery:
    target = gprom.Dataquery().expr(query.expr).datasource(DATASOURCE_REF)
    if query.legend:
        target = target.legend_format(query.legend)
    target = target.instant() if query.instant else target.range()
    if query.table:
        target = target.format(PromQueryFormat.TABLE)
    if query.heatmap:
        target = target.format(PromQueryFormat.HEATMAP)
    return target


def heatmap(
    title: str,
    query: Query,
    unit: str,
    description: str = "",
    width: int = 12,
    height: int = 8,
    repeat: str | None = None,
) -> gheatmap.Panel:
    """Heatmap of a Prometheus histogram's buckets (the query returns one series per `le`)."""
    panel = (
        gheatmap.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE_REF)
        .span(width)
        .height(height)
        .calculate(False)
        .y_axis(gheatmap.YAxisConfig().unit(unit))
        .with_target(_target(Query(query.expr, query.legend or "{{le}}", heatmap=True)))
    )
    if repeat:
        panel = panel.repeat(repeat).repeat_direction("h").max_per_row(4)
    return panel


def dashboard_links() -> list[gdash.DashboardLink]:
    """A menu of every cephscope dashboard, carrying the variables ($run, ...) and time range."""
    return [
        gdash.DashboardLink("cephscope dashboards")
        .type(DashboardLinkType.DASHBOARDS)
        .tags([SCHEMA_TAG])
        .as_dropdown(True)
        .include_vars(True)
        .keep_time(True)
        .tooltip("")
        .icon("external link")
        .url("")
        .target_blank(False)
    ]


def timeseries(
    title: str,
    queries: Sequence[Query],
    unit: str,
    description: str = "",
    width: int = 12,
    height: int = 8,
    stack: bool = False,
) -> gtimeseries.Panel:
    panel = (
        gtimeseries.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE_REF)
        .unit(unit)
        .span(width)
        .height(height)
        .line_width(1)
        .fill_opacity(10 if stack else 0)
    )
    for query in queries:
        panel = panel.with_target(_target(query))
    return panel


def state_timeline(
    title: str,
    queries: Sequence[Query],
    description: str = "",
    width: int = 24,
    height: int = 6,
) -> gstatetimeline.Panel:
    """One lane per series: when each was present (a 0/1 gauge such as a run phase)."""
    panel = (
        gstatetimeline.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE_REF)
        .span(width)
        .height(height)
        .show_value(VisibilityMode.NEVER)
        .merge_values(True)
        .fill_opacity(80)
    )
    for query in queries:
        panel = panel.with_target(_target(query))
    return panel


def table(
    title: str,
    queries: Sequence[Query],
    description: str = "",
    width: int = 24,
    height: int = 8,
    unit: str = "",
    hide_columns: Iterable[str] = ("Time", "__name__", "job", "instance"),
) -> gtable.Panel:
    """Instant table panel; several queries are merged on their common labels."""
    panel = (
        gtable.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE_REF)
        .span(width)
        .height(height)
    )
    if unit:
        panel = panel.unit(unit)
    for query in queries:
        panel = panel.with_target(_target(Query(query.expr, query.legend, True, True)))
    if len(queries) > 1:
        panel = panel.with_transformation(DataTransformerConfig(id_val="merge", options={}))
    exclude = {name: True for name in hide_columns}
    panel = panel.with_transformation(
        DataTransformerConfig(id_val="organize", options={"excludeByName": exclude})
    )
    return panel


def datasource_variable(cfg: MixinConfig) -> gdash.DatasourceVariable:
    return (
        gdash.DatasourceVariable("datasource")
        .label("Data source")
        .type("prometheus")
        .current(VariableOption(selected=True, text="Prometheus", value=cfg.datasource_uid))
    )


def query_variable(
    name: str,
    label: str,
    query: str,
    multi: bool = True,
    include_all: bool = True,
) -> gdash.QueryVariable:
    """A `label_values(...)` variable; 'All' is the regex `.*` so empty labels still match."""
    variable = (
        gdash.QueryVariable(name)
        .label(label)
        .datasource(DATASOURCE_REF)
        .query({"query": query, "refId": f"var-{name}", "qryType": 1})
        .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(VariableSort.ALPHABETICAL_ASC)
        .multi(multi)
        .include_all(include_all)
    )
    if include_all:
        variable = variable.all_value(".*")
    return variable


def exporter_variables(cfg: MixinConfig) -> list[Any]:
    return [
        datasource_variable(cfg),
        query_variable("job", "Exporter job", "label_values(cephscope_daemon_up, job)"),
        query_variable(
            "instance", "Exporter instance", 'label_values(cephscope_daemon_up{job=~"$job"}, instance)'
        ),
        query_variable(
            "ceph_daemon",
            "OSD",
            'label_values(cephscope_daemon_up{job=~"$job", instance=~"$instance", '
            'ceph_daemon=~"osd.*"}, ceph_daemon)',
        ),
    ]


def service_variables() -> list[Any]:
    """$mds (MDS daemons) and $rgw (gateways' instance_id), after exporter_variables."""
    return [
        query_variable(
            "mds", "MDS",
            'label_values(cephscope_daemon_up{job=~"$job", instance=~"$instance", '
            'ceph_daemon=~"mds.*"}, ceph_daemon)',
        ),
        query_variable(
            "rgw", "RGW instance",
            'label_values(cephscope_rgw_instance_info{job=~"$job", instance=~"$instance"}, '
            "instance_id)",
        ),
    ]


def run_variable(multi: bool = True) -> gdash.QueryVariable:
    # The newest run sorts last (run ids start with a UTC timestamp); single-run dashboards
    # let the user pick it.
    return query_variable(
        "run", "Sweep run", "label_values(cephscope_step_info, run)", multi=multi, include_all=multi
    )


def step_annotations(cfg: MixinConfig) -> list[gdash.AnnotationQuery]:
    """Step regions: from Prometheus (`cephscope_step_info`) and from Grafana's own store."""
    grafana_ref = DataSourceRef(type_val="grafana", uid="-- Grafana --")
    return [
        gdash.AnnotationQuery()
        .name("Sweep steps (Prometheus)")
        .datasource(DATASOURCE_REF)
        .enable(True)
        .icon_color("rgba(0, 211, 255, 0.6)")
        .expr(f"cephscope_step_info{sel(RUN_SEL)}"),
        gdash.AnnotationQuery()
        .name("Sweep steps (runner)")
        .datasource(grafana_ref)
        .enable(True)
        .icon_color("rgba(255, 152, 48, 0.6)")
        .target(
            gdash.AnnotationTarget()
            .limit(500)
            .match_any(False)
            .tags([cfg.runner_annotation_tag])
            .type("tags")
        ),
    ]


def to_json(dashboard: gdash.Dashboard) -> dict[str, Any]:
    return json.loads(json.dumps(dashboard.build(), cls=JSONEncoder))


def finish(dashboard: gdash.Dashboard) -> dict[str, Any]:
    """Plain JSON with stable panel ids (position order) and refIds A, B, ..."""
    data = to_json(dashboard)
    for panel_id, panel in enumerate(iter_panels(data), start=1):
        panel["id"] = panel_id
        for index, target in enumerate(panel.get("targets", [])):
            target["refId"] = string.ascii_uppercase[index]
    for annotation in data.get("annotations", {}).get("list", []):
        if annotation.get("datasource", {}).get("type") == "prometheus":
            # Fields of Grafana's Prometheus annotation editor the SDK model lacks: one region
            # per contiguous presence of the series, titled and tagged by its labels.
            annotation.update(
                {
                    "step": "5s",
                    "titleFormat": "{{benchmark}} {{mode}} step {{step}} (iteration {{iteration}})",
                    "tagKeys": "run,benchmark,mode",
                    "textFormat": "",
                    "useValueForTime": False,
                }
            )
    data.setdefault("annotations", {}).setdefault("list", []).insert(0, _builtin_annotation())
    return data


def _builtin_annotation() -> dict[str, Any]:
    return {
        "builtIn": 1,
        "datasource": {"type": "grafana", "uid": "-- Grafana --"},
        "enable": True,
        "hide": True,
        "iconColor": "rgba(0, 211, 255, 1)",
        "name": "Annotations & Alerts",
        "type": "dashboard",
    }


def iter_panels(data: dict[str, Any]) -> list[dict[str, Any]]:
    """All panels, including those nested in collapsed rows, in position order."""
    panels: list[dict[str, Any]] = []
    for panel in data.get("panels", []):
        panels.append(panel)
        panels.extend(panel.get("panels", []))
    return panels
