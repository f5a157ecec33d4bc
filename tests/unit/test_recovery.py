"""Recovery test: CBT keys, bad input, phase progression against a scripted mon."""

from __future__ import annotations

import textwrap
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
    ("recovery_test: {osds: [1]}\n" + BENCH.format(kind="background"),
     "background mode (client I/O only during backfill, on another pool) is not supported"),
    ("recovery_test: {osds: [1], pre_time: -1}\n" + BENCH.format(kind="blocking"),
     "pre_time: -1: seconds, 0 or more"),
    (BENCH.format(kind="blocking"), "recov_test_type without a recovery_test section"),
])
def test_bad_recovery_input_names_the_key(text, problem):
    with pytest.raises(SpecError) as info:
        load(text)
    assert any(problem in p for p in info.value.problems), info.value.problems


class Mon:
    """pg stat replies in order; records every other command."""

    def __init__(self, replies: list[dict[str, Any]]) -> None:
        self.replies = replies
        self.commands: list[tuple[str, dict[str, Any]]] = []

    def command(self, prefix: str, **args: Any) -> Any:
        if prefix == "pg stat":
            reply = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
            return {"pg_summary": reply}
        self.commands.append((prefix, args))
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
