"""Plots of `cephscope compare`: the runs overlaid, a line per run. Per (benchmark, mode), sweep
axis and configuration of the other swept axes: IOPS and mean latency against the axis; per
response curve (load axis and configuration): latency against IOPS with each run's knee.
Iterations are averaged (the curves' error bars are their sd)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from cephscope.runner.report.curve_plots import draw_curves
from cephscope.runner.report.curves import ResponseCurve, response_curves
from cephscope.runner.report.plots import _groups, _pyplot, _save, _swept, axis_title, place_axis
from cephscope.runner.steps import axis_labels, format_value

if TYPE_CHECKING:
    from cephscope.runner.report.build import Row

RunRows = tuple[str, Sequence["Row"]]  # (run label, its report rows)


def _held(r: Row, others: Sequence[str], labels: dict[str, str]) -> str:
    return ", ".join(f"{labels[o]}={format_value(r.step.axes.get(o))}" for o in others)


def overlay_axes(runs: Sequence[RunRows], out_dir: Path) -> list[Path]:
    """IOPS and mean latency against every swept axis, one figure per configuration of the
    other axes, a line per run."""
    plt = _pyplot()
    every = [r for _label, rows in runs for r in rows if r.status == "done"]
    labels = axis_labels(r.step for r in every)
    written: list[Path] = []
    for (benchmark, mode), members in _groups(every).items():
        axes = _swept(members, labels)
        for axis in axes:
            others = [a for a in axes if a != axis]
            for held in dict.fromkeys(_held(r, others, labels) for r in members):
                fig, (ax_iops, ax_lat) = plt.subplots(1, 2, figsize=(11, 4.2))
                at = [r for r in members if _held(r, others, labels) == held]
                values = [r.step.axes[axis] for r in at if axis in r.step.axes]
                where = place_axis(ax_iops, values)
                place_axis(ax_lat, values)
                for run_label, rows in runs:
                    mine = [r for r in rows if r.status == "done" and r.step.benchmark == benchmark
                            and (r.mode or "") == mode and axis in r.step.axes
                            and r.figure("iops") is not None and _held(r, others, labels) == held]
                    xs = [v for v in where if any(r.step.axes[axis] == v for r in mine)]
                    if not xs:
                        continue
                    at_x = {x: [r for r in mine if r.step.axes[axis] == x] for x in xs}
                    pos = [where[x] for x in xs]
                    ax_iops.plot(pos, [statistics.fmean(r.figure("iops") or 0.0 for r in at_x[x])
                                       for x in xs], marker="o", label=run_label)
                    ax_lat.plot(pos, [statistics.fmean((r.figure("latency_avg_seconds") or 0.0)
                                                       * 1e3 for r in at_x[x]) for x in xs],
                                marker="o", label=run_label)
                for ax, ylabel in ((ax_iops, "IOPS"), (ax_lat, "mean latency (ms)")):
                    ax.set_xlabel(axis_title(labels[axis]))
                    ax.set_ylabel(ylabel)
                    ax.grid(True, alpha=0.3)
                    ax.set_ylim(bottom=0)
                    ax.legend(fontsize=7)
                fig.suptitle(f"{benchmark} {mode}: runs against {labels[axis]}"
                             + (f" ({held})" if held else ""))
                fig.tight_layout()
                suffix = f"-{held.replace(', ', '-')}" if held else ""
                written.append(_save(fig, out_dir,
                                     f"compare-{benchmark}-{mode}-vs-{labels[axis]}{suffix}"))
    return written


def overlay_curves(runs: Sequence[RunRows], out_dir: Path) -> list[Path]:
    """One figure per response curve some run has (same benchmark, mode, load axis and
    configuration), a line per run that has it, each with its knee."""
    matched: dict[tuple[str, str, str, tuple[tuple[str, str], ...]],
                  list[tuple[str, ResponseCurve]]] = {}
    for run_label, rows in runs:
        for c in response_curves(rows):
            matched.setdefault((c.benchmark, c.mode, c.label, c.configuration), []).append(
                (run_label, c))
    written = []
    for (benchmark, mode, label, configuration), lines in matched.items():
        held = ", ".join(f"{k}={v}" for k, v in configuration)
        suffix = "-" + "-".join(f"{k}={v}" for k, v in configuration) if configuration else ""
        written.append(draw_curves(
            lines, f"{benchmark} {mode}: response as {label} rises" + (f" ({held})" if held
                                                                       else ""),
            out_dir, f"compare-response-{benchmark}-{mode}-{label}{suffix}"))
    return written
