"""swift-bench against a real RADOS gateway (the session's Pacific dev cluster, up with --rgw
--mds, and its stack): one sweep step whose PUT, GET and DEL phases are modes tagged in
Prometheus, the gateway's own counters (through the exporter) giving the step's RGW figures in
the report, the gateway's GET rate in the GET window matching swift-bench's, nothing of the
keys in the run dir, nothing left on the gateway; and a CBT getput spec refused before anything
changes (getput is not installed here). Tentacle's gateway, driven from two namespace clients:
test_devcluster_services_live.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from swiftclient.client import Connection

from cephscope.deploy.devcluster import DevCluster
from cephscope.deploy.stack import Stack
from cephscope.runner.report.build import write_report
from tests.live.sweeps import REPO, gateway_figures, prometheus_get, run_sweep

# The GET phase long enough for two scrapes at 5 s on a gateway doing 50-250 requests/s (the
# PUT and DEL phases may be shorter: only the GET figure is compared).
SPEC = """\
benchmarks:
  swiftbench:
    op_size: 4096
    concurrent_ops: 8
    put_count: 800
    get_count: 3000
    containers: 2
"""
GETPUT_SPEC = """\
benchmarks:
  getput:
    runtime: 10
    test: p,g,d
"""


def _window_query(stack: Stack, query: str, start: float, end: float) -> list:
    return prometheus_get(stack, "/api/v1/query_range",
                          {"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}",
                           "step": "2.5"})["result"]


def test_swiftbench_phases_against_the_gateway(devcluster: DevCluster, stack: Stack,
                                                tmp_path: Path) -> None:
    cluster = devcluster
    stack.wait_for_series('ceph_rgw_req', timeout=60)  # the gateway scraped before the step
    # no idle baseline, quiet gaps or cache drops: nothing here reads them
    run = run_sweep(cluster, stack, SPEC, tmp_path / "run", timeout=420,
                    extra_args=("--idle-baseline", "0", "--quiet-gap", "0", "--no-drop-caches"))
    (step_dir,) = run.run_dir.glob("step-*")
    result = json.loads((step_dir / "result.json").read_text())
    by_mode = {r["mode"]: r for r in result["results"]}
    assert list(by_mode) == ["put", "get", "del"]
    assert (by_mode["put"]["ops"], by_mode["get"]["ops"], by_mode["del"]["ops"]) == \
        (800, 3000, 800)
    assert all(r["iops"] > 0 and r["extra"]["failed_requests"] == 0 for r in by_mode.values())
    windows = result["timestamps"]["modes"]
    assert windows["put"]["end"] <= windows["get"]["start"] <= windows["get"]["end"] \
        <= windows["del"]["start"]

    # each phase's window is tagged, and the gateway and the MDS were scraped meanwhile
    get = windows["get"]
    tagged = _window_query(stack, f'cephscope_step_info{{run="{run.run_id}", mode="get"}}',
                           get["start"], get["end"])
    assert tagged, "no cephscope_step_info{mode=get} during the GET phase"
    assert _window_query(stack, "ceph_rgw_req", get["start"], get["end"])
    assert _window_query(stack, 'count({__name__=~"ceph_mds_.+"})', get["start"], get["end"])

    # the report's GET row: the gateway's own GET rate over the GET window is swift-bench's
    report = write_report(run.run_dir, stack.prometheus_url, plots=False)
    rows = {r.mode: r for r in report.rows}
    gateway_get = rows["get"].system.rgw_ops_per_second.get("get")
    assert gateway_get is not None, rows["get"].system
    assert 0.75 < gateway_get / by_mode["get"]["iops"] < 1.25, (gateway_get, by_mode["get"])
    assert rows["get"].system.rgw_latency_seconds["get"] > 0
    markdown = report.markdown_path.read_text()
    assert "RGW op/s" in markdown and "RGW GET lat ms" in markdown
    print(f"\nlive swiftbench pacific: {gateway_figures(report.rows)}")

    # the keys are nowhere in the run dir; the step left nothing on the gateway (the session
    # gateway serves other modules too: this step's containers)
    access = cluster.rgw_access()
    for path in run.run_dir.rglob("*"):
        if path.is_file():
            text = path.read_bytes()
            for key in (access.secret_key, access.swift_key, access.access_key):
                assert key.encode() not in text, path
    assert not (step_dir / "swiftbench.conf").exists()
    assert json.loads((run.run_dir / "environment.json").read_text())["rgw"]["swift_key"] \
        .startswith("<redacted ")
    conn = Connection(authurl=access.swift_auth_url, user=access.swift_user,
                      key=access.swift_key, auth_version="1.0", retries=1, timeout=30)
    try:
        step_id = step_dir.name.removeprefix("step-")
        _headers, containers = conn.get_account(prefix=f"cephscope-{step_id}-", full_listing=True)
    finally:
        conn.close()
    assert containers == []


def test_a_tool_that_is_not_here_is_refused_before_anything_changes(
        devcluster: DevCluster, tmp_path: Path) -> None:
    spec = tmp_path / "getput.yaml"
    spec.write_text(GETPUT_SPEC)
    done = subprocess.run(
        [sys.executable, "-m", "cephscope.cli", "sweep", str(spec), "--devcluster",
         str(devcluster.state_dir), "--results-dir", str(tmp_path / "run")],
        capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "refusing the run (nothing was changed): getput: tool 'getput' not found on PATH " \
           "here; it comes from github.com/markseger/getput" in done.stderr
    assert not (tmp_path / "run").exists()
