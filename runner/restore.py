"""Putting the cluster back after a sweep: the deferred benchmark cleanup, what client
endpoints left (mounts on clients, CephFS changes), the pre-sweep ceph config and host
settings, the pools the run created, the recovery test's OSDs and the run's OSD flags.
Bounded after a signal or a lost cluster: it runs in a worker thread the main thread waits
for in short slices (so it still takes signals), and what it could not put back is said by
name."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cephscope.monclient import WAIT_SLICE_SECONDS
from cephscope.runner.benchmarks.base import BenchmarkError
from cephscope.runner.cephclient import CephError
from cephscope.runner.endpoints.undo import UndoLog, undo_all
from cephscope.runner.hostexec import HostExec, LocalHost
from cephscope.runner.knobs.base import KnobError
from cephscope.runner.knobs.ceph_config import ConfigSnapshot
from cephscope.runner.phase_metrics import PhaseMetrics
from cephscope.runner.pools import PoolManager
from cephscope.runner.recovery import RecoverySpec, RecoveryTest
from cephscope.runner.results import RunDir
from cephscope.runner.signals import Interrupted, interrupts_raised
from cephscope.runner.wiring import ClusterParts

Log = Callable[[str], None]


@dataclass
class ClusterChanges:
    """What the run changed on the cluster it runs on (a release rebuild starts afresh), with
    what puts it back. `touched`: the run got as far as changing it."""
    cluster: ClusterParts
    config_snapshot: ConfigSnapshot | None = None
    knob_snapshot: list[dict[str, Any]] | None = None
    pools: PoolManager | None = None
    touched: bool = False


@dataclass
class Restore:
    run_dir: RunDir
    changes: ClusterChanges
    keep_pools: bool
    log: Log
    failed: list[str]
    metrics: PhaseMetrics | None = None
    # a step's benchmark cleanup a signal or a lost cluster deferred to here
    pending_cleanup: Callable[[], list[str]] | None = None
    # after the restore, in the same worker (results pulled and written, connections closed)
    after: Callable[[], None] = lambda: None
    restore_timeout_seconds: float = 15.0
    restore_grace_seconds: float = 5.0
    # what is still to put back, by name (said when it cannot finish)
    unrestored: list[str] = field(default_factory=list)
    # a client by the name the journal gives it ("local": this machine)
    host_for: Callable[[str], HostExec] = field(default=lambda name: LocalHost())

    def bounded(self, budget: float | None) -> bool:
        """`run` in a worker thread; the main thread waits in short slices, so it still takes
        signals. With a `budget` (seconds), every call to the cluster shares that deadline
        and the wait ends after it (plus a grace for the last call). Without one, the first
        signal sets the budget from then; a second signal (or a first one when a budget is
        set) stops waiting at once. False when the restore did not finish: what it had left
        is in `self.unrestored`."""
        self.unrestored = self.items()
        done = threading.Event()
        failure: list[BaseException] = []

        def work() -> None:
            try:
                self.run()
            except BaseException as exc:  # handed to the main thread below
                failure.append(exc)
            finally:
                done.set()

        def limit(seconds: float) -> float:
            self.changes.cluster.cli.limit_to(seconds)
            return time.monotonic() + seconds + self.restore_grace_seconds

        deadline = limit(budget) if budget is not None else None
        worker = threading.Thread(target=work, name="restore", daemon=True)
        with interrupts_raised():
            worker.start()
            while True:
                try:
                    if done.wait(WAIT_SLICE_SECONDS):
                        break
                except Interrupted:
                    if deadline is not None:
                        self.log("interrupted again: stopping now, not waiting for the restore")
                        return False
                    budget = self.restore_timeout_seconds
                    self.log(f"interrupted: finishing the restore within {budget:g} s "
                             f"(again to stop at once)")
                    deadline = limit(budget)
                if deadline is not None and time.monotonic() > deadline:
                    self.log(f"error: the restore did not finish within {budget:g} s")
                    return False
        if failure:
            raise failure[0]
        return True

    def items(self) -> list[str]:
        """What `run` has to put back on the cluster, by name."""
        c = self.changes
        hygiene, host_knobs = c.cluster.hygiene, c.cluster.host_knobs
        items = []
        if self.pending_cleanup is not None:
            items.append("the interrupted step's benchmark objects")
        if self.run_dir.journal().endpoints:
            items.append("client endpoints (mounts, CephFS changes)")
        if c.touched:
            if c.config_snapshot is not None:
                items.append("ceph config (pre-sweep values of "
                             f"{', '.join(sorted(c.config_snapshot.db)) or 'the swept options'})")
            if c.knob_snapshot and host_knobs is not None:
                items.append("host settings")
            if c.pools is not None and not self.keep_pools and c.pools.created:
                items.append(f"pools created by the run ({', '.join(c.pools.created)})")
            if self.run_dir.journal().recovery_osds:
                items.append("the recovery test's OSDs (in, noup off)")
            if hygiene is not None and hygiene.flags_set:
                items.append(f"OSD flags ({', '.join(hygiene.flags_set)})")
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

    def undo_endpoints(self, cli: Any) -> list[str]:
        rd = self.run_dir
        changes = UndoLog(load=lambda: list(rd.journal().endpoints),
                          store=lambda entries: rd.record(endpoints=entries))
        problems = undo_all(changes, self.host_for, cli.command, (CephError,))
        if not problems:
            self.log("undid what the client endpoints left (mounts, CephFS changes)")
        return problems

    def run(self) -> None:
        c, rd = self.changes, self.run_dir
        cli, config = c.cluster.cli, c.cluster.config
        hygiene, host_knobs = c.cluster.hygiene, c.cluster.host_knobs
        if self.metrics is not None:
            self.metrics.end_step(time.time())
        problems: list[str] = []
        if self.pending_cleanup is not None:
            cleanup, self.pending_cleanup = self.pending_cleanup, None
            problems += self._restored("the interrupted step's", cleanup)
        if rd.journal().endpoints:  # before the pools: a filesystem holds its pools
            problems += self._restored("client endpoints", lambda: self.undo_endpoints(cli))
        if c.touched and c.config_snapshot is not None:
            snapshot = c.config_snapshot
            problems += self._restored("ceph config", lambda: config.restore(snapshot))
            if not problems:
                self.log("restored the pre-sweep ceph config")
        if c.touched and c.knob_snapshot and host_knobs is not None:
            knobs, saved = host_knobs, c.knob_snapshot
            knob_problems = self._restored("host settings", lambda: knobs.restore(saved))
            if not knob_problems:
                self.log("restored the pre-sweep host settings "
                         f"({', '.join(sorted({e['setting'] for e in saved}))})")
            problems += knob_problems
        if c.touched and c.pools is not None and not self.keep_pools \
                and (c.pools.created or c.pools.erasure_profiles_created):
            problems += self._restored("pools", c.pools.remove_created)
        pending = rd.journal().recovery_osds
        if c.touched and pending:
            # a recovery test the run did not finish (killed, now resumed): OSDs back in
            recovery_problems = self._restored(
                "the recovery test", RecoveryTest(cli, RecoverySpec(tuple(pending)), "").undo)
            if not recovery_problems:
                rd.record(recovery_osds=[])
            problems += recovery_problems
        if c.touched and hygiene is not None and hygiene.flags_set:
            flags = list(hygiene.flags_set)
            flag_problems = self._restored("OSD flags", hygiene.finish_run)
            if not flag_problems:
                rd.record(scrub_flags_set=[])
                self.log(f"unset the run's OSD flags ({', '.join(flags)})")
            problems += flag_problems
        for p in problems:
            self.log(f"error: {p}")
        if problems:
            self.failed.append("restore")
        self.after()
