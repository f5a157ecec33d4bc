"""hsbench (CBT's S3 benchmark): its keys as CBT reads them, the argv built from them, its log
parsed per phase. hsbench does not run here (neither Debian nor the Go module proxy serves
it): the output below is WRITTEN FROM ITS DOCUMENTED FORMAT (markhpc/hsbench README and its
log.Printf format string), not captured; the phases run through a stand-in printing it."""

from __future__ import annotations

import stat
import sys
import textwrap
from pathlib import Path

import pytest

from cephscope.runner.benchmarks.base import BenchContext, BenchmarkError, ClusterAccess, Slot
from cephscope.runner.benchmarks.hsbench import (
    HsBench,
    parse_stat,
    phase_totals,
    result_from_totals,
    step_modes,
)
from cephscope.runner.hostexec import SshHost
from cephscope.runner.rgw_endpoint import endpoint
from tests.unit.bench_golden import TOOLS_DIR

# Written from the documented format (not a capture): 2 s PUT, 1 s GET, DEL; 4 KiB objects.
DOCUMENTED_LOG = (TOOLS_DIR / "hsbench-documented-format.log").read_text()
RGW = endpoint("test", s3_url="http://127.0.0.1:9", access_key="AK1", secret_key="SK/secret")


def test_each_measured_phase_is_a_mode_in_run_order() -> None:
    assert [m for _l, m in step_modes("cxipgdx", 1)] == ["put", "get", "del"]
    assert [m for _l, m in step_modes("ippgld", 2)] == [
        "put", "put.2", "get", "list", "del", "put.3", "put.4", "get.2", "list.2", "del.2"]
    assert HsBench({"modes": "cxiplgdx", "loop": 1}).modes() == ["put", "list", "get", "del"]


def test_documented_log_parses_to_each_phases_total() -> None:
    totals = phase_totals(DOCUMENTED_LOG, "cxipgdx", 1)
    assert sorted(totals) == ["del", "get", "put"]
    assert totals["put"].ops == 2200 and totals["put"].seconds == 2.0
    assert totals["del"].interval == "ALL"  # older builds' name for the total
    put = result_from_totals("put", [totals["put"]])
    assert put.iops == pytest.approx(1100) and put.ops == 2200
    assert put.bandwidth_bytes_per_second == pytest.approx(4.30 * 2**20)
    assert put.latency_avg_seconds == pytest.approx(0.0036)
    assert put.latency_percentiles_seconds == {"99": pytest.approx(0.0085)}
    assert (put.latency_min_seconds, put.latency_max_seconds) == (pytest.approx(0.001),
                                                                  pytest.approx(0.02))
    two = result_from_totals("get", [totals["get"], totals["put"]])  # processes combined
    assert two.iops == pytest.approx(3100) and two.extra["percentile_method"] == \
        "weighted-approximation"
    assert two.latency_percentiles_seconds["99"] == pytest.approx(
        (4.0 * 2000 + 8.5 * 2200) / 4200 / 1000)
    interval = parse_stat(DOCUMENTED_LOG.splitlines()[6])
    assert interval is not None and not interval.total and interval.iops == 1000


def test_slowdowns_are_failed_requests() -> None:
    line = DOCUMENTED_LOG.splitlines()[8].replace("Slowdowns: 0", "Slowdowns: 3")
    stat_line = parse_stat(line)
    assert stat_line is not None
    with pytest.raises(ValueError, match="3 put requests failed"):
        result_from_totals("put", [stat_line])


def _ctx(tmp_path: Path, timeout: float = 60.0) -> BenchContext:
    step = tmp_path / "step"
    step.mkdir(parents=True, exist_ok=True)
    return BenchContext(ClusterAccess(tmp_path / "ceph.conf"), "", step, "run1", "abc123",
                        timeout_seconds=timeout, rgw=RGW)


def test_cbt_keys_become_hsbench_flags_and_keys_its_environment(tmp_path: Path) -> None:
    bench = HsBench({"buckets": 4, "duration": -1, "objects": 10000, "threads": 16,
                     "size": "4K", "report_interval": 10, "region": "us-east-1",
                     "max_keys": 500, "object_prefix": "obj"})
    argv = bench.tool_argv(_ctx(tmp_path), Slot(None, 0, 0), "/usr/bin/hsbench", None)
    assert argv == ["/usr/bin/hsbench", "-u", "http://127.0.0.1:9", "-b", "4",
                    "-bp", "cephscope-abc123-", "-d", "-1", "-n", "10000", "-t", "16",
                    "-z", "4K", "-l", "1", "-m", "cxipgdx", "-mk", "500", "-r", "us-east-1",
                    "-ri", "10", "-op", "obj-local-0-"]
    assert bench.tool_env(RGW) == {"AWS_ACCESS_KEY_ID": "AK1", "AWS_SECRET_ACCESS_KEY": "SK/secret"}
    assert not any("SK/secret" in a or "AK1" in a for a in argv)
    remote = bench.tool_argv(_ctx(tmp_path), Slot(SshHost("c@h2"), 1, 3), "hsbench", None)
    assert remote[-2:] == ["-op", "obj-c-h2-1-"]
    flat = HsBench({"per_client_object_prefix": False, "bucket_prefix": "mine"})
    flat_argv = flat.tool_argv(_ctx(tmp_path), Slot(None, 0, 0), "hsbench", None)
    assert "-op" not in flat_argv and flat_argv[flat_argv.index("-bp") + 1] == "mine"


def test_validation_names_the_problem() -> None:
    assert HsBench.validate({"duration": -1, "objects": 100, "modes": "cxipgdx"}) == []
    problems = "\n".join(HsBench.validate({"duration": -1, "objects": -1, "modes": "cxq",
                                           "bucket_prefix": "Bad_Prefix", "size": "4Q",
                                           "pool_profile": "rgw"}))
    for expected in ("cannot both be -1", "hsbench mode letters only", "bucket_prefix",
                     "size", "pool_profile has no effect"):
        assert expected in problems, expected
    assert "measures nothing" in "\n".join(HsBench.validate({"modes": "cxi"}))
    assert "duration must be > 0, or -1" in "\n".join(HsBench.validate({"duration": -5}))
    assert HsBench.endpoint_problems(endpoint("t", s3_url="http://gw:80")) == [
        "hsbench drives the gateway's S3 API and lacks access_key, secret_key"]


# A stand-in printing the documented log on stderr (one line per 20 ms) and recording argv and
# the keys it got in its environment.
FAKE_HSBENCH = textwrap.dedent(
    """\
    #!{python}
    import os, sys, time
    with open(os.environ["FAKE_HS_RECORD"], "a") as out:
        out.write(" ".join(sys.argv[1:]) + "\\n")
        out.write(os.environ.get("AWS_ACCESS_KEY_ID", "-") + " "
                  + os.environ.get("AWS_SECRET_ACCESS_KEY", "-") + "\\n")
    if "cx" == sys.argv[sys.argv.index("-m") + 1]:
        sys.exit(0)
    for line in open(os.environ["FAKE_HS_LOG"]):
        sys.stderr.write(line)
        sys.stderr.flush()
        time.sleep(0.02)
    """
)


def test_phases_run_as_modes_and_cleanup_deletes_the_buckets(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    script = tmp_path / "hsbench"
    script.write_text(FAKE_HSBENCH.format(python=sys.executable))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    (tmp_path / "log").write_text(DOCUMENTED_LOG)
    monkeypatch.setenv("FAKE_HS_LOG", str(tmp_path / "log"))
    monkeypatch.setenv("FAKE_HS_RECORD", str(tmp_path / "record"))
    samples: list = []
    ctx = _ctx(tmp_path)
    ctx.report_progress = lambda mode, sample: samples.append((mode, sample))
    bench = HsBench({"cmd_path": str(script), "objects": 2200, "duration": -1})
    bench.prepare(ctx)
    results = {}
    for mode in bench.modes():
        bench.run(mode, ctx)
        results[mode] = bench.parse(mode, ctx)
    bench.cleanup(ctx)
    assert results["get"].iops == pytest.approx(2000)
    assert results["del"].iops == pytest.approx(2200 / 0.8)
    record = (tmp_path / "record").read_text().splitlines()
    assert record[1] == "AK1 SK/secret"  # the keys came through the environment
    assert "-m cx" in record[2] and "-bp cephscope-abc123-" in record[2]  # the cleanup
    assert [m for m, _s in samples] == ["put", "put", "get"]  # the interval lines
    assert samples[0][1].latency_seconds == pytest.approx(0.004)


def test_missing_hsbench_says_where_it_comes_from(tmp_path: Path) -> None:
    bench = HsBench({"cmd_path": "/home/<user>/go/src/github.com/markhpc/hsbench/hsbench"})
    ctx = _ctx(tmp_path)
    bench.prepare(ctx)
    with pytest.raises(BenchmarkError, match=r"not found on PATH; it comes from github.com/markhpc"):
        bench.run("put", ctx)
    bench.cleanup(ctx)
