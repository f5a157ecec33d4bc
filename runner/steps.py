"""Sweep steps: the Cartesian product of every axis, deterministic ids, restart-aware order."""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cephscope.runner.axes import axes_product
from cephscope.runner.benchmark_params import step_params
from cephscope.runner.spec import Spec

# Labels the runner sets itself on cephscope_step_info; an axis may not shadow them.
RESERVED_LABELS = frozenset(
    {"run", "step", "iteration", "benchmark", "mode", "job", "instance", "le", "quantile",
     "spec", "ceph_version", "__name__"}
)
# The axis of a sweep across Ceph releases (label `release`).
RELEASE_AXIS = "devcluster.release"


@dataclass(frozen=True)
class Step:
    id: str
    benchmark: str
    iteration: int
    params: Mapping[str, Any]  # benchmark parameters of this step (scalars)
    pool_profile: str | None
    ceph_config: Mapping[str, Any]  # option -> value applied for this step
    # axis name -> value, only for what varies in the sweep:
    # "ceph_config.<option>", "<benchmark>.<param>", "pool_profile", and host knobs
    axes: Mapping[str, Any] = field(default_factory=dict)
    # host knobs of this step: "osd_ra", "block_queue.<attr>", "sysctl.<key>" -> value
    knobs: Mapping[str, Any] = field(default_factory=dict)
    # the Ceph release the dev cluster runs for this step (`devcluster.release`); None: as is
    release: str | None = None

    @property
    def dir_name(self) -> str:
        return f"step-{self.id}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "benchmark": self.benchmark,
            "iteration": self.iteration,
            "params": dict(self.params),
            "pool_profile": self.pool_profile,
            "ceph_config": dict(self.ceph_config),
            "axes": dict(self.axes),
            **({"knobs": dict(self.knobs)} if self.knobs else {}),
            **({"release": self.release} if self.release else {}),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Step:
        return cls(id=d["id"], benchmark=d["benchmark"], iteration=int(d["iteration"]),
                   params=dict(d["params"]), pool_profile=d.get("pool_profile"),
                   ceph_config=dict(d["ceph_config"]), axes=dict(d.get("axes", {})),
                   knobs=dict(d.get("knobs", {})), release=d.get("release"))

    def short_params(self) -> str:
        """Human-readable list of this step's axis values."""
        parts = [f"{label_for_axis(k)}={format_value(v)}" for k, v in self.axes.items()]
        return " ".join(parts) or "(no axes)"


def format_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def step_id(benchmark: str, params: Mapping[str, Any], pool_profile: Mapping[str, Any] | None,
            ceph_config: Mapping[str, Any], iteration: int,
            knobs: Mapping[str, Any] | None = None, release: str | None = None) -> str:
    """Short hash of the canonical step parameters; the same params give the same id in any run
    (the baseline comparison and the regression alert rely on that). Host knobs and the
    release count only when a step has them, so other steps keep the ids they always had."""
    canonical = json.dumps(
        {
            "benchmark": benchmark,
            "params": dict(params),
            "pool_profile": dict(pool_profile) if pool_profile else None,
            "ceph_config": dict(ceph_config),
            "iteration": iteration,
            **({"knobs": dict(knobs)} if knobs else {}),
            **({"release": release} if release else {}),
        },
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def generate_steps(spec: Spec) -> list[Step]:
    """Cartesian product of releases x ceph_config axes x benchmark axes x pool profiles, x
    iterations.

    Order before restart-aware reordering: release (each one is a dev cluster rebuild, so it
    varies slowest), iteration, benchmark (spec order), ceph_config axes, benchmark axes (CBT's
    order: the first key varies slowest).
    """
    steps: list[Step] = []
    for release in spec.releases or (None,):
        steps += _release_steps(spec, release)
    seen: set[str] = set()
    unique = []
    for s in steps:  # identical steps (e.g. a value repeated across benchmarks) run once
        if s.id not in seen:
            seen.add(s.id)
            unique.append(s)
    return unique


def _release_steps(spec: Spec, release: str | None) -> list[Step]:
    steps: list[Step] = []
    config_combos = axes_product(spec.ceph_config)
    config_axes = [k for k, v in spec.ceph_config.items() if isinstance(v, list)]
    for iteration in range(spec.iterations):
        for bname, bparams in spec.benchmarks.items():
            knob_section = {**spec.knobs, **spec.benchmark_knobs.get(bname, {})}
            knob_axes = [k for k, v in knob_section.items() if isinstance(v, list)]
            sets = step_params(bparams, spec.client_endpoints, spec.cephfs_pools)
            workloads = len({s.workload for s in sets}) > 1
            for cfg, knobs in itertools.product(config_combos, axes_product(knob_section)):
                for each in sets:
                    combo, pool = dict(each.params), each.pool_profile
                    profile = spec.pool_profiles[pool].to_dict() if pool else None
                    axes: dict[str, Any] = {RELEASE_AXIS: release} if release else {}
                    axes.update({f"ceph_config.{k}": cfg[k] for k in config_axes})
                    axes.update({k: knobs[k] for k in knob_axes})
                    if workloads:  # CBT's workloads block: each workload its own steps
                        axes[f"{bname}.workload"] = each.workload
                    for k in each.axes:
                        if k == "pool_profile":
                            axes["pool_profile"] = pool
                        else:
                            axes[f"{bname}.{k}"] = combo[k]
                    sid = step_id(bname, combo, profile, cfg, iteration, knobs, release)
                    steps.append(Step(id=sid, benchmark=bname, iteration=iteration,
                                      params=combo, pool_profile=pool, ceph_config=cfg,
                                      axes=axes, knobs=knobs, release=release))
    return steps


def _restart_key(step: Step, restart_options: Iterable[str]) -> tuple[str, ...]:
    return tuple(format_value(step.ceph_config.get(o, "")) for o in sorted(restart_options))


def order_steps(steps: list[Step], restart_options: Iterable[str],
                current: Mapping[str, Any] | None = None) -> list[Step]:
    """Group steps by the values of options that need an OSD restart, so each distinct
    combination costs one restart. The group matching the cluster's current values (if known)
    goes first: it needs no restart at all. Order inside a group is kept.

    Steps of several releases stay grouped by release, in the spec's order (each release is
    one cluster rebuild); the restart grouping applies inside each, on a fresh cluster."""
    releases = list(dict.fromkeys(s.release for s in steps))
    if len(releases) > 1:
        return [s for r in releases
                for s in order_steps([s for s in steps if s.release == r], restart_options)]
    restart_options = sorted(restart_options)
    if not restart_options:
        return list(steps)
    groups: dict[tuple[str, ...], list[Step]] = {}
    for s in steps:
        groups.setdefault(_restart_key(s, restart_options), []).append(s)
    keys = list(groups)
    if current is not None:
        now = tuple(format_value(current.get(o, "")) for o in restart_options)
        if now in groups:
            keys.remove(now)
            keys.insert(0, now)
    return [s for k in keys for s in groups[k]]


def count_restarts(steps: list[Step], restart_options: Iterable[str],
                   current: Mapping[str, Any] | None = None) -> int:
    """OSD restarts the ordered steps need (plus the restore at the end is not counted)."""
    restart_options = sorted(restart_options)
    if not restart_options:
        return 0
    prev = (tuple(format_value(current.get(o, "")) for o in restart_options)
            if current is not None else None)
    restarts = 0
    for s in steps:
        key = _restart_key(s, restart_options)
        if key != prev:
            restarts += 1
            prev = key
    return restarts


# axis prefixes that are settings, not benchmark parameters
KNOB_SECTIONS = frozenset({"ceph_config", "osd_ra", "block_queue", "sysctl", "devcluster"})
_LABEL_BAD = re.compile(r"[^a-zA-Z0-9_]")


def label_for_axis(axis: str) -> str:
    """Prometheus label name of a sweep axis: the last dotted component, sanitised.

    `ceph_config.osd_op_num_shards` -> `osd_op_num_shards`, `radosbench.op_size` -> `op_size`,
    `pool_profile` -> `pool_profile`. Names clashing with the runner's own labels get `param_`.
    """
    # a sysctl's last component alone (`swappiness`) would not say which one it is
    name = _LABEL_BAD.sub("_", axis if axis.startswith("sysctl.") else axis.rsplit(".", 1)[-1])
    if not name or name[0].isdigit():
        name = f"param_{name}"
    if name in RESERVED_LABELS or name.startswith("__"):
        name = f"param_{name.lstrip('_')}"
    return name


def axis_labels(steps: Iterable[Step]) -> dict[str, str]:
    """axis -> label for every axis of the sweep; clashing labels get the section as prefix."""
    axes: list[str] = []
    for s in steps:
        for a in s.axes:
            if a not in axes:
                axes.append(a)
    labels: dict[str, str] = {}
    used: dict[str, str] = {}  # label -> kind of the axis that took it
    for a in axes:
        kind = a.split(".", 1)[0] if a.split(".", 1)[0] in KNOB_SECTIONS else "benchmark"
        label = label_for_axis(a)
        # Two benchmarks' op_size share a label (same meaning); a ceph option named like a
        # benchmark parameter does not: it keeps its section as a prefix.
        if used.get(label, kind) != kind:
            label = _LABEL_BAD.sub("_", a)
        labels[a] = label
        used.setdefault(label, kind)
    return labels
