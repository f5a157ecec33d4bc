"""Sweep spec: loading (with line numbers), CBT compatibility and validation.

A spec is CBT-compatible YAML (`cluster`, `benchmarks`, `pool_profiles`, `iterations`; a list
value is a sweep axis) plus cephscope's own sections:

    ceph_config:            # `ceph config set osd KEY VALUE` per step; lists are axes too
      osd_op_num_shards: [2, 4]
    restart:                # how OSDs are restarted for options that need it
      method: devcluster    # devcluster | systemd | cephadm | podman | cephadm-systemd | command
      command: [ssh, host, systemctl, restart, "ceph-osd@{id}"]   # method: command only
      fsid: 0b5e…           # podman / cephadm-systemd: names ceph-<fsid>-osd-N / ceph-<fsid>@osd.N
      rolling: false
      timeout: 600

Validation is structural and happens before anything talks to the cluster; the check that every
`ceph_config` option exists (`ceph config help`) is a read done by the sweep right after, also
before any change. Every error names the key path, the value and the line in the file.
"""

from __future__ import annotations

import copy
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from cephscope.runner.benchmark_params import INJECTED, step_params
from cephscope.runner.endpoints.settings import (
    NOT_FIO_DRIVERS,
    CephfsPools,
    EndpointSpec,
    parse_cephfs_pools,
    parse_client_endpoints,
)
from cephscope.runner.recovery import RecoverySpec, parse_recovery
from cephscope.runner.rgw_endpoint import (
    RgwEndpoint,
    RgwSettings,
    cbt_getput_endpoint,
    cbt_s3_endpoint,
    parse_rgw,
    spec_secrets,
)
from cephscope.runner.search.settings import AdaptiveIterations, parse_iterations, parse_search
from cephscope.runner.spec_checker import (
    Checker,
    dotted,
)
from cephscope.runner.spec_safety import ssh_option_problem, sysctl_problem
from cephscope.runner.workloads import KEY as WORKLOADS_KEY
from cephscope.runner.workloads import parse_workloads

# Keys in CBT's `cluster:` section that build or describe a cluster cephscope does not manage:
# accepted (so a CBT file loads as it is) with one warning line each.
CBT_CLUSTER_KEYS_IGNORED = frozenset(
    {
        "mgrs", "mdss", "rgws", "osds_per_node",
        "fs", "mkfs_opts", "mount_opts", "rebuild_every_test", "tmp_dir", "archive_dir",
        "tmp_conf", "ceph_keyring", "ceph-osd_cmd", "ceph-mon_cmd", "ceph-run_cmd",
        "ceph-rgw_cmd", "ceph-mgr_cmd", "ceph-mds_cmd", "ceph-authtool_cmd", "rados_cmd",
        "ceph_cmd", "rbd_cmd", "ceph-fuse_cmd", "pdsh_ssh_args", "osd_valgrind",
        "mon_valgrind", "rgw_valgrind", "mgr_valgrind", "mds_valgrind", "newstore_block",
        "rgw_pools", "rgw_rebuild", "mgr_modules", "is_teuthology", "stress_lib",
        "ceph_cmd_prefix", "pool_profile", "client_endpoints", "cache_profiles",
        "crush_profiles", "clusterid_prefix", "version_compat",
        # tool paths and host lists of CBT's own examples (ceph/cbt example/*.yaml)
        "ceph.conf", "rbd-nbd_cmd", "rbd-fuse_cmd", "radosgw-admin_cmd", "pid_dir", "servers",
        "ceph-osd_cmd_prefix", "use_existing_pools",
    }
)
# `cluster:` keys cephscope acts on.
CLUSTER_KEYS_USED = frozenset(
    {"use_existing", "iterations", "pool_profiles", "erasure_profiles", "conf_file", "clusterid",
     "osd_ra", "recovery_test", "cephfs_pools",
     # where things run (CBT's names), and how the runner reaches them over SSH (cephscope's)
     "head", "clients", "osds", "mons", "user",
     "ssh_config", "ssh_port", "ssh_identity_file", "ssh_options"}
)
# A host as ssh takes it (a name from ~/.ssh/config, a DNS name or an address), optionally
# `user@host` as CBT writes it.
HOST_NAME = re.compile(r"(?:[a-z_][a-z0-9_.-]*@)?[A-Za-z0-9][A-Za-z0-9._:-]*")
# A `-o` option for ssh: Key=Value, nothing a shell or ssh's parser could take for more.
SSH_OPTION = re.compile(r"[A-Za-z]+=[A-Za-z0-9._,:/@%+-]+")
# The placeholder a restart command carries for the OSD id (braces allowed there only).
OSD_ID_PLACEHOLDER = "{id}"
# Top-level keys.
TOP_KEYS = frozenset(
    {"cluster", "benchmarks", "pool_profiles", "erasure_profiles", "iterations", "ceph_config",
     "restart", "name", "description", "search", "osd_ra", "block_queue", "sysctl",
     "recovery_test", "devcluster", "client_endpoints", "rgw"}
)
TOP_KEYS_CBT_IGNORED = frozenset({"monitoring_profiles"})

# Benchmark parameters CBT knows but cephscope does not act on (warned, then dropped).
CBT_BENCHMARK_KEYS_IGNORED = frozenset(
    {
        "cmd_path", "use_existing", "valgrind", "pool_per_proc", "prefill_time",
        "prefill_objects", "max_objects", "write_time", "read_time", "vol_object_size",
        "client_ra", "log_avg_msec", "log_iops", "log_bw", "log_lat", "fio_out_format",
        "ramp", "norandommap", "random_distribution", "procs_per_volume", "volumes_per_client",
        "rate_iops", "use_existing_volumes", "no_sudo", "end_fill_percentage", "prefill",
        "rbdadd_mons",
        "rbdadd_options", "direct", "poolname", "mode_args", "workloads", "client_endpoints",
        # from CBT's benchmark/*.py and example/*.yaml
        "vol_order", "pgs", "pgs_per_pool", "total_iodepth", "recov_pool_profile",
        "recov_pool_name", "wait_pgautoscaler_timeout", "fio_cpu_set", "procs_per_client",
        "iterations", "acceptable", "concurrent_procs", "rbdname",
        # CBT's rawfio example: a client-side filesystem it no longer makes
        "use_dir", "client_dir", "client_dev", "client_mkfs", "client_fs",
    }
)
# CBT benchmarks cephscope does not have: refused, naming the ones it has.
CBT_BENCHMARKS_MISSING = frozenset(
    {"rbdfio", "kvmrbdfio", "cosbench", "nullbench", "cephtestrados", "smallfile",
     "std_fio", "stdfiobench", "elbencho", "cephfsfio"}
)
# Parameter every benchmark accepts: the pool profile the step runs on (an axis if a list).
COMMON_BENCHMARK_KEYS = frozenset({"pool_profile"})

POOL_PROFILE_KEYS = frozenset(
    {"replication", "pg_size", "pgp_size", "erasure_profile", "erasure_k", "erasure_m",
     "ec_overwrites", "crush_profile", "cache_profile", "prefill_recovery_objects",
     "prefill_recovery_object_size", "prefill_recovery_threads", "size"}
)
POOL_PROFILE_KEYS_IGNORED = frozenset(
    {"crush_profile", "cache_profile"}
)
ERASURE_PROFILE_KEYS = frozenset({"erasure_k", "erasure_m", "erasure_plugin", "failure_domain",
                                  "k", "m", "plugin", "stripe_unit"})
# Size of a pool profile that says `replication: 'replicated'` (CBT's examples).
DEFAULT_REPLICATED_SIZE = 3
RESTART_KEYS = frozenset({"method", "command", "rolling", "timeout", "fsid"})
RESTART_METHODS = ("devcluster", "systemd", "cephadm", "podman", "cephadm-systemd", "command")

QUEUE_ATTRIBUTE = re.compile(r"^(iosched/)?[a-z0-9_]+$")
SYSCTL_NAME = re.compile(r"^[a-z0-9_]+(\.[A-Za-z0-9_-]+)+$")
# A Ceph release as `devcluster.release` names it (which ones exist is the dev cluster's say).
RELEASE_NAME = re.compile(r"^[a-z][a-z0-9_-]*$")
# An erasure-code profile the cluster defines, named by a pool profile (looked up at start).
ERASURE_PROFILE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
# What a profile looked up on the cluster holds: known once it is looked up, so never part of
# a step's identity (the profile's name is).
CLUSTER_ERASURE_SETTINGS = ("erasure_k", "erasure_m", "erasure_plugin", "failure_domain",
                            "stripe_unit")
DEVCLUSTER_KEYS = frozenset({"release"})


class SpecError(ValueError):
    """The spec is invalid; the message lists every problem, one per line."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))


@dataclass(frozen=True)
class PoolProfile:
    name: str
    replication: int | None  # None for erasure
    pg_num: int = 32
    erasure_k: int | None = None
    erasure_m: int | None = None
    erasure_plugin: str = "jerasure"
    failure_domain: str = "osd"
    ec_overwrites: bool = False
    stripe_unit: int | None = None  # bytes per data chunk (the EC profile's stripe_unit)
    # CBT's: what a background recovery test writes to the recovery pool while OSDs are out
    prefill_recovery_objects: int = 0
    prefill_recovery_object_size: int = 4 << 20
    prefill_recovery_threads: int = 16
    # an erasure-code profile the spec names but does not define: the cluster's, looked up at
    # start (runner/cluster_erasure_profiles.py) and used as it is
    cluster_erasure_profile: str | None = None

    @property
    def is_erasure(self) -> bool:
        return self.replication is None

    def to_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        if d.pop("cluster_erasure_profile") is None:
            return d
        for key in CLUSTER_ERASURE_SETTINGS:
            d.pop(key)
        return {**d, "cluster_erasure_profile": self.cluster_erasure_profile}


@dataclass(frozen=True)
class RestartSpec:
    method: str | None = None  # None = the default for how the cluster was given
    command: tuple[str, ...] = ()
    rolling: bool = False
    timeout_seconds: float = 600.0
    fsid: str | None = None  # podman / cephadm-systemd: the cluster's fsid


@dataclass(frozen=True)
class HostsSpec:
    """Where benchmarks run and how the runner reaches other hosts (CBT's `cluster:` keys)."""

    clients: tuple[str, ...] = ()  # empty: this machine, as before
    head: str | None = None
    osds: tuple[str, ...] = ()
    mons: tuple[str, ...] = ()
    user: str | None = None
    ssh_config: str | None = None
    ssh_port: int | None = None
    ssh_identity_file: str | None = None
    ssh_options: tuple[str, ...] = ()


@dataclass
class Spec:
    """A validated spec. `raw` is the plain data, `lines` maps key paths to YAML lines."""

    path: Path
    raw: dict[str, Any]
    lines: dict[tuple[Any, ...], int]
    iterations: int = 1
    ceph_config: dict[str, Any] = field(default_factory=dict)
    benchmarks: dict[str, dict[str, Any]] = field(default_factory=dict)
    pool_profiles: dict[str, PoolProfile] = field(default_factory=dict)
    restart: RestartSpec = field(default_factory=RestartSpec)
    conf_file: str | None = None
    cluster_name: str = "ceph"
    warnings: list[str] = field(default_factory=list)
    # `iterations: {min, max, ci}` and the `search:` section (cephscope.runner.search.settings)
    adaptive: Any = None
    search: Any = None
    # host knobs (cephscope.runner.knobs), flat: `osd_ra`, `block_queue.<attr>`,
    # `sysctl.<key>` -> value or axis list; per benchmark where CBT puts `osd_ra`
    knobs: dict[str, Any] = field(default_factory=dict)
    benchmark_knobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    sysctl_on: dict[str, str] = field(default_factory=dict)  # `sysctl.<key>` -> osds|clients|all
    hosts: HostsSpec = field(default_factory=lambda: HostsSpec())
    recovery: RecoverySpec | None = None  # CBT's recovery_test, run during every step
    # `devcluster: {release: [...]}`: the dev cluster is rebuilt per release (slowest axis)
    releases: tuple[str, ...] = ()
    # CBT's per-benchmark `idle_monitor_sleep`: cephscope records one idle window at run start,
    # as long as the longest one asked for (the `--idle-baseline` flag overrides it)
    idle_baseline_seconds: float | None = None
    # CBT's top-level client_endpoints sections by name, and cluster.cephfs_pools
    client_endpoints: dict[str, EndpointSpec] = field(default_factory=dict)
    cephfs_pools: CephfsPools | None = None
    # the RADOS Gateway as the spec gives it (`rgw:`, CBT's s3 client endpoints, getput's keys)
    rgw: RgwSettings | None = None

    def line_of(self, path: tuple[Any, ...]) -> int | None:
        # Fall back to the closest enclosing key that has a line.
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return None

    def where(self, path: tuple[Any, ...]) -> str:
        line = self.line_of(path)
        return f"{self.path}:{line}" if line else str(self.path)

    def resolved(self) -> dict[str, Any]:
        """The spec as the runner understood it (for the results dir)."""
        return {
            "iterations": self.iterations,
            "ceph_config": self.ceph_config,
            **({"knobs": self.knobs} if self.knobs else {}),
            **({"benchmark_knobs": self.benchmark_knobs} if self.benchmark_knobs else {}),
            **({"sysctl_on": self.sysctl_on} if self.sysctl_on else {}),
            **({"recovery_test": self.recovery.to_dict()} if self.recovery else {}),
            **({"devcluster": {"release": list(self.releases)}} if self.releases else {}),
            **({"client_endpoints": {n: e.to_dict() for n, e in self.client_endpoints.items()}}
               if self.client_endpoints else {}),
            **({"cephfs_pools": self.cephfs_pools.to_dict()} if self.cephfs_pools else {}),
            **({"rgw": self.rgw.to_dict()} if self.rgw else {}),
            "benchmarks": self.benchmarks,
            "pool_profiles": {n: p.to_dict() for n, p in self.pool_profiles.items()},
            "restart": {
                "method": self.restart.method,
                "command": list(self.restart.command),
                "rolling": self.restart.rolling,
                "timeout_seconds": self.restart.timeout_seconds,
                "fsid": self.restart.fsid,
            },
            "cluster_name": self.cluster_name,
            **({"iterations_adaptive": self.adaptive.to_dict()} if self.adaptive else {}),
            **({"search_raw": self.raw.get("search"), "search": self.search.to_dict()}
               if self.search else {}),
        }


# --------------------------------------------------------------------------- YAML with lines


def _plain(node: yaml.Node, path: tuple[Any, ...], lines: dict[tuple[Any, ...], int],
           constructor: yaml.constructor.SafeConstructor, problems: list[str],
           file_label: str) -> Any:
    """Turn a composed YAML node into plain Python, recording each key path's line (1-based)."""
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        constructor.flatten_mapping(node)
        result: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = constructor.construct_object(key_node, deep=True)
            key_line = key_node.start_mark.line + 1
            if not isinstance(key, str | int | float | bool):
                problems.append(f"{file_label}:{key_line}: {dotted(path) or '<top>'}: "
                                f"key {key!r} must be a scalar")
                continue
            if key in result:
                problems.append(f"{file_label}:{key_line}: {dotted((*path, key))}: duplicate key")
            lines[(*path, key)] = key_line
            result[key] = _plain(value_node, (*path, key), lines, constructor, problems,
                                 file_label)
        return result
    if isinstance(node, yaml.SequenceNode):
        return [
            _plain(item, (*path, i), lines, constructor, problems, file_label)
            for i, item in enumerate(node.value)
        ]
    return constructor.construct_object(node, deep=True)


# A spec is a page or two of YAML; aliases may share a node between places, but the document
# they describe, every alias expanded, stays far below this many nodes. A "billion laughs"
# document is a few lines that expand to billions: refused before it is expanded.
MAX_EXPANDED_NODES = 100_000


class _SpecLoader(yaml.SafeLoader):
    """SafeLoader that refuses an alias to a node that contains it (a recursive structure,
    which would expand forever)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._open_anchors: set[str] = set()  # anchors of the nodes being composed now

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            if event.anchor in self._open_anchors:
                raise yaml.composer.ComposerError(
                    None, None, f"alias *{event.anchor} refers to a node that contains it "
                    f"(a recursive structure)", event.start_mark)
            return super().compose_node(parent, index)
        anchor = getattr(event, "anchor", None)
        if anchor is None:
            return super().compose_node(parent, index)
        self._open_anchors.add(anchor)
        try:
            return super().compose_node(parent, index)
        finally:
            self._open_anchors.discard(anchor)


def _expanded_nodes(node: yaml.Node, limit: int) -> int:
    """How many nodes the document has with every alias expanded (counted once per shared
    node, so the count itself never expands; capped just above `limit`)."""
    memo: dict[int, int] = {}

    def size(n: yaml.Node) -> int:
        if id(n) not in memo:
            if isinstance(n, yaml.MappingNode):
                total = 1 + sum(size(k) + size(v) for k, v in n.value)
            elif isinstance(n, yaml.SequenceNode):
                total = 1 + sum(size(item) for item in n.value)
            else:
                total = 1
            memo[id(n)] = min(total, limit + 1)
        return memo[id(n)]

    return size(node)


def load_yaml_with_lines(text: str, file_label: str) -> tuple[Any, dict[tuple[Any, ...], int]]:
    """Parse YAML safely; return (data, {key path: line}). A recursive alias, an alias bomb
    or absurd nesting is a SpecError naming the file, never a RecursionError or MemoryError."""
    try:
        node = yaml.compose(text, Loader=_SpecLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{file_label}:{mark.line + 1}" if mark is not None else file_label
        raise SpecError([f"{where}: not valid YAML: {exc}"]) from exc
    except RecursionError:
        raise SpecError([f"{file_label}: not valid YAML: nested too deeply"]) from None
    if node is None:
        raise SpecError([f"{file_label}: the spec is empty"])
    try:
        expanded = _expanded_nodes(node, MAX_EXPANDED_NODES)
    except RecursionError:
        raise SpecError([f"{file_label}: not valid YAML: nested too deeply"]) from None
    if expanded > MAX_EXPANDED_NODES:
        raise SpecError([f"{file_label}: its aliases expand to more than {MAX_EXPANDED_NODES} "
                         f"YAML nodes (an alias bomb?); refused"])
    lines: dict[tuple[Any, ...], int] = {}
    problems: list[str] = []
    constructor = yaml.constructor.SafeConstructor()
    try:
        data = _plain(node, (), lines, constructor, problems, file_label)
    except yaml.YAMLError as exc:
        raise SpecError([f"{file_label}: not valid YAML: {exc}"]) from exc
    except RecursionError:
        raise SpecError([f"{file_label}: not valid YAML: nested too deeply"]) from None
    if problems:
        raise SpecError(problems)
    return data, lines


# --------------------------------------------------------------------------- validation


def _int(c: Checker, key_path: tuple[Any, ...], value: Any, minimum: int) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        c.error(key_path, value, f"wrong type {type(value).__name__}; expected int")
        return None
    if value < minimum:
        c.error(key_path, value, f"must be at least {minimum}")
        return None
    return value


def load_spec(path: str | Path, text: str | None = None,
              benchmarks: Mapping[str, Any] | None = None, allow_unsafe: bool = False) -> Spec:
    """Load and validate a spec file. Raises SpecError listing every problem found.
    `allow_unsafe`: accept ssh options and sysctls outside the safe set (runner/spec_safety.py)."""
    path = Path(path)
    if text is None:
        try:
            text = path.read_text()
        except OSError as exc:
            raise SpecError([f"{path}: cannot read the spec: {exc.strerror}"]) from exc
    data, lines = load_yaml_with_lines(text, str(path))
    if benchmarks is None:
        from cephscope.runner.benchmarks import BENCHMARKS

        benchmarks = BENCHMARKS
    return validate_spec(path, data, lines, benchmarks, allow_unsafe=allow_unsafe)


def validate_spec(path: Path, data: Any, lines: dict[tuple[Any, ...], int],
                  benchmark_classes: Mapping[str, Any], allow_unsafe: bool = False) -> Spec:
    c = Checker.for_file(path, lines)
    if not isinstance(data, dict):
        raise SpecError([f"{path}:1: the spec must be a mapping at the top level"])
    # Only what cephscope acts on is checked for shell metacharacters: an ignored CBT key
    # (a monitoring profile's `> {dir}/out`, a `*_cmd` path) is never used, let alone run.
    c.shell_safe((), _acted_on(_without_osd_id_placeholder(data), benchmark_classes))

    for key in data:
        if key in TOP_KEYS:
            continue
        if key in TOP_KEYS_CBT_IGNORED:
            c.warn((key,), "CBT section cephscope does not act on; ignored")
        else:
            c.error((key,), data[key], "unknown key (neither cephscope's nor CBT's)")

    spec = Spec(path=path, raw=copy.deepcopy(data), lines=lines)

    # cluster (CBT): mostly ignored, a few keys used.
    cluster = c.mapping(("cluster",), data.get("cluster"))
    for key, value in cluster.items():
        kp = ("cluster", key)
        if key in CBT_CLUSTER_KEYS_IGNORED:
            c.warn(kp, "CBT cluster-building key; cephscope does not act on it "
                       "(it uses the cluster it is pointed at)")
        elif key not in CLUSTER_KEYS_USED:
            c.error(kp, value, "unknown key (neither cephscope's nor CBT's)")
    if "use_existing" in cluster:
        ue = cluster["use_existing"]
        if not isinstance(ue, bool):
            c.error(("cluster", "use_existing"), ue, "wrong type; expected bool")
        elif not ue:
            c.warn(("cluster", "use_existing"),
                   "False: cephscope never builds a cluster; using the cluster you are pointed at")
    if "conf_file" in cluster:
        if isinstance(cluster["conf_file"], str):
            spec.conf_file = cluster["conf_file"]
        else:
            c.error(("cluster", "conf_file"), cluster["conf_file"], "wrong type; expected str")
    spec.hosts = _hosts(c, cluster, allow_unsafe)
    if "clusterid" in cluster:
        if isinstance(cluster["clusterid"], str) and cluster["clusterid"]:
            spec.cluster_name = cluster["clusterid"]
        else:
            c.error(("cluster", "clusterid"), cluster["clusterid"],
                    "wrong type; expected a non-empty str")

    # iterations: top level or CBT's cluster.iterations
    for kp, container in ((("iterations",), data), (("cluster", "iterations"), cluster)):
        if "iterations" in container:
            it = parse_iterations(c, kp, container["iterations"])
            if isinstance(it, AdaptiveIterations):
                spec.adaptive, spec.iterations = it, it.min
            elif it is not None:
                spec.iterations = it

    # erasure profiles, then pool profiles (both top level or CBT's cluster.*)
    erasure_profiles: dict[str, dict[str, Any]] = {}
    for base in ((), ("cluster",)):
        container = data if not base else cluster
        eps = c.mapping((*base, "erasure_profiles"), container.get("erasure_profiles"))
        for name, ep in eps.items():
            kp = (*base, "erasure_profiles", name)
            ep = c.mapping(kp, ep)
            for key, value in ep.items():
                if key not in ERASURE_PROFILE_KEYS:
                    c.error((*kp, key), value, "unknown key in erasure profile")
            erasure_profiles[str(name)] = {**ep, "_path": kp}
    for base in ((), ("cluster",)):
        container = data if not base else cluster
        pps = c.mapping((*base, "pool_profiles"), container.get("pool_profiles"))
        for name, pp in pps.items():
            profile = _pool_profile(c, (*base, "pool_profiles", name), str(name), pp,
                                    erasure_profiles)
            if profile is not None:
                spec.pool_profiles[profile.name] = profile

    spec.client_endpoints = parse_client_endpoints(c, ("client_endpoints",),
                                                   data.get("client_endpoints"),
                                                   spec.pool_profiles)
    spec.cephfs_pools = parse_cephfs_pools(c, ("cluster", "cephfs_pools"),
                                           cluster.get("cephfs_pools"), spec.pool_profiles)

    # ceph_config: option -> scalar or axis list
    cc = c.mapping(("ceph_config",), data.get("ceph_config"))
    for option, value in cc.items():
        kp = ("ceph_config", option)
        if not isinstance(option, str) or not option.replace("-", "_").replace(
                "_", "a").isalnum():
            c.error(kp, option, "not a ceph option name")
            continue
        values = c.axis_values(kp, value)
        if values is not None:
            spec.ceph_config[option.replace("-", "_")] = value

    _host_knobs(c, spec, data, cluster, allow_unsafe)

    # restart
    rs = c.mapping(("restart",), data.get("restart"))
    spec.restart = _restart(c, rs)

    # benchmarks
    recov_types: dict[str, Any] = {}
    # where-is-the-target keys of benchmarks (getput's auth/user/key, hsbench's
    # client_endpoints): not step parameters, the run's gateway endpoint
    endpoint_params: dict[str, dict[str, Any]] = {}
    bms = c.mapping(("benchmarks",), data.get("benchmarks"))
    if not bms and "benchmarks" not in data:
        c.error(("benchmarks",), None, "missing: the spec needs at least one benchmark")
    for bname, params in bms.items():
        kp = ("benchmarks", bname)
        cls = benchmark_classes.get(bname)
        if cls is None:
            known = ", ".join(sorted(benchmark_classes)) or "none registered"
            if bname in CBT_BENCHMARKS_MISSING:
                c.error(kp, bname, f"CBT benchmark cephscope does not have (it has: {known})")
            else:
                c.error(kp, bname, f"unknown benchmark (known: {known})")
            continue
        params = c.mapping(kp, params)
        kept: dict[str, Any] = {}
        accepted: Mapping[str, tuple[type, ...]] = getattr(cls, "parameters", {})
        for key, value in params.items():
            pk = (*kp, key)
            if key in ("pool_profile", "data_pool_profile"):
                if key == "data_pool_profile" and key not in accepted:
                    c.error(pk, value, f"{bname} has no separate data pool")
                    continue
                names = c.axis_values(pk, value, (str,))
                for i, n in enumerate(names or []):
                    if n not in spec.pool_profiles:
                        c.error((*pk, i) if isinstance(value, list) else pk, n,
                                "no such pool profile (define it under pool_profiles)")
                kept[key] = value
            elif key == "client_endpoints" and key in accepted:
                names = c.axis_values(pk, value, (str,))
                sections = data.get("client_endpoints")
                for i, n in enumerate(names or []):
                    if n not in spec.client_endpoints:
                        section = sections.get(n) if isinstance(sections, dict) else None
                        driver = section.get("driver") if isinstance(section, dict) else None
                        c.error((*pk, i) if isinstance(value, list) else pk, n,
                                NOT_FIO_DRIVERS.get(driver, "no such client_endpoints section"))
                kept[key] = value
            elif key == WORKLOADS_KEY and key in accepted:
                block = parse_workloads(c, pk, value, accepted)
                if block is not None:
                    kept[key] = block
            elif key in INJECTED:
                c.error(pk, value, f"unknown {bname} parameter (set by cephscope itself)")
            elif key == "prefill" and isinstance(value, dict) and "prefill" in accepted:
                # CBT's form: fio options of its prefill job; cephscope prefills its own way
                c.warn(pk, f"CBT {bname} prefill options {sorted(value)} are not used; "
                           "images are prefilled with 4 MiB sequential writes")
                kept[key] = True
            elif key in getattr(cls, "endpoint_keys", ()):
                endpoint_params.setdefault(bname, {})[key] = value
            elif key in accepted:
                minus_one = key in getattr(cls, "unlimited_keys", ())
                if c.axis_values(pk, value, tuple(accepted[key]), minus_one=minus_one) is not None:
                    kept[key] = value
            elif key == "recov_test_type":  # CBT's, per benchmark: applies to the recovery test
                recov_types[bname] = value
            elif key == "idle_monitor_sleep":  # CBT's idle window before a benchmark
                if (isinstance(value, bool) or not isinstance(value, (int, float))
                        or not 0 <= value <= 3600):
                    c.error(pk, value, "seconds of idle monitoring: a number from 0 to 3600")
                else:
                    spec.idle_baseline_seconds = max(spec.idle_baseline_seconds or 0.0,
                                                     float(value))
            elif key == "osd_ra":  # CBT sets read-ahead per benchmark
                if c.axis_values(pk, value, (int,)) is not None:
                    spec.benchmark_knobs.setdefault(bname, {})["osd_ra"] = value
            elif key in CBT_BENCHMARK_KEYS_IGNORED:
                c.warn(pk, f"CBT {bname} parameter cephscope does not act on; ignored")
            else:
                c.error(pk, value, f"unknown {bname} parameter")
        spec.benchmarks[bname] = kept

    for kp, container in ((("recovery_test",), data), (("cluster", "recovery_test"), cluster)):
        if "recovery_test" in container:
            types = set(map(str, recov_types.values()))
            if len(types) > 1:
                c.error(("benchmarks",), sorted(types), "one recov_test_type for the run")
            spec.recovery = parse_recovery(c, kp, container["recovery_test"],
                                           next(iter(types), None))
    if recov_types and spec.recovery is None:
        c.error(("benchmarks",), recov_types, "recov_test_type without a recovery_test section")

    spec.rgw = _rgw_settings(c, data, endpoint_params)
    if "search" in data:
        spec.search = parse_search(c, ("search",), data["search"], spec.benchmarks)
    spec.releases = _parse_devcluster(c, data.get("devcluster"))
    if spec.releases and (spec.search is not None or spec.adaptive is not None):
        c.error(("devcluster", "release"), list(spec.releases),
                "a sweep across releases runs a fixed list of steps; not with search or "
                "adaptive iterations")

    spec.warnings = c.warnings
    if c.problems:
        raise SpecError(c.problems)

    # Per-step checks by the benchmark classes, on every combination of their own axes.
    for bname, params in spec.benchmarks.items():
        cls = benchmark_classes[bname]
        seen: set[str] = set()
        for each in step_params(params, spec.client_endpoints, spec.cephfs_pools):
            combo = each.params
            for problem in cls.validate(combo) or []:
                if problem in seen:  # the same problem in every combination: said once
                    continue
                seen.add(problem)
                shown = {k: v for k, v in combo.items() if k in each.axes or k == "workload"}
                c.problems.append(f"{spec.where(('benchmarks', bname))}: benchmarks.{bname}"
                                  f"{' ' + repr(shown) if shown else ''}: {problem}")
    if c.problems:
        raise SpecError(c.problems)
    return spec


def _rgw_settings(c: Checker, data: dict[str, Any],
                  endpoint_params: dict[str, dict[str, Any]]) -> RgwSettings | None:
    """The gateway as the spec gives it: CBT's places (an S3 benchmark's `client_endpoints`
    entry of driver s3, getput's auth/user/key), cephscope's `rgw:` section over them."""
    found = RgwEndpoint()
    keys: list[str] = []
    for bname, params in endpoint_params.items():
        kp: tuple[Any, ...] = ("benchmarks", bname)
        if "client_endpoints" in params:
            name = params["client_endpoints"]
            sections = data.get("client_endpoints")
            if not isinstance(sections, dict) or name not in sections:
                c.error((*kp, "client_endpoints"), name,
                        "no such client endpoint (define it under client_endpoints)")
                continue
            layer = cbt_s3_endpoint(c, ("client_endpoints", name), sections[name])
        else:
            layer = cbt_getput_endpoint(c, kp, params)
        keys += spec_secrets(layer)
        found = layer.over(found)
    section = parse_rgw(c, ("rgw",), data.get("rgw")) if "rgw" in data else None
    if section is not None:
        keys += spec_secrets(section.endpoint)
        found = section.endpoint.over(found)
    if section is None and not endpoint_params:
        return None
    return RgwSettings(found, section.keys_file if section else None, tuple(keys))


def _parse_devcluster(c: Checker, section: Any) -> tuple[str, ...]:
    """`devcluster: {release: NAME | [NAME, ...]}`: the releases, in the order given."""
    kp: tuple[Any, ...] = ("devcluster",)
    data = c.mapping(kp, section)
    for key in data:
        if key not in DEVCLUSTER_KEYS:
            c.error((*kp, key), data[key], f"unknown key (known: {', '.join(sorted(DEVCLUSTER_KEYS))})")
    if "release" not in data:
        if section is not None and data:
            c.error(kp, section, "names no release")
        return ()
    values = c.axis_values((*kp, "release"), data["release"], (str,))
    if values is None:
        return ()
    bad = [v for v in values if not RELEASE_NAME.match(v)]
    for v in bad:
        c.error((*kp, "release"), v, "not a release name (e.g. pacific, reef, tentacle)")
    return () if bad else tuple(values)


def _acted_on(data: dict[str, Any], benchmark_classes: Mapping[str, Any]) -> dict[str, Any]:
    """The spec without the keys cephscope ignores (CBT's cluster-building and monitoring keys,
    CBT benchmark parameters it does not act on, benchmarks it refuses anyway)."""
    kept = {k: v for k, v in data.items() if k not in TOP_KEYS_CBT_IGNORED}
    if isinstance(kept.get("cluster"), dict):
        kept["cluster"] = {k: v for k, v in kept["cluster"].items()
                           if k not in CBT_CLUSTER_KEYS_IGNORED}
    if isinstance(kept.get("benchmarks"), dict):
        benchmarks = {}
        for bname, params in kept["benchmarks"].items():
            if bname not in benchmark_classes:
                continue
            accepted = getattr(benchmark_classes[bname], "parameters", {})
            # a tool's path is argv[0] only, looked up before anything runs (CBT's examples
            # write placeholders such as /home/<user>/go/…/hsbench)
            paths = getattr(benchmark_classes[bname], "tool_path_keys", frozenset())
            benchmarks[bname] = ({k: v for k, v in params.items()
                                  if (k in accepted or k not in CBT_BENCHMARK_KEYS_IGNORED)
                                  and k not in paths}
                                 if isinstance(params, dict) else params)
        kept["benchmarks"] = benchmarks
    return kept


def _pool_profile(c: Checker, kp: tuple[Any, ...], name: str, pp: Any,
                  erasure_profiles: dict[str, dict[str, Any]]) -> PoolProfile | None:
    pp = c.mapping(kp, pp)
    before = len(c.problems)
    for key, value in pp.items():
        if key not in POOL_PROFILE_KEYS:
            c.error((*kp, key), value, "unknown key in pool profile")
        elif key in POOL_PROFILE_KEYS_IGNORED:
            c.warn((*kp, key), "CBT pool-profile key cephscope does not act on; ignored")
    pg = pp.get("pg_size", pp.get("pgp_size", 32))
    pg_num = _int(c, (*kp, "pg_size"), pg, 1)
    replication = pp.get("replication", pp.get("size", None))
    if replication is None or replication == "replicated":
        # CBT creates a replicated pool of the cluster's default size then ('replicated' or
        # no replication key in its examples)
        said = "no replication" if replication is None else "replication 'replicated'"
        c.warn((*kp, "replication"), f"{said}: a replicated pool of size "
                                     f"{DEFAULT_REPLICATED_SIZE} (Ceph's default); give an "
                                     "integer size or 'erasure' to choose")
        replication = DEFAULT_REPLICATED_SIZE
    prefill = {key: _int(c, (*kp, key), pp[key], low) for key, low in
               (("prefill_recovery_objects", 0), ("prefill_recovery_object_size", 1),
                ("prefill_recovery_threads", 1)) if key in pp}
    ec_overwrites = pp.get("ec_overwrites", False)
    if not isinstance(ec_overwrites, bool):
        c.error((*kp, "ec_overwrites"), ec_overwrites, "wrong type; expected bool")
    if replication == "erasure":
        k = pp.get("erasure_k")
        m = pp.get("erasure_m")
        plugin = "jerasure"
        failure_domain = "osd"
        stripe_unit = None
        ep_name = pp.get("erasure_profile")
        if ep_name is not None:
            ep = erasure_profiles.get(str(ep_name))
            if ep is None:
                return _cluster_erasure_profile(c, kp, name, ep_name, pg_num, before,
                                                bool(ec_overwrites), prefill)
            k = ep.get("erasure_k", ep.get("k", k))
            m = ep.get("erasure_m", ep.get("m", m))
            plugin = ep.get("erasure_plugin", ep.get("plugin", plugin))
            failure_domain = ep.get("failure_domain", failure_domain)
            stripe_unit = ep.get("stripe_unit")
        k_ok = _int(c, (*kp, "erasure_k"), k, 1)
        m_ok = _int(c, (*kp, "erasure_m"), m, 1)
        if stripe_unit is not None:
            stripe_unit = _int(c, (*kp, "erasure_profile", "stripe_unit"), stripe_unit, 512)
        if len(c.problems) > before or k_ok is None or m_ok is None or pg_num is None:
            return None
        return PoolProfile(name=name, replication=None, pg_num=pg_num, erasure_k=k_ok,
                           erasure_m=m_ok, erasure_plugin=str(plugin),
                           failure_domain=str(failure_domain), ec_overwrites=bool(ec_overwrites),
                           stripe_unit=stripe_unit, **prefill)
    size = _int(c, (*kp, "replication"), replication, 1)
    if len(c.problems) > before or size is None or pg_num is None:
        return None
    return PoolProfile(name=name, replication=size, pg_num=pg_num, **prefill)


def _cluster_erasure_profile(c: Checker, kp: tuple[Any, ...], name: str, ep_name: Any,
                             pg_num: int | None, before: int, ec_overwrites: bool,
                             prefill: dict[str, Any]) -> PoolProfile | None:
    """A pool profile naming an erasure profile the spec does not define (CBT's files expect
    it on the cluster): its settings are looked up on the cluster at start."""
    if not isinstance(ep_name, str) or not ERASURE_PROFILE_NAME.match(ep_name):
        c.error((*kp, "erasure_profile"), ep_name,
                "not an erasure-code profile name (letters, digits, '_', '.', '-')")
        return None
    c.warn((*kp, "erasure_profile"),
           f"{ep_name!r} is not defined under erasure_profiles: the cluster's profile of that "
           f"name is used, looked up at start (`ceph osd erasure-code-profile get {ep_name}`)")
    if len(c.problems) > before or pg_num is None:
        return None
    return PoolProfile(name=name, replication=None, pg_num=pg_num, ec_overwrites=ec_overwrites,
                       cluster_erasure_profile=ep_name, **prefill)


def _host_knobs(c: Checker, spec: Spec, data: dict[str, Any], cluster: dict[str, Any],
                allow_unsafe: bool = False) -> None:
    """`osd_ra` (top level or CBT's cluster.osd_ra), `block_queue`, `sysctl` -> spec.knobs."""
    for kp, container in ((("osd_ra",), data), (("cluster", "osd_ra"), cluster)):
        if "osd_ra" in container and c.axis_values(kp, container["osd_ra"], (int,)) is not None:
            spec.knobs["osd_ra"] = container["osd_ra"]
    bq = c.mapping(("block_queue",), data.get("block_queue"))
    for attr, value in bq.items():
        kp = ("block_queue", attr)
        if not isinstance(attr, str) or not QUEUE_ATTRIBUTE.match(attr):
            c.error(kp, attr, "not a queue attribute (e.g. scheduler, nr_requests, "
                              "iosched/read_expire)")
        elif c.axis_values(kp, value, (int, str)) is not None:
            spec.knobs[f"block_queue.{attr}"] = value
    sc = c.mapping(("sysctl",), data.get("sysctl"))
    for key, value in sc.items():
        kp = ("sysctl", key)
        if not isinstance(key, str) or not SYSCTL_NAME.match(key):
            c.error(kp, key, "not a sysctl name (e.g. vm.swappiness)")
            continue
        unsafe = None if allow_unsafe else sysctl_problem(key)
        if unsafe:
            c.error(kp, key, unsafe)
            continue
        on = "osds"
        if isinstance(value, dict):
            # YAML 1.1 reads a bare `on:` key as the boolean true
            value = {("on" if k is True else k): v for k, v in value.items()}
            for k in value:
                if k not in ("value", "on"):
                    c.error((*kp, k), value[k], "unknown key (value, on)")
            on = value.get("on", "osds")
            if on not in ("osds", "clients", "all"):
                c.error((*kp, "on"), on, "must be osds, clients or all")
            if "value" not in value:
                c.error(kp, value, "missing value")
                continue
            kp, value = (*kp, "value"), value["value"]
        if c.axis_values(kp, value, (int, str)) is not None:
            spec.knobs[f"sysctl.{key}"] = value
            if on != "osds":
                spec.sysctl_on[f"sysctl.{key}"] = on
def _without_osd_id_placeholder(data: dict[str, Any]) -> dict[str, Any]:
    """The spec with `{id}` taken out of restart.command, the one place braces belong (the
    runner substitutes the OSD id there; nothing else of the element may be a metacharacter)."""
    restart = data.get("restart")
    if not isinstance(restart, dict) or not isinstance(restart.get("command"), list):
        return data
    command = [a.replace(OSD_ID_PLACEHOLDER, "") if isinstance(a, str) else a
               for a in restart["command"]]
    return {**data, "restart": {**restart, "command": command}}


def _host_names(c: Checker, kp: tuple[Any, ...], value: Any) -> tuple[str, ...]:
    """A host name or a list of them (CBT writes both)."""
    values = value if isinstance(value, list) else [value]
    names: list[str] = []
    for i, v in enumerate(values):
        vp = (*kp, i) if isinstance(value, list) else kp
        if isinstance(v, str) and v.startswith("^"):
            c.warn(vp, f"{v!r}: a pdsh host-list file; cephscope does not read it (list the hosts)")
        elif not isinstance(v, str) or not HOST_NAME.fullmatch(v):
            c.error(vp, v, "not a host name ([user@]host: letters, digits, . _ : -)")
        elif v in names:
            c.error(vp, v, "host named twice")
        else:
            names.append(v)
    return tuple(names)


def _hosts(c: Checker, cluster: dict[str, Any], allow_unsafe: bool = False) -> HostsSpec:
    def kp(key: str) -> tuple[str, str]:
        return ("cluster", key)

    clients = _host_names(c, kp("clients"), cluster["clients"]) if "clients" in cluster else ()
    osds = _host_names(c, kp("osds"), cluster["osds"]) if "osds" in cluster else ()
    mons_raw = cluster.get("mons")
    # CBT's mons may map host -> {mon id: address}; only the host names matter here.
    mons = _host_names(c, kp("mons"), list(mons_raw) if isinstance(mons_raw, dict) else mons_raw) \
        if mons_raw is not None else ()
    head = _host_names(c, kp("head"), cluster["head"])[:1] if "head" in cluster else ()
    user = cluster.get("user")
    if user is not None and (not isinstance(user, str) or not re.fullmatch(r"[a-z_][a-z0-9_.-]*", user)):
        c.error(kp("user"), user, "not a user name")
        user = None
    ssh_config = cluster.get("ssh_config")
    if ssh_config is not None and (not isinstance(ssh_config, str) or not ssh_config):
        c.error(kp("ssh_config"), ssh_config, "must be the path of an ssh_config file")
        ssh_config = None
    identity = cluster.get("ssh_identity_file")
    if identity is not None and (not isinstance(identity, str) or not identity):
        c.error(kp("ssh_identity_file"), identity, "must be the path of a private key")
        identity = None
    port = cluster.get("ssh_port")
    if port is not None and (isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536):
        c.error(kp("ssh_port"), port, "must be a port number 1..65535")
        port = None
    options_raw = cluster.get("ssh_options", [])
    options: list[str] = []
    if not isinstance(options_raw, list):
        c.error(kp("ssh_options"), options_raw, "must be a list of Key=Value ssh options")
    else:
        for i, option in enumerate(options_raw):
            unsafe = None
            if isinstance(option, str) and SSH_OPTION.fullmatch(option) and not allow_unsafe:
                unsafe = ssh_option_problem(option)
            if not isinstance(option, str) or not SSH_OPTION.fullmatch(option):
                c.error((*kp("ssh_options"), i), option, "not a Key=Value ssh option")
            elif unsafe:
                c.error((*kp("ssh_options"), i), option, unsafe)
            else:
                options.append(option)
    return HostsSpec(clients=clients, head=head[0] if head else None, osds=osds, mons=mons,
                     user=user, ssh_config=ssh_config, ssh_port=port,
                     ssh_identity_file=identity, ssh_options=tuple(options))


def _restart(c: Checker, rs: dict[str, Any]) -> RestartSpec:
    for key, value in rs.items():
        if key not in RESTART_KEYS:
            c.error(("restart", key), value, "unknown key in restart")
    method = rs.get("method")
    if method is not None and method not in RESTART_METHODS:
        c.error(("restart", "method"), method, f"unknown method (one of {RESTART_METHODS})")
        method = None
    command: tuple[str, ...] = ()
    if "command" in rs:
        cmd = rs["command"]
        if not isinstance(cmd, list) or not cmd or not all(isinstance(a, str) for a in cmd):
            c.error(("restart", "command"), cmd,
                    "must be a non-empty argv list of strings (never a shell line)")
        else:
            command = tuple(cmd)
            if not any("{id}" in a for a in cmd):
                c.error(("restart", "command"), cmd, "must contain {id} in one of its elements")
    if method == "command" and not command:
        c.error(("restart", "method"), method, "method 'command' needs restart.command")
    rolling = rs.get("rolling", False)
    if not isinstance(rolling, bool):
        c.error(("restart", "rolling"), rolling, "wrong type; expected bool")
        rolling = False
    timeout = rs.get("timeout", 600.0)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        c.error(("restart", "timeout"), timeout, "must be a positive number of seconds")
        timeout = 600.0
    fsid = rs.get("fsid")
    if fsid is not None:
        # It becomes part of a container or unit name: a UUID in its usual form only.
        try:
            canonical = str(uuid.UUID(fsid)) if isinstance(fsid, str) else None
        except ValueError:
            canonical = None
        if canonical is None or canonical != fsid.lower():
            c.error(("restart", "fsid"), fsid, "must be the cluster's fsid (a UUID)")
        fsid = canonical
    elif method in ("podman", "cephadm-systemd"):
        c.error(("restart", "method"), method, f"method {method!r} needs restart.fsid")
    return RestartSpec(method=method, command=command, rolling=rolling,
                       timeout_seconds=float(timeout), fsid=fsid)
