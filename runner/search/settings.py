"""The `iterations: {min, max, ci}` and `search:` sections of a sweep spec.

Parsers follow the spec's convention (runner/spec_checker.py): `parse_X(c, key_path, value)`
returns the parsed value, or None with every problem reported to the checker `c` with its
line, before anything touches the cluster.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cephscope.runner.restart import TYPICAL_RESTART_SECONDS
from cephscope.runner.spec_checker import Checker

# objective metric name -> (key of a parsed benchmark result, lower is better by nature)
METRICS: dict[str, str] = {
    "iops": "iops",
    "bandwidth": "bandwidth_bytes_per_second",
    "latency_avg": "latency_avg_seconds",
    "latency_max": "latency_max_seconds",
    "latency_p99": "latency_p99_seconds",
    "latency_p50": "latency_p50_seconds",
}
# metrics each benchmark produces (rados bench keeps no latency histogram: no percentiles)
BENCHMARK_METRICS: dict[str, frozenset[str]] = {
    "radosbench": frozenset({"iops", "bandwidth", "latency_avg", "latency_max"}),
    "librbdfio": frozenset(METRICS),
}
METHODS = ("grid", "halving", "bayes")
SEARCH_KEYS = frozenset({"method", "objectives", "maximize", "minimize", "constraints", "budget",
                         "seed", "eta", "min_seconds", "warmup", "restart_seconds",
                         "max_restarts", "rank_check", "batch"})
UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9, "": 1.0,
         "k": 1e3, "M": 1e6, "G": 1e9, "KiB": 1024.0, "MiB": 1024.0 ** 2, "GiB": 1024.0 ** 3}
_OBJECTIVE = re.compile(r"^\s*(?P<metric>[a-z0-9_]+)(?:@(?P<mode>[a-z]+))?"
                        r"(?:\[(?P<workload>[^\]]*)\])?\s*$")
_CONSTRAINT = re.compile(
    r"^\s*(?P<metric>[a-z0-9_]+)(?:@(?P<mode>[a-z]+))?\s*(?P<op><=|>=|<|>)\s*"
    r"(?P<value>[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(?P<unit>[a-zA-Zµ]*)\s*$")


@dataclass(frozen=True)
class AdaptiveIterations:
    """Repeat a step until the 95 % CI half-width of its objective is within `ci` of its mean."""

    min: int = 2
    max: int = 8
    ci: float = 0.05  # relative half-width (0.05 = ±5 %)

    def to_dict(self) -> dict[str, Any]:
        return {"min": self.min, "max": self.max, "ci": self.ci}


@dataclass(frozen=True)
class Objective:
    metric: str  # a key of METRICS
    direction: str  # "maximize" | "minimize"
    mode: str | None = None  # benchmark mode (write, seq, randread, ...); None = the first
    # workload: benchmark-parameter values the objective is measured at, e.g.
    # (("concurrent_ops", "256"),): every configuration is run on several workloads (a
    # benchmark-parameter axis) and each objective reads the steps of its own workload
    workload: tuple[tuple[str, str], ...] = ()

    @property
    def label(self) -> str:
        return f"{self.direction} {self.metric}" + (f"@{self.mode}" if self.mode else "") \
            + self.workload_suffix

    @property
    def workload_suffix(self) -> str:
        return ("[" + ",".join(f"{k}={v}" for k, v in self.workload) + "]"
                if self.workload else "")

    @property
    def key(self) -> str:
        """The key of this objective's figure in a step's metrics (see measure.py)."""
        return (f"{self.metric}@{self.mode}" if self.mode else self.metric) + \
            self.workload_suffix

    def better(self, a: float, b: float) -> bool:
        return a > b if self.direction == "maximize" else a < b

    def sign(self) -> float:
        """+1 when larger is better: score = sign * value is always maximised."""
        return 1.0 if self.direction == "maximize" else -1.0


@dataclass(frozen=True)
class Constraint:
    metric: str
    op: str
    value: float  # base units
    mode: str | None = None
    text: str = ""

    def holds(self, observed: float) -> bool:
        return {"<=": observed <= self.value, "<": observed < self.value,
                ">=": observed >= self.value, ">": observed > self.value}[self.op]


@dataclass(frozen=True)
class Budget:
    steps: int | None = None
    seconds: float | None = None  # benchmark-seconds (warm-up included) + restart seconds
    fraction: float | None = None  # of the full grid's benchmark + restart seconds

    def describe(self) -> str:
        if self.steps is not None:
            return f"{self.steps} steps"
        if self.seconds is not None:
            return f"{self.seconds:g} seconds (benchmark + restarts)"
        if self.fraction is not None:
            return f"{self.fraction:g} of the grid's benchmark + restart seconds"
        return "the full grid"


@dataclass(frozen=True)
class SearchSettings:
    method: str = "grid"
    objectives: tuple[Objective, ...] = ()
    constraints: tuple[Constraint, ...] = ()
    budget: Budget = field(default_factory=Budget)
    seed: int = 0
    eta: int = 3  # halving: keep the best 1/eta of each rung
    min_seconds: int = 2  # halving: shortest run
    warmup: int = 0  # seconds at the start of every run that are not measured
    restart_seconds: float = TYPICAL_RESTART_SECONDS  # one OSD restart, paid from the budget
    max_restarts: int | str | None = None  # halving: at most this many restarts; "grid": the
    # grid's own count; None: as many as the budget pays for
    rank_check: int = 3  # halving: candidates re-run long to check the short runs' ranking
    batch: int = 4  # bayes: asks per batch (ordered by restart values)

    @property
    def primary(self) -> Objective:
        return self.objectives[0]

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method, "seed": self.seed, "eta": self.eta,
            "min_seconds": self.min_seconds, "warmup": self.warmup,
            "restart_seconds": self.restart_seconds, "max_restarts": self.max_restarts,
            "rank_check": self.rank_check,
            "batch": self.batch,
            "objectives": [{"metric": o.metric, "direction": o.direction, "mode": o.mode}
                           for o in self.objectives],
            "constraints": [c.text for c in self.constraints],
            "budget": {k: v for k, v in self.budget.__dict__.items() if v is not None},
        }


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def parse_percent(value: Any) -> float | None:
    """`5%`, `0.05` or `5 %` -> 0.05; None if not a positive fraction below 1."""
    if isinstance(value, str):
        text = value.strip()
        if not text.endswith("%"):
            return None
        try:
            number = float(text[:-1].strip()) / 100.0
        except ValueError:
            return None
    elif _is_num(value):
        number = float(value)
    else:
        return None
    return number if 0.0 < number < 1.0 else None


def parse_iterations(c: Checker, kp: tuple[Any, ...],
                     value: Any) -> int | AdaptiveIterations | None:
    """`iterations: 3` (fixed) or `iterations: {min: 2, max: 8, ci: 5%}` (adaptive)."""
    at = ".".join(map(str, kp))
    if _is_int(value):
        if value < 1:
            c.problem(kp, f"{at}: {value!r}: must be at least 1")
            return None
        return value
    if not isinstance(value, dict):
        c.problem(kp, f"{at}: {value!r}: expected an integer or {{min, max, ci}}")
        return None
    before = len(c.problems)
    for key in value:
        if key not in ("min", "max", "ci"):
            c.problem((*kp, key), f"{'.'.join(map(str, kp))}.{key}: "
                            f"unknown key (min, max, ci)")
    lo, hi = value.get("min", 2), value.get("max", 8)
    if not _is_int(lo) or lo < 2:
        c.problem((*kp, 'min'), f"iterations.min: {lo!r}: must be an integer "
                        f">= 2 (a confidence interval needs two values)")
    if not _is_int(hi) or (_is_int(lo) and hi < lo):
        c.problem((*kp, 'max'), f"iterations.max: {hi!r}: must be an integer "
                        f">= min")
    ci = parse_percent(value.get("ci", "5%"))
    if ci is None:
        c.problem((*kp, 'ci'), f"iterations.ci: {value.get('ci')!r}: must be a "
                        f"relative half-width like 5% or 0.05")
    if len(c.problems) > before or ci is None:
        return None
    return AdaptiveIterations(min=lo, max=hi, ci=ci)


def _objective(c: Checker, kp: tuple[Any, ...], item: Any, direction: str) -> Objective | None:
    if not isinstance(item, str):
        c.problem(kp, f"search.{direction}: {item!r}: expected a metric name "
                        f"like iops or latency_p99@write")
        return None
    m = _OBJECTIVE.match(item)
    if m is None:
        c.problem(kp, f"search.{direction}: {item!r}: expected "
                        f"METRIC[@MODE][[PARAM=VALUE,...]], e.g. iops@randread[iodepth=256]")
        return None
    metric, mode = m["metric"], m["mode"]
    workload: list[tuple[str, str]] = []
    for part in (m["workload"] or "").split(","):
        if not part.strip():
            continue
        k, eq, v = part.partition("=")
        if not eq or not k.strip() or not v.strip():
            c.problem(kp, f"search.{direction}: {item!r}: workload "
                            f"{part.strip()!r}: expected PARAM=VALUE")
            return None
        workload.append((k.strip(), v.strip()))
    if metric not in METRICS:
        c.problem(kp, f"search.{direction}: {item!r}: unknown metric "
                        f"(one of {', '.join(METRICS)})")
        return None
    return Objective(metric=metric, direction=direction, mode=mode or None,
                     workload=tuple(workload))


def parse_constraint(c: Checker, kp: tuple[Any, ...], text: Any) -> Constraint | None:
    m = _CONSTRAINT.match(text) if isinstance(text, str) else None
    if m is None:
        c.problem(kp, f"search.constraints: {text!r}: expected "
                        f"'METRIC[@MODE] <=|>= VALUE [UNIT]', e.g. 'latency_p99 <= 5 ms'")
        return None
    if m["metric"] not in METRICS:
        c.problem(kp, f"search.constraints: {text!r}: unknown metric "
                        f"{m['metric']!r} (one of {', '.join(METRICS)})")
        return None
    if m["unit"] not in UNITS:
        c.problem(kp, f"search.constraints: {text!r}: unknown unit "
                        f"{m['unit']!r} (one of {', '.join(u for u in UNITS if u)})")
        return None
    return Constraint(metric=m["metric"], op=m["op"], value=float(m["value"]) * UNITS[m["unit"]],
                      mode=m["mode"], text=text.strip())


def parse_search(c: Checker, kp: tuple[Any, ...], value: Any,
                 benchmarks: Mapping[str, Mapping[str, Any]]) -> SearchSettings | None:
    """The `search:` section (at `kp`, `("search",)` in a spec); `benchmarks` (name ->
    params) checks that objectives exist."""
    if not isinstance(value, dict):
        c.problem(kp, f"search: {value!r}: must be a mapping")
        return None
    before = len(c.problems)
    for key in value:
        if key not in SEARCH_KEYS:
            c.problem((*kp, key), f"search.{key}: unknown key "
                            f"(one of {', '.join(sorted(SEARCH_KEYS))})")
    method = value.get("method", "grid")
    if method not in METHODS:
        c.problem((*kp, 'method'), f"search.method: {method!r}: unknown method "
                        f"(one of {', '.join(METHODS)})")
    objectives: list[Objective] = []
    for direction in ("maximize", "minimize"):
        if direction not in value:
            continue
        items = value[direction] if isinstance(value[direction], list) else [value[direction]]
        for item in items:
            o = _objective(c, (*kp, direction), item, direction)
            if o is not None:
                objectives.append(o)
    for i, item in enumerate(value.get("objectives", []) or []):
        ok = isinstance(item, dict) and len(item) == 1 and next(iter(item)) in ("maximize",
                                                                               "minimize")
        if not ok:
            c.problem((*kp, 'objectives', i), f"search.objectives[{i}]: "
                            f"{item!r}: expected {{maximize: METRIC}} or {{minimize: METRIC}}")
            continue
        direction, metric = next(iter(item.items()))
        o = _objective(c, (*kp, "objectives", i), metric, direction)
        if o is not None:
            objectives.append(o)
    if not objectives and len(c.problems) == before:
        objectives.append(Objective("iops", "maximize"))
    # a workload names parameters of the sweep's benchmarks
    for o in objectives:
        for param, _ in o.workload:
            if benchmarks and not any(param in (p or {}) for p in benchmarks.values()):
                c.problem(kp, f"search: objective {o.label!r}: {param!r} is "
                                f"not a parameter of {', '.join(benchmarks)}")
    # every objective must be produced by every benchmark of the sweep
    for o in objectives:
        for bname in benchmarks:
            produced = BENCHMARK_METRICS.get(bname, frozenset(METRICS))
            if o.metric not in produced:
                c.problem(kp, f"search: objective {o.label!r}: benchmark "
                                f"{bname} does not produce {o.metric} (it gives "
                                f"{', '.join(sorted(produced))})")
    constraints: list[Constraint] = []
    raw_constraints = value.get("constraints", []) or []
    if isinstance(raw_constraints, str):
        raw_constraints = [raw_constraints]
    for i, text in enumerate(raw_constraints):
        con = parse_constraint(c, (*kp, "constraints", i), text)
        if con is not None:
            for bname in benchmarks:
                produced = BENCHMARK_METRICS.get(bname, frozenset(METRICS))
                if con.metric not in produced:
                    c.problem((*kp, 'constraints', i), f"search.constraints: "
                                    f"{text!r}: benchmark {bname} does not produce "
                                    f"{con.metric}")
            constraints.append(con)
    budget = Budget()
    raw_budget = value.get("budget")
    if raw_budget is not None:
        budget = _budget(c, (*kp, "budget"), raw_budget)
    ints = {"seed": (0, 0), "eta": (3, 2), "min_seconds": (2, 1), "warmup": (0, 0),
            "rank_check": (3, 0), "batch": (4, 1)}
    parsed: dict[str, int] = {}
    for key, (default, minimum) in ints.items():
        v = value.get(key, default)
        if not _is_int(v) or v < minimum:
            c.problem((*kp, key), f"search.{key}: {v!r}: must be an integer "
                            f">= {minimum}")
            v = default
        parsed[key] = v
    restart_seconds = value.get("restart_seconds", TYPICAL_RESTART_SECONDS)
    if not _is_num(restart_seconds) or restart_seconds < 0:
        c.problem((*kp, 'restart_seconds'), f"search.restart_seconds: "
                        f"{restart_seconds!r}: must be a number >= 0")
        restart_seconds = TYPICAL_RESTART_SECONDS
    max_restarts = value.get("max_restarts")
    if max_restarts is not None and max_restarts != "grid" and not (
            _is_int(max_restarts) and max_restarts >= 1):
        c.problem((*kp, 'max_restarts'), f"search.max_restarts: "
                        f"{max_restarts!r}: must be an integer >= 1 or 'grid'")
    if len(c.problems) > before:
        return None
    return SearchSettings(method=method, objectives=tuple(objectives),
                          constraints=tuple(constraints), budget=budget,
                          restart_seconds=float(restart_seconds), max_restarts=max_restarts,
                          **parsed)


def _budget(c: Checker, kp: tuple[Any, ...], raw: Any) -> Budget:
    at = "search.budget"
    if not isinstance(raw, dict) or len(raw) != 1:
        c.problem(kp, f"{at}: {raw!r}: expected one of {{steps: N}}, {{seconds: S}}, "
                        f"{{fraction: 1/3 or 33%}}")
        return Budget()
    key, v = next(iter(raw.items()))
    if key == "steps" and _is_int(v) and v >= 1:
        return Budget(steps=v)
    if key == "seconds" and _is_num(v) and v > 0:
        return Budget(seconds=float(v))
    if key == "fraction":
        frac = _fraction(v)
        if frac is not None:
            return Budget(fraction=frac)
    c.problem(kp, f"{at}.{key}: {v!r}: expected steps (integer >= 1), seconds (> 0) or "
                    f"fraction (0 < f <= 1, e.g. 1/3 or 33%)")
    return Budget()


def _fraction(v: Any) -> float | None:
    if isinstance(v, str) and "/" in v:
        num, _, den = v.partition("/")
        try:
            f = float(num) / float(den)
        except (ValueError, ZeroDivisionError):
            return None
    elif isinstance(v, str):
        f = parse_percent(v) or 0.0
    elif _is_num(v):
        f = float(v)
    else:
        return None
    return f if 0.0 < f <= 1.0 else None
