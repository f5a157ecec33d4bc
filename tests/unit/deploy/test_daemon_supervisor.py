"""Daemons as processes (`ProcessDaemons`): the argv a start runs on the daemon's host, how a
daemon is found again (pid file AND a command line naming our conf), and stopping it. The
daemons here are stand-in processes whose command line names the conf, as `ceph-osd -c CONF`'s
does; the command runner that "starts" them is a fake of `Placement`."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from cephscope.deploy.cluster_commands import ClusterCommands
from cephscope.deploy.cluster_layout import ClusterLayout, DevClusterError
from cephscope.deploy.daemon_supervisor import ProcessDaemons, daemon_argv
from cephscope.deploy.placement import DevHost, Placement, PlacementError, Release


class StandInRunner(Placement):
    """Runs no Ceph: a daemon's start spawns a sleeping process whose command line names the
    conf and writes its pid file, as the daemon would after forking."""

    def __init__(self, layout: ClusterLayout, spawn: bool = True, lock_failures: int = 0) -> None:
        super().__init__(layout.state_dir)
        self.layout = layout
        self.spawn = spawn
        self.lock_failures = lock_failures
        self.calls: list[tuple[str, list[str]]] = []
        self.procs: list[subprocess.Popen[bytes]] = []

    def run(self, host: DevHost, release: Release, argv: Sequence[str], timeout: float = 60,
            input_bytes: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
        self.calls.append((host.name, list(argv)))
        if self.lock_failures:
            self.lock_failures -= 1
            raise PlacementError("ceph-osd failed (1): failed to lock pidfile")
        if self.spawn:
            kind = next(a for a in argv if a.startswith("ceph-")).removeprefix("ceph-")
            daemon = f"{kind}.{argv[argv.index('-i') + 1]}"
            proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)",
                                     str(self.layout.conf_path)])
            self.procs.append(proc)
            self.layout.pid_file(daemon).write_text(f"{proc.pid}\n")
        return subprocess.CompletedProcess(list(argv), 0, b"", b"")


@pytest.fixture
def layout(tmp_path: Path) -> ClusterLayout:
    layout = ClusterLayout.resolve(tmp_path / "c", num_osds=2)
    layout.asok_dir.mkdir(parents=True)
    layout.conf_path.write_text("[global]\n")
    return layout


@pytest.fixture
def runner(layout: ClusterLayout) -> Iterator[StandInRunner]:
    runner = StandInRunner(layout)
    yield runner
    for proc in runner.procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def test_argv_passes_the_environment_through_env_without_a_shell(layout: ClusterLayout) -> None:
    hostile = "-oProxyCommand=touch /tmp/x"
    argv = daemon_argv(layout, "osd.1", {"CONTAINER_NAME": "c", "NODE_NAME": hostile})
    assert argv == ["env", "CONTAINER_NAME=c", f"NODE_NAME={hostile}",
                    "ceph-osd", "-c", str(layout.conf_path), "-i", "1"]
    assert daemon_argv(layout, "mon.a") == ["ceph-mon", "-c", str(layout.conf_path), "-i", "a"]
    assert daemon_argv(layout, "mds.a") == ["ceph-mds", "-c", str(layout.conf_path), "-i", "a"]
    # the gateway is a client: started by its whole name
    assert daemon_argv(layout, "client.rgw.a") == ["radosgw", "-c", str(layout.conf_path),
                                                   "-n", "client.rgw.a"]
    for not_a_daemon in ("mds.", "client.admin", "client.rgw.", "rgw.a", "fuse.x"):
        with pytest.raises(DevClusterError, match="no daemon kind"):
            daemon_argv(layout, not_a_daemon)


def test_start_finds_the_daemon_and_stop_ends_it(layout: ClusterLayout, runner: StandInRunner) -> None:
    daemons = ProcessDaemons(layout, ClusterCommands(layout, runner), log=lambda m: None)
    assert daemons.pid("osd.1") is None
    daemons.start("osd.1", env={"NODE_NAME": "n"})
    pid = daemons.pid("osd.1")
    assert pid == runner.procs[0].pid
    assert runner.calls == [(layout.host_of("osd.1").name, daemon_argv(layout, "osd.1", {"NODE_NAME": "n"}))]
    assert daemons.stop("osd.1") is True
    assert runner.procs[0].poll() is not None and daemons.pid("osd.1") is None
    assert daemons.stop("osd.1") is False


def test_a_pid_file_naming_a_stranger_is_not_our_daemon(layout: ClusterLayout) -> None:
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        layout.pid_file("mgr.x").write_text(f"{stranger.pid}\n")
        daemons = ProcessDaemons(layout, ClusterCommands(layout, Placement(layout.state_dir)),
                                 log=lambda m: None)
        assert daemons.pid("mgr.x") is None
        assert daemons.stop("mgr.x") is False and stranger.poll() is None
    finally:
        stranger.kill()
        stranger.wait()


def test_a_daemon_that_never_writes_its_pid_file_is_reported(layout: ClusterLayout) -> None:
    runner = StandInRunner(layout, spawn=False)
    daemons = ProcessDaemons(layout, ClusterCommands(layout, runner), log=lambda m: None,
                             start_timeout=0.3)
    with pytest.raises(DevClusterError, match=rf"osd.0 did not start; see {layout.log_dir}/ceph-osd.0.log"):
        daemons.start("osd.0")


def test_start_retries_while_the_previous_instance_holds_the_pid_file_lock(
        layout: ClusterLayout, runner: StandInRunner) -> None:
    runner.lock_failures = 1
    daemons = ProcessDaemons(layout, ClusterCommands(layout, runner), log=lambda m: None)
    daemons.start("osd.0")
    assert len(runner.calls) == 2 and daemons.pid("osd.0") == runner.procs[0].pid
    runner.lock_failures = 3
    with pytest.raises(DevClusterError, match="failed to lock pidfile"):
        daemons.start("osd.1")


def test_each_daemon_starts_on_its_own_host(tmp_path: Path) -> None:
    layout = ClusterLayout.resolve(tmp_path / "m", num_osds=3, hosts=3, clients=0)
    runner = StandInRunner(layout, spawn=False)
    daemons = ProcessDaemons(layout, ClusterCommands(layout, runner), log=lambda m: None,
                             start_timeout=0)
    for name in ("mon.a", "osd.1", "osd.2"):
        with pytest.raises(DevClusterError):
            daemons.start(name)
    assert [host for host, _ in runner.calls] == ["host1", "host2", "host3"]


def test_an_osd_of_a_release_root_is_told_its_class_dir(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "usr" / "lib" / "x86_64-linux-gnu" / "rados-classes").mkdir(parents=True)
    layout = ClusterLayout.resolve(tmp_path / "c")
    layout.release = Release("tentacle", root)
    assert daemon_argv(layout, "osd.0")[-2:] == ["--osd-class-dir", "/usr/lib/x86_64-linux-gnu/rados-classes"]
    assert "--osd-class-dir" not in daemon_argv(layout, "mon.a")
