"""A sweep across Ceph releases (`devcluster: {release: [...]}`): the spec, the steps, and the
sweep on in-memory clusters, one per release, swapped in by a release switch."""

from __future__ import annotations

import argparse
import csv
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest

from cephscope.runner import compare_cli
from cephscope.runner.benchmarks.base import BenchContext, BenchResult
from cephscope.runner.cephclient import CephTarget
from cephscope.runner.knobs.ceph_config import ConfigManager
from cephscope.runner.report.build import write_report
from cephscope.runner.restart import RestartJournal
from cephscope.runner.results import RunDir
from cephscope.runner.spec import Spec, SpecError, load_spec
from cephscope.runner.steps import generate_steps, order_steps
from cephscope.runner.sweep import Sweep, SweepError, SweepOptions
from cephscope.runner.wiring import ClusterParts, Collaborators, Wire
from tests.unit.runner_fakes import EchoBench, FakeCluster

SPEC = """\
devcluster:
  release: [pacific, reef]
ceph_config:
  osd_op_num_shards: [2, 4]
benchmarks:
  radosbench:
    op_size: 4096
    time: 5
    write_only: true
"""
VERSIONS = {"pacific": "16.2.15", "reef": "18.2.7", "tentacle": "20.2.4"}
SPEEDUP = {"pacific": 1.0, "reef": 1.5, "tentacle": 2.0}


class ReleaseBench(EchoBench):
    """EchoBench's figures times the running release's speed-up."""

    speedup: ClassVar[float] = 1.0

    def parse(self, mode: str, ctx: BenchContext) -> BenchResult:
        result = super().parse(mode, ctx)
        assert result.iops is not None
        result.iops *= ReleaseBench.speedup
        return result


def load(text: str, tmp_path: Path) -> Any:
    path = tmp_path / "releases.yaml"
    path.write_text(text)
    return load_spec(path, text=text, benchmarks={"radosbench": EchoBench})


def test_release_axis_is_the_slowest_and_counts_in_the_step_id(tmp_path: Path) -> None:
    spec = load(SPEC, tmp_path)
    assert spec.releases == ("pacific", "reef")
    steps = generate_steps(spec)
    assert [s.release for s in steps] == ["pacific", "pacific", "reef", "reef"]
    assert steps[0].axes["devcluster.release"] == "pacific"
    assert len({s.id for s in steps}) == 4  # the same step on two releases: two ids
    # restart grouping stays inside each release
    ordered = order_steps(steps[::-1], {"osd_op_num_shards"})
    assert [s.release for s in ordered] == ["reef", "reef", "pacific", "pacific"]
    # a spec without the axis keeps the ids it always had
    plain = generate_steps(load(SPEC.split("ceph_config:", 1)[1].join(["ceph_config:", ""]),
                                tmp_path))
    assert not {s.id for s in plain} & {s.id for s in steps}
    assert all(s.release is None and "devcluster.release" not in s.axes for s in plain)


@pytest.mark.parametrize(("section", "message"), [
    ("devcluster:\n  release: [pacific, Reef!]\n", "devcluster.release: 'Reef!': not a release name"),
    ("devcluster:\n  release: []\n", "empty list"),
    ("devcluster:\n  release: [reef, reef]\n", "same value twice"),
    ("devcluster:\n  releases: [reef]\n", "devcluster.releases: ['reef']: unknown key"),
    ("devcluster:\n  release: [reef, 18]\n", "devcluster.release[1]: 18: wrong type"),
])
def test_bad_release_axis_is_a_spec_error_naming_the_line(tmp_path: Path, section: str,
                                                          message: str) -> None:
    with pytest.raises(SpecError) as exc:
        load(section + SPEC.split("\n", 2)[2], tmp_path)
    assert any(p.startswith(f"{tmp_path / 'releases.yaml'}:2: ") and message in p
               for p in exc.value.problems), exc.value.problems


class FakeSwitch:
    """One in-memory cluster per release; `switch` is the rebuild. `running`: the release the
    cluster runs before the sweep (not rebuilt for it)."""

    def __init__(self, unknown: Sequence[str] = (), running: str | None = None) -> None:
        self.unknown = set(unknown)
        self.running = running
        self.clusters: dict[str, FakeCluster] = {}
        self.switched: list[tuple[str, bool]] = []
        self.current = self._cluster(running) if running else FakeCluster()

    def problems(self, releases: Sequence[str], prepare: bool) -> list[str]:
        return [f"{r}: unknown release" for r in releases if r in self.unknown]

    def _cluster(self, release: str) -> FakeCluster:
        cluster = FakeCluster()
        version = VERSIONS[release]
        original = cluster.command

        def command(prefix: str, timeout: float | None = None, **args: Any) -> Any:
            if prefix == "versions":
                return {"overall": {f"ceph version {version} (0123abcd) {release} (stable)": 5}}
            return original(prefix, timeout, **args)

        cluster.command = command  # type: ignore[method-assign]
        self.clusters[release] = cluster
        return cluster

    def switch(self, release: str) -> tuple[CephTarget, bool]:
        ReleaseBench.speedup = SPEEDUP[release]
        rebuilt = release != self.running
        self.switched.append((release, rebuilt))
        if rebuilt:
            self.current = self._cluster(release)
            self.running = release
        return CephTarget(Path("/nonexistent/ceph.conf"), releases=self), rebuilt


def release_wiring(opts: SweepOptions) -> Wire:
    """Each release's in-memory cluster, as the switch made it."""

    def wire(spec: Spec, target: CephTarget | None, journal: RestartJournal) -> Collaborators:
        target = target or opts.target
        assert target is not None  # the test always gives one
        switch = target.releases
        # a cluster that cannot be rebuilt (not a dev cluster) is a fake one too
        cluster = switch.current if isinstance(switch, FakeSwitch) else FakeCluster()
        config = ConfigManager(cluster, cluster, lambda i: None,  # type: ignore[arg-type]
                               log=lambda m: None, poll_seconds=0.01, timeout_seconds=5)
        return Collaborators(target, ClusterParts(cluster, config))  # type: ignore[arg-type]

    return wire


def run(tmp_path: Path, switch: FakeSwitch | None, text: str = SPEC) -> tuple[int, Path]:
    spec_path = tmp_path / "releases.yaml"
    spec_path.write_text(text)
    results = tmp_path / "run"
    opts = SweepOptions(spec_path=spec_path, results_dir=results, metrics_linger_seconds=0,
                        tty=False, target=CephTarget(Path("/nonexistent/ceph.conf"),
                                                     releases=switch))
    sweep = Sweep(opts, release_wiring(opts), log=lambda m: None,
                  benchmarks={"radosbench": ReleaseBench})
    return sweep.run(), results


def test_sweep_rebuilds_per_release_and_tags_every_step(tmp_path: Path) -> None:
    switch = FakeSwitch(running="pacific")
    rc, results = run(tmp_path, switch)
    assert rc == 0
    # in spec order; the cluster already ran pacific: rebuilt for reef only
    assert switch.switched == [("pacific", False), ("reef", True)]
    # each release's steps ran on its own cluster: the bench pool made on each
    for release in ("pacific", "reef"):
        assert any(p == "osd pool create" for p, _a in switch.clusters[release].commands)
    assert switch.clusters["reef"].pools == {}  # the last cluster's pools removed at the end
    rd = RunDir(results)
    for step in rd.steps():
        result = rd.step_result(step)
        assert result is not None
        assert result["timestamps"]["ceph_version"] == VERSIONS[str(step.release)]
        assert result["axes"]["devcluster.release"] == step.release
        # each release's steps changed its own cluster's config, restored or gone with it
    assert switch.clusters["reef"].db == {}
    rows = list(csv.DictReader((results / "summary.csv").open()))
    assert {(r["devcluster.release"], r["ceph_version"]) for r in rows} == {
        ("pacific", "16.2.15"), ("reef", "18.2.7")}
    assert json.loads((results / "state.json").read_text())["release"] == "reef"


def test_report_and_compare_put_releases_side_by_side(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    rc, results = run(tmp_path, FakeSwitch())
    assert rc == 0
    report = write_report(results, plots=True)
    md = report.markdown_path.read_text()
    section = md.split("## Releases", 1)[1].split("## Steps", 1)[0]
    header, _rule, *lines = [line for line in section.splitlines() if line.startswith("|")]
    assert "pacific 16.2.15 IOPS" in header and "reef 18.2.7 IOPS" in header
    assert "reef/pacific" in header
    assert len(lines) == 2  # one line per step (shards 2 and 4) and mode, releases as columns
    assert all(line.rstrip(" |").endswith("1.50") for line in lines), lines
    assert (results / "report-plots" / "releases-iops.png").exists()
    assert "<h2>Releases</h2>" in (results / "report.html").read_text()

    parser = argparse.ArgumentParser()
    compare_cli.add_arguments(parser)
    code = compare_cli.run(parser.parse_args([str(results), "--across-releases",
                                              "--format", "json"]))
    out = json.loads(capsys.readouterr().out)
    assert code == compare_cli.EXIT_OK
    reef = out["releases"]["reef"]
    assert reef["against"] == "pacific"
    assert reef["versions"] == {"pacific": "16.2.15", "reef": "18.2.7"}
    iops = [f for c in reef["comparisons"] for f in c["figures"] if f["figure"] == "iops"]
    assert len(iops) == 2 and all(f["ratio"] == pytest.approx(1.5) for f in iops)
    assert all(f["verdict"] == "cannot tell (better)" for f in iops)  # one iteration a side
    # bad input: two runs with --across-releases, or a run on one release
    assert compare_cli.run(parser.parse_args([str(results), str(results),
                                              "--across-releases"])) == compare_cli.EXIT_BAD_INPUT
    assert compare_cli.run(parser.parse_args([str(results)])) == compare_cli.EXIT_BAD_INPUT


def test_release_axis_without_a_dev_cluster_changes_nothing(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as exc:
        run(tmp_path, None)
    (problem,) = exc.value.problems
    assert "releases.yaml:2: devcluster.release" in problem and "--devcluster" in problem
    assert not (tmp_path / "run").exists()


def test_unknown_release_is_refused_before_anything_changes(tmp_path: Path) -> None:
    switch = FakeSwitch(unknown=["reef"])
    with pytest.raises(SpecError, match=r"devcluster\.release: reef: unknown release"):
        run(tmp_path, switch)
    assert switch.switched == []
    assert not (tmp_path / "run").exists()


def test_a_release_that_cannot_be_built_stops_the_run_before_its_steps(tmp_path: Path) -> None:
    class Broken(FakeSwitch):
        def switch(self, release: str) -> tuple[CephTarget, bool]:
            if release == "reef":
                raise RuntimeError("mon did not reach quorum")
            return super().switch(release)

    switch = Broken(running="pacific")
    with pytest.raises(SweepError, match=r"release reef: .* mon did not reach quorum"):
        run(tmp_path, switch)
    rd = RunDir(tmp_path / "run")
    assert [rd.is_done(s) for s in rd.steps()] == [True, True, False, False]
    # the cluster it could reach keeps nothing of the run (its pool removed)
    assert switch.clusters["pacific"].pools == {}
