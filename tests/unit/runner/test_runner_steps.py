"""Step generation: Cartesian product, deterministic ids, restart-minimising order, labels."""

from __future__ import annotations

import textwrap
from pathlib import Path

from cephscope.runner.spec import load_spec
from cephscope.runner.steps import (
    axis_labels,
    count_restarts,
    generate_steps,
    label_for_axis,
    order_steps,
)
from tests.unit.runner_fakes import BENCHES

SPEC = """\
ceph_config:
  osd_op_num_shards: [1, 5, 10]
  osd_max_backfills: [1, 2]
benchmarks:
  radosbench:
    op_size: [4096, 65536]
    concurrent_ops: [1, 256]
    time: 5
"""


def steps_of(text: str):
    return generate_steps(load_spec(Path("s.yaml"), text=textwrap.dedent(text),
                                    benchmarks=BENCHES))


def test_cartesian_product_size_and_axes():
    steps = steps_of(SPEC)
    assert len(steps) == 3 * 2 * 2 * 2
    assert len({s.id for s in steps}) == len(steps)
    combos = {(s.ceph_config["osd_op_num_shards"], s.ceph_config["osd_max_backfills"],
               s.params["op_size"], s.params["concurrent_ops"]) for s in steps}
    assert len(combos) == 24
    assert set(steps[0].axes) == {"ceph_config.osd_op_num_shards",
                                  "ceph_config.osd_max_backfills", "radosbench.op_size",
                                  "radosbench.concurrent_ops"}
    assert all(s.params["time"] == 5 for s in steps)  # scalars are not axes
    assert "radosbench.time" not in steps[0].axes


def test_ids_are_deterministic_and_depend_only_on_params():
    a = {(s.ceph_config["osd_op_num_shards"], s.params["op_size"],
          s.params["concurrent_ops"], s.ceph_config["osd_max_backfills"]): s.id
         for s in steps_of(SPEC)}
    # same params written in another order, with an extra value on one axis
    other = SPEC.replace("[1, 5, 10]", "[10, 1, 5, 20]").replace(
        "op_size: [4096, 65536]", "op_size: [65536, 4096]")
    b = {(s.ceph_config["osd_op_num_shards"], s.params["op_size"],
          s.params["concurrent_ops"], s.ceph_config["osd_max_backfills"]): s.id
         for s in steps_of(other)}
    for key, sid in a.items():
        assert b[key] == sid
    assert len(next(iter(a.values()))) == 12


def test_iteration_and_scalar_params_change_the_id():
    one = steps_of(SPEC)
    two = steps_of("iterations: 2\n" + SPEC)
    assert len(two) == 2 * len(one)
    assert {s.id for s in one} < {s.id for s in two}
    longer = steps_of(SPEC.replace("time: 5", "time: 6"))
    assert not ({s.id for s in one} & {s.id for s in longer})


def test_order_groups_restart_options_one_restart_per_value():
    steps = steps_of(SPEC)
    naive = count_restarts(steps, {"osd_op_num_shards"})
    ordered = order_steps(steps, {"osd_op_num_shards"})
    assert sorted(s.id for s in ordered) == sorted(s.id for s in steps)
    assert count_restarts(ordered, {"osd_op_num_shards"}) == 3
    assert naive >= 3
    # interleave on purpose: ordering must still give one restart per value
    shuffled = steps[::2] + steps[1::2]
    shuffled = sorted(shuffled, key=lambda s: s.params["op_size"])
    assert count_restarts(shuffled, {"osd_op_num_shards"}) > 3
    assert count_restarts(order_steps(shuffled, {"osd_op_num_shards"}),
                          {"osd_op_num_shards"}) == 3


def test_order_starts_with_the_current_value():
    steps = steps_of(SPEC)
    ordered = order_steps(steps, {"osd_op_num_shards"}, current={"osd_op_num_shards": "10"})
    assert ordered[0].ceph_config["osd_op_num_shards"] == 10
    assert count_restarts(ordered, {"osd_op_num_shards"}, {"osd_op_num_shards": "10"}) == 2


def test_no_restart_options_keeps_order():
    steps = steps_of(SPEC)
    assert order_steps(steps, set()) == steps
    assert count_restarts(steps, set()) == 0


def test_label_mapping():
    assert label_for_axis("ceph_config.osd_op_num_shards") == "osd_op_num_shards"
    assert label_for_axis("radosbench.op_size") == "op_size"
    assert label_for_axis("pool_profile") == "pool_profile"
    assert label_for_axis("radosbench.mode") == "param_mode"  # runner's own label
    assert label_for_axis("ceph_config.some-option") == "some_option"


def test_axis_labels_keep_ceph_option_and_benchmark_param_apart():
    spec = """\
    ceph_config:
      op_size: [1, 2]
    benchmarks:
      radosbench:
        op_size: [4096, 8192]
      librbdfio:
        op_size: [4096, 8192]
        mode: [randread, randwrite]
    """
    steps = steps_of(spec)
    labels = axis_labels(steps)
    assert labels["ceph_config.op_size"] == "op_size"
    assert labels["radosbench.op_size"] == "radosbench_op_size"
    assert labels["librbdfio.op_size"] == "librbdfio_op_size"
    assert labels["librbdfio.mode"] == "param_mode"
    assert len(steps) == 2 * 2 + 2 * 2 * 2


def test_pool_profile_axis():
    spec = """\
    pool_profiles:
      rep1: {replication: 1}
      ec21: {replication: erasure, erasure_k: 2, erasure_m: 1}
    benchmarks:
      radosbench:
        time: 5
        pool_profile: [rep1, ec21]
    """
    steps = steps_of(spec)
    assert [s.pool_profile for s in steps] == ["rep1", "ec21"]
    assert steps[0].axes == {"pool_profile": "rep1"}
    assert steps[0].id != steps[1].id
