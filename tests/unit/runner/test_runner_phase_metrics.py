"""The runner's /metrics output and the Grafana annotation calls (local recording server)."""

from __future__ import annotations

from typing import Any

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from cephscope.runner.annotations import GrafanaAnnotator
from cephscope.runner.benchmarks.base import LiveSample
from cephscope.runner.phase_metrics import MetricsServer, PhaseMetrics
from cephscope.runner.steps import Step
from tests.unit.runner_fakes import Recorder


def step(sid: str = "abc123def456", shards: int = 4) -> Step:
    return Step(id=sid, benchmark="radosbench", iteration=0, params={"op_size": 4096},
                pool_profile=None, ceph_config={"osd_op_num_shards": shards},
                axes={"ceph_config.osd_op_num_shards": shards, "radosbench.op_size": 4096})


def metrics(**kw: Any) -> PhaseMetrics:
    labels = {"ceph_config.osd_op_num_shards": "osd_op_num_shards",
              "radosbench.op_size": "op_size", "pool_profile": "pool_profile"}
    return PhaseMetrics("run1", "sweep.yaml", labels, ["radosbench"], 4, **kw)


def series(m: PhaseMetrics) -> dict[str, list[tuple[dict[str, str], float]]]:
    """name -> [(labels, value)] as a scraper reads the rendered text."""
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(m.render()):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((sample.labels, sample.value))
    return out


def test_step_info_only_while_running():
    m = metrics()
    assert "cephscope_step_info" not in series(m)
    m.start_step(step(), 1000.0, dead_time_seconds=9.5)
    m.set_mode("write")
    m.live_sample("write", LiveSample(timestamp=1001.0, ops_per_second=3500.0,
                                      bytes_per_second=14e6, latency_seconds=0.0045))
    got = series(m)
    assert got["cephscope_step_info"] == [(
        {"run": "run1", "step": "abc123def456", "iteration": "0", "benchmark": "radosbench",
         "mode": "write", "osd_op_num_shards": "4", "op_size": "4096", "pool_profile": ""}, 1.0)]
    window = {"run": "run1", "step": "abc123def456"}
    assert got["cephscope_step_start_timestamp_seconds"] == [(window, 1000.0)]
    assert got["cephscope_step_dead_time_seconds"] == [(window, 9.5)]
    assert got["cephscope_client_ops_per_second"] == [({**window, "mode": "write"}, 3500.0)]
    assert got["cephscope_client_latency_seconds"] == [({**window, "mode": "write"}, 0.0045)]
    assert "cephscope_step_end_timestamp_seconds" not in got
    assert "# TYPE cephscope_step_info gauge" in m.render()

    m.end_step(1010.0)
    got = series(m)
    assert not any(name.startswith(("cephscope_step_info", "cephscope_client_")) for name in got)
    assert got["cephscope_step_end_timestamp_seconds"] == [(window, 1010.0)]
    # the start stays published so queries over the run can find the window
    assert got["cephscope_step_start_timestamp_seconds"] == [(window, 1000.0)]


def test_per_client_figures_beside_the_step_series_while_running():
    m = metrics()
    m.start_step(step(), 1000.0)
    m.set_mode("write")
    m.live_sample("write", LiveSample(timestamp=1001.0, ops_per_second=300.0))
    m.live_client_sample("client1", "write", LiveSample(1001.0, 100.0, 4e5, 0.002))
    m.live_client_sample("client2", "write", LiveSample(1001.0, 200.0, 8e5, None))
    got = series(m)
    lab = {"run": "run1", "step": "abc123def456", "mode": "write"}
    assert got["cephscope_step_client_ops_per_second"] == [
        ({**lab, "client": "client1"}, 100.0), ({**lab, "client": "client2"}, 200.0)]
    assert got["cephscope_step_client_bytes_per_second"][1] == ({**lab, "client": "client2"}, 8e5)
    # a figure the tool did not print is absent, not 0
    assert got["cephscope_step_client_latency_seconds"] == [({**lab, "client": "client1"}, 0.002)]
    # the step series stays the clients' aggregate (a sum over it counts nobody twice)
    assert got["cephscope_client_ops_per_second"] == [(lab, 300.0)]
    m.end_step(1010.0)
    assert not any(name.startswith("cephscope_step_client_") for name in series(m))


def test_run_info_and_progress():
    m = metrics()
    m.set_progress(done=2, failed=1)
    got = series(m)
    assert got["cephscope_run_info"] == [({"run": "run1", "spec": "sweep.yaml",
                                           "benchmarks": "radosbench", "steps": "4"}, 1.0)]
    by_state = {lab["state"]: v for lab, v in got["cephscope_run_steps"]}
    assert by_state == {"total": 4.0, "done": 2.0, "failed": 1.0}


def test_baseline_series_while_step_runs():
    m = metrics(baseline_run="base-run")
    m.start_step(step(), 1000.0, baseline={"write": {"iops": 3000.0,
                                                     "latency_avg_seconds": 0.005,
                                                     "latency_max_seconds": 0.05}})
    got = series(m)
    lab = {"run": "run1", "step": "abc123def456", "mode": "write", "baseline_run": "base-run"}
    assert got["cephscope_step_baseline_iops"] == [(lab, 3000.0)]
    # rados bench has no p99: not invented
    assert sorted(got["cephscope_step_baseline_latency_seconds"], key=lambda r: r[0]["stat"]) \
        == [({**lab, "stat": "avg"}, 0.005), ({**lab, "stat": "max"}, 0.05)]
    m.end_step(1001.0)
    assert not any("baseline" in name for name in series(m))


def test_label_values_are_escaped():
    m = PhaseMetrics('r"1', "a\\b\nc", {}, ["radosbench"], 1)
    assert 'run="r\\"1"' in m.render() and 'spec="a\\\\b\\nc"' in m.render()
    (labels, _), = series(m)["cephscope_run_info"]
    assert labels["run"] == 'r"1' and labels["spec"] == "a\\b\nc"


def test_exposition_parses_with_prometheus_client():
    m = metrics(baseline_run="base")
    m.start_step(step(), 1000.0, baseline={"read": {"iops": 10.0}})
    m.set_mode("read")
    families = {f.name: f for f in text_string_to_metric_families(m.render())}
    assert families["cephscope_step_info"].type == "gauge"
    (info,) = families["cephscope_step_info"].samples
    assert info.labels["osd_op_num_shards"] == "4" and info.labels["mode"] == "read"
    assert families["cephscope_step_baseline_iops"].samples[0].value == 10.0
    # only the runner's own families: no process_/python_ collectors of a default registry
    assert all(name.startswith("cephscope_") for name in families)


def test_server_serves_on_loopback_only_with_gzip():
    m = metrics()
    server = MetricsServer(m, 0)
    server.start()
    try:
        assert server.address[0] == "127.0.0.1"
        url = f"http://127.0.0.1:{server.port}/metrics"
        resp = requests.get(url, timeout=5, headers={"Accept-Encoding": "identity"})
        assert resp.status_code == 200
        assert resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        assert "cephscope_run_info" in resp.text
        gz = requests.get(url, timeout=5, headers={"Accept-Encoding": "gzip"})
        assert gz.headers.get("Content-Encoding") == "gzip" and "cephscope_run_info" in gz.text
        om = requests.get(url, timeout=5,
                          headers={"Accept": "application/openmetrics-text; version=1.0.0"})
        assert om.headers["Content-Type"].startswith("application/openmetrics-text")
        assert om.text.rstrip().endswith("# EOF")
    finally:
        server.stop()


def test_server_port_in_use_is_a_clear_error():
    m = metrics()
    first = MetricsServer(m, 0)
    first.start()
    try:
        second = MetricsServer(m, first.port)
        with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{first.port}"):
            second.start()
    finally:
        first.stop()




def test_annotation_region_with_params_as_tags():
    rec = Recorder()
    try:
        logs: list[str] = []
        ann = GrafanaAnnotator(rec.url + "/", token="s3cret", log=logs.append)
        tags = ann.tags_for("run1", "abc", "radosbench", {"osd_op_num_shards": "4"})
        assert ann.annotate(1000.25, 1010.5, tags, "step abc") == 1
        call = rec.calls[0]
        assert call["path"] == "/api/annotations"
        assert call["headers"]["Authorization"] == "Bearer s3cret"
        assert call["body"] == {"time": 1000250, "timeEnd": 1010500, "text": "step abc",
                                "tags": ["cephscope", "run:run1", "step:abc",
                                         "benchmark:radosbench", "osd_op_num_shards:4"]}
        assert logs == [] and ann.sent == 1
    finally:
        rec.stop()


def test_annotation_failures_are_logged_not_raised():
    rec = Recorder(status=401)
    logs: list[str] = []
    try:
        ann = GrafanaAnnotator(rec.url, token=None, log=logs.append)
        assert ann.annotate(1.0, 2.0, ["cephscope"], "x") is None
        assert "HTTP 401" in logs[0]
        assert "Authorization" not in rec.calls[0]["headers"]
    finally:
        rec.stop()
    dead = GrafanaAnnotator(rec.url, log=logs.append, timeout_seconds=1)  # server gone
    assert dead.annotate(1.0, 2.0, [], "x") is None
    assert dead.failed == 1 and "not fatal" in logs[-1]
