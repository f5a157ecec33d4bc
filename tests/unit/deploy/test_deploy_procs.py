"""pid_from_file: a live process of ours is found even while its command line is still empty
(inside execve on a loaded machine), and a stranger's pid is not."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cephscope.deploy import procs


def test_empty_cmdline_of_a_process_in_execve_is_waited_out(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch):
    pid_file = tmp_path / "x.pid"
    pid_file.write_text(f"{os.getpid()}\n")
    replies = [[], [], ["prometheus", "--web.listen-address=127.0.0.1:1"]]
    monkeypatch.setattr(procs, "proc_cmdline", lambda pid: replies.pop(0) if replies else [])
    assert procs.pid_from_file(pid_file, "--web.listen-address=127.0.0.1:1") == os.getpid()


def test_other_command_line_is_not_ours(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    pid_file = tmp_path / "x.pid"
    pid_file.write_text(f"{os.getpid()}\n")
    monkeypatch.setattr(procs, "EXEC_SETTLE_SECONDS", 0.05)
    assert procs.pid_from_file(pid_file, "--web.listen-address=127.0.0.1:1") is None
    monkeypatch.setattr(procs, "proc_cmdline", lambda pid: [])
    assert procs.pid_from_file(pid_file, "--web.listen-address=127.0.0.1:1") is None
