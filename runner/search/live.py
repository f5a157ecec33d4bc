"""A search on a real cluster: every ask becomes an ordinary sweep step.

The sweep hands in `run_step(step) -> error or None`; each ask of the search is turned into a
step (the grid step of that candidate with the asked run length and repetition index, so its
id is an ordinary deterministic step id), recorded in run.json before it runs, run through the
sweep's one step lifecycle (config, restart, verify, tag, benchmark) and answered from its
result. A resumed run re-drives the same search from the start: finished steps answer from
the results dir and are not run again, so the decisions are the same as before the kill.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cephscope.runner.results import RunDir, atomic_write_json
from cephscope.runner.search.engine import Outcome, Search, metric_key
from cephscope.runner.search.measure import result_metrics
from cephscope.runner.search.schedule import BudgetError
from cephscope.runner.search.settings import AdaptiveIterations, Objective, SearchSettings
from cephscope.runner.search.space import Candidate, Space, label
from cephscope.runner.stats import summarize
from cephscope.runner.steps import Step, step_id

SEARCH_FILE = "search.json"
# benchmarks that discard a warm-up themselves (fio's `ramp_time`, the `ramp` parameter)
RAMP_BENCHMARKS = frozenset({"librbdfio"})


class SearchPlanError(ValueError):
    pass


@dataclass
class LivePlan:
    space: Space
    templates: dict[Candidate, Step]
    full_seconds: int
    iterations: int | AdaptiveIterations
    settings: SearchSettings
    budget_seconds: float | None
    budget_steps: int | None
    grid_seconds: float
    grid_steps: int
    grid_restarts: int
    profiles: Mapping[str, Mapping[str, Any]]


def make_plan(steps: Sequence[Step], restart_options: set[str],
              settings: SearchSettings | None, iterations: int,
              adaptive: AdaptiveIterations | None,
              profiles: Mapping[str, Mapping[str, Any]] | None = None) -> LivePlan:
    """The search space from the grid steps (iteration 0 of each combination)."""
    # adaptive repetition without a search section: the grid, judged by IOPS
    settings = settings or SearchSettings(objectives=(Objective("iops", "maximize"),))
    at_workloads = [o.label for o in settings.objectives if o.workload]
    if at_workloads and settings.method != "grid":
        raise SearchPlanError(f"search.method {settings.method}: objectives at workloads "
                              f"({'; '.join(at_workloads)}) need every configuration run on "
                              f"every workload: use method grid (the Pareto front is then in "
                              f"the report and `cephscope recommend`)")
    base = [s for s in steps if s.iteration == 0]
    if len({s.benchmark for s in base}) > 1:
        raise SearchPlanError("search: a search runs one benchmark; this sweep has "
                              f"{sorted({s.benchmark for s in base})}")
    axes: dict[str, list[Any]] = {}
    for s in base:
        for a, v in s.axes.items():
            if v not in axes.setdefault(a, []):
                axes[a].append(v)
    restart_axes = {f"ceph_config.{o}" for o in restart_options} & set(axes)
    space = Space.of(axes, restart_axes)
    templates = {tuple((a, s.axes[a]) for a in axes): s for s in base}
    times = {s.params.get("time") for s in base}
    if len(times) != 1 or not isinstance(next(iter(times)), int | float):
        raise SearchPlanError("search: the benchmark needs one fixed `time` (the full run "
                              f"length); got {sorted(map(str, times))}")
    full = int(next(iter(times)))
    reps = adaptive.min if adaptive else iterations
    grid_steps = len(templates) * reps
    grid_seconds = float(grid_steps * full)
    order = [c for g in space.group_by_restart(list(templates)) for c in g]
    grid_restarts = space.restarts_for(order, None)
    # the budget pays for restarts too: a fraction is of the grid's benchmark + restart seconds
    grid_total = grid_seconds + grid_restarts * settings.restart_seconds
    b = settings.budget
    budget_seconds = b.seconds if b.seconds is not None else (
        grid_total * b.fraction if b.fraction is not None else None)
    if budget_seconds is not None and budget_seconds < settings.min_seconds + settings.warmup:
        raise SearchPlanError(f"search.budget: {budget_seconds:g} benchmark-seconds is smaller "
                              f"than one step ({settings.min_seconds + settings.warmup} s)")
    if settings.method in ("halving", "bayes") and budget_seconds is None and b.steps is None:
        raise SearchPlanError(f"search.method {settings.method}: needs a budget "
                              f"(steps, seconds or fraction)")
    plan = LivePlan(space, templates, full, adaptive or iterations, settings, budget_seconds,
                    b.steps, grid_seconds, grid_steps, grid_restarts, profiles or {})
    if settings.method == "halving":
        try:
            _probe(plan).schedule()
        except BudgetError as exc:
            raise SearchPlanError(f"search.budget: {exc}") from exc
    return plan


def _probe(plan: LivePlan) -> Search:
    return Search(plan.space, plan.settings, lambda c, sec, r: None,
                  full_seconds=plan.full_seconds, budget_seconds=plan.budget_seconds,
                  budget_steps=plan.budget_steps)


def step_for(plan: LivePlan, candidate: Candidate, seconds: int, repetition: int) -> Step:
    t = plan.templates[candidate]
    params = dict(t.params)
    warmup = plan.settings.warmup
    if t.benchmark in RAMP_BENCHMARKS and warmup:
        # fio discards its own ramp (`ramp_time`) from every figure, latencies included
        params["time"] = seconds
        params["ramp"] = warmup
    else:
        # the runner cuts the first `warmup` seconds from the per-second series (measure.py)
        params["time"] = seconds + warmup
    # the same id a grid step of these params has (baselines and alerts join on it)
    sid = step_id(t.benchmark, params, plan.profiles.get(t.pool_profile or ""), t.ceph_config,
                  repetition, t.knobs)
    return Step(id=sid, benchmark=t.benchmark, iteration=repetition, params=params,
                pool_profile=t.pool_profile, ceph_config=dict(t.ceph_config), axes=dict(t.axes),
                knobs=dict(t.knobs))


def expected(plan: LivePlan) -> list[str]:
    """Dry run: what the search will cost against the full grid."""
    s = plan.settings
    lines = [f"search: {s.method}, objective {s.primary.label}, budget {s.budget.describe()}"]
    r_s = s.restart_seconds
    grid = (f"full grid: {plan.grid_steps} steps, {plan.grid_seconds:g} benchmark-seconds, "
            f"{plan.grid_restarts} restart(s) x {r_s:g} s = "
            f"{plan.grid_seconds + plan.grid_restarts * r_s:g} s in all")
    if s.method == "halving":
        probe = _probe(plan)
        rungs = probe.schedule()
        cost = probe.restart_cost()
        steps = sum(r.candidates * r.repetitions for r in rungs)
        secs = sum(r.cost(s.warmup) for r in rungs)
        restarts = sum(cost.visits(r.candidates) for r in rungs)
        lines.append("halving rungs: " + ", ".join(
            f"{r.candidates} candidates x {r.repetitions} x {r.seconds + s.warmup}s"
            for r in rungs))
        lines.append(f"expected: {steps} steps, {secs:g} benchmark-seconds, up to {restarts} "
                     f"restart(s) x {r_s:g} s = {secs + restarts * r_s:g} s in all; {grid}")
    elif s.method == "bayes":
        per_step = plan.full_seconds + s.warmup + (r_s if plan.space.restart_axes else 0.0)
        budget = plan.budget_seconds or (plan.budget_steps or 0) * per_step
        steps = int(budget // per_step)
        if plan.budget_steps is not None:
            steps = min(steps, plan.budget_steps) if plan.budget_seconds else plan.budget_steps
        restarts = steps if plan.space.restart_axes else 0
        bench = steps * (plan.full_seconds + s.warmup)
        lines.append(f"expected: at least {steps} steps, {bench:g} benchmark-seconds, up to "
                     f"{restarts} restart(s) x {r_s:g} s = {bench + restarts * r_s:g} s in all "
                     f"(batches of {s.batch} grouped by restart values); {grid}")
    else:
        it = plan.iterations
        more = (f", up to {len(plan.templates) * it.max} steps with iterations up to {it.max}"
                if isinstance(it, AdaptiveIterations) else "")
        lines.append(f"expected: {grid}{more}")
    return lines


def run_live_search(rd: RunDir, plan: LivePlan, run_step: Callable[[Step], str | None],
                    start_key: tuple[Any, ...] | None, log: Callable[[str], None]) -> Outcome:
    settings = plan.settings
    counters = {"ran": 0, "reused": 0}
    # dead time (config applied -> benchmark started) of the steps that moved to other
    # restart-only values: what a restart really cost, beside the configured restart_seconds
    restart_dead: list[float] = []
    previous = {"key": start_key}

    def evaluate(candidate: Candidate, seconds: int, repetition: int) -> dict[str, float] | None:
        step = step_for(plan, candidate, seconds, repetition)
        key = plan.space.restart_key(candidate)
        moved = bool(plan.space.restart_axes) and key != previous["key"]
        previous["key"] = key
        if not rd.is_done(step):
            rd.add_step(step)
            counters["ran"] += 1
            log(f"search step {step.id}: {label(candidate)} {seconds + settings.warmup}s "
                f"repetition {repetition}")
            if run_step(step) is not None:
                return None
        else:
            counters["reused"] += 1
        result = rd.step_result(step)
        if result is None:
            return None
        dead = (result.get("timestamps") or {}).get("dead_time_seconds")
        if moved and isinstance(dead, int | float):
            restart_dead.append(float(dead))
        cut = 0 if step.benchmark in RAMP_BENCHMARKS else settings.warmup
        return result_metrics(result.get("results", []), cut)

    search = Search(plan.space, settings, evaluate, full_seconds=plan.full_seconds,
                    iterations=plan.iterations, budget_seconds=plan.budget_seconds,
                    budget_steps=plan.budget_steps, start_key=start_key)
    outcome = search.run()
    if counters["reused"]:
        log(f"search: {counters['reused']} finished step(s) answered from the results dir, "
            f"{counters['ran']} run now")
    write_outcome(rd, plan, outcome, search, restart_dead)
    return outcome


def write_outcome(rd: RunDir, plan: LivePlan, outcome: Outcome, search: Search,
                  restart_dead: Sequence[float] = ()) -> None:
    o = plan.settings.primary
    key = metric_key(o.metric, o.mode)
    rows = []
    for c in plan.space.candidates():
        vals = [ob.metrics[key] for ob in outcome.observations
                if ob.candidate == c and ob.seconds == plan.full_seconds and key in ob.metrics]
        row: dict[str, Any] = {"candidate": dict(c), "label": label(c), "n": len(vals)}
        if vals:
            s = summarize(vals)
            row.update(mean=s.mean, sd=s.sd, cv=s.cv, ci_low=s.ci_low, ci_high=s.ci_high,
                       rel_ci_half_width=s.rel_ci_half_width)
        rep = outcome.repetitions.get(c)
        if rep:
            row["stopped"] = rep["stopped"]  # "ci": interval tight enough; "max": gave up
        rows.append(row)
    atomic_write_json(rd.path / SEARCH_FILE, {
        "method": outcome.method, "settings": plan.settings.to_dict(),
        "iterations": (plan.iterations.to_dict() if isinstance(plan.iterations,
                                                               AdaptiveIterations)
                       else plan.iterations),
        "objective": o.label, "chosen": dict(outcome.chosen) if outcome.chosen else None,
        "steps": outcome.steps, "bench_seconds": outcome.bench_seconds,
        "restarts": outcome.restarts, "total_seconds": outcome.total_seconds,
        "restart_seconds_measured": ({"n": len(restart_dead),
                                      "mean": sum(restart_dead) / len(restart_dead),
                                      "max": max(restart_dead)} if restart_dead else None),
        "notes": outcome.notes, "rank_check": outcome.rank_check,
        "grid": {"steps": plan.grid_steps, "bench_seconds": plan.grid_seconds,
                 "restarts": plan.grid_restarts,
                 "total_seconds": plan.grid_seconds
                 + plan.grid_restarts * plan.settings.restart_seconds},
        "candidates": rows,
    })


def format_outcome(path_json: Mapping[str, Any]) -> list[str]:
    d = path_json
    g = d["grid"]
    lines = [f"search ({d['method']}): {d['steps']} steps, {d['bench_seconds']:g} "
             f"benchmark-seconds, {d['restarts']} restart(s), {d.get('total_seconds', 0):g} s "
             f"in all; the full grid: {g['steps']} steps, {g['bench_seconds']:g} s, "
             f"{g['restarts']} restart(s), {g.get('total_seconds', 0):g} s in all"]
    measured = d.get("restart_seconds_measured")
    if measured:
        lines.append(f"restarts measured: {measured['n']}, mean {measured['mean']:.1f} s, max "
                     f"{measured['max']:.1f} s (the budget counted "
                     f"{d['settings'].get('restart_seconds', 0):g} s each)")
    if d.get("chosen"):
        lines.append("search's choice: " + " ".join(
            f"{k.rsplit('.', 1)[-1]}={v}" for k, v in d["chosen"].items()))
    for n in d.get("notes", []):
        lines.append(f"note: {n}")
    rc = d.get("rank_check")
    if rc:
        rho = rc.get("spearman")
        lines.append(f"short ({rc['short_seconds']} s) vs long ({rc['long_seconds']} s) runs: "
                     f"Spearman {'-' if rho is None else f'{rho:.2f}'} over "
                     f"{len(rc['candidates'])} candidates; {rc['verdict']}")
    if isinstance(d.get("iterations"), dict):
        for r in d["candidates"]:
            if r["n"]:
                rel = r.get("rel_ci_half_width")
                lines.append(f"  {r['label']}: n={r['n']} mean={r['mean']:.4g} CI ±"
                             f"{'-' if rel is None else f'{rel:.1%}'}"
                             + ("  (hit max before the CI was tight)"
                                if r.get("stopped") == "max" else ""))
    return lines


def load_outcome(rd: RunDir) -> dict[str, Any] | None:
    try:
        return json.loads((rd.path / SEARCH_FILE).read_text())
    except (OSError, ValueError):
        return None
