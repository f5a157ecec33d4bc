"""A lost cluster never hangs a sweep (issue 28), on a real dev cluster.

The runner sweeps a cluster it did not build (`--conf`, as any user's), and the cluster's only
mon is killed (SIGKILL, by the pid in its pid file) while the first step's rados bench runs:
- the mon does not come back: the sweep ends by itself, non-zero, within the documented bound
  (docs/runner.md, "A lost cluster"), its error naming the mon; the run dir and its journal
  are intact, and `--resume` finishes the run and restores what the lost run could not;
- SIGTERM while the cluster is gone: the sweep ends within 30 s, saying what it left;
- the mon comes back after 30 s: the sweep goes on and finishes.

Killing the shared session cluster's mon would break other tests, so this module has its own
one-OSD dev cluster, and every test starts the mon again before it ends. Short cluster
timeouts (`--cluster-timeout`) keep the module within about four minutes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cephscope.deploy.devcluster import DevCluster
from cephscope.deploy.procs import pid_from_file, proc_cmdline

from .conftest import free_port_base

SPEC = """\
iterations: 2
benchmarks:
  radosbench:
    op_size: 4096
    time: 6
    concurrent_ops: 4
    write_only: true
"""
BENCH_SECONDS = 6
# Per call grace (cephscope.monclient.CALL_GRACE_SECONDS), the restore's grace
# (runner.options.RESTORE_GRACE_SECONDS) and the process' own start and exit.
SLACK_SECONDS = 15


def lost_bound(cluster_timeout: float) -> float:
    """docs/runner.md: the running benchmark's rest, then at most four cluster timeouts (its
    cleanup's two `rados` calls, the call that finds the mons gone, the restore) plus graces."""
    return BENCH_SECONDS + 4 * cluster_timeout + SLACK_SECONDS


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    dev = DevCluster(tmp_path_factory.mktemp("lostcluster"), port_base=free_port_base(100),
                     num_osds=1, osd_size_gib=2, backing="file")
    try:
        dev.up()
        yield dev
    finally:
        if dev.state_file.exists():
            dev.purge()


def mon_pid(cluster: DevCluster) -> int | None:
    return pid_from_file(cluster.pid_file("mon.a"), str(cluster.conf_path))


def mon_back(cluster: DevCluster) -> None:
    """The mon running again and every PG active+clean, whatever the test did (not HEALTH_OK:
    a lost run leaves its scrub flags set, for `--resume` or the test to unset)."""
    if mon_pid(cluster) is None:
        cluster.start_daemon("mon.a")
    cluster.wait_pgs_active_clean(timeout=120)


class Sweep:
    """`cephscope sweep SPEC --conf …` in a subprocess, its output collected as it comes."""

    def __init__(self, cluster: DevCluster, tmp_path: Path, *args: str) -> None:
        spec = tmp_path / "lost.yaml"
        spec.write_text(SPEC)
        self.results = tmp_path / "run"
        self.argv = [sys.executable, "-m", "cephscope.cli", "sweep", str(spec),
                     "--results-dir", str(self.results), *common_args(cluster), *args]
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def wait(self, timeout: float) -> tuple[int, float]:
        """The exit status and how long it took from now; fails the test past `timeout`."""
        started = time.monotonic()
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            pytest.fail(f"the sweep did not end within {timeout:.0f}s:\n{self.output}")
        self.reader.join(5)
        return rc, time.monotonic() - started


def common_args(cluster: DevCluster) -> list[str]:
    return ["--conf", str(cluster.conf_path), "--metrics-linger", "0", "--idle-baseline", "0"]


def wait_for_benchmark(cluster: DevCluster, sweep: Sweep, timeout: float = 90) -> None:
    """Until the first step's rados bench writes (a rados bench of this cluster runs)."""
    deadline = time.monotonic() + timeout
    while not bench_running(cluster):
        assert sweep.proc.poll() is None, sweep.output
        assert time.monotonic() < deadline, sweep.output
        time.sleep(0.2)
    time.sleep(2)  # well inside its 6 s


def bench_running(cluster: DevCluster) -> bool:
    for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
        argv = proc_cmdline(pid)
        if "bench" in argv and any(Path(a).name == "rados" for a in argv) \
                and str(cluster.conf_path) in argv:
            return True
    return False


def kill_mon(cluster: DevCluster) -> float:
    pid = mon_pid(cluster)
    assert pid is not None, "the mon is not running"
    os.kill(pid, signal.SIGKILL)
    return time.monotonic()


def test_mon_gone_for_good_the_sweep_ends_by_itself_naming_the_mon(cluster: DevCluster,
                                                                    tmp_path: Path) -> None:
    timeout = 10
    sweep = Sweep(cluster, tmp_path, "--cluster-timeout", str(timeout))
    try:
        wait_for_benchmark(cluster, sweep)
        killed = kill_mon(cluster)
        rc, _ = sweep.wait(lost_bound(timeout) + 30)
        took = time.monotonic() - killed
        out = sweep.output
        assert rc == 1, out
        assert took <= lost_bound(timeout), out
        # one clear last line: the cluster is lost, the mon's address, where the run is
        last = out.strip().splitlines()[-1]
        assert last.startswith(f"cephscope sweep: run {sweep.results.name} stopped, the "
                               f"cluster is lost: "), out
        assert f"no mon answered at v2:{cluster.mon_addr}:{cluster.mon_port}" in last, out
        assert f"continue with --resume {sweep.results}" in last, out
        # the run dir and its journal are intact: the step done stays done, the flags the
        # restore could not unset are in the state
        steps = json.loads((sweep.results / "run.json").read_text())["steps"]
        done = [s for s in steps
                if (sweep.results / f"step-{s['id']}" / "result.json").exists()]
        assert len(steps) == 2 and len(done) == 1, out
        state = json.loads((sweep.results / "state.json").read_text())
        assert state["unrestored"] == ["OSD flags (noscrub, nodeep-scrub)"], out
        assert set(state["scrub_flags_set"]) == {"noscrub", "nodeep-scrub"}
        print(f"\nlive lost cluster: mon killed -> sweep exit in {took:.1f}s "
              f"(--cluster-timeout {timeout}; bound {lost_bound(timeout):.0f}s)")
    finally:
        if sweep.proc.poll() is None:
            sweep.proc.kill()
        mon_back(cluster)
    # once the cluster answers, --resume finishes the run and restores what was left
    resumed = subprocess.run([sys.executable, "-m", "cephscope.cli", "sweep", "--resume",
                              str(sweep.results), *common_args(cluster)],
                             capture_output=True, text=True, timeout=180, check=False)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "unset the run's OSD flags (noscrub, nodeep-scrub)" in resumed.stdout
    assert not json.loads((sweep.results / "state.json").read_text()).get("unrestored")
    flags = cluster.ceph_json("osd", "dump")["flags"].split(",")
    assert "noscrub" not in flags and "nodeep-scrub" not in flags


# seconds from the mon's kill to SIGTERM: inside the benchmark; after it, while its cleanup
# and then the next call wait on the mons
SIGTERM_DELAYS = {"in_benchmark": 1.0, "waiting_on_mons": BENCH_SECONDS + 4.0}


@pytest.mark.parametrize("moment", list(SIGTERM_DELAYS))
def test_sigterm_while_the_mon_is_gone_ends_the_sweep_within_30s(
        cluster: DevCluster, tmp_path: Path, moment: str) -> None:
    # the default cluster timeout: a call no mon answers would wait a minute
    sweep = Sweep(cluster, tmp_path)
    try:
        wait_for_benchmark(cluster, sweep)
        killed = kill_mon(cluster)
        time.sleep(SIGTERM_DELAYS[moment])
        sweep.proc.send_signal(signal.SIGTERM)
        rc, took = sweep.wait(60)
        out = sweep.output
        assert rc == 130, out
        assert took <= 30, out
        assert "interrupted: restoring the cluster's pre-sweep state" in out, out
        assert "error: left unrestored: " in out and "OSD flags" in out, out
        assert (sweep.results / "run.json").exists()
        print(f"\nlive lost cluster: SIGTERM {time.monotonic() - killed - took:.1f}s after "
              f"the mon kill ({moment}) -> exit in {took:.1f}s")
    finally:
        if sweep.proc.poll() is None:
            sweep.proc.kill()
        mon_back(cluster)
    for flag in ("noscrub", "nodeep-scrub"):  # what the interrupted run left
        subprocess.run(["ceph", "-c", str(cluster.conf_path), "osd", "unset", flag],
                       capture_output=True, timeout=60, check=True)


def test_mon_back_after_30s_the_sweep_goes_on_and_finishes(cluster: DevCluster,
                                                           tmp_path: Path) -> None:
    # a cluster timeout longer than the outage: the call waiting for the mon gets its answer
    sweep = Sweep(cluster, tmp_path, "--cluster-timeout", "45")
    try:
        wait_for_benchmark(cluster, sweep)
        kill_mon(cluster)
        time.sleep(30)
        assert sweep.proc.poll() is None, sweep.output  # still waiting, not failed
        cluster.start_daemon("mon.a")
        rc, took = sweep.wait(120)
        out = sweep.output
        assert rc == 0, out
        assert "2/2 steps done, 0 failed" in out, out
        print(f"\nlive lost cluster: mon back after 30 s -> sweep done {took:.1f}s later")
    finally:
        if sweep.proc.poll() is None:
            sweep.proc.kill()
        mon_back(cluster)
