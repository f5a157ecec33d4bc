"""The shipped rules and their promtool tests under Prometheus 3.5's promtool (Debian sid's, run
from the Tentacle root filesystem that deploy/rootfs.py builds and caches), beside the host's
Prometheus 2.42 ones in test_alerts.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from cephscope.deploy import rootfs

REPO = Path(__file__).resolve().parents[3]
ALERTS = REPO / "alerts"


def promtool3(*args: str) -> subprocess.CompletedProcess[str]:
    # Built once (about a minute from Debian's archive), then cached across sessions.
    root = rootfs.build("tentacle")
    argv = [sys.executable, "-m", "cephscope.deploy.rootexec", "--root", str(root),
            f"--bind={REPO}", "--", "promtool", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=REPO, check=False)


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
