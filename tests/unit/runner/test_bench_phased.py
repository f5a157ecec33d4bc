"""Results matched to step modes in run order (runner/benchmarks/phased.py)."""

from __future__ import annotations

from cephscope.runner.benchmarks.phased import match_phases

ORDER = [("w", "write"), ("r", "read"), ("w", "write.2"), ("d", "delete")]


def test_the_nth_result_of_a_kind_goes_to_the_nth_mode_of_that_kind() -> None:
    found = match_phases(ORDER, [("w", 1), ("r", 2), ("w", 3), ("d", 4)])
    assert found == {"write": 1, "read": 2, "write.2": 3, "delete": 4}


def test_extra_results_and_unknown_kinds_are_ignored_and_missing_modes_stay_absent() -> None:
    found = match_phases(ORDER, [("w", 1), ("w", 2), ("w", 5), ("x", 9)])
    assert found == {"write": 1, "write.2": 2}
