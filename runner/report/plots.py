"""Plots of a run's report (matplotlib, Agg): per sweep axis line plots, annotated heatmaps for
every pair of swept axes, the OSD thread-group CPU split per step, and per-core CPU busy per
step. Iterations of a step are averaged. Every function returns the PNG files it wrote.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cephscope.runner.steps import axis_labels, format_value

if TYPE_CHECKING:
    from cephscope.runner.report.build import Row


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _numeric(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    try:
        return float(str(value))
    except ValueError:
        return None


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_.=" else "_" for c in text)


def _groups(rows: Sequence[Row]) -> dict[tuple[str, str], list[Row]]:
    groups: dict[tuple[str, str], list[Row]] = {}
    for r in rows:
        if r.status == "done" and r.figure("iops") is not None:
            groups.setdefault((r.step.benchmark, r.mode or ""), []).append(r)
    return groups


def _swept(members: Sequence[Row], labels: dict[str, str]) -> list[str]:
    return [a for a in labels if len({format_value(r.step.axes.get(a)) for r in members}) > 1]


def _ordered(values: set[Any]) -> list[Any]:
    """Axis values in numeric order when all are numbers, else as strings."""
    if all(_numeric(v) is not None for v in values):
        return sorted(values, key=lambda v: _numeric(v) or 0.0)
    return sorted(values, key=format_value)


# Unit of a swept knob or benchmark parameter, by its label (what the x axis is measured in).
AXIS_UNITS: dict[str, str] = {
    "op_size": "bytes", "object_size": "bytes", "block_size": "bytes", "bs": "bytes",
    "size": "bytes", "concurrent_ops": "ops in flight", "iodepth": "I/Os in flight",
    "numjobs": "jobs", "time": "s", "runtime": "s", "osd_op_num_shards": "shards per OSD",
    "osd_op_num_threads_per_shard": "threads per shard", "osd_ra": "KiB", "read_ahead_kb": "KiB",
    "iosched/read_expire": "ms", "read_expire": "ms", "nr_requests": "requests",
}


def axis_title(label: str) -> str:
    """The x axis title: the knob's name and, where known, its unit."""
    unit = AXIS_UNITS.get(label) or AXIS_UNITS.get(label.rsplit(".", 1)[-1])
    return f"{label} ({unit})" if unit else label


def _power_of_two(value: float) -> bool:
    return value >= 1 and float(value).is_integer() and (int(value) & (int(value) - 1)) == 0


def place_axis(ax: Any, values: Sequence[Any]) -> dict[Any, float]:
    """Put the swept values on the x axis as its ticks: a log2 axis when every value is a
    power of two (1, 4, 16: equal steps for equal ratios), else one evenly spaced category per
    value in their order. Returns value -> x position."""
    ordered = _ordered(set(values))
    numbers = [_numeric(v) for v in ordered]
    if len(ordered) > 1 and all(n is not None and _power_of_two(n) for n in numbers):
        ax.set_xscale("log", base=2)
        positions = {v: float(n) for v, n in zip(ordered, numbers, strict=True)}  # type: ignore[arg-type]
    else:
        positions = {v: float(i) for i, v in enumerate(ordered)}
        ax.set_xlim(-0.5, len(ordered) - 0.5)
    ax.set_xticks(list(positions.values()), [format_value(v) for v in ordered])
    ax.minorticks_off()
    return positions


def _save(fig: Any, out_dir: Path, name: str) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{_safe(name)}.png"
    fig.savefig(path, dpi=90)
    _pyplot().close(fig)
    return path


def plot_axes(rows: Sequence[Row], out_dir: Path) -> list[Path]:
    """Per (benchmark, mode) and per sweep axis with >= 2 values: IOPS and latency against that
    axis, one line per combination of the other axes; iterations averaged."""
    plt = _pyplot()
    labels = axis_labels(r.step for r in rows if r.status == "done")
    written: list[Path] = []
    for (benchmark, mode), members in _groups(rows).items():
        axes = _swept(members, labels)
        for axis in axes:
            others = [a for a in axes if a != axis]
            lines: dict[str, dict[Any, list[Row]]] = {}
            for r in members:
                key = ", ".join(f"{labels[o]}={format_value(r.step.axes.get(o))}" for o in others)
                lines.setdefault(key or "all", {}).setdefault(r.step.axes[axis], []).append(r)
            fig, (ax_iops, ax_lat) = plt.subplots(1, 2, figsize=(11, 4.2))
            values = [r.step.axes[axis] for r in members]
            where = place_axis(ax_iops, values)
            place_axis(ax_lat, values)
            for key, points in sorted(lines.items()):
                xs = [v for v in where if v in points]
                pos = [where[x] for x in xs]
                iops = [statistics.fmean(r.figure("iops") or 0 for r in points[x]) for x in xs]
                lat = [statistics.fmean((r.figure("latency_avg_seconds") or 0) * 1e3
                                        for r in points[x]) for x in xs]
                ax_iops.plot(pos, iops, marker="o", label=key)
                ax_lat.plot(pos, lat, marker="o", label=f"{key} avg")
                p99 = [[r.percentile("99") or r.osd_percentile("99") for r in points[x]]
                       for x in xs]
                if all(all(v is not None for v in vals) for vals in p99):
                    ax_lat.plot(pos, [statistics.fmean(v) * 1e3 for v in p99], marker="x",
                                linestyle="--", label=f"{key} p99")
            for ax, ylabel in ((ax_iops, "IOPS"), (ax_lat, "latency (ms)")):
                ax.set_xlabel(axis_title(labels[axis]))
                ax.set_ylabel(ylabel)
                ax.grid(True, alpha=0.3)
                ax.set_ylim(bottom=0)
            ax_iops.legend(fontsize=7)
            ax_lat.legend(fontsize=7)
            fig.suptitle(f"{benchmark} {mode}: IOPS and latency vs {labels[axis]}")
            fig.tight_layout()
            written.append(_save(fig, out_dir, f"{benchmark}-{mode}-vs-{labels[axis]}"))
    return written


# (title, unit, value of a row) of each heatmap metric
HEATMAP_METRICS: Sequence[tuple[str, str, Callable[[Row], float | None]]] = (
    ("IOPS", "IOPS", lambda r: r.figure("iops")),
    ("avg latency", "ms", lambda r: None if r.figure("latency_avg_seconds") is None
     else r.figure("latency_avg_seconds") * 1e3),  # type: ignore[operator]
)


def heatmap_cells(members: Sequence[Row], x_axis: str, y_axis: str,
                  value: Callable[[Row], float | None]
                  ) -> tuple[list[Any], list[Any], list[list[float | None]]]:
    """(x values, y values, grid[y][x] of the mean over iterations, None where no step ran)."""
    xs = _ordered({r.step.axes.get(x_axis) for r in members})
    ys = _ordered({r.step.axes.get(y_axis) for r in members})
    grid: list[list[float | None]] = []
    for y in ys:
        line: list[float | None] = []
        for x in xs:
            found = [v for r in members if r.step.axes.get(x_axis) == x
                     and r.step.axes.get(y_axis) == y and (v := value(r)) is not None]
            line.append(statistics.fmean(found) if found else None)
        grid.append(line)
    return xs, ys, grid


def plot_heatmaps(rows: Sequence[Row], out_dir: Path) -> list[Path]:
    """For every pair of swept axes, per (benchmark, mode) and per combination of the remaining
    swept axes' values: an IOPS and a latency heatmap, each cell annotated with its value."""
    plt = _pyplot()
    labels = axis_labels(r.step for r in rows if r.status == "done")
    written: list[Path] = []
    for (benchmark, mode), members in _groups(rows).items():
        axes = _swept(members, labels)
        for x_axis, y_axis in itertools.combinations(axes, 2):
            rest = [a for a in axes if a not in (x_axis, y_axis)]
            slices: dict[tuple[str, ...], list[Row]] = {}
            for r in members:
                slices.setdefault(tuple(format_value(r.step.axes.get(a)) for a in rest), []).append(r)
            for rest_values, part in sorted(slices.items()):
                fixed = ", ".join(f"{labels[a]}={v}" for a, v in zip(rest, rest_values, strict=True))
                fig, panes = plt.subplots(1, len(HEATMAP_METRICS), figsize=(11, 4.4))
                for ax, (title, unit, value) in zip(panes, HEATMAP_METRICS, strict=True):
                    xs, ys, grid = heatmap_cells(part, x_axis, y_axis, value)
                    data = [[float("nan") if v is None else v for v in line] for line in grid]
                    image = ax.imshow(data, cmap="viridis", aspect="auto", origin="lower")
                    ax.set_xticks(range(len(xs)), [format_value(x) for x in xs])
                    ax.set_yticks(range(len(ys)), [format_value(y) for y in ys])
                    ax.set_xlabel(axis_title(labels[x_axis]))
                    ax.set_ylabel(axis_title(labels[y_axis]))
                    ax.set_title(f"{title} ({unit})")
                    finite = [v for line in grid for v in line if v is not None]
                    middle = (min(finite) + max(finite)) / 2 if finite else 0.0
                    for yi, line in enumerate(grid):
                        for xi, v in enumerate(line):
                            if v is not None:
                                ax.text(xi, yi, f"{v:,.0f}" if unit == "IOPS" else f"{v:.2f}",
                                        ha="center", va="center", fontsize=8,
                                        color="black" if v > middle else "white")
                    fig.colorbar(image, ax=ax)
                fig.suptitle(f"{benchmark} {mode}: {labels[x_axis]} x {labels[y_axis]}"
                             + (f" ({fixed})" if fixed else ""))
                fig.tight_layout()
                suffix = "-" + "-".join(f"{labels[a]}={v}" for a, v in
                                        zip(rest, rest_values, strict=True)) if rest else ""
                written.append(_save(fig, out_dir, f"heatmap-{benchmark}-{mode}-{labels[x_axis]}"
                                                  f"-x-{labels[y_axis]}{suffix}"))
    return written


def row_label(r: Row) -> str:
    return f"{r.step.id[:6]} {r.mode or ''}".strip()


def plot_thread_groups(rows: Sequence[Row], out_dir: Path, top: int = 8) -> list[Path]:
    """Stacked bars: per (step, mode), the OSDs' CPU seconds per second by thread group (all
    OSDs together); the `top` busiest groups by name, the rest as "other"."""
    plt = _pyplot()
    done = [r for r in rows if r.status == "done" and r.system.thread_groups]
    if not done:
        return []
    totals: dict[str, float] = {}
    for r in done:
        for group, value in r.system.thread_group_totals().items():
            totals[group] = totals.get(group, 0.0) + value
    named = [g for g, _v in sorted(totals.items(), key=lambda kv: -kv[1])[:top]]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.55 * len(done) + 3), 4.6))
    bottoms = [0.0] * len(done)
    for group in [*named, "other"]:
        heights = []
        for r in done:
            split = r.system.thread_group_totals()
            heights.append(split.get(group, 0.0) if group != "other"
                           else sum(v for g, v in split.items() if g not in named))
        if any(heights):
            ax.bar(range(len(done)), heights, bottom=bottoms, label=group)
            bottoms = [b + h for b, h in zip(bottoms, heights, strict=True)]
    ax.set_xticks(range(len(done)), [row_label(r) for r in done], rotation=60, ha="right",
                  fontsize=7)
    ax.set_ylabel("CPU seconds per second (cores)")
    ax.set_title("OSD CPU by thread group per step")
    ax.legend(fontsize=7, ncol=2)
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    return [_save(fig, out_dir, "osd-thread-groups")]


def plot_cores(rows: Sequence[Row], out_dir: Path) -> list[Path]:
    """Heatmap: per (step, mode) row and per core (host:cpu) column, the core's busy %."""
    plt = _pyplot()
    done = [r for r in rows if r.status == "done" and r.system.cores]
    if not done:
        return []
    cores = sorted({c for r in done for c in r.system.cores},
                   key=lambda hc: (hc[0], _numeric(hc[1]) or 0.0, hc[1]))
    data = [[r.system.cores.get(c, float("nan")) * 100 for c in cores] for r in done]
    fig, ax = plt.subplots(figsize=(max(5.0, 0.6 * len(cores) + 3), max(3.0, 0.32 * len(done) + 1.5)))
    image = ax.imshow(data, cmap="magma", vmin=0, vmax=100, aspect="auto")
    ax.set_xticks(range(len(cores)), [f"{h}:{c}" if len({x[0] for x in cores}) > 1 else f"cpu{c}"
                                      for h, c in cores], rotation=45, ha="right", fontsize=7)
    ax.set_yticks(range(len(done)), [row_label(r) for r in done], fontsize=7)
    for yi, line in enumerate(data):
        for xi, v in enumerate(line):
            if v == v:  # not NaN
                ax.text(xi, yi, f"{v:.0f}", ha="center", va="center", fontsize=7,
                        color="white" if v < 60 else "black")
    ax.set_title("busy % per CPU core per step")
    fig.colorbar(image, ax=ax, label="busy %")
    fig.tight_layout()
    return [_save(fig, out_dir, "cpu-cores")]
