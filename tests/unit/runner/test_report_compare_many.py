"""`cephscope compare` over three to six runs: every run against the first with the two-run
statistics, one column per run, the environment a column per run, --fail-on-regression over
all of them, seven runs refused, and the runs' plots overlaid. Runs are the recorded
iterations run (tests/fixtures/runs/iterations) and copies of it with scaled figures."""

from __future__ import annotations

import argparse
import csv
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from cephscope.runner import compare_cli
from cephscope.runner.report import compare
from cephscope.runner.report.compare_many import MAX_RUNS, compare_many, run_labels
from cephscope.runner.results import RunDir

RUNS = Path(__file__).resolve().parents[2] / "fixtures" / "runs"


def _scaled(tmp_path: Path, name: str, iops: float = 1.0, latency: float = 1.0,
            environment: dict[str, Any] | None = None, modes: tuple[str, ...] = ()) -> Path:
    """The iterations run with every IOPS and mean latency scaled (and only `modes`, when
    given)."""
    dest = tmp_path / name
    shutil.copytree(RUNS / "iterations", dest, ignore=shutil.ignore_patterns("prometheus.json"))
    for path in dest.glob("step-*/result.json"):
        result = json.loads(path.read_text())
        if modes:
            result["results"] = [r for r in result["results"] if r["mode"] in modes]
        for r in result["results"]:
            r["iops"] *= iops
            r["latency_avg_seconds"] *= latency
        path.write_text(json.dumps(result))
    if environment is not None:
        RunDir(dest).write_environment(environment)
    return dest


def _compare(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser()
    compare_cli.add_arguments(parser)
    code = compare_cli.run(parser.parse_args(list(argv)))
    out = capsys.readouterr()
    return code, out.out, out.err


def _env(swappiness: str, version: str = "16.2.15") -> dict[str, Any]:
    return {"hosts": {"osd-host": {"sysctl": {"vm.swappiness": swappiness}}},
            "cluster": {"versions": {"overall": {version: 4}}}}


def test_each_run_against_the_baseline_as_the_two_run_compare_does(tmp_path: Path) -> None:
    base = _scaled(tmp_path, "base", environment=_env("60"))
    same = _scaled(tmp_path, "same", environment=_env("60"))
    slower = _scaled(tmp_path, "slower", iops=0.3, environment=_env("10"))
    faster = _scaled(tmp_path, "faster", latency=0.5, environment=_env("60", "18.2.7"))
    many = compare_many(base, [same, slower, faster], 10.0, 0.05)
    assert [r.label for r in many.runs] == ["same", "slower", "faster"]
    for r in many.runs:
        pair, only_a, only_b = compare.compare_runs(base, r.run, 10.0, 0.05)
        assert not only_a and not only_b and not r.only_in_baseline and not r.only_in_run
        assert len(r.comparisons) == len(pair) == 8
        for c in pair:
            for f in c.figures:
                got = r.figure(c.params, c.mode, f.figure)
                assert got is not None
                assert (got.ratio, got.p_value, got.verdict) == (f.ratio, f.p_value, f.verdict)
    verdicts = {r.label: {f.verdict for c in r.comparisons for f in c.figures}
                for r in many.runs}
    assert verdicts["same"] == {"ok"}
    assert "regression" in verdicts["slower"]
    assert "improvement" in verdicts["faster"] and "regression" not in verdicts["faster"]


def test_the_table_has_a_column_per_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = _scaled(tmp_path, "base", environment=_env("60"))
    same = _scaled(tmp_path, "same", environment=_env("60"))
    slower = _scaled(tmp_path, "slower", iops=0.3, environment=_env("10"))
    faster = _scaled(tmp_path, "faster", latency=0.5, environment=_env("60", "18.2.7"))
    code, out, _err = _compare(capsys, str(base), str(same), str(slower), str(faster))
    assert code == compare_cli.EXIT_OK  # no --fail-on-regression
    header = next(line for line in out.splitlines() if line.startswith("| params |"))
    assert header == "| params | mode | figure | base | same | slower | faster |"
    rows = [line for line in out.splitlines() if line.startswith("| radosbench ")]
    assert len(rows) == 16  # 8 step/mode pairs x (IOPS, avg latency)
    iops_rows = [r.split(" | ") for r in rows if " | IOPS | " in r]
    for cells in iops_rows:
        assert "(1.000, p 1, ok)" in cells[4]
        assert "(0.300, p " in cells[5]
    # the environment: each setting that differs somewhere, a column per run
    env = out.split("## Environment")[1].split("## Results")[0]
    assert "| `hosts/osd-host/sysctl/vm.swappiness` | 60 | = | 10 | = |" in env
    assert "| `cluster/versions/overall/16.2.15` | 4 | = | = | None |" in env
    assert "- slower: " in out and "regressed" in out
    # --fail-on-regression looks at every run: one regressed
    code, _out, _err = _compare(capsys, str(base), str(same), str(faster), str(slower),
                                "--fail-on-regression", "10")
    assert code == compare_cli.EXIT_REGRESSION
    code, _out, _err = _compare(capsys, str(base), str(same), str(faster),
                                "--fail-on-regression", "10")
    assert code == compare_cli.EXIT_OK


def test_json_and_csv(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, same = _scaled(tmp_path, "base"), _scaled(tmp_path, "same")
    slower = _scaled(tmp_path, "slower", iops=0.3)
    code, out, _err = _compare(capsys, str(base), str(same), str(slower), "--format", "json")
    assert code == 0
    data = json.loads(out)
    assert data["baseline"]["label"] == "base"
    assert [r["label"] for r in data["runs"]] == ["same", "slower"]
    assert all(len(r["comparisons"]) == 8 and r["environment"] is None for r in data["runs"])
    code, out, _err = _compare(capsys, str(base), str(same), str(slower), "--format", "csv")
    lines = list(csv.DictReader(out.splitlines()))
    assert len(lines) == 16
    iops = [line for line in lines if line["figure"] == "IOPS"]
    for line in iops:
        assert float(line["ratio slower"]) == pytest.approx(0.3)
        assert float(line["mean slower"]) == pytest.approx(0.3 * float(line["mean base"]))
        assert line["n base"] == line["n same"] == "3"


def test_seven_runs_are_refused_six_are_not(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    runs = [str(_scaled(tmp_path, f"run{i}")) for i in range(MAX_RUNS + 1)]
    code, out, err = _compare(capsys, *runs)
    assert code == compare_cli.EXIT_BAD_INPUT and not out
    assert "at most 6 runs (the first is the baseline), got 7" in err
    code, out, _err = _compare(capsys, *runs[:MAX_RUNS])
    assert code == 0 and "| params | mode | figure | run0 | run1 | run2 | run3 | run4 | run5 |" \
        in out


def test_a_run_matching_nothing_or_not_a_run(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    base, same = _scaled(tmp_path, "base"), _scaled(tmp_path, "same")
    code, _out, err = _compare(capsys, str(base), str(same), str(RUNS / "objsize"))
    assert code == compare_cli.EXIT_BAD_INPUT and "objsize" in err and "no step" in err
    code, _out, err = _compare(capsys, str(base), str(same), str(tmp_path / "nothing"))
    assert code == compare_cli.EXIT_BAD_INPUT and "not a cephscope run dir" in err
    code, _out, err = _compare(capsys, str(base), "--across-releases", "--plots",
                               str(tmp_path / "plots"))
    assert code == compare_cli.EXIT_BAD_INPUT and "not with --across-releases" in err


def test_labels_of_runs_sharing_a_name() -> None:
    assert run_labels([Path("/a/run"), Path("/b/run"), Path("/c/other")]) == [
        "1:run", "2:run", "other"]


def test_plots_overlaid_leave_stdout_as_it_is(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    # the write mode alone: matplotlib takes about a second per figure here
    base, same = _scaled(tmp_path, "base", modes=("write",)), _scaled(tmp_path, "same",
                                                                      modes=("write",))
    slower = _scaled(tmp_path, "slower", iops=0.3, modes=("write",))
    plots = tmp_path / "plots"
    code, out, err = _compare(capsys, str(base), str(same), str(slower), "--format", "json",
                              "--plots", str(plots))
    assert code == 0 and json.loads(out)["runs"]
    names = sorted(p.name for p in plots.glob("*.png"))
    # against each axis per value of the other, and a response curve per op size
    assert names == [
        "compare-radosbench-write-vs-concurrent_ops-op_size=4096.png",
        "compare-radosbench-write-vs-concurrent_ops-op_size=65536.png",
        "compare-radosbench-write-vs-op_size-concurrent_ops=1.png",
        "compare-radosbench-write-vs-op_size-concurrent_ops=16.png",
        "compare-response-radosbench-write-concurrent_ops-op_size=4096.png",
        "compare-response-radosbench-write-concurrent_ops-op_size=65536.png"]
    assert f"plots: 6 in {plots}" in err
    # two runs: the same output as without --plots, and their plots
    code, two, _err = _compare(capsys, str(RUNS / "demo-a"), str(RUNS / "demo-b"))
    code_plots, two_plots, _err = _compare(capsys, str(RUNS / "demo-a"), str(RUNS / "demo-b"),
                                           "--plots", str(tmp_path / "two"))
    assert (code, two) == (code_plots, two_plots)
    assert len(list((tmp_path / "two").glob("compare-radosbench-write-vs-*.png"))) == 4
