"""Host knob sections in the spec and the steps they make."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from cephscope.runner.spec import SpecError, load_spec
from cephscope.runner.steps import axis_labels, generate_steps
from tests.unit.runner_fakes import BENCHES

SPEC = """\
osd_ra: [128, 4096]
block_queue:
  scheduler: [none, mq-deadline]
  iosched/read_expire: 250
sysctl:
  vm.swappiness: 10
  kernel.pid_max: {value: 4194304, on: all}
benchmarks:
  radosbench:
    op_size: 4096
    time: 5
    write_only: true
"""


def load(text: str):
    return load_spec(Path("sweep.yaml"), text=textwrap.dedent(text), benchmarks=BENCHES)


def test_knob_sections_become_axes_labels_and_step_ids():
    spec = load(SPEC)
    assert spec.knobs == {"osd_ra": [128, 4096], "block_queue.scheduler": ["none", "mq-deadline"],
                          "block_queue.iosched/read_expire": 250, "sysctl.vm.swappiness": 10,
                          "sysctl.kernel.pid_max": 4194304}
    assert spec.sysctl_on == {"sysctl.kernel.pid_max": "all"}
    steps = generate_steps(spec)
    assert len(steps) == 4 and len({s.id for s in steps}) == 4
    assert steps[0].knobs["sysctl.vm.swappiness"] == 10
    assert {(s.axes["osd_ra"], s.axes["block_queue.scheduler"]) for s in steps} == {
        (128, "none"), (128, "mq-deadline"), (4096, "none"), (4096, "mq-deadline")}
    assert axis_labels(steps) == {"osd_ra": "osd_ra", "block_queue.scheduler": "scheduler"}
    # a spec without knobs keeps the step ids it always had
    plain = load(SPEC.split("benchmarks:")[0].replace("osd_ra", "#") .split("#")[0]
                 + "benchmarks:" + SPEC.split("benchmarks:")[1])
    with_knob = load("osd_ra: 128\nbenchmarks:" + SPEC.split("benchmarks:")[1])
    assert generate_steps(plain)[0].id != generate_steps(with_knob)[0].id


def test_cbt_osd_ra_in_cluster_and_in_a_benchmark():
    spec = load("""\
    cluster:
      osd_ra: 4096
    benchmarks:
      radosbench:
        op_size: 4096
        osd_ra: [0, 4096]
    """)
    assert spec.knobs == {"osd_ra": 4096}
    assert [s.knobs["osd_ra"] for s in generate_steps(spec)] == [0, 4096]
    assert not spec.warnings


def test_sysctl_label_keeps_the_whole_name():
    spec = load("sysctl:\n  vm.swappiness: [10, 60]\nbenchmarks:" + SPEC.split("benchmarks:")[1])
    assert axis_labels(generate_steps(spec)) == {"sysctl.vm.swappiness": "sysctl_vm_swappiness"}


@pytest.mark.parametrize(("text", "problem"), [
    ("osd_ra: fast\n", "osd_ra: 'fast': wrong type str; expected int"),
    ("block_queue:\n  ../../evil: 1\n", "not a queue attribute"),
    ("sysctl:\n  swappiness: 1\n", "not a sysctl name"),
    ("sysctl:\n  vm.swappiness: {value: 1, on: everywhere}\n", "must be osds, clients or all"),
])
def test_bad_knob_sections_name_the_key(text, problem):
    with pytest.raises(SpecError) as info:
        load(text + "benchmarks:" + SPEC.split("benchmarks:")[1])
    assert any(problem in p and "sweep.yaml:" in p for p in info.value.problems), \
        info.value.problems
