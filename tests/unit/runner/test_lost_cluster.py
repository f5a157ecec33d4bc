"""A lost cluster never hangs the runner (issue 28): every wait on the cluster gives up at its
deadline, says what it waited for, and a signal is taken while a call hangs.

The handle here never answers (its `mon_command` blocks, as librados' does when no mon is
left and `rados_mon_op_timeout` is not set); the deadlines are injected so each test takes
about a second, not the minute of the defaults."""

from __future__ import annotations

import errno
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cephscope.monclient import (
    MonTimeout,
    PgWaitTimeout,
    bounded_env,
    client_conf,
    mon_command,
    wait_pgs_active_clean,
)
from cephscope.runner.cephclient import CephCli, CephError, ClusterLost, cluster_lost
from cephscope.runner.hygiene import Hygiene, HygieneOptions
from cephscope.runner.mon_relay import RelayedRados
from cephscope.runner.restart import OsdRestarter
from cephscope.runner.results import FAILURE_FILE, RunDir
from cephscope.runner.sweep import Sweep, SweepError, SweepOptions
from tests.unit.runner_fakes import SPEC, CountingBench, FakeCluster, fake_sweep

MON_HOST = "v2:127.0.0.1:6789"


class SilentHandle:
    """A connected `rados.Rados` whose mons never answer: every call blocks until released."""

    def __init__(self, ret: int | None = None) -> None:
        self.release = threading.Event()
        self.ret = ret  # answer this return code at once instead (librados' own ETIMEDOUT)
        self.calls: list[str] = []

    def conf_get(self, option: str) -> str:
        return MON_HOST if option == "mon_host" else ""

    def mon_command(self, cmd: str, inbuf: bytes, timeout: int = 0) -> tuple[int, bytes, str]:
        self.calls.append(json.loads(cmd)["prefix"])
        if self.ret is not None:
            return self.ret, b"", ""
        self.release.wait()
        return -errno.ETIMEDOUT, b"", ""

    def shutdown(self) -> None:
        self.release.wait()  # librados' shutdown waits for the call in flight


class SilentCli(CephCli):
    """The runner's CephCli on a handle that never answers."""

    def __init__(self, handle: SilentHandle, timeout_seconds: float = 1.0) -> None:
        super().__init__(Path("/nonexistent/ceph.conf"), timeout_seconds=timeout_seconds,
                         grace_seconds=0.2)
        self.handle = handle

    def _cluster(self) -> Any:
        return self.handle


@pytest.fixture
def handle() -> Iterator[SilentHandle]:
    h = SilentHandle()
    yield h
    h.release.set()  # let the abandoned worker threads end


def elapsed(fn: Any) -> tuple[float, BaseException | None]:
    started = time.monotonic()
    try:
        fn()
    except BaseException as exc:  # the test asserts on it
        return time.monotonic() - started, exc
    return time.monotonic() - started, None


# ---- one place sets the bounds ------------------------------------------------------------


def test_client_conf_bounds_mount_and_mon_ops_and_io_only_where_asked() -> None:
    assert client_conf(60) == {"client_mount_timeout": "60", "rados_mon_op_timeout": "60"}
    assert client_conf(2.7, io=True) == {"client_mount_timeout": "2", "rados_mon_op_timeout": "2",
                                         "rados_osd_op_timeout": "2"}
    assert client_conf(0.2)["rados_mon_op_timeout"] == "1"  # 0 would mean "no timeout"


def test_bounded_env_puts_the_bounds_in_ceph_args_before_the_users_own() -> None:
    env = bounded_env({"PATH": "/bin", "CEPH_ARGS": "--rados_osd_op_timeout=300"}, 15, io=True)
    assert env["PATH"] == "/bin"
    assert env["CEPH_ARGS"] == ("--client_mount_timeout=15 --rados_mon_op_timeout=15 "
                                "--rados_osd_op_timeout=15 --rados_osd_op_timeout=300")


# ---- a mon call ---------------------------------------------------------------------------


def test_mon_command_on_a_silent_handle_gives_up_at_its_deadline_naming_the_mons(
        handle: SilentHandle) -> None:
    took, exc = elapsed(lambda: mon_command(handle, "pg dump", 1, grace_seconds=0.2))
    assert isinstance(exc, MonTimeout)
    assert 1.1 <= took < 2.0
    assert str(exc) == f"`ceph pg dump` timed out after 1 s: no mon answered at {MON_HOST}"


def test_librados_etimedout_is_a_timeout_naming_the_command_and_the_mons() -> None:
    took, exc = elapsed(lambda: mon_command(SilentHandle(ret=-errno.ETIMEDOUT), "osd dump", 60))
    assert took < 1.0
    assert isinstance(exc, MonTimeout)
    assert str(exc) == f"`ceph osd dump` timed out after 60 s: no mon answered at {MON_HOST}"


def test_a_signal_is_taken_while_a_mon_call_hangs(handle: SilentHandle) -> None:
    """The main thread waits in slices while librados blocks in a worker: the handler runs
    (in a C call on the main thread it would not, until the call returned)."""

    class Stop(Exception):
        pass

    def raise_stop(signum: int, frame: Any) -> None:
        raise Stop

    old = signal.signal(signal.SIGALRM, raise_stop)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        took, exc = elapsed(lambda: mon_command(handle, "status", 30))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert isinstance(exc, Stop)
    assert took < 1.0


def test_cephcli_raises_cluster_lost_and_every_call_shares_the_restore_deadline(
        handle: SilentHandle) -> None:
    cli = SilentCli(handle, timeout_seconds=1.0)
    took, exc = elapsed(lambda: cli.command("osd pool ls"))
    assert isinstance(exc, ClusterLost) and cluster_lost(exc)
    assert 1.1 <= took < 2.0
    assert "`ceph osd pool ls` timed out after 1 s: no mon answered at " + MON_HOST in str(exc)

    cli = SilentCli(handle, timeout_seconds=30.0)
    cli.limit_to(1.0)  # the restore after a signal: all calls within one second
    took, exc = elapsed(lambda: cli.command("osd unset", key="noscrub"))
    assert isinstance(exc, ClusterLost) and took < 2.0
    took, exc = elapsed(lambda: cli.command("osd unset", key="nodeep-scrub"))
    assert isinstance(exc, CephError) and took < 0.1
    assert "not tried, the time given to it is used up" in str(exc)
    took, _ = elapsed(cli.close)  # a shutdown stuck behind the hung call is not waited for
    assert took < 1.0


# ---- the waits ----------------------------------------------------------------------------


def test_pg_wait_stops_at_once_on_a_lost_cluster_not_at_its_own_deadline(
        handle: SilentHandle) -> None:
    cli = SilentCli(handle, timeout_seconds=1.0)
    took, exc = elapsed(lambda: wait_pgs_active_clean(
        lambda: cli.command("pg dump", dumpcontents=["pgs"]), 60, poll_seconds=0.05,
        transient=(CephError,)))
    assert isinstance(exc, ClusterLost), exc
    assert took < 2.0
    assert "`ceph pg dump` timed out" in str(exc)


def test_pg_wait_gives_up_at_its_deadline_saying_how_far_pgs_got() -> None:
    def dump() -> Any:
        return {"pg_stats": [{"pgid": "1.0", "state": "peering", "up": [0], "acting": [0]}]}

    took, exc = elapsed(lambda: wait_pgs_active_clean(dump, 0.5, poll_seconds=0.05))
    assert isinstance(exc, PgWaitTimeout)
    assert 0.5 <= took < 1.0
    assert "0/1 active+clean (e.g. 1.0:peering)" in str(exc)


def test_restart_waits_give_up_at_the_cluster_timeout(handle: SilentHandle) -> None:
    cli = SilentCli(handle, timeout_seconds=1.0)
    restarter = OsdRestarter(cli, None, lambda i: None, timeout_seconds=60, poll_seconds=0.05)
    took, exc = elapsed(restarter.wait_pgs_active_clean)
    assert isinstance(exc, ClusterLost) and took < 2.0
    took, exc = elapsed(lambda: restarter.wait_osds_restarted([0], {0: 1}))
    assert isinstance(exc, ClusterLost) and took < 2.0
    assert "`ceph osd dump` timed out" in str(exc)


def test_health_gate_gives_up_at_the_cluster_timeout_naming_the_call(
        handle: SilentHandle) -> None:
    cli = SilentCli(handle, timeout_seconds=1.0)
    hygiene = Hygiene(cli, lambda name: None, None,  # type: ignore[arg-type]
                      HygieneOptions(drop_caches=False, scrub_guard=False, health_gate=True,
                                     health_timeout_seconds=60), log=lambda m: None)
    took, exc = elapsed(lambda: hygiene.before_step("s1"))
    assert isinstance(exc, ClusterLost), exc
    assert took < 2.0
    assert "no mon answered at" in str(exc)


RELAY_STAND_IN = '''
import time

class Rados:
    def __init__(self, conffile, name, conf):
        self.conf = conf

    def connect(self, timeout):
        pass

    def conf_get(self, option):
        return "v2:127.0.0.1:6789"

    def mon_command(self, cmd, inbuf, timeout=0):
        time.sleep(3600)

    def shutdown(self):
        pass
'''


def test_a_relay_whose_mon_never_answers_gives_up_at_its_deadline(tmp_path: Path) -> None:
    (tmp_path / "rados.py").write_text(RELAY_STAND_IN)
    relay = RelayedRados(("env", f"PYTHONPATH={tmp_path}"), "/etc/ceph/ceph.conf",
                         "client.admin", None, timeout_seconds=1, python=sys.executable,
                         reply_grace_seconds=0.3)
    try:
        took, exc = elapsed(lambda: mon_command(relay, "status", 1, grace_seconds=5))
    finally:
        relay._proc.kill()  # the stand-in sleeps; the relay's shutdown would wait for it
        relay.shutdown()
    assert isinstance(exc, MonTimeout), exc
    assert 1.2 <= took < 2.5
    assert "the mon relay gave no answer within 1 s" in str(exc)
    assert "no mon answered at v2:127.0.0.1:6789" in str(exc)  # the relay's mon_host
    # the relay's handle got the same bounds as the runner's own
    assert json.loads(relay.argv[-1]) == client_conf(1)


# ---- the sweep ----------------------------------------------------------------------------


class LosingCluster(FakeCluster):
    """A cluster whose mon goes away once `lose` is set: every call then raises what
    CephCli raises when no mon answered (a call that hangs `hang_seconds` first)."""

    def __init__(self) -> None:
        super().__init__()
        self.lost = False
        self.hang_seconds = 0.0
        self.calls_after_loss: list[str] = []

    def command(self, prefix: str, timeout: float | None = None, **args: Any) -> Any:
        if self.lost:
            self.calls_after_loss.append(prefix)
            time.sleep(self.hang_seconds)
            raise ClusterLost(f"`ceph {prefix}` timed out after 1 s: no mon answered at "
                              f"{MON_HOST}")
        return super().command(prefix, timeout, **args)


def losing_sweep(tmp_path: Path, cluster: LosingCluster, lose_after_runs: int,
                 **kw: Any) -> Sweep:
    spec_path = tmp_path / "shards.yaml"
    spec_path.write_text(SPEC)

    class LosingBench(CountingBench):
        def run(self, mode: str, ctx: Any) -> list[Path]:
            files = super().run(mode, ctx)
            if len(CountingBench.runs) == lose_after_runs:
                cluster.lost = True  # the mon dies during this step's benchmark
            return files

    opts = SweepOptions(spec_path=spec_path, results_dir=tmp_path / "run",
                        metrics_linger_seconds=0, tty=False, cluster_timeout_seconds=1,
                        restore_grace_seconds=0.2, **kw)
    sweep = fake_sweep(opts, cluster)
    sweep.benchmarks = {"radosbench": LosingBench}
    return sweep


def test_a_lost_cluster_fails_the_step_then_the_run_and_keeps_what_it_could_not_restore(
        tmp_path: Path) -> None:
    CountingBench.runs = []
    cluster = LosingCluster()
    sweep = losing_sweep(tmp_path, cluster, lose_after_runs=1)
    with pytest.raises(SweepError) as caught:
        sweep.run()
    message = str(caught.value)
    assert "the cluster is lost" in message and f"no mon answered at {MON_HOST}" in message
    assert f"results and journal in {tmp_path / 'run'}" in message
    assert "continue with --resume" in message
    rd = RunDir(tmp_path / "run")
    assert len(CountingBench.runs) == 1  # no later step was tried
    # the next step failed at its first call, naming the cluster; the others were not tried
    errors = [json.loads((rd.step_dir(s) / FAILURE_FILE).read_text())["error"]
              for s in rd.steps() if (rd.step_dir(s) / FAILURE_FILE).exists()]
    assert len(errors) == 1 and f"no mon answered at {MON_HOST}" in errors[0], errors
    assert sum(rd.is_done(s) for s in rd.steps()) == 1  # the step that ran before the loss
    # the restore could not reach the cluster: what it left is in the run's state
    unrestored = rd.read_state()["unrestored"]
    assert any(u.startswith("ceph config") for u in unrestored), unrestored
    assert rd.read_pre_sweep_config() is not None  # what --resume restores from
    CountingBench.runs = []


def test_the_restore_after_a_signal_is_bounded_even_when_every_call_hangs(
        tmp_path: Path) -> None:
    from cephscope.runner.sweep import Interrupted

    CountingBench.runs = []
    cluster = LosingCluster()
    cluster.hang_seconds = 30.0  # a call that does not honour its own timeout

    class InterruptedBench(CountingBench):
        def run(self, mode: str, ctx: Any) -> list[Path]:
            cluster.lost = True
            raise Interrupted("SIGTERM")

    sweep = losing_sweep(tmp_path, cluster, lose_after_runs=99, restore_timeout_seconds=1)
    sweep.benchmarks = {"radosbench": InterruptedBench}
    codes: list[int] = []
    took, exc = elapsed(lambda: codes.append(sweep.run()))
    assert exc is None, exc
    assert codes == [130]
    assert took < 3.0  # 1 s of restore + 0.2 s grace, not 30 s per call
    assert RunDir(tmp_path / "run").read_state()["unrestored"]
    CountingBench.runs = []


def test_a_second_signal_stops_the_restore_at_once(tmp_path: Path) -> None:
    CountingBench.runs = []
    cluster = LosingCluster()
    cluster.hang_seconds = 30.0
    # the run ends normally, then its restore hangs: the first signal bounds it to the
    # restore timeout (60 s here), the second stops waiting
    sweep = losing_sweep(tmp_path, cluster, lose_after_runs=4, restore_timeout_seconds=60)

    def two_signals() -> None:
        while not cluster.calls_after_loss:
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=two_signals, daemon=True).start()
    codes: list[int] = []
    took, exc = elapsed(lambda: codes.append(sweep.run()))
    assert exc is None, exc
    assert codes == [130]
    assert took < 10.0  # the benchmarks take ~0 s; the restore would hang 30 s per call
    assert RunDir(tmp_path / "run").read_state()["unrestored"]
    CountingBench.runs = []


# ---- a Prometheus that stops answering ----------------------------------------------------


def test_pulling_a_step_window_from_a_silent_prometheus_gives_up_after_one_timeout() -> None:
    """A Prometheus that accepts connections and never answers (hung, or its host gone
    behind a proxy): one query's timeout, not one per query."""
    import socket

    from cephscope.runner.system_metrics import pull_step_window

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)  # the kernel accepts; nobody reads or answers
    url = f"http://127.0.0.1:{server.getsockname()[1]}"
    try:
        results: list[dict[str, Any]] = []
        took, exc = elapsed(lambda: results.append(
            pull_step_window(url, 1000.0, 1060.0, timeout_seconds=0.5, scrape_interval=15.0)))
    finally:
        server.close()
    assert exc is None, exc
    queries = results[0]["queries"]
    assert len(queries) > 3
    assert took < 1.5, took
    errors = [q["error"] for q in [*queries.values(), *results[0]["counters"].values()]]
    assert "timed out" in errors[0].lower()
    assert all(e.startswith(f"not asked: Prometheus at {url} did not answer") for e in errors[1:])
