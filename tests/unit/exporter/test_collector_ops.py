"""ops collector: in-flight / blocked counts and historic-op phases from real captures."""

from __future__ import annotations

import copy
import json
import random
import re
import shutil
import subprocess
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from cephscope.exporter.collectors import enabled_collectors
from cephscope.exporter.collectors.ops import (
    ALL_PHASES,
    DEFAULT_PHASES,
    FINE_PHASE_BUCKETS,
    PHASE_BUCKETS,
    SEEN_OPS_MIN_CAPACITY,
    DaemonOpHistory,
    classify_duration,
    emit_in_flight,
    flag_point_counts,
    op_phases,
)
from cephscope.exporter.exposition import MetricSink, render
from cephscope.exporter.main import settings_from_args
from cephscope.exporter.scrape import Scraper
from tests.unit.fake_asok import (
    CEPH_VERSION,
    FIXTURES_ROOT,
    FakeCluster,
    capture_dir,
    check_exposition_golden,
    exporter_args,
    only_collectors,
    parse_samples,
)

OPS = only_collectors("ops")
GOLDEN = FIXTURES_ROOT / "golden" / f"{CEPH_VERSION}-ops_load-ops.prom"


def load(scenario: str, osd: str, command: str) -> Any:
    return json.loads((capture_dir(scenario, osd) / f"{command}.json").read_bytes())


def historic(scenario: str = "ops_load", osd: str = "osd.0") -> list[dict[str, Any]]:
    return load(scenario, osd, "dump_historic_ops")["ops"]


def event_times(op: dict[str, Any]) -> dict[str, float]:
    """Independent reading of the event times (strptime, first occurrence)."""
    times: dict[str, float] = {}
    for event in op["type_data"]["events"]:
        stamp = datetime.strptime(event["time"], "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()
        times.setdefault(event["event"], stamp)
    return times


def test_real_historic_op_phases_are_event_time_differences() -> None:
    ops = historic()
    assert ops, "the load capture has historic ops"
    for op in ops:
        t = event_times(op)
        phases = op_phases(op).durations
        assert phases["queue"] == pytest.approx(t["reached_pg"] - t["queued_for_pg"], abs=1e-9)
        assert phases["pg"] == pytest.approx(t["started"] - t["reached_pg"], abs=1e-9)
        assert phases["receive"] == pytest.approx(t["queued_for_pg"] - t["initiated"], abs=1e-9)
        end = "commit_sent" if "commit_sent" in t else "done"
        assert phases["execute"] == pytest.approx(t[end] - t["started"], abs=1e-9)
        assert phases["total"] == op["duration"]
        # The parts of a write add up to the whole (timestamps have µs resolution).
        if "commit_sent" in t:
            parts = sum(phases[p] for p in ("receive", "queue", "pg", "execute", "reply"))
            assert parts == pytest.approx(op["duration"], abs=2e-6)


def test_real_sentinel_event_durations_do_not_leak() -> None:
    # Pacific prints the throttled event's (negative) duration as 2^32 s on every op.
    ops = historic()
    sentinels = [
        e for op in ops for e in op["type_data"]["events"] if e["duration"] >= 4294967295
    ]
    assert sentinels, "the capture shows the sentinel this guards against"
    for op in ops:
        samples = op_phases(op)
        assert not samples.ignored
        assert all(0 <= v < 60 for v in samples.durations.values())


@pytest.mark.parametrize(
    ("duration", "reason"),
    [
        (4294967295.999999, "sentinel"),
        (4294967296, "sentinel"),
        (-0.000001, "negative"),
        (200000.0, "too_large"),
        (float("nan"), "not_finite"),
        (0.0, None),
        (0.0123, None),
    ],
)
def test_classify_duration(duration: float, reason: str | None) -> None:
    assert classify_duration(duration) == reason


def test_sentinel_and_out_of_order_ops_are_counted_as_ignored() -> None:
    op = copy.deepcopy(historic()[0])
    op["duration"] = 4294967295.999999
    events = op["type_data"]["events"]
    names = [e["event"] for e in events]
    # reached_pg stamped before queued_for_pg: a negative queue phase
    events[names.index("reached_pg")]["time"] = "2000-01-01T00:00:00.000000+0000"
    samples = op_phases(op)
    assert ("total", "sentinel") in samples.ignored
    assert ("queue", "negative") in samples.ignored
    assert "total" not in samples.durations and "queue" not in samples.durations
    history = DaemonOpHistory()
    history.add_history([op])
    assert history.histogram.ignored[("total", "sentinel")] == 1
    assert sum(history.histogram.counts["total"]) == 0


@pytest.mark.parametrize(
    "op",
    [
        None,
        "osd_op(...)",
        {},
        {"type_data": []},
        {"type_data": {"events": "x"}},
        {"type_data": {"events": [None, {"event": 5}, {"event": "initiated", "time": "soon"}]}},
        {"duration": "1", "type_data": {"events": []}},
    ],
)
def test_malformed_ops_never_crash(op: Any) -> None:
    samples = op_phases(op)
    assert not samples.durations
    history = DaemonOpHistory()
    assert history.add_history([op]) == 1


def test_each_op_is_counted_once_across_overlapping_dumps() -> None:
    first, later = historic("ops_load"), historic("ops_load_later")
    key = lambda op: (op["initiated_at"], op["description"])  # noqa: E731
    new_in_later = {key(o) for o in later} - {key(o) for o in first}
    history = DaemonOpHistory()
    assert history.add_history(first) == len({key(o) for o in first})
    assert history.add_history(first) == 0  # a repeated scrape of the same history
    assert history.add_history(later) == len(new_in_later)
    assert history.observed_ops == len({key(o) for o in first} | {key(o) for o in later})
    assert sum(history.histogram.counts["total"]) == history.observed_ops


def test_memory_of_seen_ops_is_bounded() -> None:
    template = historic()[0]
    history = DaemonOpHistory()
    for batch in range(300):
        ops = []
        for i in range(20):
            op = copy.deepcopy(template)
            op["description"] = f"osd_op(client.1.0:{batch * 20 + i})"
            ops.append(op)
        history.add_history(ops)
        assert len(history.seen) <= SEEN_OPS_MIN_CAPACITY
    assert history.observed_ops == 300 * 20


def test_in_flight_and_blocked_from_real_load_capture() -> None:
    in_flight = load("ops_load", "osd.1", "dump_ops_in_flight")
    blocked = load("ops_load", "osd.1", "dump_blocked_ops")
    sink = MetricSink()
    emit_in_flight(in_flight, blocked, 'ceph_daemon="osd.1"', sink)
    value = {name: fam.samples[0][2] for name, fam in sink.families.items()}
    assert value["cephscope_osd_ops_in_flight"] == in_flight["num_ops"] == len(in_flight["ops"])
    assert value["cephscope_osd_ops_blocked"] == blocked["num_blocked_ops"] > 0
    # This capture holds an op whose age is the 2^32 s sentinel (stamped "after" now): the
    # oldest age is that of the plausible ones.
    ages = [op["age"] for op in in_flight["ops"]]
    assert any(a >= 4294967295 for a in ages)
    assert value["cephscope_osd_op_oldest_in_flight_age_seconds"] == pytest.approx(
        max(a for a in ages if a < 4294967295), abs=1e-6
    )
    assert value["cephscope_osd_op_complaint_time_seconds"] == blocked["complaint_time"]
    # blocked ops are in-flight ops older than the complaint time
    assert value["cephscope_osd_op_oldest_blocked_age_seconds"] >= blocked["complaint_time"]
    by_flag = flag_point_counts(in_flight["ops"])
    assert sum(by_flag.values()) == len(in_flight["ops"])
    assert by_flag["other"] == 0, "every Pacific flag point is known"


@pytest.mark.parametrize(
    ("in_flight", "blocked", "message"),
    [
        ([], {"ops": []}, "dump_ops_in_flight is list"),
        ({"ops": {}}, {"ops": []}, "ops is dict"),
        ({"ops": []}, "ERROR", "dump_blocked_ops is str"),
    ],
)
def test_bad_in_flight_documents_are_value_errors(in_flight: Any, blocked: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        emit_in_flight(in_flight, blocked, 'ceph_daemon="osd.0"', MetricSink())


def test_mutated_real_history_never_crashes() -> None:
    rng = random.Random(7)
    base = historic()
    garbage: list[Any] = [None, "", "x", -3, 4294967295.999999, [], {}, True]
    history = DaemonOpHistory()
    for _ in range(300):
        ops = copy.deepcopy(base)
        op = rng.choice(ops)
        target = rng.choice([op, op["type_data"], rng.choice(op["type_data"]["events"])])
        target[rng.choice(list(target))] = rng.choice(garbage)
        history.add_history(ops)
    for phase in ALL_PHASES:
        assert all(c >= 0 for c in history.histogram.counts[phase])


# every phase, the fine buckets and the flag points: what the golden shows
EVERY_OPS_SERIES = ("--collector.ops.phases=all", "--collector.ops.flag-points",
                    "--collector.ops.phase-buckets=" + ",".join(map(str, FINE_PHASE_BUCKETS)))


def _scrape_twice(tmp_path: Path, *flags: str) -> tuple[str, str]:
    cluster = FakeCluster(tmp_path / "run")
    for i in range(2):
        cluster.add_osd(i, scenario="ops_load")
    args = exporter_args(tmp_path / "run", *OPS, *flags)
    scraper = Scraper(enabled_collectors(args), settings_from_args(args))
    try:
        first = render(scraper.scrape(time.monotonic() + 5)).decode()
        second = render(scraper.scrape(time.monotonic() + 5)).decode()
    finally:
        scraper.close()
        cluster.stop()
    return first, second


def normalise(text: str) -> str:
    text = re.sub(
        r"^(cephscope_scrape_collector_duration_seconds\{[^}]*\}) .*$", r"\1 0", text, flags=re.M
    )
    return re.sub(r'pythonversion="[^"]*"', 'pythonversion="X"', text)


def le_values(bounds: tuple[float, ...]) -> list[str]:
    return [*(repr(b) if b != int(b) else str(int(b)) for b in bounds), "+Inf"]


def test_phase_histogram_through_the_exporter(tmp_path: Path) -> None:
    first, second = _scrape_twice(tmp_path, *EVERY_OPS_SERIES)
    samples = parse_samples(first)
    assert samples['cephscope_scrape_collector_success{collector="ops"}'] == 1
    for osd in ("osd.0", "osd.1"):
        ops = historic("ops_load", osd)
        label = f'ceph_daemon="{osd}"'
        assert samples[f"cephscope_osd_op_history_ops_total{{{label}}}"] == len(ops)
        for phase in ALL_PHASES:
            base = f'{label},phase="{phase}"'
            buckets = [
                samples[f'cephscope_osd_op_phase_duration_seconds_bucket{{{base},le="{le}"}}']
                for le in le_values(FINE_PHASE_BUCKETS)
            ]
            assert buckets == sorted(buckets), "cumulative buckets"
            count = samples[f"cephscope_osd_op_phase_duration_seconds_count{{{base}}}"]
            assert buckets[-1] == count
        queue_sum = sum(op_phases(op).durations["queue"] for op in ops)
        assert samples[
            f'cephscope_osd_op_phase_duration_seconds_sum{{{label},phase="queue"}}'
        ] == pytest.approx(queue_sum, rel=1e-6)
    # The second scrape sees the same history: nothing is counted twice.
    assert normalise(second) == normalise(first)
    text = normalise(first)
    check_exposition_golden(GOLDEN, text)


def test_golden_passes_promtool() -> None:
    promtool = shutil.which("promtool")
    assert promtool, "promtool (Debian package prometheus) is required: bash deploy/install.sh"
    proc = subprocess.run(
        [promtool, "check", "metrics"], input=GOLDEN.read_bytes(), capture_output=True, timeout=60
    )
    findings = (proc.stdout + proc.stderr).decode().strip()
    assert proc.returncode == 0 and not findings, findings


def test_default_phases_and_buckets_are_a_subset_of_the_full_ones(tmp_path: Path) -> None:
    default = parse_samples(_scrape_twice(tmp_path / "default")[0])
    full = parse_samples(_scrape_twice(tmp_path / "full", *EVERY_OPS_SERIES)[0])
    phases = {m[1] for k in default if (m := re.search(r'phase="(\w+)"', k))}
    assert phases == set(DEFAULT_PHASES) == {"queue", "total"}
    assert not any(k.startswith("cephscope_osd_ops_in_flight_by_flag_point") for k in default)
    for phase in DEFAULT_PHASES:
        base = f'cephscope_osd_op_phase_duration_seconds_bucket{{ceph_daemon="osd.0",phase="{phase}"'
        les = [k[len(base) + 5:-2] for k in default if k.startswith(base)]
        assert les == le_values(PHASE_BUCKETS)
    # every series the default shows, the full set shows with the same value
    differ = {k: (v, full.get(k)) for k, v in default.items() if full.get(k) != v
              and not k.startswith("cephscope_scrape_collector_duration")}
    assert not differ, differ


@pytest.mark.parametrize(("flag", "message"), [
    ("--collector.ops.phases=queue,waiting", "expected all or a comma-separated list"),
    ("--collector.ops.phases=", "expected all or a comma-separated list"),
    ("--collector.ops.phase-buckets=0.1,0.01", "increasing positive seconds"),
    ("--collector.ops.phase-buckets=0,1", "increasing positive seconds"),
    ("--collector.ops.phase-buckets=1,nan", "increasing positive seconds"),
    ("--collector.ops.phase-buckets=fast", "increasing positive seconds"),
])
def test_bad_phase_flags_name_the_flag(flag: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as err:
        enabled_collectors(exporter_args("/nonexistent", flag))
    assert flag.split("=")[0] in str(err.value)
