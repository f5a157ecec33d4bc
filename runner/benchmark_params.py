"""A benchmark's parameters as its steps get them: one set per combination of its axes, per
workload of a `workloads` block (runner/workloads.py), with the client endpoint section a
step names resolved into it (`endpoint`) and the pools that section implies.

Shared by the spec (each combination is checked by its benchmark class) and the step list,
so both see the same parameters.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cephscope.runner.axes import axes_product
from cephscope.runner.endpoints.settings import CephfsPools, EndpointSpec
from cephscope.runner.workloads import parameter_sets, precondition_params

ENDPOINTS_KEY = "client_endpoints"
# keys the runner adds to a step's parameters (a spec may not set them)
INJECTED = frozenset({"endpoint", "precondition", "workload", "cephfs_pools"})


@dataclass(frozen=True)
class StepParams:
    params: dict[str, Any]  # the step's parameters (pool_profile taken out)
    pool_profile: str | None  # the profile of the step's pool
    axes: tuple[str, ...]  # the parameters that vary in its workload (pool_profile included)
    workload: str | None


def step_params(params: Mapping[str, Any], endpoints: Mapping[str, EndpointSpec],
                cephfs_pools: CephfsPools | None) -> list[StepParams]:
    """Every parameter set of one benchmark's section, in CBT's order (workloads in the
    spec's order, the first key varying slowest)."""
    found = []
    for workload, section, precondition in parameter_sets(params):
        axes = tuple(k for k, v in section.items() if isinstance(v, list))
        for combo in axes_product(section):
            pool = combo.pop("pool_profile", None)
            if precondition is not None:
                combo["precondition"] = precondition_params(
                    {k: v for k, v in combo.items() if k not in INJECTED}, precondition)
            name = combo.get(ENDPOINTS_KEY)
            endpoint = endpoints.get(name) if isinstance(name, str) else None
            if endpoint is not None:
                combo["endpoint"] = endpoint.to_dict()
                if endpoint.on_cephfs:
                    # the filesystem's pools, made by its driver (pools of their own: an RBD
                    # pool of the same profile could not be a CephFS data pool)
                    pool = None
                    if cephfs_pools:
                        combo["cephfs_pools"] = cephfs_pools.to_dict()
                else:
                    pool = pool or endpoint.pool_profile
                    if endpoint.data_pool_profile:
                        combo.setdefault("data_pool_profile", endpoint.data_pool_profile)
            found.append(StepParams(combo, pool, axes, workload))
    return found
