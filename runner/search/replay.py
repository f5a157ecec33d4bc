"""Replay: run a search against the stored results of a full-grid run, over many seeds.

Each ask is answered by a random stored iteration of that candidate. A run shorter than the
stored one is answered with the stored deviation from the candidate's mean widened by
sqrt(stored seconds / asked seconds) (noise of a mean over fewer seconds), so short runs are
noisier in the replay as they are on a cluster. The figures are those the search is judged by:
in how many seeds it ends within x % of the grid's best (by grid mean), and the steps and
benchmark-seconds it took until its choice stayed there, against the grid's own cost.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cephscope.runner.search.engine import Outcome, Search, metric_key
from cephscope.runner.search.measure import result_metrics
from cephscope.runner.search.settings import Objective, SearchSettings
from cephscope.runner.search.space import Candidate, Space, label


class ReplayError(ValueError):
    pass


@dataclass
class GridTable:
    """A full grid: every candidate's stored iterations (metrics per iteration)."""

    space: Space
    runs: dict[Candidate, list[dict[str, float]]]
    full_seconds: int
    name: str = "grid"

    def mean(self, candidate: Candidate, key: str) -> float:
        vals = [r[key] for r in self.runs[candidate] if key in r]
        return sum(vals) / len(vals) if vals else math.nan

    def grid_cost(self) -> tuple[int, float, int]:
        """Steps, benchmark-seconds and restarts of the full grid (restart groups together)."""
        steps = sum(len(v) for v in self.runs.values())
        order = [c for g in self.space.group_by_restart(list(self.runs)) for c in g]
        return steps, float(steps * self.full_seconds), self.space.restarts_for(order, None)

    def grid_total_seconds(self, restart_seconds: float) -> float:
        """Benchmark-seconds plus restart seconds of the full grid."""
        _, seconds, restarts = self.grid_cost()
        return seconds + restarts * restart_seconds

    def ranked(self, objective: Objective) -> list[Candidate]:
        """Candidates best first by grid mean."""
        key = metric_key(objective.metric, objective.mode)
        return sorted(self.runs, key=lambda c: -objective.sign() * self.mean(c, key))

    def best(self, objective: Objective) -> tuple[Candidate, float]:
        key = metric_key(objective.metric, objective.mode)
        scored = [(objective.sign() * self.mean(c, key), c) for c in self.runs]
        scored = [s for s in scored if not math.isnan(s[0])]
        if not scored:
            raise ReplayError(f"the grid has no {key} figures")
        s, c = max(scored, key=lambda t: t[0])
        return c, objective.sign() * s

    def within(self, candidate: Candidate | None, objective: Objective, tolerance: float) -> bool:
        if candidate is None:
            return False
        key = metric_key(objective.metric, objective.mode)
        _, best = self.best(objective)
        value = self.mean(candidate, key)
        if objective.direction == "maximize":
            return value >= best * (1.0 - tolerance)
        return value <= best * (1.0 + tolerance)

    def evaluator(self, rng: random.Random):  # type: ignore[no-untyped-def]
        def evaluate(candidate: Candidate, seconds: int, repetition: int) -> dict[str, float]:
            stored = self.runs[candidate]
            pick = stored[rng.randrange(len(stored))]
            widen = math.sqrt(self.full_seconds / max(1, seconds))
            return {k: self.mean(candidate, k) + (v - self.mean(candidate, k)) * widen
                    for k, v in pick.items()}
        return evaluate


def load_grid(run_dir: Path) -> GridTable:
    """The grid of a finished run dir: candidates = the sweep's axes, iterations = repeats."""
    from cephscope.runner.results import ResultsError, RunDir

    rd = RunDir(Path(run_dir))
    try:
        run = rd.load_run()
        steps = rd.steps()
    except (ResultsError, KeyError, ValueError) as exc:
        raise ReplayError(f"{run_dir}: {exc}") from exc
    axes: dict[str, list[Any]] = {}
    for s in steps:
        for a, v in s.axes.items():
            if v not in axes.setdefault(a, []):
                axes[a].append(v)
    if not axes:
        raise ReplayError(f"{run_dir}: the run has no sweep axes: nothing to search")
    restart = {f"ceph_config.{o}" for o in run.get("restart_options", [])}
    space = Space.of(axes, restart & set(axes))
    runs: dict[Candidate, list[dict[str, float]]] = {c: [] for c in space.candidates()}
    seconds: set[int] = set()
    for s in steps:
        result = rd.step_result(s)
        if result is None:
            continue
        cand = tuple((a, s.axes[a]) for a in axes)
        runs[cand].append(result_metrics(result.get("results", [])))
        t = s.params.get("time")
        if isinstance(t, int | float):
            seconds.add(int(t))
    missing = [label(c) for c, v in runs.items() if not v]
    if missing:
        raise ReplayError(f"{run_dir}: not a full grid: no finished step for "
                          f"{', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}")
    if len(seconds) > 1:
        raise ReplayError(f"{run_dir}: steps of different lengths {sorted(seconds)}: a replay "
                          f"needs one run length")
    full = seconds.pop() if seconds else 60
    return GridTable(space, runs, full, name=Path(run_dir).name)


def synthetic_grid(noise: float, seed: int = 0, iterations: int = 3,
                   shards: Sequence[int] = (1, 2, 4, 8),
                   threads: Sequence[int] = (1, 2, 3, 4), seconds: int = 5) -> GridTable:
    """A shards x threads IOPS surface with one ridge and a peak (a few candidates within 5 %
    of it, most well below), recorded with relative per-run noise `noise` (0.05 = 5 % CV)."""
    rng = random.Random(seed)
    axes = {"ceph_config.osd_op_num_shards": list(shards),
            "ceph_config.osd_op_num_threads_per_shard": list(threads)}
    space = Space.of(axes, axes)
    peak_s = math.log2(shards[len(shards) // 2])
    peak_t = threads[len(threads) // 2 - 1]
    runs: dict[Candidate, list[dict[str, float]]] = {}
    for c in space.candidates():
        s, t = c[0][1], c[1][1]
        true = 4000.0 * (1.0 - 0.06 * (math.log2(s) - peak_s) ** 2 - 0.05 * (t - peak_t) ** 2)
        true = max(true, 800.0)
        runs[c] = []
        for _ in range(iterations):
            iops = true * (1.0 + rng.gauss(0.0, noise))
            runs[c].append({"iops": iops, "iops@write": iops,
                            "latency_avg": 16 / iops, "latency_avg@write": 16 / iops})
    return GridTable(space, runs, seconds, name=f"synthetic-{noise:.0%}-noise-{seed}")


@dataclass(frozen=True)
class ReplayFigures:
    grid: str
    method: str
    seeds: int
    tolerance: float
    success: float  # fraction of seeds ending within tolerance
    steps_median: float
    steps_p90: float
    seconds_median: float
    seconds_p90: float
    spent_seconds_median: float  # benchmark-seconds the whole search used
    restarts_median: float
    grid_steps: int
    grid_seconds: float
    grid_restarts: int
    restart_seconds: float = 0.0  # what one restart costs; the budget pays for restarts too
    spent_total_median: float = 0.0  # benchmark-seconds + restarts x restart_seconds
    grid_total_seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _quantile(values: Sequence[float], q: float) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    if math.isinf(ordered[hi]):
        return math.inf
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def reached_at(outcome: Outcome, table: GridTable, objective: Objective,
               tolerance: float) -> tuple[int, float] | None:
    """(steps, benchmark-seconds) from which the search's choice stayed within tolerance."""
    point = None
    for tp in outcome.trace:
        if table.within(tp.incumbent, objective, tolerance):
            if point is None:
                point = (tp.steps, tp.bench_seconds)
        else:
            point = None
    return point if table.within(outcome.chosen, objective, tolerance) else None


def replay_one(table: GridTable, settings: SearchSettings, seed: int,
               budget_fraction: float | None) -> Outcome:
    budget = settings.budget
    seconds = budget.seconds
    grid_seconds = table.grid_total_seconds(settings.restart_seconds)
    if budget.fraction is not None or budget_fraction is not None:
        seconds = grid_seconds * (budget_fraction if budget_fraction is not None
                                  else budget.fraction or 1.0)
    search = Search(table.space, replace(settings, seed=seed), table.evaluator(random.Random(seed)),
                    full_seconds=table.full_seconds, budget_seconds=seconds,
                    budget_steps=budget.steps)
    return search.run()


def replay(table: GridTable | Sequence[GridTable], settings: SearchSettings, seeds: int = 200,
           tolerance: float = 0.05, budget_fraction: float | None = None,
           first_seed: int = 0) -> ReplayFigures:
    """Figures over `seeds` seeds (per grid, when several grids are given)."""
    tables = [table] if isinstance(table, GridTable) else list(table)
    objective = settings.primary
    reached: list[tuple[int, float] | None] = []
    spent: list[float] = []
    spent_total: list[float] = []
    restarts: list[float] = []
    for t in tables:
        for seed in range(first_seed, first_seed + seeds):
            outcome = replay_one(t, settings, seed, budget_fraction)
            reached.append(reached_at(outcome, t, objective, tolerance))
            spent.append(outcome.bench_seconds)
            spent_total.append(outcome.total_seconds)
            restarts.append(outcome.restarts)
    # a seed that never got there counts as infinitely expensive
    steps = [r[0] if r else math.inf for r in reached]
    secs = [r[1] if r else math.inf for r in reached]
    g_steps, g_seconds, g_restarts = tables[0].grid_cost()
    name = tables[0].name if len(tables) == 1 else f"{tables[0].name} x{len(tables)}"
    return ReplayFigures(
        grid=name, method=settings.method, seeds=len(reached), tolerance=tolerance,
        success=sum(1 for r in reached if r) / len(reached),
        steps_median=_quantile(steps, 0.5), steps_p90=_quantile(steps, 0.9),
        seconds_median=_quantile(secs, 0.5), seconds_p90=_quantile(secs, 0.9),
        spent_seconds_median=statistics.median(spent), restarts_median=statistics.median(restarts),
        grid_steps=g_steps, grid_seconds=g_seconds, grid_restarts=g_restarts,
        restart_seconds=settings.restart_seconds,
        spent_total_median=statistics.median(spent_total),
        grid_total_seconds=tables[0].grid_total_seconds(settings.restart_seconds))


def oracle_share(table: GridTable | Sequence[GridTable], objective: Objective, k: int,
                 seeds: int = 200, tolerance: float = 0.05, budget_fraction: float = 1 / 3,
                 restart_seconds: float = 0.0, first_seed: int = 0) -> float:
    """An upper reference for any search with this budget: the share of seeds in which an
    oracle that is TOLD the grid's k best candidates (not their order) ends within tolerance,
    spending the whole budget on full-length runs of those k only (equal shares, one restart
    each), and choosing the best sample mean. No screening is paid for, so a real search,
    which must first find the k among all candidates, does worse than the best such k."""
    tables = [table] if isinstance(table, GridTable) else list(table)
    hits = total = 0
    for t in tables:
        top = t.ranked(objective)[:k]
        key = metric_key(objective.metric, objective.mode)
        restart = restart_seconds if t.space.restart_axes else 0.0
        budget = t.grid_total_seconds(restart_seconds) * budget_fraction
        # one restart per candidate, then its runs back to back
        runs = max(1, int((budget - len(top) * restart) // len(top) // t.full_seconds))
        for seed in range(first_seed, first_seed + seeds):
            evaluate = t.evaluator(random.Random(seed))
            means = {c: statistics.fmean(evaluate(c, t.full_seconds, r)[key]
                                         for r in range(runs)) for c in top}
            chosen = max(top, key=lambda c: objective.sign() * means[c])
            hits += t.within(chosen, objective, tolerance)
            total += 1
    return hits / total


def format_figures(f: ReplayFigures) -> str:
    def num(v: float) -> str:
        return "never" if math.isinf(v) else f"{v:.0f}"
    restart = (f" | restart {f.restart_seconds:g}s: total-s spent {f.spent_total_median:.0f} "
               f"(grid {f.grid_total_seconds:.0f}: "
               f"{f.spent_total_median / f.grid_total_seconds:.0%})" if f.restart_seconds else "")
    return (f"{f.grid:<26} {f.method:<8} seeds={f.seeds} within {f.tolerance:.0%} of best: "
            f"{f.success:.0%} | steps median {num(f.steps_median)} p90 {num(f.steps_p90)} "
            f"(grid {f.grid_steps}) | bench-s median {num(f.seconds_median)} p90 "
            f"{num(f.seconds_p90)} (spent {f.spent_seconds_median:.0f}, grid "
            f"{f.grid_seconds:.0f}: {f.spent_seconds_median / f.grid_seconds:.0%}) | "
            f"restarts {f.restarts_median:.0f} (grid {f.grid_restarts})" + restart)


def settings_for(method: str, objective: Objective | None = None,
                 base: SearchSettings | None = None) -> SearchSettings:
    s = base or SearchSettings()
    return replace(s, method=method, objectives=(objective or Objective("iops", "maximize"),)
                   if not s.objectives or objective is not None else s.objectives)


def figures_table(rows: Sequence[ReplayFigures]) -> list[Mapping[str, Any]]:
    return [r.to_dict() for r in rows]
