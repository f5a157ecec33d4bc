"""What a finished run says: per-candidate statistics, the recommendation, the Pareto front.

Used by `cephscope recommend RUN_DIR` and by the report. Candidates are the sweep's axes;
only runs of the full length count (a halving search's short runs are for ranking only).
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cephscope.runner.baseline import pre_sweep_values
from cephscope.runner.search.engine import metric_key
from cephscope.runner.search.measure import result_metrics
from cephscope.runner.search.pareto import pareto_front
from cephscope.runner.search.settings import Objective, SearchSettings, parse_search
from cephscope.runner.search.space import Candidate, label
from cephscope.runner.spec_checker import Checker
from cephscope.runner.stats import Summary, summarize, t_ppf, welch


class AnalysisError(ValueError):
    pass


@dataclass
class RunData:
    axes: list[str]
    runs: dict[Candidate, list[dict[str, float]]]
    objectives: tuple[Objective, ...]
    constraints: tuple[Any, ...]
    baseline: Candidate | None
    baseline_note: str
    search: dict[str, Any] | None = None

    def values(self, c: Candidate, o: Objective | str) -> list[float]:
        key = o.key if isinstance(o, Objective) else o
        return [r[key] for r in self.runs.get(c, []) if key in r]

    def summary(self, c: Candidate, o: Objective) -> Summary | None:
        vals = self.values(c, o)
        return summarize(vals) if vals else None

    def feasible(self, c: Candidate) -> bool:
        for con in self.constraints:
            vals = self.values(c, metric_key(con.metric, con.mode))  # any workload
            if vals and not con.holds(sum(vals) / len(vals)):
                return False
        return True


# Benchmark parameters that configure the storage rather than the load (an RBD image's
# object size is chosen when the image is made); every other benchmark parameter is workload.
CONFIGURATION_PARAMS = frozenset({"vol_object_size"})


def workload_axes_of(axes: Sequence[str], benchmarks: set[str]) -> list[str]:
    """The axes that vary the load (op size, mode, concurrency, ...), not the configuration."""
    return [a for a in axes if a.split(".", 1)[0] in benchmarks and "." in a
            and a.split(".", 1)[1] not in CONFIGURATION_PARAMS]


def load_runs(run_dir: Path, baseline: Mapping[str, str] | None = None
              ) -> list[tuple[dict[str, str], RunData]]:
    """One RunData per workload of the run (the values of its workload axes), so that a
    configuration is compared with others under the same load only. An objective that names
    its workload (`iops@randread[iodepth=256]`) already says which steps count: one RunData.
    Raises AnalysisError when the run sweeps workload axes only (nothing to recommend)."""
    from cephscope.runner.results import ResultsError, RunDir

    try:
        steps = RunDir(Path(run_dir)).steps()
    except (ResultsError, KeyError, ValueError) as exc:
        raise AnalysisError(str(exc)) from exc
    settings = _settings(Path(run_dir))
    if settings is not None and any(o.workload for o in settings.objectives):
        return [({}, load_run(run_dir, baseline))]
    axes: list[str] = []
    for st in steps:
        axes += [a for a in st.axes if a not in axes]
    workload = workload_axes_of(axes, {st.benchmark for st in steps})
    if workload and len(workload) == len(axes):
        raise AnalysisError(f"{run_dir}: the run sweeps workload axes only "
                            f"({', '.join(workload)}), no configuration: nothing to recommend")
    combos: list[dict[str, str]] = []
    for st in steps:
        combo = {a: str(st.axes.get(a)) for a in workload}
        if combo not in combos:
            combos.append(combo)
    return [(combo, load_run(run_dir, baseline, combo)) for combo in combos]


def load_run(run_dir: Path, baseline: Mapping[str, str] | None = None,
             workload: Mapping[str, str] | None = None) -> RunData:
    """The run's candidates and their measurements; with `workload` (axis -> value), only the
    steps run under that load, its axes left out of the candidates."""
    from cephscope.runner.results import ResultsError, RunDir

    rd = RunDir(Path(run_dir))
    try:
        run = rd.load_run()
        steps = rd.steps()
    except (ResultsError, KeyError, ValueError) as exc:
        raise AnalysisError(str(exc)) from exc
    settings = _settings(Path(run_dir))
    lengths = [float(s.params["time"]) for s in steps if isinstance(s.params.get("time"),
                                                                    int | float)]
    full = max(lengths) if lengths else None
    objectives = settings.objectives if settings else (Objective("iops", "maximize"),)
    axes: list[str] = []
    for s in steps:
        axes += [a for a in s.axes if a not in axes]
    # objectives measured at a workload: its parameters' axes are workloads, not configuration
    workload_axes = _workload_axes(axes, {s.benchmark for s in steps}, objectives,
                                   Path(run_dir))
    axes = [a for a in axes if a not in workload_axes and a not in (workload or {})]
    runs: dict[Candidate, list[dict[str, float]]] = {}
    for s in steps:
        if workload and any(str(s.axes.get(a)) != v for a, v in workload.items()):
            continue
        if full is not None and s.params.get("time") not in (None, full, int(full)):
            continue
        result = rd.step_result(s)
        if result is None:
            continue
        cand = tuple((a, s.axes.get(a)) for a in axes)
        metrics = result_metrics(result.get("results", []))
        for o in objectives:
            if o.workload and _at_workload(s.benchmark, s.axes, o):
                plain = metric_key(o.metric, o.mode)
                if plain in metrics:
                    metrics[o.key] = metrics[plain]
        runs.setdefault(cand, []).append(metrics)
    if not runs:
        raise AnalysisError(f"{run_dir}: no finished step of full length: nothing to recommend")
    base, note = _baseline(rd, axes, runs, baseline)
    return RunData(axes, runs, objectives, settings.constraints if settings else (), base, note,
                   search=run.get("search"))


def _workload_axes(axes: Sequence[str], benchmarks: set[str], objectives: Sequence[Objective],
                   run_dir: Path) -> set[str]:
    found: set[str] = set()
    for o in objectives:
        for param, _ in o.workload:
            match = {f"{b}.{param}" for b in benchmarks} & set(axes)
            if not match:
                raise AnalysisError(f"{run_dir}: objective {o.label}: {param!r} is not a "
                                    f"benchmark-parameter axis of this run (axes: "
                                    f"{', '.join(axes)})")
            found |= match
    return found


def _at_workload(benchmark: str, step_axes: Mapping[str, Any], o: Objective) -> bool:
    return all(str(step_axes.get(f"{benchmark}.{param}")) == value for param, value in o.workload)


def _settings(run_dir: Path) -> SearchSettings | None:
    try:
        resolved = json.loads((run_dir / "spec.resolved.json").read_text())
    except (OSError, ValueError):
        return None
    raw = resolved.get("search_raw")
    if not raw:
        return None
    # a run dir's own spec was checked when it ran: a problem now just means no settings
    return parse_search(Checker(lambda kp: str(run_dir)), ("search",), raw,
                        resolved.get("benchmarks", {}))


def _baseline(rd: Any, axes: Sequence[str], runs: Mapping[Candidate, Any],
              given: Mapping[str, str] | None) -> tuple[Candidate | None, str]:
    if given:
        match = [c for c in runs if all(
            str(v) == str(given.get(a.rsplit(".", 1)[-1], given.get(a, v))) for a, v in c)]
        unknown = [k for k in given if k not in axes and f"ceph_config.{k}" not in axes
                   and not any(a.endswith("." + k) for a in axes)]
        if unknown:
            raise AnalysisError(f"--baseline names {', '.join(unknown)}: not an axis of this run "
                                f"(axes: {', '.join(a.rsplit('.', 1)[-1] for a in axes)})")
        if len(match) != 1:
            raise AnalysisError(f"--baseline {given}: matches {len(match)} measured "
                                f"configurations; name one value for every axis")
        return match[0], "the configuration given with --baseline"
    before = pre_sweep_values(rd.read_pre_sweep_config())
    # compared by what the OSDs ran with: a 0 that means the _hdd/_ssd variant is resolved
    current = {f"ceph_config.{o}": v.effective for o, v in before.items()}
    shown = ", ".join(v.text() for _o, v in sorted(before.items()))
    match = [c for c in runs if all(a in current and str(v) == str(current[a]) for a, v in c)]
    if match:
        return match[0], f"the cluster's values before the sweep: {shown}"
    return None, (f"the cluster's values before the sweep ({shown or 'unknown'}) were not "
                  f"among the measured configurations; give one with --baseline AXIS=VALUE,...")


@dataclass
class Recommendation:
    objective: Objective
    best: Candidate | None
    best_summary: Summary | None
    baseline: Candidate | None
    baseline_summary: Summary | None
    baseline_note: str
    improvement: float | None = None  # relative, in the objective's good direction
    improvement_ci: tuple[float, float] | None = None
    significant: bool | None = None
    p_value: float | None = None
    indistinguishable: list[Candidate] = field(default_factory=list)
    too_few: list[Candidate] = field(default_factory=list)
    infeasible: list[Candidate] = field(default_factory=list)
    config_lines: list[list[str]] = field(default_factory=list)


def recommend(data: RunData) -> Recommendation:
    o = data.objectives[0]
    infeasible = [c for c in data.runs if not data.feasible(c)]
    scored = [(o.sign() * (sum(v) / len(v)), c) for c in data.runs
              if (v := data.values(c, o)) and c not in infeasible]
    if not scored:
        return Recommendation(o, None, None, data.baseline, None, data.baseline_note,
                              infeasible=infeasible)
    # Prefer a candidate measured at least twice: a single run cannot carry a CI.
    repeated = [s for s in scored if len(data.values(s[1], o)) >= 2]
    best = max(repeated or scored, key=lambda s: s[0])[1]
    rec = Recommendation(o, best, data.summary(best, o), data.baseline,
                         data.summary(data.baseline, o) if data.baseline else None,
                         data.baseline_note, infeasible=infeasible)
    bvals = data.values(best, o)
    for _, c in scored:
        if c == best:
            continue
        vals = data.values(c, o)
        if len(vals) < 2 or len(bvals) < 2:
            rec.too_few.append(c)
        elif not welch(vals, bvals).significant:
            rec.indistinguishable.append(c)
    rec.config_lines = [["ceph", "config", "set", "osd", a.split(".", 1)[1], str(v)]
                        for a, v in best if a.startswith("ceph_config.")]
    if data.baseline is not None and data.baseline != best:
        avals = data.values(data.baseline, o)
        if len(avals) >= 2 and len(bvals) >= 2:
            w = welch(avals, bvals)
            base = sum(avals) / len(avals)
            sa, sb = summarize(avals), summarize(bvals)
            se = math.sqrt((sa.sd or 0) ** 2 / sa.n + (sb.sd or 0) ** 2 / sb.n)
            half = t_ppf(0.975, w.df) * se if se else 0.0
            sign = o.sign()
            rec.improvement = sign * w.diff / abs(base)
            lo, hi = sign * (w.diff - half) / abs(base), sign * (w.diff + half) / abs(base)
            rec.improvement_ci = (min(lo, hi), max(lo, hi))
            rec.significant, rec.p_value = w.significant, w.p
    elif data.baseline == best:
        rec.improvement, rec.significant = 0.0, False
    return rec


def _fmt(o: Objective, s: Summary | None) -> str:
    if s is None:
        return "-"
    scale, unit = (1e3, " ms") if o.metric.startswith("latency") else (1.0, "")
    text = f"{s.mean * scale:.4g}{unit}"
    if s.ci_low is not None and s.ci_high is not None:
        text += f" (95% CI {s.ci_low * scale:.4g} - {s.ci_high * scale:.4g}, n={s.n})"
    else:
        text += f" (n={s.n}, no CI)"
    return text


def format_recommendation(rec: Recommendation, data: RunData) -> list[str]:
    o = rec.objective
    lines = [f"objective: {o.label}"]
    if rec.best is None:
        lines.append("no configuration met the constraint(s): "
                     + "; ".join(c.text for c in data.constraints)
                     if rec.infeasible else "no measured configuration")
        return lines
    lines.append(f"recommended: {label(rec.best)}  {o.metric}: {_fmt(o, rec.best_summary)}")
    if rec.baseline is None:
        lines.append(f"baseline: none ({rec.baseline_note})")
    elif rec.baseline == rec.best:
        lines.append(f"baseline ({rec.baseline_note}) is the best configuration: "
                     f"no change recommended")
    else:
        lines.append(f"baseline: {label(rec.baseline)} ({rec.baseline_note}): "
                     f"{_fmt(o, rec.baseline_summary)}")
        if rec.improvement is None:
            lines.append("improvement: unknown (a side has fewer than 2 runs)")
        else:
            lo, hi = rec.improvement_ci or (math.nan, math.nan)
            lines.append(f"improvement over baseline: {rec.improvement:+.1%} "
                         f"(95% CI {lo:+.1%} to {hi:+.1%}, Welch p={rec.p_value:.3g})")
            if not rec.significant:
                lines.append("no significant difference from the baseline at 95 %: keeping "
                             "the baseline is as good as far as this run can tell")
    compared = len(data.runs) - 1 - len(rec.too_few) - len(rec.infeasible)
    if rec.indistinguishable:
        lines.append("statistically indistinguishable from it (Welch p >= 0.05): "
                     + "; ".join(label(c) for c in rec.indistinguishable))
    elif compared > 0:
        lines.append("every other configuration compared is significantly worse "
                     "(Welch p < 0.05)")
    if rec.too_few:
        lines.append("not compared (fewer than 2 runs): " + "; ".join(label(c) for c in rec.too_few))
    if rec.infeasible:
        lines.append("excluded by constraints: " + "; ".join(label(c) for c in rec.infeasible))
    if rec.config_lines:
        lines.append("apply with:")
        lines += ["  " + " ".join(cmd) for cmd in rec.config_lines]
    return lines


@dataclass
class Front:
    objectives: tuple[Objective, ...]
    members: list[Candidate]
    summaries: dict[Candidate, list[Summary | None]]
    significant: dict[tuple[Candidate, Candidate], list[bool | None]]


def front_of(data: RunData, objectives: Sequence[Objective] | None = None) -> Front:
    objs = tuple(objectives or data.objectives)
    if len(objs) < 2:
        raise AnalysisError("a Pareto front needs at least two objectives (search.maximize / "
                            "search.minimize)")
    points = {}
    for c in data.runs:
        means = [sum(v) / len(v) if (v := data.values(c, o)) else math.nan for o in objs]
        if not any(math.isnan(m) for m in means) and data.feasible(c):
            points[c] = means
    members = pareto_front(points, objs)
    summaries = {c: [data.summary(c, o) for o in objs] for c in points}
    sig: dict[tuple[Candidate, Candidate], list[bool | None]] = {}
    for a, b in itertools.pairwise(members):
        row: list[bool | None] = []
        for o in objs:
            va, vb = data.values(a, o), data.values(b, o)
            row.append(welch(va, vb).significant if len(va) >= 2 and len(vb) >= 2 else None)
        sig[(a, b)] = row
    return Front(objs, members, summaries, sig)


def format_front(front: Front) -> list[str]:
    lines = ["Pareto front (" + " vs ".join(o.label for o in front.objectives) + "):"]
    for c in front.members:
        lines.append(f"  {label(c)}: " + "; ".join(
            f"{o.key} {_fmt(o, s)}"
            for o, s in zip(front.objectives, front.summaries[c], strict=True)))
    for (a, b), row in front.significant.items():
        lines.append(f"  {label(a)} vs {label(b)}: " + ", ".join(
            f"{o.metric}: {'significant' if s else 'not significant' if s is False else 'n<2'}"
            for o, s in zip(front.objectives, row, strict=True)))
    return lines


def plot_front(front: Front, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ox, oy = front.objectives[0], front.objectives[1]
    fig, ax = plt.subplots(figsize=(6.4, 4.8))
    for c, sums in front.summaries.items():
        sx, sy = sums[0], sums[1]
        if sx is None or sy is None:
            continue
        on = c in front.members
        xerr = (sx.ci_half_width or 0.0)
        yerr = (sy.ci_half_width or 0.0)
        ax.errorbar(sx.mean, sy.mean, xerr=xerr, yerr=yerr, fmt="o" if on else ".",
                    color="tab:red" if on else "tab:gray", alpha=1.0 if on else 0.6, capsize=2)
        if on:
            ax.annotate(label(c), (sx.mean, sy.mean), fontsize=7, xytext=(3, 3),
                        textcoords="offset points")
    pts = [(front.summaries[c][0].mean, front.summaries[c][1].mean)  # type: ignore[union-attr]
           for c in front.members]
    pts.sort()
    ax.plot([p[0] for p in pts], [p[1] for p in pts], color="tab:red", linewidth=1)
    ax.set_xlabel(ox.label)
    ax.set_ylabel(oy.label)
    ax.set_title("Pareto front (error bars: 95 % CI)")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def report_lines(run_dir: Path, plot_dir: Path | None = None) -> tuple[list[str], list[Path]]:
    """The report's recommendation section (and the Pareto plot, with two objectives or more);
    empty when the run cannot say anything (no finished full-length step)."""
    from cephscope.runner.results import RunDir
    from cephscope.runner.search.live import format_outcome, load_outcome

    try:
        per_workload = load_runs(run_dir)
    except AnalysisError:
        return [], []
    lines: list[str] = []
    outcome = load_outcome(RunDir(run_dir))
    if outcome is not None:
        lines += format_outcome(outcome)
    plots: list[Path] = []
    for i, (workload, data) in enumerate(per_workload):
        lines += workload_header(workload)
        lines += format_recommendation(recommend(data), data)
        if len(data.objectives) >= 2:
            front = front_of(data)
            lines += format_front(front)
            if plot_dir is not None:
                plot_dir.mkdir(parents=True, exist_ok=True)
                name = f"pareto-front-{i + 1}.png" if len(per_workload) > 1 else "pareto-front.png"
                plots.append(plot_front(front, plot_dir / name))
    return lines, plots


def workload_header(workload: Mapping[str, str]) -> list[str]:
    """The line that opens one workload's recommendation (none for a run of one workload)."""
    if not workload:
        return []
    return ["", "workload: " + " ".join(f"{a.split('.', 1)[1]}={v}" for a, v in workload.items())]
