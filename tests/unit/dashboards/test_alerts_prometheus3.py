"""The shipped rules and their promtool tests under Prometheus 3.5's promtool (Debian sid's, run
from the Tentacle root filesystem that deploy/rootfs.py builds and caches), beside the host's
Prometheus 2.42 ones in test_alerts.py."""

from __future__ import annotations

from pathlib import Path

from tests.unit.prometheus3_tools import REPO, promtool3

ALERTS = REPO / "alerts"


def test_promtool_is_prometheus_3() -> None:
    result = promtool3("--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("promtool, version 3."), result.stdout


def test_rules_check_under_prometheus_3() -> None:
    files = sorted(str(p) for p in ALERTS.glob("*.rules.yml"))
    assert files
    result = promtool3("check", "rules", *files)
    assert result.returncode == 0, result.stdout + result.stderr


def test_rule_tests_pass_under_prometheus_3() -> None:
    files = sorted(str(p) for p in (ALERTS / "tests").glob("*.test.yml"))
    assert files
    result = promtool3("test", "rules", *files)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_rules_give_the_same_answers_on_native_histograms() -> None:
    """The rule tests whose input is the OSD latency histograms stored native (with custom
    buckets, as the Prometheus 3 stack stores them): the recording rules and the slow-ops alert
    answer as in the classic cases of cephscope-alerts.test.yml."""
    files = sorted(str(p) for p in (ALERTS / "tests" / "prometheus3").glob("*.test.yml"))
    assert files
    text = "".join(Path(f).read_text() for f in files)
    assert "custom_values" in text and "cephscope_osd_op_latency_seconds_bucket" not in text
    result = promtool3("test", "rules", *files)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
