"""The scale simulation's pieces end to end, small: 2 namespace hosts x 5 replaying OSDs, each
host's exporter and node_exporter scraped by one Prometheus (2.42, classic histograms) through
a short run of 2 steps; every figure of benchmarks/scale_sim.py comes out, every dashboard
query answers, and the namespaces, bridges, veths and processes are gone afterwards."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from cephscope.deploy.procs import proc_cmdline
from tests.live.conftest import free_port_base

SIM = Path(__file__).resolve().parents[2] / "benchmarks" / "scale_sim.py"


@pytest.fixture(scope="module")
def scale_sim() -> ModuleType:
    spec = importlib.util.spec_from_file_location("scale_sim", SIM)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["scale_sim"] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


def test_two_hosts_of_five_replaying_osds_scraped_by_one_prometheus(
        scale_sim: ModuleType, tmp_path: Path) -> None:
    state = tmp_path / "sim"
    out = tmp_path / "result.json"
    scale_sim.main(["--osds", "10", "--osds-per-host", "5", "--variants", "2-classic",
                    "--scrape-interval", "5", "--steps", "2", "--step-seconds", "6",
                    "--warmup-scrapes", "2", "--state-dir", str(state),
                    "--port-base", str(free_port_base(8)), "--json", str(out)])
    result = json.loads(out.read_text())
    (variant,) = result["variants"]
    assert variant["stopped"] is None and variant["osds"] == 10 and variant["hosts"] == 2
    # 10 OSDs' series and both hosts' node_exporters, in the head and scraped without failure
    assert variant["exporter_samples_per_scrape"] > 5 * 100
    assert variant["head_series"] > 10 * 100
    assert variant["samples_per_second"] > 0 and variant["exporter_scrapes_failed"] == 0
    assert variant["exporter_scrape_seconds"]["scrapes"] >= 2 * 2
    assert variant["prometheus_rss_peak_bytes"] > 0
    assert any("cephscope-recording" in g for g in variant["rule_group_seconds"])
    queries = variant["dashboard_queries"]
    assert len(queries) >= 40 and not [q for q in queries if q.get("error")]
    # per-OSD panels see every simulated OSD
    per_osd = next(q for q in queries if q["query"].endswith("Op latency p99 per OSD / A"))
    assert per_osd["series"] == 10
    assert variant["report_queries_seconds"]["steps"] == 2
    # nothing left behind
    plan = json.loads((state / "hosts.json").read_text())
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not [h["netns"] for h in plan["hosts"] if h["netns"] in netns]
    links = [plan["public_bridge"], plan["cluster_bridge"],
             *(h[k] for h in plan["hosts"] for k in ("public_veth", "cluster_veth") if h[k])]
    assert not [name for name in links if Path("/sys/class/net", name).exists()]
    left = [pid for pid in map(int, filter(str.isdigit, os.listdir("/proc")))
            if str(state) in " ".join(proc_cmdline(pid))]
    assert not left, f"left running: {left}"
