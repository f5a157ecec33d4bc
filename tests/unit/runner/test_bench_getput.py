"""getput (CBT's Swift benchmark): its keys as CBT reads them (the endpoint ones taken out of
the step), the argv built, its result lines parsed per test. getput does not run here (a
Python 2 program in no registry): the output below is WRITTEN FROM ITS DOCUMENTED FORMAT
(getput's print_output/print_line format strings), not captured; the tests run through a
stand-in printing it."""

from __future__ import annotations

import stat
import sys
import textwrap
from pathlib import Path

import pytest

from cephscope.runner.benchmarks import getput as getput_module
from cephscope.runner.benchmarks.base import BenchContext, ClusterAccess, Slot
from cephscope.runner.benchmarks.getput import (
    GetPut,
    credentials_text,
    parse_result_line,
    result_from_lines,
    results_per_test,
    step_modes,
)
from cephscope.runner.hostexec import SshHost
from cephscope.runner.rgw_endpoint import endpoint
from tests.unit.bench_golden import TOOLS_DIR

# Written from the documented format (not a capture): header, then one line per test.
DOCUMENTED_OUTPUT = (TOOLS_DIR / "getput-documented-format.out").read_text()
RGW = endpoint("test", swift_auth_url="http://127.0.0.1:9/auth/1.0", swift_user="cbt:swift",
               swift_key="k3y")


def test_documented_output_parses_per_test() -> None:
    found = results_per_test(DOCUMENTED_OUTPUT, "p,g,d")
    assert sorted(found) == ["del", "get", "put"]
    put = result_from_lines("put", [found["put"]])
    assert put.iops == 320.0 and put.ops == 9600
    assert put.bandwidth_bytes_per_second == pytest.approx(1.25 * 2**20)
    assert put.latency_avg_seconds == pytest.approx(0.012)
    assert put.latency_percentiles_seconds == {"50": pytest.approx(0.011)}
    assert (put.latency_min_seconds, put.latency_max_seconds) == (0.0, pytest.approx(0.21))
    assert parse_result_line(DOCUMENTED_OUTPUT.splitlines()[0]) is None  # the header
    assert [m for _l, m in step_modes("p,p,g,D")] == ["put", "put.2", "get", "delr"]


def test_errors_fail_the_test() -> None:
    line = parse_result_line(DOCUMENTED_OUTPUT.splitlines()[1].replace(
        "320.00    0", "320.00    7"))
    assert line is not None
    with pytest.raises(ValueError, match="7 put requests failed"):
        result_from_lines("put", [line])


def _ctx(tmp_path: Path) -> BenchContext:
    step = tmp_path / "step"
    step.mkdir(parents=True, exist_ok=True)
    return BenchContext(ClusterAccess(tmp_path / "ceph.conf"), "", step, "run1", "abc123",
                        timeout_seconds=60, rgw=RGW)


def test_cbt_keys_become_getput_flags(tmp_path: Path) -> None:
    bench = GetPut({"runtime": 30, "procs": 4, "test": "p,g,d", "op_size": "4K",
                    "ctype": "byproc", "container_prefix": "bench"})
    argv = bench.tool_argv(_ctx(tmp_path), Slot(None, 0, 0), "/usr/bin/getput", "/s/getput.creds")
    assert argv == ["/usr/bin/getput", "-c", "bench-abc123", "-o", "cbt-getput-local",
                    "-s", "4096", "-t", "p,g,d", "--procs", "4", "--runtime", "30",
                    "--ctype", "byproc", "--creds", "/s/getput.creds"]
    remote = bench.tool_argv(_ctx(tmp_path), Slot(SshHost("client2"), 0, 1), "getput", "/t/c")
    assert remote[2] == "bench-abc123-client2"
    assert credentials_text(RGW) == ("export ST_AUTH=http://127.0.0.1:9/auth/1.0\n"
                                     "export ST_USER=cbt:swift\nexport ST_KEY=k3y\n")


def test_validation_and_endpoint_checks() -> None:
    assert GetPut.validate({"runtime": 10}) == []
    problems = "\n".join(GetPut.validate({"test": "p,x", "ctype": "odd", "pool_profile": "p"}))
    for expected in ("getput's tests", "give runtime or ops_per_proc", "ctype 'odd'",
                     "pool_profile has no effect"):
        assert expected in problems, expected
    assert GetPut.endpoint_problems(RGW) == []
    unsafe = endpoint("t", swift_auth_url="http://gw/auth/1.0", swift_user="u:swift",
                      swift_key="a=b")
    assert "cannot carry a key or user" in GetPut.endpoint_problems(unsafe)[0]


FAKE_GETPUT = textwrap.dedent(
    """\
    #!{python}
    import os, sys, time
    creds = sys.argv[sys.argv.index("--creds") + 1]
    with open(os.environ["FAKE_GP_RECORD"], "w") as out:
        out.write(" ".join(sys.argv[1:]) + "\\n" + "%o\\n" % (os.stat(creds).st_mode & 0o777))
        out.write(open(creds).read())
    for line in open(os.environ["FAKE_GP_OUTPUT"]):
        sys.stdout.write(line)
        sys.stdout.flush()
        time.sleep(0.2)
    """
)


def test_tests_run_as_modes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "getput"
    script.write_text(FAKE_GETPUT.format(python=sys.executable))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    (tmp_path / "out").write_text(DOCUMENTED_OUTPUT)
    monkeypatch.setenv("FAKE_GP_OUTPUT", str(tmp_path / "out"))
    monkeypatch.setenv("FAKE_GP_RECORD", str(tmp_path / "record"))
    removed: list[str] = []
    monkeypatch.setattr(getput_module, "remove_containers",
                        lambda rgw, prefix, timeout_seconds: removed.append(prefix))
    ctx = _ctx(tmp_path)
    bench = GetPut({"cmd_path": str(script), "runtime": 30, "test": "p,g,d"})
    bench.prepare(ctx)
    results = {}
    for mode in bench.modes():
        bench.run(mode, ctx)
        results[mode] = bench.parse(mode, ctx)
    bench.cleanup(ctx)
    assert [r.iops for r in results.values()] == [320.0, 800.0, 800.0]
    record = (tmp_path / "record").read_text().splitlines()
    assert record[1] == "600" and "export ST_KEY=k3y" in record
    assert not (ctx.step_dir / "getput.creds").exists()
    assert removed == ["cbt-getput-abc123"]
