"""Several runs against one baseline (CBT compares up to six runs): each run compared to the
first with the two-run statistics (`compare`: means, ratio, Welch's t-test across iterations,
verdicts) and its environment diffed against the baseline's; rendered as one table with a
column per run, in md, JSON or CSV.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from cephscope.runner.report.compare import (
    FIGURES,
    Comparison,
    FigureComparison,
    compare_samples,
    environment_changes,
    load_samples,
)

MAX_RUNS = 6  # the baseline and five more, as CBT's comparison report


@dataclass
class RunAgainstBaseline:
    """One run compared to the baseline."""

    run: Path
    label: str
    comparisons: list[Comparison]
    only_in_baseline: list[str]
    only_in_run: list[str]
    environment: list[dict[str, Any]] | None  # None: a side has no capture

    def figure(self, params: str, mode: str, figure: str) -> FigureComparison | None:
        for c in self.comparisons:
            if c.params == params and c.mode == mode:
                return next((f for f in c.figures if f.figure == figure), None)
        return None


@dataclass
class ManyComparison:
    baseline: Path
    baseline_label: str
    runs: list[RunAgainstBaseline]
    threshold_percent: float
    alpha: float

    def lines(self) -> list[tuple[str, str, str]]:
        """(params, mode, figure) of every figure some run was compared on, in the baseline's
        step order, figures in FIGURES' order."""
        keys: list[tuple[str, str]] = []
        for r in self.runs:
            for c in r.comparisons:
                if (c.params, c.mode) not in keys:
                    keys.append((c.params, c.mode))
        return [(params, mode, name) for params, mode in keys for name in FIGURES
                if any(r.figure(params, mode, name) for r in self.runs)]

    @property
    def all_comparisons(self) -> list[Comparison]:
        return [c for r in self.runs for c in r.comparisons]


def run_labels(paths: Sequence[Path]) -> list[str]:
    """A short column name per run: its dir name, numbered where two share one."""
    names = [p.resolve().name or str(p) for p in paths]
    return [f"{i + 1}:{n}" if names.count(n) > 1 else n for i, n in enumerate(names)]


def compare_many(baseline: Path, runs: Sequence[Path], threshold_percent: float,
                 alpha: float) -> ManyComparison:
    """Every run against the baseline; ResultsError when a run dir is not one."""
    labels = run_labels([baseline, *runs])
    samples_a, labels_a = load_samples(baseline)
    out = []
    for path, label in zip(runs, labels[1:], strict=True):
        samples_b, labels_b = load_samples(path)
        comparisons, only_a, only_b = compare_samples(samples_a, labels_a, samples_b, labels_b,
                                                      threshold_percent, alpha)
        out.append(RunAgainstBaseline(path, label, comparisons, only_a, only_b,
                                      environment_changes(baseline, path)))
    # the baseline's step order: a key's position in its samples
    order = {labels_a[key]: i for i, (key, _mode) in enumerate(samples_a)}
    for r in out:
        r.comparisons.sort(key=lambda c: order.get(c.params, len(order)))
    return ManyComparison(baseline, labels[0], out, threshold_percent, alpha)


def _mean_text(figure: str, value: float) -> str:
    return f"{value:,.0f}" if figure == "iops" else f"{value * 1e3:.3f}"


def _cell(f: FigureComparison | None) -> str:
    if f is None:
        return "-"
    parts = [f"{f.ratio:.3f}" if f.ratio is not None else "-"]
    if f.p_value is not None:
        parts.append(f"p {f.p_value:.3g}")
    parts.append(f.verdict)
    return f"{_mean_text(f.figure, f.mean_b)} ({', '.join(parts)})"


def environment_table(many: ManyComparison) -> tuple[list[str], list[list[str]]] | None:
    """setting | baseline | each run: every setting that differs from the baseline in some
    run ("=" where a run has the baseline's value); None when no run has a capture to diff."""
    if all(r.environment is None for r in many.runs):
        return None
    paths: list[str] = []
    base: dict[str, Any] = {}
    for r in many.runs:
        for change in r.environment or []:
            if change["path"] not in paths:
                paths.append(change["path"])
                base[change["path"]] = change["a"]
    body = []
    for path in paths:
        line = [f"`{path}`", str(base[path])]
        for r in many.runs:
            if r.environment is None:
                line.append("no capture")
                continue
            change = next((c for c in r.environment if c["path"] == path), None)
            line.append("=" if change is None else str(change["b"]))
        body.append(line)
    return ["setting", many.baseline_label, *(r.label for r in many.runs)], body


def _md_table(header: Sequence[str], body: Sequence[Sequence[str]]) -> list[str]:
    def esc(cell: str) -> str:
        return cell.replace("|", "\\|").replace("\n", " ")

    return ["| " + " | ".join(esc(h) for h in header) + " |",
            "|" + "|".join("---" for _h in header) + "|",
            *("| " + " | ".join(esc(c) for c in line) + " |" for line in body)]


ENV_LIMIT = 50


def render_md(many: ManyComparison) -> str:
    out = [f"# {len(many.runs)} run(s) against baseline {many.baseline_label} "
           f"({many.baseline})", ""]
    env = environment_table(many)
    out += ["## Environment", ""]
    if env is None:
        out += ["no environment capture to compare", ""]
    elif not env[1]:
        out += ["no difference in the captured environment", ""]
    else:
        header, body = env
        out += [f"{len(body)} setting(s) differ from the baseline in some run (host settings "
                "first; = the baseline's value):", ""]
        out += _md_table(header, body[:ENV_LIMIT])
        if len(body) > ENV_LIMIT:
            out.append(f"| … {len(body) - ENV_LIMIT} more (see --format json) |"
                       + " |" * (len(header) - 1))
        out.append("")
    out += ["## Results", "",
            f"baseline: mean (n); each run: mean (run/baseline, Welch's p across iterations, "
            f"verdict); IOPS, or latency in ms; regression = worse by more than "
            f"{many.threshold_percent:g}% and p < {many.alpha:g}", ""]
    header = ["params", "mode", "figure", many.baseline_label, *(r.label for r in many.runs)]
    body = []
    for params, mode, name in many.lines():
        found = [r.figure(params, mode, name) for r in many.runs]
        first = next(f for f in found if f is not None)
        body.append([params, mode, FIGURES[name][0],
                     f"{_mean_text(name, first.mean_a)} ({first.n_a})",
                     *(_cell(f) for f in found)])
    out += _md_table(header, body)
    out.append("")
    for r in many.runs:
        figures = [f for c in r.comparisons for f in c.figures]
        regressed = sum(1 for f in figures if f.verdict == "regression")
        untestable = sum(1 for f in figures if f.verdict.startswith("cannot tell"))
        line = (f"- {r.label}: {regressed} of {len(figures)} figures regressed (step/mode "
                f"pairs: {len(r.comparisons)})")
        if untestable:
            line += (f"; {untestable} changed by more than {many.threshold_percent:g}% but "
                     "cannot be tested (fewer than 2 iterations on a side)")
        if r.only_in_baseline:
            line += f"; only in the baseline: {'; '.join(r.only_in_baseline)}"
        if r.only_in_run:
            line += f"; only in {r.label}: {'; '.join(r.only_in_run)}"
        out.append(line)
    return "\n".join(out) + "\n"


def render_json(many: ManyComparison) -> str:
    return json.dumps({
        "threshold_percent": many.threshold_percent, "alpha": many.alpha,
        "baseline": {"run": str(many.baseline), "label": many.baseline_label},
        "runs": [{"run": str(r.run), "label": r.label, "environment": r.environment,
                  "comparisons": [asdict(c) for c in r.comparisons],
                  "only_in_baseline": r.only_in_baseline, "only_in_run": r.only_in_run}
                 for r in many.runs],
    }, indent=2) + "\n"


def render_csv(many: ManyComparison) -> str:
    """One row per (params, mode, figure): the baseline's mean and n, then per run its mean,
    ratio, p and verdict (empty where the run has no such step)."""
    buf = io.StringIO()
    writer = csv.writer(buf)
    header = ["params", "mode", "figure", f"n {many.baseline_label}",
              f"mean {many.baseline_label}"]
    for r in many.runs:
        header += [f"n {r.label}", f"mean {r.label}", f"ratio {r.label}", f"p {r.label}",
                   f"verdict {r.label}"]
    writer.writerow(header)
    for params, mode, name in many.lines():
        found = [r.figure(params, mode, name) for r in many.runs]
        first = next(f for f in found if f is not None)
        line: list[Any] = [params, mode, FIGURES[name][0], first.n_a, first.mean_a]
        for f in found:
            line += (["", "", "", "", ""] if f is None else
                     [f.n_b, f.mean_b, "" if f.ratio is None else f.ratio,
                      "" if f.p_value is None else f.p_value, f.verdict])
        writer.writerow(line)
    return buf.getvalue()
