"""Search: stopping rule, halving schedule, Pareto front, spec errors, replay, recommendation."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from cephscope.runner.search.analysis import (
    AnalysisError,
    format_recommendation,
    load_run,
    load_runs,
    recommend,
)
from cephscope.runner.search.engine import Search
from cephscope.runner.search.pareto import pareto_front
from cephscope.runner.search.replay import (
    load_grid,
    oracle_share,
    replay,
    replay_one,
    synthetic_grid,
)
from cephscope.runner.search.schedule import BudgetError, RestartCost, halving_schedule
from cephscope.runner.search.settings import (
    AdaptiveIterations,
    Objective,
    SearchSettings,
    parse_iterations,
    parse_search,
)
from cephscope.runner.search.space import Space
from cephscope.runner.search.stopping import decide
from cephscope.runner.spec import SpecError, load_spec
from cephscope.runner.spec_checker import Checker

RULE = AdaptiveIterations(min=2, max=5, ci=0.05)
FIXTURE = Path(__file__).resolve().parents[2] / "fixtures/search/shard-thread-grid"


def parsed(parse: Any, key_path: tuple[Any, ...], *args: Any) -> tuple[Any, list[str]]:
    """(the parsed value, the problems) of a section parser, through a fresh checker."""
    checker = Checker(where)
    return parse(checker, key_path, *args), checker.problems


def where(kp):
    return "spec.yaml:1"


def test_stopping_rule_stops_when_ci_tight() -> None:
    # mean 1000, sd 10: half-width t(0.975,1)*10/sqrt(2) = 89.8 -> 9 %: more
    assert decide([990, 1010], RULE).reason == "more"
    d = decide([1000, 1002, 998], RULE)  # half-width 4.97 -> 0.5 %
    assert d.done and d.reason == "ci" and d.rel_ci_half_width < 0.05


def test_stopping_rule_gives_up_at_max_and_says_so() -> None:
    d = decide([800, 1200, 900, 1100, 1000], RULE)
    assert d.done and d.reason == "max" and d.rel_ci_half_width > 0.05
    assert decide([1000], RULE).reason == "more"  # never stops below min


def test_iterations_spec_fixed_and_adaptive() -> None:
    assert parsed(parse_iterations, ("iterations",), 3) == (3, [])
    it, problems = parsed(parse_iterations, ("iterations",), {"min": 2, "max": 8, "ci": "5%"})
    assert it == AdaptiveIterations(2, 8, 0.05) and not problems
    _, problems = parsed(parse_iterations, ("iterations",), {"min": 1, "max": 0, "ci": "50"})
    assert len(problems) == 3 and "min" in problems[0]


def test_halving_schedule_known_answer() -> None:
    rungs = halving_schedule(16, eta=3, min_seconds=2, full_seconds=5, budget_seconds=80,
                             final_candidates=4)
    assert [(r.candidates, r.seconds) for r in rungs] == [(16, 2), (6, 2), (4, 5)]
    assert [r.repetitions for r in rungs] == [1, 2, 1]
    assert sum(r.cost(0) for r in rungs) <= 80
    # a budget short of one pass over all 16 screens as many as it can pay for
    rungs = halving_schedule(16, 3, 2, 5, 40)
    assert [(r.candidates, r.seconds, r.repetitions) for r in rungs] == [
        (11, 2, 1), (4, 2, 1), (2, 5, 1)]
    with pytest.raises(BudgetError, match="smaller than one pass"):
        halving_schedule(16, 3, 2, 5, 9)


def test_halving_schedule_pays_for_restarts() -> None:
    # 4 x 4 grid, every candidate its own restart group, 9 s a restart: the grid costs
    # 48 x 5 + 16 x 9 = 384 s; a third (128 s) cannot screen all 16 (16 x (2 + 9) = 176 s)
    restarts = RestartCost(groups=16, seconds=9.0)
    rungs = halving_schedule(16, 3, 2, 5, 128, final_candidates=3, restarts=restarts)
    assert [(r.candidates, r.seconds, r.repetitions) for r in rungs] == [(7, 2, 1), (3, 5, 1)]
    assert sum(r.cost(0) for r in rungs) + restarts.of(rungs) == 7 * 11 + 3 * 14 <= 128
    # never more restarts than the grid (16): 9 screened + 3 revisited
    capped = halving_schedule(16, 3, 2, 5, 80, final_candidates=3,
                              restarts=RestartCost(groups=16, seconds=0.0, max_visits=16))
    assert [r.candidates for r in capped] == [9, 3]
    assert sum(min(r.candidates, 16) for r in capped) <= 16


def test_pareto_front_known_answer() -> None:
    objs = [Objective("iops", "maximize"), Objective("latency_avg", "minimize")]
    points = {"a": [100, 5.0], "b": [90, 2.0], "c": [80, 3.0], "d": [100, 6.0], "e": [70, 1.0]}
    assert pareto_front(points, objs) == ["a", "b", "e"]


def test_search_spec_bad_input_names_the_key() -> None:
    bms = {"radosbench": {}}
    _, problems = parsed(parse_search, ("search",), {"maximize": "latency_p99"}, bms)
    assert "radosbench does not produce latency_p99" in problems[0]
    _, problems = parsed(parse_search, ("search",),
                         {"method": "annealing", "budget": {"steps": 0},
                          "constraints": ["latency_avg <= 5 parsecs"]}, bms)
    text = "\n".join(problems)
    assert "unknown method" in text and "search.budget.steps" in text and "unknown unit" in text
    s, problems = parsed(parse_search, ("search",),
                         {"method": "halving", "maximize": "iops",
                          "constraints": ["latency_avg <= 5 ms"],
                          "budget": {"fraction": "1/3"}}, bms)
    assert not problems and s.budget.fraction == pytest.approx(1 / 3)
    assert s.constraints[0].value == pytest.approx(0.005)


def test_spec_file_with_search_section(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("iterations: {min: 2, max: 6, ci: 5%}\n"
                    "ceph_config: {osd_op_num_shards: [1, 2]}\n"
                    "benchmarks: {radosbench: {time: 5, write_only: true}}\n"
                    "search: {method: halving, budget: {fraction: 0.5}}\n")
    spec = load_spec(path)
    assert spec.adaptive == AdaptiveIterations(2, 6, 0.05) and spec.iterations == 2
    assert spec.search.method == "halving"
    path.write_text("ceph_config: {osd_op_num_shards: [1, 2]}\n"
                    "benchmarks: {radosbench: {time: 5}}\n"
                    "search: {minimize: latency_p99}\n")
    with pytest.raises(SpecError, match=r"s.yaml:3: search: objective"):
        load_spec(path)


def _adaptive_search(noise_of):  # type: ignore[no-untyped-def]
    space = Space.of({"ceph_config.a": [1, 2], "b": ["x", "y"]}, {"ceph_config.a"})
    calls = []
    counter = {}

    def evaluate(c, seconds, rep):  # type: ignore[no-untyped-def]
        calls.append((c, rep))
        k = counter[c] = counter.get(c, 0) + 1
        wobble = noise_of(dict(c)) * (1 if k % 2 else -1)
        return {"iops": 1000.0 * dict(c)["ceph_config.a"] + wobble}

    search = Search(space, SearchSettings(objectives=(Objective("iops", "maximize"),)),
                    evaluate, full_seconds=5, iterations=AdaptiveIterations(2, 6, 0.05))
    return search.run(), calls


def test_adaptive_grid_interleaves_within_a_restart_group() -> None:
    outcome, calls = _adaptive_search(lambda c: 400.0 if c["b"] == "y" else 1.0)
    labels = [(dict(c)["ceph_config.a"], dict(c)["b"], rep) for c, rep in calls]
    # a=1 group first, its two candidates alternate; then the a=2 group
    assert labels[:4] == [(1, "x", 0), (1, "y", 0), (1, "x", 1), (1, "y", 1)]
    assert outcome.restarts == 2
    reps = {dict(c)["b"] + str(dict(c)["ceph_config.a"]): r
            for c, r in outcome.repetitions.items()}
    assert reps["x1"]["stopped"] == "ci" and reps["x1"]["n"] == 2
    assert reps["y1"]["stopped"] == "max" and reps["y1"]["n"] == 6  # noisy: hit max, said so
    assert dict(outcome.chosen)["ceph_config.a"] == 2


@pytest.mark.parametrize(("noise", "method"), [(0.05, "halving"), (0.05, "bayes")])
def test_replay_synthetic_meets_target_at_5_percent_noise(noise: float, method: str) -> None:
    table = synthetic_grid(noise, seed=1)
    settings = SearchSettings(method=method, objectives=(Objective("iops", "maximize"),))
    figures = replay(table, settings, seeds=30, budget_fraction=1 / 3)
    assert figures.success >= 0.9
    assert figures.spent_seconds_median <= figures.grid_seconds / 3 + 1e-9
    assert figures.seconds_p90 <= figures.grid_seconds / 3


def _synthetic(noise: float) -> list:  # type: ignore[type-arg]
    return [synthetic_grid(noise, seed=s) for s in range(1, 6)]


MAXIMIZE_IOPS = (Objective("iops", "maximize"),)


def test_replay_figures_against_the_target_and_the_oracle() -> None:
    """The benchmark's figures (100 seeds, 5 surfaces per noise, 1/3 of the grid's
    benchmark-seconds). Met at 5 % noise: asserted against the 90 % target. Not met at 15 %
    noise nor on the recorded grid: asserted against the measured figure minus 5 points, and
    the oracle bound shows why 90 % is out of reach there."""
    halving = SearchSettings(method="halving", objectives=MAXIMIZE_IOPS, restart_seconds=0.0)
    f5 = replay(_synthetic(0.05), halving, seeds=100, budget_fraction=1 / 3)
    assert f5.success >= 0.9  # target met (measured 99 %)
    assert f5.spent_seconds_median <= f5.grid_seconds / 3
    f15 = replay(_synthetic(0.15), halving, seeds=100, budget_fraction=1 / 3)
    assert f15.success >= 0.74 - 0.05  # target NOT met: measured 74 %
    recorded = replay(load_grid(FIXTURE), halving, seeds=100, budget_fraction=1 / 3)
    assert recorded.success >= 0.47 - 0.05  # target NOT met: measured 47 %
    # an oracle told the 4 best of the grid (resp. the best 2 of the recorded grid) and
    # spending the whole third on them alone stays below 90 %: no search reaches it
    assert oracle_share(_synthetic(0.15), MAXIMIZE_IOPS[0], k=4, seeds=100) < 0.9
    assert oracle_share(load_grid(FIXTURE), MAXIMIZE_IOPS[0], k=2, seeds=100) < 0.9
    # ... while at 5 % noise the oracle is perfect and the search close to it
    assert oracle_share(_synthetic(0.05), MAXIMIZE_IOPS[0], k=4, seeds=100) == 1.0


def test_restart_seconds_are_paid_from_the_budget() -> None:
    table = synthetic_grid(0.05, seed=1)
    settings = SearchSettings(method="halving", objectives=MAXIMIZE_IOPS, restart_seconds=9.0)
    for seed in range(5):
        outcome = replay_one(table, settings, seed, 1 / 3)
        assert outcome.total_seconds == outcome.bench_seconds + 9.0 * outcome.restarts
        assert outcome.total_seconds <= table.grid_total_seconds(9.0) / 3
        assert any("screens 7 of 16" in n for n in outcome.notes)
    # a budget in steps counts steps: restarts do not shrink the first rung
    by_steps = Search(table.space, settings, lambda c, sec, r: None, full_seconds=5,
                      budget_steps=30)
    assert by_steps.schedule()[0].candidates == 16
    bayes = replace(settings, method="bayes")
    outcome = replay_one(table, bayes, 0, 1 / 3)
    assert outcome.restarts >= 1
    assert outcome.total_seconds <= table.grid_total_seconds(9.0) / 3


def test_halving_restarts_at_most_the_grids_when_capped() -> None:
    table = synthetic_grid(0.05, seed=1)
    _, _, grid_restarts = table.grid_cost()
    uncapped = SearchSettings(method="halving", objectives=MAXIMIZE_IOPS, restart_seconds=0.0)
    capped = replace(uncapped, max_restarts="grid")
    assert replay_one(table, uncapped, 0, 1 / 3).restarts > grid_restarts == 16
    for seed in range(10):
        assert replay_one(table, capped, seed, 1 / 3).restarts <= grid_restarts


def test_covering_subset_spreads_over_every_axis() -> None:
    space = synthetic_grid(0.05).space
    subset = space.covering_subset(7, seed=3)
    assert len(set(subset)) == 7
    for i, (_, values) in enumerate(space.axes):
        assert {c[i][1] for c in subset} == set(values)  # every value of every axis
    assert space.covering_subset(7, seed=3) == subset


def test_replay_is_deterministic_per_seed() -> None:
    table = synthetic_grid(0.15, seed=1)
    settings = SearchSettings(method="halving", objectives=(Objective("iops", "maximize"),))
    a = replay(table, settings, seeds=10, budget_fraction=1 / 3)
    b = replay(table, settings, seeds=10, budget_fraction=1 / 3)
    assert a == b


def _run_dir(tmp_path: Path, values: dict[int, list[float]]) -> Path:
    """A run over shards -> IOPS per iteration, the cluster's pre-sweep value 2."""
    _workload_run_dir(tmp_path, {(shards, None): vals for shards, vals in values.items()})
    (tmp_path / "pre_sweep_config.json").write_text(json.dumps(
        {"db": {}, "running": {"osd_op_num_shards": {"osd.0": "2", "osd.1": "2"}}}))
    return tmp_path


def test_recommend_significant_improvement(tmp_path: Path) -> None:
    data = load_run(_run_dir(tmp_path, {2: [1000, 1010, 990], 4: [1200, 1190, 1210],
                                        8: [1195, 1215, 1190]}))
    rec = recommend(data)
    assert dict(rec.best)["ceph_config.osd_op_num_shards"] == 4
    assert rec.significant and rec.improvement == pytest.approx(0.2)
    lo, hi = rec.improvement_ci
    assert lo > 0 and lo < 0.2 < hi
    assert [dict(c)["ceph_config.osd_op_num_shards"] for c in rec.indistinguishable] == [8]
    assert rec.config_lines == [["ceph", "config", "set", "osd", "osd_op_num_shards", "4"]]


def test_recommend_says_no_significant_difference(tmp_path: Path) -> None:
    data = load_run(_run_dir(tmp_path, {2: [1000, 1200, 900], 4: [1050, 1250, 950]}))
    rec = recommend(data)
    assert dict(rec.best)["ceph_config.osd_op_num_shards"] == 4
    assert rec.significant is False and rec.improvement_ci[0] < 0 < rec.improvement_ci[1]


def _workload_run_dir(tmp_path: Path,
                      values: dict[tuple[int | None, int | None], list[float]]) -> Path:
    """A run over (shards, concurrent_ops) -> IOPS per iteration; None: not an axis."""
    steps = []
    for (shards, ops), vals in values.items():
        for i, v in enumerate(vals):
            sid = f"s{shards}i{i}" if ops is None else f"s{shards}c{ops}i{i}"
            axes: dict[str, int] = {}
            if shards is not None:
                axes["ceph_config.osd_op_num_shards"] = shards
            if ops is not None:
                axes["radosbench.concurrent_ops"] = ops
            steps.append({"id": sid, "benchmark": "radosbench", "iteration": i,
                          "params": {"time": 5, **({"concurrent_ops": ops} if ops else {})},
                          "pool_profile": None,
                          "ceph_config": {} if shards is None else {"osd_op_num_shards": shards},
                          "axes": axes})
            d = tmp_path / f"step-{sid}"
            d.mkdir()
            (d / "result.json").write_text(json.dumps({"step": sid, "results": [
                {"mode": "write", "iops": v, "bandwidth_bytes_per_second": v * 4096}]}))
    (tmp_path / "run.json").write_text(json.dumps({"run_id": "r", "steps": steps,
                                                   "restart_options": ["osd_op_num_shards"]}))
    return tmp_path


def test_recommendation_per_workload_never_across_loads(tmp_path: Path) -> None:
    """Concurrency is the load, not a setting: each concurrency gets its own answer (shards 2
    at 1 op in flight, shards 4 at 16), and the 16-op IOPS never make 16 ops the 'best'."""
    run = _workload_run_dir(tmp_path, {(2, 1): [300, 305, 298], (4, 1): [250, 255, 248],
                                       (2, 16): [3000, 3050, 2990], (4, 16): [3600, 3650, 3590]})
    per_workload = load_runs(run)
    assert [w for w, _ in per_workload] == [{"radosbench.concurrent_ops": "1"},
                                            {"radosbench.concurrent_ops": "16"}]
    best = [dict(recommend(d).best)["ceph_config.osd_op_num_shards"] for _, d in per_workload]
    assert best == [2, 4]
    assert all(d.axes == ["ceph_config.osd_op_num_shards"] for _, d in per_workload)


def test_workload_axes_only_is_nothing_to_recommend(tmp_path: Path) -> None:
    run = _workload_run_dir(tmp_path, {(None, 1): [300], (None, 16): [3000]})
    with pytest.raises(AnalysisError, match=r"workload axes only \(radosbench.concurrent_ops\)"):
        load_runs(run)


def test_single_runs_are_not_called_significantly_worse(tmp_path: Path) -> None:
    data = load_run(_run_dir(tmp_path, {2: [1000], 4: [1200]}))
    text = "\n".join(format_recommendation(recommend(data), data))
    assert "significantly worse" not in text
    assert "not compared (fewer than 2 runs): osd_op_num_shards=2" in text


class Killed(Exception):
    pass


@pytest.mark.parametrize("method", ["halving", "bayes"])
def test_live_search_resumes_with_same_decisions(tmp_path: Path, method: str) -> None:
    """Kill after 3 steps, resume: the done steps answer from the results dir, the asks that
    follow are those of an uninterrupted search (bayes: Optuna's sampler included)."""
    import random

    from cephscope.runner.results import RunDir
    from cephscope.runner.search.live import make_plan, run_live_search
    from cephscope.runner.steps import generate_steps

    path = tmp_path / "s.yaml"
    path.write_text("iterations: 3\n"
                    "ceph_config: {osd_op_num_shards: [1, 2, 4], "
                    "osd_op_num_threads_per_shard: [1, 2]}\n"
                    "benchmarks: {radosbench: {time: 6, write_only: true}}\n"
                    f"search: {{method: {method}, budget: {{fraction: 0.5}}, seed: 3}}\n")
    spec = load_spec(path)
    plan = make_plan(generate_steps(spec), {"osd_op_num_shards"}, spec.search,
                     spec.iterations, spec.adaptive)

    def run_dir(name: str) -> RunDir:
        rd = RunDir.create(tmp_path / name, name, path, path.read_text(), {}, [])
        return rd

    def runner(rd: RunDir, ran: list[str], kill_after: int | None):  # type: ignore[no-untyped-def]
        def run_step(step):  # type: ignore[no-untyped-def]
            if kill_after is not None and len(ran) == kill_after:
                raise Killed
            ran.append(step.id)
            rd.begin_step(step)
            rng = random.Random(step.id)  # the "cluster" answers the same for the same step
            iops = 1000 * step.ceph_config["osd_op_num_shards"] * (1 + rng.gauss(0, 0.05))
            rd.finish_step(step, [{"mode": "write", "iops": iops}],
                           {"dead_time_seconds": 7.0}, {})
            return None
        return run_step

    whole_ran: list[str] = []
    whole = run_dir("whole")
    run_live_search(whole, plan, runner(whole, whole_ran, None), None, lambda m: None)

    killed = run_dir("killed")
    first: list[str] = []
    with pytest.raises(Killed):
        run_live_search(killed, plan, runner(killed, first, 3), None, lambda m: None)
    second: list[str] = []
    run_live_search(killed, plan, runner(killed, second, None), None, lambda m: None)
    assert first == whole_ran[:3]
    assert second == whole_ran[3:]  # nothing redone, same decisions after the kill
    assert [s.id for s in killed.steps()] == [s.id for s in whole.steps()]
    out = json.loads((killed.path / "search.json").read_text())
    assert out["chosen"]["ceph_config.osd_op_num_shards"] == 4
    # every move to other restart values is measured (resumed steps included)
    assert out["restarts"] >= 2
    assert out["restart_seconds_measured"] == {"n": out["restarts"], "mean": 7.0, "max": 7.0}


def test_pareto_front_of_a_run_with_plot(tmp_path: Path) -> None:
    from cephscope.runner.search.analysis import front_of, plot_front, report_lines

    run = _run_dir(tmp_path, {1: [1000, 1010], 2: [1500, 1490], 4: [1400, 1390]})
    # a second objective: latency, lower at 1 shard, higher at 4 (made up, known answer)
    lat = {1: 0.002, 2: 0.004, 4: 0.005}
    for d in run.glob("step-*"):
        r = json.loads((d / "result.json").read_text())
        shards = int(d.name.removeprefix("step-s").split("i")[0])
        r["results"][0]["latency_avg_seconds"] = lat[shards] * (1.01 if "i1" in d.name else 1)
        (d / "result.json").write_text(json.dumps(r))
    (run / "spec.resolved.json").write_text(json.dumps({
        "benchmarks": {"radosbench": {}},
        "search_raw": {"objectives": [{"maximize": "iops"}, {"minimize": "latency_avg"}]}}))
    data = load_run(run)
    front = front_of(data)
    assert [dict(c)["ceph_config.osd_op_num_shards"] for c in front.members] == [2, 1]
    (row,) = front.significant.values()
    assert row == [True, True]
    png = plot_front(front, tmp_path / "front.png")
    assert png.read_bytes()[:4] == b"\x89PNG"
    lines, plots = report_lines(run, tmp_path / "plots")
    assert any(line.startswith("Pareto front") for line in lines) and plots


def test_adaptive_iterations_without_search_section(tmp_path: Path) -> None:
    from cephscope.runner.search.live import expected, make_plan
    from cephscope.runner.steps import generate_steps

    path = tmp_path / "s.yaml"
    path.write_text("iterations: {min: 2, max: 6, ci: 5%}\n"
                    "benchmarks: {radosbench: {concurrent_ops: [1, 16], time: 3}}\n")
    spec = load_spec(path)
    plan = make_plan(generate_steps(spec), set(), spec.search, spec.iterations, spec.adaptive)
    assert plan.settings.primary == Objective("iops", "maximize")
    assert expected(plan)[-1] == ("expected: full grid: 4 steps, 12 benchmark-seconds, "
                                  "0 restart(s) x 9 s = 12 s in all, up to 12 steps with "
                                  "iterations up to 6")


@pytest.mark.parametrize(("search", "benchmarks", "error"), [
    ("{method: bayes, budget: {seconds: 1}}", "{radosbench: {time: 5}}",
     "smaller than one step"),
    ("{method: halving, budget: {seconds: 20}}", "{radosbench: {time: 5}}",
     "smaller than one pass of successive halving"),
    ("{method: bayes}", "{radosbench: {time: 5}}", "needs a budget"),
    ("{method: halving, budget: {steps: 9}, maximize: 'iops[concurrent_ops=16]'}",
     "{radosbench: {time: 5, concurrent_ops: [1, 16]}}", "objectives at workloads"),
    ("{method: halving, budget: {steps: 9}}",
     "{radosbench: {time: 5}, librbdfio: {time: 5}}", "a search runs one benchmark"),
])
def test_search_plan_bad_input(tmp_path: Path, search: str, benchmarks: str,
                               error: str) -> None:
    from cephscope.runner.search.live import SearchPlanError, make_plan
    from cephscope.runner.steps import generate_steps

    path = tmp_path / "s.yaml"
    path.write_text("ceph_config: {osd_op_num_shards: [1, 2, 4, 8], "
                    "osd_op_num_threads_per_shard: [1, 2, 3, 4]}\n"
                    f"benchmarks: {benchmarks}\nsearch: {search}\n")
    spec = load_spec(path)
    with pytest.raises(SearchPlanError, match=error):
        make_plan(generate_steps(spec), {"osd_op_num_shards"}, spec.search, spec.iterations,
                  spec.adaptive)


@pytest.mark.parametrize(("benchmark", "time_", "ramp"), [
    ("librbdfio: {mode: randwrite, time: 6}", 2, 3),  # fio discards its ramp itself
    ("radosbench: {time: 6}", 5, None),  # the runner cuts the per-second series
])
def test_search_warmup_is_fio_ramp_or_a_cut(tmp_path: Path, benchmark: str, time_: int,
                                            ramp: int | None) -> None:
    from cephscope.runner.search.live import make_plan, step_for
    from cephscope.runner.steps import generate_steps

    path = tmp_path / "s.yaml"
    path.write_text("ceph_config: {osd_op_num_shards: [1, 2]}\n"
                    f"benchmarks: {{{benchmark}}}\n"
                    "search: {method: halving, warmup: 3, budget: {steps: 9}, "
                    "restart_seconds: 0}\n")
    spec = load_spec(path)
    plan = make_plan(generate_steps(spec), {"osd_op_num_shards"}, spec.search, spec.iterations,
                     spec.adaptive)
    short = step_for(plan, plan.space.candidates()[0], 2, 0)
    assert short.params["time"] == time_ and short.params.get("ramp") == ramp


def test_pareto_front_across_workloads_known_answer(tmp_path: Path) -> None:
    """Each configuration (shards) runs two workloads (16 and 1 in flight); one objective per
    workload: the front is over configurations, each point read from its own workload."""
    from cephscope.runner.search.analysis import AnalysisError, front_of, recommend

    # shards -> (IOPS at 16 in flight, latency at 1 in flight); 4 is dominated by 2
    truth = {1: (1000.0, 0.0010), 2: (1500.0, 0.0020), 4: (1400.0, 0.0025)}
    steps = []
    for shards, (iops16, lat1) in truth.items():
        for ops in (1, 16):
            for i in range(2):
                sid = f"s{shards}c{ops}i{i}"
                axes = {"ceph_config.osd_op_num_shards": shards, "radosbench.concurrent_ops": ops}
                steps.append({"id": sid, "benchmark": "radosbench", "iteration": i,
                              "params": {"time": 5, "concurrent_ops": ops}, "pool_profile": None,
                              "ceph_config": {"osd_op_num_shards": shards}, "axes": axes})
                jitter = 1.0 + 0.01 * i
                # the other workload's figures are far off: reading them would change the front
                iops = iops16 * jitter if ops == 16 else 100.0
                lat = lat1 * jitter if ops == 1 else 0.1 / shards
                (tmp_path / f"step-{sid}").mkdir()
                (tmp_path / f"step-{sid}" / "result.json").write_text(json.dumps({
                    "step": sid, "results": [{"mode": "write", "iops": iops,
                                              "latency_avg_seconds": lat}]}))
    (tmp_path / "run.json").write_text(json.dumps({"run_id": "r", "steps": steps,
                                                   "restart_options": ["osd_op_num_shards"]}))
    search = {"objectives": [{"maximize": "iops[concurrent_ops=16]"},
                             {"minimize": "latency_avg[concurrent_ops=1]"}]}
    (tmp_path / "spec.resolved.json").write_text(json.dumps({
        "benchmarks": {"radosbench": {"concurrent_ops": [1, 16]}}, "search_raw": search}))
    data = load_run(tmp_path)
    assert data.axes == ["ceph_config.osd_op_num_shards"]  # workloads are not configurations
    front = front_of(data)
    assert [dict(c)["ceph_config.osd_op_num_shards"] for c in front.members] == [2, 1]
    sums = front.summaries[front.members[0]]
    assert sums[0].mean == pytest.approx(1507.5) and sums[1].mean == pytest.approx(0.00201)
    assert dict(recommend(data).best)["ceph_config.osd_op_num_shards"] == 2
    # a workload parameter that is no axis of the run, and one no benchmark has
    search["objectives"][1] = {"minimize": "latency_avg[iodepth=1]"}
    (tmp_path / "spec.resolved.json").write_text(json.dumps({
        "benchmarks": {"radosbench": {"concurrent_ops": [1, 16], "iodepth": 1}},
        "search_raw": search}))
    with pytest.raises(AnalysisError, match="'iodepth' is not a benchmark-parameter axis"):
        load_run(tmp_path)
    settings, problems = parsed(parse_search, ("search",), search,
                                {"radosbench": {"concurrent_ops": [1]}})
    assert settings is None and "'iodepth' is not a parameter of radosbench" in problems[0]
