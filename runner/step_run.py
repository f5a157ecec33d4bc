"""One step of a sweep, start to end: its pools, config and host knobs applied, the benchmark
prepared, run per mode, parsed and cleaned up, the background recovery test beside it, run
hygiene and the quiet gaps around it, live client samples, the step's Prometheus phase and
Grafana annotation, and its result in the run dir."""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cephscope.monclient import bounded_env
from cephscope.runner.annotations import GrafanaAnnotator
from cephscope.runner.benchmarks.base import (
    BenchContext,
    Benchmark,
    BenchmarkError,
    ClusterAccess,
    LiveSample,
)
from cephscope.runner.benchmarks.radosbench import prefill_argv
from cephscope.runner.cephclient import CephError, ClusterLost, cluster_lost
from cephscope.runner.clients import client_windows, start_skew
from cephscope.runner.endpoints.undo import UndoLog
from cephscope.runner.hostexec import HostExec, HostExecError, LocalHost
from cephscope.runner.knobs.base import KnobError
from cephscope.runner.options import SweepOptions
from cephscope.runner.phase_metrics import PhaseMetrics
from cephscope.runner.pools import PoolManager
from cephscope.runner.progress import Progress
from cephscope.runner.recovery import RecoveryTest
from cephscope.runner.results import RunDir
from cephscope.runner.rgw_endpoint import RgwEndpoint
from cephscope.runner.signals import Interrupted
from cephscope.runner.spec import Spec
from cephscope.runner.steps import Step
from cephscope.runner.wiring import ClusterParts

Log = Callable[[str], None]
# the recovery prefill's `rados bench` time limit (it ends at --max-objects well before)
PREFILL_SECONDS = 600


@dataclass
class StepRunner:
    """Runs steps on one cluster (a release rebuild makes a new one). `pending_cleanup`: a
    step's benchmark cleanup a signal or a lost cluster deferred to the (bounded) restore;
    `recovery`: the recovery test under way."""
    spec: Spec
    opts: SweepOptions
    benchmarks: Mapping[str, type[Benchmark]]
    run_dir: RunDir
    cluster: ClusterParts
    clients: list[HostExec]
    tool_prefix: tuple[str, ...]
    metrics: PhaseMetrics
    pools: PoolManager
    log: Log
    failed: list[str]
    annotator: GrafanaAnnotator | None = None
    ceph_version: str = ""
    # runs the recovery prefill (this machine, as the benchmarks' own helper commands)
    prefill_host: HostExec = field(default_factory=LocalHost)
    pending_cleanup: Callable[[], list[str]] | None = None
    recovery: RecoveryTest | None = None
    # the gateway the RGW benchmarks drive (runner/rgw_endpoint.py)
    rgw: RgwEndpoint | None = None

    def pool_for(self, step: Step) -> tuple[str, str | None]:
        """(pool, data pool or None) of the step, created when missing; ("", None) for a step
        that runs on no pool of its own (e.g. CephFS endpoints on the filesystem's pools)."""
        spec = self.spec
        cls = self.benchmarks[step.benchmark]
        if not cls.needs_pool(step.params):
            return "", None
        application = cls.application(step.params)
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
            # a new pool's PGs must be clean first
            self.cluster.config.restarter.wait_pgs_active_clean()
        return name, data_pool

    def ensure_pool(self, profile: str, application: str, role: str = "") -> str:
        """The run's pool for a profile (`role`: a second pool of the same profile, named
        after it), its PGs clean when it is new."""
        made = self.spec.pool_profiles[profile]
        if role:
            made = dataclasses.replace(made, name=f"{made.name}-{role}")
        before = len(self.pools.created)
        name = self.pools.ensure(made, application)
        if len(self.pools.created) != before:
            self.cluster.config.restarter.wait_pgs_active_clean()
        return name

    def endpoint_changes(self) -> UndoLog:
        """The run's journal of client endpoints' changes (mounts, CephFS pools)."""
        rd = self.run_dir
        return UndoLog(load=lambda: list(rd.journal().endpoints),
                       store=lambda entries: rd.record(endpoints=entries))

    def run_one(self, step: Step, baseline: Mapping[str, Any] | None,
                progress: Progress) -> str | None:
        """Run one step; return None when done, else the error (recorded in the step dir)."""
        rd, spec, metrics = self.run_dir, self.spec, self.metrics
        cli, config = self.cluster.cli, self.cluster.config
        host_knobs, hygiene = self.cluster.host_knobs, self.cluster.hygiene
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
            pool, data_pool = self.pool_for(step)
            ts["pools"] = self.pools.describe_pools([p for p in (pool, data_pool) if p])
            ts["config_start"] = time.time()
            report = config.apply(step.ceph_config)
            if step.knobs:
                if host_knobs is None:
                    raise KnobError("host knobs need a host to apply them on")
                ts["knobs"] = host_knobs.apply(step.knobs)
            ts["config_applied"] = time.time()
            ts["config"] = report.to_dict()
            cls = self.benchmarks[step.benchmark]
            params = dict(step.params)
            bench = cls(params)
            ctx = BenchContext(
                cluster=ClusterAccess(cli.conf_path, cli.client_name, cli.keyring_path,
                                      self.tool_prefix),
                pool=pool, data_pool=data_pool, step_dir=step_dir, run_id=rd.run_id,
                step_id=step.id,
                report_progress=self.live(progress, samples),
                report_client_progress=metrics.live_client_sample,
                # CEPH_ARGS bounds the tools' librados calls like the runner's own
                env=bounded_env({**os.environ, "CEPH_CONF": str(cli.conf_path)},
                                self.opts.cluster_timeout_seconds, io=True),
                timeout_seconds=self.opts.step_timeout_seconds
                or max(600.0, 3 * cls.estimated_seconds(params)),
                clients=self.clients, ceph=cli.command, ensure_pool=self.ensure_pool,
                undo=self.endpoint_changes(), log=self.log, rgw=self.rgw)
            ts["prepare_start"] = time.time()
            metrics.set_phase("prepare", step.id)
            bench.prepare(ctx)  # includes the RBD prefill
            if bench.has_precondition:  # CBT's precondition workload: a phase of its own
                metrics.set_phase("precondition", step.id)
                bench.precondition(ctx)
                ts["preconditioned"] = time.time()
            metrics.set_phase(None)
            ts["prepared"] = time.time()
            if hygiene is not None:
                ts["hygiene"] = hygiene.before_step(step.id)
            ts["started"] = time.time()
            ts["dead_time_seconds"] = ts["started"] - ts["config_start"]
            metrics.start_step(step, ts["started"], ts["dead_time_seconds"], baseline)
            rd.write_timestamps(step, ts)
            if spec.recovery is not None:
                recovery = RecoveryTest(cli, spec.recovery, step.id, metrics, self.log,
                                        populate=self.recovery_populate(step, ctx))
                ctx.abort = recovery.abort  # a failed recovery test stops the client at once
                self.recovery = recovery
                rd.record(recovery_osds=list(spec.recovery.osds))
                recovery.start()
                # background: the client waits for the backfill (timed waits: Ctrl-C works)
                while not recovery.start_io.wait(1.0):
                    pass
                if recovery.error:
                    raise CephError(recovery.error)
            results = []
            modes: dict[str, dict[str, Any]] = {}
            for mode in bench.modes():
                metrics.set_mode(mode)
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
                rd.record(recovery_osds=[])
                self.recovery = None
                if recovery.error:
                    raise CephError(recovery.error)
            ts["ended"] = time.time()
            ts["modes"] = modes
            metrics.end_step(ts["ended"])
            if hygiene is not None:  # before the cleanup's deletes
                ts["hygiene_after"] = hygiene.after_step(step.id)
            rd.write_timestamps(step, ts)
            self.annotate(step, ts)
            self.opts.checkpoint("result_write")
            rd.finish_step(step, results, ts, report.verified)
            return None
        except Interrupted:
            defer_cleanup = True
            raise
        except (CephError, KnobError, BenchmarkError, OSError, ValueError, KeyError) as exc:
            metrics.set_phase(None)
            if "started" in ts and "ended" not in ts:
                ts["ended"] = time.time()
                metrics.end_step(ts["ended"])
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
                cleanup = bench_cleanup(step, bench, ctx)
                if defer_cleanup:
                    self.pending_cleanup = cleanup
                else:
                    for problem in cleanup():  # never hides the step's outcome
                        self.log(problem)

    def recovery_populate(self, step: Step, ctx: BenchContext) -> Callable[[], None] | None:
        """Background recovery test: a recovery pool beside the step's, written while the OSDs
        are out (CBT's `prefill_recovery_*` pool-profile keys), for them to backfill."""
        recovery = self.spec.recovery
        profile = self.spec.pool_profiles.get(step.pool_profile or "")
        if recovery is None or recovery.test_type != "background" or profile is None \
                or profile.prefill_recovery_objects <= 0:
            return None
        before = len(self.pools.created)
        pool = self.pools.ensure(dataclasses.replace(profile, name=f"{profile.name}-recovery"))
        if len(self.pools.created) != before:
            self.cluster.config.restarter.wait_pgs_active_clean()
        argv = prefill_argv(ctx.cluster, pool, object_size=profile.prefill_recovery_object_size,
                            threads=profile.prefill_recovery_threads,
                            max_objects=profile.prefill_recovery_objects,
                            seconds=PREFILL_SECONDS)
        # only what the step's environment adds (CEPH_CONF, CEPH_ARGS): the rest is inherited
        env = {k: v for k, v in ctx.env.items() if os.environ.get(k) != v}
        host = self.prefill_host

        def populate() -> None:
            self.log(f"recovery test: writing {profile.prefill_recovery_objects} objects of "
                     f"{profile.prefill_recovery_object_size} B to {pool}")
            try:
                done = host.run(argv, timeout=PREFILL_SECONDS, check=False, env=env)
            except HostExecError as exc:
                raise CephError(f"recovery pool prefill ({pool}): {exc}") from exc
            if done.returncode != 0:
                stderr = done.stderr.decode(errors="replace")
                raise CephError(f"recovery pool prefill ({pool}): rados exited with "
                                f"{done.returncode}: {stderr.strip()[-300:]}")

        return populate

    def live(self, progress: Progress, samples: list[LiveSample] | None = None,
             ) -> Callable[[str, LiveSample], None]:
        metrics = self.metrics
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

    def annotate(self, step: Step, ts: Mapping[str, Any]) -> None:
        if self.annotator is None:
            return
        labels = self.metrics.step_info_labels(step, "")
        params = {k: v for k, v in labels.items()
                  if k not in ("run", "step", "iteration", "benchmark", "mode") and v != ""}
        tags = self.annotator.tags_for(self.metrics.run_id, step.id, step.benchmark, params)
        text = (f"cephscope step {step.id} ({step.benchmark}, iteration {step.iteration}): "
                f"{step.short_params()}")
        self.annotator.annotate(ts["started"], ts["ended"], tags, text)


def bench_cleanup(step: Step, bench: Benchmark, ctx: BenchContext) -> Callable[[], list[str]]:
    def cleanup() -> list[str]:
        try:
            bench.cleanup(ctx)
        except Exception as exc:  # any failure of the tool: said, never raised
            return [f"step {step.id}: benchmark cleanup failed: {exc}"]
        return []

    return cleanup
