"""Every PromQL query of the generated dashboards and of docs/promql-cookbook.md, for tests.

The live test runs each query, with Grafana's template variables substituted, against the real
Prometheus; the unit tests check their structure.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cephscope.dashboards.common import iter_panels
from cephscope.prometheus_api import PrometheusAPI

VARIABLE_RE = re.compile(r"\$(?:\{(\w+)(?::\w+)?\}|(\w+))")
LABEL_VALUES_RE = re.compile(r"^label_values\((?:(?P<selector>.+),\s*)?(?P<label>\w+)\)$")
PROMQL_BLOCK_RE = re.compile(r"^```promql\n(.*?)^```", re.MULTILINE | re.DOTALL)


@dataclass(frozen=True)
class PanelQuery:
    dashboard_uid: str
    panel_title: str
    ref_id: str
    expr: str
    instant: bool

    @property
    def name(self) -> str:
        return f"{self.dashboard_uid} / {self.panel_title} / {self.ref_id}"


@dataclass(frozen=True)
class VariableQuery:
    name: str
    selector: str | None  # series selector of label_values(...), None for label_values(label)
    label: str
    include_all: bool
    all_value: str | None


def load_dashboards(json_dir: Path) -> dict[str, dict[str, Any]]:
    """uid -> dashboard JSON for every file in json_dir."""
    dashboards: dict[str, dict[str, Any]] = {}
    for path in sorted(json_dir.glob("*.json")):
        data = json.loads(path.read_text())
        dashboards[data["uid"]] = data
    return dashboards


def panel_queries(dashboard: Mapping[str, Any]) -> list[PanelQuery]:
    queries: list[PanelQuery] = []
    for panel in iter_panels(dict(dashboard)):
        for target in panel.get("targets", []):
            if target.get("hide"):
                continue
            queries.append(
                PanelQuery(
                    dashboard_uid=dashboard["uid"],
                    panel_title=panel.get("title", ""),
                    ref_id=target.get("refId", ""),
                    expr=target["expr"],
                    instant=bool(target.get("instant")) and not target.get("range"),
                )
            )
    return queries


def annotation_queries(dashboard: Mapping[str, Any]) -> list[PanelQuery]:
    return [
        PanelQuery(dashboard["uid"], f"annotation {a['name']}", "", a["expr"], False)
        for a in dashboard.get("annotations", {}).get("list", [])
        if a.get("datasource", {}).get("type") == "prometheus" and a.get("expr")
    ]


def variable_queries(dashboard: Mapping[str, Any]) -> list[VariableQuery]:
    """The `label_values(...)` query variables, in dashboard order (later ones use earlier)."""
    variables: list[VariableQuery] = []
    for variable in dashboard.get("templating", {}).get("list", []):
        if variable.get("type") != "query":
            continue
        query = variable["query"]
        text = query["query"] if isinstance(query, dict) else query
        match = LABEL_VALUES_RE.match(text.strip())
        if match is None:
            raise ValueError(f"variable {variable['name']}: not a label_values() query: {text!r}")
        variables.append(
            VariableQuery(
                name=variable["name"],
                selector=match.group("selector"),
                label=match.group("label"),
                include_all=bool(variable.get("includeAll")),
                all_value=variable.get("allValue"),
            )
        )
    return variables


def substitute(expr: str, values: Mapping[str, str]) -> str:
    """Replace `$name` / `${name}` by values[name]; an unknown variable is an error."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if name not in values:
            raise KeyError(f"no value for template variable ${name} in {expr!r}")
        return values[name]

    return VARIABLE_RE.sub(replace, expr)


def cookbook_queries(markdown: str) -> list[str]:
    """The ```promql fenced blocks of the PromQL cookbook, in order."""
    return [block.strip() for block in PROMQL_BLOCK_RE.findall(markdown)]


def label_values(api: PrometheusAPI, selector: str | None, label: str, start: float,
                 end: float) -> list[str]:
    """Grafana's label_values(): the label's values on series present in the time range."""
    span = {"start": f"{start:.3f}", "end": f"{end:.3f}"}
    if selector is None:
        return sorted(api.get(f"label/{label}/values", span))
    series = api.get("series", [("match[]", selector), *span.items()])
    return sorted({s[label] for s in series if s.get(label)})


# What a variable without values stands for when that is allowed: a label value no series has.
NO_VALUE = "no-value"


def resolve_variables(api: PrometheusAPI, dashboard: Mapping[str, Any], run_id: str,
                      start: float, end: float, allow_empty: bool = False) -> dict[str, str]:
    """Values Grafana would give the dashboard's variables: 'All' for multi-value ones, the run
    under test for $run, the first value otherwise. A variable without values is an error, or
    with `allow_empty` (a cluster without MDS or gateways) NO_VALUE: its panels show nothing."""
    values: dict[str, str] = {"datasource": "cephscope-prometheus"}
    for variable in variable_queries(dashboard):
        selector = substitute(variable.selector, values) if variable.selector else None
        options = label_values(api, selector, variable.label, start, end)
        if not options and allow_empty and variable.name != "run":
            values[variable.name] = NO_VALUE
            continue
        if not options:
            raise ValueError(f"{dashboard['uid']}: variable ${variable.name} has no values "
                             f"({selector})")
        if variable.name == "run":
            if run_id not in options:
                raise ValueError(f"{dashboard['uid']}: run {run_id} not among {options}")
            values["run"] = run_id
        elif variable.include_all:
            values[variable.name] = variable.all_value or "|".join(options)
        else:
            values[variable.name] = options[0]
    return values


def grafana_intervals(start: float, end: float, scrape_interval: float,
                      max_data_points: int = 1000) -> dict[str, str]:
    """$__interval, $__rate_interval and $__range as Grafana sets them for a panel showing
    [start, end] (unrounded): the interval is the range over the panel's data points, at least
    one scrape interval; the rate interval max(interval + scrape interval, 4 x scrape interval)."""
    interval = max(scrape_interval, (end - start) / max_data_points)
    rate_interval = max(interval + scrape_interval, 4 * scrape_interval)
    return {"__interval": f"{interval:g}s", "__rate_interval": f"{rate_interval:g}s",
            "__range": f"{max(1, round(end - start))}s"}
