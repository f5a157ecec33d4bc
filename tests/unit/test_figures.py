"""The shared figures (cephscope.figures): the report computes from raw counters exactly what
the figure's PromQL computes in Prometheus (promtool evaluates it on the same samples), and the
report's queries, the rules, the dashboards and both stacks' scrape configs use the one
definition and the one set of job names."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from cephscope import figures as fig
from cephscope.dashboards import rule_names as names
from cephscope.dashboards.config import DEFAULT_CONFIG
from cephscope.dashboards.rules import device_rules, recording_rules
from cephscope.deploy.stack import Stack
from cephscope.runner.report.step_system import histogram_quantile, summarize_system
from cephscope.runner.system_metrics import counter_series, render_queries

REPO = Path(__file__).resolve().parents[2]
INTERVAL = 5
SCRAPES = 13  # 0 s .. 60 s
WINDOW = (0.0, float(INTERVAL * (SCRAPES - 1)))
INSTANCE = "host1:9100"

# (counter name in counter_series, labels, increase per scrape): per CPU 5 s per 5 s, of which
# iowait and steal are not busy (node-mixin): busy is (2.5 + 1.25) / 5 = 0.75 on both CPUs
CPU = [("cpu_seconds", {"cpu": c, "mode": m}, inc) for c in ("0", "1")
       for m, inc in (("user", 2.5), ("system", 1.25), ("iowait", 0.5), ("steal", 0.25),
                      ("idle", 0.5))]
# sda works; sdb completes nothing in the window: its await is 0, not NaN
DISK = [
    ("disk_reads", {"device": "sda"}, 40), ("disk_writes", {"device": "sda"}, 60),
    ("disk_read_time_seconds", {"device": "sda"}, 0.1), ("disk_write_time_seconds", {"device": "sda"}, 0.5),
    ("disk_io_time_seconds", {"device": "sda"}, 2.5),
    ("disk_reads", {"device": "sdb"}, 0), ("disk_writes", {"device": "sdb"}, 0),
    ("disk_read_time_seconds", {"device": "sdb"}, 0), ("disk_write_time_seconds", {"device": "sdb"}, 0),
    ("disk_io_time_seconds", {"device": "sdb"}, 0),
]
OSD = [("osd_op_latency_sum", {"ceph_daemon": "osd.0"}, 0.5),
       ("osd_op_latency_count", {"ceph_daemon": "osd.0"}, 100),
       ("osd_op_latency_sum", {"ceph_daemon": "osd.1"}, 1.5),
       ("osd_op_latency_count", {"ceph_daemon": "osd.1"}, 100)]
EXPORTER_INSTANCE = "host1:9967"
# two gateways, labelled differently (ceph-exporter's instance_id, another exporter's
# ceph_daemon): the RGW figures sum over every label. Gateway a counts GET/PUT in `rgw`
# (Pacific, Reef), gateway b in `rgw_op` (Tentacle): a figure takes the first generation that
# has it, as PromQL's `or` does. Increments per 5 s scrape are 5 x a binary fraction, so
# promtool's rates and the report's figures are the same floats.
RGW = [("rgw_requests", {"instance_id": "a"}, 80), ("rgw_failed_requests", {"instance_id": "a"}, 1.25),
       ("rgw_requests", {"ceph_daemon": "client.rgw.b"}, 40),
       ("rgw_failed_requests", {"ceph_daemon": "client.rgw.b"}, 0.625),
       *((f"rgw_{op}.0_{what}", {"instance_id": "a"}, inc * scale)
         for op, scale in (("put", 1.0), ("get", 0.5))
         for what, inc in (("ops", 40), ("bytes", 40 * 4096), ("latency_sum", 0.625),
                           ("latency_count", 40)))]
RGW_TENTACLE = [(f"rgw_{op}.1_{what}", {"instance_id": "t"}, inc * scale)
                for op, scale in (("put", 1.0), ("get", 0.5))
                for what, inc in (("ops", 20), ("bytes", 20 * 4096), ("latency_sum", 1.25),
                                  ("latency_count", 20))]


def _labels(kind: str, extra: dict[str, str]) -> dict[str, str]:
    if kind.startswith(("osd_", "rgw_")):
        return {"job": fig.EXPORTER_JOB, "instance": EXPORTER_INSTANCE, **extra}
    return {"job": fig.NODE_JOB, "instance": INSTANCE, **extra}


def _stored(samples: list[tuple[str, dict[str, str], float]]) -> dict[str, Any]:
    """A step's prometheus.json holding the raw scrapes of these counters."""
    counters: dict[str, Any] = {name: {"result": []} for name in counter_series()}
    for kind, extra, inc in samples:
        values = [[float(i * INTERVAL), repr(i * inc)] for i in range(SCRAPES)]
        counters[kind]["result"].append({"metric": _labels(kind, extra), "values": values})
    return {"start": WINDOW[0], "end": WINDOW[1], "queries": {}, "counters": counters}


def _series(samples: list[tuple[str, dict[str, str], float]]) -> list[dict[str, str]]:
    """The same scrapes as promtool input series."""
    out = []
    for kind, extra, inc in samples:
        metric = counter_series()[kind].split("{")[0]
        labels = ", ".join(f'{k}="{v}"' for k, v in _labels(kind, extra).items())
        out.append({"series": f"{metric}{{{labels}}}", "values": f"0+{inc!r}x{SCRAPES - 1}"})
    return out


def _promtool_agrees(tmp_path: Path, series: list[dict[str, str]], expr: str,
                     expected: list[tuple[str, float]]) -> None:
    """promtool evaluates `expr` at the window's end over exactly the window's scrapes (a
    range as long as the window starts at its first scrape: no extrapolation) and must find
    `expected` ((labels, value) pairs)."""
    assert shutil.which("promtool"), "promtool missing (prometheus package)"
    test = {
        "rule_files": [],
        "evaluation_interval": f"{INTERVAL}s",
        "tests": [{
            "interval": f"{INTERVAL}s",
            "input_series": series,
            "promql_expr_test": [{
                "expr": expr,
                "eval_time": f"{int(WINDOW[1])}s",
                "exp_samples": [{"labels": labels, "value": value} for labels, value in expected],
            }],
        }],
    }
    path = tmp_path / "figure.test.yml"
    path.write_text(yaml.safe_dump(test))
    proc = subprocess.run(["promtool", "test", "rules", str(path)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


WINDOW_FIGURES = fig.STACK_FIGURES.with_window(f"{int(WINDOW[1] - WINDOW[0])}s")


def test_cpu_busy_leaves_out_iowait_and_steal_in_report_and_promql(tmp_path: Path) -> None:
    figures = summarize_system(_stored(CPU), window=WINDOW)
    assert figures.cpu_busy_ratio == pytest.approx(0.75)
    assert figures.cpu_modes[INSTANCE]["iowait"] == pytest.approx(0.1)  # still shown by mode
    assert figures.cores[(INSTANCE, "0")] == pytest.approx(3.75 / 5)
    _promtool_agrees(tmp_path, _series(CPU), WINDOW_FIGURES.cpu_busy_ratio(("instance",)),
                     [(f'{{instance="{INSTANCE}"}}', figures.cpu_busy_ratio)])


def test_disk_await_has_the_same_zero_guard_in_report_and_promql(tmp_path: Path) -> None:
    figures = summarize_system(_stored(DISK), window=WINDOW)
    awaits = {d.device: d.await_seconds for d in figures.devices}
    assert awaits == {"sda": pytest.approx(0.6 / 100), "sdb": 0.0}
    assert figures.disk_device == "sda" and figures.disk_util_ratio == pytest.approx(0.5)
    labels = f'job="{fig.NODE_JOB}", instance="{INSTANCE}"'
    _promtool_agrees(tmp_path, _series(DISK), WINDOW_FIGURES.disk_await_seconds(),
                     [(f'{{{labels}, device="sda"}}', awaits["sda"]),
                      (f'{{{labels}, device="sdb"}}', 0.0)])


def test_osd_op_latency_is_all_ops_over_all_osds_in_report_and_promql(tmp_path: Path) -> None:
    figures = summarize_system(_stored(OSD), window=WINDOW)
    assert figures.osd_op_latency_seconds == pytest.approx(2.0 / 200)
    _promtool_agrees(tmp_path, _series(OSD), WINDOW_FIGURES.osd_op_latency_seconds(),
                     [("{}", figures.osd_op_latency_seconds)])


def test_rgw_figures_sum_every_gateway_in_report_and_promql(tmp_path: Path) -> None:
    figures = summarize_system(_stored(RGW), window=WINDOW)
    assert figures.rgw_requests_per_second == 24.0
    assert figures.rgw_failed_requests_per_second == 0.375
    assert figures.rgw_ops_per_second == {"put": 8.0, "get": 4.0}
    assert figures.rgw_bytes_per_second["put"] == 8.0 * 4096
    # the latency pair: increase of the sums over that of the counts
    assert figures.rgw_latency_seconds == {"put": 1 / 64, "get": 1 / 64}
    tentacle = summarize_system(_stored(RGW_TENTACLE), window=WINDOW)
    assert tentacle.rgw_ops_per_second == {"put": 4.0, "get": 2.0}
    assert tentacle.rgw_latency_seconds == {"put": 1 / 16, "get": 1 / 16}
    f = WINDOW_FIGURES
    for samples, found in ((RGW, figures), (RGW_TENTACLE, tentacle)):
        series = _series(samples)
        for op in fig.RGW_OPERATIONS:
            _promtool_agrees(tmp_path, series, f.rgw_op_rate(op),
                             [("{}", found.rgw_ops_per_second[op])])
            _promtool_agrees(tmp_path, series, f.rgw_bytes_rate(op),
                             [("{}", found.rgw_bytes_per_second[op])])
            _promtool_agrees(tmp_path, series, f.rgw_latency_seconds(op),
                             [("{}", found.rgw_latency_seconds[op])])
    series = _series(RGW)
    _promtool_agrees(tmp_path, series, f.rgw_request_rate(),
                     [("{}", figures.rgw_requests_per_second)])
    _promtool_agrees(tmp_path, series, f.rgw_failed_request_rate(),
                     [("{}", figures.rgw_failed_requests_per_second)])
    # a step without gateways has no RGW figure (not zero)
    assert not summarize_system(_stored(CPU), window=WINDOW).has_rgw


def test_report_rules_and_dashboards_share_the_figures() -> None:
    report = render_queries("30s")
    stack = fig.STACK_FIGURES
    assert report["cpu_busy_ratio"] == stack.cpu_busy_ratio(("instance", "host"))
    assert report["disk_await_seconds"] == stack.disk_await_seconds()
    rules = {r["record"]: r["expr"] for g in recording_rules(DEFAULT_CONFIG)["groups"]
             for r in g["rules"]}
    assert stack.cpu_busy_ratio(()) in rules[names.STEP_NODE_CPU_BUSY]
    assert stack.osd_op_latency_seconds() in rules[names.STEP_OSD_OP_LATENCY_AVG]
    devices = {r["record"]: r["expr"] for g in device_rules(DEFAULT_CONFIG)["groups"]
               for r in g["rules"]}
    assert stack.disk_await_seconds() in devices[names.DEVICE_AWAIT]
    overview = json.loads((REPO / "dashboards" / "json" / "sweep-overview.json").read_text())
    exprs = {t["expr"] for p in overview["panels"] for t in p.get("targets", [])}
    panel = stack.with_window(fig.DASHBOARD_RATE_WINDOW)
    assert panel.cpu_busy_ratio(("instance",)) in exprs
    # every query of the report carries its target's job selector
    assert all(f'job="{fig.NODE_JOB}"' in q or f'job="{fig.EXPORTER_JOB}"' in q
               for q in report.values())


def test_both_stacks_scrape_the_figures_jobs_at_their_interval(tmp_path: Path) -> None:
    jobs = {fig.EXPORTER_JOB, fig.NODE_JOB, fig.RUNNER_JOB}
    local = Stack(tmp_path / "s", port_base=23000, asok_dir=tmp_path).prometheus_config()
    compose = yaml.safe_load((REPO / "deploy" / "docker" / "prometheus.yml").read_text())
    for config in (local, compose):
        assert jobs <= {j["job_name"] for j in config["scrape_configs"]}
        assert config["global"]["scrape_interval"] == f"{fig.SCRAPE_INTERVAL_SECONDS}s"
    assert DEFAULT_CONFIG.node_job_selector == fig.job_matcher(fig.NODE_JOB)
    assert DEFAULT_CONFIG.rate_window == fig.RULE_RATE_WINDOW


def _exporter_series(name: str, labels: dict[str, str], inc: float) -> dict[str, str]:
    text = ", ".join(f'{k}="{v}"' for k, v in
                     {"job": fig.EXPORTER_JOB, "instance": EXPORTER_INSTANCE, **labels}.items())
    return {"series": f"{name}{{{text}}}", "values": f"0+{inc!r}x{SCRAPES - 1}"}


def test_rgw_latency_takes_each_gateways_own_counters(tmp_path: Path) -> None:
    """A Reef gateway has get_initial_lat, a Tentacle one rgw_op's get_obj_lat (its
    get_initial_lat is gone): per gateway, each gets its own; one that served no GET in the
    window has no sample rather than NaN."""
    series = [
        _exporter_series("ceph_rgw_get_initial_lat_sum", {"instance_id": "reef"}, 0.25),
        _exporter_series("ceph_rgw_get_initial_lat_count", {"instance_id": "reef"}, 50),
        _exporter_series("ceph_rgw_op_get_obj_lat_sum", {"instance_id": "tentacle"}, 0.5),
        _exporter_series("ceph_rgw_op_get_obj_lat_count", {"instance_id": "tentacle"}, 25),
        _exporter_series("ceph_rgw_get_initial_lat_sum", {"instance_id": "idle"}, 0),
        _exporter_series("ceph_rgw_get_initial_lat_count", {"instance_id": "idle"}, 0),
    ]
    _promtool_agrees(tmp_path, series, WINDOW_FIGURES.rgw_latency_seconds("get", ("instance_id",)),
                     [('{instance_id="reef"}', 0.005), ('{instance_id="tentacle"}', 0.02)])
    ops = [_exporter_series("ceph_rgw_op_put_obj_ops", {"instance_id": "tentacle"}, 25)]
    _promtool_agrees(tmp_path, ops, WINDOW_FIGURES.rgw_op_rate("put"), [("{}", 5.0)])
    with pytest.raises(ValueError, match="delete"):
        fig.rgw_op_counters("delete")


def test_mds_and_rgw_figures_are_the_rules_and_the_panels(tmp_path: Path) -> None:
    series = [
        _exporter_series("ceph_mds_reply_latency_sum", {"ceph_daemon": "mds.a"}, 0.125),
        _exporter_series("ceph_mds_reply_latency_count", {"ceph_daemon": "mds.a"}, 25),
    ]
    _promtool_agrees(tmp_path, series, WINDOW_FIGURES.mds_reply_latency_seconds(),
                     [("{}", 0.005)])
    stack = fig.STACK_FIGURES
    recorded = [(r["record"], r.get("labels", {}), r["expr"])
                for g in recording_rules(DEFAULT_CONFIG)["groups"] for r in g["rules"]]
    assert (names.STEP_MDS_REPLY_LATENCY_AVG, {},
            f"cephscope_step_info * on() group_left() ({stack.mds_reply_latency_seconds()})"
            ) in recorded
    for op in fig.RGW_OPERATIONS:
        assert any(r == names.STEP_RGW_LATENCY_AVG and labels == {"op": op}
                   and stack.rgw_latency_seconds(op) in expr for r, labels, expr in recorded)
    overview = json.loads((REPO / "dashboards" / "json" / "sweep-overview.json").read_text())
    exprs = {t["expr"] for p in overview["panels"] for t in p.get("targets", [])}
    assert any("ceph_rgw_op_get_obj_lat_sum" in e and "ceph_rgw_get_initial_lat_sum" in e
               for e in exprs)
    assert any("ceph_mds_reply_latency_sum" in e for e in exprs)


# ---- histograms stored classic or native ----------------------------------------------------

LATENCY = fig.OSD_OP_LATENCY_HISTOGRAM
EDGES = (0.001, 0.002, 0.004, 0.008)
# per OSD: observations per scrape in each bucket (the last is +Inf), and their sum
OSD_BUCKETS = {"osd.0": ((0, 5, 3, 2, 0), 0.0155), "osd.1": ((1, 2, 6, 1, 0), 0.027)}


def _osd_labels(daemon: str) -> str:
    return (f'job="{fig.EXPORTER_JOB}", instance="{EXPORTER_INSTANCE}", ceph_daemon="{daemon}", '
            'op="w"')


def _classic_histograms() -> list[dict[str, str]]:
    """The OSDs' latency histograms as the exporter exposes them: `_bucket{le}`, `_sum`, `_count`."""
    out = []
    for daemon, (counts, total) in OSD_BUCKETS.items():
        labels = _osd_labels(daemon)
        cumulative = 0
        for edge, count in zip((*[repr(e) for e in EDGES], "+Inf"), counts, strict=True):
            cumulative += count
            out.append({"series": f'{LATENCY}_bucket{{{labels}, le="{edge}"}}',
                        "values": f"0+{cumulative}x{SCRAPES - 1}"})
        out.append({"series": f"{LATENCY}_sum{{{labels}}}", "values": f"0+{total!r}x{SCRAPES - 1}"})
        out.append({"series": f"{LATENCY}_count{{{labels}}}",
                    "values": f"0+{sum(counts)}x{SCRAPES - 1}"})
    return out


def _native_histograms() -> list[dict[str, str]]:
    """The same as Prometheus 3 stores them with convert_classic_histograms_to_nhcb: one
    native histogram with custom buckets per OSD."""
    edges = " ".join(repr(e) for e in EDGES)

    def histogram(counts: tuple[int, ...], total: float) -> str:
        buckets = " ".join(str(c) for c in counts)
        return (f"{{{{schema:-53 sum:{total!r} count:{sum(counts)} custom_values:[{edges}] "
                f"buckets:[{buckets}]}}}}")

    return [{"series": f"{LATENCY}{{{_osd_labels(daemon)}}}",
             "values": f"{histogram((0,) * len(counts), 0.0)}+{histogram(counts, total)}"
                       f"x{SCRAPES - 1}"}
            for daemon, (counts, total) in OSD_BUCKETS.items()]


def _cumulative(counts: tuple[int, ...]) -> dict[float, float]:
    running, out = 0.0, {}
    for edge, count in zip((*EDGES, math.inf), counts, strict=True):
        running += count
        out[edge] = running
    return out


def _histogram_expectations() -> list[tuple[str, list[tuple[str, float]]]]:
    """(PromQL, expected samples) of every histogram figure over the window: computed here with
    the report's own quantile (runner/report/step_system) from the bucket counts."""
    per_osd = {d: _cumulative(c) for d, (c, _s) in OSD_BUCKETS.items()}
    both = {e: per_osd["osd.0"][e] + per_osd["osd.1"][e] for e in per_osd["osd.0"]}
    daemon = [(f'{{ceph_daemon="{d}"}}', histogram_quantile(0.99, per_osd[d])) for d in per_osd]
    w = WINDOW_FIGURES.window
    exporter = fig.job_matcher(fig.EXPORTER_JOB)
    return [
        (WINDOW_FIGURES.osd_op_latency_quantile(0.99, ("ceph_daemon",)), daemon),
        (WINDOW_FIGURES.osd_op_latency_quantile(0.5), [("{}", histogram_quantile(0.5, both))]),
        (fig.histogram_rate(LATENCY, "count", ("ceph_daemon",), w, exporter),
         [(f'{{ceph_daemon="{d}"}}', sum(c) / INTERVAL) for d, (c, _s) in OSD_BUCKETS.items()]),
        (fig.histogram_rate(LATENCY, "sum", (), w, exporter),
         [("{}", sum(s for _c, s in OSD_BUCKETS.values()) / INTERVAL)]),
        # the dashboards' op variable finds the op label in either storage
        (f"count by (op) (group by (ceph_daemon, op) ({fig.histogram_selector(LATENCY)}))",
         [('{op="w"}', 2.0)]),
    ]


def _promtool_test(series: list[dict[str, str]], exprs: list[tuple[str, list[tuple[str, float]]]],
                   path: Path) -> Path:
    path.write_text(yaml.safe_dump({
        "rule_files": [],
        "evaluation_interval": f"{INTERVAL}s",
        "tests": [{
            "interval": f"{INTERVAL}s",
            "input_series": series,
            # in nanoseconds, rounded: promtool 2.42 compares floats exactly
            "promql_expr_test": [
                {"expr": f"round(({expr}) * 1e9)", "eval_time": f"{int(WINDOW[1])}s",
                 "exp_samples": [{"labels": labels, "value": round(value * 1e9)}
                                 for labels, value in expected]}
                for expr, expected in exprs],
        }],
    }))
    return path


def test_histogram_figures_answer_the_same_on_classic_and_native_storage(tmp_path: Path) -> None:
    """Every histogram figure (quantiles, count and sum rates, the series selector) gives the
    report's numbers on the classic series under Prometheus 2.42 and 3.5, and on the native
    histograms with custom buckets that 3.5 stores instead."""
    from tests.unit.prometheus3_tools import promtool3

    exprs = _histogram_expectations()
    classic = _promtool_test(_classic_histograms(), exprs, tmp_path / "classic.test.yml")
    native = _promtool_test(_native_histograms(), exprs, tmp_path / "native.test.yml")
    proc = subprocess.run(["promtool", "test", "rules", str(classic)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for path in (classic, native):
        proc3 = promtool3("test", "rules", str(path), binds=(tmp_path,))
        assert proc3.returncode == 0, path.name + ": " + proc3.stdout + proc3.stderr
