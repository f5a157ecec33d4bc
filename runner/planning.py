"""A sweep's plan before anything changes: its steps in run order, which options need an OSD
restart, the estimate, the search's budget; and the dry run's account of it. Reads only."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cephscope.runner.benchmarks.base import Benchmark
from cephscope.runner.cephclient import CephError
from cephscope.runner.dry_run import DryRunInputs
from cephscope.runner.knobs.ceph_config import ConfigManager
from cephscope.runner.knobs.host import HostKnobs
from cephscope.runner.options import SweepOptions
from cephscope.runner.progress import format_duration
from cephscope.runner.restart import TYPICAL_RESTART_SECONDS
from cephscope.runner.search import live as live_search
from cephscope.runner.spec import Spec, SpecError
from cephscope.runner.steps import (
    Step,
    axis_labels,
    count_restarts,
    generate_steps,
    order_steps,
)
from cephscope.runner.wiring import Collaborators

Log = Callable[[str], None]
# One dev cluster rebuilt on another release (down, up, HEALTH_OK, pools), measured here.
REBUILD_ESTIMATE_SECONDS = 60.0
# Options Ceph flags `startup` that sweeps commonly touch; used by --dry-run when the cluster
# cannot be asked (the real run always asks `ceph config help`).
KNOWN_STARTUP_OPTIONS = frozenset({
    "osd_op_num_shards", "osd_op_num_shards_hdd", "osd_op_num_shards_ssd",
    "osd_op_num_threads_per_shard", "osd_op_num_threads_per_shard_hdd",
    "osd_op_num_threads_per_shard_ssd", "osd_op_queue", "osd_op_queue_cut_off",
    "osd_objectstore", "ms_async_op_threads", "bluestore_cache_size",
})
NOT_REACHABLE = "cluster not reachable"


@dataclass
class Plan:
    spec: Spec
    steps: list[Step]
    restart_options: set[str]
    current_restart_values: dict[str, Any] | None
    estimated_seconds: float
    restarts: int
    notes: list[str] = field(default_factory=list)


def searches(spec: Spec) -> bool:
    """Steps decided as the run goes (adaptive repetition or a search), not a fixed list."""
    return spec.search is not None or spec.adaptive is not None


def knob_values(spec: Spec) -> dict[str, list[Any]]:
    """Host knob setting -> every value the sweep may set (spec-wide and per benchmark)."""
    values: dict[str, list[Any]] = {}
    for section in (spec.knobs, *spec.benchmark_knobs.values()):
        for setting, value in section.items():
            for v in value if isinstance(value, list) else [value]:
                if v not in values.setdefault(setting, []):
                    values[setting].append(v)
    return values


def knob_key_path(setting: str) -> tuple[str, ...]:
    """Where a host knob setting is in the spec (for the line of an error)."""
    kind, _, key = setting.partition(".")
    return (kind, key) if key else (kind,)


def search_plan(spec: Spec, plan: Plan) -> live_search.LivePlan:
    try:
        return live_search.make_plan(
            plan.steps, plan.restart_options, spec.search, spec.iterations, spec.adaptive,
            {n: p.to_dict() for n, p in spec.pool_profiles.items()})
    except live_search.SearchPlanError as exc:
        raise SpecError([f"{spec.where(('search',))}: {exc}"]) from exc


@dataclass
class Planner:
    benchmarks: Mapping[str, type[Benchmark]]
    config: ConfigManager | None  # None: no cluster to ask (a dry run without one)
    host_knobs: HostKnobs | None
    log: Log

    def plan(self, spec: Spec, steps: list[Step] | None = None, *,
             cluster_optional: bool = False) -> Plan:
        """Reads only. Unknown ceph options are a spec error naming the line."""
        notes: list[str] = []
        options = sorted(spec.ceph_config)
        restart_options: set[str] = set()
        current: dict[str, Any] | None = None
        try:
            if self.config is None:
                raise CephError("no ceph conf")
            unknown = self.config.unknown_options(options)
            if unknown:
                raise SpecError([
                    f"{spec.where(('ceph_config', o))}: ceph_config.{o}: "
                    f"{spec.ceph_config[o]!r}: unknown ceph option (`ceph config help {o}` "
                    f"does not know it)" for o in unknown])
            self.validate_host_knobs(spec)
            restart_options = {o for o in options if self.config.needs_restart(o)}
            if restart_options:
                running = self.config.running_values(sorted(restart_options))
                # the current value if all OSDs agree (else: none is "current")
                current = {o: next(iter(v.values())) for o, v in running.items()
                           if len(set(v.values())) == 1}
        except CephError as exc:
            if not cluster_optional:
                raise
            notes.append(f"{NOT_REACHABLE} ({exc}); restart options assumed from the "
                         f"built-in list")
            restart_options = {o for o in options if o in KNOWN_STARTUP_OPTIONS}
        if steps is None:
            steps = order_steps(generate_steps(spec), restart_options, current)
        restarts = count_restarts(steps, restart_options, current)
        bench_seconds = sum(self.benchmarks[s.benchmark].estimated_seconds(
            {**s.params, **({"pool_profile": s.pool_profile} if s.pool_profile else {})})
            for s in steps)
        estimated = (bench_seconds + restarts * TYPICAL_RESTART_SECONDS
                     + len(spec.releases) * REBUILD_ESTIMATE_SECONDS)
        return Plan(spec, steps, restart_options, current, estimated, restarts, notes)

    def validate_host_knobs(self, spec: Spec) -> None:
        """Every value of every host knob checked on every host and device (reads only)."""
        values = knob_values(spec)
        if not values or self.host_knobs is None:
            return
        problems = self.host_knobs.validate(values)
        if problems:
            raise SpecError([f"{spec.where(knob_key_path(p.split(':', 1)[0]))}: {p}"
                             for p in problems])

    def print_plan(self, plan: Plan) -> None:
        for note in plan.notes:
            self.log(f"note: {note}")
        labels = axis_labels(plan.steps)
        self.log(f"{len(plan.steps)} steps, {plan.restarts} OSD restart(s) "
                 f"(restart options: {', '.join(sorted(plan.restart_options)) or 'none'}), "
                 f"estimated {format_duration(plan.estimated_seconds)}")
        for i, s in enumerate(plan.steps, 1):
            params = " ".join(f"{labels[a]}={v}" for a, v in s.axes.items())
            est = self.benchmarks[s.benchmark].estimated_seconds(s.params)
            self.log(f"{i:4d}  {s.id}  {s.benchmark:<10} it={s.iteration}  {params}  "
                     f"~{format_duration(est)}")


def dry_run_inputs(spec: Spec, plan: Plan, opts: SweepOptions,
                   benchmarks: Mapping[str, type[Benchmark]],
                   parts: Collaborators) -> DryRunInputs:
    pools: list[str] = []
    for step in plan.steps:
        if step.pool_profile:
            name = spec.pool_profiles[step.pool_profile].name
        else:
            cls = benchmarks[step.benchmark]
            if not cls.needs_pool(step.params):  # a gateway or CephFS step: no pool of its own
                continue
            application = cls.application(step.params)
            name = opts.rbd_pool if application == "rbd" else opts.pool
        data = step.params.get("data_pool_profile")
        for pool in (name, spec.pool_profiles[data].name if data else None):
            if pool and pool not in pools:
                pools.append(pool)
    cluster = parts.cluster
    reachable = cluster is not None and not any(n.startswith(NOT_REACHABLE)
                                                for n in plan.notes)
    return DryRunInputs(
        spec=spec, steps=plan.steps, restart_options=plan.restart_options,
        config=cluster.config if reachable and cluster is not None else None,
        host_knobs=cluster.host_knobs if reachable and cluster is not None else None,
        restart=cluster.config.restarter.method if cluster is not None else None,
        hygiene=opts.hygiene, clients=parts.clients, host_for=parts.host_for,
        pools=pools)
