"""One step's lifecycle (runner/step_run.py): the recovery test's prefill is the radosbench
module's argv, run through the HostExec it is handed, with the step's environment."""

from __future__ import annotations

import subprocess
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from cephscope.runner.benchmarks.base import BenchContext, ClusterAccess
from cephscope.runner.cephclient import CephError
from cephscope.runner.knobs.ceph_config import ConfigManager
from cephscope.runner.options import SweepOptions
from cephscope.runner.phase_metrics import PhaseMetrics
from cephscope.runner.pools import PoolManager
from cephscope.runner.results import RunDir
from cephscope.runner.spec import load_spec
from cephscope.runner.step_run import PREFILL_SECONDS, StepRunner
from cephscope.runner.steps import generate_steps
from cephscope.runner.wiring import ClusterParts
from tests.unit.runner_fakes import BENCHES, FakeCluster

SPEC = """\
pool_profiles:
  rep2: {replication: 2, prefill_recovery_objects: 500, prefill_recovery_object_size: 65536,
         prefill_recovery_threads: 4}
recovery_test: {osds: [1]}
benchmarks:
  radosbench:
    op_size: 4096
    pool_profile: rep2
    recov_test_type: background
"""


class RecordingHost:
    """A HostExec that records what it is asked to run and answers `returncode`."""

    name = "local"

    def __init__(self, returncode: int = 0, stderr: bytes = b"") -> None:
        self.calls: list[tuple[list[str], dict[str, str] | None, float]] = []
        self.returncode, self.stderr = returncode, stderr

    def argv(self, argv: Sequence[str], env: Mapping[str, str] | None = None) -> list[str]:
        return list(argv)

    def run(self, argv: Sequence[str], *, timeout: float, input: bytes | None = None,
            check: bool = True, env: Mapping[str, str] | None = None,
            ) -> subprocess.CompletedProcess[bytes]:
        self.calls.append((list(argv), dict(env) if env is not None else None, timeout))
        return subprocess.CompletedProcess(list(argv), self.returncode, b"", self.stderr)

    def popen(self, argv: Sequence[str], env: Mapping[str, str] | None = None,
              **kwargs: Any) -> subprocess.Popen[bytes]:
        raise AssertionError("the prefill runs to its end: never a Popen")


def runner(tmp_path: Path, host: RecordingHost) -> tuple[StepRunner, FakeCluster]:
    spec = load_spec(tmp_path / "s.yaml", text=textwrap.dedent(SPEC), benchmarks=BENCHES)
    cluster = FakeCluster()
    config = ConfigManager(cluster, cluster, lambda i: None,  # type: ignore[arg-type]
                           log=lambda m: None, poll_seconds=0.01, timeout_seconds=5)
    (tmp_path / "s.yaml").write_text(SPEC)
    rd = RunDir.create(tmp_path / "run", "run", tmp_path / "s.yaml", SPEC, {}, [])
    metrics = PhaseMetrics("run", "s.yaml", {}, ["radosbench"], 1)
    step_runner = StepRunner(spec, SweepOptions(), BENCHES, rd,
                             ClusterParts(cluster, config),  # type: ignore[arg-type]
                             [], (), metrics, PoolManager(cluster),  # type: ignore[arg-type]
                             lambda m: None, [], prefill_host=host)
    return step_runner, cluster


def context(tmp_path: Path) -> BenchContext:
    return BenchContext(cluster=ClusterAccess(Path("/c/ceph.conf"), "client.bench"),
                        pool="cephscope-rep2", step_dir=tmp_path, run_id="run", step_id="s1",
                        env={"CEPH_CONF": "/c/ceph.conf", "CEPH_ARGS": "--rados-osd-op-timeout 60"})


def test_the_prefill_is_rados_bench_through_the_host_with_the_steps_environment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CEPH_CONF", raising=False)
    monkeypatch.delenv("CEPH_ARGS", raising=False)
    host = RecordingHost()
    step_runner, cluster = runner(tmp_path, host)
    step = generate_steps(step_runner.spec)[0]
    populate = step_runner.recovery_populate(step, context(tmp_path))
    assert populate is not None
    assert "cephscope-rep2-recovery" in cluster.pools  # made beside the step's pool
    assert host.calls == []  # run by the recovery test, when the OSDs are out
    populate()
    [(argv, env, timeout)] = host.calls
    assert argv == ["rados", "-c", "/c/ceph.conf", "-n", "client.bench",
                    "-p", "cephscope-rep2-recovery", "bench", str(PREFILL_SECONDS), "write",
                    "--no-cleanup", "-b", "65536", "-t", "4", "--max-objects", "500"]
    # only what the step adds to this process' environment is passed on
    assert env == {"CEPH_CONF": "/c/ceph.conf", "CEPH_ARGS": "--rados-osd-op-timeout 60"}
    assert timeout == PREFILL_SECONDS


def test_a_failed_prefill_is_a_ceph_error_with_rados_own_words(tmp_path: Path) -> None:
    host = RecordingHost(returncode=1, stderr=b"error opening pool: (2) No such file\n")
    step_runner, _ = runner(tmp_path, host)
    populate = step_runner.recovery_populate(generate_steps(step_runner.spec)[0],
                                             context(tmp_path))
    assert populate is not None
    with pytest.raises(CephError, match=r"recovery pool prefill \(cephscope-rep2-recovery\): "
                                        r"rados exited with 1: error opening pool"):
        populate()
