"""End to end: a baseline sweep, then a re-run made slower on purpose fires the latency
regression alert through the real Prometheus and Alertmanager to a local webhook receiver;
a normal re-run of the same spec does not.

How the re-run is made slower: the OSD option `osd_debug_inject_dispatch_delay_probability`
(with `..._duration`) makes the OSD sleep (OSDService::maybe_inject_dispatch_delay) in
OSD::ms_fast_dispatch before an op is queued, and again in the op worker around taking the
PG lock (OSD::ShardedOpWQ::_process). All of it is after the message's receive stamp, so it
shows in the client latency and in the OSD's own op_latency. Both options are read from the
config at every call,
so `ceph config set osd ...` takes effect at once, without a restart. With probability 1 and
20 ms, every client op waits >= 20 ms inside the OSD: on the dev cluster rados bench 4 KiB
writes with 16 in flight go from ~5-12 ms to >= 100 ms (measured; 5 ms of delay already gave
6x). The options are removed again (or restored to earlier values) whatever happens.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cephscope.dashboards import rule_names
from cephscope.dashboards.config import DEFAULT_CONFIG
from cephscope.deploy.devcluster import DevCluster
from cephscope.deploy.stack import Stack
from tests.live.sweeps import SweepRun, prometheus_get, run_sweep

ALERT = "CephscopeStepLatencyRegression"
DELAY_OPTIONS = {
    "osd_debug_inject_dispatch_delay_duration": "0.02",
    "osd_debug_inject_dispatch_delay_probability": "1",
}
# Fewer client ops than this in the OSD rate window counts as quiet: the slow step itself
# does ~100 ops/s, the idle dev cluster none.
QUIET_OSD_OPS = 100
# Client ops the OSDs served over the rules' rate window.
OSD_OPS = (f"ceph_osd_op_latency_count{{{DEFAULT_CONFIG.exporter_job_selector}}}"
           f"[{DEFAULT_CONFIG.rate_window}]")
# One step; the same spec text for every run, so every run has the same step id. 40 s lets
# the alert's `for` (20 s) elapse and Alertmanager's group_wait (10 s) pass while it fires.
# The normal re-run must be within 2x of the baseline by itself: run alone (`make test` runs
# the `serial` tests after the parallel part), not beside another worker's benchmarks.
pytestmark = pytest.mark.serial

SPEC = """\
name: alerts-e2e
benchmarks:
  radosbench:
    op_size: 4096
    concurrent_ops: 16
    time: 40
    write_only: true
"""


def config_db_value(devcluster: DevCluster, option: str) -> str | None:
    """The value set for `osd` in the mon config database, None if unset."""
    for entry in devcluster.ceph_json("config", "dump"):
        if entry.get("section") == "osd" and entry.get("name") == option:
            return str(entry["value"])
    return None


@pytest.fixture
def slow_osds(devcluster: DevCluster) -> Iterator[None]:
    before = {option: config_db_value(devcluster, option) for option in DELAY_OPTIONS}
    try:
        for option, value in DELAY_OPTIONS.items():
            devcluster.ceph_json("config", "set", "osd", option, value)
        yield
    finally:
        for option, value in before.items():
            if value is None:
                devcluster.ceph_json("config", "rm", "osd", option)
            else:
                devcluster.ceph_json("config", "set", "osd", option, value)
        assert {o: config_db_value(devcluster, o) for o in DELAY_OPTIONS} == before


@pytest.fixture(scope="module")
def baseline(devcluster: DevCluster, stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> SweepRun:
    return run_sweep(devcluster, stack, SPEC, tmp_path_factory.mktemp("e2e") / "baseline")


def latency_ratio(run: SweepRun, base: SweepRun) -> float:
    assert [s["step"] for s in run.steps] == [s["step"] for s in base.steps]
    return run.steps[0]["latency_avg_seconds"] / base.steps[0]["latency_avg_seconds"]


def alert_states(stack: Stack, run: SweepRun, alertname: str = ALERT) -> set[str]:
    """States an alert took for this run, from Prometheus' ALERTS series."""
    series = prometheus_get(
        stack,
        "/api/v1/query_range",
        {
            "query": f'ALERTS{{alertname="{alertname}", run="{run.run_id}"}}',
            "start": str(run.start),
            "end": str(time.time()),
            "step": "5",
        },
    )["result"]
    return {s["metric"]["alertstate"] for s in series}


def osd_latency_trace(stack: Stack, run: SweepRun, base: SweepRun) -> dict[str, list[Any]]:
    """The OSD latency series of both runs around the step, for a failure message."""
    trace: dict[str, list[Any]] = {}
    for name, query in {
        "run": f'{rule_names.STEP_OSD_OP_LATENCY_AVG}{{run="{run.run_id}"}}',
        "base": f'{rule_names.STEP_OSD_OP_LATENCY_AVG}{{run="{base.run_id}"}}',
        "baseline_gauge": f'cephscope_step_baseline_latency_seconds{{run="{run.run_id}"}}',
        "ops": f"sum(rate({OSD_OPS}))",
    }.items():
        series = prometheus_get(stack, "/api/v1/query_range", {
            "query": query, "start": str(base.start), "end": str(time.time()), "step": "5",
        })["result"]
        trace[name] = [(s["metric"].get("stat"), [(round(float(t) - run.start), v) for t, v in s["values"]])
                       for s in series]
    return trace


def wait_osd_window_quiet(stack: Stack, timeout: float = 120) -> None:
    """Wait until the OSD rate window (the rules' `rate_window`) holds no burst of earlier
    client ops.

    The baseline run ends with its benchmark's cleanup: tens of thousands of fast deletes.
    A step started within one window of them averages them into its OSD latency, and with
    40 s steps that can keep the OSD-side ratio under its threshold for the whole step.
    """
    query = f"sum(increase({OSD_OPS}))"
    deadline = time.monotonic() + timeout
    ops = float("inf")
    while time.monotonic() < deadline:
        result = prometheus_get(stack, "/api/v1/query", {"query": query})["result"]
        ops = float(result[0]["value"][1]) if result else float("inf")
        if ops < QUIET_OSD_OPS:
            return
        time.sleep(2)
    raise AssertionError(f"OSD ops did not quiet down in {timeout:.0f}s: {ops:.0f} in the last "
                         f"{DEFAULT_CONFIG.rate_window}")


def webhook_alerts(stack: Stack, run: SweepRun) -> list[dict[str, Any]]:
    alerts = stack.webhook.alerts(alertname=ALERT)  # type: ignore[attr-defined]
    return [a for a in alerts if a["labels"].get("run") == run.run_id]


def test_slower_rerun_fires_regression_alert_to_webhook(
    devcluster: DevCluster, stack: Stack, baseline: SweepRun, slow_osds: None,
    tmp_path: Path,
) -> None:
    wait_osd_window_quiet(stack)
    slow = run_sweep(devcluster, stack, SPEC, tmp_path / "slow", baseline=baseline.run_dir)
    ratio = latency_ratio(slow, baseline)
    print(f"\nlive: injected dispatch delay: client latency {ratio:.1f}x the baseline "
          f"({baseline.steps[0]['latency_avg_seconds'] * 1000:.1f} ms -> "
          f"{slow.steps[0]['latency_avg_seconds'] * 1000:.1f} ms)")
    assert ratio > 2 * DEFAULT_CONFIG.latency_regression_ratio
    # Alertmanager notifies group_wait after the alert starts firing; the sweep has ended by
    # now, but the step ran long enough for that to happen while it fired.
    deadline = time.monotonic() + 30
    while not webhook_alerts(stack, slow) and time.monotonic() < deadline:
        time.sleep(1)
    received = webhook_alerts(stack, slow)
    assert received, f"webhook got nothing for run {slow.run_id}; alert states: " \
                     f"{alert_states(stack, slow)}; all: {stack.webhook.received}"  # type: ignore[attr-defined]
    alert = received[0]
    assert alert["labels"]["step"] == slow.steps[0]["step"]
    assert alert["labels"]["severity"] == "warning"
    assert alert["annotations"]["runbook_url"].endswith("#cephscopesteplatencyregression")
    assert "firing" in alert_states(stack, slow)
    # The OSD side saw it too: the per-step OSD latency vs the baseline run's, from history.
    # Only its condition is checked (pending or firing): the step's first samples wait for a
    # scrape of the exporter and of the runner, so the 20 s `for` may not elapse within a
    # 40 s test step on a loaded machine (it does in the minutes-long steps of real sweeps).
    osd_states = alert_states(stack, slow, "CephscopeStepOSDLatencyRegression")
    assert osd_states & {"pending", "firing"}, (osd_states, osd_latency_trace(stack, slow, baseline))
    # Grouped by alert name and run, as alerts/alertmanager.yml says.
    payload = next(p for p in stack.webhook.received  # type: ignore[attr-defined]
                   if alert in p.get("alerts", []))
    assert payload["groupLabels"] == {"alertname": ALERT, "run": slow.run_id}
    print("live: webhook payload:", json.dumps(alert["labels"], sort_keys=True))


def test_normal_rerun_does_not_fire(
    devcluster: DevCluster, stack: Stack, baseline: SweepRun, tmp_path: Path
) -> None:
    # The slow run's cleanup (deletes that waited in the OSDs) out of the rate window first:
    # this run is to show what an unchanged cluster does.
    wait_osd_window_quiet(stack)
    normal = run_sweep(devcluster, stack, SPEC, tmp_path / "normal", baseline=baseline.run_dir)
    ratio = latency_ratio(normal, baseline)
    print(f"\nlive: normal re-run: client latency {ratio:.2f}x the baseline")
    # The baseline series really was there to compare against ...
    published = prometheus_get(
        stack, "/api/v1/query_range",
        {"query": f'cephscope_step_baseline_latency_seconds{{run="{normal.run_id}", stat="avg"}}',
         "start": str(normal.start), "end": str(normal.end), "step": "5"},
    )["result"]
    assert published and published[0]["metric"]["baseline_run"] == baseline.run_id
    # ... and the re-run was a normal one: on a machine shared with other work, a re-run can
    # be slower by itself; the alert would then be right to fire.
    assert ratio < DEFAULT_CONFIG.latency_regression_ratio, (
        f"the 'normal' re-run was {ratio:.2f}x slower by itself (machine busy?)"
    )
    time.sleep(6)  # one more rule evaluation after the last sample
    assert "firing" not in alert_states(stack, normal)
    assert "firing" not in alert_states(stack, normal, "CephscopeStepOSDLatencyRegression")
    assert webhook_alerts(stack, normal) == []
