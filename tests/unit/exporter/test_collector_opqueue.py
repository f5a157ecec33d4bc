"""opqueue collector: dump_op_pq_state parsing (real wpq / mclock captures), rate limit, faults."""

from __future__ import annotations

import copy
import json
import random
import re
import time
from pathlib import Path
from typing import Any

import pytest

from cephscope.exporter.asok import Daemon
from cephscope.exporter.collectors import enabled_collectors
from cephscope.exporter.collectors.opqueue import (
    OpQueueCollector,
    OpQueueSettings,
    ShardQueue,
    parse_op_pq_state,
)
from cephscope.exporter.exposition import MetricSink, render, render_labels
from cephscope.exporter.main import settings_from_args
from cephscope.exporter.scrape import Scraper
from tests.unit.fake_asok import (
    FakeCluster,
    capture_dir,
    exporter_args,
    only_collectors,
    parse_samples,
    scrape_once,
)

OPQUEUE = only_collectors("opqueue")


def load(scenario: str, osd: str, name: str = "dump_op_pq_state.json") -> Any:
    return json.loads((capture_dir(scenario, osd) / name).read_bytes())


def config_value(scenario: str, osd: str, option: str) -> int:
    return int(load(scenario, osd, f"config_get.{option}.json")[option])


def expected_shards(scenario: str, osd: str) -> set[int]:
    """osd_op_num_shards, or its _hdd/_ssd variant when it is 0 (device-class default)."""
    configured = config_value(scenario, osd, "osd_op_num_shards")
    if configured:
        return {configured}
    return {config_value(scenario, osd, f"osd_op_num_shards_{c}") for c in ("hdd", "ssd")}


def all_num_keys(node: Any) -> int:
    """Independent count: every num_keys anywhere in the document."""
    if isinstance(node, dict):
        return sum(
            (v if k == "num_keys" else all_num_keys(v)) for k, v in node.items()
        )
    if isinstance(node, list):
        return sum(all_num_keys(v) for v in node)
    return 0


@pytest.mark.parametrize("osd", ["osd.0", "osd.1"])
def test_real_wpq_dump_under_load(osd: str) -> None:
    doc = load("ops_load", osd)
    shards = parse_op_pq_state(doc)
    assert len(shards) in expected_shards("ops_load", osd)
    assert [s.shard for s in shards] == list(range(len(shards)))
    assert {s.scheduler for s in shards} == {"wpq"}
    total = sum(q.items for s in shards for q in s.queues.values())
    assert total == all_num_keys(doc) > 0, "the busiest capture has queued ops"
    for state in shards:
        for queue in state.queues.values():
            assert queue.items == sum(p.items for p in queue.priorities)
            # rados bench ops are client ops: osd_client_op_priority (63) by default
            assert all(0 <= p.priority <= 255 for p in queue.priorities)


def test_real_idle_dump_has_empty_shards() -> None:
    counts = set()
    for osd in ("osd.0", "osd.1", "osd.2"):
        shards = parse_op_pq_state(load("idle", osd))
        counts.add(len(shards))
        assert all(q == ShardQueue(0) for s in shards for q in s.queues.values())
    # Same config and device class for the three OSDs of that capture: same shard count.
    assert len(counts) == 1 and counts.pop() >= 1


def test_high_queue_and_several_priorities() -> None:
    # The real flat array of a loaded shard, reused as the strict queue with a second priority.
    doc = load("ops_load", "osd.0")
    busy = next(v["queues"] for v in doc.values() if v["queues"])
    body = {
        "high_queues": [*busy],
        "queues": [*busy, 70, 4096, {"priority": 7, "num_keys": 2, "first_item_cost": 8192}],
    }
    (state,) = parse_op_pq_state({"OSD:ShardedOpWQ:0": body})
    first = sum(e["num_keys"] for e in busy if isinstance(e, dict))
    assert state.queues["high"].items == first
    assert state.queues["normal"].items == first + 2
    assert [p.priority for p in state.queues["normal"].priorities][-1] == 7


def test_pacific_mclock_dump_is_empty_objects() -> None:
    assert load("ops_load_mclock", "osd.1", "config_get.osd_op_queue.json") == {
        "osd_op_queue": "mclock_scheduler"
    }
    shards = parse_op_pq_state(load("ops_load_mclock", "osd.1"))
    assert len(shards) in expected_shards("ops_load_mclock", "osd.1")
    assert {s.scheduler for s in shards} == {"mclock"}
    assert all(not s.queues for s in shards)


def test_later_release_mclock_queue_sizes() -> None:
    body = {
        "queue_sizes": {"immediate": 3, "scheduler": 17},
        "mClockClients": {"client_count": 2, "clients": "..."},
        "mClockQueues": {"queues": "..."},
    }
    (state,) = parse_op_pq_state({"OSD:ShardedOpWQ:0": body})
    assert state.scheduler == "mclock"
    assert state.queues["scheduler"].items == 17
    assert state.queues["immediate"].items == 3
    assert state.mclock_clients == 2


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ([], "not an object"),
        ("ERROR", "not an object"),
        ({"OSD:ShardedOpWQ:0": []}, "shard 0 is list"),
        ({"OSD:ShardedOpWQ:0": {"queues": {}}}, "not a list"),
        ({"OSD:ShardedOpWQ:0": {"queues": ["63"]}}, "not an integer"),
        ({"OSD:ShardedOpWQ:0": {"queues": [{"priority": 63}]}}, "num_keys"),
        ({"OSD:ShardedOpWQ:0": {"queues": [{"priority": 9999, "num_keys": 1}]}}, "outside"),
        ({"OSD:ShardedOpWQ:0": {"queues": [{"priority": True, "num_keys": 1}]}}, "priority"),
        ({"something else": {}}, "no OSD:ShardedOpWQ"),
    ],
)
def test_bad_input_is_a_clear_value_error(doc: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_op_pq_state(doc)


GARBAGE: list[Any] = [None, "x", -1.5, [], {}, True, {"num_keys": "a"}, 2**70]


def _mutate(node: Any, rng: random.Random) -> Any:
    if isinstance(node, dict) and node:
        key = rng.choice(list(node))
        node[key] = rng.choice(GARBAGE) if rng.random() < 0.5 else _mutate(node[key], rng)
    elif isinstance(node, list) and node:
        i = rng.randrange(len(node))
        node[i] = rng.choice(GARBAGE) if rng.random() < 0.5 else _mutate(node[i], rng)
    return node


def test_mutated_real_dumps_parse_or_raise_value_error() -> None:
    rng = random.Random(3)
    base = load("ops_load", "osd.1")
    outcomes = {"parsed": 0, "rejected": 0}
    for _ in range(400):
        doc = _mutate(copy.deepcopy(base), rng)
        try:
            parse_op_pq_state(doc)
            outcomes["parsed"] += 1
        except ValueError:
            outcomes["rejected"] += 1
    assert outcomes["parsed"] and outcomes["rejected"], outcomes


def start(tmp_path: Path, scenario: str, osds: int = 2, **faults: str) -> FakeCluster:
    cluster = FakeCluster(tmp_path / "run")
    for i in range(osds):
        cluster.add_osd(i, scenario=scenario, fault=faults.get(f"osd{i}"))
    return cluster


def test_series_for_every_shard_of_every_osd(tmp_path: Path) -> None:
    cluster = start(tmp_path, "ops_load")
    try:
        samples = parse_samples(scrape_once(tmp_path / "run", *OPQUEUE,
                                            "--collector.opqueue.strict-queues"))
    finally:
        cluster.stop()
    assert samples['cephscope_scrape_collector_success{collector="opqueue"}'] == 1
    for osd in ("osd.0", "osd.1"):
        doc = load("ops_load", osd)
        shards = parse_op_pq_state(doc)
        assert samples[f'cephscope_osd_op_shards{{ceph_daemon="{osd}"}}'] == len(shards)
        queued = 0.0
        for shard in range(len(shards)):
            for queue in ("normal", "high"):
                key = f'cephscope_osd_op_queue_items{{ceph_daemon="{osd}",shard="{shard}",queue="{queue}"}}'
                queued += samples[key]
        assert queued == all_num_keys(doc)
        assert samples[f'cephscope_osd_op_queue_info{{ceph_daemon="{osd}",scheduler="wpq"}}'] == 1


def _scraper(tmp_path: Path, *flags: str) -> Scraper:
    args = exporter_args(tmp_path / "run", *OPQUEUE, *flags)
    return Scraper(enabled_collectors(args), settings_from_args(args))


def _pq_requests(cluster: FakeCluster) -> int:
    return sum(
        1 for d in cluster.daemons.values() for r in d.requests if r["prefix"] == "dump_op_pq_state"
    )


def test_min_interval_serves_the_cache(tmp_path: Path) -> None:
    cluster = start(tmp_path, "ops_load")
    scraper = _scraper(tmp_path, "--collector.opqueue.min-interval", "60")
    try:
        first = parse_samples(render(scraper.scrape(time.monotonic() + 5)).decode())
        second = parse_samples(render(scraper.scrape(time.monotonic() + 5)).decode())
        requests = _pq_requests(cluster)
    finally:
        scraper.close()
        cluster.stop()
    assert requests == 2  # one per OSD, not one per OSD per scrape
    items = [k for k in first if k.startswith("cephscope_osd_op_queue_items{")]
    assert items and all(first[k] == second[k] for k in items)
    age = 'cephscope_osd_op_queue_dump_age_seconds{ceph_daemon="osd.0"}'
    assert second[age] >= first[age]


def test_zero_min_interval_dumps_every_scrape(tmp_path: Path) -> None:
    cluster = start(tmp_path, "ops_load")
    scraper = _scraper(tmp_path, "--collector.opqueue.min-interval", "0")
    try:
        for _ in range(3):
            scraper.scrape(time.monotonic() + 5)
        requests = _pq_requests(cluster)
    finally:
        scraper.close()
        cluster.stop()
    assert requests == 6


def test_garbage_daemon_costs_only_its_own_series(tmp_path: Path) -> None:
    cluster = start(tmp_path, "ops_load", osd1="garbage")
    try:
        samples = parse_samples(scrape_once(tmp_path / "run", *OPQUEUE))
    finally:
        cluster.stop()
    assert samples['cephscope_daemon_up{ceph_daemon="osd.1"}'] == 0
    assert 'cephscope_osd_op_shards{ceph_daemon="osd.1"}' not in samples
    assert samples['cephscope_osd_op_shards{ceph_daemon="osd.0"}'] >= 1


class _Session:
    """The part of DaemonSession the collector uses, with a pid we control."""

    def __init__(self, name: str, docs: list[Any], pid: int) -> None:
        self.daemon = Daemon(name, "osd", name.split(".")[1], "ceph", "/nonexistent")
        self.daemon_label = render_labels({"ceph_daemon": name})
        self.docs = docs
        self.calls = 0
        self._pid = pid

    def pid(self) -> int:
        return self._pid

    def command(self, prefix: str, **_: Any) -> Any:
        assert prefix == "dump_op_pq_state"
        self.calls += 1
        return self.docs[min(self.calls - 1, len(self.docs) - 1)]


def test_restarted_osd_is_dumped_again_despite_the_interval() -> None:
    five = load("ops_load", "osd.0")
    two = {k: v for k, v in five.items() if k.endswith((":0", ":1"))}
    collector = OpQueueCollector(OpQueueSettings(min_interval=3600))
    before = _Session("osd.0", [five], pid=100)
    collector.collect_daemon(before, MetricSink())  # type: ignore[arg-type]
    same_life = _Session("osd.0", [two], pid=100)
    sink = MetricSink()
    collector.collect_daemon(same_life, sink)  # type: ignore[arg-type]
    assert same_life.calls == 0 and sink.families["cephscope_osd_op_shards"].samples[0][2] == 5
    new_life = _Session("osd.0", [two], pid=200)
    sink = MetricSink()
    collector.collect_daemon(new_life, sink)  # type: ignore[arg-type]
    assert new_life.calls == 1 and sink.families["cephscope_osd_op_shards"].samples[0][2] == 2


RELEASE_FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "asok"


@pytest.mark.parametrize(("version", "queued_shards", "busy_shard"), [
    ("18.2.7", {2: 3, 3: 1}, 2),  # Reef under rados bench -t 64
    ("20.2.4", {1: 8}, 1),  # Tentacle under rados bench -t 128
])
def test_release_mclock_dump_with_queued_ops(
    version: str, queued_shards: dict[int, int], busy_shard: int
) -> None:
    """Real dumps taken under load: client ops queued in mClock; per-class request counts add
    up to the queue size."""
    doc = json.loads((RELEASE_FIXTURES / version / "mclock_queued" / "osd.0" /
                      "dump_op_pq_state.json").read_text())
    shards = parse_op_pq_state(doc)
    assert len(shards) == 8 and {s.scheduler for s in shards} == {"mclock"}
    queued = {s.shard: s.queues["scheduler"].items for s in shards if s.queues["scheduler"].items}
    assert queued == queued_shards
    for state in shards:
        assert state.queues["high"].items == 0  # Reef's high_priority_queue
        assert state.mclock_class_items is not None
        assert sum(state.mclock_class_items.values()) == state.queues["scheduler"].items
        assert set(state.mclock_class_items) <= {"client", "background_best_effort"}
    busy = shards[busy_shard].mclock_class_items or {}
    assert busy["client"] == queued_shards[busy_shard]
    sink = MetricSink()
    from cephscope.exporter.collectors.opqueue import emit
    emit(shards, render_labels({"ceph_daemon": "osd.0"}), sink, 0.0, profile="balanced")
    text = render(sink.families.values()).decode()
    assert 'cephscope_osd_op_queue_info{ceph_daemon="osd.0",scheduler="mclock",profile="balanced"} 1' in text
    assert ('cephscope_osd_op_queue_mclock_class_items{ceph_daemon="osd.0",'
            f'shard="{busy_shard}",class="client"}} {queued_shards[busy_shard]}') in text
    assert f'cephscope_osd_op_queue_items{{ceph_daemon="osd.0",shard="{busy_shard}",queue="high"}} 0' in text


@pytest.mark.parametrize("version", ["18.2.7", "20.2.4"])
def test_release_captures_parse_as_mclock_with_profile(version: str) -> None:
    base = RELEASE_FIXTURES / version
    if not (base / "load").exists():
        pytest.fail(f"{base}/load missing: capture it with deploy/capture_fixtures.py")
    for osd_dir in sorted((base / "load").iterdir()):
        shards = parse_op_pq_state(json.loads((osd_dir / "dump_op_pq_state.json").read_text()))
        assert shards and {s.scheduler for s in shards} == {"mclock"}
        assert all(s.mclock_clients is not None and s.mclock_class_items is not None for s in shards)
        profile = json.loads((osd_dir / "config_get.osd_mclock_profile.json").read_text())
        assert profile["osd_mclock_profile"] in {"balanced", "high_client_ops", "high_recovery_ops"}


def test_by_default_one_queue_per_shard_and_no_priority_detail(tmp_path: Path) -> None:
    cluster = start(tmp_path, "ops_load")
    try:
        default = parse_samples(scrape_once(tmp_path / "run", *OPQUEUE))
        detailed = parse_samples(scrape_once(tmp_path / "run", *OPQUEUE,
                                             "--collector.opqueue.strict-queues",
                                             "--collector.opqueue.priorities"))
    finally:
        cluster.stop()
    shards = len(parse_op_pq_state(load("ops_load", "osd.0")))
    for samples, queues, with_priorities in ((default, {"normal"}, False),
                                             (detailed, {"normal", "high"}, True)):
        items = [k for k in samples if k.startswith('cephscope_osd_op_queue_items{ceph_daemon="osd.0"')]
        assert {re.search(r'queue="(\w+)"', k)[1] for k in items} == queues  # type: ignore[index]
        assert len(items) == shards * len(queues)
        assert any(k.startswith("cephscope_osd_op_queue_priorities{") for k in samples) \
            == with_priorities
    # what both show is the same (but timings: the scrape's and the dump's age)
    assert all(detailed[k] == v for k, v in default.items()
               if not k.startswith(("cephscope_scrape_collector_duration",
                                    "cephscope_osd_op_queue_dump_age_seconds")))
