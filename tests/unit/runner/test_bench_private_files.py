"""Key files for the tools: 0600 from their creation here; on a client (the remote scripts
run here through a LocalHost, as a client's python3 would run them) in a private directory,
removed after the step, and the launcher that hands a key to a tool's environment removes its
file before the tool starts."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from cephscope.runner.benchmarks.base import BenchmarkError
from cephscope.runner.benchmarks.private_files import (
    ENV_LAUNCHER,
    REMOTE_REMOVE,
    TEMP_PREFIX,
    env_file_content,
    place,
    remove,
    write_local,
)
from cephscope.runner.hostexec import LocalHost


def _mode(path: str | Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_a_local_key_file_is_0600_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        target = tmp_path / "k.conf"
        target.write_text("stale")
        os.chmod(target, 0o644)
        private = write_local(target, "key = x\n")
    finally:
        os.umask(old)
    assert private.host is None and _mode(private.path) == 0o600
    assert Path(private.path).read_text() == "key = x\n"
    remove(private)
    assert not target.exists()
    os.symlink(tmp_path / "elsewhere", target)  # a planted link is replaced, not followed
    write_local(target, "k")
    assert not (tmp_path / "elsewhere").exists() and not target.is_symlink()


def test_a_client_key_file_lives_in_a_private_directory_until_removed(tmp_path: Path) -> None:
    private = place(LocalHost("client1"), "swiftbench.conf", "key = s3cret\n", tmp_path)
    directory = Path(private.path).parent
    try:
        assert directory.name.startswith(TEMP_PREFIX)
        assert _mode(private.path) == 0o600 and _mode(directory) == 0o700
        assert Path(private.path).read_text() == "key = s3cret\n"
        assert not list(tmp_path.iterdir())  # nothing in the step dir for a client
    finally:
        remove(private)
    assert not directory.exists()


def test_the_remover_refuses_paths_it_did_not_make(tmp_path: Path) -> None:
    victim = tmp_path / "data"
    victim.mkdir()
    (victim / "file").write_text("x")
    done = subprocess.run([sys.executable, "-c", REMOTE_REMOVE, str(victim / "file")],
                          capture_output=True, text=True, check=False)
    assert done.returncode != 0 and "not a cephscope key file" in done.stderr
    assert (victim / "file").exists()
    with pytest.raises(BenchmarkError, match="cannot remove the tool's key file"):
        from cephscope.runner.benchmarks.private_files import PrivateFile

        remove(PrivateFile(LocalHost("client1"), str(victim / "file")))


def test_the_launcher_hands_keys_to_the_tool_and_removes_its_file(tmp_path: Path) -> None:
    private = place(LocalHost("client1"), "hsbench.env",
                    env_file_content({"AWS_ACCESS_KEY_ID": "AK", "AWS_SECRET_ACCESS_KEY": "S=1"}),
                    tmp_path)
    show = "import os; print(os.environ['AWS_ACCESS_KEY_ID'], os.environ['AWS_SECRET_ACCESS_KEY'])"
    done = subprocess.run([sys.executable, "-c", ENV_LAUNCHER, private.path,
                           sys.executable, "-c", show], capture_output=True, text=True,
                          check=True)
    assert done.stdout.split() == ["AK", "S=1"]
    assert not Path(private.path).parent.exists()
    remove(private)  # already gone: fine
