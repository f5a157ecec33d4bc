"""Run hygiene against a scripted mon: scrub flags, health gate, cache drop, phases."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import pytest

from cephscope.runner.hygiene import (
    QUIET_GAP_MARGIN_SECONDS,
    Hygiene,
    HygieneError,
    HygieneOptions,
    quiet_gap_for,
)
from cephscope.runner.knobs.host import OsdDevices
from cephscope.runner.phase_metrics import PhaseMetrics
from cephscope.runner.sweep_cli import add_arguments, options_from_args
from tests.unit.runner_fakes import RootedHost


class Mon:
    def __init__(self, flags: str = "sortbitwise", pg_states: list[list[str]] | None = None,
                 checks: dict[str, Any] | None = None) -> None:
        self.flags = flags
        self.pg_states = pg_states or [["active+clean"]]
        self.checks = checks or {}
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def command(self, prefix: str, **args: Any) -> Any:
        self.calls.append((prefix, args))
        if prefix == "osd dump":
            return {"flags": self.flags}
        if prefix == "pg stat":
            states = self.pg_states.pop(0) if len(self.pg_states) > 1 else self.pg_states[0]
            return {"pg_summary": {"num_pg_by_state": [{"name": s, "num": 8} for s in states]}}
        if prefix == "health":
            return {"status": "HEALTH_WARN" if self.checks else "HEALTH_OK",
                    "checks": self.checks}
        if prefix == "osd metadata":
            return [{"id": 0, "hostname": "here", "devices": "loop0"}]
        if prefix in ("osd set", "osd unset"):
            return None
        raise AssertionError(prefix)


def hygiene(mon: Mon, root: Path | None = None, **options: Any) -> Hygiene:
    def host_for(name: str) -> RootedHost:
        assert root is not None
        return RootedHost(root)

    opts = HygieneOptions(poll_seconds=0.01, health_timeout_seconds=0.3, **options)
    return Hygiene(mon, host_for, OsdDevices(mon, host_for), opts,  # type: ignore[arg-type]
                   log=lambda m: None)


def test_scrub_flags_set_for_the_run_and_only_those_unset():
    mon = Mon(flags="noscrub,sortbitwise")
    h = hygiene(mon)
    assert h.start_run([]) == ["nodeep-scrub"]
    assert h.finish_run() == []
    assert [(p, a) for p, a in mon.calls if p in ("osd set", "osd unset")] == [
        ("osd set", {"key": "nodeep-scrub"}), ("osd unset", {"key": "nodeep-scrub"})]


def test_step_waits_for_scrubs_and_settled_pgs_in_phases(tmp_path):
    (tmp_path / "proc/sys/vm").mkdir(parents=True)
    (tmp_path / "proc/sys/vm/drop_caches").write_text("")
    mon = Mon(pg_states=[["active+clean+scrubbing"], ["active+undersized+degraded"],
                         ["active+clean"]])
    h = hygiene(mon, tmp_path)
    metrics = PhaseMetrics("r", "s", {}, ["radosbench"], 1)
    h.metrics = metrics
    timings = h.before_step("abc")
    assert list(timings) == ["scrub_wait", "health_gate", "drop_caches"]
    assert all(t["end"] >= t["start"] for t in timings.values())
    assert (tmp_path / "proc/sys/vm/drop_caches").read_text() == "3"
    assert "cephscope_run_phase{" not in metrics.render()  # phase over


def test_health_gate_names_the_unexpected_check():
    mon = Mon(checks={"SLOW_OPS": {"summary": {"message": "3 slow ops"}},
                      "OSDMAP_FLAGS": {"summary": {"message": "noscrub flag(s) set"}}})
    with pytest.raises(HygieneError, match=r"no unexpected health check not reached after "
                                           r"0s: SLOW_OPS: 3 slow ops$"):
        hygiene(mon, drop_caches=False).before_step("abc")
    assert hygiene(mon, drop_caches=False, health_allow=("SLOW_OPS",)).before_step("x")


def test_health_gate_passes_muted_checks():
    # Reef from Debian trixie: the dev cluster mutes MGR_MODULE_DEPENDENCY (`ceph health mute`).
    muted = {"summary": {"message": "11 mgr modules have failed dependencies"}, "muted": True}
    mon = Mon(checks={"MGR_MODULE_DEPENDENCY": muted})
    assert "health_gate" in hygiene(mon, drop_caches=False).before_step("abc")
    mon.checks["MGR_MODULE_DEPENDENCY"] = {**muted, "muted": False}
    with pytest.raises(HygieneError, match="MGR_MODULE_DEPENDENCY: 11 mgr modules"):
        hygiene(mon, drop_caches=False).before_step("abc")


def test_unsettled_pgs_fail_the_step_naming_their_state():
    mon = Mon(pg_states=[["active+recovering+degraded"]])
    with pytest.raises(HygieneError, match="PGs settled not reached.*8 active"
                                           r"\+recovering\+degraded"):
        hygiene(mon, drop_caches=False, scrub_guard=False).before_step("abc")


def test_a_laggy_pg_fails_the_health_gate():
    """A laggy PG has no read lease: every client op on it waits, so no step starts on it."""
    mon = Mon(pg_states=[["active+clean+laggy", "active+clean"]])
    with pytest.raises(HygieneError, match=r"PGs settled not reached.*8 active\+clean\+laggy"):
        hygiene(mon, drop_caches=False, scrub_guard=False).before_step("abc")


@pytest.mark.parametrize(("flag", "spec", "expected"), [
    (None, None, 30.0),  # neither says: the default
    (None, 5.0, 5.0),    # the spec's CBT idle_monitor_sleep
    (2.0, 5.0, 2.0),     # the flag overrides the spec
    (0.0, 5.0, None),    # 0 turns it off
])
def test_idle_window_length_from_flag_then_spec_then_default(monkeypatch, flag, spec, expected):
    slept: list[float] = []
    monkeypatch.setattr("cephscope.runner.hygiene.time.sleep", slept.append)
    timings: dict[str, Any] = {}
    hygiene(Mon(), idle_baseline_seconds=flag).idle_baseline(timings, spec)
    assert slept == ([] if expected is None else [expected])
    assert ("idle_baseline" in timings) == (expected is not None)


def test_quiet_gap_is_a_phase_before_and_after_the_measurement():
    """The gap ends the steps before the measurement and is the whole of `after_step`; each
    lasts its length and is tagged while it lasts."""
    h = hygiene(Mon(), scrub_guard=False, health_gate=False, drop_caches=False,
                quiet_gap_seconds=0.05)
    tagged = []
    metrics = PhaseMetrics("r", "s", {}, ["radosbench"], 1)
    h.metrics = metrics
    real_sleep = time.sleep

    def sleep(seconds: float) -> None:
        tagged.append(metrics.render())
        real_sleep(seconds)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(time, "sleep", sleep)
        before, after = h.before_step("abc"), h.after_step("abc")
    assert list(before) == ["quiet_before"] and list(after) == ["quiet_after"]
    for timings in (before["quiet_before"], after["quiet_after"]):
        assert timings["end"] - timings["start"] >= 0.05
    assert 'phase="quiet_before"' in tagged[0] and 'phase="quiet_after"' in tagged[1]


@pytest.mark.parametrize("gap", [0.0, None])
def test_no_quiet_gap_when_off_or_unresolved(gap):
    h = hygiene(Mon(), scrub_guard=False, health_gate=False, drop_caches=False,
                quiet_gap_seconds=gap)
    assert h.before_step("abc") == {} and h.after_step("abc") == {}


def test_default_quiet_gap_is_one_scrape_interval_and_the_margin():
    assert quiet_gap_for(5.0) == 5.0 + QUIET_GAP_MARGIN_SECONDS
    assert quiet_gap_for(None) == 0.0 and quiet_gap_for(0.0) == 0.0


@pytest.mark.parametrize("text", ["-1", "nan", "inf", "soon"])
def test_quiet_gap_flag_refuses_what_is_not_seconds(text, capsys):
    parser = argparse.ArgumentParser(prog="cephscope sweep")
    add_arguments(parser)
    with pytest.raises(SystemExit):
        parser.parse_args(["spec.yaml", "--quiet-gap", text])
    assert f"argument --quiet-gap: {text!r}" in capsys.readouterr().err


def test_quiet_gap_flag_reaches_the_hygiene_options():
    parser = argparse.ArgumentParser(prog="cephscope sweep")
    add_arguments(parser)
    assert options_from_args(parser.parse_args(["s.yaml", "--quiet-gap", "2.5"])
                             ).hygiene.quiet_gap_seconds == 2.5
    assert options_from_args(parser.parse_args(["s.yaml"])).hygiene.quiet_gap_seconds is None
