"""HostExec: argv building and quoting. The SSH quoting is checked by handing the remote line to
a real shell, as sshd does, and comparing the argv that arrives."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from cephscope.runner.hostexec import HostExecError, LocalHost, SshHost, host_exec

HOSTILE = ["a b", "$(touch /tmp/cephscope-pwned)", "`id`", "x;y", "'q'", '"d"', "*", "{id}", "", "\\n"]


def test_local_run_passes_argv_unchanged():
    proc = LocalHost().run([sys.executable, "-c", "import sys,json;print(json.dumps(sys.argv[1:]))",
                            *HOSTILE], timeout=30)
    assert json.loads(proc.stdout) == HOSTILE


def test_local_env_and_failure_names_host():
    proc = LocalHost().run([sys.executable, "-c", "import os;print(os.environ['K'])"], timeout=30,
                           env={"K": "v w"})
    assert proc.stdout.decode().strip() == "v w"
    with pytest.raises(HostExecError, match=r"^local: .*failed \(3\)"):
        LocalHost().run([sys.executable, "-c", "raise SystemExit(3)"], timeout=30)


def test_ssh_remote_line_is_one_quoted_argv(tmp_path):
    host = SshHost("client1", user="ceph", port=2222, identity_file=tmp_path / "id",
                   control_dir=tmp_path, options=["StrictHostKeyChecking=yes"])
    argv = host.argv([sys.executable, "-c", "import sys,json;print(json.dumps(sys.argv[1:]))", *HOSTILE])
    assert argv[0] == "ssh" and "BatchMode=yes" in argv and argv[-3:-1] == ["--", "client1"]
    assert argv[argv.index("-l"):argv.index("-l") + 2] == ["-l", "ceph"]
    # sshd runs the remote line with the user's shell: do the same here.
    out = subprocess.run(["sh", "-c", argv[-1]], capture_output=True, check=True)
    assert json.loads(out.stdout) == HOSTILE


def test_a_hostile_host_name_is_never_an_ssh_option(tmp_path):
    """The destination follows `--`: a host name that looks like an option (an OSD's
    metadata can report any NODE_NAME) is a destination OpenSSH refuses, never a
    ProxyCommand run here. Checked with the real ssh client."""
    marker = tmp_path / "pwned"
    hostile = f"-oProxyCommand=touch {marker}"
    host = SshHost(hostile, connect_timeout=2)
    argv = host.argv(["sync"])
    assert argv[-3:] == ["--", hostile, "sync"]
    proc = host.run(["sync"], timeout=30, check=False)
    assert proc.returncode != 0 and not marker.exists()
    SshHost(hostile, control_dir=tmp_path).close()  # `ssh -O exit` takes the same care
    assert not marker.exists()


def test_host_exec_local_names():
    assert isinstance(host_exec(None), LocalHost)
    assert isinstance(host_exec("localhost"), LocalHost)
    assert isinstance(host_exec("osd-host-1", user="root"), SshHost)


def test_ssh_keepalive_multiplexing_and_user_options_first(tmp_path):
    host = SshHost("client1", control_dir=tmp_path, options=["ServerAliveInterval=9"])
    argv = host.ssh_argv()
    options = [argv[i + 1] for i, a in enumerate(argv) if a == "-o"]
    # ssh keeps the first value of an option: the user's settings come before the defaults
    assert options.index("ServerAliveInterval=9") < options.index("ServerAliveInterval=2")
    assert "ServerAliveCountMax=3" in options and "ControlMaster=auto" in options
    assert f"ControlPath={tmp_path}/%C" in options and "ControlPersist=30" in options
    assert not [o for o in SshHost("c").ssh_argv() if o.startswith("Control")]


def test_ssh_close_ends_the_master_with_the_same_options(tmp_path):
    fake = tmp_path / "ssh"
    record = tmp_path / "argv"
    fake.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > {record}\n")
    fake.chmod(0o755)
    SshHost("client1", control_dir=tmp_path, ssh_bin=str(fake)).close()
    argv = record.read_text().splitlines()
    assert argv[-4:] == ["-O", "exit", "--", "client1"] and f"ControlPath={tmp_path}/%C" in argv
    record.unlink()
    SshHost("client1", ssh_bin=str(fake)).close()  # no master: nothing to end
    assert not record.exists()


def test_on_each_host_runs_hosts_at_once_and_raises_the_first_failure_after_all():
    import threading

    from cephscope.runner.hostexec import on_each_host

    arrived = threading.Barrier(3, timeout=10)  # passes only if all three run at once
    finished = []

    def work(name: str, fail: bool = False) -> str:
        arrived.wait()
        finished.append(name)
        if fail:
            raise HostExecError(f"{name}: refused")
        return name.upper()

    assert on_each_host({h: (lambda h=h: work(h)) for h in ("a", "b", "c")}) == {
        "a": "A", "b": "B", "c": "C"}
    arrived.reset()
    finished.clear()
    with pytest.raises(HostExecError, match="b: refused"):
        on_each_host({"a": lambda: work("a"), "b": lambda: work("b", True),
                      "c": lambda: work("c", True)})
    assert sorted(finished) == ["a", "b", "c"]  # every host got to finish its work
