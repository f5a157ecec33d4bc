"""Recovery test: CBT keys, bad input, phase progression against a scripted mon."""

from __future__ import annotations

import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from cephscope.runner.benchmarks.base import LiveSample
from cephscope.runner.recovery import RecoverySpec, RecoveryTest
from cephscope.runner.spec import SpecError, load_spec
from tests.unit.runner_fakes import BENCHES

BENCH = """\
benchmarks:
  radosbench:
    op_size: 4096
    recov_test_type: {kind}
"""


def load(text: str):
    return load_spec(Path("r.yaml"), text=textwrap.dedent(text), benchmarks=BENCHES)


def test_cbt_recovery_keys_are_acted_on():
    spec = load("cluster:\n  recovery_test:\n    osds: [1, 2]\n    pre_time: 5\n"
                "    post_time: 0\n    repeat: false\n" + BENCH.format(kind="blocking"))
    assert spec.recovery == RecoverySpec((1, 2), 5.0, 0.0, False, "blocking")
    assert spec.warnings == []


@pytest.mark.parametrize(("text", "problem"), [
    ("recovery_test: {osds: []}\n" + BENCH.format(kind="blocking"), "non-empty list of OSD"),
    ("recovery_test: {osds: [1]}\n" + BENCH.format(kind="sideways"),
     "'sideways': unknown recovery test type (one of blocking, background)"),
    ("recovery_test: {osds: [1], repeat: 1}\n" + BENCH.format(kind="blocking"),
     "repeat: 1: true or false"),
    ("pool_profiles: {rep2: {replication: 2, prefill_recovery_objects: -5}}\n"
     "recovery_test: {osds: [1]}\n" + BENCH.format(kind="background"),
     "prefill_recovery_objects: -5: must be at least 0"),
    ("recovery_test: {osds: [1], pre_time: -1}\n" + BENCH.format(kind="blocking"),
     "pre_time: -1: seconds, 0 or more"),
    (BENCH.format(kind="blocking"), "recov_test_type without a recovery_test section"),
])
def test_bad_recovery_input_names_the_key(text, problem):
    with pytest.raises(SpecError) as info:
        load(text)
    assert any(problem in p for p in info.value.problems), info.value.problems


class Mon:
    """pg stat replies in order (the last repeats); `pg ls laggy` lists the PGs whose state
    in the current reply says laggy; a `pg repeer` of one clears it unless `wedged`; records
    every other command."""

    def __init__(self, replies: list[dict[str, Any]], wedged: bool = False) -> None:
        self.replies = replies
        self.wedged = wedged
        self.current: dict[str, Any] = replies[0]
        self.commands: list[tuple[str, dict[str, Any]]] = []

    def command(self, prefix: str, **args: Any) -> Any:
        if prefix == "pg stat":
            self.current = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
            return {"pg_summary": self.current}
        if prefix == "pg ls":
            return {"pg_ready": True, "pg_stats": [
                {"pgid": "3.5", "state": s["name"], "acting": [0, 2]}
                for s in self.current["num_pg_by_state"] if "laggy" in s["name"]]}
        if prefix == "health":
            return {"checks": {"SLOW_OPS": {"summary": {
                "message": "1 slow ops, oldest one blocked for 700 sec, osd.0 has slow ops"}}}}
        self.commands.append((prefix, args))
        if prefix == "pg repeer" and not self.wedged:
            self.replies[:] = [pg({"active+clean": 16})]
            self.current = self.replies[0]
        return None


def pg(states: dict[str, int], degraded: int = 0, misplaced: int = 0) -> dict[str, Any]:
    return {"num_pg_by_state": [{"name": k, "num": v} for k, v in states.items()],
            **({"degraded_objects": degraded} if degraded else {}),
            **({"misplaced_objects": misplaced, "recovering_bytes_per_sec": 2**20}
               if misplaced else {})}


def test_phases_follow_the_cluster_and_the_osds_come_back():
    clean = pg({"active+clean": 16})
    mon = Mon([clean, pg({"active+undersized+degraded": 8, "active+clean": 8}, degraded=40),
               pg({"active+recovering+degraded": 8, "active+clean": 8}, degraded=20),
               pg({"active+clean": 16}),
               pg({"active+remapped+backfilling": 4, "active+clean": 12}, misplaced=30),
               clean])
    test = RecoveryTest(mon, RecoverySpec((1,), pre_time=0, post_time=0), "s1",  # type: ignore[arg-type]
                        log=lambda m: None, poll_seconds=0.01)
    test.start()
    test.wait()
    assert test.error is None
    assert [p["phase"] for p in test.phases] == ["healthy", "degraded", "recovering",
                                                 "backfilling", "recovered"]
    assert mon.commands[:3] == [("osd set", {"key": "noup"}), ("osd down", {"ids": ["1"]}),
                                ("osd out", {"ids": ["1"]})]
    assert ("osd in", {"ids": ["1"]}) in mon.commands
    assert mon.commands[-2:] == [("osd unset", {"key": "noup"}), ("osd in", {"ids": ["1"]})]
    healthy = test.phases[0]
    t = (healthy["start"] + healthy["end"]) / 2
    result = test.result([LiveSample(timestamp=t, ops_per_second=100.0)])
    assert result["max_degraded_objects"] == 40
    assert result["client"]["healthy"]["iops_mean"] == 100.0
    assert result["recovery_bytes_per_second_mean"] == 2**20


def run_test(mon: Mon, **spec: Any) -> RecoveryTest:
    test = RecoveryTest(mon, RecoverySpec((1,), pre_time=0, post_time=0, **spec), "s1",  # type: ignore[arg-type]
                        log=lambda m: None, poll_seconds=0.01)
    test.start()
    return test


def laggy_after_backfill() -> list[dict[str, Any]]:
    return [pg({"active+clean": 16}),
            pg({"active+undersized+degraded": 8, "active+clean": 8}, degraded=40),
            pg({"active+clean": 16}),
            pg({"active+remapped+backfilling": 4, "active+clean": 12}, misplaced=30),
            pg({"active+clean+laggy": 1, "active+clean": 15})]


def test_a_pg_left_laggy_is_repeered_once_and_the_test_goes_on():
    mon = Mon(laggy_after_backfill())
    test = run_test(mon, laggy_grace_seconds=0.05)
    test.wait()
    assert test.error is None
    assert ("pg repeer", {"pgid": "3.5"}) in mon.commands
    (stuck,) = test.repeered
    assert stuck["pgid"] == "3.5" and stuck["acting"] == [0, 2]
    assert "osd.0 has slow ops" in stuck["slow_ops"] and stuck["laggy_seconds"] >= 0.05
    assert [p["phase"] for p in test.phases][-1] == "recovered"
    assert test.result([])["repeered_pgs"] == test.repeered


def test_a_pg_still_laggy_after_the_repeer_fails_the_test_naming_it_and_stops_the_client():
    mon = Mon(laggy_after_backfill(), wedged=True)
    test = run_test(mon, laggy_grace_seconds=0.05)
    test.wait()
    assert test.error is not None
    assert "PG 3.5 (active+clean+laggy, acting [0, 2]) still laggy" in test.error
    assert "oldest one blocked for 700 sec" in test.error
    assert test.abort.is_set() and test.start_io.is_set()
    # cleanup: noup off, the OSD in, the PG re-peered again
    assert mon.commands[-3:] == [("osd unset", {"key": "noup"}), ("osd in", {"ids": ["1"]}),
                                 ("pg repeer", {"pgid": "3.5"})]


def test_a_short_laggy_spell_is_left_alone():
    mon = Mon([pg({"active+clean": 16}), pg({"active+clean+laggy": 2, "active+clean": 14}),
               pg({"active+undersized+degraded": 8, "active+clean": 8}, degraded=4),
               pg({"active+clean": 16})])
    test = run_test(mon, laggy_grace_seconds=30)
    test.wait()
    assert test.error is None and test.repeered == []
    assert not any(c[0] == "pg repeer" for c in mon.commands)


def test_repeat_runs_the_cycle_again_while_the_benchmark_runs():
    clean = pg({"active+clean": 16})
    cycle = [pg({"active+undersized+degraded": 8, "active+clean": 8}, degraded=40), clean,
             pg({"active+remapped+backfilling": 4, "active+clean": 12}, misplaced=30)]
    mon = Mon([clean, *cycle, clean, *cycle, clean, *cycle, clean])
    test = RecoveryTest(mon, RecoverySpec((1,), pre_time=0, post_time=0, repeat=True), "s1",  # type: ignore[arg-type]
                        log=lambda m: None, poll_seconds=0.01)
    outs = []

    def command(prefix: str, **args: Any) -> Any:
        if prefix == "osd out":
            outs.append(1)
            if len(outs) == 2:  # the benchmark ends during the second cycle
                test.bench_done.set()
        return Mon.command(mon, prefix, **args)

    mon.command = command  # type: ignore[method-assign]
    test.start()
    test.wait()
    assert test.error is None and test.cycles == 2 and len(outs) == 2
    phases = [(p["phase"], p["cycle"]) for p in test.phases]
    assert phases == [("healthy", 1), ("degraded", 1), ("recovering", 1), ("backfilling", 1),
                      ("degraded", 2), ("recovering", 2), ("backfilling", 2), ("recovered", 2)]
    result = test.result([])
    assert [c["cycle"] for c in result["cycles"]] == [1, 2]
    assert all(c["backfill_seconds"] is not None for c in result["cycles"])
    assert "backfilling#2" in result["client"] and "backfilling" in result["client"]


def test_background_client_starts_only_when_the_osds_are_back_in():
    clean = pg({"active+clean": 16})
    seen: dict[str, bool] = {}
    mon = Mon([clean, pg({"active+undersized+degraded": 8, "active+clean": 8}, degraded=40),
               clean, pg({"active+remapped+backfilling": 4, "active+clean": 12}, misplaced=30),
               clean])
    test = RecoveryTest(mon, RecoverySpec((1,), pre_time=0, post_time=5, test_type="background"),  # type: ignore[arg-type]
                        "s1", log=lambda m: None, poll_seconds=0.01,
                        populate=lambda: seen.setdefault("io_at_populate", test.start_io.is_set()))
    original = mon.command

    def command(prefix: str, **args: Any) -> Any:
        if prefix == "osd in" and "io_before_in" not in seen:
            seen["io_before_in"] = test.start_io.is_set()
        return original(prefix, **args)

    mon.command = command  # type: ignore[method-assign]
    test.start()
    assert test.start_io.wait(5)
    test.wait()
    assert test.error is None
    assert seen == {"io_at_populate": False, "io_before_in": False}
    # no post_time in background mode (CBT's): the 5 s would show
    recovered = test.phases[-1]
    assert recovered["phase"] == "recovered" and recovered["end"] - recovered["start"] < 2


def test_background_and_repeat_and_the_recovery_prefill_keys_are_acted_on():
    spec = load("pool_profiles:\n  rep2: {replication: 2, prefill_recovery_objects: 500,\n"
                "    prefill_recovery_object_size: 65536, prefill_recovery_threads: 4}\n"
                "recovery_test: {osds: [1], repeat: true}\n" + BENCH.format(kind="background"))
    assert spec.recovery == RecoverySpec((1,), 10.0, 10.0, True, "background")
    rep2 = spec.pool_profiles["rep2"]
    assert (rep2.prefill_recovery_objects, rep2.prefill_recovery_object_size,
            rep2.prefill_recovery_threads) == (500, 65536, 4)
    assert not any("prefill_recovery" in w for w in spec.warnings)


def test_pg_stats_that_lag_the_osd_map_do_not_end_the_degraded_phase():
    clean = pg({"active+clean": 16})
    # two polls after `osd out` still show the cluster clean (the mgr has not heard yet)
    mon = Mon([clean, clean, clean,
               pg({"active+undersized+degraded": 8, "active+clean": 8}, degraded=40),
               pg({"active+recovering+degraded": 8, "active+clean": 8}, degraded=20),
               clean, pg({"active+remapped+backfilling": 4, "active+clean": 12}, misplaced=30),
               clean])
    test = run_test(mon)
    test.wait()
    assert test.error is None
    recovering = next(p for p in test.phases if p["phase"] == "recovering")
    # the recovering phase began at the first poll showing degraded objects being recovered,
    # not at the first (stale, clean) poll after the OSD went out
    first_degraded = next(c["t"] for c in test.counts if c["degraded_objects"] > 0)
    assert recovering["start"] >= first_degraded
    assert test.result([])["max_degraded_objects"] == 40


def test_an_abort_stops_the_running_tools_at_once(tmp_path: Path):
    """A failed recovery test sets the step's abort: the benchmark's tools are killed then,
    not at their timeout."""
    import sys
    import threading

    from cephscope.runner.benchmarks.base import BenchmarkError
    from cephscope.runner.benchmarks.toolproc import ToolCommand, run_tools

    abort = threading.Event()
    pid_file = tmp_path / "pid"
    code = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    cmd = ToolCommand([sys.executable, "-c", code], tmp_path / "out", tmp_path / "err")

    def abort_once_running() -> None:  # (a loaded machine can take seconds to start python)
        for _ in range(3000):
            if pid_file.exists() and pid_file.read_text():
                break
            time.sleep(0.01)
        abort.set()

    threading.Thread(target=abort_once_running, daemon=True).start()
    started = time.monotonic()
    with pytest.raises(BenchmarkError, match="the step was aborted"):
        run_tools([cmd], 600, "radosbench write", abort=abort)
    assert time.monotonic() - started < 30
    pid = int(pid_file.read_text())
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text(
    ).split(")")[1].split()[0]
