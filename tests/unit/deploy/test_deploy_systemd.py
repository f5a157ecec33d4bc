"""deploy/systemd: the exporter's unit for hosts with Ceph from packages, checked by
`systemd-analyze verify` (with ExecStart pointed at this venv's exporter) and its flags by the
exporter's own parser."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from cephscope.exporter.main import build_parser

REPO = Path(__file__).resolve().parents[3]
UNIT = REPO / "deploy" / "systemd" / "cephscope-exporter.service"
INSTALLED = "/opt/cephscope/bin/cephscope-exporter"  # where docs/deploy.md installs it
HERE = str(Path(sys.prefix) / "bin" / "cephscope-exporter")


def verify(text: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    unit = tmp_path / UNIT.name
    unit.write_text(text)
    return subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True,
                          text=True, timeout=60)


def exec_start(text: str) -> list[str]:
    joined = text.replace("\\\n", " ")
    (line,) = [ln for ln in joined.splitlines() if ln.startswith("ExecStart=")]
    return shlex.split(line.removeprefix("ExecStart="))


def test_unit_passes_systemd_analyze_verify_without_a_warning(tmp_path: Path) -> None:
    text = UNIT.read_text()
    assert INSTALLED in text
    proc = verify(text.replace(INSTALLED, HERE), tmp_path)
    assert proc.returncode == 0 and proc.stdout + proc.stderr == "", proc.stdout + proc.stderr


@pytest.mark.parametrize(("old", "new", "complaint"), [
    ("User=ceph", "Usr=ceph", "Unknown key 'Usr'"),
    (HERE, "/nonexistent/cephscope-exporter", "is not executable"),
])
def test_systemd_analyze_reports_a_broken_unit(tmp_path: Path, old: str, new: str, complaint: str) -> None:
    text = UNIT.read_text().replace(INSTALLED, HERE)
    proc = verify(text.replace(old, new, 1), tmp_path)
    assert complaint in proc.stdout + proc.stderr


def test_unit_runs_as_ceph_with_the_least_privilege_key() -> None:
    text = UNIT.read_text()
    argv = exec_start(text)
    assert argv[0] == INSTALLED
    flags = build_parser().parse_args(argv[1:])
    assert flags.ceph_name == "client.cephscope-exporter"
    assert flags.ceph_keyring == "/etc/ceph/ceph.client.cephscope-exporter.keyring"
    assert flags.web_listen_address == "127.0.0.1:9967"
    for setting in ("User=ceph", "Group=ceph", "NoNewPrivileges=yes", "CapabilityBoundingSet=\n"):
        assert setting in text
