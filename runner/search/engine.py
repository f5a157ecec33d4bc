"""The search itself, independent of how a candidate is measured.

An `Evaluator` runs one candidate for some seconds (one repetition) and returns its metrics;
in a sweep that is one ordinary step (its own step id, tagged in Prometheus), in a replay it is
a stored iteration of a full-grid run. The search is deterministic for a given seed and given
answers, which is what makes `--resume` continue the same search: the resumed run asks again
from the start and is answered from the results dir, without running anything, until it
reaches the first step that was not finished.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cephscope.runner.search.schedule import RestartCost, Rung, halving_schedule
from cephscope.runner.search.settings import AdaptiveIterations, Objective, SearchSettings
from cephscope.runner.search.space import Candidate, Space, label
from cephscope.runner.search.stopping import decide

Metrics = Mapping[str, float]
# (candidate, measured seconds, repetition index at that length) -> metrics, or None if it failed
Evaluator = Callable[[Candidate, int, int], "Metrics | None"]


def metric_key(metric: str, mode: str | None) -> str:
    return f"{metric}@{mode}" if mode else metric


@dataclass
class Observation:
    candidate: Candidate
    seconds: int
    repetition: int
    metrics: Metrics


@dataclass(frozen=True)
class TracePoint:
    steps: int
    bench_seconds: float  # measured + warm-up seconds of every run so far
    restarts: int
    incumbent: Candidate | None
    total_seconds: float = 0.0  # benchmark-seconds plus restarts x restart seconds


@dataclass
class Outcome:
    method: str
    observations: list[Observation]
    trace: list[TracePoint]
    chosen: Candidate | None
    steps: int
    bench_seconds: float
    restarts: int
    notes: list[str] = field(default_factory=list)
    rank_check: dict[str, Any] | None = None
    repetitions: dict[Candidate, dict[str, Any]] = field(default_factory=dict)
    total_seconds: float = 0.0  # benchmark-seconds plus restarts x restart seconds


class Ledger:
    """Steps, benchmark-seconds and restarts spent, against the budget.

    The seconds budget pays for both: a run costs its measured and warm-up seconds, a move to
    a candidate with other restart-only values costs `restart_seconds` more (the configured
    figure, not each restart's measured time, so a resumed search takes the same decisions)."""

    def __init__(self, space: Space, warmup: int, max_steps: int | None,
                 max_seconds: float | None, start_key: tuple[Any, ...] | None,
                 restart_seconds: float = 0.0) -> None:
        self.space = space
        self.warmup = warmup
        self.restart_seconds = restart_seconds
        self.max_steps = max_steps
        self.max_seconds = max_seconds
        self.key = start_key
        self.steps = 0
        self.seconds = 0.0  # benchmark-seconds
        self.restarts = 0

    @property
    def total_seconds(self) -> float:
        return self.seconds + self.restarts * self.restart_seconds

    def restarts_for(self, candidate: Candidate) -> bool:
        return bool(self.space.restart_axes) and self.space.restart_key(candidate) != self.key

    def affords(self, seconds: int, candidate: Candidate | None = None) -> bool:
        if self.max_steps is not None and self.steps + 1 > self.max_steps:
            return False
        restart = self.restart_seconds if candidate is not None and \
            self.restarts_for(candidate) else 0.0
        return self.max_seconds is None or self.total_seconds + seconds + self.warmup + \
            restart <= self.max_seconds + 1e-9

    def charge(self, candidate: Candidate, seconds: int) -> None:
        if self.restarts_for(candidate):
            self.restarts += 1
        self.key = self.space.restart_key(candidate)
        self.steps += 1
        self.seconds += seconds + self.warmup


class Search:
    """Run one search method over a space with an evaluator, within a budget."""

    def __init__(self, space: Space, settings: SearchSettings, evaluate: Evaluator, *,
                 full_seconds: int, iterations: int | AdaptiveIterations = 1,
                 budget_seconds: float | None = None, budget_steps: int | None = None,
                 start_key: tuple[Any, ...] | None = None) -> None:
        self.space = space
        self.settings = settings
        self.evaluate = evaluate
        self.full_seconds = full_seconds
        self.iterations = iterations
        self.ledger = Ledger(space, settings.warmup, budget_steps, budget_seconds, start_key,
                             settings.restart_seconds)
        self.observations: list[Observation] = []
        self.trace: list[TracePoint] = []
        self.notes: list[str] = []
        self.reps: dict[tuple[Candidate, int], int] = {}
        self.incumbent: Candidate | None = None
        self.objective: Objective = settings.primary

    # ---- measuring -----------------------------------------------------------------------------

    def run_once(self, candidate: Candidate, seconds: int) -> bool:
        """One repetition of a candidate; False when the budget cannot pay for it."""
        if not self.ledger.affords(seconds, candidate):
            return False
        rep = self.reps.get((candidate, seconds), 0)
        self.reps[(candidate, seconds)] = rep + 1
        metrics = self.evaluate(candidate, seconds, rep)
        self.ledger.charge(candidate, seconds)
        if metrics is not None:
            self.observations.append(Observation(candidate, seconds, rep, metrics))
        self.trace.append(TracePoint(self.ledger.steps, self.ledger.seconds,
                                     self.ledger.restarts, self.incumbent,
                                     self.ledger.total_seconds))
        return True

    def set_incumbent(self, candidate: Candidate | None) -> None:
        self.incumbent = candidate
        if self.trace:
            last = self.trace[-1]
            self.trace[-1] = TracePoint(last.steps, last.bench_seconds, last.restarts, candidate,
                                        last.total_seconds)

    def values(self, candidate: Candidate, seconds: int | None = None,
               metric: str | None = None, mode: str | None = None) -> list[float]:
        o = self.objective
        key = metric_key(metric or o.metric, mode if metric else o.mode)
        return [float(ob.metrics[key]) for ob in self.observations
                if ob.candidate == candidate and (seconds is None or ob.seconds == seconds)
                and key in ob.metrics]

    def feasible(self, candidate: Candidate, seconds: int | None = None) -> bool:
        for con in self.settings.constraints:
            vals = self.values(candidate, seconds, con.metric, con.mode)
            if vals and not con.holds(sum(vals) / len(vals)):
                return False
        return True

    def score(self, candidate: Candidate, seconds: int | None = None) -> float:
        """Mean objective, signed so that larger is better; -inf if unmeasured or infeasible.

        Without `seconds`, runs of every length count, each weighted by its length (the
        variance of a run's mean falls with its length), so no evidence is thrown away."""
        if seconds is not None:
            vals = self.values(candidate, seconds)
            if not vals or not self.feasible(candidate, seconds):
                return -math.inf
            return self.objective.sign() * sum(vals) / len(vals)
        o = self.objective
        key = metric_key(o.metric, o.mode)
        pairs = [(ob.seconds, float(ob.metrics[key])) for ob in self.observations
                 if ob.candidate == candidate and key in ob.metrics]
        if not pairs or not self.feasible(candidate):
            return -math.inf
        return o.sign() * sum(s * v for s, v in pairs) / sum(s for s, _ in pairs)

    def best(self, candidates: Sequence[Candidate], seconds: int | None = None) -> Candidate | None:
        scored = [(self.score(c, seconds), i, c) for i, c in enumerate(candidates)]
        scored = [s for s in scored if s[0] > -math.inf]
        return max(scored, key=lambda s: (s[0], -s[1]))[2] if scored else None

    # ---- methods -------------------------------------------------------------------------------

    def run(self) -> Outcome:
        method = self.settings.method
        rank_check = None
        if method == "grid":
            self._grid()
        elif method == "halving":
            rank_check = self._halving()
        elif method == "bayes":
            self._bayes()
        else:
            raise ValueError(f"unknown search method {method!r}")
        chosen = self.incumbent
        if chosen is None and self.observations:
            self.notes.append("no candidate met the constraint(s): "
                              + "; ".join(c.text for c in self.settings.constraints))
        return Outcome(method, self.observations, self.trace, chosen, self.ledger.steps,
                       self.ledger.seconds, self.ledger.restarts, self.notes, rank_check,
                       self._repetition_report(), self.ledger.total_seconds)

    def _repetition_report(self) -> dict[Candidate, dict[str, Any]]:
        if not isinstance(self.iterations, AdaptiveIterations):
            return {}
        out: dict[Candidate, dict[str, Any]] = {}
        for c in self.space.candidates():
            vals = self.values(c, self.full_seconds)
            if vals:
                d = decide(vals, self.iterations)
                out[c] = {"n": d.n, "rel_ci_half_width": d.rel_ci_half_width,
                          "stopped": d.reason}
        return out

    def _grid(self) -> None:
        """Every candidate; restart groups one after the other; inside a group, repetitions go
        round-robin over its candidates (no restart between them), so slow drift spreads over
        all of them instead of looking like a difference."""
        rule = self.iterations
        fixed = rule if isinstance(rule, int) else None
        for group in self.space.group_by_restart(self.space.candidates(), self.ledger.key):
            rnd = 0
            while True:
                todo = []
                for c in group:
                    n = len(self.values(c, self.full_seconds))
                    if fixed is not None:
                        need = rnd < fixed
                    else:
                        assert isinstance(rule, AdaptiveIterations)
                        need = rnd < rule.max and not decide(
                            self.values(c, self.full_seconds), rule).done
                    if need and n <= rnd:
                        todo.append(c)
                if not todo:
                    break
                for c in todo:
                    if not self.run_once(c, self.full_seconds):
                        self.notes.append("budget spent before the grid was complete")
                        self.set_incumbent(self.best(self.space.candidates(), self.full_seconds))
                        return
                    self.set_incumbent(self.best(self.space.candidates(), self.full_seconds))
                rnd += 1

    def schedule(self) -> list[Rung]:
        s = self.settings
        budget = self.ledger.max_seconds
        if budget is None:
            budget = (self.ledger.max_steps or 0) * (self.full_seconds + s.warmup)
        n = len(self.space)
        return halving_schedule(n, s.eta, s.min_seconds, self.full_seconds, budget,
                                warmup=s.warmup, final_candidates=min(n, max(1, s.rank_check)),
                                restarts=self.restart_cost())

    def restart_cost(self) -> RestartCost:
        if not self.space.restart_axes:
            return RestartCost()
        groups = len(self.space.group_by_restart(self.space.candidates()))
        cap = self.settings.max_restarts
        # a budget in steps counts steps only; one in seconds pays for restarts too
        seconds = self.settings.restart_seconds if self.ledger.max_seconds is not None else 0.0
        return RestartCost(groups, seconds, groups if cap == "grid" else cap)

    def _halving(self) -> dict[str, Any] | None:
        rungs = self.schedule()
        alive = self.space.candidates()
        if rungs[0].candidates < len(alive):
            alive = self.space.covering_subset(rungs[0].candidates, self.settings.seed)
            self.notes.append(f"the budget (restarts included) screens {len(alive)} of "
                              f"{len(self.space)} candidates: " + ", ".join(map(label, alive)))
        rung_scores: list[dict[Candidate, float]] = []
        for i, rung in enumerate(rungs):
            # restart groups together; start with the group already running (no restart)
            # repetitions go round-robin inside a restart group (interleaved at no restart
            # cost), and a group is finished before the next one costs a restart
            for group in self.space.group_by_restart(alive, self.ledger.key):
                for _rep in range(rung.repetitions):
                    for c in group:
                        if not self.run_once(c, rung.seconds):
                            self.notes.append(f"budget spent in rung {i + 1}")
                            break
                        if i == 0:
                            self.set_incumbent(self.best(alive))
            rung_scores.append({c: self.score(c) for c in alive})
            ranked = sorted(alive, key=lambda c: (-rung_scores[-1][c], alive.index(c)))
            self.set_incumbent(ranked[0] if rung_scores[-1][ranked[0]] > -math.inf else None)
            if i + 1 < len(rungs):
                alive = ranked[:rungs[i + 1].candidates]
        self.notes.append("halving schedule: " + ", ".join(
            f"{r.candidates} x {r.repetitions} x {r.seconds + self.settings.warmup}s"
            for r in rungs))
        return _rank_check(rung_scores, rungs) if len(rungs) > 1 else None

    def _bayes(self) -> None:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        names = [a for a, _ in self.space.axes]
        dists = {f"p{i}": optuna.distributions.CategoricalDistribution(list(range(len(v))))
                 for i, (_, v) in enumerate(self.space.axes)}
        sampler = optuna.samplers.TPESampler(seed=self.settings.seed,
                                             n_startup_trials=min(len(self.space), 8))
        study = optuna.create_study(direction="maximize", sampler=sampler)
        seconds = self.full_seconds
        rng = random.Random(self.settings.seed)
        while True:
            trials = [study.ask(dists) for _ in range(self.settings.batch)]
            cands = [tuple((names[i], self.space.axes[i][1][t.params[f"p{i}"]])
                           for i in range(len(names))) for t in trials]
            # a batch runs grouped by restart values (the current group first)
            keyed = sorted(range(len(trials)), key=lambda j: (
                self.space.restart_key(cands[j]) != self.ledger.key,
                str(self.space.restart_key(cands[j])), rng.random()))
            spent = False
            for j in keyed:
                if not self.run_once(cands[j], seconds):
                    spent = True
                    study.tell(trials[j], state=optuna.trial.TrialState.FAIL)
                    continue
                # Optuna does not average repeats: it is told the candidate's running mean
                value = self.score(cands[j], seconds)
                study.tell(trials[j], value if value > -math.inf else None,
                           state=(optuna.trial.TrialState.COMPLETE if value > -math.inf
                                  else optuna.trial.TrialState.FAIL))
                self.set_incumbent(self._bayes_incumbent(seconds))
            if spent:
                break

    def _bayes_incumbent(self, seconds: int) -> Candidate | None:
        """Best mean, counting a candidate run once as if one standard error worse than it
        looks (a single lucky run must not win over a repeated one)."""
        best: tuple[float, Candidate] | None = None
        for c in self.space.candidates():
            vals = self.values(c, seconds)
            if not vals or not self.feasible(c, seconds):
                continue
            mean = self.objective.sign() * sum(vals) / len(vals)
            penalty = abs(mean) * 0.05 / math.sqrt(len(vals))
            if best is None or mean - penalty > best[0]:
                best = (mean - penalty, c)
        return best[1] if best else None


def _spearman(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    n = len(xs)
    if n < 3:
        return None

    def ranks(v: Sequence[float]) -> list[float]:
        order = sorted(range(n), key=lambda i: v[i])
        r = [0.0] * n
        i = 0
        while i < n:
            j = i
            while j + 1 < n and v[order[j + 1]] == v[order[i]]:
                j += 1
            for k in range(i, j + 1):
                r[order[k]] = (i + j) / 2.0
            i = j + 1
        return r

    rx, ry = ranks(xs), ranks(ys)
    mx, my = sum(rx) / n, sum(ry) / n
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    sxx = sum((a - mx) ** 2 for a in rx)
    syy = sum((b - my) ** 2 for b in ry)
    return sxy / math.sqrt(sxx * syy) if sxx and syy else None


def _rank_check(rung_scores: list[dict[Candidate, float]], rungs: list[Rung]) -> dict[str, Any]:
    """Do the shortest and the longest runs rank the candidates of the last rung alike?"""
    short, long_ = rung_scores[0], rung_scores[-1]
    common = [c for c in long_ if c in short and short[c] > -math.inf and long_[c] > -math.inf]
    rho = _spearman([short[c] for c in common], [long_[c] for c in common])
    top_short = max(common, key=lambda c: short[c]) if common else None
    top_long = max(common, key=lambda c: long_[c]) if common else None
    verdict = ("too few candidates to compare (< 3)" if rho is None else
               "short and long runs rank alike" if rho >= 0.5 else
               "short and long runs rank differently: the short runs may mislead")
    return {"short_seconds": rungs[0].seconds, "long_seconds": rungs[-1].seconds,
            "candidates": [label(c) for c in common], "spearman": rho,
            "same_top": top_short == top_long, "verdict": verdict}
