"""Recovery tests (CBT's `recovery_test`): during a step's benchmark, mark OSDs down and out,
wait for recovery, bring them back, wait for backfill — every phase tagged, client figures
per phase, degraded/misplaced objects over time.

Phases: healthy (`pre_time` s) -> degraded (OSDs down+out, `noup` set, until recovery runs)
-> recovering (until no object is degraded) -> backfilling (`noup` unset, OSDs in, until no
object is misplaced and every PG is active+clean) -> recovered (`post_time` s). CBT polls
`ceph health`; this reads `pg stat` once a second, which also gives the object counts and the
recovery rate. Mode `blocking` (CBT's default): the client runs through all phases and the step
waits for the test to finish. Whatever happens, the OSDs are put back in and `noup` unset.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cephscope.runner.benchmarks.base import LiveSample
from cephscope.runner.cephclient import CephCli, CephError

if TYPE_CHECKING:
    from cephscope.runner.phase_metrics import PhaseMetrics

PHASES = ("healthy", "degraded", "recovering", "backfilling", "recovered")
TEST_TYPES = ("blocking", "background")


@dataclass(frozen=True)
class RecoverySpec:
    osds: tuple[int, ...]
    pre_time: float = 10.0
    post_time: float = 10.0
    repeat: bool = False
    test_type: str = "blocking"
    timeout_seconds: float = 900.0

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
    phases: list[dict[str, Any]] = field(default_factory=list)
    counts: list[dict[str, float]] = field(default_factory=list)
    error: str | None = None
    _thread: threading.Thread | None = None
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> None:
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
        return {"states": states, **sample}

    def _phase(self, name: str) -> None:
        now = time.time()
        if self.phases:
            self.phases[-1]["end"] = now
        self.phases.append({"phase": name, "start": now})
        if self.metrics is not None:
            self.metrics.set_phase(f"recovery_{name}", self.step_id)
        self.log(f"recovery test: {name}")

    def _until(self, what: str, done: Callable[[dict[str, Any]], bool],
               deadline: float) -> None:
        while not self._stop.is_set():
            if done(self._pg()):
                return
            if time.monotonic() > deadline:
                raise CephError(f"recovery test: {what} not reached in time")
            time.sleep(self.poll_seconds)

    def _sleep(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while not self._stop.is_set() and time.monotonic() < end:
            self._pg()
            time.sleep(min(self.poll_seconds, max(0.0, end - time.monotonic())))

    def _run(self) -> None:
        deadline = time.monotonic() + self.spec.timeout_seconds
        osds = [str(o) for o in self.spec.osds]
        try:
            self._phase("healthy")
            self._sleep(self.spec.pre_time)
            self.cli.command("osd set", key="noup")
            self.cli.command("osd down", ids=osds)
            self.cli.command("osd out", ids=osds)
            self._phase("degraded")
            self._until("recovery start", lambda s: s["degraded_objects"] == 0
                        or any("recover" in k for k in s["states"]), deadline)
            self._phase("recovering")
            self._until("no degraded object", lambda s: s["degraded_objects"] == 0
                        and not any("recover" in k or "peering" in k for k in s["states"]),
                        deadline)
            self.cli.command("osd unset", key="noup")
            self.cli.command("osd in", ids=osds)
            self._phase("backfilling")
            self._until("no misplaced object", lambda s: s["misplaced_objects"] == 0
                        and s["degraded_objects"] == 0
                        and set(s["states"]) == {"active+clean"}, deadline)
            self._phase("recovered")
            self._sleep(self.spec.post_time)
        except CephError as exc:
            self.error = str(exc)
            self.log(f"recovery test failed: {exc}")
        finally:
            self.undo()
            if self.phases:
                self.phases[-1]["end"] = time.time()
            if self.metrics is not None:
                self.metrics.set_phase(None)

    def undo(self) -> list[str]:
        """OSDs back in, `noup` unset (idempotent; never raises)."""
        problems = []
        for prefix, args in (("osd unset", {"key": "noup"}),
                             ("osd in", {"ids": [str(o) for o in self.spec.osds]})):
            try:
                self.cli.command(prefix, **args)
            except CephError as exc:
                problems.append(f"{prefix}: {exc}")
        return problems

    # ---- results -------------------------------------------------------------------------------

    def result(self, samples: Sequence[LiveSample]) -> dict[str, Any]:
        """Phases, their durations, client figures per phase, object counts over time."""
        client: dict[str, Any] = {}
        for p in self.phases:
            inside = [s for s in samples if p["start"] <= s.timestamp < p.get("end", 1e18)]
            ops = [s.ops_per_second for s in inside if s.ops_per_second is not None]
            lat = [s.latency_seconds for s in inside if s.latency_seconds is not None]
            client[p["phase"]] = {
                "samples": len(inside),
                "iops_mean": sum(ops) / len(ops) if ops else None,
                "latency_mean_seconds": sum(lat) / len(lat) if lat else None,
            }
        by_name = {p["phase"]: p for p in self.phases}

        def span(first: str, last: str) -> float | None:
            if first in by_name and last in by_name and "end" in by_name[last]:
                return by_name[last]["end"] - by_name[first]["start"]
            return None

        rates = [c["recovering_bytes_per_sec"] for c in self.counts
                 if c["recovering_bytes_per_sec"] > 0]
        return {
            "test": self.spec.to_dict(),
            "phases": self.phases,
            "recovery_seconds": span("degraded", "recovering"),
            "backfill_seconds": span("backfilling", "backfilling"),
            "client": client,
            "counts": self.counts,
            "max_degraded_objects": max((c["degraded_objects"] for c in self.counts), default=0),
            "recovery_bytes_per_second_mean": sum(rates) / len(rates) if rates else None,
            "error": self.error,
        }


def parse_recovery(value: Any, test_type: Any, where: Callable[[tuple[Any, ...]], str],
                   base: tuple[Any, ...]) -> tuple[RecoverySpec | None, list[str]]:
    """CBT's `recovery_test` mapping (+ `recov_test_type`) -> RecoverySpec, or problems."""
    problems: list[str] = []

    def bad(key: str, v: Any, message: str) -> None:
        problems.append(f"{where((*base, key))}: {'.'.join(map(str, (*base, key)))}: {v!r}: "
                        f"{message}")

    if not isinstance(value, Mapping):
        return None, [f"{where(base)}: {'.'.join(map(str, base))}: must be a mapping "
                      f"(osds, pre_time, post_time, repeat)"]
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
    elif repeat:
        bad("repeat", repeat, "repeating the cycle is not supported; run the step again "
                              "(iterations) instead")
    test_type = value.get("recov_test_type", test_type or "blocking")
    if test_type not in TEST_TYPES:
        bad("recov_test_type", test_type, f"unknown recovery test type (one of "
                                          f"{', '.join(TEST_TYPES)})")
    elif test_type == "background":
        bad("recov_test_type", test_type, "background mode (client I/O only during backfill, "
                                          "on another pool) is not supported; use blocking")
    if problems:
        return None, problems
    return RecoverySpec(tuple(osds), times["pre_time"], times["post_time"], False,
                        str(test_type)), []
