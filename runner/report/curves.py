"""Response ("hockey-stick") curves: latency against IOPS as a load axis rises, one curve per
configuration (every other swept axis held), with the knee marked.

A load axis is a swept benchmark parameter that the benchmark class lists in its
`load_parameters` (rados bench `concurrent_ops`, fio `iodepth`, `numjobs`, ...): the one place
the report and `compare` learn which axes raise load. Each point of a curve is one value of the
load axis, its figures the mean over the step's iterations with their spread (sample sd).

The knee is the point of maximum power, IOPS / mean latency (Kleinrock's "power": throughput
per unit of delay, the optimal operating point of a queue). Moving from one load to the next
raises power exactly when IOPS grows by a larger factor than mean latency does, so the knee is
the last load step that still bought more throughput than it cost in latency. For closed-loop
load (N ops in flight, Little's law N = IOPS x latency) power is IOPS^2 / N: it rises while
IOPS grows faster than the square root of the load, and falls once the system saturates and
more ops in flight only queue. Unlike Kneedle it needs no normalisation to the range swept
(adding a point far out does not move the knee) and no sensitivity setting, and it is defined
from two points on. With two points it only says which of the two is the better operating
point; a knee at the highest load swept means it was not reached (sweep further), one at the
lowest means latency grew faster than IOPS from the start (sweep lower). Ties go to the lower
load (the same power at less latency).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cephscope.runner.benchmarks import BENCHMARKS
from cephscope.runner.benchmarks.base import Benchmark
from cephscope.runner.results import atomic_write_json, atomic_write_text
from cephscope.runner.stats import summarize
from cephscope.runner.steps import Step, axis_labels, format_value

if TYPE_CHECKING:
    from cephscope.runner.report.build import Row

CSV_FILE = "response-curves.csv"
JSON_FILE = "response-curves.json"
# what a curve's p99 is: the benchmark's own, else the OSDs' histograms (rados bench has none)
P99_CLIENT, P99_OSD = "client", "OSD-side"


def load_axes(steps: Iterable[Step],
              benchmarks: Mapping[str, type[Benchmark]] = BENCHMARKS) -> list[str]:
    """The steps' axes that raise load (`<benchmark>.<param>` with the param in the
    benchmark's `load_parameters`), in the order they first appear."""
    found: list[str] = []
    for step in steps:
        cls = benchmarks.get(step.benchmark)
        if cls is None:
            continue
        for axis in step.axes:
            bench, _, param = axis.partition(".")
            if bench == step.benchmark and param in cls.load_parameters and axis not in found:
                found.append(axis)
    return found


@dataclass(frozen=True)
class Spread:
    """A figure over a point's iterations: mean, sample sd (None with one), how many."""

    mean: float
    sd: float | None
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread | None:
        if not values:
            return None
        s = summarize(values)
        return cls(s.mean, s.sd, s.n)

    def to_dict(self) -> dict[str, Any]:
        return {"mean": self.mean, "sd": self.sd, "n": self.n}


@dataclass(frozen=True)
class CurvePoint:
    """One load value of a curve: the steps (iterations) measured there and their figures."""

    load: Any
    steps: tuple[str, ...]
    iops: Spread
    latency: Spread  # mean latency, seconds
    p99: Spread | None  # seconds

    @property
    def power(self) -> float:
        """IOPS per second of mean latency (0 when latency is 0: no figure to rank)."""
        return self.iops.mean / self.latency.mean if self.latency.mean > 0 else 0.0


def knee_index(points: Sequence[CurvePoint]) -> int | None:
    """The index of maximum power (IOPS / mean latency); the lower load on a tie; None for
    fewer than two points."""
    if len(points) < 2:
        return None
    best = 0
    for i, p in enumerate(points):
        if p.power > points[best].power:
            best = i
    return best


@dataclass(frozen=True)
class ResponseCurve:
    benchmark: str
    mode: str
    axis: str  # the step axis, e.g. "librbdfio.iodepth"
    label: str  # its short label, e.g. "iodepth"
    configuration: tuple[tuple[str, str], ...]  # (label, value) of every other swept axis
    points: tuple[CurvePoint, ...]  # by rising load
    p99_source: str | None  # P99_CLIENT, P99_OSD, or None when some point has none

    @property
    def knee(self) -> int | None:
        return knee_index(self.points)

    @property
    def name(self) -> str:
        """benchmark, mode and the configuration it holds."""
        held = ", ".join(f"{k}={v}" for k, v in self.configuration)
        return f"{self.benchmark} {self.mode}" + (f" ({held})" if held else "")

    def knee_text(self) -> str:
        """Where the knee is and what the step past it bought, in one sentence."""
        k = self.knee
        if k is None:
            return f"{self.name}: fewer than two load values: no curve"
        p = self.points[k]
        text = (f"{self.name}: knee at {self.label}={format_value(p.load)}: "
                f"{p.iops.mean:,.0f} IOPS at {p.latency.mean * 1e3:.2f} ms mean latency "
                f"(maximum IOPS / latency)")
        if k + 1 < len(self.points):
            after = self.points[k + 1]
            text += (f"; {self.label}={format_value(after.load)} gives "
                     f"{_change(p.iops.mean, after.iops.mean)} IOPS for "
                     f"{_change(p.latency.mean, after.latency.mean)} latency")
        if len(self.points) == 2:
            text += "; two points: which of the two is the better operating point, no more"
        elif k == len(self.points) - 1:
            text += "; not reached: IOPS still grew faster than latency at the highest load " \
                    "swept (sweep further)"
        elif k == 0:
            text += "; latency grew faster than IOPS from the lowest load swept (sweep lower)"
        return text

    def to_dict(self) -> dict[str, Any]:
        knee = self.knee
        return {
            "benchmark": self.benchmark, "mode": self.mode, "load_axis": self.axis,
            "load_label": self.label, "configuration": dict(self.configuration),
            "p99_source": self.p99_source, "knee_index": knee,
            "knee_load": None if knee is None else self.points[knee].load,
            "knee": self.knee_text(),
            "points": [{"load": p.load, "steps": list(p.steps), "iops": p.iops.to_dict(),
                        "latency_avg_seconds": p.latency.to_dict(),
                        "latency_p99_seconds": p.p99.to_dict() if p.p99 else None,
                        "iops_per_latency_second": p.power, "knee": i == knee}
                       for i, p in enumerate(self.points)],
        }


def _change(before: float, after: float) -> str:
    return f"{(after / before - 1) * 100:+.0f}%" if before else "n/a"


def _order_key(value: Any) -> tuple[int, float, str]:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return (0, float(value), "")
    return (1, 0.0, format_value(value))


def _p99(rows: Sequence[Row]) -> tuple[str | None, list[float]]:
    client = [r.percentile("99") for r in rows]
    if all(v is not None for v in client):
        return P99_CLIENT, [float(v) for v in client if v is not None]
    osd = [r.osd_percentile("99") for r in rows]
    if all(v is not None for v in osd):
        return P99_OSD, [float(v) for v in osd if v is not None]
    return None, []


def curve_points(rows_by_load: Mapping[Any, Sequence[Row]]
                 ) -> tuple[list[CurvePoint], str | None]:
    """The points of one curve (load value -> its rows, one per iteration) by rising load,
    and where their p99 comes from. A load value whose rows lack IOPS or mean latency is
    left out."""
    points: list[CurvePoint] = []
    sources: set[str | None] = set()
    for load in sorted(rows_by_load, key=_order_key):
        rows = [r for r in rows_by_load[load]
                if r.figure("iops") is not None and r.figure("latency_avg_seconds") is not None]
        iops = Spread.of([r.figure("iops") or 0.0 for r in rows])
        latency = Spread.of([r.figure("latency_avg_seconds") or 0.0 for r in rows])
        if iops is None or latency is None:
            continue
        source, p99 = _p99(rows)
        sources.add(source)
        points.append(CurvePoint(load, tuple(r.step.id for r in rows), iops, latency,
                                 Spread.of(p99)))
    source = sources.pop() if len(sources) == 1 else None
    if source is None:  # p99s of different origins are not drawn as one line
        points = [CurvePoint(p.load, p.steps, p.iops, p.latency, None) for p in points]
    return points, source


def response_curves(rows: Sequence[Row],
                    benchmarks: Mapping[str, type[Benchmark]] = BENCHMARKS
                    ) -> list[ResponseCurve]:
    """Every curve of a run: per (benchmark, mode), per swept load axis, per configuration of
    the other swept axes; only curves of two or more load values."""
    done = [r for r in rows if r.status == "done"]
    labels = axis_labels(r.step for r in done)
    groups: dict[tuple[str, str], list[Row]] = {}
    for r in done:
        groups.setdefault((r.step.benchmark, r.mode or ""), []).append(r)
    curves: list[ResponseCurve] = []
    for (benchmark, mode), members in groups.items():
        swept = [a for a in labels
                 if len({format_value(r.step.axes.get(a)) for r in members}) > 1]
        for axis in load_axes((r.step for r in members), benchmarks):
            if axis not in swept:
                continue
            others = [a for a in swept if a != axis]
            configurations: dict[tuple[tuple[str, str], ...], dict[Any, list[Row]]] = {}
            for r in members:
                held = tuple((labels[a], format_value(r.step.axes.get(a))) for a in others)
                configurations.setdefault(held, {}).setdefault(r.step.axes[axis], []).append(r)
            for held, by_load in configurations.items():
                points, source = curve_points(by_load)
                if len(points) >= 2:
                    curves.append(ResponseCurve(benchmark, mode, axis, labels[axis], held,
                                                tuple(points), source))
    return curves


def _ms(spread: Spread | None) -> str:
    if spread is None:
        return "-"
    text = f"{spread.mean * 1e3:,.2f}"
    return text if spread.sd is None else f"{text} ± {spread.sd * 1e3:,.2f}"


def _count(spread: Spread) -> str:
    text = f"{spread.mean:,.0f}"
    return text if spread.sd is None else f"{text} ± {spread.sd:,.0f}"


def curves_table(curves: Sequence[ResponseCurve]) -> tuple[list[str], list[list[str]]]:
    """One line per point of every curve: the curve, the load, iterations, IOPS, mean and p99
    latency (mean ± sd over the iterations), IOPS per ms of latency, the knee marked."""
    header = ["curve", "load", "n", "IOPS", "lat avg ms", "lat p99 ms", "IOPS per ms",
              "knee"]
    body = []
    for c in curves:
        knee = c.knee
        p99_note = " (OSD-side)" if c.p99_source == P99_OSD else ""
        for i, p in enumerate(c.points):
            body.append([c.name, f"{c.label}={format_value(p.load)}", str(p.iops.n),
                         _count(p.iops), _ms(p.latency), _ms(p.p99) + (p99_note if p.p99 else ""),
                         f"{p.power / 1e3:,.1f}", "knee" if i == knee else ""])
    return header, body


CSV_COLUMNS = ("benchmark", "mode", "load_axis", "configuration", "load", "n", "steps",
               "iops_mean", "iops_sd", "latency_avg_seconds_mean", "latency_avg_seconds_sd",
               "latency_p99_seconds_mean", "latency_p99_seconds_sd", "p99_source",
               "iops_per_latency_second", "knee")


def curves_csv(curves: Sequence[ResponseCurve]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(CSV_COLUMNS)
    for c in curves:
        held = " ".join(f"{k}={v}" for k, v in c.configuration)
        for i, p in enumerate(c.points):
            writer.writerow([c.benchmark, c.mode, c.axis, held, format_value(p.load),
                             p.iops.n, " ".join(p.steps), p.iops.mean, _blank(p.iops.sd),
                             p.latency.mean, _blank(p.latency.sd),
                             _blank(p.p99.mean if p.p99 else None),
                             _blank(p.p99.sd if p.p99 else None), c.p99_source or "",
                             p.power, "1" if i == c.knee else "0"])
    return buf.getvalue()


def _blank(value: float | None) -> Any:
    return "" if value is None else value


def write_curve_data(run_dir: Path, curves: Sequence[ResponseCurve]) -> list[Path]:
    """response-curves.json and .csv beside the report (nothing when the run has no curve;
    old files removed then, so they never describe another report)."""
    paths = [run_dir / JSON_FILE, run_dir / CSV_FILE]
    if not curves:
        for path in paths:
            path.unlink(missing_ok=True)
        return []
    atomic_write_json(paths[0], {"knee": "maximum IOPS / mean latency",
                                 "curves": [c.to_dict() for c in curves]})
    atomic_write_text(paths[1], curves_csv(curves))
    return paths

