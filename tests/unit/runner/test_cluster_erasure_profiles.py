"""CBT files as they are: an erasure profile a pool profile names but the spec does not define
is the cluster's, looked up at start (`ceph osd erasure-code-profile get`), before anything
changes; absent, the run is refused there naming the profile and the pool profile. The pool is
created with the cluster's profile, which the run never changes nor removes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cephscope.runner import cluster_erasure_profiles as cep
from cephscope.runner.cephclient import CephError
from cephscope.runner.options import SweepOptions
from cephscope.runner.spec import SpecError, load_spec
from cephscope.runner.steps import generate_steps
from tests.unit.runner_fakes import BENCHES, CountingBench, FakeCluster, fake_sweep

SPEC = """\
cluster:
  pool_profiles:
    ec: {replication: erasure, erasure_profile: myec, pg_size: 8}
    rep: {replication: 1, pg_size: 8}
    unused: {replication: erasure, erasure_profile: notthere, pg_size: 8}
benchmarks:
  radosbench:
    op_size: 4096
    time: 5
    write_only: true
    pool_profile: [ec, rep]
"""
# what Pacific's `ceph osd erasure-code-profile get myec -f json` prints (dev cluster)
PACIFIC_REPLY = {"crush-device-class": "", "crush-failure-domain": "osd",
                 "crush-root": "default", "jerasure-per-chunk-alignment": "false", "k": "2",
                 "m": "1", "plugin": "jerasure", "technique": "reed_sol_van", "w": "8"}
READS = {"config help", "osd metadata", "osd dump", "osd erasure-code-profile get"}


def _spec(tmp_path: Path, text: str = SPEC) -> Any:
    path = tmp_path / "ec.yaml"
    path.write_text(text)
    return load_spec(path, text, BENCHES)


def test_an_undefined_profile_loads_as_the_clusters(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    ec = spec.pool_profiles["ec"]
    assert ec.is_erasure and ec.cluster_erasure_profile == "myec" and ec.erasure_k is None
    assert any("ec.erasure_profile: 'myec' is not defined under erasure_profiles" in w
               and "ceph osd erasure-code-profile get myec" in w for w in spec.warnings)
    # a name that is not a profile name is refused at load
    with pytest.raises(SpecError) as info:
        _spec(tmp_path, SPEC.replace("erasure_profile: myec", "erasure_profile: [a]"))
    assert "ec.erasure_profile: ['a']: not an erasure-code profile name" in str(info.value)


def test_only_profiles_the_steps_use_are_looked_up(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    assert list(cep.wanted(spec, generate_steps(spec))) == ["ec"]


def test_the_reply_gives_the_settings_and_nothing_hostile_passes() -> None:
    spec_profile = load_spec(Path("x.yaml"), SPEC, BENCHES).pool_profiles["ec"]
    found = cep.resolved(spec_profile, PACIFIC_REPLY)
    assert (found.erasure_k, found.erasure_m, found.erasure_plugin, found.failure_domain) == (
        2, 1, "jerasure", "osd")
    assert cep.describe(found) == "k=2 m=1 plugin=jerasure crush-failure-domain=osd"
    # what identifies the steps does not change when the settings are known
    assert found.to_dict() == spec_profile.to_dict()
    assert "erasure_k" not in found.to_dict()
    odd = cep.resolved(spec_profile, {**PACIFIC_REPLY, "plugin": "x --y;z",
                                      "crush-failure-domain": "$(id)"})
    assert (odd.erasure_plugin, odd.failure_domain) == ("?", "?")
    for bad in ({**PACIFIC_REPLY, "k": "2; rm"}, {**PACIFIC_REPLY, "m": "0"},
                {"plugin": "jerasure"}, "garbage", None):
        with pytest.raises(CephError, match="'myec' on the cluster \\(pool profile 'ec'\\) "
                                            "has no usable k and m"):
            cep.resolved(spec_profile, bad)


def test_a_run_uses_the_clusters_profile_and_leaves_it(tmp_path: Path) -> None:
    cluster = FakeCluster()
    cluster.ec_profiles["myec"] = dict(PACIFIC_REPLY)
    spec_path = tmp_path / "ec.yaml"
    spec_path.write_text(SPEC)
    dry_lines: list[str] = []
    dry = fake_sweep(SweepOptions(spec_path=spec_path, dry_run=True), cluster)
    dry.log = dry_lines.append
    assert dry.run() == 0
    assert ("  myec (pool profile ec): found on the cluster: k=2 m=1 plugin=jerasure "
            "crush-failure-domain=osd") in dry_lines
    assert {p for p, _ in cluster.commands} <= READS | {"config dump"}
    dry_ids = [line.split()[1] for line in dry_lines if line.startswith("   ")]
    CountingBench.runs = []
    sweep = fake_sweep(SweepOptions(spec_path=spec_path, results_dir=tmp_path / "run",
                                    metrics_linger_seconds=0, tty=False), cluster)
    assert sweep.run() == 0
    assert sorted(CountingBench.runs) == sorted(dry_ids)  # the same steps, the same ids
    created = [a for p, a in cluster.commands if p == "osd pool create"]
    (ec_pool,) = [a for a in created if a["pool_type"] == "erasure"]
    assert ec_pool["pool"] == "cephscope-ec" and ec_pool["erasure_code_profile"] == "myec"
    prefixes = [p for p, _ in cluster.commands]
    assert "osd erasure-code-profile set" not in prefixes
    assert "osd erasure-code-profile rm" not in prefixes
    assert cluster.ec_profiles["myec"] == PACIFIC_REPLY  # the cluster's, as it was
    assert "cephscope-ec" not in cluster.pools  # the pool the run made is removed
    # looked up before the first change
    assert prefixes.index("osd erasure-code-profile get") < prefixes.index("osd pool create")


def test_an_absent_profile_refuses_the_run_before_any_change(tmp_path: Path) -> None:
    cluster = FakeCluster()
    spec_path = tmp_path / "ec.yaml"
    spec_path.write_text(SPEC)
    sweep = fake_sweep(SweepOptions(spec_path=spec_path, results_dir=tmp_path / "run",
                                    metrics_linger_seconds=0, tty=False), cluster)
    with pytest.raises(SpecError) as info:
        sweep.run()
    (problem,) = info.value.problems
    assert problem.startswith(f"{spec_path}:3: cluster.pool_profiles.ec.erasure_profile: 'myec': no "
                              "such erasure-code profile on the cluster")
    assert "`ceph osd erasure-code-profile get myec`: ENOENT" in problem
    assert {p for p, _ in cluster.commands} <= READS
    assert not (tmp_path / "run").exists()
    # a dry run with the cluster says the same; without one, that it will look it up
    dry = fake_sweep(SweepOptions(spec_path=spec_path, dry_run=True), cluster)
    with pytest.raises(SpecError, match="no such erasure-code profile on the cluster"):
        dry.run()
    spec = load_spec(spec_path, SPEC, BENCHES)
    assert cep.dry_run_lines(spec, generate_steps(spec), None)[1] == (
        "  myec (pool profile ec): will be looked up on the cluster at start "
        "(`ceph osd erasure-code-profile get myec`)")


def test_no_answer_is_not_an_absent_profile(tmp_path: Path) -> None:
    class Silent:
        def command(self, prefix: str, timeout: float | None = None, **args: Any) -> Any:
            raise CephError("`ceph osd erasure-code-profile get` failed: ETIMEDOUT")

    spec = _spec(tmp_path)
    with pytest.raises(CephError, match="ETIMEDOUT"):
        cep.look_up(spec, generate_steps(spec), Silent())
    line = cep.dry_run_lines(spec, generate_steps(spec), Silent())[1]
    assert "could not ask the cluster" in line and "looks it up at start" in line


def test_a_sweep_across_releases_must_define_it(tmp_path: Path) -> None:
    spec = _spec(tmp_path, SPEC + "devcluster:\n  release: [pacific, reef]\n")
    cluster = FakeCluster()
    cluster.ec_profiles["myec"] = dict(PACIFIC_REPLY)
    with pytest.raises(SpecError, match="a sweep across releases rebuilds the cluster"):
        cep.look_up(spec, generate_steps(spec), cluster)
