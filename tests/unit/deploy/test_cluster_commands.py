"""The dev cluster's commands: client argv from the cluster's release, a failing command
reported as one DevClusterError line naming the host it ran on, and commands sent together."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from cephscope.deploy.cluster_commands import ClusterCommands
from cephscope.deploy.cluster_layout import ClusterLayout, DevClusterError
from cephscope.deploy.placement import DevHost, Placement, PlacementError, Release


def test_client_argv_names_the_conf_and_runs_from_the_release_root(tmp_path: Path) -> None:
    layout = ClusterLayout.resolve(tmp_path / "c")
    commands = ClusterCommands(layout, Placement(layout.state_dir))
    conf = str(layout.conf_path)
    assert commands.ceph_argv("-s") == ["ceph", "-c", conf, "--connect-timeout", "15", "-s"]
    assert commands.rados_argv("lspools") == ["rados", "-c", conf, "lspools"]
    assert commands.env()["CEPH_CONF"] == conf
    layout.release = Release("reef", tmp_path / "root")
    wrapped = commands.rbd_argv("ls")
    assert wrapped[:3] == [sys.executable, "-m", "cephscope.deploy.rootexec"]
    assert f"--bind={layout.state_dir}" in wrapped and wrapped[-4:] == ["rbd", "-c", conf, "ls"]


def test_a_failing_command_is_one_line_naming_its_host(tmp_path: Path) -> None:
    layout = ClusterLayout.resolve(tmp_path / "c")
    commands = ClusterCommands(layout, Placement(layout.state_dir))
    with pytest.raises(DevClusterError, match=r"^losetup --no-such-option failed \(1\): .*"):
        commands.run_here(["losetup", "--no-such-option"])
    elsewhere = DevHost("host9", netns=None)
    with pytest.raises(DevClusterError, match="could not start"):
        commands.run_on(elsewhere, ["/nonexistent/ceph-osd"])


def test_commands_sent_together_all_run_before_the_first_failure_is_raised(tmp_path: Path) -> None:
    layout = ClusterLayout.resolve(tmp_path / "c")
    started: list[list[str]] = []
    lock = threading.Lock()
    all_started = threading.Barrier(3, timeout=5)  # each waits for the others: they run at once

    class Together(Placement):
        def run(self, host: DevHost, release: Release, argv: Sequence[str], timeout: float = 60,
                input_bytes: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
            with lock:
                started.append(list(argv))
            all_started.wait()
            if "bad" in argv:
                raise PlacementError("ceph osd pool create bad failed (1): Error EINVAL")
            return subprocess.CompletedProcess(list(argv), 0, b"", b"")

    commands = ClusterCommands(layout, Together(layout.state_dir))
    with pytest.raises(DevClusterError, match="pool create bad failed"):
        commands.ceph_together([["osd", "pool", "create", "p1"], ["osd", "pool", "create", "bad"],
                                ["osd", "pool", "create", "p3"]])
    assert sorted(argv[-1] for argv in started) == ["bad", "p1", "p3"]
    commands.ceph_together([])  # nothing to send: nothing runs
