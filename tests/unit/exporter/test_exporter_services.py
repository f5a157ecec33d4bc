"""An MDS and a RADOS Gateway through the exporter: real captures of each release
(tests/fixtures/asok/<version>/services_load, made by deploy/capture_fixtures.py --services under
Swift and ceph-fuse traffic) replayed on fake sockets named as Ceph names them.

The series are ceph-exporter's: the same names, labels and values as a reference derivation
written here from src/exporter/DaemonMetricCollector.cc (counter dump/schema where the release
has them, perf dump/schema on Pacific), with the gateway's ``instance_id`` from its socket name.
``CEPHSCOPE_UPDATE_GOLDEN=1`` rewrites the golden expositions (review the diff).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from cephscope.exporter.collectors import enabled_collectors
from cephscope.exporter.exposition import render
from cephscope.exporter.main import settings_from_args
from cephscope.exporter.scrape import Scraper
from tests.unit.exporter_fakes import CEPH_COMPAT_LINT, normalise
from tests.unit.fake_asok import (
    FIXTURES_ROOT,
    FakeDaemon,
    capture_dir,
    check_exposition_golden,
    exporter_args,
    load_capture,
)

VERSIONS = ("16.2.15", "18.2.7", "20.2.4")
COLLECTORS = ("perf", "labeled")
# cephadm's gateway socket: rgw.<service>.<host>.<random suffix>.<pid>.<cctid>
CEPHADM_RGW_SOCKET = "ceph-client.rgw.s3.node1.qwerty.7.94739968030880.asok"


@pytest.fixture
def run() -> Iterator[Path]:
    """A socket dir with a short path: cephadm's socket names are long, and an AF_UNIX path
    has 107 bytes."""
    with tempfile.TemporaryDirectory(prefix="asok-", dir="/tmp") as tmp:
        yield Path(tmp)


def scrape(run: Path, sockets: dict[str, str], version: str) -> str:
    """Serve each capture (daemon dir name -> socket file name) and scrape perf + labeled."""
    daemons = [FakeDaemon(run / socket, load_capture(capture_dir("services_load", name, version)))
               for name, socket in sockets.items()]
    try:
        flags = ["--collector.disable-defaults", *(f"--collector.{c}" for c in COLLECTORS)]
        args = exporter_args(run, *flags)
        scraper = Scraper(enabled_collectors(args), settings_from_args(args))
        try:
            return normalise(render(scraper.scrape(time.monotonic() + 30)).decode())
        finally:
            scraper.close()
    finally:
        for daemon in daemons:
            daemon.stop()


SAMPLE_LINE = re.compile(r"^([A-Za-z_:][\w:]*)(?:\{(.*)\})? (\S+)$")
LABEL_PAIR = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """(name as written, labels) -> value of each sample line (prometheus_client's parser
    would add _total to counters' names)."""
    found = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = SAMPLE_LINE.match(line)
        assert match, line
        labels = frozenset(LABEL_PAIR.findall(match.group(2) or ""))
        found[(match.group(1), labels)] = float(match.group(3))
    return found


def capture(version: str, daemon: str, name: str) -> Any:
    return json.loads((capture_dir("services_load", daemon, version) / name).read_bytes())


# ---- ceph-exporter's derivation, written from its source, independent of the exporter's code

def reference_promethize(name: str) -> str:
    """util.cc promethize()."""
    if name.endswith("-"):
        name = name[:-1] + "_minus"
    name = re.sub(r"[./ -]", "_", name).replace("::", "_").replace("+", "_plus")
    return "ceph_" + name


def reference_extra_labels(daemon_name: str) -> dict[str, str]:
    """get_extra_labels(): the daemon_name is the socket file name without .asok."""
    if daemon_name.startswith("ceph-"):
        daemon_name = daemon_name[len("ceph-"):]
    if daemon_name.startswith("client."):
        daemon_name = daemon_name[len("client."):]
    if "radosgw" in daemon_name:
        return {"instance_id": daemon_name.rsplit(".", 1)[-1]}
    if "rgw" in daemon_name:
        elems = daemon_name.split(".")
        return {"instance_id": elems[3]} if len(elems) >= 4 else {}
    return {"ceph_daemon": daemon_name}


def reference_series(socket: str, version: str, daemon: str
                     ) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """parse_asok_metrics() over the capture: every counter of every (labeled or not) entry
    with priority >= 5, averages as _sum/_count. Pacific has no counter dump: its perf dump /
    perf schema are the same counters without labels. The values of unlabeled entries are
    taken from perf dump, which the exporter reads them from (the captures of the two dumps
    are a moment apart, and busy counters moved in between)."""
    perf_dump = capture(version, daemon, "perf_dump.json")
    try:
        dump, schema = (capture(version, daemon, "counter_dump.json"),
                        capture(version, daemon, "counter_schema.json"))
    except json.JSONDecodeError:  # "ERROR: (22) Invalid argument": Pacific
        perf_schema = capture(version, daemon, "perf_schema.json")
        dump = {k: [{"labels": {}, "counters": v}] for k, v in perf_dump.items()}
        schema = {k: [{"labels": {}, "counters": v}] for k, v in perf_schema.items()}
    for group, entries in dump.items():
        for entry in entries:
            if not entry["labels"]:
                entry["counters"] = perf_dump[group]
    extra = reference_extra_labels(socket.removesuffix(".asok"))
    series = {}
    for group, schema_entries in schema.items():
        for schema_entry, dump_entry in zip(schema_entries, dump[group], strict=True):
            labels = dict(schema_entry["labels"])
            for counter, info in schema_entry["counters"].items():
                if info["priority"] < 5 or info["type"] & 0x10:  # histograms have no number
                    continue
                if not extra:
                    continue  # ceph-exporter: "Unable to parse instance_id"
                for key, value in extra.items():
                    labels.setdefault(key, value)
                name = reference_promethize(f"{group}_{counter}")
                value = dump_entry["counters"][counter]
                key = frozenset(labels.items())
                if info["type"] & 0x4:
                    series[(name + "_count", key)] = value["avgcount"]
                    series[(name + "_sum", key)] = value["sum"]
                else:
                    series[(name, key)] = value
    return series


@pytest.mark.parametrize("version", VERSIONS)
def test_mds_and_gateway_series_are_ceph_exporters(run: Path, version: str) -> None:
    """Every ceph_* series of an MDS and of a cephadm-named gateway equals ceph-exporter's:
    names, labels (ceph_daemon; the gateway's instance_id alone) and values, nothing more or
    less."""
    text = scrape(run, {"mds.a": "ceph-mds.a.asok", "rgw.a": CEPHADM_RGW_SOCKET}, version)
    exported = {k: v for k, v in samples(text).items() if k[0].startswith("ceph_")}
    expected = {**reference_series("ceph-mds.a.asok", version, "mds.a"),
                **reference_series(CEPHADM_RGW_SOCKET, version, "rgw.a")}
    assert len(expected) > 150
    assert set(exported) - set(expected) == set()
    assert set(expected) - set(exported) == set()
    assert exported == expected
    gateway = {k for k in exported if ("instance_id", "qwerty") in k[1]}
    assert gateway and all(dict(k[1]).keys() - {"id", "user", "bucket"} == {"instance_id"}
                           for k in gateway)


@pytest.mark.parametrize("version", VERSIONS)
def test_services_exposition_matches_golden(run: Path, version: str) -> None:
    """The dev cluster's names: ceph-mds.a.asok and ceph-client.rgw.a.asok (whose
    instance_id "a" ceph-exporter cannot derive: it exports nothing for such a gateway)."""
    text = scrape(run, {"mds.a": "ceph-mds.a.asok", "rgw.a": "ceph-client.rgw.a.asok"},
                  version)
    for name in COLLECTORS:
        assert f'cephscope_scrape_collector_success{{collector="{name}"}} 1' in text
    assert 'cephscope_daemon_up{ceph_daemon="mds.a"} 1' in text
    assert 'cephscope_daemon_up{ceph_daemon="rgw.a"} 1' in text
    assert 'cephscope_rgw_instance_info{ceph_daemon="rgw.a",instance_id="a"} 1' in text
    assert list(text_string_to_metric_families(text))
    check_exposition_golden(FIXTURES_ROOT / "golden" / f"{version}-services.prom", text)


def value(found: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str,
          **labels: str) -> float:
    return found[(name, frozenset(labels.items()))]


@pytest.mark.parametrize("version", VERSIONS)
def test_the_figures_dashboards_use_moved_under_traffic(run: Path, version: str) -> None:
    """The counters behind the CephFS and RGW panels and alerts are exported with the values
    the daemons reported, and the traffic moved them."""
    found = samples(scrape(run, {"mds.a": "ceph-mds.a.asok",
                                      "rgw.a": "ceph-client.rgw.a.asok"}, version))
    mds, gw = {"ceph_daemon": "mds.a"}, {"instance_id": "a"}
    perf = capture(version, "mds.a", "perf_dump.json")
    assert value(found, "ceph_mds_server_handle_client_request", **mds) == \
        perf["mds_server"]["handle_client_request"] > 0
    assert value(found, "ceph_mds_reply_latency_count", **mds) == \
        perf["mds"]["reply_latency"]["avgcount"] > 0
    assert value(found, "ceph_mds_reply_latency_sum", **mds) == perf["mds"]["reply_latency"]["sum"] > 0
    assert value(found, "ceph_mds_request", **mds) > 0
    for name in ("ceph_mds_caps", "ceph_mds_inodes", "ceph_mds_log_ev", "ceph_mds_mem_ino",
                 "ceph_mds_mem_ino_plus", "ceph_mds_mem_ino_minus", "ceph_mds_sessions_session_count"):
        assert value(found, name, **mds) >= 0, name
    assert value(found, "ceph_mds_sessions_session_count", **mds) >= 1  # the ceph-fuse client
    rgw = capture(version, "rgw.a", "perf_dump.json")["rgw"]
    assert value(found, "ceph_rgw_req", **gw) == rgw["req"] > 0
    assert value(found, "ceph_rgw_qlen", **gw) == rgw["qlen"]
    assert value(found, "ceph_rgw_qactive", **gw) == rgw["qactive"]
    assert value(found, "ceph_rgw_failed_req", **gw) == rgw["failed_req"]
    if version == "20.2.4":
        # Tentacle moved the GET/PUT counters from `rgw` to `rgw_op` (whole-op latency).
        assert ("ceph_rgw_get_initial_lat_sum", frozenset(gw.items())) not in found
        op = capture(version, "rgw.a", "perf_dump.json")["rgw_op"]
        for kind in ("get", "put"):
            assert value(found, f"ceph_rgw_op_{kind}_obj_ops", **gw) == op[f"{kind}_obj_ops"] > 0
            assert value(found, f"ceph_rgw_op_{kind}_obj_bytes", **gw) == op[f"{kind}_obj_bytes"] > 0
            assert value(found, f"ceph_rgw_op_{kind}_obj_lat_count", **gw) > 0
            assert value(found, f"ceph_rgw_op_{kind}_obj_lat_sum", **gw) > 0
        # labeled per-user / per-bucket op counters (the gateway's counter caches are on)
        assert value(found, "ceph_rgw_op_per_user_put_obj_ops", user="tester", **gw) > 0
        assert value(found, "ceph_rgw_op_per_bucket_put_obj_ops", bucket="traffic-0", **gw) == 8
    else:
        for kind in ("get", "put"):
            assert value(found, f"ceph_rgw_{kind}", **gw) == rgw[kind] > 0
            assert value(found, f"ceph_rgw_{kind}_b", **gw) == rgw[f"{kind}_b"] > 0
            assert value(found, f"ceph_rgw_{kind}_initial_lat_count", **gw) == \
                rgw[f"{kind}_initial_lat"]["avgcount"] > 0
            assert value(found, f"ceph_rgw_{kind}_initial_lat_sum", **gw) == \
                rgw[f"{kind}_initial_lat"]["sum"] > 0
    if version != "16.2.15":
        # Reef and later: per-client metrics the MDS keeps as labeled counters
        (entry,) = capture(version, "mds.a", "counter_dump.json")["mds_client_metrics-cephfs"]
        assert value(found, "ceph_mds_client_metrics_cephfs_total_write_ops",
                     **entry["labels"], **mds) == entry["counters"]["total_write_ops"] > 0


@pytest.mark.parametrize("version", VERSIONS)
def test_services_golden_passes_promtool(version: str) -> None:
    """Apart from ceph-exporter's own names (kept for compatibility), promtool finds nothing."""
    promtool = shutil.which("promtool")
    assert promtool, "promtool (Debian package prometheus) is required: bash deploy/install.sh"
    golden = FIXTURES_ROOT / "golden" / f"{version}-services.prom"
    proc = subprocess.run([promtool, "check", "metrics"], input=golden.read_bytes(),
                          capture_output=True, timeout=60, check=False)
    findings = [line for line in (proc.stdout + proc.stderr).decode().splitlines() if line.strip()]
    assert not [line for line in findings if not CEPH_COMPAT_LINT.match(line)]
    assert any(line.startswith("ceph_mds_reply_latency_count ") for line in findings)


def test_a_gateway_socket_name_with_quotes_and_backslashes_renders_escaped(run: Path) -> None:
    """The instance_id comes from a file name anyone with write access to the socket dir
    chooses: it ends up escaped in a label value, and the exposition still parses."""
    text = scrape(run, {"rgw.a": 'ceph-client.rgw.q"uo\\te.asok'}, "16.2.15")
    assert 'ceph_rgw_req{instance_id="q\\"uo\\\\te"}' in text
    assert 'cephscope_daemon_up{ceph_daemon="rgw.q\\"uo\\\\te"} 1' in text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    (sample,) = families["ceph_rgw_req"].samples
    assert sample.labels == {"instance_id": 'q"uo\\te'}
