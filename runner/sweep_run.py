"""A sweep's run once its run dir exists: what it changed recorded before it changes it, the
steps run in order (or as a search decides them, across releases when asked), and the cluster
restored in `finally` whatever happened (a signal, a lost cluster)."""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cephscope.runner.annotations import GrafanaAnnotator
from cephscope.runner.benchmarks.base import Benchmark
from cephscope.runner.cephclient import (
    CephError,
    CephTarget,
    ClusterLost,
    cluster_lost,
    cluster_version,
)
from cephscope.runner.clients import close_clients
from cephscope.runner.environment import capture as capture_environment
from cephscope.runner.hostexec import HostExec, LocalHost
from cephscope.runner.hygiene import HygieneOptions, quiet_gap_for
from cephscope.runner.knobs.ceph_config import ConfigSnapshot
from cephscope.runner.options import SweepOptions
from cephscope.runner.phase_metrics import MetricsServer, PhaseMetrics
from cephscope.runner.planning import Plan, knob_values, searches
from cephscope.runner.pools import PoolManager
from cephscope.runner.progress import Progress
from cephscope.runner.release_switch import ReleaseSwitchError, switch_release
from cephscope.runner.restore import ClusterChanges, Restore
from cephscope.runner.results import RunDir, load_baseline, rd_run_id
from cephscope.runner.search.driver import run_search
from cephscope.runner.signals import Interrupted, interrupts_raised
from cephscope.runner.spec import Spec
from cephscope.runner.step_run import StepRunner
from cephscope.runner.steps import Step, axis_labels
from cephscope.runner.system_metrics import scrape_interval_seconds
from cephscope.runner.window_pulls import WindowPulls
from cephscope.runner.wiring import ClusterParts, Collaborators

Log = Callable[[str], None]
# (spec, target) -> collaborators: the sweep's wiring for a rebuilt cluster
Rewire = Callable[[Spec, CephTarget], Collaborators]


class SweepError(RuntimeError):
    """The sweep cannot go on (said to the user as it is)."""


def endpoint_host_for(parts: Collaborators) -> Callable[[str], HostExec]:
    """A client by the name a client endpoint's journal entry gives it ("local": here)."""
    by_name = {c.name: c for c in parts.clients}

    def host_for(name: str) -> HostExec:
        if name == "local":
            return LocalHost()
        return by_name.get(name) or parts.host_for(name)

    return host_for


@dataclass
class Running:
    """The run under way on one cluster (a release rebuild replaces `parts`, `runner` and
    `changes`)."""
    rd: RunDir
    parts: Collaborators
    metrics: PhaseMetrics
    runner: StepRunner
    changes: ClusterChanges



@dataclass
class SweepRun:
    """Runs the planned steps in `rd`; `failed` collects failed step ids (and "restore")."""
    opts: SweepOptions
    benchmarks: Mapping[str, type[Benchmark]]
    rewire: Rewire
    log: Log
    failed: list[str] = field(default_factory=list)
    release: str | None = None  # the release the cluster was rebuilt on by this run
    ceph_version: str = ""  # what the cluster's daemons report (`ceph versions`)

    def _step_runner(self, spec: Spec, rd: RunDir, parts: Collaborators, cluster: ClusterParts,
                     metrics: PhaseMetrics, annotator: GrafanaAnnotator | None,
                     created: tuple[list[str], list[str]]) -> StepRunner:
        pools = PoolManager(cluster.cli, log=self.log, created=created[0],
                            erasure_profiles_created=created[1],
                            record=lambda p, e: rd.record(created_pools=p,
                                                          created_erasure_profiles=e))
        return StepRunner(spec, self.opts, self.benchmarks, rd, cluster, parts.clients,
                          parts.target.tool_prefix, metrics, pools, self.log, self.failed,
                          annotator, rgw=parts.rgw)

    def execute(self, spec: Spec, plan: Plan, rd: RunDir, parts: Collaborators,
                 cluster: ClusterParts) -> int:
        o, run_id = self.opts, rd.run_id
        baseline = load_baseline(o.baseline_dir) if o.baseline_dir else {}
        metrics = PhaseMetrics(run_id, str(spec.path), axis_labels(plan.steps),
                               list(spec.benchmarks), len(plan.steps),
                               baseline_run=rd_run_id(o.baseline_dir))
        server = None
        if o.metrics_port is not None:
            server = MetricsServer(metrics, o.metrics_port)
            server.start()
            self.log(f"runner metrics on http://127.0.0.1:{server.port}/metrics")
        annotator = (GrafanaAnnotator(o.grafana_url, o.grafana_token,
                                      dashboard_uid=o.grafana_dashboard_uid, log=self.log)
                     if o.grafana_url else None)
        journal = rd.journal()
        runner = self._step_runner(spec, rd, parts, cluster, metrics, annotator,
                                   (list(journal.created_pools),
                                    list(journal.created_erasure_profiles)))
        run = Running(rd, parts, metrics, runner, ClusterChanges(cluster, pools=runner.pools))
        interrupted = False
        lost: ClusterLost | None = None
        ran_steps = False
        try:
            with interrupts_raised():
                changes, hygiene, host_knobs = run.changes, cluster.hygiene, cluster.host_knobs
                saved = rd.read_pre_sweep_config()
                if saved is not None:
                    changes.config_snapshot = ConfigSnapshot.from_dict(saved)
                elif spec.ceph_config:
                    changes.config_snapshot = cluster.config.snapshot(spec.ceph_config)
                    rd.write_pre_sweep_config(changes.config_snapshot.to_dict())
                if rd.read_environment() is None and host_knobs is not None:
                    environment = capture_environment(
                        cluster.cli, parts.host_for, parts.target.osd_asok,
                        host_knobs.devices, parts.client_hosts)
                    if any(self.benchmarks[name].rgw_api for name in spec.benchmarks):
                        environment["rgw"] = parts.rgw.describe()  # keys redacted
                    rd.write_environment(environment)
                self._read_ceph_version(run)
                if hygiene is not None:
                    hygiene.metrics = metrics
                    flags = hygiene.start_run(list(rd.journal().scrub_flags_set))
                    rd.record(scrub_flags_set=flags)
                changes.knob_snapshot = rd.read_pre_sweep_knobs()
                if changes.knob_snapshot is None and knob_values(spec) and host_knobs is not None:
                    changes.knob_snapshot = host_knobs.snapshot(knob_values(spec))
                    rd.write_pre_sweep_knobs(changes.knob_snapshot)
                changes.touched = ran_steps = True
                if hygiene is not None and not rd.journal().idle_baseline_taken:
                    if o.metrics_port is None and not o.prometheus_url:
                        self.log("idle baseline skipped: no --metrics-port or --prometheus-url "
                                 "records it")
                    else:
                        idle: dict[str, Any] = {}
                        hygiene.idle_baseline(idle, spec.idle_baseline_seconds)
                        rd.record(idle_baseline=idle.get("idle_baseline"))
                if hygiene is not None:
                    hygiene.options = self._resolved_quiet_gap(hygiene.options)
                self._run_steps(spec, plan, baseline, run)
        except Interrupted:
            interrupted = True
            self.log(f"interrupted: restoring the cluster's pre-sweep state (at most "
                     f"{o.restore_timeout_seconds:g} s; again to stop at once)")
        except CephError as exc:  # ClusterLost is one
            if not cluster_lost(exc):
                raise
            lost = exc if isinstance(exc, ClusterLost) else ClusterLost(str(exc))
            self.log(f"the cluster is lost: {exc}; stopping the run, restoring what can be "
                     f"(at most {o.cluster_timeout_seconds:g} s)")
        finally:
            # after a signal or a lost cluster the restore is bounded; else it runs to its end
            # unless a signal comes (then bounded from there; a second one stops it at once)
            budget = (o.restore_timeout_seconds if interrupted
                      else o.cluster_timeout_seconds if lost is not None else None)
            restore = self._restore(spec, plan, run)
            finished = restore.bounded(budget)
        if restore.unrestored:
            rd.record(unrestored=list(restore.unrestored))
            self.log(f"error: left unrestored: {', '.join(restore.unrestored)}; the run dir "
                     f"{rd.path} keeps it: `cephscope sweep --resume {rd.path}` restores it "
                     f"once the cluster answers")
        elif rd.journal().unrestored:
            rd.record(unrestored=[])
        if lost is not None:
            done = sum(1 for s in plan.steps if rd.is_done(s))
            raise SweepError(f"run {run_id} stopped, the cluster is lost: {lost} "
                             f"({done}/{len(plan.steps)} steps done; results and journal in "
                             f"{rd.path}; continue with --resume {rd.path})")
        if interrupted or not finished:
            return 130
        steps = rd.steps() if searches(spec) else plan.steps
        done = sum(1 for s in steps if rd.is_done(s))
        self.log(f"run {run_id}: {done}/{len(steps)} steps done, "
                 f"{len(self.failed)} failed; summary: {rd.path / 'summary.csv'}")
        if ran_steps and server is not None and o.metrics_linger_seconds > 0:
            # Let Prometheus scrape the last end timestamp.
            time.sleep(o.metrics_linger_seconds)
        return 1 if self.failed else 0

    def _restore(self, spec: Spec, plan: Plan, run: Running) -> Restore:
        rd, parts, o = run.rd, run.parts, self.opts

        def after() -> None:  # in the restore's worker: pulls and writes are bounded too
            with contextlib.suppress(OSError, ValueError):
                self._pull(rd, plan.steps, final=True)
            with contextlib.suppress(OSError, ValueError):
                rd.write_summary(rd.steps() if searches(spec) else plan.steps)
            run.changes.cluster.cli.close()
            close_clients(parts.clients, parts.ssh_control_dir)

        return Restore(rd, run.changes, o.keep_pools, self.log, self.failed, run.metrics,
                       run.runner.pending_cleanup, after, o.restore_timeout_seconds,
                       o.restore_grace_seconds, host_for=endpoint_host_for(parts))

    def _pull(self, rd: RunDir, steps: list[Step], final: bool) -> None:
        o = self.opts
        if o.prometheus_url:
            WindowPulls(o.prometheus_url, o.prometheus_rate_window,
                        o.prometheus_lag_seconds).pull_pending(rd, steps, final)

    def _resolved_quiet_gap(self, options: HygieneOptions) -> HygieneOptions:
        """--quiet-gap, else one scrape interval of --prometheus-url's Prometheus (+ margin)."""
        if options.quiet_gap_seconds is not None:
            return options
        url = self.opts.prometheus_url
        interval = scrape_interval_seconds(url) if url else None
        gap = quiet_gap_for(interval)
        if gap:
            self.log(f"quiet gap: {gap:g}s before and after each measurement (scrape interval "
                     f"{interval:g}s)")
        return dataclasses.replace(options, quiet_gap_seconds=gap)

    def _read_ceph_version(self, run: Running) -> None:
        try:
            self.ceph_version = cluster_version(run.changes.cluster.cli)
        except CephError as exc:
            self.log(f"cannot read the cluster's version (`ceph versions`): {exc}")
            self.ceph_version = ""
        run.runner.ceph_version = self.ceph_version
        run.metrics.set_ceph_version(self.ceph_version)

    def _switch_release(self, spec: Spec, release: str, run: Running) -> None:
        """Rebuild the dev cluster on `release` (same shape) and reach it afresh. What the run
        changed on the cluster it replaces (config, pools, flags) went with that cluster; the
        new one gets its own pre-sweep record and scrub flags. The last cluster is restored at
        the end as any other."""
        rd = run.rd
        self.log(f"release {release}: bringing the dev cluster to it (same shape)")
        started = time.monotonic()
        # reconnected below (a lazily reopened connection if not rebuilt)
        run.changes.cluster.cli.close()
        run.metrics.set_phase("rebuild")
        try:
            target, rebuilt = switch_release(run.parts.target, release)
        except ReleaseSwitchError as exc:
            raise SweepError(str(exc)) from exc
        finally:
            run.metrics.set_phase(None)
        self.release = release
        if not rebuilt:  # it ran that release already: the run's setup on it stands
            self.log(f"release {release}: the dev cluster runs it already")
            return
        parts = self.rewire(spec, target)
        if parts.cluster is None:
            raise SweepError(f"release {release}: the rebuilt dev cluster has no ceph conf")
        cluster = parts.cluster
        snapshot = cluster.config.snapshot(spec.ceph_config) if spec.ceph_config else None
        if snapshot is not None:
            rd.write_pre_sweep_config(snapshot.to_dict())
        if cluster.hygiene is not None:
            cluster.hygiene.metrics = run.metrics
            rd.record(scrub_flags_set=cluster.hygiene.start_run([]))
        runner = self._step_runner(spec, rd, parts, cluster, run.metrics,
                                   run.runner.annotator, ([], []))
        rd.record(created_pools=[], created_erasure_profiles=[], release=release)
        run.parts, run.runner = parts, runner
        run.changes = ClusterChanges(cluster, snapshot, run.changes.knob_snapshot,
                                     runner.pools, touched=True)
        self._read_ceph_version(run)
        self.log(f"release {release}: ceph {self.ceph_version or '(version unknown)'}, ready in "
                 f"{time.monotonic() - started:.0f}s")

    def _run_steps(self, spec: Spec, plan: Plan, baseline: Mapping[str, Any],
                   run: Running) -> None:
        rd = run.rd

        def step_done(step: Step, progress: Progress, steps: list[Step]) -> str | None:
            progress.start(step)
            error = run.runner.run_one(step, baseline.get(step.id), progress)
            run.metrics.set_progress(sum(1 for s in steps if rd.is_done(s)), len(self.failed))
            progress.finish(step, rd.step_result(step), error)
            with contextlib.suppress(OSError, ValueError):
                rd.write_summary(steps)
            self._pull(rd, steps, final=False)
            return error

        if searches(spec):
            def one(step: Step, progress: Progress) -> str | None:
                error = step_done(step, progress, rd.steps())
                if error and self.opts.stop_on_failure:
                    raise SweepError(f"step {step.id} failed (--stop-on-failure)")
                return error

            run_search(spec, plan, rd, one, self.benchmarks, self.log)
            return
        todo = [s for s in plan.steps if not rd.is_done(s)]
        with Progress(plan.steps, todo, self.benchmarks, tty=self.opts.tty,
                      log=self.log) as progress:
            for step in todo:
                if step.release is not None and step.release != self.release:
                    self._switch_release(spec, step.release, run)
                if step_done(step, progress, plan.steps) and self.opts.stop_on_failure:
                    break
