"""What client endpoints leave behind, through the sweep: journaled before it is made, undone
by the restore however the step ended, a killed run's mounts unmounted by --resume before its
step runs again; a preflight problem refuses the sweep before the run dir exists."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest

from cephscope.runner.benchmarks.base import BenchContext, BenchmarkError, PreflightAccess
from cephscope.runner.results import ResultsError, RunDir
from cephscope.runner.sweep import Interrupted, SweepError, SweepOptions
from tests.unit.runner_fakes import SPEC, CountingBench, FakeCluster, fake_sweep, run_sweep


class MountingBench(CountingBench):
    """Journals a 'mount' (a directory of the test's) in prepare; its cleanup forgets to undo
    it, as a cleanup that failed would."""

    where: ClassVar[Path] = Path("/nonexistent")
    interrupt: ClassVar[bool] = False

    def prepare(self, ctx: BenchContext) -> None:
        path = MountingBench.where / ctx.step_id
        path.mkdir(parents=True, exist_ok=True)
        ctx.undo.add({"kind": "mount", "host": "local", "path": str(path)})

    def run(self, mode: str, ctx: BenchContext) -> list[Path]:
        if MountingBench.interrupt:
            raise Interrupted("SIGTERM")
        return super().run(mode, ctx)


def _opts(tmp_path: Path, **kw: Any) -> SweepOptions:
    spec_path = tmp_path / "shards.yaml"
    if not spec_path.exists():
        spec_path.write_text(SPEC)
    return SweepOptions(spec_path=None if kw.get("resume_dir") else spec_path,
                        results_dir=tmp_path / "run", metrics_linger_seconds=0, tty=False, **kw)


@pytest.fixture(autouse=True)
def _reset(tmp_path: Path) -> None:
    MountingBench.where = tmp_path / "mnt"
    MountingBench.interrupt = False
    CountingBench.runs = []


@pytest.mark.parametrize("interrupt", [False, True])
def test_the_restore_undoes_what_endpoints_left(tmp_path: Path, interrupt: bool) -> None:
    MountingBench.interrupt = interrupt
    sweep = fake_sweep(_opts(tmp_path), FakeCluster(), {"radosbench": MountingBench})
    assert sweep.run() == (130 if interrupt else 0)
    assert RunDir(tmp_path / "run").journal().endpoints == []
    # each mountpoint looked at on its host (nothing mounted there) and removed
    assert list((tmp_path / "mnt").iterdir()) == []


def test_resume_unmounts_what_a_killed_run_left_before_running_again(tmp_path: Path) -> None:
    assert run_sweep(tmp_path, FakeCluster())[0] == 0
    rd = RunDir(tmp_path / "run")
    left = tmp_path / "left-mount"
    left.mkdir()
    rd.record(endpoints=[{"kind": "mount", "host": "local", "path": str(left)},
                         {"kind": "cephfs_data_pool", "fs": "cephfs", "pool": "p"}])
    (rd.step_dir(rd.steps()[-1]) / "result.json").unlink()  # killed in the last step

    class Mon(FakeCluster):
        def command(self, prefix: str, timeout: float | None = None, **args: Any) -> Any:
            if prefix == "fs ls":
                return [{"name": "cephfs", "data_pools": ["cephfs_data"]}]
            return super().command(prefix, timeout, **args)

    logged: list[str] = []
    sweep = fake_sweep(_opts(tmp_path, resume_dir=tmp_path / "run"), Mon())
    sweep.log = logged.append
    assert sweep.run() == 0
    assert any("the previous run left 1 mount(s): unmounting" in line for line in logged)
    assert not left.exists()
    # the CephFS change stayed for the run, then went with the restore
    assert rd.journal().endpoints == []


class RefusingBench(CountingBench):
    @classmethod
    def preflight(cls, steps: Sequence[Mapping[str, Any]], access: PreflightAccess) -> list[str]:
        assert len(steps) == 4 and access.ceph is not None
        return ["client_endpoints driver rbd-kernel needs the kernel module 'rbd', missing on "
                "local"]


def test_a_preflight_problem_refuses_the_sweep_before_any_change(tmp_path: Path) -> None:
    cluster = FakeCluster()
    sweep = fake_sweep(_opts(tmp_path), cluster, {"radosbench": RefusingBench})
    with pytest.raises(SweepError, match=r"refused before any change: .*kernel module 'rbd'"):
        sweep.run()
    assert not (tmp_path / "run").exists() and CountingBench.runs == []
    assert not [c for c in cluster.commands if c[0] in ("config set", "osd pool create")]


def test_a_journal_with_a_foreign_endpoint_entry_is_refused(tmp_path: Path) -> None:
    assert run_sweep(tmp_path, FakeCluster())[0] == 0
    state = tmp_path / "run" / "state.json"
    data = json.loads(state.read_text())
    data["endpoints"] = [{"kind": "rm -rf /", "path": "/"}]
    state.write_text(json.dumps(data))
    with pytest.raises(ResultsError, match="endpoints"):
        RunDir(tmp_path / "run").journal()


def test_benchmark_error_in_prepare_still_runs_the_restore(tmp_path: Path) -> None:
    class FailingBench(MountingBench):
        def prepare(self, ctx: BenchContext) -> None:
            super().prepare(ctx)
            raise BenchmarkError("ceph-fuse failed")

    sweep = fake_sweep(_opts(tmp_path), FakeCluster(), {"radosbench": FailingBench})
    assert sweep.run() == 1
    assert RunDir(tmp_path / "run").journal().endpoints == []
