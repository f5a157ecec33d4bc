"""A spec's benchmarks need their tool where they run and their gateway's endpoint: a run
missing either is refused before anything changes on the (in-memory) cluster, naming the tool
and where it comes from, or what the endpoint lacks and where to give it."""

from __future__ import annotations

from pathlib import Path

import pytest

from cephscope.runner.benchmarks import BENCHMARKS
from cephscope.runner.hostexec import LocalHost
from cephscope.runner.options import SweepOptions
from cephscope.runner.requirements import missing_tools
from cephscope.runner.spec import load_spec
from cephscope.runner.sweep import SweepError
from tests.unit.runner_fakes import FakeCluster, fake_sweep

GETPUT_SPEC = """\
benchmarks:
  getput:
    runtime: 10
    auth: http://127.0.0.1:9/auth/1.0
    user: cbt
    key: k3y
"""


def _sweep(tmp_path: Path, text: str, cluster: FakeCluster, **opts: object):
    spec = tmp_path / "spec.yaml"
    spec.write_text(text)
    options = SweepOptions(spec_path=spec, results_dir=tmp_path / "run",
                           metrics_linger_seconds=0, tty=False, **opts)  # type: ignore[arg-type]
    return fake_sweep(options, cluster, benchmarks=BENCHMARKS)


def _changes(cluster: FakeCluster) -> list[str]:
    return [p for p, _a in cluster.commands if p not in ("osd metadata", "config help")]


def test_a_missing_tool_refuses_the_run_before_any_change(tmp_path: Path) -> None:
    cluster = FakeCluster()
    with pytest.raises(SweepError) as info:
        _sweep(tmp_path, GETPUT_SPEC, cluster).run()
    message = str(info.value)
    assert message.startswith("refusing the run (nothing was changed): ")
    assert "getput: tool 'getput' not found on PATH here; it comes from " \
           "github.com/markseger/getput" in message
    assert _changes(cluster) == [] and not (tmp_path / "run").exists()


def test_a_missing_endpoint_says_what_it_lacks_and_where_to_give_it(tmp_path: Path) -> None:
    cluster = FakeCluster()
    with pytest.raises(SweepError) as info:
        _sweep(tmp_path, "benchmarks:\n  swiftbench: {put_count: 10}\n", cluster).run()
    message = str(info.value)
    assert "swiftbench drives the gateway's Swift API and lacks swift_auth_url, swift_user, " \
           "swift_key (give them with --devcluster" in message
    assert "--rgw-keys-file" in message
    assert _changes(cluster) == [] and not (tmp_path / "run").exists()


def test_a_dry_run_says_what_a_run_would_refuse(tmp_path: Path) -> None:
    lines: list[str] = []
    sweep = _sweep(tmp_path, GETPUT_SPEC, FakeCluster(), dry_run=True)
    sweep.log = lines.append
    assert sweep.run() == 0
    text = "\n".join(lines)
    assert "a run would be refused: getput: tool 'getput' not found" in text
    assert "gateway: " in text and "k3y" not in text  # the key is shown redacted


def test_tools_are_looked_for_on_every_client(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("benchmarks:\n  swiftbench: {cmd_path: sh}\n  hsbench: {objects: 5}\n")
    spec = load_spec(path, benchmarks=BENCHMARKS)
    clients = [LocalHost("client1"), LocalHost("client2")]
    problems = missing_tools(spec, BENCHMARKS, clients)
    assert problems == [
        "hsbench: tool 'hsbench' not found on PATH on client1; it comes from "
        "github.com/markhpc/hsbench (`go build`; neither Debian nor the Go module proxy here "
        "serves it)",
        "hsbench: tool 'hsbench' not found on PATH on client2; it comes from "
        "github.com/markhpc/hsbench (`go build`; neither Debian nor the Go module proxy here "
        "serves it)"]
    assert missing_tools(spec, BENCHMARKS, (), which=lambda name: f"/bin/{name}") == []
