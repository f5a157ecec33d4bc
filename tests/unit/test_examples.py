"""Every example spec loads, and the study examples use no key cephscope ignores."""

from __future__ import annotations

from pathlib import Path

import pytest

from cephscope.runner.spec import load_spec
from cephscope.runner.steps import generate_steps

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.yaml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_loads_with_steps(path: Path):
    spec = load_spec(path)
    assert generate_steps(spec)
    if path.name != "cbt-style.yaml":  # that one shows CBT's cluster-building keys on purpose
        assert spec.warnings == []


def test_study_examples_turn_the_studies_knobs():
    by_name = {p.name: load_spec(p) for p in EXAMPLES}
    assert by_name["shard-thread-study.yaml"].knobs == {"osd_ra": 4096}
    ec = by_name["ec-study.yaml"]
    assert ec.knobs["block_queue.iosched/read_expire"] == [100, 500]
    assert ec.pool_profiles["ec33"].erasure_k == 3 and ec.pool_profiles["ec33"].erasure_m == 3
    assert ec.benchmarks["librbdfio"]["data_pool_profile"] == "ec33"
    assert by_name["cbt-talk.yaml"].sysctl_on == {"sysctl.vm.swappiness": "all"}
