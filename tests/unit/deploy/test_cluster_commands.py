"""The dev cluster's commands: client argv from the cluster's release, a failing command
reported as one DevClusterError line naming the host it ran on, and mon commands in waves."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from cephscope.deploy.cluster_commands import ClusterCommands
from cephscope.deploy.cluster_layout import ClusterLayout, DevClusterError
from cephscope.deploy.placement import DevHost, Placement, Release


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


def test_mon_waves_run_as_one_batch_of_the_release_and_say_the_failing_command(tmp_path: Path) -> None:
    layout = ClusterLayout.resolve(tmp_path / "c")
    layout.release = Release("tentacle", tmp_path / "root")
    sent: list[tuple[list[str], bytes | None]] = []

    class Batch(Placement):
        def run(self, host: DevHost, release: Release, argv: Sequence[str], timeout: float = 60,
                input_bytes: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
            sent.append((self.command(host, release, argv), input_bytes))
            failed = {"ret": -17, "outs": "Error EEXIST: fs already exists", "outb": ""}
            answer = json.dumps({"answers": [[failed]]}).encode()
            return subprocess.CompletedProcess(list(argv), 0, answer, b"")

    commands = ClusterCommands(layout, Batch(layout.state_dir))
    assert commands.mon_waves([[], []]) == [] and sent == []  # nothing to send: nothing runs
    with pytest.raises(DevClusterError, match=r"`ceph fs new` failed: Error EEXIST"):
        commands.mon_waves([[{"prefix": "fs new", "fs_name": "cephfs"}]])
    (argv, stdin), = sent
    # the release root's own python3 and python3-rados, through the same wrapper as its tools
    assert argv[:3] == [sys.executable, "-m", "cephscope.deploy.rootexec"]
    assert argv[argv.index("--") + 1:][:2] == ["/usr/bin/python3", "-c"] and str(layout.conf_path) in argv
    fs_new = {"prefix": "fs new", "fs_name": "cephfs", "format": "json"}
    assert json.loads(stdin or b"") == {"waves": [[fs_new]]}
