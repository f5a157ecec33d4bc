"""Report of one run: a table per step (params, client figures, system figures, likely
bottleneck), plots per sweep axis, written as report.md (+ report.html) into the run dir.

Inputs are the run dir's files (see `results`): run.json (steps), step-*/result.json,
step-*/prometheus.json (system metrics of the step window, pulled by the sweep or here with a
Prometheus URL). Nothing here talks to the cluster.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cephscope.prometheus_api import PrometheusAPI, PrometheusError
from cephscope.runner.baseline import pre_sweep_values
from cephscope.runner.benchmarks import BENCHMARKS
from cephscope.runner.clients import per_client_rows
from cephscope.runner.recovery import phase_key
from cephscope.runner.report.curve_plots import plot_response_curves
from cephscope.runner.report.curves import curves_table, response_curves, write_curve_data
from cephscope.runner.report.fio_series import plot_fio_series
from cephscope.runner.report.hosts import Table, blamed_place, nic_table
from cephscope.runner.report.hosts import client_table as step_client_table
from cephscope.runner.report.per_osd import (
    TOP_OSDS,
    device_tables,
    osd_p99_tables,
    thread_group_tables,
)
from cephscope.runner.report.plots import plot_axes, plot_cores, plot_heatmaps, plot_thread_groups
from cephscope.runner.report.releases import report_sections as release_sections
from cephscope.runner.report.step_system import (
    OsdTopology,
    SystemFigures,
    mode_window,
    read_stored,
    rgw_op_of_mode,
    summarize_system,
    topology_from_series,
)
from cephscope.runner.results import (
    IDLE_BASELINE_FILE,
    RunDir,
    atomic_write_json,
    atomic_write_text,
)
from cephscope.runner.search.analysis import report_lines
from cephscope.runner.stats import summarize
from cephscope.runner.steps import Step, axis_labels, format_value
from cephscope.runner.system_metrics import AUTO_RATE_WINDOW, MIN_WINDOW_SCRAPES

__all__ = ["OsdTopology", "Report", "Row", "SystemFigures", "likely_bottleneck", "load_rows",
           "summarize_system", "write_report"]

# A device or CPU busier than this during a step is called saturated.
SATURATION_RATIO = 0.85
# OSD-side latency below this share of the client's latency: the time is spent elsewhere.
OSD_LATENCY_SHARE_LOW = 0.3
PLOT_DIR = "report-plots"


@dataclass
class Row:
    """One (step, mode) line of the report."""

    step: Step
    mode: str | None
    status: str
    result: dict[str, Any]
    system: SystemFigures
    error: str | None = None
    window_seconds: float | None = None
    scrape_interval: float | None = None
    rate_window: str | None = None
    # warnings of the metrics pull (e.g. a rate window shorter than 4 scrape intervals)
    pull_warnings: tuple[str, ...] = ()

    def figure(self, key: str) -> float | None:
        value = self.result.get(key)
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None

    def percentile(self, key: str) -> float | None:
        pct = self.result.get("latency_percentiles_seconds") or {}
        value = pct.get(key, pct.get(f"{key}.0"))
        return float(value) if isinstance(value, int | float) else None

    def osd_percentile(self, key: str) -> float | None:
        return self.system.osd_latency_percentiles.get(key)

    @property
    def iops_per_cpu_percent(self) -> float | None:
        iops = self.figure("iops")
        cpu = self.system.cpu_busy_ratio
        if iops is None or not cpu:
            return None
        return iops / (cpu * 100.0)

    @property
    def iops_per_core(self) -> float | None:
        """Client IOPS per busy CPU core (all hosts' cores together)."""
        iops, cores = self.figure("iops"), self.system.busy_cores
        if iops is None or not cores:
            return None
        return iops / cores

    @property
    def short_window(self) -> bool:
        """The mode's window is shorter than MIN_WINDOW_SCRAPES scrape intervals."""
        return (self.window_seconds is not None and self.scrape_interval is not None
                and self.window_seconds < MIN_WINDOW_SCRAPES * self.scrape_interval)


# ---- system metrics ----------------------------------------------------------------------------

def fetch_topology(prometheus_url: str, timeout_seconds: float = 10.0) -> OsdTopology:
    """The OSDs' devices and interfaces as Prometheus knows them now (empty when unknown)."""
    api = PrometheusAPI(prometheus_url, timeout_seconds)
    found: dict[str, list[Mapping[str, Any]]] = {}
    for metric in ("cephscope_osd_device_info", "cephscope_osd_network_info"):
        try:
            found[metric] = api.query(metric) or []
        except (PrometheusError, KeyError, TypeError):
            found[metric] = []
    return topology_from_series(found["cephscope_osd_device_info"],
                                found["cephscope_osd_network_info"])


def bottleneck(row: Row) -> tuple[str, str]:
    """(short tag for the Steps table, the sentence for the step's detail): the resource that
    most likely limited the step, from what the metrics show."""
    s = row.system
    if s.too_short or (not s.available and s.short_counters):
        return ("window < 2 scrapes",
                "unknown: the measurement window held fewer than two scrapes, so no system "
                "figure could be taken from inside it (run longer steps or scrape more often)")
    if not s.available:
        return "n/a", "n/a (no system metrics)"
    if s.disk_util_ratio is not None and s.disk_util_ratio >= SATURATION_RATIO:
        detail = f", await {s.disk_await_seconds * 1e3:.1f} ms" if s.disk_await_seconds else ""
        place = blamed_place(s.disk_host, s.disk_device)
        return (f"disk {s.disk_device}",
                f"disk {place} ({s.disk_util_ratio * 100:.0f}% busy{detail})")
    if s.cpu_busy_ratio is not None and s.cpu_busy_ratio >= SATURATION_RATIO:
        return ("CPU", f"CPU ({s.cpu_busy_ratio * 100:.0f}% busy on {s.cpu_instance or 'host'})")
    core = s.max_core
    if core is not None and core[2] >= SATURATION_RATIO:
        top = max(s.thread_group_totals().items(), key=lambda kv: kv[1], default=None)
        hint = f"; busiest OSD thread group {top[0]}" if top else ""
        return (f"core cpu{core[1]}",
                f"CPU core {core[1]} on {core[0] or 'host'} ({core[2] * 100:.0f}% busy) while "
                f"the host is not: one thread's work does not spread{hint}")
    client_latency = row.figure("latency_avg_seconds")
    little = (row.result.get("extra") or {}).get("latency_little_seconds")
    gateway = s.rgw_latency_seconds.get(rgw_op_of_mode(row.mode) or "")
    reference = client_latency or (little if isinstance(little, int | float) else None)
    if gateway is not None and reference:
        share = gateway / reference
        if share < OSD_LATENCY_SHARE_LOW:
            how = "" if client_latency else " (concurrency / ops/s: the tool measures none)"
            return ("outside gateway",
                    f"outside the gateway (its own latency is {share * 100:.0f}% of the "
                    f"client's{how}: client, network or queueing before the gateway)")
    if s.osd_op_latency_seconds is not None and client_latency:
        share = s.osd_op_latency_seconds / client_latency
        if share < OSD_LATENCY_SHARE_LOW:
            return ("outside OSD",
                    f"outside the OSD op path (OSD op latency is {share * 100:.0f}% of the "
                    f"client's: client, network or queueing before the OSD)")
        return ("OSD op path",
                f"OSD op latency ({share * 100:.0f}% of client latency), no device saturated:"
                f" concurrency-bound or OSD-internal (see shard queues)")
    return "none saturated", "none saturated (concurrency-bound?)"


def likely_bottleneck(row: Row) -> str:
    """Name the resource that most likely limited the step (the detail's sentence)."""
    return bottleneck(row)[1]


# ---- loading -----------------------------------------------------------------------------------

def load_rows(run_dir: Path,
              fetch_system: Callable[[float, float], Mapping[str, Any]] | None = None,
              topology: OsdTopology | None = None) -> tuple[dict[str, Any], list[Row]]:
    """The run's metadata and one row per (step, mode); failed/pending steps get one row."""
    rd = RunDir(run_dir)
    run = rd.load_run()
    rows: list[Row] = []
    for step in rd.steps():
        step_dir = rd.step_dir(step)
        result = rd.step_result(step)
        if result is None:
            failure = rd.step_failure(step)
            rows.append(Row(step, None, "failed" if failure else "pending", {}, SystemFigures(),
                            error=(failure or {}).get("error")))
            continue
        prom_path = step_dir / "prometheus.json"
        prometheus: Mapping[str, Any] | None = read_stored(prom_path)
        if prometheus is None and fetch_system is not None:
            ts = result.get("timestamps", {})
            if isinstance(ts.get("started"), int | float) and isinstance(ts.get("ended"), int | float):
                prometheus = fetch_system(float(ts["started"]), float(ts["ended"]))
                # stored like the sweep stores it: the next report needs no Prometheus
                atomic_write_json(prom_path, prometheus)
        ts = result.get("timestamps") or {}
        for entry in result.get("results", []) or [{}]:
            window = mode_window(result, entry.get("mode"))
            system = summarize_system(prometheus, topology, window, entry.get("mode"))
            span = window or ((float(ts["started"]), float(ts["ended"]))
                              if isinstance(ts.get("started"), int | float)
                              and isinstance(ts.get("ended"), int | float) else None)
            rows.append(Row(step, entry.get("mode"), "done", dict(entry), system,
                            window_seconds=(span[1] - span[0]) if span else None,
                            scrape_interval=(prometheus or {}).get("scrape_interval_seconds"),
                            rate_window=(prometheus or {}).get("rate_window"),
                            pull_warnings=tuple(str(w) for w in
                                                (prometheus or {}).get("warnings") or ())))
    return run, rows


# ---- formatting --------------------------------------------------------------------------------

def _fmt(value: float | None, scale: float = 1.0, digits: int = 1) -> str:
    if value is None:
        return "-"
    return f"{value * scale:,.{digits}f}"


# The Steps table: what a reader compares across steps, one short line per (step, mode).
COLUMNS: Sequence[tuple[str, Callable[[Row], str]]] = (
    ("mode", lambda r: r.mode or r.status),
    ("IOPS", lambda r: _fmt(r.figure("iops"), digits=0)),
    ("MiB/s", lambda r: _fmt(r.figure("bandwidth_bytes_per_second"), 1 / 2**20)),
    ("lat avg ms", lambda r: _fmt(r.figure("latency_avg_seconds"), 1e3, 2)),
    ("lat p99 ms", lambda r: _fmt(r.percentile("99"), 1e3, 2)),
    ("OSD avg ms", lambda r: _fmt(r.system.osd_op_latency_seconds, 1e3, 2)),
    ("OSD p99 ms", lambda r: _fmt(r.osd_percentile("99"), 1e3, 2)),
    ("CPU %", lambda r: _fmt(r.system.cpu_busy_ratio, 100)),
)

def _drives_gateway(benchmark: str) -> bool:
    cls = BENCHMARKS.get(benchmark)
    return cls is not None and cls.rgw_api is not None


def rgw_mode_ops(row: Row) -> float | None:
    """The gateways' ops/s of the op kind the row's mode issues, else all their requests."""
    op = rgw_op_of_mode(row.mode)
    return row.system.rgw_ops_per_second.get(op) if op else row.system.rgw_requests_per_second


# Added to the Steps table when a step of the run drives a gateway: what the gateways
# themselves did in the mode's window (cephscope.figures' RGW figures). An idle gateway beside
# a RADOS or RBD sweep says nothing there (its step detail still shows it).
RGW_COLUMNS: Sequence[tuple[str, Callable[[Row], str]]] = (
    ("RGW op/s", lambda r: _fmt(rgw_mode_ops(r), digits=0)),
    ("RGW lat ms", lambda r: _fmt(r.system.rgw_latency_seconds.get(rgw_op_of_mode(r.mode) or ""),
                                  1e3, 2)),
)

# In a step's detail when its window had gateways.
RGW_DETAIL_FIGURES: Sequence[tuple[str, Callable[[Row], str]]] = (
    ("RGW requests/s", lambda r: _fmt(r.system.rgw_requests_per_second, digits=1)),
    ("RGW failed requests/s", lambda r: _fmt(r.system.rgw_failed_requests_per_second, digits=1)),
    *((f"RGW {op.upper()} op/s", lambda r, op=op: _fmt(r.system.rgw_ops_per_second.get(op),
                                                       digits=1))
      for op in ("put", "get")),
    *((f"RGW {op.upper()} MiB/s", lambda r, op=op: _fmt(r.system.rgw_bytes_per_second.get(op),
                                                        1 / 2**20, 2))
      for op in ("put", "get")),
    *((f"RGW {op.upper()} lat ms", lambda r, op=op: _fmt(r.system.rgw_latency_seconds.get(op),
                                                         1e3, 2))
      for op in ("put", "get")),
)

# The rest, per step in its detail (figure, value of a row).
DETAIL_FIGURES: Sequence[tuple[str, Callable[[Row], str]]] = (
    ("client p50 ms", lambda r: _fmt(r.percentile("50"), 1e3, 2)),
    ("client p99.9 ms", lambda r: _fmt(r.percentile("99.9"), 1e3, 2)),
    ("client lat max ms", lambda r: _fmt(r.figure("latency_max_seconds"), 1e3, 2)),
    ("OSD p50 ms", lambda r: _fmt(r.osd_percentile("50"), 1e3, 2)),
    ("OSD p99.9 ms", lambda r: _fmt(r.osd_percentile("99.9"), 1e3, 2)),
    ("max core %", lambda r: _fmt(r.system.max_core[2] if r.system.max_core else None, 100)),
    ("IOPS/core", lambda r: _fmt(r.iops_per_core, digits=0)),
    ("IOPS/CPU%", lambda r: _fmt(r.iops_per_cpu_percent, digits=1)),
    ("disk util %", lambda r: _fmt(r.system.disk_util_ratio, 100)),
    ("disk await ms", lambda r: _fmt(r.system.disk_await_seconds, 1e3, 2)),
    ("disk IOPS", lambda r: _fmt(r.system.disk_iops, digits=0)),
    ("NIC MiB/s", lambda r: _fmt(r.system.nic_bytes_per_second, 1 / 2**20)),
    ("system window", lambda r: window_text(r)),
    ("likely bottleneck", lambda r: bottleneck(r)[1]),
)


def window_text(row: Row) -> str:
    """What the step's system figures rest on: scrapes inside the measurement window."""
    s = row.system
    length = f"{row.window_seconds:.1f} s window" if row.window_seconds is not None else "window"
    if s.source != "scrapes":
        return f"{length}: means of rate({row.rate_window or '?'}) (no raw scrapes stored)"
    if s.too_short:
        return f"{length}: fewer than 2 scrapes inside: no system figures"
    covered = f" {s.covered_seconds:.1f} s apart at the ends" if s.covered_seconds else ""
    text = f"{length}: {s.scrapes} scrapes inside,{covered}"
    if s.short_counters:
        text += ("; fewer than 2 scrapes inside for " + ", ".join(s.short_counters)
                 + ": those figures are empty")
    return text


def fixed_axes(rows: Sequence[Row]) -> dict[str, str]:
    """label -> value of the axes that hold one value over the whole run."""
    labels = axis_labels(r.step for r in rows)
    out = {}
    for axis, label in labels.items():
        values = {format_value(r.step.axes[axis]) for r in rows if axis in r.step.axes}
        if len(values) == 1:
            out[label] = values.pop()
    return out


def table(rows: Sequence[Row]) -> tuple[list[str], list[list[str]]]:
    """The compact Steps table: step, the swept axes (one short column each), benchmark and
    iteration only when they vary, the headline figures, and the bottleneck as a tag."""
    labels = axis_labels(r.step for r in rows)
    fixed = fixed_axes(rows)
    swept = {a: label for a, label in labels.items() if label not in fixed}
    many_benchmarks = len({r.step.benchmark for r in rows}) > 1
    many_iterations = len({r.step.iteration for r in rows}) > 1
    drives_gateway = any(r.system.has_rgw and _drives_gateway(r.step.benchmark) for r in rows)
    columns = [*COLUMNS, *(RGW_COLUMNS if drives_gateway else ())]
    header = ["step", *(["benchmark"] if many_benchmarks else []),
              *(["iter"] if many_iterations else []), *swept.values(),
              *(c for c, _f in columns), "bottleneck"]
    body = []
    for r in rows:
        cells = [r.step.id]
        cells += [r.step.benchmark] if many_benchmarks else []
        cells += [str(r.step.iteration)] if many_iterations else []
        cells += [format_value(r.step.axes[a]) if a in r.step.axes else "" for a in swept]
        cells += [f(r) for _c, f in columns]
        cells.append(bottleneck(r)[0] if r.status == "done" else (r.error or r.status))
        body.append(cells)
    return header, body


def detail_table(row: Row) -> Table:
    figures = [*DETAIL_FIGURES, *(RGW_DETAIL_FIGURES if row.system.has_rgw else ())]
    return ("figures", ["figure", "value"], [[name, f(row)] for name, f in figures])


def markdown_table(header: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    def esc(cell: str) -> str:
        return cell.replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(esc(h) for h in header) + " |",
             "|" + "|".join("---" for _h in header) + "|"]
    lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in body]
    return "\n".join(lines)


# ---- report ------------------------------------------------------------------------------------

@dataclass
class Report:
    markdown_path: Path
    html_path: Path
    plots: list[Path]
    rows: list[Row]


def system_tables(row: Row, top_osds: int = TOP_OSDS) -> list[Table]:
    """Per-host tables of one (step, mode): CPU by mode, OSD devices, NICs, OSD thread groups,
    per-OSD p99, clients. Every table has a host column (the `host` label, else `instance`);
    the per-OSD ones are bounded by `top_osds` (see `per_osd`)."""
    s = row.system
    tables: list[Table] = []
    if s.cpu_modes or s.cores:
        hosts = sorted(set(s.cpu_modes) | {h for h, _c in s.cores})
        body = []
        for host in hosts:
            modes = s.cpu_modes.get(host, {})
            cores = {c: v for (h, c), v in s.cores.items() if h == host}
            busiest = max(cores.items(), key=lambda kv: kv[1], default=None)
            body.append([host, _fmt(s.host_busy_ratio(host), 100),
                         _fmt(modes.get("user"), 100), _fmt(modes.get("system"), 100),
                         _fmt(modes.get("iowait"), 100),
                         _fmt(sum(cores.values()) if cores else None, digits=2),
                         f"cpu{busiest[0]} {busiest[1] * 100:.0f}" if busiest else "-"])
        tables.append(("CPU per host", ["host", "busy %", "user %", "system %", "iowait %",
                                        "busy cores", "max core %"], body))
    tables += device_tables(s, _fmt, top_osds)
    if s.nics:
        tables.append(nic_table(s, _fmt))
    tables += thread_group_tables(s, _fmt, top_osds)
    tables += osd_p99_tables(s, _fmt, top_osds)
    clients = step_client_table(row.result, _fmt)
    if clients is not None:
        tables.append(clients)
    return tables


# (column, value of a row) summarised over iterations
STAT_FIGURES: Sequence[tuple[str, float, Callable[[Row], float | None]]] = (
    ("IOPS", 1.0, lambda r: r.figure("iops")),
    ("MiB/s", 1 / 2**20, lambda r: r.figure("bandwidth_bytes_per_second")),
    ("lat avg ms", 1e3, lambda r: r.figure("latency_avg_seconds")),
    ("OSD p99 ms", 1e3, lambda r: r.osd_percentile("99")),
)


def iteration_groups(rows: Sequence[Row]) -> dict[tuple[str, str, str], list[Row]]:
    """(benchmark, mode, params) -> the done rows of every iteration of that step."""
    groups: dict[tuple[str, str, str], list[Row]] = {}
    for r in rows:
        if r.status == "done":
            groups.setdefault((r.step.benchmark, r.mode or "", r.step.short_params()), []).append(r)
    return groups


def statistics_table(rows: Sequence[Row]) -> tuple[list[str], list[list[str]]] | None:
    """Per step (all iterations) and figure: mean +- sd, CV % and the 95 % CI; None when no
    step ran more than once."""
    groups = iteration_groups(rows)
    if not any(len(members) > 1 for members in groups.values()):
        return None
    header = ["benchmark", "mode", "params", "n"]
    for name, _scale, _f in STAT_FIGURES:
        header += [f"{name} mean ± sd", f"{name} CV %", f"{name} 95% CI"]
    body = []
    for (benchmark, mode, params), members in groups.items():
        line = [benchmark, mode, params, str(len(members))]
        for _name, scale, figure in STAT_FIGURES:
            values = [v for r in members if (v := figure(r)) is not None]
            if not values:
                line += ["-", "-", "-"]
                continue
            s = summarize(values)
            digits = 0 if scale == 1.0 else 2
            mean = _fmt(s.mean, scale, digits)
            line.append(mean if s.sd is None else f"{mean} ± {_fmt(s.sd, scale, digits)}")
            line.append(_fmt(s.cv, 100))
            line.append("-" if s.ci_low is None else
                        f"{_fmt(s.ci_low, scale, digits)} .. {_fmt(s.ci_high, scale, digits)}")
        body.append(line)
    return header, body


@dataclass
class ReportContent:
    run: dict[str, Any]
    rows: list[Row]
    header: list[str]
    body: list[list[str]]
    stats: tuple[list[str], list[list[str]]] | None
    per_step: list[tuple[str, list[Table]]]
    notes: list[str]
    # the run's idle baseline window beside each step's system figures (None: not recorded)
    idle: tuple[list[str], list[list[str]]] | None = None


def build_content(run_dir: Path, prometheus_url: str | None = None,
                  rate_window: str = AUTO_RATE_WINDOW, top_osds: int = TOP_OSDS) -> ReportContent:
    """Every table of the report (no files written but pulled metrics stored in the run dir).
    With a Prometheus URL, steps without stored system metrics get them pulled for their
    window (and stored), and old runs' disks / NICs are narrowed to the OSDs' devices."""
    fetch_system = None
    topology = None
    if prometheus_url:
        from cephscope.runner.system_metrics import pull_step_window, scrape_interval_seconds

        interval = scrape_interval_seconds(prometheus_url)

        def fetch_system(start: float, end: float) -> Mapping[str, Any]:
            return pull_step_window(prometheus_url, start, end, rate_window=rate_window,
                                    scrape_interval=interval)

        topology = fetch_topology(prometheus_url)
    run, rows = load_rows(Path(run_dir), fetch_system, topology)
    idle = load_idle_baseline(Path(run_dir), fetch_system, topology)
    header, body = table(rows)
    per_step = [(f"{r.step.id} {r.step.benchmark} {r.mode or ''} ({r.step.short_params()}, "
                 f"iteration {r.step.iteration})", [detail_table(r), *system_tables(r, top_osds)])
                for r in rows if r.status == "done"]
    return ReportContent(run, rows, header, body, statistics_table(rows), per_step, _notes(rows),
                         idle_baseline_table(rows, idle) if idle is not None else None)


# Fits a 1280 px window: the page is capped, tables never grow past it (cells wrap, long
# tokens such as option names break anywhere), text and images wrap and shrink.
REPORT_CSS = (
    "body{font-family:sans-serif;max-width:1240px;margin:0 auto;padding:0 12px;"
    "overflow-wrap:anywhere}"
    "table{border-collapse:collapse;font-size:12px;margin-bottom:8px;max-width:100%}"
    "td,th{border:1px solid #ccc;padding:3px 6px;text-align:right;vertical-align:top;"
    "overflow-wrap:anywhere}"
    "th{background:#f4f4f4}td:first-child,td:last-child{text-align:left}"
    "ul.rec li{font-family:monospace;white-space:pre-wrap}"
    "img{max-width:100%;height:auto}"
)


def _png_data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def _html_table(header: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    cells = ["<table><tr>", *(f"<th>{html.escape(c)}</th>" for c in header), "</tr>"]
    cells += ["<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in body]
    cells.append("</table>")
    return "".join(cells)


def write_report(run_dir: Path, prometheus_url: str | None = None,
                 rate_window: str = AUTO_RATE_WINDOW, plots: bool = True,
                 top_osds: int = TOP_OSDS) -> Report:
    """Write report.md, report.html (self-contained: plots embedded) and the plots into the run
    dir; see `build_content` for what a Prometheus URL adds."""
    run_dir = Path(run_dir)
    content = build_content(run_dir, prometheus_url, rate_window, top_osds)
    run, rows = content.run, content.rows
    plot_paths: list[Path] = []
    if plots:
        out = run_dir / PLOT_DIR
        plot_paths = (plot_axes(rows, out) + plot_heatmaps(rows, out)
                      + plot_thread_groups(rows, out) + plot_cores(rows, out))
        plot_paths += plot_fio_series(rows, run_dir, out)
    steps_total = len({r.step.id for r in rows})
    steps_done = len({r.step.id for r in rows if r.status == "done"})
    # rows with raw scrapes use no rate window: name it only for rows that rest on one
    windows = sorted({f"{r.rate_window} (scrape interval {r.scrape_interval:g}s)"
                      for r in rows if r.rate_window and r.scrape_interval
                      and r.system.source != "scrapes"})
    intervals = sorted({f"{r.scrape_interval:g}s" for r in rows
                        if r.scrape_interval and r.system.source == "scrapes"})
    intro = [f"spec: {run.get('spec_path')}", f"steps: {steps_done} done of {steps_total}"]
    if intervals:
        intro.append("system figures: counter increases between the scrapes inside each "
                     f"mode's own window (scrape interval {', '.join(intervals)})")
    if windows:
        intro.append("rate window: " + ", ".join(windows))
    before = pre_sweep_values(RunDir(run_dir).read_pre_sweep_config())
    if before:
        intro.append("the OSDs ran before the sweep with (effective values, read from the "
                     "OSDs at sweep start): " + ", ".join(v.text() for _o, v in sorted(
                         before.items())))
    intro.append("units: MiB/s = 2^20 bytes per second; latencies in ms; "
                 "OSD p50/p99/p99.9 are OSD-side (the OSDs' op latency histograms over the "
                 "mode's window), client p50/p99/p99.9 are the benchmark's own")

    md = [f"# cephscope report: run {run.get('run_id')}", "", *(f"- {i}" for i in intro), ""]
    # a sweep across releases opens with them side by side
    releases, release_plots = release_sections(run_dir, rows, run_dir / PLOT_DIR if plots else None)
    if releases is not None:
        md += ["## Releases", "", markdown_table(*releases), ""]
        md += [*(f"![{p.stem}]({PLOT_DIR}/{p.name})" for p in release_plots), ""]
    fixed = fixed_axes(rows)
    fixed_line = ("fixed for every step: " + ", ".join(f"{k}={v}" for k, v in fixed.items())
                  if fixed else "")
    steps_note = ("One line per step and mode; the other figures, the system tables and the "
                  "bottleneck's reasoning are in the step's detail under 'System per step'.")
    md += ["## Steps", "", *([fixed_line, ""] if fixed_line else []), steps_note, "",
           markdown_table(content.header, content.body), ""]
    clients = client_table(run_dir)
    if clients is not None:
        md += ["## Per client", "", markdown_table(*clients), ""]
    if content.stats:
        md += ["## Statistics over iterations", "", markdown_table(*content.stats), ""]
    curves = response_curves(rows)
    write_curve_data(run_dir, curves)
    curve_plots = plot_response_curves(curves, run_dir / PLOT_DIR) if plots and curves else []
    if curves:
        md += ["## Response curves", "", CURVES_NOTE, "",
               *(f"- {c.knee_text()}" for c in curves), "",
               markdown_table(*curves_table(curves)), "",
               *(f"![{p.stem}]({PLOT_DIR}/{p.name})" for p in curve_plots), ""]
    if content.idle:
        md += ["## System vs idle baseline", "", IDLE_NOTE, "", markdown_table(*content.idle), ""]
    rec_lines, front_plots = report_lines(run_dir, run_dir / PLOT_DIR if plots else None)
    plot_paths += front_plots
    if rec_lines:
        # a list, not a code block: long lines wrap in every viewer
        md += ["## Recommendation", "", *(f"- {line}" for line in rec_lines), ""]
    recovery = recovery_table(run_dir)
    if recovery:
        md += ["## Recovery tests", "", "Client figures per phase (the benchmark's per-second "
               "samples inside each phase); recovery = degraded until no object is degraded, "
               "backfill = OSDs back in until no object is misplaced.", "",
               markdown_table(*recovery), ""]
    if plot_paths:
        md += ["## Plots", ""]
        md += [f"![{p.stem}]({PLOT_DIR}/{p.name})" for p in plot_paths]
        md.append("")
    if content.per_step:
        md += ["## System per step", ""]
        for title, tables in content.per_step:
            md += [f"### {title}", ""]
            for name, header, body in tables:
                md += [f"{name}:", "", markdown_table(header, body), ""]
    if content.notes:
        md += ["## Notes", "", *(f"- {n}" for n in content.notes), ""]
    md_path = run_dir / "report.md"
    atomic_write_text(md_path, "\n".join(md))

    title = html.escape(str(run.get("run_id")))
    h = ["<!doctype html><html><head><meta charset='utf-8'>",
         f"<title>cephscope report {title}</title>",
         f"<style>{REPORT_CSS}</style></head><body>",
         f"<h1>cephscope report: run {title}</h1>",
         "<ul>" + "".join(f"<li>{html.escape(i)}</li>" for i in intro) + "</ul>"]
    if releases is not None:
        h += ["<h2>Releases</h2>", _html_table(*releases)]
        h += [f"<p><img alt='{html.escape(p.stem)}' src='{_png_data_uri(p)}'></p>"
              for p in release_plots]
    h += ["<h2>Steps</h2>", *([f"<p>{html.escape(fixed_line)}</p>"] if fixed_line else []),
          f"<p>{html.escape(steps_note)}</p>", _html_table(content.header, content.body)]
    if clients is not None:
        h += ["<h2>Per client</h2>", _html_table(*clients)]
    if content.stats:
        h += ["<h2>Statistics over iterations</h2>", _html_table(*content.stats)]
    if curves:
        h += ["<h2>Response curves</h2>", f"<p>{html.escape(CURVES_NOTE)}</p>",
              "<ul>" + "".join(f"<li>{html.escape(c.knee_text())}</li>" for c in curves)
              + "</ul>", _html_table(*curves_table(curves))]
        h += [f"<p><img alt='{html.escape(p.stem)}' src='{_png_data_uri(p)}'></p>"
              for p in curve_plots]
    if content.idle:
        h += ["<h2>System vs idle baseline</h2>", f"<p>{html.escape(IDLE_NOTE)}</p>",
              _html_table(*content.idle)]
    if rec_lines:
        h += ["<h2>Recommendation</h2>", "<ul class='rec'>"
              + "".join(f"<li>{html.escape(line)}</li>" for line in rec_lines) + "</ul>"]
    if plot_paths:
        h.append("<h2>Plots</h2>")
        h += [f"<p><img alt='{html.escape(p.stem)}' src='{_png_data_uri(p)}'></p>"
              for p in plot_paths]
    if content.per_step:
        h.append("<h2>System per step</h2>")
        for step_title, tables in content.per_step:
            h.append(f"<h3>{html.escape(step_title)}</h3>")
            for name, header, body in tables:
                h += [f"<p>{html.escape(name)}</p>", _html_table(header, body)]
    if content.notes:
        h += ["<h2>Notes</h2>",
              "<ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in content.notes) + "</ul>"]
    h.append("</body></html>")
    html_path = run_dir / "report.html"
    atomic_write_text(html_path, "\n".join(h))
    return Report(md_path, html_path, plot_paths + curve_plots, rows)


CURVES_NOTE = ("Latency against IOPS as a load axis rises (the benchmark's load parameters: "
               "ops in flight, jobs, processes), one curve per configuration of the other "
               "axes; figures are the mean ± sd over the iterations. The knee is the point "
               "of maximum IOPS / mean latency: the last load step that still bought more "
               "throughput than it cost in latency. Data: response-curves.csv and "
               "response-curves.json beside this report.")


IDLE_NOTE = ("Each step's figure beside the same figure over the idle baseline window at run "
             "start (no client I/O; CBT's idle_monitor_sleep): the same host's CPU, the same "
             "disk as the step's busiest OSD device, the same NIC as the step's busiest. "
             "'above idle' = step minus idle.")


def load_idle_baseline(run_dir: Path,
                       fetch_system: Callable[[float, float], Mapping[str, Any]] | None = None,
                       topology: OsdTopology | None = None) -> SystemFigures | None:
    """System figures of the run's idle baseline window (stored by the sweep in
    idle_baseline.prometheus.json, else pulled and stored); None when there is none."""
    idle = RunDir(run_dir).read_state().get("idle_baseline")
    if not isinstance(idle, Mapping) or not all(
            isinstance(idle.get(k), int | float) for k in ("start", "end")):
        return None
    window = (float(idle["start"]), float(idle["end"]))
    path = run_dir / IDLE_BASELINE_FILE
    prometheus = read_stored(path)
    if prometheus is None and fetch_system is not None:
        prometheus = dict(fetch_system(*window))
        atomic_write_json(path, prometheus)
    figures = summarize_system(prometheus, topology, window)
    return figures if figures.available else None


def idle_baseline_table(rows: Sequence[Row], idle: SystemFigures
                        ) -> tuple[list[str], list[list[str]]] | None:
    """Per (step, mode): CPU busy, the busiest OSD device's util and IOPS, the busiest NIC's
    traffic, each beside the idle window's figure for the same host / device."""
    def host_cpu(s: SystemFigures, host: str | None) -> float | None:
        busy = s.host_busy_ratio(host or "")
        return busy if busy is not None else s.cpu_busy_ratio

    idle_devices = {(d.host, d.device): d for d in idle.devices}
    idle_nics = {(n.host, n.device): n for n in idle.nics}
    body = []
    for r in rows:
        s = r.system
        if r.status != "done" or not s.available:
            continue
        cpu, idle_cpu = s.cpu_busy_ratio, host_cpu(idle, s.cpu_instance)
        disk = max((d for d in s.devices if d.util_ratio is not None),
                   key=lambda d: d.util_ratio or 0.0, default=None)
        idle_disk = idle_devices.get((disk.host, disk.device)) if disk else None
        nic = max(s.nics, key=lambda n: n.receive_bytes_per_second + n.transmit_bytes_per_second,
                  default=None)
        idle_nic = idle_nics.get((nic.host, nic.device)) if nic else None

        def nic_rate(n: Any) -> float | None:
            return n.receive_bytes_per_second + n.transmit_bytes_per_second if n else None

        body.append([
            r.step.id, r.mode or "-",
            _fmt(cpu, 100), _fmt(idle_cpu, 100),
            _fmt(cpu - idle_cpu, 100) if cpu is not None and idle_cpu is not None else "-",
            disk.device if disk else "-",
            _fmt(disk.util_ratio if disk else None, 100),
            _fmt(idle_disk.util_ratio if idle_disk else None, 100),
            _fmt(disk.iops if disk else None, digits=0),
            _fmt(idle_disk.iops if idle_disk else None, digits=0),
            nic.device if nic else "-",
            _fmt(nic_rate(nic), 1 / 2**20, 2), _fmt(nic_rate(idle_nic), 1 / 2**20, 2)])
    if not body:
        return None
    return (["step", "mode", "CPU busy %", "idle CPU %", "CPU above idle %", "disk",
             "util %", "idle util %", "IOPS", "idle IOPS", "NIC", "MiB/s", "idle MiB/s"], body)


def recovery_table(run_dir: Path) -> tuple[list[str], list[list[str]]] | None:
    """One row per recovery-test phase of every step that ran one."""
    rd = RunDir(run_dir)
    body = []
    for step in rd.steps():
        result = rd.step_result(step)
        rec = ((result or {}).get("timestamps") or {}).get("recovery")
        if not rec:
            continue
        for p in rec.get("phases", []):
            client = rec.get("client", {}).get(phase_key(p), {})
            lat = client.get("latency_mean_seconds")
            body.append([step.id, phase_key(p), _fmt(p.get("end", p["start"]) - p["start"]),
                         _fmt(client.get("iops_mean"), digits=0),
                         _fmt(lat, 1e3, 2) if lat is not None else "-"])
        rate = rec.get("recovery_bytes_per_second_mean")
        cycles = rec.get("cycles") or [{"cycle": 1, "recovery_seconds": rec.get("recovery_seconds"),
                                        "backfill_seconds": rec.get("backfill_seconds")}]
        for c in cycles:
            body.append([step.id, "summary" if len(cycles) == 1 else f"summary#{c['cycle']}",
                         f"recovery {_fmt(c.get('recovery_seconds'))} s, backfill "
                         f"{_fmt(c.get('backfill_seconds'))} s",
                         f"max degraded objects {rec.get('max_degraded_objects', 0):.0f}",
                         f"recovery {_fmt(rate, 1 / 2**20)} MiB/s" if rate else "-"])
        for stuck in rec.get("repeered_pgs") or []:
            body.append([step.id, "stuck PG",
                         f"PG {stuck.get('pgid')} laggy {_fmt(stuck.get('laggy_seconds'))} s, "
                         f"re-peered", f"acting {stuck.get('acting')}",
                         str(stuck.get("slow_ops") or "-")])
    if not body:
        return None
    return ["step", "phase", "seconds", "client IOPS", "client latency ms"], body


def client_table(run_dir: Path) -> tuple[list[str], list[list[str]]] | None:
    """Steps run on several clients: one row per step, mode and client (None: no such step)."""
    rd = RunDir(run_dir)
    body = []
    for step in rd.steps():
        result = rd.step_result(step)
        if result is None:
            continue
        modes = result.get("timestamps", {}).get("modes", {})
        for row in per_client_rows(step.id, step.benchmark, result.get("results", []), modes):
            lat = row["latency_avg_seconds"]
            p99 = row["latency_p99_seconds"]
            body.append([row["step"], str(row["mode"]), row["client"], _fmt(row["iops"], 1, 0),
                         _fmt(row["bandwidth_bytes_per_second"], 2**-20),
                         _fmt(lat, 1e3, 2), _fmt(p99, 1e3, 2),
                         _fmt((modes.get(str(row["mode"])) or {}).get("start_skew_seconds"),
                              1, 3)])
    if not body:
        return None
    return (["step", "mode", "client", "IOPS", "MiB/s", "lat avg ms", "lat p99 ms",
             "start skew s"], body)


def _notes(rows: Iterable[Row]) -> list[str]:
    notes = []
    rows = list(rows)
    for name in dict.fromkeys(r.step.benchmark for r in rows if r.status == "done"):
        cls = BENCHMARKS.get(name)
        notes += [n for n in (cls.report_notes if cls else ()) if n not in notes]
    if any(r.status == "done" and r.system.available and not r.system.osd_latency_percentiles
           for r in rows):
        notes.append("Steps without OSD-side percentiles: no cephscope_osd_op_latency_seconds "
                     "buckets were stored for their window (exporter's histogram collector off, "
                     "or a run from before they were pulled).")
    short = [r for r in rows if r.short_window]
    if short:
        notes.append(f"WARNING: {len(short)} mode window(s) shorter than {MIN_WINDOW_SCRAPES} "
                     f"scrape intervals (e.g. step {short[0].step.id} {short[0].mode}: "
                     f"{short[0].window_seconds:.1f}s at a {short[0].scrape_interval:g}s "
                     "interval): their system figures and OSD-side percentiles rest on one "
                     "or two samples; run longer steps or scrape more often.")
    if any(r.system.source == "scrapes" for r in rows):
        notes.append("System figures (CPU, per core, disks, NICs, OSD ops and thread groups) "
                     "are counter increases between the first and the last scrape inside each "
                     "mode's own window (from the step's recorded mode start/end), divided by "
                     "the time between them: nothing from the restart or the quiet gaps "
                     "around a measurement enters them; each step's detail says how many "
                     "scrapes they rest on.")
    too_short = [r for r in rows if r.system.too_short or r.system.short_counters]
    if too_short:
        notes.append(f"WARNING: {len(too_short)} mode window(s) held fewer than two scrapes "
                     f"of some target (e.g. step {too_short[0].step.id} {too_short[0].mode}): "
                     "those system figures are left empty rather than taken from the time "
                     "around them.")
    if any(r.system.available and r.system.source != "scrapes" for r in rows):
        notes.append("System columns of steps without stored raw scrapes are means of "
                     "Prometheus rate()s over each mode's window; a mode shorter than the "
                     "rate window blends with the phase before it (a restart's boot work "
                     "included).")
    if any(r.system.available and not r.system.osd_devices_only for r in rows):
        notes.append("Disk and NIC columns cover every device of the hosts (the OSDs' devices "
                     "were not known): pass --prometheus-url so the exporter's "
                     "cephscope_osd_device_info / cephscope_osd_network_info narrow them.")
    if any(r.status == "done" and not r.system.available for r in rows):
        notes.append("Steps without system metrics: the run had no Prometheus URL; pass "
                     "--prometheus-url to `cephscope report` to pull them for the step windows.")
    for warning in sorted({w for r in rows for w in r.pull_warnings}):
        notes.append(f"WARNING: {warning}")
    errors = sorted({e for r in rows for e in r.system.errors})
    if errors:
        notes.append("Prometheus queries that failed: " + "; ".join(errors[:5]))
    return notes
