"""Drawing response curves: latency (mean, and p99 where every point has one) against IOPS,
one line per curve, each point labelled with its load value, error bars of the iterations' sd
on both axes, the knee a star. A run's report draws one figure per (benchmark, mode, load axis)
with a line per configuration; `compare` one per configuration with a line per run."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cephscope.runner.report.curves import P99_OSD, CurvePoint, ResponseCurve
from cephscope.runner.report.plots import _pyplot, _save
from cephscope.runner.steps import format_value


def _draw(ax: Any, label: str, curve: ResponseCurve, latency: Any, colour: Any) -> None:
    points = [p for p in curve.points if latency(p) is not None]
    xs = [p.iops.mean for p in points]
    ys = [latency(p).mean * 1e3 for p in points]
    xerr = [p.iops.sd or 0.0 for p in points]
    yerr = [(latency(p).sd or 0.0) * 1e3 for p in points]
    ax.errorbar(xs, ys, xerr=xerr, yerr=yerr, marker="o", markersize=4, capsize=2,
                color=colour, label=label)
    for p, x, y in zip(points, xs, ys, strict=True):
        ax.annotate(format_value(p.load), (x, y), textcoords="offset points", xytext=(4, 4),
                    fontsize=7, color=colour)
    knee = curve.knee
    if knee is not None and latency(curve.points[knee]) is not None:
        p = curve.points[knee]
        ax.plot([p.iops.mean], [latency(p).mean * 1e3], marker="*", markersize=16,
                color=colour, markeredgecolor="black", linestyle="none")


def _mean(p: CurvePoint) -> Any:
    return p.latency


def _p99(p: CurvePoint) -> Any:
    return p.p99


def draw_curves(lines: Sequence[tuple[str, ResponseCurve]], title: str, out_dir: Path,
                name: str) -> Path:
    """One PNG: a pane of mean latency against IOPS and, when some line has p99s, a pane of
    p99 against IOPS; the knee of every line a star."""
    plt = _pyplot()
    with_p99 = [(label, c) for label, c in lines if c.p99_source is not None]
    fig, panes = plt.subplots(1, 2 if with_p99 else 1, figsize=(11 if with_p99 else 6.5, 4.6),
                              squeeze=False)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (label, curve) in enumerate(lines):
        colour = colours[i % len(colours)]
        _draw(panes[0][0], label, curve, _mean, colour)
        if with_p99 and curve.p99_source is not None:
            side = " (OSD-side)" if curve.p99_source == P99_OSD else ""
            _draw(panes[0][1], label + side, curve, _p99, colour)
    titles = ["mean latency", "p99 latency"] if with_p99 else ["mean latency"]
    load = lines[0][1].label if lines else ""
    for ax, pane_title in zip(panes[0], titles, strict=True):
        ax.set_xlabel("IOPS")
        ax.set_ylabel(f"{pane_title} (ms)")
        ax.set_title(f"{pane_title} against IOPS (points: {load}; star: knee)", fontsize=9)
        ax.grid(True, alpha=0.3)
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    return _save(fig, out_dir, name)


def plot_response_curves(curves: Sequence[ResponseCurve], out_dir: Path) -> list[Path]:
    """A run's curves: per (benchmark, mode, load axis), a line per configuration."""
    figures: dict[tuple[str, str, str], list[ResponseCurve]] = {}
    for c in curves:
        figures.setdefault((c.benchmark, c.mode, c.label), []).append(c)
    written = []
    for (benchmark, mode, label), members in figures.items():
        lines = [(", ".join(f"{k}={v}" for k, v in c.configuration) or "all", c)
                 for c in members]
        written.append(draw_curves(lines, f"{benchmark} {mode}: response as {label} rises",
                                   out_dir, f"response-{benchmark}-{mode}-{label}"))
    return written
