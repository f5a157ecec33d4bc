"""CBT's `workloads` block: named sets of a benchmark's parameters, each run as its own steps.

    benchmarks:
      fio:
        time: 60
        op_size: 4096
        workloads:
          precondition:            # run before every step of the others, not a step itself
            mode: randwrite
            numjobs: [1]
            iodepth: [4]
            monitor: false
          randread:
            mode: randread
            numjobs: [1, 4]        # lists are axes, as everywhere
            total_iodepth: [4, 16, 64]

Each workload is the benchmark's parameters with the workload's own laid over them (a
workload's `iodepth` or `total_iodepth` replaces either of the benchmark's), and gives the
steps of every combination of its axes; the steps carry `workload` (an axis of the sweep when
there are several). The workload named `precondition`, or one with `monitor: false` (CBT's
unmonitored workload), is the precondition: one value per parameter, run in each step after
its endpoints are made and before it is measured, tagged as the `precondition` phase.
CBT's `jobname` names output files (cephscope names its own) and `pre_workload_script` runs a
shell line (cephscope runs none): both are warned about and ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cephscope.runner.spec_checker import Checker

KEY = "workloads"
PRECONDITION = "precondition"
# a workload's keys that are not benchmark parameters
OWN_KEYS = frozenset({"monitor"})
IGNORED_KEYS = {"jobname": "cephscope names its own output files",
                "pre_workload_script": "a shell line; cephscope runs none"}
DEPTH_KEYS = ("iodepth", "total_iodepth")


def is_precondition(name: str, section: Mapping[str, Any]) -> bool:
    return name == PRECONDITION or section.get("monitor") is False


def parse_workloads(c: Checker, kp: tuple[Any, ...], value: Any,
                    accepted: Mapping[str, tuple[type, ...]]) -> dict[str, dict[str, Any]] | None:
    """The block as the steps use it (ignored keys dropped); None when it is wrong."""
    before = len(c.problems)
    block = c.mapping(kp, value)
    if not block:
        c.error(kp, value, "a workloads block needs at least one workload")
        return None
    parsed: dict[str, dict[str, Any]] = {}
    preconditions = []
    for name, section in block.items():
        wp = (*kp, name)
        if not isinstance(name, str) or not name.replace("-", "_").replace(".", "_").isidentifier():
            c.error(wp, name, "not a workload name (letters, digits, _ - .)")
            continue
        section = c.mapping(wp, section)
        kept: dict[str, Any] = {}
        for key, v in section.items():
            pk = (*wp, key)
            if key in IGNORED_KEYS:
                c.warn(pk, f"CBT workload key cephscope does not act on ({IGNORED_KEYS[key]}); "
                           "ignored")
            elif key == "monitor":
                if not isinstance(v, bool):
                    c.error(pk, v, "true or false")
                kept[key] = v
            elif key in (KEY, "client_endpoints") or key not in accepted:
                c.error(pk, v, "not a parameter a workload can set")
            elif c.axis_values(pk, v, tuple(accepted[key])) is not None:
                kept[key] = v
        if is_precondition(str(name), section):
            preconditions.append(name)
            for key, v in kept.items():
                if isinstance(v, list) and len(v) > 1:
                    c.error((*wp, key), v, "the precondition runs once per step: one value")
        parsed[str(name)] = kept
    if len(preconditions) > 1:
        c.error(kp, preconditions, "one precondition workload at most")
    if preconditions and len(preconditions) == len(parsed):
        c.error(kp, list(parsed), "only a precondition: no workload to measure")
    return None if len(c.problems) > before else parsed


def _laid_over(base: Mapping[str, Any], section: Mapping[str, Any]) -> dict[str, Any]:
    merged = {k: v for k, v in base.items() if k != KEY}
    if any(k in section for k in DEPTH_KEYS):
        for k in DEPTH_KEYS:
            merged.pop(k, None)
    merged.update({k: v for k, v in section.items() if k not in OWN_KEYS})
    return merged


def parameter_sets(params: Mapping[str, Any]
                   ) -> list[tuple[str | None, dict[str, Any], dict[str, Any] | None]]:
    """(workload name, parameters whose lists are axes, the precondition's own parameters or
    None) per measured workload; the benchmark's own parameters alone without workloads."""
    block = params.get(KEY)
    if not isinstance(block, Mapping) or not block:
        return [(None, dict(params), None)]
    precondition = next(({k: (v[0] if isinstance(v, list) else v) for k, v in s.items()}
                         for n, s in block.items() if is_precondition(n, s)), None)
    sets = []
    for name, section in block.items():
        if not is_precondition(name, section):
            sets.append((name, {**_laid_over(params, section), "workload": name}, precondition))
    return sets


def precondition_params(step: Mapping[str, Any], own: Mapping[str, Any]) -> dict[str, Any]:
    """The precondition of one step: the step's parameters with the precondition's over them."""
    base = {k: v for k, v in step.items() if k not in ("workload", "precondition")}
    return _laid_over(base, own)
