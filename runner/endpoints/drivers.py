"""The client endpoint drivers by CBT's names, and the checks a sweep makes with them before
it changes anything."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from cephscope.runner.benchmarks.base import BenchmarkError, PreflightAccess
from cephscope.runner.endpoints.base import Driver, EndpointSite
from cephscope.runner.endpoints.cephfs import CephfsFuseDriver, filesystem_problem
from cephscope.runner.endpoints.kernel import KERNEL_DRIVERS, module_problems
from cephscope.runner.endpoints.librbd import LibrbdDriver
from cephscope.runner.endpoints.rbd_fuse import RbdFuseDriver
from cephscope.runner.endpoints.settings import EndpointSpec
from cephscope.runner.hostexec import LocalHost

DRIVERS: Mapping[str, Callable[[EndpointSite], Driver]] = {
    "librbd": LibrbdDriver, "rbd-fuse": RbdFuseDriver, "cephfs-fuse": CephfsFuseDriver,
    **KERNEL_DRIVERS,
}


def driver_class(name: str) -> Callable[[EndpointSite], Driver]:
    try:
        return DRIVERS[name]
    except KeyError:
        raise BenchmarkError(f"unknown client_endpoints driver {name!r} (known: "
                             f"{', '.join(DRIVERS)})") from None


def preflight_problems(endpoints: Sequence[tuple[EndpointSpec, bool]],
                       access: PreflightAccess) -> list[str]:
    """Before any change: every kernel module a driver needs, on every client; a CephFS to
    use (or cephfs_pools to make one). `endpoints`: (section, whether cephfs_pools is given)."""
    clients = list(access.clients) or [LocalHost()]
    problems = module_problems([spec.driver for spec, _pools in endpoints], clients)
    for spec, has_pools in endpoints:
        if not spec.on_cephfs:
            continue
        if access.ceph is None:
            problems.append(f"client_endpoints.{spec.name}: no cluster to find its CephFS on")
            continue
        # a failed mon command raises: the sweep says it before any change
        problem = filesystem_problem(access.ceph, spec.filesystem, has_pools)
        if problem is not None:
            problems.append(f"client_endpoints.{spec.name} ({spec.driver}): {problem}")
    return problems
