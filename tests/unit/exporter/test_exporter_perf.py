"""perf + histogram collectors against replayed captures: names, types, values, goldens."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cephscope.exporter.collectors import enabled_collectors
from cephscope.exporter.collectors.perf import fixed_name, plan_from_schema, promethize
from cephscope.exporter.exposition import render
from cephscope.exporter.main import settings_from_args
from cephscope.exporter.scrape import Scraper
from tests.unit import fake_asok
from tests.unit.exporter_fakes import CEPH_COMPAT_LINT, EVERY_SERIES_FLAGS
from tests.unit.fake_asok import (
    CEPH_VERSION,
    FIXTURES_ROOT,
    FakeCluster,
    capture_dir,
    check_exposition_golden,
    exporter_args,
    only_collectors,
    parse_samples,
    scrape_once,
    types_of,
)

GOLDEN_DIR = FIXTURES_ROOT / "golden"
PERF_AND_HISTOGRAM = only_collectors("perf", "histogram")
# the goldens hold every name ceph-exporter would give, the cache autotuner's too
EVERY_PERF_AND_HISTOGRAM = (*PERF_AND_HISTOGRAM, *EVERY_SERIES_FLAGS)


def start(tmp_path: Path, scenario: str, osds: int = 3) -> FakeCluster:
    cluster = FakeCluster(tmp_path / "run")
    for i in range(osds):
        cluster.add_osd(i, scenario=scenario)
    return cluster


def normalise(text: str) -> str:
    """Zero what changes between runs (durations, Python version)."""
    text = re.sub(
        r"^(cephscope_scrape_collector_duration_seconds\{[^}]*\}) .*$", r"\1 0", text, flags=re.M
    )
    return re.sub(r'pythonversion="[^"]*"', 'pythonversion="X"', text)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("osd_op_w", "ceph_osd_op_w"),
        ("AsyncMessenger::Worker-0_msgr_recv_bytes", "ceph_AsyncMessenger_Worker_0_msgr_recv_bytes"),
        ("throttle-osd_client_bytes_get", "ceph_throttle_osd_client_bytes_get"),
        ("bluestore-pricache:kv_cache_bytes", "ceph_bluestore_pricache:kv_cache_bytes"),
        ("mds_mem_ino-", "ceph_mds_mem_ino_minus"),
        ("mds_mem_ino+", "ceph_mds_mem_ino_plus"),
        ("a.b/c d", "ceph_a_b_c_d"),
    ],
)
def test_promethize_follows_ceph_exporter(raw: str, expected: str) -> None:
    assert promethize(raw) == expected


def test_rgw_multisite_counters_get_ceph_exporters_fixed_name() -> None:
    """A counter named after its source zone is exported under one name with the zone as a
    label (ceph-exporter's add_fixed_name_metrics); others keep their name."""
    # ceph-exporter's pattern stops at the first "_": a zone "us-east" (promethized us_east)
    # leaves "_east" in the name. Followed as it is, for the same series names.
    assert fixed_name(promethize("data-sync-from-us-east_fetch_bytes")) == (
        "ceph_data_sync_from_zone_east_fetch_bytes", (("source_zone", "us"),))
    assert fixed_name(promethize("data-sync-from-zone1_poll_latency")) == (
        "ceph_data_sync_from_zone_poll_latency", (("source_zone", "zone1"),))
    assert fixed_name("ceph_rgw_req") == ("ceph_rgw_req", ())
    schema = {"data-sync-from-zone1": {"fetch_bytes": {
        "type": 10, "metric_type": "counter", "value_type": "integer", "description": "bytes",
        "nick": "", "priority": 5, "units": "bytes"}}}
    (counter,) = plan_from_schema(schema, 5)
    assert (counter.metric, counter.extra_labels) == (
        "ceph_data_sync_from_zone_fetch_bytes", (("source_zone", "zone1"),))


@pytest.mark.parametrize("scenario", ["idle", "load"])
def test_golden_exposition(tmp_path: Path, scenario: str) -> None:
    cluster = start(tmp_path, scenario)
    try:
        text = normalise(scrape_once(tmp_path / "run", *EVERY_PERF_AND_HISTOGRAM))
    finally:
        cluster.stop()
    golden = GOLDEN_DIR / f"{CEPH_VERSION}-{scenario}.prom"
    check_exposition_golden(golden, text)


@pytest.mark.parametrize("scenario", ["idle", "load"])
def test_golden_passes_promtool(scenario: str) -> None:
    promtool = shutil.which("promtool")
    assert promtool, "promtool (Debian package prometheus) is required: bash deploy/install.sh"
    golden = GOLDEN_DIR / f"{CEPH_VERSION}-{scenario}.prom"
    proc = subprocess.run(
        [promtool, "check", "metrics"], input=golden.read_bytes(), capture_output=True, timeout=60
    )
    findings = [
        line for line in proc.stdout.decode().splitlines() + proc.stderr.decode().splitlines()
        if line.strip()
    ]
    unexpected = [line for line in findings if not CEPH_COMPAT_LINT.match(line)]
    assert not unexpected, unexpected
    # The allow-list is not hiding everything: ceph names do trigger it.
    assert any(line.startswith("ceph_osd_op_w_latency_count ") for line in findings)


def test_names_types_and_values_match_the_capture(tmp_path: Path) -> None:
    cluster = start(tmp_path, "load", osds=1)
    try:
        text = scrape_once(tmp_path / "run", *PERF_AND_HISTOGRAM)
    finally:
        cluster.stop()
    samples = parse_samples(text)
    types = types_of(text)
    dump = json.loads((capture_dir("load", "osd.0") / "perf_dump.json").read_bytes())
    osd = dump["osd"]
    label = '{ceph_daemon="osd.0"}'
    assert types["ceph_osd_op_w"] == "counter"
    assert samples["ceph_osd_op_w" + label] == osd["op_w"] > 0
    assert types["ceph_osd_op_w_latency_sum"] == "gauge"
    assert types["ceph_osd_op_w_latency_count"] == "counter"
    assert samples["ceph_osd_op_w_latency_sum" + label] == pytest.approx(osd["op_w_latency"]["sum"])
    assert samples["ceph_osd_op_w_latency_count" + label] == osd["op_w_latency"]["avgcount"]
    assert types["ceph_osd_numpg"] == "gauge"
    assert samples["ceph_osd_numpg" + label] == osd["numpg"]
    assert any(name.startswith("ceph_bluestore_") for name in types)
    # No avgtime (ceph-exporter derives nothing) and no histogram counters in perf names.
    assert not any(name.endswith("_avgtime") for name in types)


def test_priority_threshold(tmp_path: Path) -> None:
    schema = json.loads((capture_dir("load", "osd.0") / "perf_schema.json").read_bytes())
    low = [
        (coll, name) for coll, group in schema.items() for name, info in group.items()
        if info["priority"] < 5 and not info["type"] & 0x4
    ]
    assert low, "capture has no low-priority counter to test with"
    low_metric = promethize(f"{low[0][0]}_{low[0][1]}")
    cluster = start(tmp_path, "load", osds=1)
    try:
        default = types_of(scrape_once(tmp_path / "run", *PERF_AND_HISTOGRAM))
        everything = types_of(
            scrape_once(tmp_path / "run", *PERF_AND_HISTOGRAM, "--collector.perf.priority", "0")
        )
        critical = types_of(
            scrape_once(tmp_path / "run", *PERF_AND_HISTOGRAM, "--collector.perf.priority", "10")
        )
    finally:
        cluster.stop()
    assert low_metric not in default and low_metric in everything
    assert len(critical) < len(default) < len(everything)
    planned = plan_from_schema(schema, 5)
    assert len({c.metric for c in planned}) > 50


def test_cache_autotuner_collections_are_one_flag_away(tmp_path: Path) -> None:
    schema = json.loads((capture_dir("load", "osd.0") / "perf_schema.json").read_bytes())
    pricache = {c for c in schema if c.startswith("bluestore-pricache")}
    assert len(pricache) == 5, sorted(schema)  # the autotuner and its four caches
    cluster = start(tmp_path, "load", osds=1)
    try:
        default = types_of(scrape_once(tmp_path / "run", *only_collectors("perf")))
        everything = types_of(scrape_once(tmp_path / "run", *only_collectors("perf"),
                                          "--collector.perf.exclude-collections="))
        no_bluefs = types_of(scrape_once(tmp_path / "run", *only_collectors("perf"),
                                         "--collector.perf.exclude-collections", "bluefs"))
    finally:
        cluster.stop()
    autotuner = {n for n in everything if n.startswith("ceph_bluestore_pricache")}
    assert len(autotuner) == 61
    assert set(everything) - set(default) == autotuner
    # the regex matches whole collection names: "bluefs" leaves "bluestore" alone
    assert not any(n.startswith("ceph_bluefs_") for n in no_bluefs)
    assert any(n.startswith("ceph_bluestore_pricache") for n in no_bluefs)
    assert any(n.startswith("ceph_bluestore_commit_lat") for n in no_bluefs)


def test_a_bad_collection_regex_names_the_flag() -> None:
    with pytest.raises(ValueError, match=r"--collector.perf.exclude-collections '\(': not a "
                                         "regular expression"):
        enabled_collectors(exporter_args("/nonexistent", "--collector.perf.exclude-collections",
                                         "("))


def test_schema_cached_and_refetched_when_counters_change(tmp_path: Path) -> None:
    cluster = FakeCluster(tmp_path / "run")
    daemon = cluster.add_osd(0, scenario="load", fault="schema_mismatch")
    args = exporter_args(tmp_path / "run", *only_collectors("perf"))
    scraper = Scraper(enabled_collectors(args), settings_from_args(args))

    def scrape() -> dict[str, str]:
        return types_of(render(scraper.scrape(time.monotonic() + 5)).decode())

    try:
        first = scrape()
        scrape()
        scrape()
        schema_requests = [r for r in daemon.requests if r["prefix"] == "perf schema"]
        assert len(schema_requests) == 1, "schema must be cached while the daemon is the same"
        # The mismatched schema (another life): only counters known to both are exported.
        assert "ceph_osd_new_after_restart" not in first
        assert "ceph_collection_after_restart_brand_new" not in first
        assert sum(1 for n in first if n.startswith("ceph_osd_")) > 10
        # Same pid (in-process fake), but the dump's shape changed: schema refetched.
        cluster.restart("osd.0", scenario="load", fault="new_life")
        after = scrape()
        assert [r["prefix"] for r in cluster.daemons["osd.0"].requests].count("perf schema") == 1
        assert "ceph_throttle_after_restart_val" in after
        assert sum(1 for n in after if n.startswith("ceph_osd_")) > sum(
            1 for n in first if n.startswith("ceph_osd_")
        )
    finally:
        scraper.close()
        cluster.stop()


def _serve_in_child(run_dir: Path, fault: str | None) -> subprocess.Popen[bytes]:
    argv = [sys.executable, str(Path(fake_asok.__file__)), "--dir", str(run_dir), "--osds", "1"]
    if fault:
        argv += ["--fault", fault]
    child = subprocess.Popen(argv, stdout=subprocess.PIPE)
    assert child.stdout is not None and child.stdout.readline().strip() == b"ready"
    return child


def test_schema_refetched_when_the_daemon_pid_changes(tmp_path: Path) -> None:
    """A restart with an identical counter set is seen through SO_PEERCRED's pid."""
    run_dir = tmp_path / "run"
    args = exporter_args(run_dir, *only_collectors("perf"))
    scraper = Scraper(enabled_collectors(args), settings_from_args(args))
    child = _serve_in_child(run_dir, "schema_mismatch")
    try:
        before = types_of(render(scraper.scrape(time.monotonic() + 5)).decode())
        child.terminate()
        child.wait(timeout=10)
        child = _serve_in_child(run_dir, None)
        after = types_of(render(scraper.scrape(time.monotonic() + 5)).decode())
    finally:
        child.terminate()
        child.wait(timeout=10)
        scraper.close()
    osd_before = {n for n in before if n.startswith("ceph_osd_")}
    osd_after = {n for n in after if n.startswith("ceph_osd_")}
    assert osd_before < osd_after, "new pid must trigger a fresh perf schema"


@pytest.mark.parametrize("metric_type", [["counter"], "gauge", 8, None])
def test_a_garbled_metric_type_costs_only_that_daemons_counter(
    tmp_path: Path, metric_type: object
) -> None:
    # Found by benchmarks/fuzz_scrape.py (seed 11, round 49488): osd.0's schema said op_w's
    # metric_type was ["counter"]; op_w became a gauge for osd.0, and rendering, which keeps
    # one type per name, dropped osd.1's ceph_osd_op_w. Ceph writes metric_type from the type
    # bits, so one that disagrees is garbled: that counter of that daemon is skipped; one that
    # is absent (older schemas) goes by the bits.
    cluster = start(tmp_path, "load", osds=2)
    schema = json.loads((capture_dir("load", "osd.0") / "perf_schema.json").read_bytes())
    if metric_type is None:
        del schema["osd"]["op_w"]["metric_type"]
    else:
        schema["osd"]["op_w"]["metric_type"] = metric_type
    cluster.daemons["osd.0"].responses["perf_schema.json"] = json.dumps(schema).encode()
    try:
        text = scrape_once(tmp_path / "run", *PERF_AND_HISTOGRAM)
    finally:
        cluster.stop()
    samples = parse_samples(text)
    assert types_of(text)["ceph_osd_op_w"] == "counter"
    assert 'ceph_osd_op_w{ceph_daemon="osd.1"}' in samples
    assert ('ceph_osd_op_w{ceph_daemon="osd.0"}' in samples) == (metric_type is None)
    assert 'ceph_osd_op_r{ceph_daemon="osd.0"}' in samples  # the rest of osd.0's counters
