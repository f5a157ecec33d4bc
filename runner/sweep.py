"""Sweep orchestration: validate → plan → (dry run | run every step) → restore.

Order of effects, so that a bad spec never touches the cluster:
  1. the spec is loaded and validated (no cluster);
  2. reads only: `ceph config help` for every ceph_config option (unknown option = error),
     OSD list, running values of restart options (for ordering);
  3. the run dir is created and the pre-sweep config recorded (config db + running values);
  4. changes: pools, config per step, OSD restarts; always undone in `finally`
     (also on Ctrl-C / SIGTERM).

What the sweep works through (ceph CLI, config manager, clients, host knobs, hygiene) is built
by the `Wire` it is handed (runner/wiring.py); one step's lifecycle is runner/step_run.py, the
restore runner/restore.py, the plan and dry run runner/planning.py.

Bounded, whatever the cluster does (docs/runner.md, "A lost cluster"): every call to the
cluster gives up after the cluster timeout (`CephCli`); a call no mon answered (ClusterLost)
fails its step and then the run; the restore runs in a worker thread the main thread waits for
with a deadline after a signal or a lost cluster, so SIGINT/SIGTERM are always taken, and a
second one ends the run at once, saying what was left unrestored (the run dir keeps it for
`--resume`).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from cephscope.runner import cluster_erasure_profiles
from cephscope.runner.benchmarks.base import Benchmark, PreflightAccess
from cephscope.runner.cephclient import CephError, CephTarget
from cephscope.runner.clients import ClientsError, close_clients, require_reachable
from cephscope.runner.dry_run import change_lines
from cephscope.runner.endpoints.undo import UndoLog, undo_all
from cephscope.runner.hostexec import HostExecError
from cephscope.runner.metadata_names import metadata_problems
from cephscope.runner.options import SweepOptions
from cephscope.runner.planning import (
    NOT_REACHABLE,
    Plan,
    Planner,
    dry_run_inputs,
    search_plan,
    searches,
)
from cephscope.runner.progress import format_duration
from cephscope.runner.release_switch import check_releases
from cephscope.runner.requirements import endpoint_problems, missing_tools
from cephscope.runner.restart import StateRestartJournal
from cephscope.runner.results import ResultsError, RunDir, make_run_id
from cephscope.runner.rgw_endpoint import redact_text
from cephscope.runner.search import live as live_search
from cephscope.runner.signals import Interrupted
from cephscope.runner.spec import Spec, SpecError, load_spec
from cephscope.runner.sweep_run import SweepError, SweepRun, endpoint_host_for
from cephscope.runner.wiring import ClusterParts, Collaborators, Wire, WiringError

__all__ = ["Interrupted", "Plan", "Sweep", "SweepError", "SweepOptions", "benchmark_registry"]

Log = Callable[[str], None]


def benchmark_registry() -> Mapping[str, type[Benchmark]]:
    module = importlib.import_module("cephscope.runner.benchmarks")
    return getattr(module, "BENCHMARKS", {})


class Sweep:
    """One sweep run with `opts`; `wire` builds what it works through (the CLI hands the real
    one, runner/wiring.py; tests an in-memory cluster)."""

    def __init__(self, opts: SweepOptions, wire: Wire, log: Log | None = None,
                 benchmarks: Mapping[str, type[Benchmark]] | None = None) -> None:
        self.opts = opts
        self.wire = wire
        self.log: Log = log or (lambda m: print(m, flush=True))
        self.benchmarks = benchmarks if benchmarks is not None else benchmark_registry()
        self.run_dir: RunDir | None = None  # once created or resumed
        # the OSDs a restart is under way for, in the run dir's state (see _resume_restart)
        self.restart_journal = StateRestartJournal(self._restarting_osds,
                                                   self._record_restarting_osds)

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

    def _wired(self, spec: Spec, target: CephTarget | None) -> Collaborators:
        try:
            return self.wire(spec, target, self.restart_journal)
        except WiringError as exc:
            raise SweepError(str(exc)) from exc

    def run(self) -> int:
        spec, spec_text = self.load()
        for w in spec.warnings:
            print(f"warning: {w}", file=sys.stderr, flush=True)
        parts = self._wired(spec, None)
        self._refuse_untrusted_names(parts)
        check_releases(spec, parts.target, self.opts.dry_run)
        cluster = parts.cluster
        planner = Planner(self.benchmarks, cluster.config if cluster else None,
                          cluster.host_knobs if cluster else None, self.log)
        unrunnable = endpoint_problems(spec, self.benchmarks, parts.rgw)
        if any(self.benchmarks[name].rgw_api for name in spec.benchmarks):
            self.log("gateway: " + ", ".join(f"{k} {v}" for k, v in parts.rgw.describe().items()
                                             if v and k != "from"))
        if self.opts.dry_run:
            plan = planner.plan(spec, cluster_optional=True)
            planner.print_plan(plan)
            # a dry run reaches no client: the tools are looked for here only
            for problem in unrunnable + missing_tools(spec, self.benchmarks, ()):
                self.log(f"a run would be refused: {problem}")
            reachable = cluster is not None and not any(n.startswith(NOT_REACHABLE)
                                                        for n in plan.notes)
            for line in cluster_erasure_profiles.dry_run_lines(
                    spec, plan.steps, cluster.cli if reachable and cluster else None):
                self.log(line)
            for line in change_lines(dry_run_inputs(spec, plan, self.opts, self.benchmarks,
                                                    parts)):
                self.log(line)
            if searches(spec):
                for line in live_search.expected(search_plan(spec, plan)):
                    self.log(line)
            if cluster is not None:
                cluster.cli.close()
            return 0
        if cluster is None:  # the wiring refuses a missing conf outside a dry run
            raise SweepError("no cluster to run the sweep on")
        if parts.clients:
            # Unreachable client, refused key, host key mismatch: said before any change.
            try:
                require_reachable(parts.clients)
            except ClientsError as exc:
                close_clients(parts.clients, parts.ssh_control_dir)  # masters of those reached
                raise SweepError(str(exc)) from exc
            self.log(f"benchmarks run on {len(parts.clients)} client(s): "
                     f"{', '.join(c.name for c in parts.clients)}")
        unrunnable += missing_tools(spec, self.benchmarks, parts.clients)
        if unrunnable:
            cluster.cli.close()
            close_clients(parts.clients, parts.ssh_control_dir)
            raise SweepError("refusing the run (nothing was changed): " + "; ".join(unrunnable))
        if self.opts.resume_dir is not None:
            rd = self.run_dir = RunDir(self.opts.resume_dir)
            steps = rd.steps()
            self._resume_restart(parts, cluster)  # before the plan reads every OSD's values
            # a search's steps are decided as it goes: plan over the whole grid
            plan = planner.plan(spec) if searches(spec) else planner.plan(spec, steps)
            self._preflight(plan, parts, cluster)
            self._resume_mounts(rd, parts, cluster)
            done = sum(1 for s in steps if rd.is_done(s))
            self.log(f"resuming run {rd.run_id}: {done}/{len(steps)} steps already done")
            self._look_up_erasure_profiles(spec, plan, parts, cluster)
        else:
            plan = planner.plan(spec)
            self._look_up_erasure_profiles(spec, plan, parts, cluster)
            self._preflight(plan, parts, cluster)
            rd = self._create_run_dir(spec, spec_text, plan)
        run = SweepRun(self.opts, self.benchmarks, self._wired, self.log)
        return run.execute(spec, plan, rd, parts, cluster)

    def _look_up_erasure_profiles(self, spec: Spec, plan: Plan, parts: Collaborators,
                                  cluster: ClusterParts) -> None:
        """The cluster's erasure-code profiles that pool profiles name (reads only, before
        any change): the spec's pool profiles get their settings; one the cluster lacks
        refuses the run."""
        try:
            found = cluster_erasure_profiles.look_up(spec, plan.steps, cluster.cli)
        except (SpecError, CephError):
            cluster.cli.close()
            close_clients(parts.clients, parts.ssh_control_dir)
            raise
        for name, profile in found.items():
            self.log(f"pool profile {name}: the cluster's erasure-code profile "
                     f"{profile.cluster_erasure_profile} "
                     f"({cluster_erasure_profiles.describe(profile)})")
        spec.pool_profiles.update(found)

    def _create_run_dir(self, spec: Spec, spec_text: str, plan: Plan) -> RunDir:
        spec_path = spec.path
        if searches(spec):
            search_plan(spec, plan)  # budget problems before the cluster changes
        # one name for the run and its dir: a given --results-dir names the run
        run_id = (self.opts.results_dir.name if self.opts.results_dir is not None
                  else make_run_id(spec_path))
        path = self.opts.results_dir or Path("results") / run_id
        # keys the spec held are not kept in the run dir (runner/rgw_endpoint.py)
        kept_text = redact_text(spec_text, list(spec.rgw.spec_keys)) if spec.rgw else spec_text
        rd = self.run_dir = RunDir.create(
            path, run_id, spec_path, kept_text, spec.resolved(),
            [] if searches(spec) else plan.steps,
            meta={"restart_options": sorted(plan.restart_options),
                  "estimated_seconds": plan.estimated_seconds})
        if searches(spec):
            self.log(f"run {run_id}: results in {path}")
            for line in live_search.expected(search_plan(spec, plan)):
                self.log(line)
        else:
            self.log(f"run {run_id}: {len(plan.steps)} steps, {plan.restarts} OSD "
                     f"restart(s), estimated {format_duration(plan.estimated_seconds)}; "
                     f"results in {path}")
        return rd

    def _refuse_untrusted_names(self, parts: Collaborators) -> None:
        """Before anything is run on a host or changed on the cluster: every OSD host and
        device name in `osd metadata` must be a plain host / kernel device name. An OSD
        reports what its host (a container's NODE_NAME) says; such a name becomes an ssh
        destination and a path root writes to, so a cluster reporting anything else is
        refused, naming the OSD and the name. A dry run without a reachable cluster has no
        metadata to check (and runs nothing on OSD hosts)."""
        if parts.cluster is None:
            return
        cli = parts.cluster.cli
        try:
            metadata = cli.command("osd metadata")
        except CephError:
            if self.opts.dry_run:
                return
            raise
        problems = metadata_problems(metadata if isinstance(metadata, list) else [])
        if problems:
            cli.close()
            close_clients(parts.clients, parts.ssh_control_dir)
            raise SweepError("refusing the cluster's osd metadata (nothing was run on any "
                             "host or changed on the cluster): " + "; ".join(problems))

    def _preflight(self, plan: Plan, parts: Collaborators, cluster: ClusterParts) -> None:
        """Each benchmark's reads of the cluster and clients before anything changes (a kernel
        module a client endpoint needs, a CephFS to use): a problem refuses the sweep."""
        access = PreflightAccess(tuple(parts.clients), cluster.cli.command)
        problems: list[str] = []
        for name, cls in self.benchmarks.items():
            params = [s.params for s in plan.steps if s.benchmark == name]
            if not params:
                continue
            try:
                problems += cls.preflight(params, access)
            except (CephError, HostExecError) as exc:
                problems.append(f"{name}: {exc}")
        if problems:
            cluster.cli.close()
            close_clients(parts.clients, parts.ssh_control_dir)
            raise SweepError("refused before any change: " + "; ".join(problems))

    def _resume_mounts(self, rd: RunDir, parts: Collaborators, cluster: ClusterParts) -> None:
        """Mounts a killed run left on its clients (its step's endpoints): unmounted before
        the step runs again. The run's CephFS changes stay: the rest of the run uses them."""
        changes = UndoLog(load=lambda: list(rd.journal().endpoints),
                          store=lambda entries: rd.record(endpoints=entries))
        left = [e["path"] for e in changes.entries() if e["kind"] == "mount"]
        if not left:
            return
        self.log(f"the previous run left {len(left)} mount(s): unmounting {', '.join(left)}")
        problems = undo_all(changes, endpoint_host_for(parts), cluster.cli.command, (CephError,),
                            kinds=("mount",))
        if problems:
            cluster.cli.close()
            close_clients(parts.clients, parts.ssh_control_dir)
            raise SweepError("the previous run left mounts that could not be unmounted: "
                             + "; ".join(problems))

    def _restarting_osds(self) -> list[int]:
        if self.run_dir is None:
            return []
        return list(self.run_dir.journal().restarting_osds)

    def _record_restarting_osds(self, osd_ids: list[int]) -> None:
        if self.run_dir is not None:
            self.run_dir.record(restarting_osds=osd_ids)

    def _resume_restart(self, parts: Collaborators, cluster: ClusterParts) -> None:
        """A restart the killed run did not see through may have left OSDs stopped (killed
        between their stop and start): restart them again and wait as for any restart."""
        pending = self.restart_journal.pending()
        if not pending:
            return
        names = ", ".join(f"osd.{i}" for i in pending)
        them = "it" if len(pending) == 1 else "them"
        self.log(f"a restart of {names} was interrupted by the previous run: restarting {them}")
        try:
            cluster.config.restarter.restart_osds(pending)
        except CephError as exc:
            cluster.cli.close()
            close_clients(parts.clients, parts.ssh_control_dir)
            raise SweepError(f"a restart of {names} was interrupted by the previous run and "
                             f"restarting {them} again failed: {exc}; start {them} and run "
                             f"--resume again") from exc
