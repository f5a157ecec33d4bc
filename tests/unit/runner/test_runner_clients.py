"""Benchmarks on several clients: the remote guard, reachability errors, per-client windows and
rows, and a restart command carrying {id} run from a spec file through a whole sweep.

A "remote" host here is this machine behind `sh -c LINE`, exactly what sshd does with the line
ssh sends, so quoting, the guard and its process-group kill are the real ones."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cephscope.runner.benchmarks.base import BenchmarkError
from cephscope.runner.benchmarks.toolproc import ToolCommand, guard_times, run_tools
from cephscope.runner.cephclient import CephTarget
from cephscope.runner.clients import (
    ClientsError,
    SshSettings,
    build_clients,
    client_windows,
    per_client_rows,
    require_reachable,
    start_skew,
)
from cephscope.runner.hostexec import SshHost
from cephscope.runner.restart import RestartJournal, make_restart_method
from cephscope.runner.spec import HostsSpec, Spec
from cephscope.runner.sweep import Sweep, SweepOptions
from cephscope.runner.wiring import Collaborators, Wire
from tests.unit.runner_fakes import CountingBench, FakeCluster, fake_wiring


@dataclass
class ShellHost:
    """A host whose command line goes through `sh -c`, as sshd hands it to the login shell.
    The trailing `exit` keeps sh as the guard's parent (ssh stays between runner and guard too)."""

    name: str

    def argv(self, argv: Sequence[str], env: Mapping[str, str] | None = None) -> list[str]:
        prefix = ["env", *(f"{k}={v}" for k, v in (env or {}).items())] if env else []
        return ["sh", "-c", shlex.join([*prefix, *argv]) + "; exit $?"]

    def run(self, argv: Sequence[str], **kw: Any) -> subprocess.CompletedProcess[bytes]:
        raise NotImplementedError

    def popen(self, argv: Sequence[str], env: Mapping[str, str] | None = None,
              **kw: Any) -> subprocess.Popen[bytes]:
        return subprocess.Popen(self.argv(argv, env), **kw)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_remote_tool_runs_under_the_guard_with_quoted_argv_and_ceph_env(tmp_path: Path) -> None:
    hostile = ["a b", "$(touch /tmp/cephscope-pwned)", "x;y", "{id}", "'q'"]
    code = ("import os,sys,json;print(json.dumps([sys.argv[1:], os.environ.get('CEPH_CONF'),"
            " os.environ.get('HOME_SECRET')]))")
    cmd = ToolCommand([sys.executable, "-c", code, *hostile], tmp_path / "out", tmp_path / "err",
                      env={"CEPH_CONF": "/x y/ceph.conf", "HOME_SECRET": "local only"},
                      host=ShellHost("client1"))
    run_tools([cmd], 60, "test")
    argv, conf, secret = json.loads((tmp_path / "out").read_text())
    assert argv == hostile and conf == "/x y/ceph.conf"
    assert secret is None  # only the tool's CEPH_* settings travel to a client
    times = guard_times(tmp_path / "err")
    assert times["started"] <= times["ended"]
    assert not Path("/tmp/cephscope-pwned").exists()


def test_a_failing_client_ends_the_others_and_no_tool_outlives_the_step(tmp_path: Path) -> None:
    pid_file = tmp_path / "sleeper.pid"
    sleeper = (f"import os,time,pathlib;pathlib.Path({str(pid_file)!r})"
               ".write_text(str(os.getpid()));time.sleep(60)")
    failer = "import time,sys;time.sleep(1.5);sys.stderr.write('rbd: connection lost\\n');sys.exit(3)"
    commands = [
        ToolCommand([sys.executable, "-c", sleeper], tmp_path / "a.out", tmp_path / "a.err",
                    host=ShellHost("client1")),
        ToolCommand([sys.executable, "-c", failer], tmp_path / "b.out", tmp_path / "b.err",
                    host=ShellHost("client2")),
    ]
    started = time.monotonic()
    with pytest.raises(BenchmarkError, match=r"on client2 exited with status 3"):
        run_tools(commands, 120, "radosbench write")
    assert time.monotonic() - started < 30  # did not wait for the 60 s sleeper
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if _alive(pid):
        os.kill(pid, signal.SIGKILL)
        pytest.fail("the other client's tool outlived its step")


def test_reachability_names_the_host_and_ssh_reason(tmp_path: Path) -> None:
    fake_ssh = tmp_path / "ssh"
    fake_ssh.write_text("#!/bin/sh\necho 'Host key verification failed.' >&2\nexit 255\n")
    fake_ssh.chmod(0o755)
    clients = [SshHost("client2", ssh_bin=str(fake_ssh))]
    with pytest.raises(ClientsError,
                       match=r"client2: cannot run commands there: Host key verification failed\."):
        require_reachable(clients)
    require_reachable([SshHost("ok", ssh_bin="/bin/true")])


def test_build_clients_merges_flags_over_spec() -> None:
    spec_hosts = HostsSpec(clients=("c1", "c2"), user="ceph", ssh_port=2222,
                           ssh_config="/etc/cs/ssh_config", ssh_options=("ConnectionAttempts=2",))
    ssh = SshSettings(user="root", options=("ServerAliveInterval=5",)).merged(spec_hosts)
    c1, _c2 = build_clients(spec_hosts.clients, ssh, control_dir=None)
    argv = c1.argv(["true"])
    assert argv[:3] == ["ssh", "-F", "/etc/cs/ssh_config"]
    assert argv[argv.index("-l"):argv.index("-l") + 2] == ["-l", "root"]
    assert argv[argv.index("-p"):argv.index("-p") + 2] == ["-p", "2222"]
    assert "ConnectionAttempts=2" in argv and "ServerAliveInterval=5" in argv
    assert build_clients(["localhost"], ssh, None) == []
    with pytest.raises(ClientsError, match="'local' with other clients"):
        build_clients(["c1", "local"], ssh, None)


def test_client_windows_skew_and_rows(tmp_path: Path) -> None:
    for name, start, end in (("client1", 100.0, 110.0), ("client2", 100.4, 111.0)):
        for i, delta in enumerate((0.0, 0.2)):
            (tmp_path / f"fio-randwrite.{name}.{i}.stderr").write_text(
                f"cephscope-guard: started {start + delta:.6f} pid 1\nnoise\n"
                f"cephscope-guard: ended {end - delta:.6f} status 0\n")
    files = sorted(tmp_path.iterdir())
    windows = client_windows(files, ["client1", "client2"])
    assert windows == {"client1": {"started": 100.0, "ended": 110.0},
                       "client2": {"started": 100.4, "ended": 111.0}}
    assert start_skew(windows) == pytest.approx(0.4)
    assert start_skew({"client1": windows["client1"]}) is None
    results = [{"mode": "randwrite", "clients": {
        "client1": {"iops": 10.0, "latency_percentiles_seconds": {"99": 0.5}, "ops": 100},
        "client2": {"iops": 12.0, "latency_percentiles_seconds": {"99.0": 0.7}, "ops": 120}}}]
    rows = per_client_rows("s1", "librbdfio", results, {"randwrite": {"clients": windows}})
    assert [(r["client"], r["iops"], r["latency_p99_seconds"], r["start"]) for r in rows] == [
        ("client1", 10.0, 0.5, 100.0), ("client2", 12.0, 0.7, 100.4)]


SPEC_WITH_COMMAND_RESTART = """\
ceph_config:
  osd_op_num_shards: [2, 4]
restart:
  method: command
  command: [{script}, "osd-{{id}}"]
benchmarks:
  radosbench:
    op_size: 4096
    time: 5
    write_only: true
"""


def command_restart_wiring(cluster: FakeCluster) -> Wire:
    """The fake cluster, restarted through the spec's own command method (a real argv run)."""

    def wire(spec: Spec, target: CephTarget | None, journal: RestartJournal) -> Collaborators:
        command = make_restart_method("command", cluster, None,  # type: ignore[arg-type]
                                      spec.restart.command)

        class Both:
            name = "command"

            def restart(self, osd_ids: Sequence[int], timeout_seconds: float,
                        on_stopped: Callable[[], None] = lambda: None) -> None:
                command.restart(osd_ids, timeout_seconds)
                cluster.restart(osd_ids, timeout_seconds)

        return fake_wiring(cluster, Both())(spec, target, journal)

    return wire


def test_sweep_from_spec_file_with_command_restart_method(tmp_path: Path) -> None:
    marker = tmp_path / "restarted"
    spec_path = tmp_path / "cmd.yaml"
    script = tmp_path / "record-restart"
    script.write_text(f"#!/bin/sh\necho \"$1\" >> {marker}\n")
    script.chmod(0o755)
    spec_path.write_text(SPEC_WITH_COMMAND_RESTART.format(script=script))
    cluster = FakeCluster()
    opts = SweepOptions(spec_path=spec_path, results_dir=tmp_path / "run",
                        metrics_linger_seconds=0, tty=False)
    sweep = Sweep(opts, command_restart_wiring(cluster), log=lambda m: None,
                  benchmarks={"radosbench": CountingBench})
    assert sweep.run() == 0
    lines = marker.read_text().split()
    # every OSD restarted with {id} substituted: once per shard value, once for the restore
    assert sorted(set(lines)) == ["osd-0", "osd-1", "osd-2"]
    assert len(lines) == 3 * len(cluster.restarts)


def test_report_and_summary_have_a_row_per_client(tmp_path: Path) -> None:
    from cephscope.runner.report.build import client_table
    from cephscope.runner.results import RunDir
    from cephscope.runner.steps import Step

    step = Step(id="abc123", benchmark="radosbench", iteration=0, params={"op_size": 4096},
                pool_profile=None, ceph_config={})
    rd = RunDir.create(tmp_path / "run", "r1", tmp_path / "s.yaml", "", {}, [step])
    rd.begin_step(step)
    per = {"client1": {"iops": 100.0, "bandwidth_bytes_per_second": 2**20, "ops": 1000,
                       "latency_avg_seconds": 0.002},
           "client2": {"iops": 50.0, "bandwidth_bytes_per_second": 2**19, "ops": 500,
                       "latency_avg_seconds": 0.004}}
    results = [{"mode": "write", "iops": 150.0, "clients": per}]
    modes = {"write": {"clients": {"client1": {"started": 1.0, "ended": 11.0},
                                   "client2": {"started": 1.25, "ended": 11.5}},
                       "start_skew_seconds": 0.25}}
    rd.finish_step(step, results, {"started": 1.0, "ended": 12.0, "modes": modes}, {})
    header, body = client_table(rd.path)  # type: ignore[misc]
    assert header[:4] == ["step", "mode", "client", "IOPS"]
    assert [row[2:6] for row in body] == [["client1", "100", "1.0", "2.00"],
                                          ["client2", "50", "0.5", "4.00"]]
    assert body[0][-1] == "0.250"
    rd.write_summary([step])
    rows = (rd.path / "summary-clients.csv").read_text().splitlines()
    assert rows[0].startswith("step,benchmark,mode,client,iops") and len(rows) == 3
    assert rows[2].split(",")[:5] == ["abc123", "radosbench", "write", "client2", "50.0"]


def test_ssh_control_dir_is_short_private_and_stable_for_a_resume(tmp_path: Path) -> None:
    from cephscope.runner.clients import close_clients, ssh_control_dir

    run = tmp_path / ("a-long-results-dir-name-" * 6)
    first, again = ssh_control_dir(run), ssh_control_dir(run)
    assert first == again and first != ssh_control_dir(tmp_path / "other")
    assert (first.stat().st_mode & 0o777) == 0o700
    assert len(str(first / ("0" * 40)).encode()) < 104  # sun_path; %C is 40 hex characters
    settings = SshSettings().merged(HostsSpec(clients=("c1",)))
    assert settings.multiplex
    (client,) = build_clients(["c1"], settings, first)
    assert f"ControlPath={first}/%C" in client.argv(["true"])
    close_clients([SshHost("c1", control_dir=first, ssh_bin="/bin/true")], first)
    assert not first.exists()
    close_clients([], ssh_control_dir(tmp_path / "other"))


@dataclass
class LateShellHost(ShellHost):
    """A host whose session takes `delay` seconds to set up (a slow SSH handshake)."""

    delay: float = 0.0

    def argv(self, argv: Sequence[str], env: Mapping[str, str] | None = None) -> list[str]:
        line = ShellHost.argv(self, argv, env)[-1]
        return ["sh", "-c", f"sleep {self.delay}; {line}"]


def test_start_barrier_starts_clients_together_despite_a_slow_session(tmp_path: Path) -> None:
    tool = [sys.executable, "-c", "pass"]
    commands = [ToolCommand(tool, tmp_path / f"{name}.out", tmp_path / f"x.{name}.0.stderr",
                            host=LateShellHost(name, delay=delay))
                for name, delay in (("client1", 0.0), ("client2", 3.0))]
    run_tools(commands, 60, "test")
    windows = client_windows(sorted(tmp_path.glob("*.stderr")), ["client1", "client2"])
    readies = [guard_times(c.stderr_path)["ready"] for c in commands]
    assert readies[1] - readies[0] > 2.5  # client2's session came 3 s late ...
    skew = start_skew(windows)
    # ... and both started together (without the barrier: 3 s apart; the margin is for a
    # loaded machine, where starting a process alone can take a second)
    assert skew is not None and skew < 1.5, windows


def test_guard_never_starts_its_tool_when_the_runner_goes_before_go(tmp_path: Path) -> None:
    from cephscope.runner.benchmarks.toolproc import REMOTE_GUARD

    marker = tmp_path / "ran"
    proc = subprocess.Popen([sys.executable, "-c", REMOTE_GUARD, sys.executable, "-c",
                             f"open({str(marker)!r}, 'w')"],
                            stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    _out, err = proc.communicate(b"", timeout=30)  # EOF, no "go"
    assert proc.returncode == 255 and b"ready" in err and b"started" not in err
    assert not marker.exists()


@pytest.mark.parametrize("case", ["other owner", "group writable", "symlink"])
def test_ssh_control_dir_made_by_someone_else_is_refused(tmp_path: Path, monkeypatch,
                                                         case: str) -> None:
    """Issue 23 finding 2: the socket dir's name is predictable; one that another user made
    first (or a symlink, or one others can enter) is refused, naming the reason."""
    import os
    import tempfile

    from cephscope.runner.clients import ClientsError, ssh_control_dir

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    run = tmp_path / "run"
    made = ssh_control_dir(run)  # learn the name, then set the trap in its place
    made.rmdir()
    if case == "symlink":
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir(mode=0o700)
        made.symlink_to(elsewhere)
        reason = "not a directory"
    else:
        made.mkdir(mode=0o700)
        if case == "group writable":
            made.chmod(0o770)
            reason = r"not private \(mode 770\)"
        else:
            real = os.geteuid()
            monkeypatch.setattr(os, "geteuid", lambda: real + 1)
            reason = f"owned by uid {real}, not by this user"
    with pytest.raises(ClientsError, match=reason):
        ssh_control_dir(run)
