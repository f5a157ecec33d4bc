"""Comparing runs: B against baseline A, per step (same params; all iterations of it together)
and mode: the mean of every figure (IOPS, average and p99 latency) on each side, B/A, and
Welch's t-test across the iterations; and what differs between the two runs' environments.

A figure regressed when it moved the bad way (IOPS down, latency up) by more than the threshold
AND the t-test calls the difference significant (p < alpha). With fewer than 2 iterations on a
side there is no test: a change beyond the threshold is "cannot tell (worse)" or "cannot tell
(better)". `cephscope compare` (runner/compare_cli.py) renders it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cephscope.runner.environment import diff as environment_diff
from cephscope.runner.results import RunDir
from cephscope.runner.stats import NotEnoughSamples, welch
from cephscope.runner.steps import Step

DEFAULT_THRESHOLD_PERCENT = 10.0
DEFAULT_ALPHA = 0.05

# figure -> (label, True when higher is better)
FIGURES: Mapping[str, tuple[str, bool]] = {
    "iops": ("IOPS", True),
    "latency_avg_seconds": ("avg latency", False),
    "latency_p99_seconds": ("p99 latency", False),
}


def _p99(result: Mapping[str, Any]) -> float | None:
    pct = result.get("latency_percentiles_seconds") or {}
    value = pct.get("99", pct.get("99.0"))
    return float(value) if isinstance(value, int | float) else None


def _figure(result: Mapping[str, Any], key: str) -> float | None:
    if key == "latency_p99_seconds":
        return _p99(result)
    value = result.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def params_key(step: Step) -> str:
    """Identifies a step's parameters whatever its iteration (iterations are grouped)."""
    d = step.to_dict()
    d.pop("id", None)
    d.pop("iteration", None)
    return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:12]


def load_samples(run_dir: Path) -> tuple[dict[tuple[str, str], dict[str, list[float]]],
                                         dict[str, str]]:
    """(params key, mode) -> figure -> one value per finished iteration; and params key ->
    human-readable params."""
    rd = RunDir(Path(run_dir))
    samples: dict[tuple[str, str], dict[str, list[float]]] = {}
    labels: dict[str, str] = {}
    for step in rd.steps():
        result = rd.step_result(step)
        if result is not None:
            add_samples(samples, labels, step, result)
    return samples, labels


def add_samples(samples: dict[tuple[str, str], dict[str, list[float]]], labels: dict[str, str],
                step: Step, result: Mapping[str, Any]) -> None:
    """One finished step's figures, per mode, under the step's params key."""
    key = params_key(step)
    labels[key] = f"{step.benchmark} {step.short_params()}"
    for r in result.get("results", []) or []:
        figures = samples.setdefault((key, str(r.get("mode"))), {})
        for name in FIGURES:
            value = _figure(r, name)
            if value is not None:
                figures.setdefault(name, []).append(value)


@dataclass
class FigureComparison:
    figure: str
    n_a: int
    n_b: int
    mean_a: float
    mean_b: float
    ratio: float | None  # mean B / mean A
    change_percent: float | None  # bad direction positive (IOPS lost, latency gained)
    p_value: float | None  # Welch, two-sided; None with < 2 iterations on a side
    # "ok" | "regression" | "improvement" | "not significant" | "cannot tell (worse|better)"
    verdict: str


@dataclass
class Comparison:
    params: str
    mode: str
    figures: list[FigureComparison] = field(default_factory=list)

    @property
    def regressions(self) -> list[FigureComparison]:
        return [f for f in self.figures if f.verdict == "regression"]

    @property
    def untestable(self) -> list[FigureComparison]:
        return [f for f in self.figures if f.verdict == "cannot tell (worse)"]


def compare_figure(name: str, a: Sequence[float], b: Sequence[float], threshold_percent: float,
                   alpha: float) -> FigureComparison:
    mean_a, mean_b = sum(a) / len(a), sum(b) / len(b)
    higher_better = FIGURES[name][1]
    ratio = mean_b / mean_a if mean_a else None
    change = None if ratio is None else ((1 - ratio) if higher_better else (ratio - 1)) * 100
    try:
        p: float | None = welch(a, b, alpha).p
    except NotEnoughSamples:
        p = None
    beyond = change is not None and abs(change) > threshold_percent
    if not beyond:
        verdict = "ok"
    elif p is None:
        verdict = "cannot tell (worse)" if change is not None and change > 0 else "cannot tell (better)"
    elif p >= alpha:
        verdict = "not significant"
    else:
        verdict = "regression" if change is not None and change > 0 else "improvement"
    return FigureComparison(name, len(a), len(b), mean_a, mean_b, ratio, change, p, verdict)


def compare_runs(run_a: Path, run_b: Path, threshold_percent: float = DEFAULT_THRESHOLD_PERCENT,
                 alpha: float = DEFAULT_ALPHA) -> tuple[list[Comparison], list[str], list[str]]:
    """Comparisons of the (params, mode) pairs both runs finished, and the params found only
    in A / only in B."""
    samples_a, labels_a = load_samples(run_a)
    samples_b, labels_b = load_samples(run_b)
    return compare_samples(samples_a, labels_a, samples_b, labels_b, threshold_percent, alpha)


Samples = dict[tuple[str, str], dict[str, list[float]]]


def compare_samples(samples_a: Samples, labels_a: Mapping[str, str], samples_b: Samples,
                    labels_b: Mapping[str, str], threshold_percent: float, alpha: float,
                    ) -> tuple[list[Comparison], list[str], list[str]]:
    comparisons = []
    for (key, mode), figures_b in samples_b.items():
        figures_a = samples_a.get((key, mode))
        if figures_a is None:
            continue
        c = Comparison(labels_b[key], mode)
        for name in FIGURES:
            if figures_a.get(name) and figures_b.get(name):
                c.figures.append(compare_figure(name, figures_a[name], figures_b[name],
                                                threshold_percent, alpha))
        comparisons.append(c)
    only_a = sorted(labels_a[k] for k in set(labels_a) - set(labels_b))
    only_b = sorted(labels_b[k] for k in set(labels_b) - set(labels_a))
    return comparisons, only_a, only_b


def environment_changes(run_a: Path, run_b: Path) -> list[dict[str, Any]] | None:
    """What differs between the runs' captured environments (None: a run has no capture)."""
    env_a, env_b = RunDir(Path(run_a)).read_environment(), RunDir(Path(run_b)).read_environment()
    if env_a is None or env_b is None:
        return None
    return environment_diff(env_a, env_b)
