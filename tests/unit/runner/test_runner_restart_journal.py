"""The OSD restart intent journal: recorded before a restart, cleared once the OSDs serve, and
a killed run's unfinished restart done again by `--resume` before anything else."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from cephscope.runner.cephclient import CephError
from cephscope.runner.restart import (
    ArgvRestart,
    FunctionRestart,
    OsdRestarter,
    StateRestartJournal,
    StoppedHook,
)
from cephscope.runner.results import RunDir
from cephscope.runner.sweep import SweepError, SweepOptions
from tests.unit.runner_fakes import CountingBench, FakeCluster, fake_sweep, run_sweep


def list_journal(start: Sequence[int] = ()) -> tuple[StateRestartJournal, list[list[int]]]:
    """A journal over a plain list (what the run dir's state holds); [0] is the record."""
    store = [list(start)]
    return StateRestartJournal(lambda: store[0], lambda ids: store.__setitem__(0, ids)), store


class WatchedRestart:
    """The fake cluster's restart, noting the journal's record when called and once stopped."""

    name = "watched"

    def __init__(self, cluster: FakeCluster, journal: StateRestartJournal) -> None:
        self.cluster = cluster
        self.journal = journal
        self.seen: list[tuple[str, list[int]]] = []

    def restart(self, osd_ids: Sequence[int], timeout_seconds: float,
                on_stopped: StoppedHook = lambda: None) -> None:
        self.seen.append(("called", self.journal.pending()))

        def stopped() -> None:
            self.seen.append(("stopped", self.journal.pending()))
            on_stopped()

        self.cluster.restart(osd_ids, timeout_seconds, stopped)


def restarter(cluster: FakeCluster, method: object, journal: StateRestartJournal | None,
              checkpoint: Callable[[str], None] = lambda stage: None, *,
              rolling: bool = False, timeout: float = 5) -> OsdRestarter:
    return OsdRestarter(cluster, method, lambda i: None, rolling=rolling,  # type: ignore[arg-type]
                        timeout_seconds=timeout, poll_seconds=0.01, checkpoint=checkpoint,
                        journal=journal)


def test_the_osds_are_recorded_from_before_the_restart_until_they_serve() -> None:
    cluster = FakeCluster()
    journal, store = list_journal()
    method = WatchedRestart(cluster, journal)
    stages: list[tuple[str, list[int]]] = []
    restarter(cluster, method, journal,
              lambda stage: stages.append((stage, list(store[0])))).restart_osds([0, 2])
    assert method.seen == [("called", [0, 2]), ("stopped", [0, 2])]
    # the checkpoint inside the method (stopped) and after it (waiting): both recorded
    assert stages == [("osd_stopped", [0, 2]), ("osd_restart", [0, 2])]
    assert store[0] == []
    assert cluster.restarts == [[0, 2]]


def test_the_record_stays_when_the_osds_do_not_come_back() -> None:
    cluster = FakeCluster()
    journal, store = list_journal()

    class StopsOnly:
        name = "stops only"

        def restart(self, osd_ids: Sequence[int], timeout_seconds: float,
                    on_stopped: StoppedHook = lambda: None) -> None:
            cluster.stopped |= set(osd_ids)

    with pytest.raises(CephError, match=r"OSDs \[1\] not back up"):
        restarter(cluster, StopsOnly(), journal, timeout=0.05).restart_osds([1])
    assert store[0] == [1]


def test_a_rolling_restart_keeps_an_earlier_unfinished_record() -> None:
    """Ids are added and removed: a rolling re-restart of [0, 1] never forgets osd.1 while
    osd.0 restarts."""
    cluster = FakeCluster()
    journal, store = list_journal([0, 1])
    method = WatchedRestart(cluster, journal)
    restarter(cluster, method, journal, rolling=True).restart_osds([0, 1])
    assert [ids for what, ids in method.seen if what == "called"] == [[0, 1], [1]]
    assert cluster.restarts == [[0], [1]]
    assert store[0] == []


def test_the_stopped_hook_reaches_the_function_and_never_an_argv_restart(tmp_path: Path) -> None:
    cluster = FakeCluster()
    stages: list[str] = []

    def dev_cluster_restart(ids: list[int], timeout: float, on_stopped: StoppedHook) -> None:
        cluster.restart(ids, timeout, on_stopped)

    restarter(cluster, FunctionRestart("dev cluster", dev_cluster_restart), None,
              stages.append).restart_osds([1])
    assert stages == ["osd_stopped", "osd_restart"]

    stages.clear()
    marker = tmp_path / "restarted"

    class ArgvThenCluster(ArgvRestart):
        def restart(self, osd_ids: Sequence[int], timeout_seconds: float,
                    on_stopped: StoppedHook = lambda: None) -> None:
            super().restart(osd_ids, timeout_seconds, on_stopped)
            cluster.restart(osd_ids, timeout_seconds)  # the fake's epochs move on

    method = ArgvThenCluster("command", ["/bin/sh", "-c", f'echo "$0" >> {marker}', "{id}"])
    restarter(cluster, method, None, stages.append).restart_osds([1])
    assert marker.read_text().split() == ["1"]
    assert stages == ["osd_restart"]


def killed_mid_restart(tmp_path: Path, cluster: FakeCluster, osds: list[int]) -> Path:
    """A finished run turned into one killed between the stop and the start of `osds`: their
    processes down, the journal naming them, the last step without a result."""
    rc, results = run_sweep(tmp_path, cluster)
    assert rc == 0
    rd = RunDir(results)
    (rd.step_dir(rd.steps()[-1]) / "result.json").unlink()
    rd.update_state(restarting_osds=osds)
    cluster.stopped |= set(osds)
    cluster.restarts.clear()
    CountingBench.runs = []
    return results


def resume(tmp_path: Path, cluster: FakeCluster, results: Path) -> tuple[int, list[str]]:
    lines: list[str] = []
    sweep = fake_sweep(SweepOptions(resume_dir=results, results_dir=results,
                                   metrics_linger_seconds=0, tty=False), cluster)
    sweep.log = lines.append
    return sweep.run(), lines


def test_resume_restarts_exactly_the_recorded_osds_first(tmp_path: Path) -> None:
    cluster = FakeCluster()
    results = killed_mid_restart(tmp_path, cluster, [1])
    rc, lines = resume(tmp_path, cluster, results)
    assert rc == 0, lines
    assert "a restart of osd.1 was interrupted by the previous run: restarting it" in lines
    # before the plan read the OSDs and before any step: osd.1 alone, then the step's own
    assert cluster.restarts[0] == [1]
    assert lines.index("a restart of osd.1 was interrupted by the previous run: restarting it") \
        < next(i for i, line in enumerate(lines) if line.startswith("resuming run"))
    assert not cluster.stopped
    assert RunDir(results).read_state()["restarting_osds"] == []
    assert len(CountingBench.runs) == 1
    assert cluster.db == {}  # restored at the end as usual


def test_resume_without_a_record_restarts_nothing_first(tmp_path: Path) -> None:
    cluster = FakeCluster()
    results = killed_mid_restart(tmp_path, cluster, [])
    rc, lines = resume(tmp_path, cluster, results)
    assert rc == 0
    assert not any("was interrupted" in line for line in lines)


def test_a_failing_re_restart_stops_the_resume_with_the_reason(tmp_path: Path) -> None:
    cluster = FakeCluster()
    results = killed_mid_restart(tmp_path, cluster, [0, 2])
    cluster.restart_error = "osd.2: ceph-osd exited 1: unable to open OSD superblock"
    db_before = dict(cluster.db)
    with pytest.raises(SweepError) as info:
        resume(tmp_path, cluster, results)
    assert str(info.value).startswith(
        "a restart of osd.0, osd.2 was interrupted by the previous run and restarting them "
        "again failed: osd.2: ceph-osd exited 1: unable to open OSD superblock")
    # nothing else ran or changed, and the next --resume tries again
    assert CountingBench.runs == [] and cluster.db == db_before
    assert RunDir(results).read_state()["restarting_osds"] == [0, 2]
    cluster.restart_error = None
    rc, _ = resume(tmp_path, cluster, results)
    assert rc == 0 and cluster.restarts[0] == [0, 2] and not cluster.stopped
