"""The benchmark lifecycle shared by every benchmark: prepare / run / parse / cleanup.

The runner drives one `Benchmark` instance per step:

    bench = BENCHMARKS[name](params)      # params: this step's resolved benchmark parameters
    bench.prepare(ctx)                    # e.g. create/fill objects, check the rbd image
    bench.precondition(ctx)               # e.g. CBT's precondition workload (phase tagged)
    for mode in bench.modes():            # e.g. ["write", "seq"] for rados bench
        ctx.set_mode(mode)                # runner tags the phase (cephscope_step_info{mode=...})
        raw_files = bench.run(mode, ctx)  # runs the real tool (argv lists only), writes raw output
        results.append(bench.parse(mode, ctx))
    bench.cleanup(ctx)                    # always, also after a failure

Benchmarks never talk to Prometheus or the results layout beyond `ctx.step_dir`; the runner owns
those. Live per-second client figures go through `ctx.report_progress`.
"""

from __future__ import annotations

import abc
import functools
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from cephscope.runner.hostexec import HostExec
from cephscope.runner.rgw_endpoint import RgwEndpoint

A = TypeVar("A")


@dataclass(frozen=True)
class ClusterAccess:
    """How a benchmark reaches the cluster: a ceph.conf and a client identity."""

    conf_path: Path
    client_name: str = "client.admin"
    keyring_path: Path | None = None
    # argv that runs a client tool (rados, fio) of the cluster's own release, e.g. from a dev
    # cluster's root filesystem; empty: this machine's tools
    tool_prefix: tuple[str, ...] = ()

    @property
    def client_id(self) -> str:
        """The id of `client_name`, as `--id` and fio's `--clientname` take it."""
        name = self.client_name
        return name.split(".", 1)[1] if name.startswith("client.") else name

    def fio_env(self, extra: Mapping[str, str]) -> dict[str, str]:
        """fio's environment: its rbd engine reads the cluster config from CEPH_CONF and the
        keyring from CEPH_ARGS; `extra` (the step's environment) on top."""
        env = {"CEPH_CONF": str(self.conf_path)}
        if self.keyring_path is not None:
            env["CEPH_ARGS"] = f"--keyring={self.keyring_path}"
        env.update(extra)
        return env

    def common_args(self) -> list[str]:
        args = ["-c", str(self.conf_path), "-n", self.client_name]
        if self.keyring_path is not None:
            args += ["-k", str(self.keyring_path)]
        return args


@dataclass(frozen=True)
class LiveSample:
    """One per-second client figure as the tool printed it."""

    timestamp: float
    ops_per_second: float | None = None
    bytes_per_second: float | None = None
    latency_seconds: float | None = None
    ops_in_flight: float | None = None


@dataclass
class BenchContext:
    cluster: ClusterAccess
    pool: str
    step_dir: Path
    run_id: str
    step_id: str
    # Called by the benchmark for every per-second line it parses while the tool runs.
    report_progress: Callable[[str, LiveSample], None] = lambda mode, sample: None
    # The same per client of a multi-client step: (client name, mode, sample).
    report_client_progress: Callable[[str, str, LiveSample], None] = (
        lambda client, mode, sample: None)
    # Extra environment for the tool (e.g. CEPH_CONF); never a shell.
    env: Mapping[str, str] = field(default_factory=dict)
    timeout_seconds: float = 3600.0
    # where image data goes when it is not `pool` (RBD's --data-pool: an EC pool)
    data_pool: str | None = None
    # Where the tool runs: every client at once (empty: this machine only, as one client).
    clients: Sequence[HostExec] = ()
    # Set from elsewhere (a failed recovery test): the running tools are stopped at once.
    abort: threading.Event | None = None
    # the cluster's mon commands (`ceph <prefix>` with arguments -> JSON), for benchmarks
    # whose endpoints change the cluster (a CephFS data pool); None: not handed in
    ceph: Callable[..., Any] | None = None
    # (pool profile, application, role) -> the pool made or reused for it (the run's pools)
    ensure_pool: Callable[[str, str, str], str] | None = None
    # the run's journal of what a step's endpoints changed beyond the run dir (mounts, CephFS)
    undo: Any = None
    log: Callable[[str], None] = lambda line: None
    # The RADOS Gateway and its keys, for the benchmarks that drive one (`rgw_api`).
    rgw: RgwEndpoint | None = None


@dataclass(frozen=True)
class Slot:
    """One tool process of a step: on which client, and its index there and overall."""

    client: HostExec | None  # None: this machine
    index: int  # within the client
    overall: int  # across all clients (live-figure aggregation)

    @property
    def label(self) -> str:
        """File-name part naming the client ("" on this machine alone)."""
        return "" if self.client is None else f"{self.client.name}."

    @property
    def client_name(self) -> str:
        return "local" if self.client is None else self.client.name


def client_slots(ctx: BenchContext, per_client: int) -> list[Slot]:
    """`per_client` processes on every client of the step, client by client."""
    clients: list[HostExec | None] = list(ctx.clients) or [None]
    return [Slot(client, i, n * per_client + i)
            for n, client in enumerate(clients) for i in range(per_client)]


def client_aggregators(ctx: BenchContext, slots: Sequence[Slot],
                         make: Callable[[int, Callable[[str, LiveSample], None]], A]
                         ) -> dict[str, A]:
    """One live-figure aggregator per client of a multi-client step (none on this machine
    alone): `make(processes on that client, its reporter)`; slots feed it with `slot.index`."""
    return {client.name: make(sum(1 for s in slots if s.client is client),
                              functools.partial(ctx.report_client_progress, client.name))
            for client in ctx.clients}


def fan_out(*feeds: Callable[[str], None]) -> Callable[[str], None]:
    """One stdout callback handing every chunk to each of `feeds`."""
    def feed(chunk: str) -> None:
        for each in feeds:
            each(chunk)
    return feed


@dataclass(frozen=True)
class PreflightAccess:
    """What a benchmark's preflight may read: the clients (empty: this machine) and the
    cluster's mon commands."""

    clients: Sequence[HostExec] = ()
    ceph: Callable[..., Any] | None = None


@dataclass
class BenchResult:
    """Parsed result of one mode of one step, in base units."""

    benchmark: str
    mode: str
    iops: float
    bandwidth_bytes_per_second: float
    latency_avg_seconds: float | None = None
    latency_min_seconds: float | None = None
    latency_max_seconds: float | None = None
    latency_stddev_seconds: float | None = None
    # e.g. {"50": 0.001, "99": 0.004, "99.9": 0.01} where the tool reports them
    latency_percentiles_seconds: dict[str, float] = field(default_factory=dict)
    runtime_seconds: float | None = None
    ops: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class BenchmarkError(RuntimeError):
    """A benchmark tool failed or its output could not be understood."""


class Benchmark(abc.ABC):
    """One benchmark tool. Subclasses are registered in `cephscope.runner.benchmarks.BENCHMARKS`."""

    #: the CBT name of the benchmark (`radosbench`, `librbdfio`)
    name: ClassVar[str]
    #: parameter name -> python type(s) accepted per value (for spec validation)
    parameters: ClassVar[Mapping[str, tuple[type, ...]]]
    #: the application enabled on the pools this benchmark runs on (`rados`, `rbd`); None: it
    #: uses no pool of its own (a gateway benchmark: the gateway writes to its own pools)
    pool_application: ClassVar[str | None] = "rados"
    #: the gateway API it drives ("s3", "swift"), None for none: the run must have that
    #: endpoint and keys (runner/rgw_endpoint.py) before anything changes
    rgw_api: ClassVar[str | None] = None
    #: parameters that say where the target is and how to log in (CBT getput's `auth`,
    #: `user`, `key`): taken out of the step's parameters into the run's gateway endpoint
    endpoint_keys: ClassVar[frozenset[str]] = frozenset()
    #: notes the report prints when a run holds finished steps of this benchmark
    report_notes: ClassVar[tuple[str, ...]] = ()
    #: the parameters that raise the load the benchmark offers (ops in flight, processes,
    #: jobs, a target rate): swept, each gives the report a response curve (latency against
    #: IOPS as it rises). The one place the report and compare learn which axes are load.
    load_parameters: ClassVar[tuple[str, ...]] = ()

    def __init__(self, params: Mapping[str, Any]) -> None:
        self.params = dict(params)

    @classmethod
    def validate(cls, params: Mapping[str, Any]) -> list[str]:
        """Return problems with one step's resolved params (empty list = fine)."""
        return []

    @classmethod
    def estimated_seconds(cls, params: Mapping[str, Any]) -> float:
        """Rough wall time of one step, for `--dry-run` and the ETA."""
        return 0.0

    @classmethod
    def tools(cls, params: Mapping[str, Any]) -> Sequence[tuple[str, str]]:
        """(command, where it comes from) of every tool one step runs on a client, checked
        on every client before anything changes (empty: the runner's own tools, checked when
        they run)."""
        return ()

    @classmethod
    def endpoint_problems(cls, rgw: RgwEndpoint) -> list[str]:
        """Why this benchmark cannot use the run's gateway endpoint (empty: it can)."""
        return []

    @abc.abstractmethod
    def modes(self) -> Sequence[str]:
        """The modes this step runs, in order (e.g. write then seq)."""

    @classmethod
    def needs_pool(cls, params: Mapping[str, Any]) -> bool:
        """Whether a step with these params runs on a pool of its own (made when missing); a
        gateway benchmark has none (the gateway has its own pools)."""
        return cls.pool_application is not None

    @classmethod
    def application(cls, params: Mapping[str, Any]) -> str:
        """The application of the pools a step with these params runs on."""
        return cls.pool_application or ""

    @classmethod
    def preflight(cls, steps: Sequence[Mapping[str, Any]], access: PreflightAccess) -> list[str]:
        """Problems that refuse the sweep before anything changes, from reads of the cluster
        and the clients (e.g. a kernel module a driver needs); one line each."""
        return []

    def prepare(self, ctx: BenchContext) -> None:  # noqa: B027 - optional hook
        """Set up before the first mode runs."""

    @property
    def has_precondition(self) -> bool:
        """Whether `precondition` runs anything for this step."""
        return False

    def precondition(self, ctx: BenchContext) -> list[Path]:
        """Run a preconditioning workload after `prepare` (the runner tags its phase); the
        files it wrote."""
        return []

    @abc.abstractmethod
    def run(self, mode: str, ctx: BenchContext) -> list[Path]:
        """Run the tool for one mode; write its raw output under ctx.step_dir; return the files."""

    @abc.abstractmethod
    def parse(self, mode: str, ctx: BenchContext) -> BenchResult:
        """Parse the raw output that `run` wrote for `mode`."""

    def cleanup(self, ctx: BenchContext) -> None:  # noqa: B027 - optional hook
        """Remove what prepare/run left in the cluster (called also after failures)."""

    def parse_clients(self, mode: str, ctx: BenchContext) -> dict[str, BenchResult]:
        """One result per client of a multi-client step (`parse` gives their aggregate)."""
        return {}
