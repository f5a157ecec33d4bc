"""The spec's `client_endpoints` section and CBT's `cluster.cephfs_pools`, as CBT reads them.

    client_endpoints:
      NAME:
        driver: librbd          # librbd | rbd-fuse | cephfs-fuse | rbd-kernel | rbd-nbd |
                                # rbd-tcmu | cephfs-kernel
        endpoints_per_client: 1
        endpoint_size: 4096     # MiB: each RBD image's size (CBT's default)
        pool_profile: NAME      # the RBD pool (CBT also builds its filesystem from it)
        data_pool_profile: NAME # RBD images' data pool (an EC pool)
        disabled_features: deep-flatten,fast-diff,object-map   # rbd feature disable
        order: 22               # RBD object size as a power of two (CBT's key)
        filesystem: cephfs      # cephscope's: the CephFS the cephfs drivers mount

    cluster:
      cephfs_pools: {cephfs_data: PROFILE, cephfs_metadata: PROFILE}

An endpoint section is read once per run, as CBT reads it: its values are scalars. A sweep over
endpoints lists several section names in the benchmark's `client_endpoints`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cephscope.runner.spec_checker import Checker

# Drivers that run on any client with FUSE; drivers that need a kernel module on every client
# (the module each needs: /sys/module/<m>).
FUSE_DRIVERS = ("rbd-fuse", "cephfs-fuse")
USERSPACE_DRIVERS = ("librbd", *FUSE_DRIVERS)
KERNEL_MODULES: Mapping[str, str] = {
    "rbd-kernel": "rbd", "rbd-nbd": "nbd", "rbd-tcmu": "target_core_user",
    "cephfs-kernel": "ceph",
}
DRIVERS = (*USERSPACE_DRIVERS, *KERNEL_MODULES)
# what each driver makes on the cluster and the clients for a step (said by --dry-run)
DRIVER_ACTIONS: Mapping[str, str] = {
    "librbd": "RBD images (rbd create here)",
    "rbd-fuse": "RBD images, an rbd-fuse mount per image on its client",
    "cephfs-fuse": "a ceph-fuse mount per endpoint on each client, a directory in the CephFS",
    "rbd-kernel": "RBD images, rbd device map + mkfs.xfs + mount on each client",
    "rbd-nbd": "RBD images, rbd-nbd map + mkfs.xfs + mount on each client",
    "rbd-tcmu": "RBD images, a targetcli user:rbd LUN + mkfs.xfs + mount on each client",
    "cephfs-kernel": "a kernel CephFS mount per endpoint on each client",
}
RBD_DRIVERS = ("librbd", "rbd-fuse", "rbd-kernel", "rbd-nbd", "rbd-tcmu")
CEPHFS_DRIVERS = ("cephfs-fuse", "cephfs-kernel")
# CBT's S3 endpoints drive its hsbench benchmark, not fio.
NOT_FIO_DRIVERS = {"s3": "CBT's s3 endpoints are for hsbench, not fio"}
KEYS = frozenset({"driver", "endpoints_per_client", "endpoint_size", "pool_profile",
                  "data_pool_profile", "disabled_features", "order", "filesystem"})
# CBT keys of an endpoint section cephscope does not act on (warned, ignored)
KEYS_IGNORED = frozenset({"recov_pool_profile"})
RBD_FEATURE = re.compile(r"[a-z][a-z-]*")
FS_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
CEPHFS_POOL_KEYS = ("cephfs_data", "cephfs_metadata")
DEFAULT_ENDPOINT_SIZE_MIB = 4096
DEFAULT_ORDER = 22


@dataclass(frozen=True)
class EndpointSpec:
    name: str
    driver: str
    endpoints_per_client: int = 1
    endpoint_size_mib: int = DEFAULT_ENDPOINT_SIZE_MIB
    pool_profile: str | None = None
    data_pool_profile: str | None = None
    disabled_features: tuple[str, ...] = ()
    order: int = DEFAULT_ORDER
    filesystem: str | None = None

    @property
    def kernel_module(self) -> str | None:
        return KERNEL_MODULES.get(self.driver)

    @property
    def on_cephfs(self) -> bool:
        return self.driver in CEPHFS_DRIVERS

    def to_dict(self) -> dict[str, Any]:
        data = dict(self.__dict__)
        data["disabled_features"] = list(self.disabled_features)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EndpointSpec:
        return cls(**{**data, "disabled_features": tuple(data.get("disabled_features") or ())})


@dataclass(frozen=True)
class CephfsPools:
    """CBT's cluster.cephfs_pools: the pool profiles of the benchmark filesystem's pools."""

    data_profile: str
    metadata_profile: str

    def to_dict(self) -> dict[str, Any]:
        return {"cephfs_data": self.data_profile, "cephfs_metadata": self.metadata_profile}


def _positive_int(c: Checker, kp: tuple[Any, ...], value: Any, low: int = 1,
                  high: int | None = None) -> int | None:
    # CBT's own example writes endpoint_size as a string ('4096')
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (
            high is not None and value > high):
        bound = f"{low}..{high}" if high is not None else f"at least {low}"
        c.error(kp, value, f"must be an integer, {bound}")
        return None
    return value


def _profile(c: Checker, kp: tuple[Any, ...], value: Any,
             pool_profiles: Mapping[str, Any]) -> str | None:
    if not isinstance(value, str) or value not in pool_profiles:
        c.error(kp, value, "no such pool profile (define it under pool_profiles)")
        return None
    return value


def parse_client_endpoints(c: Checker, kp: tuple[Any, ...], value: Any,
                           pool_profiles: Mapping[str, Any]) -> dict[str, EndpointSpec]:
    """Every endpoint section by name; a wrong one is reported to `c` and left out."""
    found: dict[str, EndpointSpec] = {}
    for name, section in c.mapping(kp, value).items():
        sp = (*kp, name)
        if isinstance(section, Mapping) and section.get("driver") in NOT_FIO_DRIVERS:
            continue  # the gateway's, read by the S3 benchmarks naming it (runner/rgw_endpoint.py)
        if not isinstance(name, str) or not FS_NAME.fullmatch(name):
            c.error(sp, name, "not an endpoint name (letters, digits, _ . -)")
            continue
        endpoint = _endpoint(c, sp, name, c.mapping(sp, section), pool_profiles)
        if endpoint is not None:
            found[name] = endpoint
    return found


def _endpoint(c: Checker, sp: tuple[Any, ...], name: str, section: Mapping[str, Any],
              pool_profiles: Mapping[str, Any]) -> EndpointSpec | None:
    before = len(c.problems)
    for key, v in section.items():
        if key in KEYS_IGNORED:
            c.warn((*sp, key), "CBT endpoint key cephscope does not act on; ignored")
        elif key not in KEYS:
            c.error((*sp, key), v, f"unknown key (known: {', '.join(sorted(KEYS))})")
        elif isinstance(v, list):
            c.error((*sp, key), v, "an endpoint section is read once per run (CBT does not "
                                   "sweep it): give one value; to sweep endpoints, list several "
                                   "section names in the benchmark's client_endpoints")
    driver = section.get("driver")
    if driver is None:
        c.error((*sp, "driver"), None, f"missing (one of {', '.join(DRIVERS)})")
    elif driver in NOT_FIO_DRIVERS:
        c.error((*sp, "driver"), driver, NOT_FIO_DRIVERS[driver])
    elif driver not in DRIVERS:
        c.error((*sp, "driver"), driver, f"unknown driver (one of {', '.join(DRIVERS)})")
    if len(c.problems) > before:
        return None
    per_client = _positive_int(c, (*sp, "endpoints_per_client"),
                               section.get("endpoints_per_client", 1))
    size = _positive_int(c, (*sp, "endpoint_size"),
                         section.get("endpoint_size", DEFAULT_ENDPOINT_SIZE_MIB))
    order = _positive_int(c, (*sp, "order"), section.get("order", DEFAULT_ORDER), 12, 25)
    pool = data_pool = filesystem = None
    if section.get("pool_profile") is not None:
        pool = _profile(c, (*sp, "pool_profile"), section["pool_profile"], pool_profiles)
    if section.get("data_pool_profile") is not None:
        data_pool = _profile(c, (*sp, "data_pool_profile"), section["data_pool_profile"],
                             pool_profiles)
    features: tuple[str, ...] = ()
    raw_features = section.get("disabled_features")
    if raw_features is not None:
        parts = raw_features.split(",") if isinstance(raw_features, str) else None
        if not parts or not all(RBD_FEATURE.fullmatch(p.strip()) for p in parts):
            c.error((*sp, "disabled_features"), raw_features,
                    "RBD feature names separated by commas (e.g. deep-flatten,fast-diff)")
        else:
            features = tuple(p.strip() for p in parts)
    if section.get("filesystem") is not None:
        fs = section["filesystem"]
        if not isinstance(fs, str) or not FS_NAME.fullmatch(fs):
            c.error((*sp, "filesystem"), fs, "not a CephFS name (letters, digits, _ . -)")
        else:
            filesystem = fs
    if driver in CEPHFS_DRIVERS:
        for key in ("disabled_features", "data_pool_profile"):
            if key in section:
                c.warn((*sp, key), f"has no meaning for {driver} endpoints; ignored (the "
                                   "filesystem's pools come from cluster.cephfs_pools)")
        if pool is not None:
            c.warn((*sp, "pool_profile"), f"{driver}: the data pool comes from "
                                          "cluster.cephfs_pools.cephfs_data; ignored")
            pool = None
        data_pool, features = None, ()
    if len(c.problems) > before or per_client is None or size is None or order is None:
        return None
    return EndpointSpec(name, str(driver), per_client, size, pool, data_pool, features, order,
                        filesystem)


def parse_cephfs_pools(c: Checker, kp: tuple[Any, ...], value: Any,
                       pool_profiles: Mapping[str, Any]) -> CephfsPools | None:
    section = c.mapping(kp, value)
    if not section:
        return None
    before = len(c.problems)
    for key, v in section.items():
        if key not in CEPHFS_POOL_KEYS:
            c.error((*kp, key), v, f"unknown key ({', '.join(CEPHFS_POOL_KEYS)})")
    names = {key: _profile(c, (*kp, key), section.get(key), pool_profiles)
             for key in CEPHFS_POOL_KEYS}
    if len(c.problems) > before:
        return None
    return CephfsPools(str(names["cephfs_data"]), str(names["cephfs_metadata"]))
