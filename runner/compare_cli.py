"""`cephscope compare RUN_A RUN_B`: per matching step (same id = same params and iteration) and
mode, B's IOPS and latency as ratios of A's; `--fail-on-regression PCT` exits 1 when any step
lost more than PCT % IOPS or gained more than PCT % latency (average, or p99 where both have it).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from cephscope.runner.results import ResultsError, RunDir, load_baseline

LATENCY_KEYS = ("latency_avg_seconds", "latency_p99_seconds")


@dataclass
class Comparison:
    step: str
    mode: str
    params: str
    iops_a: float | None
    iops_b: float | None
    ratios: dict[str, float]  # figure -> B / A
    regressions: list[str]


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or a == 0:
        return None
    return b / a


def compare_runs(run_a: Path, run_b: Path, threshold_percent: float | None = None
                 ) -> tuple[list[Comparison], list[str], list[str]]:
    """Comparisons of matching (step, mode) pairs, and the step ids found only in A / only in B."""
    figures_a = load_baseline(run_a)
    figures_b = load_baseline(run_b)
    labels = {s.id: s.short_params() for s in RunDir(run_b).steps()}
    comparisons = []
    for step_id in [s for s in figures_b if s in figures_a]:
        for mode in [m for m in figures_b[step_id] if m in figures_a[step_id]]:
            a: Mapping[str, float] = figures_a[step_id][mode]
            b: Mapping[str, float] = figures_b[step_id][mode]
            ratios = {k: r for k in ("iops", *LATENCY_KEYS)
                      if (r := _ratio(a.get(k), b.get(k))) is not None}
            regressions = []
            if threshold_percent is not None:
                limit = threshold_percent / 100.0
                if "iops" in ratios and ratios["iops"] < 1.0 - limit:
                    regressions.append(f"IOPS {(1 - ratios['iops']) * 100:.1f}% lower")
                for key in LATENCY_KEYS:
                    if key in ratios and ratios[key] > 1.0 + limit:
                        name = "avg latency" if key == "latency_avg_seconds" else "p99 latency"
                        regressions.append(f"{name} {(ratios[key] - 1) * 100:.1f}% higher")
            comparisons.append(Comparison(step_id, mode, labels.get(step_id, ""), a.get("iops"),
                                          b.get("iops"), ratios, regressions))
    only_a = sorted(set(figures_a) - set(figures_b))
    only_b = sorted(set(figures_b) - set(figures_a))
    return comparisons, only_a, only_b


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_a", type=Path, metavar="RUN_A", help="baseline run dir")
    parser.add_argument("run_b", type=Path, metavar="RUN_B", help="run dir compared to it")
    parser.add_argument("--fail-on-regression", type=float, metavar="PCT",
                        help="exit 1 if any step lost more than PCT %% IOPS or its latency "
                             "grew more than PCT %%")


def _cell(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def run(args: argparse.Namespace) -> int:
    threshold = args.fail_on_regression
    if threshold is not None and threshold < 0:
        print("cephscope compare: --fail-on-regression must be >= 0", file=sys.stderr)
        return 2
    try:
        comparisons, only_a, only_b = compare_runs(args.run_a, args.run_b, threshold)
    except ResultsError as exc:
        print(f"cephscope compare: {exc}", file=sys.stderr)
        return 2
    if not comparisons:
        print(f"cephscope compare: no step of {args.run_b} matches a finished step of "
              f"{args.run_a} (steps match by id: same params and iteration)", file=sys.stderr)
        return 2
    header = ("step", "mode", "params", "IOPS A", "IOPS B", "IOPS B/A", "avg lat B/A",
              "p99 B/A", "verdict")
    rows = []
    for c in comparisons:
        verdict = "REGRESSION: " + ", ".join(c.regressions) if c.regressions else "ok"
        rows.append((c.step, c.mode, c.params, _cell(c.iops_a, ",.0f"), _cell(c.iops_b, ",.0f"),
                     _cell(c.ratios.get("iops"), ".3f"),
                     _cell(c.ratios.get("latency_avg_seconds"), ".3f"),
                     _cell(c.ratios.get("latency_p99_seconds"), ".3f"), verdict))
    widths = [max(len(str(r[i])) for r in (header, *rows)) for i in range(len(header))]
    for r in (header, *rows):
        print("  ".join(str(v).ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())
    if only_a:
        print(f"only in A ({len(only_a)}): {' '.join(only_a)}")
    if only_b:
        print(f"only in B ({len(only_b)}): {' '.join(only_b)}")
    regressed = [c for c in comparisons if c.regressions]
    if threshold is not None:
        print(f"{len(regressed)} of {len(comparisons)} step/mode pairs regressed more than "
              f"{threshold:g}%")
        if regressed:
            return 1
    return 0
