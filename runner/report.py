"""Report of one run: a table per step (params, client figures, system figures, likely
bottleneck), plots per sweep axis, written as report.md (+ report.html) into the run dir.

Inputs are the run dir's files (see `results`): run.json (steps), step-*/result.json,
step-*/prometheus.json (system metrics of the step window, pulled by the sweep or here with a
Prometheus URL). Nothing here talks to the cluster.
"""

from __future__ import annotations

import html
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cephscope.runner.results import RunDir, atomic_write_text, read_json
from cephscope.runner.step_system import (
    OsdTopology,
    SystemFigures,
    summarize_system,
    topology_from_series,
)
from cephscope.runner.steps import Step, axis_labels, format_value

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

    def figure(self, key: str) -> float | None:
        value = self.result.get(key)
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None

    def percentile(self, key: str) -> float | None:
        pct = self.result.get("latency_percentiles_seconds") or {}
        value = pct.get(key, pct.get(f"{key}.0"))
        return float(value) if isinstance(value, int | float) else None

    @property
    def iops_per_cpu_percent(self) -> float | None:
        iops = self.figure("iops")
        cpu = self.system.cpu_busy_ratio
        if iops is None or not cpu:
            return None
        return iops / (cpu * 100.0)


# ---- system metrics ----------------------------------------------------------------------------

def fetch_topology(prometheus_url: str, timeout_seconds: float = 10.0) -> OsdTopology:
    """The OSDs' devices and interfaces as Prometheus knows them now (empty when unknown)."""
    import requests

    found: dict[str, list[Mapping[str, Any]]] = {}
    for metric in ("cephscope_osd_device_info", "cephscope_osd_network_info"):
        try:
            body = requests.get(f"{prometheus_url.rstrip('/')}/api/v1/query",
                                params={"query": metric}, timeout=timeout_seconds).json()
            found[metric] = body.get("data", {}).get("result", []) or []
        except (requests.RequestException, ValueError, AttributeError):
            found[metric] = []
    return topology_from_series(found["cephscope_osd_device_info"],
                                found["cephscope_osd_network_info"])


def likely_bottleneck(row: Row) -> str:
    """Name the resource that most likely limited the step, from what the metrics show."""
    s = row.system
    if not s.available:
        return "n/a (no system metrics)"
    if s.disk_util_ratio is not None and s.disk_util_ratio >= SATURATION_RATIO:
        detail = f", await {s.disk_await_seconds * 1e3:.1f} ms" if s.disk_await_seconds else ""
        return f"disk {s.disk_device} ({s.disk_util_ratio * 100:.0f}% busy{detail})"
    if s.cpu_busy_ratio is not None and s.cpu_busy_ratio >= SATURATION_RATIO:
        return f"CPU ({s.cpu_busy_ratio * 100:.0f}% busy on {s.cpu_instance or 'host'})"
    client_latency = row.figure("latency_avg_seconds")
    if s.osd_op_latency_seconds is not None and client_latency:
        share = s.osd_op_latency_seconds / client_latency
        if share < OSD_LATENCY_SHARE_LOW:
            return (f"outside the OSD op path (OSD op latency is {share * 100:.0f}% of the "
                    f"client's: client, network or queueing before the OSD)")
        return (f"OSD op latency ({share * 100:.0f}% of client latency), no device saturated:"
                f" concurrency-bound or OSD-internal (see shard queues)")
    return "none saturated (concurrency-bound?)"


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
        prometheus: Mapping[str, Any] | None = None
        prom_path = step_dir / "prometheus.json"
        if prom_path.exists():
            try:
                prometheus = read_json(prom_path)
            except (OSError, ValueError) as exc:
                prometheus = {"queries": {"prometheus.json": {"error": f"unreadable: {exc}"}}}
        elif fetch_system is not None:
            ts = result.get("timestamps", {})
            if isinstance(ts.get("started"), int | float) and isinstance(ts.get("ended"), int | float):
                prometheus = fetch_system(float(ts["started"]), float(ts["ended"]))
        mode_windows = (result.get("timestamps") or {}).get("modes") or {}
        for entry in result.get("results", []) or [{}]:
            # each mode's own window (write vs read; fio's prefill excluded) when recorded
            span = mode_windows.get(entry.get("mode")) or {}
            window = ((float(span["start"]), float(span["end"]))
                      if isinstance(span.get("start"), int | float)
                      and isinstance(span.get("end"), int | float) else None)
            system = summarize_system(prometheus, topology, window)
            rows.append(Row(step, entry.get("mode"), "done", dict(entry), system))
    return run, rows


# ---- formatting --------------------------------------------------------------------------------

def _fmt(value: float | None, scale: float = 1.0, digits: int = 1) -> str:
    if value is None:
        return "-"
    return f"{value * scale:,.{digits}f}"


COLUMNS: Sequence[tuple[str, Callable[[Row], str]]] = (
    ("mode", lambda r: r.mode or r.status),
    ("IOPS", lambda r: _fmt(r.figure("iops"), digits=0)),
    ("MiB/s", lambda r: _fmt(r.figure("bandwidth_bytes_per_second"), 1 / 2**20)),
    ("lat avg ms", lambda r: _fmt(r.figure("latency_avg_seconds"), 1e3, 2)),
    ("p50 ms", lambda r: _fmt(r.percentile("50"), 1e3, 2)),
    ("p99 ms", lambda r: _fmt(r.percentile("99"), 1e3, 2)),
    ("p99.9 ms", lambda r: _fmt(r.percentile("99.9"), 1e3, 2)),
    ("lat max ms", lambda r: _fmt(r.figure("latency_max_seconds"), 1e3, 2)),
    ("CPU %", lambda r: _fmt(r.system.cpu_busy_ratio, 100)),
    ("IOPS/CPU%", lambda r: _fmt(r.iops_per_cpu_percent, digits=1)),
    ("disk util %", lambda r: _fmt(r.system.disk_util_ratio, 100)),
    ("disk await ms", lambda r: _fmt(r.system.disk_await_seconds, 1e3, 2)),
    ("disk IOPS", lambda r: _fmt(r.system.disk_iops, digits=0)),
    ("NIC MiB/s", lambda r: _fmt(r.system.nic_bytes_per_second, 1 / 2**20)),
    ("OSD op lat ms", lambda r: _fmt(r.system.osd_op_latency_seconds, 1e3, 2)),
)


def table(rows: Sequence[Row]) -> tuple[list[str], list[list[str]]]:
    labels = axis_labels(r.step for r in rows)
    header = ["step", "benchmark", "iter", *labels.values(), *(c for c, _f in COLUMNS),
              "likely bottleneck"]
    body = []
    for r in rows:
        cells = [r.step.id, r.step.benchmark, str(r.step.iteration)]
        cells += [format_value(r.step.axes[a]) if a in r.step.axes else "" for a in labels]
        cells += [f(r) for _c, f in COLUMNS]
        cells.append(likely_bottleneck(r) if r.status == "done" else (r.error or r.status))
        body.append(cells)
    return header, body


def markdown_table(header: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    def esc(cell: str) -> str:
        return cell.replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(esc(h) for h in header) + " |",
             "|" + "|".join("---" for _h in header) + "|"]
    lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in body]
    return "\n".join(lines)


# ---- plots -------------------------------------------------------------------------------------

def _numeric(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    try:
        return float(str(value))
    except ValueError:
        return None


def plot_axes(rows: Sequence[Row], out_dir: Path) -> list[Path]:
    """Per (benchmark, mode) and per sweep axis with >= 2 values: IOPS and latency against that
    axis, one line per combination of the other axes; iterations averaged."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    done = [r for r in rows if r.status == "done" and r.figure("iops") is not None]
    labels = axis_labels(r.step for r in done)
    written: list[Path] = []
    groups: dict[tuple[str, str], list[Row]] = {}
    for r in done:
        groups.setdefault((r.step.benchmark, r.mode or ""), []).append(r)
    for (benchmark, mode), members in groups.items():
        axes = [a for a in labels if len({format_value(r.step.axes.get(a)) for r in members}) > 1]
        for axis in axes:
            numeric = all(_numeric(r.step.axes.get(axis)) is not None for r in members)
            others = [a for a in axes if a != axis]
            lines: dict[str, dict[Any, list[Row]]] = {}
            for r in members:
                key = ", ".join(f"{labels[o]}={format_value(r.step.axes.get(o))}" for o in others)
                x = _numeric(r.step.axes[axis]) if numeric else format_value(r.step.axes[axis])
                lines.setdefault(key or "all", {}).setdefault(x, []).append(r)
            fig, (ax_iops, ax_lat) = plt.subplots(1, 2, figsize=(11, 4.2))
            for key, points in sorted(lines.items()):
                xs = sorted(points) if numeric else list(points)
                iops = [statistics.fmean(r.figure("iops") or 0 for r in points[x]) for x in xs]
                lat = [statistics.fmean((r.figure("latency_avg_seconds") or 0) * 1e3
                                        for r in points[x]) for x in xs]
                ax_iops.plot(xs, iops, marker="o", label=key)
                ax_lat.plot(xs, lat, marker="o", label=f"{key} avg")
                p99 = [[r.percentile("99") for r in points[x]] for x in xs]
                if all(all(v is not None for v in vals) for vals in p99):
                    ax_lat.plot(xs, [statistics.fmean(v) * 1e3 for v in p99], marker="x",
                                linestyle="--", label=f"{key} p99")
            for ax, ylabel in ((ax_iops, "IOPS"), (ax_lat, "latency (ms)")):
                ax.set_xlabel(labels[axis])
                ax.set_ylabel(ylabel)
                ax.grid(True, alpha=0.3)
                ax.set_ylim(bottom=0)
            ax_iops.legend(fontsize=7)
            ax_lat.legend(fontsize=7)
            fig.suptitle(f"{benchmark} {mode}: IOPS and latency vs {labels[axis]}")
            fig.tight_layout()
            out_dir.mkdir(parents=True, exist_ok=True)
            path = out_dir / f"{benchmark}-{mode}-vs-{labels[axis]}.png"
            fig.savefig(path, dpi=90)
            plt.close(fig)
            written.append(path)
    return written


# ---- report ------------------------------------------------------------------------------------

@dataclass
class Report:
    markdown_path: Path
    html_path: Path
    plots: list[Path]
    rows: list[Row]


def write_report(run_dir: Path, prometheus_url: str | None = None, rate_window: str = "15s",
                 plots: bool = True) -> Report:
    """Write report.md, report.html and the plots into the run dir. With a Prometheus URL,
    steps without stored system metrics get them pulled for their window, and disk / NIC
    figures are limited to the OSDs' devices (from the exporter's topology series)."""
    run_dir = Path(run_dir)
    fetch_system = None
    topology = None
    if prometheus_url:
        from cephscope.runner.system_metrics import pull_step_window

        def fetch_system(start: float, end: float) -> Mapping[str, Any]:
            return pull_step_window(prometheus_url, start, end, rate_window=rate_window)

        topology = fetch_topology(prometheus_url)
    run, rows = load_rows(run_dir, fetch_system, topology)
    header, body = table(rows)
    plot_paths = plot_axes(rows, run_dir / PLOT_DIR) if plots else []
    steps_total = len({r.step.id for r in rows})
    steps_done = len({r.step.id for r in rows if r.status == "done"})
    notes = _notes(rows)

    md = [f"# cephscope report: run {run.get('run_id')}", "",
          f"- spec: `{run.get('spec_path')}`",
          f"- steps: {steps_done} done of {steps_total}", ""]
    md += ["## Steps", "", markdown_table(header, body), ""]
    if plot_paths:
        md += ["## Plots", ""]
        md += [f"![{p.stem}]({PLOT_DIR}/{p.name})" for p in plot_paths]
        md.append("")
    if notes:
        md += ["## Notes", "", *(f"- {n}" for n in notes), ""]
    md_path = run_dir / "report.md"
    atomic_write_text(md_path, "\n".join(md))

    h = ["<!doctype html><html><head><meta charset='utf-8'>",
         f"<title>cephscope report {html.escape(str(run.get('run_id')))}</title>",
         "<style>body{font-family:sans-serif}table{border-collapse:collapse;font-size:12px}"
         "td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}"
         "td:last-child{text-align:left}</style></head><body>",
         f"<h1>cephscope report: run {html.escape(str(run.get('run_id')))}</h1>",
         f"<p>spec: <code>{html.escape(str(run.get('spec_path')))}</code>; "
         f"steps: {steps_done} done of {steps_total}</p>", "<table><tr>"]
    h += [f"<th>{html.escape(c)}</th>" for c in header]
    h.append("</tr>")
    for row in body:
        h.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>")
    h.append("</table>")
    h += [f"<p><img src='{PLOT_DIR}/{html.escape(p.name)}'></p>" for p in plot_paths]
    if notes:
        h.append("<ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in notes) + "</ul>")
    h.append("</body></html>")
    html_path = run_dir / "report.html"
    atomic_write_text(html_path, "\n".join(h))
    return Report(md_path, html_path, plot_paths, rows)


def _notes(rows: Iterable[Row]) -> list[str]:
    notes = []
    rows = list(rows)
    if any(r.step.benchmark == "radosbench" and r.status == "done" for r in rows):
        notes.append("rados bench reports no latency percentiles (no histogram): p50/p99 "
                     "columns are empty for its steps; see the OSD latency histograms in "
                     "Prometheus for distributions.")
    if any(r.system.available for r in rows):
        notes.append("System columns are means of Prometheus rate()s over each mode's own "
                     "window (from the step's recorded mode start/end); a mode shorter than "
                     "the rate window blends with the phase before it.")
    if any(r.system.available and not r.system.osd_devices_only for r in rows):
        notes.append("Disk and NIC columns cover every device of the hosts (the OSDs' devices "
                     "were not known): pass --prometheus-url so the exporter's "
                     "cephscope_osd_device_info / cephscope_osd_network_info narrow them.")
    if any(r.status == "done" and not r.system.available for r in rows):
        notes.append("Steps without system metrics: the run had no Prometheus URL; pass "
                     "--prometheus-url to `cephscope report` to pull them for the step windows.")
    errors = sorted({e for r in rows for e in r.system.errors})
    if errors:
        notes.append("Prometheus queries that failed: " + "; ".join(errors[:5]))
    return notes
