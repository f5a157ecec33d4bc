"""swiftbench: swift-bench's log parsed on a real capture (swift-bench 2.0.0 against the dev
cluster's Pacific gateway), each phase a mode through a stand-in swift-bench replaying that
capture, its config file, argv, validation, and the failure paths."""

from __future__ import annotations

import stat
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from cephscope.runner.benchmarks import swiftbench
from cephscope.runner.benchmarks.base import BenchContext, BenchmarkError, ClusterAccess, Slot
from cephscope.runner.benchmarks.swiftbench import (
    SwiftBench,
    config_text,
    final_lines,
    parse_line,
    result_from_finals,
)
from cephscope.runner.hostexec import SshHost
from cephscope.runner.rgw_endpoint import endpoint
from tests.unit.bench_golden import TOOLS_DIR

CAPTURE = TOOLS_DIR / "swiftbench-2.0.0-rgw-16.2.15-4k-c8-put2000-get2500.log"
BAD_KEY = TOOLS_DIR / "swiftbench-2.0.0-rgw-16.2.15-bad-key.log"
KEY = "s3cr3t%Key/with+odd=chars"
RGW = endpoint("test", swift_auth_url="http://127.0.0.1:9/auth/1.0", swift_user="bench:swift",
               swift_key=KEY)


def test_capture_phases_parse_to_their_final_lines() -> None:
    finals = final_lines(CAPTURE.read_text())
    assert sorted(finals) == ["del", "get", "put"]
    assert (finals["put"].count, finals["put"].rate, finals["put"].failures) == (2000, 57.9, 0)
    assert (finals["get"].count, finals["get"].rate) == (2500, 78.3)
    assert (finals["del"].count, finals["del"].rate) == (2000, 73.5)
    status = parse_line("swift-bench 2026-11-26 15:37:42,776 INFO 822 PUTS [0 failures], 48.3/s")
    assert status is not None and not status.final and status.mode == "put"
    assert parse_line("swift-bench 2026-11-26 15:37:25,642 INFO Auth version: 1.0") is None


def test_result_is_the_final_rate_and_says_it_measures_no_latency() -> None:
    finals = final_lines(CAPTURE.read_text())
    put = result_from_finals("put", [finals["put"]], 4096, 8)
    assert put.iops == 57.9 and put.ops == 2000
    assert put.bandwidth_bytes_per_second == pytest.approx(57.9 * 4096)
    assert put.latency_avg_seconds is None and put.latency_percentiles_seconds == {}
    assert put.extra["latency_little_seconds"] == pytest.approx(8 / 57.9)
    assert "measures no latency" in put.extra["note"]
    assert put.runtime_seconds == pytest.approx(2000 / 57.9)
    # two processes: rates and counts add up; deletes move no data
    both = result_from_finals("del", [finals["del"], finals["del"]], 4096, 8)
    assert both.iops == pytest.approx(147.0) and both.ops == 4000
    assert both.bandwidth_bytes_per_second == 0.0


def test_failed_requests_fail_the_phase() -> None:
    line = parse_line("swift-bench 2026-11-26 15:38:00,309 INFO 2000 PUTS **FINAL** "
                      "[12 failures], 57.9/s")
    assert line is not None
    with pytest.raises(ValueError, match="12 of 2000 PUT requests failed"):
        result_from_finals("put", [line], 4096, 8)


def test_config_file_holds_the_swift_auth_with_percent_doubled() -> None:
    text = config_text(RGW)
    assert "auth = http://127.0.0.1:9/auth/1.0\n" in text
    assert "user = bench:swift\n" in text
    assert "key = s3cr3t%%Key/with+odd=chars\n" in text  # ConfigParser interpolates '%'
    import configparser

    parser = configparser.ConfigParser()
    parser.read_string(text)
    assert parser["bench"]["key"] == KEY


def _ctx(tmp_path: Path, samples: list | None = None, timeout: float = 60.0,
         clients: tuple = ()) -> BenchContext:
    step = tmp_path / "step"
    step.mkdir(parents=True, exist_ok=True)
    return BenchContext(ClusterAccess(tmp_path / "ceph.conf"), "", step, "run1", "abc123",
                        report_progress=(lambda m, s: samples.append((m, s)))
                        if samples is not None else (lambda m, s: None),
                        timeout_seconds=timeout, rgw=RGW, clients=clients)


def test_argv_takes_cbt_words_and_keeps_the_key_off_it(tmp_path: Path) -> None:
    bench = SwiftBench({"op_size": "64K", "concurrent_ops": 32, "put_count": 50,
                        "get_count": 0, "containers": 4, "delete": False})
    assert list(bench.modes()) == ["put"]  # no GET phase, no DEL phase
    argv = bench.tool_argv(_ctx(tmp_path), Slot(None, 1, 1), "/bin/swift-bench", "/x/c.conf")
    assert argv == ["/bin/swift-bench", "-c", "32", "-s", "65536", "-n", "50", "-g", "0",
                    "-C", "4", "--container-name", "cephscope-abc123-1", "-x", "/x/c.conf"]
    client = SshHost("user@client-1")
    remote = bench.tool_argv(_ctx(tmp_path), Slot(client, 0, 2), "swift-bench", "/tmp/k/c")
    assert remote[remote.index("--container-name") + 1] == "cephscope-abc123-user-client-1-0"
    assert not any(KEY in a for a in argv + remote)


def test_validation_names_the_problem() -> None:
    assert SwiftBench.validate({"op_size": "4K", "put_count": 10, "get_count": 0}) == []
    problems = "\n".join(SwiftBench.validate({"time": 60, "pool_profile": "rep3",
                                              "put_count": 0, "op_size": "4Q",
                                              "cmd_path": "swift-bench; reboot"}))
    assert "runs a count of requests, not for a time" in problems
    assert "pool_profile has no effect" in problems
    assert "'put_count' must be > 0" in problems
    assert "op_size" in problems and "cmd_path" in problems
    assert SwiftBench.endpoint_problems(endpoint("t", swift_user="u:s")) == [
        "swiftbench drives the gateway's Swift API and lacks swift_auth_url, swift_key"]


# ---- run / cleanup through a stand-in swift-bench replaying the real capture -------------------

FAKE_SWIFT_BENCH = textwrap.dedent(
    """\
    #!{python}
    # Stand-in for swift-bench: records its argv and its config file's mode and text, then
    # replays a real capture on stderr (20 ms a line, 0.4 s after each FINAL line), or fails.
    import os, stat, sys, time
    argv = sys.argv[1:]
    conf = argv[-1]
    with open(os.environ["FAKE_SB_LOG"], "a") as log:
        log.write(" ".join(argv) + "\\n")
        log.write("mode %o\\n" % stat.S_IMODE(os.stat(conf).st_mode))
        log.write(open(conf).read())
    behaviour = os.environ.get("FAKE_SB_BEHAVIOUR", "ok")
    if behaviour == "bad-key":
        sys.stderr.write(open(os.environ["FAKE_SB_BAD_KEY"]).read())
        sys.exit(1)
    for line in open(os.environ["FAKE_SB_CAPTURE"]):
        if behaviour == "no-delete" and " DEL " in line:
            break
        sys.stderr.write(line)
        sys.stderr.flush()
        time.sleep(0.4 if "FINAL" in line else 0.02)
    if behaviour == "hang":
        time.sleep(60)
    """
)


@pytest.fixture()
def fake_swift_bench(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    script = tmp_path / "swift-bench"
    script.write_text(FAKE_SWIFT_BENCH.format(python=sys.executable))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("FAKE_SB_LOG", str(tmp_path / "argv.log"))
    monkeypatch.setenv("FAKE_SB_CAPTURE", str(CAPTURE))
    monkeypatch.setenv("FAKE_SB_BAD_KEY", str(BAD_KEY))
    return script


@pytest.fixture()
def removed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The container prefixes the cleanup removed (no gateway in a unit test)."""
    calls: list[str] = []
    monkeypatch.setattr(swiftbench, "remove_containers",
                        lambda rgw, prefix, timeout_seconds: calls.append(prefix))
    return calls


def test_each_phase_is_a_mode_that_ends_with_its_final_line(
        tmp_path: Path, fake_swift_bench: Path, removed: list[str]) -> None:
    samples: list = []
    ctx = _ctx(tmp_path, samples)
    bench = SwiftBench({"cmd_path": str(fake_swift_bench), "concurrent_ops": 8,
                        "put_count": 2000, "get_count": 2500, "concurrent_procs": 2})
    bench.prepare(ctx)
    conf = ctx.step_dir / "swiftbench.conf"
    assert stat.S_IMODE(conf.stat().st_mode) == 0o600
    returned = {}
    results = {}
    for mode in bench.modes():
        bench.run(mode, ctx)
        returned[mode] = time.monotonic()
        results[mode] = bench.parse(mode, ctx)
    bench.cleanup(ctx)
    assert list(results) == ["put", "get", "del"]
    # two processes replaying the capture: its FINAL rates twice
    assert results["put"].iops == pytest.approx(2 * 57.9)
    assert results["get"].iops == pytest.approx(2 * 78.3) and results["get"].ops == 5000
    assert "phase_end_spread_seconds" in results["put"].extra
    # each mode's run returned at its phase's end, while the tool went on with the next
    assert returned["put"] < returned["get"] < returned["del"]
    logged = (tmp_path / "argv.log").read_text()
    assert "mode 600" in logged and f"key = {KEY.replace('%', '%%')}" in logged
    assert KEY not in "".join(line for line in logged.splitlines() if line.startswith("-c"))
    assert not conf.exists()  # the key file does not outlive the step
    assert removed == ["cephscope-abc123-"]
    # live figures: the rate between status lines of each phase, for every mode
    assert {m for m, _s in samples} == {"put", "get", "del"}
    put_live = [s.ops_per_second for m, s in samples if m == "put"]
    assert put_live[0] == pytest.approx(35.1)  # the first status: its own average


def test_a_bad_key_fails_the_step_with_swift_benchs_words(
        tmp_path: Path, fake_swift_bench: Path, removed: list[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_SB_BEHAVIOUR", "bad-key")
    ctx = _ctx(tmp_path)
    bench = SwiftBench({"cmd_path": str(fake_swift_bench)})
    bench.prepare(ctx)
    with pytest.raises(BenchmarkError, match=r"(?s)exited with status 1.*401 Unauthorized"):
        bench.run("put", ctx)
    bench.cleanup(ctx)
    assert removed == ["cephscope-abc123-"]  # it ran: whatever it left goes
    assert not (ctx.step_dir / "swiftbench.conf").exists()


def test_a_tool_that_ends_without_a_phase_says_which(
        tmp_path: Path, fake_swift_bench: Path, removed: list[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_SB_BEHAVIOUR", "no-delete")
    ctx = _ctx(tmp_path)
    bench = SwiftBench({"cmd_path": str(fake_swift_bench)})
    bench.prepare(ctx)
    bench.run("put", ctx)
    bench.run("get", ctx)
    with pytest.raises(BenchmarkError, match="ended without finishing its del phase"):
        bench.run("del", ctx)
    bench.cleanup(ctx)


def test_abort_and_timeout_kill_the_tool(tmp_path: Path, fake_swift_bench: Path,
                                         removed: list[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_SB_BEHAVIOUR", "hang")
    ctx = _ctx(tmp_path, timeout=3.0)
    bench = SwiftBench({"cmd_path": str(fake_swift_bench)})
    bench.prepare(ctx)
    bench.run("put", ctx)
    bench.run("get", ctx)
    started = time.monotonic()
    with pytest.raises(BenchmarkError, match="did not finish within 3 s"):
        bench.run("del", ctx)  # the last mode waits for the tool's end: it never comes
    assert time.monotonic() - started < 10
    bench.cleanup(ctx)
    # a step aborted from elsewhere (a failed recovery test) stops the tool at once
    ctx2 = _ctx(tmp_path / "b")
    ctx2.abort = threading.Event()
    bench2 = SwiftBench({"cmd_path": str(fake_swift_bench)})
    bench2.prepare(ctx2)
    monkeypatch.setenv("FAKE_SB_CAPTURE", "/dev/null")  # says nothing, then hangs
    threading.Timer(0.5, ctx2.abort.set).start()
    started = time.monotonic()
    with pytest.raises(BenchmarkError, match="aborted"):
        bench2.run("put", ctx2)
    assert time.monotonic() - started < 10
    bench2.cleanup(ctx2)


def test_missing_tool_names_where_it_comes_from(tmp_path: Path, removed: list[str]) -> None:
    ctx = _ctx(tmp_path)
    bench = SwiftBench({"cmd_path": "/nonexistent/swift-bench-xyz"})
    bench.prepare(ctx)
    with pytest.raises(BenchmarkError, match="not found on PATH; it comes from PyPI"):
        bench.run("put", ctx)
    bench.cleanup(ctx)
    assert removed == []  # nothing ran: nothing to remove


def test_every_client_runs_its_own_swift_bench_with_its_own_key_file(
        tmp_path: Path, fake_swift_bench: Path, removed: list[str]) -> None:
    from cephscope.runner.hostexec import LocalHost

    clients = (LocalHost("client1"), LocalHost("client2"))
    ctx = _ctx(tmp_path, clients=clients)
    client_samples: list = []
    ctx.report_client_progress = lambda client, mode, s: client_samples.append((client, mode))
    bench = SwiftBench({"cmd_path": str(fake_swift_bench), "get_count": 2500, "put_count": 2000})
    bench.prepare(ctx)
    key_files = [Path(k.path) for k in bench._keys.values()]
    assert len(key_files) == 2 and all(not p.is_relative_to(ctx.step_dir) for p in key_files)
    for mode in bench.modes():
        bench.run(mode, ctx)
    per_client = bench.parse_clients("get", ctx)
    assert sorted(per_client) == ["client1", "client2"]
    assert all(r.iops == 78.3 for r in per_client.values())
    assert bench.parse("get", ctx).iops == pytest.approx(2 * 78.3)
    bench.cleanup(ctx)
    assert not any(p.exists() for p in key_files)
    logged = (tmp_path / "argv.log").read_text()
    assert "--container-name cephscope-abc123-client1-0" in logged
    assert "--container-name cephscope-abc123-client2-0" in logged
    assert {c for c, _m in client_samples} == {"client1", "client2"}
