"""CBT's workloads block: each workload its own steps (its lists are axes), the precondition
laid over each step and run before it, CBT keys cephscope does not act on warned about."""

from __future__ import annotations

from pathlib import Path

import pytest

from cephscope.runner.spec import SpecError, load_spec
from cephscope.runner.steps import axis_labels, generate_steps
from cephscope.runner.workloads import parameter_sets, precondition_params

SPEC = """\
client_endpoints:
  rbd: {driver: librbd, endpoint_size: 256}
benchmarks:
  fio:
    client_endpoints: rbd
    time: 10
    op_size: [4096, 65536]
    iodepth: 16
    size: 64
    workloads:
      precondition:
        jobname: precond1rw
        mode: randwrite
        numjobs: [1]
        iodepth: [4]
        monitor: false
      randread:
        jobname: rr
        mode: randread
        numjobs: [1, 2]
        total_iodepth: [2, 8]
      seqwrite:
        mode: write
        pre_workload_script: sudo /home/x/mkvols
"""


def _spec(tmp_path: Path, text: str = SPEC):
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return load_spec(path)


def test_each_workload_is_its_own_steps_with_its_axes(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    steps = generate_steps(spec)
    by_workload: dict[str, list] = {}
    for s in steps:
        by_workload.setdefault(s.params["workload"], []).append(s)
    # the benchmark's op_size axis times each workload's own axes; no precondition step
    assert sorted(by_workload) == ["randread", "seqwrite"]
    assert len(by_workload["randread"]) == 2 * 2 * 2 and len(by_workload["seqwrite"]) == 2
    rr = by_workload["randread"][0]
    assert rr.params["mode"] == "randread" and "iodepth" not in rr.params  # total_iodepth won
    assert {s.params["total_iodepth"] for s in by_workload["randread"]} == {2, 8}
    assert set(rr.axes) == {"fio.workload", "fio.op_size", "fio.numjobs", "fio.total_iodepth"}
    assert by_workload["seqwrite"][0].params["iodepth"] == 16
    assert axis_labels(steps)["fio.workload"] == "workload"
    assert len({s.id for s in steps}) == len(steps)


def test_the_precondition_follows_the_steps_own_values(tmp_path: Path) -> None:
    steps = generate_steps(_spec(tmp_path))
    for s in steps:
        pre = s.params["precondition"]
        # its own values (single-element lists taken as values), the step's for the rest
        assert pre["mode"] == "randwrite" and pre["iodepth"] == 4 and pre["numjobs"] == 1
        assert pre["op_size"] == s.params["op_size"] and pre["time"] == 10
        assert "workload" not in pre and "endpoint" not in pre and "monitor" not in pre


def test_ignored_cbt_keys_are_warned(tmp_path: Path) -> None:
    warned = "\n".join(_spec(tmp_path).warnings)
    assert "workloads.precondition.jobname" in warned
    assert "workloads.seqwrite.pre_workload_script" in warned and "a shell line" in warned


@pytest.mark.parametrize(("block", "fragment"), [
    ("      pre: {monitor: false, iodepth: [1, 2]}\n      a: {mode: read}\n",
     "the precondition runs once per step"),
    ("      precondition: {mode: write}\n      p2: {monitor: false}\n      a: {mode: read}\n",
     "one precondition workload at most"),
    ("      precondition: {mode: write}\n", "only a precondition"),
    ("      a: {mode: read, client_endpoints: rbd}\n", "not a parameter a workload can set"),
    ("      a: {mode: read, frobnicate: 1}\n", "not a parameter a workload can set"),
    ("      a: {mode: read, monitor: maybe}\n", "true or false"),
    ("      a: {mode: [read, read]}\n", "axis holds the same value twice"),
    ("      a: {mode: readish}\n", "mode must be one of"),
    ("      a: {iodepth: 4, total_iodepth: 8}\n", "not both"),
])
def test_bad_workloads_are_refused_naming_the_key(tmp_path: Path, block: str,
                                                  fragment: str) -> None:
    text = SPEC[:SPEC.index("    workloads:")] + "    workloads:\n" + block
    with pytest.raises(SpecError) as info:
        _spec(tmp_path, text)
    assert fragment in str(info.value), info.value
    assert "benchmarks.fio" in str(info.value)


def test_parameter_sets_without_workloads_are_the_parameters() -> None:
    assert parameter_sets({"mode": "read", "iodepth": [1, 2]}) == [
        (None, {"mode": "read", "iodepth": [1, 2]}, None)]


def test_a_workloads_depth_replaces_the_benchmarks_either_way() -> None:
    (_name, merged, _pre), = parameter_sets(
        {"total_iodepth": 16, "workloads": {"a": {"iodepth": [2]}}})
    assert merged == {"iodepth": [2], "workload": "a"}
    assert precondition_params({"total_iodepth": 16, "mode": "read"},
                               {"iodepth": 4}) == {"iodepth": 4, "mode": "read"}
