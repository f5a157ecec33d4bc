"""Every example spec loads, and the study examples use no key cephscope ignores."""

from __future__ import annotations

from pathlib import Path

import pytest

from cephscope.runner.spec import load_spec
from cephscope.runner.steps import generate_steps

EXAMPLES = sorted((Path(__file__).resolve().parents[3] / "examples").glob("*.yaml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_loads_with_steps(path: Path):
    spec = load_spec(path)
    assert generate_steps(spec)
    if path.name != "cbt-style.yaml":  # that one shows CBT's cluster-building keys on purpose
        assert spec.warnings == []


def test_study_examples_turn_the_studies_knobs():
    by_name = {p.name: load_spec(p) for p in EXAMPLES}
    assert by_name["shard-thread-study.yaml"].knobs == {"osd_ra": [4096]}
    ec = by_name["ec-study.yaml"]
    assert ec.knobs["block_queue.iosched/read_expire"] == [100, 500]
    assert ec.pool_profiles["ec33"].erasure_k == 3 and ec.pool_profiles["ec33"].erasure_m == 3
    assert ec.benchmarks["librbdfio"]["data_pool_profile"] == "ec33"
    assert by_name["cbt-talk.yaml"].sysctl_on == {"sysctl.vm.swappiness": "all"}
    assert by_name["cbt-talk.yaml"].knobs["osd_ra"] == [0]


# The axes each study sweeps, as its steps record them (step ids, summary.csv, report).
STUDY_AXES = {
    "shard-thread-study.yaml": {"osd_ra", "ceph_config.osd_op_num_shards",
                                "ceph_config.osd_op_num_threads_per_shard",
                                "radosbench.concurrent_ops"},
    "fio-allflash.yaml": {"librbdfio.mode", "librbdfio.op_size"},
    "cbt-talk.yaml": {"osd_ra", "radosbench.op_size", "pool_profile"},
    "ec-study.yaml": {"block_queue.iosched/read_expire", "librbdfio.vol_object_size"},
}


@pytest.mark.parametrize("name", sorted(STUDY_AXES))
def test_study_examples_record_each_axis_in_every_step(name: str):
    steps = generate_steps(load_spec(EXAMPLES[0].parent / name))
    assert all(set(s.axes) == STUDY_AXES[name] for s in steps), [s.axes for s in steps]
    # a one-value axis (the study's `osd_ra: [4096]`) changes the step ids like any other
    assert len({s.id for s in steps}) == len(steps)


def test_release_comparison_sweeps_three_releases_slowest():
    spec = load_spec(Path(__file__).resolve().parents[3] / "examples" / "release-comparison.yaml")
    assert spec.releases == ("pacific", "reef", "tentacle")
    steps = generate_steps(spec)
    assert [s.release for s in steps] == ["pacific", "reef", "tentacle"]
    assert all(s.params["mode"] == "randwrite" and s.params["op_size"] == 4096 for s in steps)
