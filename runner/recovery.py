"""Recovery tests (CBT's `recovery_test`): during a step's benchmark, mark OSDs down and out,
wait for recovery, bring them back, wait for backfill — every phase tagged, client figures
per phase, degraded/misplaced objects over time.

Phases: healthy (`pre_time` s) -> degraded (OSDs down+out, `noup` set, until recovery runs)
-> recovering (until no object is degraded) -> backfilling (`noup` unset, OSDs in, until no
object is misplaced and every PG is active+clean) -> recovered (`post_time` s). CBT polls
`ceph health`; this reads `pg stat` once a second, which also gives the object counts and the
recovery rate. Whatever happens, the OSDs are put back in and `noup` unset.

Modes, as CBT runs them:
- `blocking` (CBT's default): the client runs through all phases and the step waits for the
  test to finish.
- `background`: the client waits; while the OSDs are out the recovery pool (a separate pool,
  filled with CBT's `prefill_recovery_*` pool-profile keys) is written, then the OSDs come
  back in and the client runs only while that backfills; no `post_time`.
- `repeat: true`: after the cluster is clean again the down/out/in cycle starts over while
  the benchmark still runs; every phase carries its cycle number.

A stuck PG: Ceph 16.2 can leave a PG `laggy` for good after the OSDs come back (its read
lease is renewed only by a timer that re-arms itself; one renewal dropped at an interval
change and no lease is ever sent again, so every client op on the PG waits; and 16.2 lacks
the fix that re-checks readability on the first lease ack). A PG laggy for longer than
`laggy_grace_seconds` (two lease intervals at the default heartbeat grace) is re-peered
once (`pg repeer`: a new interval renews the lease), recorded in the result; still laggy a
grace later, the test fails naming the PGs and the blocked ops instead of hanging the step.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cephscope.runner.benchmarks.base import LiveSample
from cephscope.runner.cephclient import CephCli, CephError
from cephscope.runner.spec_checker import Checker, dotted

if TYPE_CHECKING:
    from cephscope.runner.phase_metrics import PhaseMetrics

PHASES = ("healthy", "degraded", "recovering", "backfilling", "recovered")
TEST_TYPES = ("blocking", "background")
# osd_heartbeat_grace (20 s) x osd_pool_default_read_lease_ratio (0.8) = a 16 s read lease,
# renewed every 8 s; laggy beyond two leases is not a slow ack any more
LAGGY_GRACE_SECONDS = 32.0
# longest wait for the PG stats to show OSDs just marked down (mgr_stats_period is 5 s by
# default; the dev cluster's 1 s)
STATS_LAG_SECONDS = 12.0


@dataclass(frozen=True)
class RecoverySpec:
    osds: tuple[int, ...]
    pre_time: float = 10.0
    post_time: float = 10.0
    repeat: bool = False
    test_type: str = "blocking"
    timeout_seconds: float = 900.0
    laggy_grace_seconds: float = LAGGY_GRACE_SECONDS

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "osds": list(self.osds)}


@dataclass
class RecoveryTest:
    cli: CephCli
    spec: RecoverySpec
    step_id: str
    metrics: PhaseMetrics | None = None
    log: Callable[[str], None] = print
    poll_seconds: float = 1.0
    # background mode: writes the recovery pool while the OSDs are out
    populate: Callable[[], None] | None = None
    phases: list[dict[str, Any]] = field(default_factory=list)
    counts: list[dict[str, float]] = field(default_factory=list)
    repeered: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    cycles: int = 0
    # set when the client may start (background: the OSDs are back in; blocking: at once)
    start_io: threading.Event = field(default_factory=threading.Event)
    # set by the step when its benchmark has finished (ends `repeat`)
    bench_done: threading.Event = field(default_factory=threading.Event)
    # set when the test failed: the step's benchmark stops instead of waiting out its timeout
    abort: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _laggy_since: float | None = None
    _laggy_repeered: bool = False

    def start(self) -> None:
        if self.spec.test_type != "background":
            self.start_io.set()
        self._thread = threading.Thread(target=self._run, name="recovery-test", daemon=True)
        self._thread.start()

    def wait(self) -> None:
        if self._thread is not None:
            self._thread.join()

    def stop(self) -> None:
        self._stop.set()
        self.wait()

    # ---- the test ------------------------------------------------------------------------------

    def _pg(self) -> dict[str, Any]:
        stat = self.cli.command("pg stat")
        summary = stat.get("pg_summary", stat) if isinstance(stat, dict) else {}
        states = {s["name"]: s["num"] for s in summary.get("num_pg_by_state", [])}
        sample = {"t": time.time(),
                  "degraded_objects": float(summary.get("degraded_objects", 0)),
                  "misplaced_objects": float(summary.get("misplaced_objects", 0)),
                  "recovering_bytes_per_sec": float(summary.get("recovering_bytes_per_sec", 0)),
                  "recovering_objects_per_sec": float(
                      summary.get("recovering_objects_per_sec", 0))}
        self.counts.append(sample)
        self._watch_laggy(states)
        return {"states": states, **sample}

    def _watch_laggy(self, states: Mapping[str, int]) -> None:
        """A PG laggy past the grace: re-peer it once; still laggy a grace later: fail."""
        if not any("laggy" in name for name in states):
            self._laggy_since, self._laggy_repeered = None, False
            return
        now = time.monotonic()
        if self._laggy_since is None:
            self._laggy_since = now
            return
        if now - self._laggy_since < self.spec.laggy_grace_seconds:
            return
        pgs = self._laggy_pgs()
        if self._laggy_repeered:
            raise CephError(
                f"recovery test: {_describe(pgs)} still laggy "
                f"{2 * self.spec.laggy_grace_seconds:.0f}s after it began, after a repeer; "
                f"{self._slow_ops() or 'no slow ops reported'}")
        for pg in pgs:
            self.log(f"recovery test: PG {pg['pgid']} laggy for "
                     f"{now - self._laggy_since:.0f}s (acting {pg['acting']}): repeer")
            self.cli.command("pg repeer", pgid=pg["pgid"])
            self.repeered.append({**pg, "t": time.time(),
                                  "laggy_seconds": now - self._laggy_since,
                                  "slow_ops": self._slow_ops()})
        self._laggy_since, self._laggy_repeered = now, True

    def _laggy_pgs(self) -> list[dict[str, Any]]:
        reply = self.cli.command("pg ls", states=["laggy"])
        stats = reply.get("pg_stats", []) if isinstance(reply, dict) else reply or []
        return [{"pgid": str(p.get("pgid")), "state": str(p.get("state")),
                 "acting": list(p.get("acting", []))} for p in stats]

    def _slow_ops(self) -> str:
        health = self.cli.command("health", detail="detail") or {}
        check = (health.get("checks") or {}).get("SLOW_OPS")
        return str(check.get("summary", {}).get("message", "")) if check else ""

    def _phase(self, name: str) -> None:
        now = time.time()
        if self.phases:
            self.phases[-1]["end"] = now
        self.phases.append({"phase": name, "start": now, "cycle": max(1, self.cycles)})
        if self.metrics is not None:
            self.metrics.set_phase(f"recovery_{name}", self.step_id)
        self.log(f"recovery test: {name}" + (f" (cycle {self.cycles})" if self.cycles > 1
                                             else ""))

    def _until(self, what: str, done: Callable[[dict[str, Any]], bool],
               deadline: float, soft: bool = False) -> None:
        """Poll until `done`; past the deadline raise (soft: just return)."""
        while not self._stop.is_set():
            if done(self._pg()):
                return
            if time.monotonic() > deadline:
                if soft:
                    return
                raise CephError(f"recovery test: {what} not reached in time")
            time.sleep(self.poll_seconds)

    def _sleep(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while not self._stop.is_set() and time.monotonic() < end:
            self._pg()
            time.sleep(min(self.poll_seconds, max(0.0, end - time.monotonic())))

    def _cycle(self, osds: list[str], deadline: float) -> None:
        """One down/out -> recovered -> in -> backfilled cycle."""
        self.cycles += 1
        self.cli.command("osd set", key="noup")
        self.cli.command("osd down", ids=osds)
        self.cli.command("osd out", ids=osds)
        self._phase("degraded")
        # The mgr's PG stats lag the OSD map by a report or two: until they show the OSDs
        # gone, "no degraded object" would be read as "recovered" (bounded: an empty pool
        # never shows anything)
        self._until("the OSDs seen gone", lambda s: set(s["states"]) != {"active+clean"},
                    min(deadline, time.monotonic() + STATS_LAG_SECONDS), soft=True)
        self._until("recovery start", lambda s: s["degraded_objects"] == 0
                    or any("recover" in k for k in s["states"]), deadline)
        self._phase("recovering")
        self._until("no degraded object", lambda s: s["degraded_objects"] == 0
                    and not any("recover" in k or "peering" in k for k in s["states"]),
                    deadline)
        if self.populate is not None and self.cycles == 1:
            self.populate()  # background: data the OSDs coming back in must backfill
        self.cli.command("osd unset", key="noup")
        self.cli.command("osd in", ids=osds)
        self._phase("backfilling")
        self.start_io.set()
        self._until("no misplaced object", lambda s: s["misplaced_objects"] == 0
                    and s["degraded_objects"] == 0
                    and set(s["states"]) == {"active+clean"}, deadline)

    def _run(self) -> None:
        deadline = time.monotonic() + self.spec.timeout_seconds
        osds = [str(o) for o in self.spec.osds]
        try:
            self._phase("healthy")
            self._sleep(self.spec.pre_time)
            self._cycle(osds, deadline)
            while self.spec.repeat and not self.bench_done.is_set() \
                    and not self._stop.is_set():
                self._cycle(osds, deadline)
            self._phase("recovered")
            if self.spec.test_type == "blocking":
                self._sleep(self.spec.post_time)
        except CephError as exc:
            self.error = str(exc)
            self.log(f"recovery test failed: {exc}")
            self.abort.set()
        finally:
            self.start_io.set()  # a background client never waits on a test that has ended
            for problem in self.undo():
                self.log(f"recovery test cleanup: {problem}")
            if self.phases:
                self.phases[-1]["end"] = time.time()
            if self.metrics is not None:
                self.metrics.set_phase(None)

    def undo(self) -> list[str]:
        """OSDs back in, `noup` unset, PGs still laggy re-peered (idempotent; never raises)."""
        problems = []
        for prefix, args in (("osd unset", {"key": "noup"}),
                             ("osd in", {"ids": [str(o) for o in self.spec.osds]})):
            try:
                self.cli.command(prefix, **args)
            except CephError as exc:
                problems.append(f"{prefix}: {exc}")
        try:
            for pg in self._laggy_pgs():
                self.cli.command("pg repeer", pgid=pg["pgid"])
                problems.append(f"PG {pg['pgid']} was laggy ({pg['state']}): re-peered")
        except CephError as exc:
            problems.append(f"pg ls laggy / repeer: {exc}")
        return problems

    # ---- results -------------------------------------------------------------------------------

    def result(self, samples: Sequence[LiveSample]) -> dict[str, Any]:
        """Phases, their durations, client figures per phase, object counts over time."""
        client: dict[str, Any] = {}
        for p in self.phases:
            inside = [s for s in samples if p["start"] <= s.timestamp < p.get("end", 1e18)]
            ops = [s.ops_per_second for s in inside if s.ops_per_second is not None]
            lat = [s.latency_seconds for s in inside if s.latency_seconds is not None]
            client[phase_key(p)] = {
                "samples": len(inside),
                "iops_mean": sum(ops) / len(ops) if ops else None,
                "latency_mean_seconds": sum(lat) / len(lat) if lat else None,
            }
        cycles = []
        for n in range(1, self.cycles + 1):
            by_name = {p["phase"]: p for p in self.phases if p.get("cycle", 1) == n}

            def span(first: str, last: str, by_name: dict[str, Any] = by_name) -> float | None:
                if first in by_name and last in by_name and "end" in by_name[last]:
                    return float(by_name[last]["end"] - by_name[first]["start"])
                return None

            cycles.append({"cycle": n, "recovery_seconds": span("degraded", "recovering"),
                           "backfill_seconds": span("backfilling", "backfilling")})
        rates = [c["recovering_bytes_per_sec"] for c in self.counts
                 if c["recovering_bytes_per_sec"] > 0]
        first = cycles[0] if cycles else {}
        return {
            "test": self.spec.to_dict(),
            "phases": self.phases,
            "recovery_seconds": first.get("recovery_seconds"),
            "backfill_seconds": first.get("backfill_seconds"),
            "cycles": cycles,
            "client": client,
            "counts": self.counts,
            "max_degraded_objects": max((c["degraded_objects"] for c in self.counts), default=0),
            "recovery_bytes_per_second_mean": sum(rates) / len(rates) if rates else None,
            "repeered_pgs": self.repeered,
            "error": self.error,
        }


def _describe(pgs: Sequence[Mapping[str, Any]]) -> str:
    if not pgs:
        return "a PG (no longer listed as laggy)"
    return ", ".join(f"PG {p['pgid']} ({p['state']}, acting {p['acting']})" for p in pgs)


def phase_key(phase: Mapping[str, Any]) -> str:
    """`backfilling` for the first cycle, `backfilling#2` for the second, …"""
    cycle = int(phase.get("cycle", 1))
    return phase["phase"] if cycle <= 1 else f"{phase['phase']}#{cycle}"


def parse_recovery(c: Checker, base: tuple[Any, ...], value: Any,
                   test_type: Any) -> RecoverySpec | None:
    """CBT's `recovery_test` mapping (+ `recov_test_type`) -> RecoverySpec; None (problems
    reported to `c`) when it is wrong."""
    before = len(c.problems)

    def bad(key: str, v: Any, message: str) -> None:
        c.error((*base, key), v, message)

    if not isinstance(value, Mapping):
        c.problem(base, f"{dotted(base)}: must be a mapping (osds, pre_time, post_time, repeat)")
        return None
    for key in value:
        if key not in ("osds", "pre_time", "post_time", "repeat", "recov_test_type"):
            bad(str(key), value[key], "unknown key (osds, pre_time, post_time, repeat, "
                                     "recov_test_type)")
    osds = value.get("osds")
    if not isinstance(osds, list) or not osds or not all(
            isinstance(o, int) and not isinstance(o, bool) and o >= 0 for o in osds):
        bad("osds", osds, "a non-empty list of OSD ids")
    times = {}
    for key in ("pre_time", "post_time"):
        v = value.get(key, 10)
        if isinstance(v, bool) or not isinstance(v, int | float) or v < 0:
            bad(key, v, "seconds, 0 or more")
        times[key] = float(v) if isinstance(v, int | float) else 0.0
    repeat = value.get("repeat", False)
    if not isinstance(repeat, bool):
        bad("repeat", repeat, "true or false")
    test_type = value.get("recov_test_type", test_type or "blocking")
    if test_type not in TEST_TYPES:
        bad("recov_test_type", test_type, f"unknown recovery test type (one of "
                                          f"{', '.join(TEST_TYPES)})")
    if len(c.problems) > before:
        return None
    return RecoverySpec(tuple(osds), times["pre_time"], times["post_time"], bool(repeat),
                        str(test_type))
