"""Sweep orchestration: validate → plan → (dry run | run every step) → restore.

Order of effects, so that a bad spec never touches the cluster:
  1. the spec is loaded and validated (no cluster);
  2. reads only: `ceph config help` for every ceph_config option (unknown option = error),
     OSD list, running values of restart options (for ordering);
  3. the run dir is created and the pre-sweep config recorded (config db + running values);
  4. changes: pools, config per step, OSD restarts; always undone in `finally`
     (also on Ctrl-C / SIGTERM).

Bounded, whatever the cluster does (docs/runner.md, "A lost cluster"): every call to the
cluster gives up after the cluster timeout (`CephCli`); a call no mon answered (ClusterLost)
fails its step and then the run; the restore runs in a worker thread the main thread waits for
with a deadline after a signal or a lost cluster, so SIGINT/SIGTERM are always taken, and a
second one ends the run at once, saying what was left unrestored (the run dir keeps it for
`--resume`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cephscope.monclient import (
    DEFAULT_CLUSTER_TIMEOUT_SECONDS,
    WAIT_SLICE_SECONDS,
    bounded_env,
)
from cephscope.runner.annotations import GrafanaAnnotator
from cephscope.runner.benchmarks.base import (
    BenchContext,
    Benchmark,
    BenchmarkError,
    ClusterAccess,
    LiveSample,
)
from cephscope.runner.benchmarks.toolproc import run_quick
from cephscope.runner.cephclient import (
    CephCli,
    CephError,
    CephTarget,
    ClusterLost,
    cluster_lost,
    cluster_version,
)
from cephscope.runner.clients import (
    ClientsError,
    SshSettings,
    build_clients,
    client_windows,
    close_clients,
    require_reachable,
    ssh_control_dir,
    start_skew,
)
from cephscope.runner.crashpoints import Checkpoint, no_checkpoint
from cephscope.runner.dry_run import DryRunInputs, change_lines
from cephscope.runner.environment import capture as capture_environment
from cephscope.runner.hostexec import HostExec, LocalHost
from cephscope.runner.hygiene import Hygiene, HygieneOptions, quiet_gap_for
from cephscope.runner.knobs.base import KnobError
from cephscope.runner.knobs.ceph_config import ConfigManager, ConfigSnapshot
from cephscope.runner.knobs.host import CLIENT_HOST, HostKnobs
from cephscope.runner.metadata_names import metadata_problems
from cephscope.runner.phase_metrics import MetricsServer, PhaseMetrics
from cephscope.runner.pools import PoolManager
from cephscope.runner.recovery import RecoverySpec, RecoveryTest
from cephscope.runner.restart import (
    TYPICAL_RESTART_SECONDS,
    StateRestartJournal,
    make_restart_method,
)
from cephscope.runner.results import (
    IDLE_BASELINE_FILE,
    ResultsError,
    RunDir,
    atomic_write_json,
    load_baseline,
)
from cephscope.runner.search import live as live_search
from cephscope.runner.spec import Spec, SpecError, load_spec
from cephscope.runner.steps import (
    Step,
    axis_labels,
    count_restarts,
    format_value,
    generate_steps,
    order_steps,
)
from cephscope.runner.system_metrics import pull_step_window, scrape_interval_seconds

DEFAULT_CONF = "/etc/ceph/ceph.conf"
DEFAULT_POOL = "cephscope-bench"
DEFAULT_RBD_POOL = "rbd"
# How long the restore after SIGINT/SIGTERM may take (with the worker's grace and the exit,
# the run ends within 25 s of the signal).
DEFAULT_RESTORE_TIMEOUT_SECONDS = 15.0
# Beyond its deadline, the restore worker's last call is given this long to return.
RESTORE_GRACE_SECONDS = 5.0
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

Log = Callable[[str], None]


class SweepError(RuntimeError):
    pass


class Interrupted(BaseException):
    """SIGTERM/SIGINT received: stop after restoring the cluster."""


@dataclass
class SweepOptions:
    spec_path: Path | None = None
    resume_dir: Path | None = None
    results_dir: Path | None = None
    dry_run: bool = False
    # ssh options and sysctls outside the safe set (runner/spec_safety.py) are accepted
    allow_unsafe_spec: bool = False
    conf: Path | None = None
    # how to reach the cluster when the caller decided it (the CLI builds it for --devcluster)
    target: CephTarget | None = None
    hygiene: HygieneOptions = field(default_factory=HygieneOptions)
    asok_dir: Path = Path("/var/run/ceph")
    client_name: str = "client.admin"
    keyring: Path | None = None
    metrics_port: int | None = None
    metrics_linger_seconds: float = 30.0
    grafana_url: str | None = None
    grafana_token: str | None = None
    grafana_dashboard_uid: str | None = None
    prometheus_url: str | None = None
    prometheus_rate_window: str = "auto"
    prometheus_lag_seconds: float = 10.0
    baseline_dir: Path | None = None
    keep_pools: bool = False
    pool: str = DEFAULT_POOL
    rbd_pool: str = DEFAULT_RBD_POOL
    restart_method: str | None = None
    rolling: bool | None = None
    step_timeout_seconds: float | None = None
    stop_on_failure: bool = False
    # every call to the cluster gives up after this long (librados' mount, mon op and the
    # benchmarks' OSD op timeouts; the ceph CLI's connect timeout)
    cluster_timeout_seconds: float = DEFAULT_CLUSTER_TIMEOUT_SECONDS
    # the restore after a signal gives up after this long (what it did not restore is said and
    # left in the run dir for --resume)
    restore_timeout_seconds: float = DEFAULT_RESTORE_TIMEOUT_SECONDS
    # beyond that, how long the restore's last call is given to return (tests shorten it)
    restore_grace_seconds: float = RESTORE_GRACE_SECONDS
    tty: bool | None = None
    clients: tuple[str, ...] | None = None  # overrides the spec's cluster.clients
    ssh: SshSettings = field(default_factory=SshSettings)
    # a test hook (see cephscope.runner.crashpoints); a no-op for every real run
    checkpoint: Checkpoint = no_checkpoint


@dataclass
class Plan:
    spec: Spec
    steps: list[Step]
    restart_options: set[str]
    current_restart_values: dict[str, Any] | None
    estimated_seconds: float
    restarts: int
    notes: list[str] = field(default_factory=list)


def benchmark_registry() -> Mapping[str, type[Benchmark]]:
    module = importlib.import_module("cephscope.runner.benchmarks")
    return getattr(module, "BENCHMARKS", {})


def make_run_id(spec_path: Path) -> str:
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", spec_path.stem)[:40] or "sweep"
    return f"{stem}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"


class Sweep:
    def __init__(self, opts: SweepOptions, log: Log | None = None,
                 benchmarks: Mapping[str, type[Benchmark]] | None = None) -> None:
        self.opts = opts
        self.log: Log = log or (lambda m: print(m, flush=True))
        self.benchmarks = benchmarks if benchmarks is not None else benchmark_registry()
        self.target: CephTarget | None = None
        self.cli: CephCli | None = None
        self.host_knobs: HostKnobs | None = None
        self.hygiene: Hygiene | None = None
        self.recovery: RecoveryTest | None = None
        self.knob_snapshot: list[dict[str, Any]] | None = None
        self.config: ConfigManager | None = None
        self.run_dir: RunDir | None = None
        self.snapshot: ConfigSnapshot | None = None
        self.pools: PoolManager | None = None
        self.metrics: PhaseMetrics | None = None
        self.server: MetricsServer | None = None
        self.annotator: GrafanaAnnotator | None = None
        self.failed: list[str] = []
        self.touched_cluster = False
        self.clients: list[HostExec] = []  # empty: benchmarks run on this machine
        self.ssh_control_dir: Path | None = None  # the clients' multiplexing sockets
        self.client_hosts: list[str] = [CLIENT_HOST]
        self.host_for: Callable[[str], HostExec] = lambda name: LocalHost()
        self.release: str | None = None  # the release the cluster was rebuilt on by this run
        self.ceph_version = ""  # what the cluster's daemons report (`ceph versions`)
        # the OSDs a restart is under way for, in the run dir's state (see _resume_restart)
        self.restart_journal = StateRestartJournal(self._restarting_osds,
                                                   self._record_restarting_osds)
        # a step's benchmark cleanup not run when a signal or a lost cluster ended the step:
        # run first by the (bounded) restore
        self.pending_cleanup: Callable[[], list[str]] | None = None
        # what the restore has still to put back, by name (said when it cannot finish)
        self.unrestored: list[str] = []

    # ---- spec + cluster ------------------------------------------------------------------------

    def load(self) -> tuple[Spec, str]:
        if self.opts.resume_dir is not None:
            path = self.opts.resume_dir / "spec.yaml"
            if not (self.opts.resume_dir / "run.json").exists():
                raise ResultsError(f"{self.opts.resume_dir} is not a cephscope run dir "
                                   f"(no run.json)")
        elif self.opts.spec_path is not None:
            path = self.opts.spec_path
        else:
            raise SweepError("give a spec file or --resume RUN_DIR")
        try:
            text = path.read_text()
        except OSError as exc:
            raise SpecError([f"{path}: cannot read the spec: {exc.strerror}"]) from exc
        spec = load_spec(path, text=text, benchmarks=self.benchmarks,
                         allow_unsafe=self.opts.allow_unsafe_spec)
        return spec, text

    def connect(self, spec: Spec) -> None:
        """Set up how we reach the cluster (no command sent yet)."""
        o = self.opts
        target = o.target
        if target is None:
            target = CephTarget.plain(o.conf or Path(spec.conf_file or DEFAULT_CONF),
                                      o.client_name, o.keyring, o.asok_dir, spec.cluster_name)
        self.target = target
        names = o.clients if o.clients is not None else spec.hosts.clients
        ssh = o.ssh.merged(spec.hosts, target.ssh_config)
        try:
            if names and ssh.multiplex and not o.dry_run:
                run_key = o.resume_dir or o.results_dir or o.spec_path
                self.ssh_control_dir = ssh_control_dir(Path(run_key or "."))
            self.clients = build_clients(names, ssh, control_dir=self.ssh_control_dir)
        except ClientsError as exc:
            raise SweepError(str(exc)) from exc
        if not Path(target.conf_path).exists():
            if o.dry_run:  # a dry run can plan without a cluster
                return
            raise SweepError(f"ceph conf {target.conf_path} does not exist (use --conf or "
                             f"--devcluster)")
        self.cli = CephCli(target.conf_path, client_name=target.client_name,
                           keyring_path=target.keyring_path, tool_prefix=target.tool_prefix,
                           timeout_seconds=o.cluster_timeout_seconds)
        method = o.restart_method or spec.restart.method
        if method is None and target.default_restart is not None:
            method = "devcluster"
        restart = (make_restart_method(method, self.cli, target.default_restart,
                                       spec.restart.command, fsid=spec.restart.fsid)
                   if method else None)
        rolling = spec.restart.rolling if o.rolling is None else o.rolling
        self.config = ConfigManager(self.cli, restart, target.osd_asok, rolling=rolling,
                                    timeout_seconds=spec.restart.timeout_seconds, log=self.log,
                                    checkpoint=o.checkpoint,
                                    restart_journal=self.restart_journal)
        # host knobs, cache drops and the environment reach the clients the benchmarks run on
        clients = {c.name: c for c in self.clients}
        self.client_hosts = list(clients) or [CLIENT_HOST]

        def host_for(name: str) -> HostExec:
            return clients.get(name) or target.host_for(name)

        self.host_for = host_for
        self.host_knobs = HostKnobs(self.cli, host_for, spec.sysctl_on,
                                    client_hosts=self.client_hosts)
        self.hygiene = Hygiene(self.cli, host_for, self.host_knobs.devices, o.hygiene,
                               log=self.log, client_hosts=self.client_hosts)

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
            self._validate_host_knobs(spec)
            restart_options = {o for o in options if self.config.needs_restart(o)}
            if restart_options:
                running = self.config.running_values(sorted(restart_options))
                # the current value if all OSDs agree (else: none is "current")
                current = {o: next(iter(v.values())) for o, v in running.items()
                           if len(set(v.values())) == 1}
        except CephError as exc:
            if not cluster_optional:
                raise
            notes.append(f"cluster not reachable ({exc}); restart options assumed from the "
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

    def _validate_host_knobs(self, spec: Spec) -> None:
        """Every value of every host knob checked on every host and device (reads only)."""
        values = knob_values(spec)
        if not values or self.host_knobs is None:
            return
        problems = self.host_knobs.validate(values)
        if problems:
            raise SpecError([f"{spec.where(knob_key_path(p.split(':', 1)[0]))}: {p}"
                             for p in problems])

    # ---- dry run -------------------------------------------------------------------------------

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

    def _dry_run_inputs(self, spec: Spec, plan: Plan) -> DryRunInputs:
        pools: list[str] = []
        for step in plan.steps:
            if step.pool_profile:
                name = spec.pool_profiles[step.pool_profile].name
            else:
                rbd = getattr(self.benchmarks[step.benchmark], "pool_application", "") == "rbd"
                name = self.opts.rbd_pool if rbd else self.opts.pool
            data = step.params.get("data_pool_profile")
            for pool in (name, spec.pool_profiles[data].name if data else None):
                if pool and pool not in pools:
                    pools.append(pool)
        reachable = self.config is not None and not any(
            n.startswith("cluster not reachable") for n in plan.notes)
        return DryRunInputs(
            spec=spec, steps=plan.steps, restart_options=plan.restart_options,
            config=self.config if reachable else None,
            host_knobs=self.host_knobs if reachable else None,
            restart=self.config.restarter.method if self.config is not None else None,
            hygiene=self.opts.hygiene, clients=self.clients, host_for=self.host_for,
            pools=pools)

    # ---- the run -------------------------------------------------------------------------------

    def run(self) -> int:
        spec, spec_text = self.load()
        for w in spec.warnings:
            print(f"warning: {w}", file=sys.stderr, flush=True)
        self.connect(spec)
        self._refuse_untrusted_names()
        self._check_releases(spec)
        if self.opts.dry_run:
            plan = self.plan(spec, cluster_optional=True)
            self.print_plan(plan)
            for line in change_lines(self._dry_run_inputs(spec, plan)):
                self.log(line)
            if _searches(spec):
                for line in live_search.expected(self._search_plan(spec, plan)):
                    self.log(line)
            if self.cli is not None:
                self.cli.close()
            return 0
        if self.clients:
            # Unreachable client, refused key, host key mismatch: said before any change.
            try:
                require_reachable(self.clients)
            except ClientsError as exc:
                close_clients(self.clients, self.ssh_control_dir)  # masters of those reached
                raise SweepError(str(exc)) from exc
            self.log(f"benchmarks run on {len(self.clients)} client(s): "
                     f"{', '.join(c.name for c in self.clients)}")
        resume = self.opts.resume_dir is not None
        if resume:
            assert self.opts.resume_dir is not None
            self.run_dir = RunDir(self.opts.resume_dir)
            steps = self.run_dir.steps()
            self._resume_restart()  # before the plan reads every OSD's running values
            # a search's steps are decided as it goes: plan over the whole grid
            plan = self.plan(spec) if _searches(spec) else self.plan(spec, steps)
            run_id = self.run_dir.run_id
            done = sum(1 for s in steps if self.run_dir.is_done(s))
            self.log(f"resuming run {run_id}: {done}/{len(steps)} steps already done")
        else:
            assert self.opts.spec_path is not None
            plan = self.plan(spec)
            if _searches(spec):
                self._search_plan(spec, plan)  # budget problems before the cluster changes
            # one name for the run and its dir: a given --results-dir names the run
            run_id = (self.opts.results_dir.name if self.opts.results_dir is not None
                      else make_run_id(self.opts.spec_path))
            path = self.opts.results_dir or Path("results") / run_id
            self.run_dir = RunDir.create(
                path, run_id, self.opts.spec_path, spec_text, spec.resolved(),
                [] if _searches(spec) else plan.steps,
                meta={"restart_options": sorted(plan.restart_options),
                      "estimated_seconds": plan.estimated_seconds})
            if _searches(spec):
                self.log(f"run {run_id}: results in {path}")
                for line in live_search.expected(self._search_plan(spec, plan)):
                    self.log(line)
            else:
                self.log(f"run {run_id}: {len(plan.steps)} steps, {plan.restarts} OSD "
                         f"restart(s), estimated {format_duration(plan.estimated_seconds)}; "
                         f"results in {path}")
        return self._execute(spec, plan, run_id)

    def _refuse_untrusted_names(self) -> None:
        """Before anything is run on a host or changed on the cluster: every OSD host and
        device name in `osd metadata` must be a plain host / kernel device name. An OSD
        reports what its host (a container's NODE_NAME) says; such a name becomes an ssh
        destination and a path root writes to, so a cluster reporting anything else is
        refused, naming the OSD and the name. A dry run without a reachable cluster has no
        metadata to check (and runs nothing on OSD hosts)."""
        if self.cli is None:
            return
        try:
            metadata = self.cli.command("osd metadata")
        except CephError:
            if self.opts.dry_run:
                return
            raise
        problems = metadata_problems(metadata if isinstance(metadata, list) else [])
        if problems:
            self.cli.close()
            close_clients(self.clients, self.ssh_control_dir)
            raise SweepError("refusing the cluster's osd metadata (nothing was run on any "
                             "host or changed on the cluster): " + "; ".join(problems))

    def _restarting_osds(self) -> list[int]:
        if self.run_dir is None:
            return []
        return list(self.run_dir.read_state().get("restarting_osds") or [])

    def _record_restarting_osds(self, osd_ids: list[int]) -> None:
        if self.run_dir is not None:
            self.run_dir.update_state(restarting_osds=osd_ids)

    def _resume_restart(self) -> None:
        """A restart the killed run did not see through may have left OSDs stopped (killed
        between their stop and start): restart them again and wait as for any restart."""
        pending = self.restart_journal.pending()
        if not pending:
            return
        assert self.config is not None
        names = ", ".join(f"osd.{i}" for i in pending)
        them = "it" if len(pending) == 1 else "them"
        self.log(f"a restart of {names} was interrupted by the previous run: restarting {them}")
        try:
            self.config.restarter.restart_osds(pending)
        except CephError as exc:
            if self.cli is not None:
                self.cli.close()
            close_clients(self.clients, self.ssh_control_dir)
            raise SweepError(f"a restart of {names} was interrupted by the previous run and "
                             f"restarting {them} again failed: {exc}; start {them} and run "
                             f"--resume again") from exc

    def _execute(self, spec: Spec, plan: Plan, run_id: str) -> int:
        assert self.run_dir is not None and self.config is not None and self.cli is not None
        rd = self.run_dir
        baseline = load_baseline(self.opts.baseline_dir) if self.opts.baseline_dir else {}
        labels = axis_labels(plan.steps)
        self.metrics = PhaseMetrics(run_id, str(spec.path), labels, list(spec.benchmarks),
                                    len(plan.steps),
                                    baseline_run=(rd_run_id(self.opts.baseline_dir)
                                                  if self.opts.baseline_dir else None))
        if self.opts.metrics_port is not None:
            self.server = MetricsServer(self.metrics, self.opts.metrics_port)
            self.server.start()
            self.log(f"runner metrics on http://127.0.0.1:{self.server.port}/metrics")
        if self.opts.grafana_url:
            self.annotator = GrafanaAnnotator(self.opts.grafana_url, self.opts.grafana_token,
                                              dashboard_uid=self.opts.grafana_dashboard_uid,
                                              log=self.log)
        interrupted = False
        lost: ClusterLost | None = None
        ran_steps = False
        try:
            with _signals_handled(_raise_interrupted):
                saved = rd.read_pre_sweep_config()
                if saved is not None:
                    self.snapshot = ConfigSnapshot.from_dict(saved)
                elif spec.ceph_config:
                    self.snapshot = self.config.snapshot(spec.ceph_config)
                    rd.write_pre_sweep_config(self.snapshot.to_dict())
                if rd.read_environment() is None and self.target is not None \
                        and self.host_knobs is not None:
                    rd.write_environment(capture_environment(
                        self.cli, self.host_for, self.target.osd_asok,
                        self.host_knobs.devices, self.client_hosts))
                self._read_ceph_version()
                if self.hygiene is not None:
                    self.hygiene.metrics = self.metrics
                    flags = self.hygiene.start_run(list(rd.read_state().get("scrub_flags_set", [])))
                    rd.update_state(scrub_flags_set=flags)
                self.knob_snapshot = rd.read_pre_sweep_knobs()
                if self.knob_snapshot is None and knob_values(spec):
                    assert self.host_knobs is not None
                    self.knob_snapshot = self.host_knobs.snapshot(knob_values(spec))
                    rd.write_pre_sweep_knobs(self.knob_snapshot)
                state = rd.read_state()
                self.pools = PoolManager(
                    self.cli, log=self.log,
                    created=list(state.get("created_pools", [])),
                    erasure_profiles_created=list(state.get("created_erasure_profiles", [])),
                    record=lambda p, e: rd.update_state(created_pools=p,
                                                        created_erasure_profiles=e))
                self.touched_cluster = True
                ran_steps = True
                if self.hygiene is not None and "idle_baseline" not in rd.read_state():
                    if self.opts.metrics_port is None and not self.opts.prometheus_url:
                        self.log("idle baseline skipped: no --metrics-port or --prometheus-url "
                                 "records it")
                    else:
                        idle: dict[str, Any] = {}
                        self.hygiene.idle_baseline(idle, spec.idle_baseline_seconds)
                        rd.update_state(idle_baseline=idle.get("idle_baseline"))
                if self.hygiene is not None:
                    self.hygiene.options = self._resolved_quiet_gap(self.hygiene.options)
                self._run_steps(spec, plan, baseline)
        except Interrupted:
            interrupted = True
            self.log(f"interrupted: restoring the cluster's pre-sweep state (at most "
                     f"{self.opts.restore_timeout_seconds:g} s; again to stop at once)")
        except ClusterLost as exc:
            lost = exc
            self.log(f"the cluster is lost: {exc}; stopping the run, restoring what can be "
                     f"(at most {self.opts.cluster_timeout_seconds:g} s)")
        except CephError as exc:
            if not cluster_lost(exc):
                raise
            lost = ClusterLost(str(exc))
            self.log(f"the cluster is lost: {exc}; stopping the run, restoring what can be "
                     f"(at most {self.opts.cluster_timeout_seconds:g} s)")
        finally:
            # after a signal or a lost cluster the restore is bounded; else it runs to its end
            # unless a signal comes (then bounded from there; a second one stops it at once)
            budget = (self.opts.restore_timeout_seconds if interrupted
                      else self.opts.cluster_timeout_seconds if lost is not None else None)
            finished = self._restore_bounded(plan, budget)
        if self.unrestored:
            rd.update_state(unrestored=list(self.unrestored))
            self.log(f"error: left unrestored: {', '.join(self.unrestored)}; the run dir "
                     f"{rd.path} keeps it: `cephscope sweep --resume {rd.path}` restores it "
                     f"once the cluster answers")
        elif rd.read_state().get("unrestored"):
            rd.update_state(unrestored=[])
        if lost is not None:
            done = sum(1 for s in plan.steps if rd.is_done(s))
            raise SweepError(f"run {run_id} stopped, the cluster is lost: {lost} "
                             f"({done}/{len(plan.steps)} steps done; results and journal in "
                             f"{rd.path}; continue with --resume {rd.path})")
        if interrupted or not finished:
            return 130
        steps = rd.steps() if _searches(spec) else plan.steps
        done = sum(1 for s in steps if rd.is_done(s))
        self.log(f"run {run_id}: {done}/{len(steps)} steps done, "
                 f"{len(self.failed)} failed; summary: {rd.path / 'summary.csv'}")
        if ran_steps and self.server is not None and self.opts.metrics_linger_seconds > 0:
            # Let Prometheus scrape the last end timestamp.
            time.sleep(self.opts.metrics_linger_seconds)
        return 1 if self.failed else 0

    def _restore_bounded(self, plan: Plan, budget: float | None) -> bool:
        """`_finish` in a worker thread; the main thread waits in short slices, so it still
        takes signals. With a `budget` (seconds), every call to the cluster shares that
        deadline and the wait ends after it (plus a grace for the last call). Without one,
        the first signal sets the budget from then; a second signal (or a first one when a
        budget is set) stops waiting at once. False when the restore did not finish: what it
        had left is in `self.unrestored`."""
        self.unrestored = self._restore_items()
        done = threading.Event()
        failure: list[BaseException] = []

        def work() -> None:
            try:
                self._finish(plan)
            except BaseException as exc:  # handed to the main thread below
                failure.append(exc)
            finally:
                done.set()

        def limit(seconds: float) -> float:
            if self.cli is not None:
                self.cli.limit_to(seconds)
            return time.monotonic() + seconds + self.opts.restore_grace_seconds

        deadline = limit(budget) if budget is not None else None
        worker = threading.Thread(target=work, name="restore", daemon=True)
        with _signals_handled(_raise_interrupted):
            worker.start()
            while True:
                try:
                    if done.wait(WAIT_SLICE_SECONDS):
                        break
                except Interrupted:
                    if deadline is not None:
                        self.log("interrupted again: stopping now, not waiting for the restore")
                        return False
                    budget = self.opts.restore_timeout_seconds
                    self.log(f"interrupted: finishing the restore within {budget:g} s "
                             f"(again to stop at once)")
                    deadline = limit(budget)
                if deadline is not None and time.monotonic() > deadline:
                    self.log(f"error: the restore did not finish within {budget:g} s")
                    return False
        if failure:
            raise failure[0]
        return True

    def _restore_items(self) -> list[str]:
        """What `_finish` has to put back on the cluster, by name."""
        items = []
        if self.pending_cleanup is not None:
            items.append("the interrupted step's benchmark objects")
        if self.touched_cluster:
            if self.snapshot is not None:
                items.append("ceph config (pre-sweep values of "
                             f"{', '.join(sorted(self.snapshot.db)) or 'the swept options'})")
            if self.knob_snapshot and self.host_knobs is not None:
                items.append("host settings")
            if self.pools is not None and not self.opts.keep_pools and self.pools.created:
                items.append(f"pools created by the run ({', '.join(self.pools.created)})")
            if self.run_dir is not None and self.run_dir.read_state().get("recovery_osds"):
                items.append("the recovery test's OSDs (in, noup off)")
            if self.hygiene is not None and self.hygiene.flags_set:
                items.append(f"OSD flags ({', '.join(self.hygiene.flags_set)})")
        return items

    def _restored(self, prefix: str, restore: Callable[[], list[str]]) -> list[str]:
        """The problems of `restore()` (one that raised is one problem: the restore goes on
        with the next item); the item named by `prefix` is done when there are none."""
        try:
            problems = restore()
        except (CephError, KnobError, BenchmarkError, OSError, ValueError) as exc:
            problems = [f"restore {prefix}: {exc}"]
        if not problems:
            self.unrestored = [i for i in self.unrestored if not i.startswith(prefix)]
        return problems

    def _finish(self, plan: Plan) -> None:
        assert self.run_dir is not None and self.config is not None
        if self.metrics is not None:
            self.metrics.end_step(time.time())
        problems: list[str] = []
        if self.pending_cleanup is not None:
            cleanup, self.pending_cleanup = self.pending_cleanup, None
            problems += self._restored("the interrupted step's", cleanup)
        if self.touched_cluster and self.snapshot is not None:
            snapshot = self.snapshot
            problems += self._restored("ceph config", lambda: self.config.restore(snapshot))
            if not problems:
                self.log("restored the pre-sweep ceph config")
        if self.touched_cluster and self.knob_snapshot and self.host_knobs is not None:
            knobs, saved = self.host_knobs, self.knob_snapshot
            knob_problems = self._restored("host settings", lambda: knobs.restore(saved))
            if not knob_problems:
                self.log("restored the pre-sweep host settings "
                         f"({', '.join(sorted({e['setting'] for e in self.knob_snapshot}))})")
            problems += knob_problems
        if self.touched_cluster and self.pools is not None and not self.opts.keep_pools \
                and (self.pools.created or self.pools.erasure_profiles_created):
            problems += self._restored("pools", self.pools.remove_created)
        pending = self.run_dir.read_state().get("recovery_osds") or []
        if self.touched_cluster and pending and self.cli is not None:
            # a recovery test the run did not finish (killed, now resumed): OSDs back in
            spec_recovery = RecoverySpec(tuple(pending))
            recovery_problems = self._restored(
                "the recovery test", RecoveryTest(self.cli, spec_recovery, "").undo)
            if not recovery_problems:
                self.run_dir.update_state(recovery_osds=[])
            problems += recovery_problems
        if self.touched_cluster and self.hygiene is not None and self.hygiene.flags_set:
            flags = list(self.hygiene.flags_set)
            flag_problems = self._restored("OSD flags", self.hygiene.finish_run)
            if not flag_problems:
                self.run_dir.update_state(scrub_flags_set=[])
                self.log(f"unset the run's OSD flags ({', '.join(flags)})")
            problems += flag_problems
        for p in problems:
            self.log(f"error: {p}")
        if problems:
            self.failed.append("restore")
        with contextlib.suppress(OSError, ValueError):
            self._pull_pending_system_metrics(plan.steps, final=True)
        with contextlib.suppress(OSError, ValueError):
            self.run_dir.write_summary(self.run_dir.steps() if _searches(plan.spec)
                                       else plan.steps)
        if self.cli is not None:
            self.cli.close()
        close_clients(self.clients, self.ssh_control_dir)

    # ---- a sweep across releases -----------------------------------------------------------------

    def _check_releases(self, spec: Spec) -> None:
        """Before anything changes: the release axis needs a dev cluster to rebuild, and every
        release named must be one it can run (its root filesystem built now if missing)."""
        if not spec.releases:
            return
        where = spec.where(("devcluster", "release"))
        switch = self.target.releases if self.target is not None else None
        if switch is None:
            raise SpecError([f"{where}: devcluster.release: {list(spec.releases)!r}: a sweep "
                             f"across releases rebuilds the dev cluster per release; run it "
                             f"with --devcluster STATE_DIR"])
        problems = switch.problems(spec.releases, prepare=not self.opts.dry_run)
        if problems:
            raise SpecError([f"{where}: devcluster.release: {p}" for p in problems])

    def _read_ceph_version(self) -> None:
        try:
            assert self.cli is not None
            self.ceph_version = cluster_version(self.cli)
        except CephError as exc:
            self.log(f"cannot read the cluster's version (`ceph versions`): {exc}")
            self.ceph_version = ""
        if self.metrics is not None:
            self.metrics.set_ceph_version(self.ceph_version)

    def _switch_release(self, spec: Spec, release: str) -> None:
        """Rebuild the dev cluster on `release` (same shape) and reach it afresh. What the run
        changed on the cluster it replaces (config, pools, flags) went with that cluster; the
        new one gets its own pre-sweep record and scrub flags. The last cluster is restored at
        the end as any other."""
        assert self.target is not None and self.target.releases is not None
        assert self.run_dir is not None and self.metrics is not None
        rd = self.run_dir
        self.log(f"release {release}: bringing the dev cluster to it (same shape)")
        started = time.monotonic()
        if self.cli is not None:
            self.cli.close()  # reconnected below (a lazily reopened connection if not rebuilt)
        self.metrics.set_phase("rebuild")
        try:
            target, rebuilt = self.target.releases.switch(release)
        except Exception as exc:  # the dev cluster's own error, named with the release
            raise SweepError(f"release {release}: the dev cluster could not be brought to "
                             f"it: {exc}") from exc
        finally:
            self.metrics.set_phase(None)
        self.release = release
        if not rebuilt:  # it ran that release already: the run's setup on it stands
            self.log(f"release {release}: the dev cluster runs it already")
            return
        self.opts.target = target
        self.connect(spec)
        assert self.config is not None and self.cli is not None
        self.snapshot = self.config.snapshot(spec.ceph_config) if spec.ceph_config else None
        if self.snapshot is not None:
            rd.write_pre_sweep_config(self.snapshot.to_dict())
        if self.hygiene is not None:
            self.hygiene.metrics = self.metrics
            rd.update_state(scrub_flags_set=self.hygiene.start_run([]))
        self.pools = PoolManager(
            self.cli, log=self.log, created=[], erasure_profiles_created=[],
            record=lambda p, e: rd.update_state(created_pools=p, created_erasure_profiles=e))
        rd.update_state(created_pools=[], created_erasure_profiles=[], release=release)
        self._read_ceph_version()
        self.log(f"release {release}: ceph {self.ceph_version or '(version unknown)'}, ready in "
                 f"{time.monotonic() - started:.0f}s")

    def _search_plan(self, spec: Spec, plan: Plan) -> live_search.LivePlan:
        try:
            return live_search.make_plan(
                plan.steps, plan.restart_options, spec.search, spec.iterations, spec.adaptive,
                {n: p.to_dict() for n, p in spec.pool_profiles.items()})
        except live_search.SearchPlanError as exc:
            raise SpecError([f"{spec.where(('search',))}: {exc}"]) from exc

    def _run_search(self, spec: Spec, plan: Plan, baseline: Mapping[str, Any]) -> None:
        """Adaptive repetition or a search: steps are decided as results come in."""
        assert self.run_dir is not None and self.metrics is not None
        rd = self.run_dir
        splan = self._search_plan(spec, plan)
        current = plan.current_restart_values
        start_key = (tuple(format_value(current.get(a.split(".", 1)[1])) for a, _ in
                           splan.space.axes if a in splan.space.restart_axes)
                     if current is not None else None)

        def run_step(step: Step) -> str | None:
            # numbered among the steps asked so far (the search decides how many there are)
            progress = Progress(rd.steps(), [step], self.benchmarks, tty=False, log=self.log)
            progress.start(step)
            error = self._run_one(spec, step, baseline.get(step.id), progress)
            progress.finish(step, rd.step_result(step), error)
            steps = rd.steps()
            self.metrics.set_progress(sum(1 for s in steps if rd.is_done(s)), len(self.failed))
            with contextlib.suppress(OSError, ValueError):
                rd.write_summary(steps)
            self._pull_pending_system_metrics(steps, final=False)
            if error and self.opts.stop_on_failure:
                raise SweepError(f"step {step.id} failed (--stop-on-failure)")
            return error

        live_search.run_live_search(rd, splan, run_step, start_key, self.log)
        data = live_search.load_outcome(rd)
        if data is not None:
            for line in live_search.format_outcome(data):
                self.log(line)

    def _run_steps(self, spec: Spec, plan: Plan, baseline: Mapping[str, Any]) -> None:
        assert self.run_dir is not None and self.metrics is not None
        if _searches(spec):
            self._run_search(spec, plan, baseline)
            return
        rd = self.run_dir
        todo = [s for s in plan.steps if not rd.is_done(s)]
        progress = Progress(plan.steps, todo, self.benchmarks, tty=self.opts.tty, log=self.log)
        with progress:
            for step in plan.steps:
                if rd.is_done(step):
                    continue
                if step.release is not None and step.release != self.release:
                    self._switch_release(spec, step.release)
                progress.start(step)
                error = self._run_one(spec, step, baseline.get(step.id), progress)
                done = sum(1 for s in plan.steps if rd.is_done(s))
                self.metrics.set_progress(done, len(self.failed))
                progress.finish(step, rd.step_result(step), error)
                with contextlib.suppress(OSError, ValueError):
                    rd.write_summary(plan.steps)
                self._pull_pending_system_metrics(plan.steps, final=False)
                if error and self.opts.stop_on_failure:
                    break

    def _pool_for(self, spec: Spec, step: Step) -> tuple[str, str | None]:
        """(pool, data pool or None) of the step, created when missing."""
        assert self.pools is not None
        application = self.benchmarks[step.benchmark].pool_application
        assert self.config is not None
        before = len(self.pools.created)
        if step.pool_profile:
            name = self.pools.ensure(spec.pool_profiles[step.pool_profile], application)
        else:
            default = self.opts.rbd_pool if application == "rbd" else self.opts.pool
            name = self.pools.ensure_named(default, application)
        data_pool = None
        data_profile = step.params.get("data_pool_profile")
        if data_profile:
            data_pool = self.pools.ensure(spec.pool_profiles[data_profile], application,
                                          overwrites=True)
        if len(self.pools.created) != before:
            self.config.restarter.wait_pgs_active_clean()  # a new pool's PGs must be clean first
        return name, data_pool

    def _run_one(self, spec: Spec, step: Step, baseline: Mapping[str, Any] | None,
                 progress: Progress) -> str | None:
        """Run one step; return None when done, else the error (recorded in the step dir)."""
        assert self.run_dir is not None and self.config is not None and self.cli is not None
        assert self.metrics is not None
        rd = self.run_dir
        ts: dict[str, Any] = {}
        bench: Benchmark | None = None
        ctx: BenchContext | None = None
        recovery: RecoveryTest | None = None
        samples: list[LiveSample] = []
        # a signal or a lost cluster ended the step: its cleanup waits for the bounded restore
        defer_cleanup = False
        try:
            step_dir = rd.begin_step(step)
            ts["ceph_version"] = self.ceph_version
            pool, data_pool = self._pool_for(spec, step)
            assert self.pools is not None
            ts["pools"] = self.pools.describe_pools([p for p in (pool, data_pool) if p])
            ts["config_start"] = time.time()
            report = self.config.apply(step.ceph_config)
            if step.knobs:
                assert self.host_knobs is not None
                ts["knobs"] = self.host_knobs.apply(step.knobs)
            ts["config_applied"] = time.time()
            ts["config"] = report.to_dict()
            cls = self.benchmarks[step.benchmark]
            params = dict(step.params)
            bench = cls(params)
            ctx = BenchContext(
                cluster=ClusterAccess(self.cli.conf_path, self.cli.client_name,
                                      self.cli.keyring_path,
                                      self.target.tool_prefix if self.target else ()),
                pool=pool, data_pool=data_pool, step_dir=step_dir, run_id=rd.run_id,
                step_id=step.id,
                report_progress=self._live(progress, samples),
                report_client_progress=self.metrics.live_client_sample,
                # CEPH_ARGS bounds the tools' librados calls like the runner's own
                env=bounded_env({**os.environ, "CEPH_CONF": str(self.cli.conf_path)},
                                self.opts.cluster_timeout_seconds, io=True),
                timeout_seconds=self.opts.step_timeout_seconds
                or max(600.0, 3 * cls.estimated_seconds(params)),
                clients=self.clients)
            ts["prepare_start"] = time.time()
            self.metrics.set_phase("prepare", step.id)
            bench.prepare(ctx)  # includes the RBD prefill
            self.metrics.set_phase(None)
            ts["prepared"] = time.time()
            if self.hygiene is not None:
                ts["hygiene"] = self.hygiene.before_step(step.id)
            ts["started"] = time.time()
            ts["dead_time_seconds"] = ts["started"] - ts["config_start"]
            self.metrics.start_step(step, ts["started"], ts["dead_time_seconds"], baseline)
            rd.write_timestamps(step, ts)
            if spec.recovery is not None:
                recovery = RecoveryTest(self.cli, spec.recovery, step.id, self.metrics, self.log,
                                        populate=self._recovery_populate(spec, step, ctx))
                ctx.abort = recovery.abort  # a failed recovery test stops the client at once
                self.recovery = recovery
                rd.update_state(recovery_osds=list(spec.recovery.osds))
                recovery.start()
                # background: the client waits for the backfill (timed waits: Ctrl-C works)
                while not recovery.start_io.wait(1.0):
                    pass
                if recovery.error:
                    raise CephError(recovery.error)
            results = []
            modes: dict[str, dict[str, float]] = {}
            for mode in bench.modes():
                self.metrics.set_mode(mode)
                modes[mode] = {"start": time.time()}
                files = bench.run(mode, ctx)
                modes[mode]["end"] = time.time()
                result = bench.parse(mode, ctx).to_dict()
                if self.clients:
                    names = [c.name for c in self.clients]
                    result["clients"] = {name: r.to_dict()
                                         for name, r in bench.parse_clients(mode, ctx).items()}
                    modes[mode]["clients"] = client_windows(files, names)
                    skew = start_skew(modes[mode]["clients"])
                    modes[mode]["start_skew_seconds"] = skew
                    if skew is not None:
                        self.log(f"step {step.id} {mode}: {len(names)} clients, start skew "
                                 f"{skew:.3f}s")
                results.append(result)
            if recovery is not None:
                recovery.bench_done.set()  # ends a `repeat` after its current cycle
                recovery.wait()  # the step lasts until the cluster has recovered
                ts["recovery"] = recovery.result(samples)
                rd.update_state(recovery_osds=[])
                self.recovery = None
                if recovery.error:
                    raise CephError(recovery.error)
            ts["ended"] = time.time()
            ts["modes"] = modes
            self.metrics.end_step(ts["ended"])
            if self.hygiene is not None:  # before the cleanup's deletes
                ts["hygiene_after"] = self.hygiene.after_step(step.id)
            rd.write_timestamps(step, ts)
            self._annotate(step, ts)
            self.opts.checkpoint("result_write")
            rd.finish_step(step, results, ts, report.verified)
            return None
        except Interrupted:
            defer_cleanup = True
            raise
        except (CephError, KnobError, BenchmarkError, OSError, ValueError, KeyError) as exc:
            self.metrics.set_phase(None)
            if "started" in ts and "ended" not in ts:
                ts["ended"] = time.time()
                self.metrics.end_step(ts["ended"])
            error = f"{type(exc).__name__}: {exc}"
            if recovery is not None and recovery.abort.is_set() and recovery.error:
                # the benchmark was stopped because the recovery test failed: say why
                error = f"CephError: {recovery.error} ({error})"
            self.log(f"step {step.id} failed: {error}")
            rd.fail_step(step, error, ts)
            self.failed.append(step.id)
            if cluster_lost(exc):  # no later step can do better: the run stops
                defer_cleanup = True
                raise ClusterLost(f"step {step.id}: {exc}") from exc
            return error
        finally:
            if recovery is not None and self.recovery is not None:
                if defer_cleanup:  # the restore undoes it (recovery_osds in the run's state)
                    recovery.abort.set()
                else:
                    recovery.stop()  # the step failed: OSDs back in, noup off
                self.recovery = None
            if bench is not None and ctx is not None:
                cleanup = self._bench_cleanup(step, bench, ctx)
                if defer_cleanup:
                    self.pending_cleanup = cleanup
                else:
                    for problem in cleanup():  # never hides the step's outcome
                        self.log(problem)

    def _bench_cleanup(self, step: Step, bench: Benchmark,
                       ctx: BenchContext) -> Callable[[], list[str]]:
        def cleanup() -> list[str]:
            try:
                bench.cleanup(ctx)
            except Exception as exc:  # any failure of the tool: said, never raised
                return [f"step {step.id}: benchmark cleanup failed: {exc}"]
            return []

        return cleanup

    def _recovery_populate(self, spec: Spec, step: Step,
                           ctx: BenchContext) -> Callable[[], None] | None:
        """Background recovery test: a recovery pool beside the step's, written while the OSDs
        are out (CBT's `prefill_recovery_*` pool-profile keys), for them to backfill."""
        assert spec.recovery is not None and self.pools is not None
        profile = spec.pool_profiles.get(step.pool_profile or "")
        if spec.recovery.test_type != "background" or profile is None \
                or profile.prefill_recovery_objects <= 0:
            return None
        before = len(self.pools.created)
        pool = self.pools.ensure(dataclasses.replace(profile, name=f"{profile.name}-recovery"))
        if len(self.pools.created) != before and self.config is not None:
            self.config.restarter.wait_pgs_active_clean()
        argv = [*ctx.cluster.tool_prefix, "rados", *ctx.cluster.common_args(), "-p", pool,
                "bench", "600", "write", "--no-cleanup",
                "-b", str(profile.prefill_recovery_object_size),
                "-t", str(profile.prefill_recovery_threads),
                "--max-objects", str(profile.prefill_recovery_objects)]

        def populate() -> None:
            self.log(f"recovery test: writing {profile.prefill_recovery_objects} objects of "
                     f"{profile.prefill_recovery_object_size} B to {pool}")
            try:
                done = run_quick(argv, 600, "recovery pool prefill", ctx.env)
            except BenchmarkError as exc:
                raise CephError(str(exc)) from exc
            if done.returncode != 0:
                raise CephError(f"recovery pool prefill ({pool}): rados exited with "
                                f"{done.returncode}: {done.stderr.strip()[-300:]}")

        return populate

    def _live(self, progress: Progress, samples: list[LiveSample] | None = None,
              ) -> Callable[[str, LiveSample], None]:
        metrics = self.metrics
        assert metrics is not None
        first_sample = [True]

        def report(mode: str, sample: LiveSample) -> None:
            if first_sample[0]:  # the step's tool runs
                first_sample[0] = False
                self.opts.checkpoint("benchmark")
            if samples is not None:
                samples.append(sample)
            metrics.live_sample(mode, sample)
            progress.live(mode, sample)

        return report

    def _annotate(self, step: Step, ts: Mapping[str, Any]) -> None:
        if self.annotator is None or self.metrics is None:
            return
        labels = self.metrics.step_info_labels(step, "")
        params = {k: v for k, v in labels.items()
                  if k not in ("run", "step", "iteration", "benchmark", "mode") and v != ""}
        tags = self.annotator.tags_for(self.metrics.run_id, step.id, step.benchmark, params)
        text = (f"cephscope step {step.id} ({step.benchmark}, iteration {step.iteration}): "
                f"{step.short_params()}")
        self.annotator.annotate(ts["started"], ts["ended"], tags, text)

    def _resolved_quiet_gap(self, options: HygieneOptions) -> HygieneOptions:
        """--quiet-gap, else one scrape interval of --prometheus-url's Prometheus (+ margin)."""
        if options.quiet_gap_seconds is not None:
            return options
        interval = (scrape_interval_seconds(self.opts.prometheus_url)
                    if self.opts.prometheus_url else None)
        gap = quiet_gap_for(interval)
        if gap:
            self.log(f"quiet gap: {gap:g}s before and after each measurement (scrape interval "
                     f"{interval:g}s)")
        return dataclasses.replace(options, quiet_gap_seconds=gap)

    def _pull_pending_system_metrics(self, steps: list[Step], final: bool) -> None:
        """Pull Prometheus data for finished steps once the scrape lag has passed."""
        if not self.opts.prometheus_url or self.run_dir is None:
            return
        rd = self.run_dir
        self._pull_idle_baseline(final)
        pending = []
        for step in steps:
            result = rd.step_result(step)
            if result is None or (rd.step_dir(step) / "prometheus.json").exists():
                continue
            pending.append((step, result["timestamps"]))
        if not pending:
            return
        if final:
            wait = max(ts["ended"] + self.opts.prometheus_lag_seconds for _, ts in pending) \
                - time.time()
            if wait > 0:
                time.sleep(wait)
        for step, ts in pending:
            if time.time() < ts["ended"] + self.opts.prometheus_lag_seconds:
                continue
            data = pull_step_window(self.opts.prometheus_url, ts["started"], ts["ended"],
                                    self.opts.prometheus_rate_window)
            rd.write_step_file(step, "prometheus.json", data)

    def _pull_idle_baseline(self, final: bool) -> None:
        """The idle baseline window's system metrics, stored once for the report."""
        assert self.run_dir is not None and self.opts.prometheus_url
        idle = self.run_dir.read_state().get("idle_baseline")
        path = self.run_dir.path / IDLE_BASELINE_FILE
        if not isinstance(idle, dict) or path.exists():
            return
        wait = idle["end"] + self.opts.prometheus_lag_seconds - time.time()
        if wait > 0 and not final:
            return
        time.sleep(max(0.0, wait))
        atomic_write_json(path, pull_step_window(self.opts.prometheus_url, idle["start"],
                                                 idle["end"], self.opts.prometheus_rate_window))


def _searches(spec: Spec) -> bool:
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


def rd_run_id(path: Path | None) -> str | None:
    if path is None:
        return None
    try:
        return RunDir(path).run_id
    except (ResultsError, KeyError):
        return path.name


def format_duration(seconds: float) -> str:
    total = round(seconds)
    h, rem = divmod(total, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else (f"{m}m{s:02d}s" if m else f"{s}s")


@contextlib.contextmanager
def _signals_handled(handler: Callable[[int, Any], None]) -> Iterator[None]:
    """SIGTERM and SIGINT go to `handler` inside the block (main thread only: elsewhere Python
    cannot install handlers, and the defaults stay)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def _raise_interrupted(signum: int, frame: Any) -> None:
    """Make Ctrl-C/SIGTERM raise Interrupted (so `finally` restores the cluster)."""
    raise Interrupted(signal.Signals(signum).name)


class Progress:
    """rich progress bar + table of finished steps on a TTY; plain lines otherwise."""

    def __init__(self, steps: list[Step], todo: list[Step],
                 benchmarks: Mapping[str, type[Benchmark]], tty: bool | None, log: Log) -> None:
        self.steps = steps
        self.todo = todo
        self.benchmarks = benchmarks
        self.tty = sys.stdout.isatty() if tty is None else tty
        self.log = log
        self.index = {s.id: i for i, s in enumerate(steps, 1)}
        self.finished_rows: list[tuple[str, ...]] = []
        self._progress: Any = None
        self._task: Any = None
        self._last_live = 0.0

    def _estimate(self, step: Step) -> float:
        return max(1.0, self.benchmarks[step.benchmark].estimated_seconds(step.params))

    def __enter__(self) -> Progress:
        if self.tty:
            from rich.progress import (
                BarColumn,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )
            from rich.progress import Progress as RichProgress

            self._progress = RichProgress(
                TextColumn("[bold]{task.fields[label]}"), BarColumn(),
                TextColumn("{task.fields[params]}"), TimeElapsedColumn(), TimeRemainingColumn())
            self._progress.start()
            total = sum(self._estimate(s) for s in self.todo)
            self._task = self._progress.add_task("sweep", total=total, label="", params="")
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._progress is not None:
            self._progress.stop()
            if self.finished_rows:
                from rich.console import Console
                from rich.table import Table

                table = Table(title="finished steps")
                for col in ("#", "step", "params", "mode", "IOPS", "MiB/s", "lat avg ms",
                            "status"):
                    table.add_column(col)
                for row in self.finished_rows:
                    table.add_row(*row)
                Console().print(table)

    def start(self, step: Step) -> None:
        label = f"step {self.index[step.id]}/{len(self.steps)} {step.id}"
        if self._progress is not None:
            self._progress.update(self._task, label=label, params=step.short_params())
        else:
            self.log(f"{label} {step.benchmark} {step.short_params()}: starting")

    def live(self, mode: str, sample: LiveSample) -> None:
        if self._progress is None or sample.ops_per_second is None:
            return
        now = time.monotonic()
        if now - self._last_live >= 1.0:
            self._last_live = now
            self._progress.update(self._task, params=f"{mode} {sample.ops_per_second:.0f} op/s")

    def finish(self, step: Step, result: Mapping[str, Any] | None, error: str | None) -> None:
        n = str(self.index[step.id])
        rows = []
        for r in (result or {}).get("results", []):
            lat = r.get("latency_avg_seconds")
            rows.append((n, step.id, step.short_params(), str(r.get("mode")),
                         f"{r.get('iops', 0):.0f}",
                         f"{(r.get('bandwidth_bytes_per_second') or 0) / 2**20:.1f}",
                         f"{lat * 1000:.2f}" if lat is not None else "-", "done"))
        if error:
            rows.append((n, step.id, step.short_params(), "-", "-", "-", "-",
                         f"FAILED: {error[:60]}"))
        self.finished_rows += rows
        if self._progress is not None:
            self._progress.advance(self._task, self._estimate(step))
        else:
            for row in rows:
                self.log(f"step {row[0]}/{len(self.steps)} {row[1]} {row[2]} mode={row[3]} "
                         f"iops={row[4]} MiB/s={row[5]} lat_avg_ms={row[6]} {row[7]}")
