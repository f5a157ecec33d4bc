"""The runner's /metrics output and the Grafana annotation calls (local recording server)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import requests

from cephscope.runner.annotations import GrafanaAnnotator
from cephscope.runner.benchmarks.base import LiveSample
from cephscope.runner.phase_metrics import MetricsServer, PhaseMetrics
from cephscope.runner.steps import Step


def step(sid: str = "abc123def456", shards: int = 4) -> Step:
    return Step(id=sid, benchmark="radosbench", iteration=0, params={"op_size": 4096},
                pool_profile=None, ceph_config={"osd_op_num_shards": shards},
                axes={"ceph_config.osd_op_num_shards": shards, "radosbench.op_size": 4096})


def metrics(**kw: Any) -> PhaseMetrics:
    labels = {"ceph_config.osd_op_num_shards": "osd_op_num_shards",
              "radosbench.op_size": "op_size", "pool_profile": "pool_profile"}
    return PhaseMetrics("run1", "sweep.yaml", labels, ["radosbench"], 4, **kw)


def samples(text: str) -> list[str]:
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def test_step_info_only_while_running():
    m = metrics()
    assert not any(s.startswith("cephscope_step_info") for s in samples(m.render()))
    m.start_step(step(), 1000.0, dead_time_seconds=9.5)
    m.set_mode("write")
    m.live_sample("write", LiveSample(timestamp=1001.0, ops_per_second=3500.0,
                                      bytes_per_second=14e6, latency_seconds=0.0045))
    text = m.render()
    lines = samples(text)
    assert ('cephscope_step_info{run="run1",step="abc123def456",iteration="0",'
            'benchmark="radosbench",mode="write",osd_op_num_shards="4",op_size="4096",'
            'pool_profile=""} 1.0') in lines
    assert 'cephscope_step_start_timestamp_seconds{run="run1",step="abc123def456"} 1000.0' \
        in lines
    assert 'cephscope_step_dead_time_seconds{run="run1",step="abc123def456"} 9.5' in lines
    assert 'cephscope_client_ops_per_second{run="run1",step="abc123def456",mode="write"} ' \
           '3500.0' in lines
    assert 'cephscope_client_latency_seconds{run="run1",step="abc123def456",mode="write"} ' \
           '0.0045' in lines
    assert not any(s.startswith("cephscope_step_end_timestamp_seconds") for s in lines)
    assert "# TYPE cephscope_step_info gauge" in text

    m.end_step(1010.0)
    lines = samples(m.render())
    assert not any(s.startswith(("cephscope_step_info", "cephscope_client_")) for s in lines)
    assert 'cephscope_step_end_timestamp_seconds{run="run1",step="abc123def456"} 1010.0' in lines
    # the start stays published so queries over the run can find the window
    assert any(s.startswith("cephscope_step_start_timestamp_seconds") for s in lines)


def test_run_info_and_progress():
    m = metrics()
    m.set_progress(done=2, failed=1)
    lines = samples(m.render())
    assert ('cephscope_run_info{run="run1",spec="sweep.yaml",benchmarks="radosbench",'
            'steps="4"} 1.0') in lines
    assert 'cephscope_run_steps{run="run1",state="done"} 2.0' in lines
    assert 'cephscope_run_steps{run="run1",state="failed"} 1.0' in lines


def test_baseline_series_while_step_runs():
    m = metrics(baseline_run="base-run")
    m.start_step(step(), 1000.0, baseline={"write": {"iops": 3000.0,
                                                     "latency_avg_seconds": 0.005,
                                                     "latency_max_seconds": 0.05}})
    lines = samples(m.render())
    lab = 'run="run1",step="abc123def456",mode="write",baseline_run="base-run"'
    assert f"cephscope_step_baseline_iops{{{lab}}} 3000.0" in lines
    assert f'cephscope_step_baseline_latency_seconds{{{lab},stat="avg"}} 0.005' in lines
    assert f'cephscope_step_baseline_latency_seconds{{{lab},stat="max"}} 0.05' in lines
    assert not any('stat="p99"' in s for s in lines)  # rados bench has no p99: not invented
    m.end_step(1001.0)
    assert not any("baseline" in s for s in samples(m.render()))


def test_label_values_are_escaped():
    m = PhaseMetrics('r"1', "a\\b\nc", {}, ["radosbench"], 1)
    assert 'cephscope_run_info{run="r\\"1",spec="a\\\\b\\nc"' in m.render()


def test_server_serves_on_loopback_only():
    m = metrics()
    server = MetricsServer(m, 0)
    server.start()
    try:
        assert server.httpd.server_address[0] == "127.0.0.1"
        resp = requests.get(f"http://127.0.0.1:{server.port}/metrics", timeout=5)
        assert resp.status_code == 200
        assert resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        assert "cephscope_run_info" in resp.text
        assert requests.get(f"http://127.0.0.1:{server.port}/nope", timeout=5).status_code == 404
    finally:
        server.stop()


def test_server_port_in_use_is_a_clear_error():
    m = metrics()
    first = MetricsServer(m, 0)
    try:
        with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{first.port}"):
            MetricsServer(m, first.port)
    finally:
        first.stop()


class Recorder:
    """A tiny HTTP server recording POSTs, answering like Grafana (or failing on demand)."""

    def __init__(self, status: int = 200) -> None:
        self.calls: list[dict[str, Any]] = []
        self.status = status
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                recorder.calls.append({"path": self.path, "headers": dict(self.headers),
                                       "body": json.loads(body)})
                out = json.dumps({"id": len(recorder.calls), "message": "Annotation added"})
                self.send_response(recorder.status)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(out.encode())

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


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
