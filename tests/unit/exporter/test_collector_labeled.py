"""labeled collector: `counter dump` / `counter schema` of real Reef and Tentacle OSDs, replayed
by the fake admin socket; Pacific (no such command) costs nothing after the first refusal."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from cephscope.exporter.collectors import enabled_collectors
from cephscope.exporter.collectors.labeled import DEFAULT_EXCLUDED_COLLECTIONS, plan_from_counter_schema
from cephscope.exporter.exposition import render
from cephscope.exporter.main import settings_from_args
from cephscope.exporter.scrape import Scraper
from tests.unit.fake_asok import (
    FakeCluster,
    FakeDaemon,
    capture_dir,
    exporter_args,
    load_capture,
    parse_samples,
)


def serve(tmp_path: Path, version: str) -> FakeDaemon:
    (tmp_path / "run").mkdir()
    return FakeDaemon(tmp_path / "run" / "ceph-osd.0.asok",
                      load_capture(capture_dir("load", "osd.0", version)))


@pytest.mark.parametrize("version", ["18.2.7", "20.2.4"])
def test_labeled_counters_of_real_osds(tmp_path: Path, version: str) -> None:
    schema = json.loads((capture_dir("load", "osd.0", version) / "counter_schema.json").read_text())
    dump = json.loads((capture_dir("load", "osd.0", version) / "counter_dump.json").read_text())
    plan = plan_from_counter_schema(schema, 5)
    assert plan and all(s.labels for s in plan)
    daemon = serve(tmp_path, version)
    try:
        # every key: the default leaves out the messenger's workers and the scrub keys
        args = exporter_args(tmp_path / "run", "--collector.disable-defaults", "--collector.labeled",
                             "--collector.labeled.exclude-collections=")
        scraper = Scraper(enabled_collectors(args), settings_from_args(args))
        samples = parse_samples(render(scraper.scrape(time.monotonic() + 10)).decode())
        scraper.close()
    finally:
        daemon.stop()
    assert samples['cephscope_scrape_collector_success{collector="labeled"}'] == 1
    # one series per messenger worker, its id as a label, the dump's value
    workers = {e["labels"]["id"]: e["counters"] for e in dump["AsyncMessenger::Worker"]}
    assert len(workers) >= 3
    for worker, counters in workers.items():
        key = ('ceph_AsyncMessenger_Worker_msgr_connection_ready_timeouts'
               f'{{ceph_daemon="osd.0",id="{worker}"}}')
        assert samples[key] == counters["msgr_connection_ready_timeouts"]
    # nothing unlabeled (perf dump's counters belong to the perf collector)
    assert not any(k.startswith("ceph_osd_op{") for k in samples)
    assert len([k for k in samples if k.startswith("ceph_") and "{" in k]) == len(plan)


@pytest.mark.parametrize("version", ["18.2.7", "20.2.4"])
def test_the_default_leaves_out_the_messenger_workers_and_the_scrub_keys(version: str) -> None:
    schema = json.loads((capture_dir("load", "osd.0", version) / "counter_schema.json").read_text())
    every = {s.key for s in plan_from_counter_schema(schema, 5)}
    kept = {s.key for s in plan_from_counter_schema(schema, 5,
                                                    re.compile(DEFAULT_EXCLUDED_COLLECTIONS))}
    assert "AsyncMessenger::Worker" in every
    assert every - kept == ({"AsyncMessenger::Worker"} if version == "18.2.7" else {
        "AsyncMessenger::Worker", "osd_scrub_dp_ec", "osd_scrub_dp_repl", "osd_scrub_sh_ec",
        "osd_scrub_sh_repl"})
    assert kept == set()  # an OSD has no other labeled key


def test_a_bad_key_regex_names_the_flag() -> None:
    with pytest.raises(ValueError, match=r"--collector.labeled.exclude-collections '\[': not a "
                                         "regular expression"):
        enabled_collectors(exporter_args("/nonexistent", "--collector.labeled.exclude-collections",
                                         "["))


def test_pacific_refuses_once_and_is_not_asked_again(tmp_path: Path) -> None:
    cluster = FakeCluster(tmp_path / "run")
    daemon = cluster.add_osd(0, scenario="load")
    try:
        args = exporter_args(tmp_path / "run", "--collector.disable-defaults", "--collector.labeled")
        scraper = Scraper(enabled_collectors(args), settings_from_args(args))
        for _ in range(3):
            samples = parse_samples(render(scraper.scrape(time.monotonic() + 10)).decode())
            assert samples['cephscope_scrape_collector_success{collector="labeled"}'] == 1
            assert samples['cephscope_daemon_up{ceph_daemon="osd.0"}'] == 1
        scraper.close()
    finally:
        cluster.stop()
    asked = [r.get("prefix") for r in daemon.requests]
    assert asked.count("counter dump") == 1


def without_buckets(reply: bytes) -> bytes:
    """A gateway's counter dump or schema from before any bucket was used."""
    parsed = json.loads(reply)
    parsed.pop("rgw_op_per_bucket")
    return json.dumps(parsed).encode()


def test_a_gateways_buckets_used_after_its_schema_was_read_are_exported(tmp_path: Path) -> None:
    """A real Tentacle gateway (per-bucket counters on): its schema read when it had no bucket
    entry, then buckets used in the same life: the next scrape reads the schema again and
    exports them; a scrape with nothing new does not read it."""
    capture = load_capture(capture_dir("services_load", "rgw.a", "20.2.4"))
    buckets = {e["labels"]["bucket"]: e["counters"]["put_obj_ops"]
               for e in json.loads(capture["counter_dump.json"])["rgw_op_per_bucket"]}
    assert len(buckets) >= 2
    (tmp_path / "run").mkdir()
    before = {**capture, **{name: without_buckets(capture[name])
                            for name in ("counter_dump.json", "counter_schema.json")}}
    daemon = FakeDaemon(tmp_path / "run" / "ceph-client.rgw.a.asok", before)
    args = exporter_args(tmp_path / "run", "--collector.disable-defaults", "--collector.labeled")
    scraper = Scraper(enabled_collectors(args), settings_from_args(args))

    def per_bucket() -> dict[str, float]:
        samples = parse_samples(render(scraper.scrape(time.monotonic() + 10)).decode())
        assert samples['cephscope_scrape_collector_success{collector="labeled"}'] == 1
        prefix = 'ceph_rgw_op_per_bucket_put_obj_ops{instance_id="a",bucket="'
        return {k[len(prefix):-2]: v for k, v in samples.items() if k.startswith(prefix)}

    try:
        assert per_bucket() == {}
        daemon.replace_responses(capture)  # the same daemon, its buckets now used
        assert per_bucket() == buckets
        assert per_bucket() == buckets
        scraper.close()
    finally:
        daemon.stop()
    asked = [r.get("prefix") for r in daemon.requests]
    assert asked.count("counter dump") == 3 and asked.count("counter schema") == 2
