"""Run hygiene, as CBT and the studies practise it; each part on by default, each a phase
tagged in Prometheus (`cephscope_run_phase`) and recorded in the step's timestamps:

- idle baseline: a quiet window at run start (CBT's `idle_monitor_sleep`) whose system
  figures the report can set beside each step's;
- scrub guard: `noscrub`/`nodeep-scrub` for the run (only the flags the run set are unset
  after), and a step starts only when no PG is scrubbing;
- health gate: before each step no PG degraded/peering/recovering/…, and no health check
  outside the allowed ones, within a timeout, else the step fails naming the check;
- cache drop: `sync` and `drop_caches` on every OSD host and the client before the
  measurement (global to each machine, as CBT does it);
- quiet gap: no client I/O from the runner for a while right before and right after each
  measurement. The OSD latency histogram's increase over a step is read from the last scrape
  before its start to the first after its end, so ops up to one scrape interval either side
  (the previous step's cleanup, this one's prefill or cleanup) would count as the step's and
  skew its OSD-side percentiles: one interval of quiet keeps them the step's own.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from cephscope.runner.cephclient import CephCli, CephError
from cephscope.runner.hostexec import HostExec, HostExecError, on_each_host
from cephscope.runner.knobs.host import CLIENT_HOST, HostFiles, OsdDevices
from cephscope.runner.phase_metrics import PhaseMetrics

SCRUB_FLAGS = ("noscrub", "nodeep-scrub")
# PG states a measurement must not start in
UNSETTLED = ("degraded", "peering", "recovering", "recovery_wait", "backfill", "undersized",
             "down", "incomplete", "stale", "unknown", "remapped", "activating", "creating",
             "laggy")  # laggy: no read lease, client ops on the PG wait
# health checks that do not disturb a measurement: the scrub flags this run sets
ALWAYS_ALLOWED = frozenset({"OSDMAP_FLAGS"})
# The idle window when neither the flag nor the spec says (CBT's own default is 60 s).
DEFAULT_IDLE_BASELINE_SECONDS = 30.0
# the quiet gap beyond one scrape interval: a scrape reads the counters a little after its
# timestamp
QUIET_GAP_MARGIN_SECONDS = 1.0


def quiet_gap_for(scrape_interval_seconds: float | None) -> float:
    """The default quiet gap: one scrape interval and the margin; 0 when it is unknown."""
    if not scrape_interval_seconds or scrape_interval_seconds <= 0:
        return 0.0
    return scrape_interval_seconds + QUIET_GAP_MARGIN_SECONDS


class HygieneError(CephError):
    """A step cannot start: the cluster is not settled (names the check)."""


@dataclass
class HygieneOptions:
    drop_caches: bool = True
    scrub_guard: bool = True
    health_gate: bool = True
    # None: the spec's `idle_monitor_sleep` if it has one, else DEFAULT_IDLE_BASELINE_SECONDS
    idle_baseline_seconds: float | None = None
    health_timeout_seconds: float = 120.0
    health_allow: tuple[str, ...] = ()
    poll_seconds: float = 1.0
    # None: `quiet_gap_for` the scrape interval of --prometheus-url's Prometheus, else 0
    quiet_gap_seconds: float | None = None


@dataclass
class Hygiene:
    cli: CephCli
    host_for: Callable[[str], HostExec]
    devices: OsdDevices
    options: HygieneOptions
    metrics: PhaseMetrics | None = None
    log: Callable[[str], None] = print
    flags_set: list[str] = field(default_factory=list)
    client_hosts: list[str] = field(default_factory=lambda: [CLIENT_HOST])

    @contextlib.contextmanager
    def phase(self, name: str, timings: dict[str, Any], step_id: str = "") -> Iterator[None]:
        start = time.time()
        if self.metrics is not None:
            self.metrics.set_phase(name, step_id)
        try:
            yield
        finally:
            if self.metrics is not None:
                self.metrics.set_phase(None)
            timings[name] = {"start": start, "end": time.time()}

    # ---- run ---------------------------------------------------------------------------------

    def start_run(self, already_set: list[str]) -> list[str]:
        """Set the scrub flags not set yet; returns the flags this run set (to unset later)."""
        self.flags_set = list(already_set)
        if not self.options.scrub_guard:
            return self.flags_set
        dump = self.cli.command("osd dump")
        present = set(str(dump.get("flags", "")).split(","))
        for flag in SCRUB_FLAGS:
            if flag not in present and flag not in self.flags_set:
                self.cli.command("osd set", key=flag)
                self.flags_set.append(flag)
        return self.flags_set

    def idle_baseline(self, timings: dict[str, Any], spec_seconds: float | None = None) -> None:
        """The quiet window: the flag's length, else the spec's `idle_monitor_sleep`, else
        the default."""
        seconds = next(s for s in (self.options.idle_baseline_seconds, spec_seconds,
                                   DEFAULT_IDLE_BASELINE_SECONDS) if s is not None)
        if seconds <= 0:
            return
        self.log(f"idle baseline: {seconds:g}s with no client I/O")
        with self.phase("idle_baseline", timings):
            time.sleep(seconds)

    def finish_run(self) -> list[str]:
        problems = []
        for flag in self.flags_set:
            try:
                self.cli.command("osd unset", key=flag)
            except CephError as exc:
                problems.append(f"unset {flag}: {exc}")
        self.flags_set = []
        return problems

    # ---- step --------------------------------------------------------------------------------

    def before_step(self, step_id: str) -> dict[str, Any]:
        timings: dict[str, Any] = {}
        if self.options.scrub_guard:
            with self.phase("scrub_wait", timings, step_id):
                self._wait("no PG scrubbing", lambda: self._pgs_in(("scrubbing",)))
        if self.options.health_gate:
            with self.phase("health_gate", timings, step_id):
                self._wait("PGs settled", lambda: self._pgs_in(UNSETTLED))
                self._wait("no unexpected health check", self._unexpected_checks)
        if self.options.drop_caches:
            with self.phase("drop_caches", timings, step_id):
                self.drop_caches()
        self._quiet_gap("quiet_before", timings, step_id)
        return timings

    def after_step(self, step_id: str) -> dict[str, Any]:
        """Between the measurement's end and the benchmark's cleanup."""
        timings: dict[str, Any] = {}
        self._quiet_gap("quiet_after", timings, step_id)
        return timings

    def _quiet_gap(self, name: str, timings: dict[str, Any], step_id: str) -> None:
        seconds = self.options.quiet_gap_seconds or 0.0
        if seconds > 0:
            with self.phase(name, timings, step_id):
                time.sleep(seconds)

    def _pgs_in(self, states: tuple[str, ...]) -> list[str]:
        stat = self.cli.command("pg stat")
        summary = stat.get("pg_summary", stat) if isinstance(stat, dict) else {}
        return [f"{s['num']} {s['name']}" for s in summary.get("num_pg_by_state", [])
                if any(word in s["name"] for word in states)]

    def _unexpected_checks(self) -> list[str]:
        health = self.cli.command("health", detail="detail") or {}
        allowed = ALWAYS_ALLOWED | set(self.options.health_allow)
        # A muted check (`ceph health mute`) is one the operator has said to ignore.
        return [f"{name}: {check.get('summary', {}).get('message', '')}"
                for name, check in (health.get("checks") or {}).items()
                if name not in allowed and not check.get("muted")]

    def _wait(self, what: str, pending: Callable[[], list[str]]) -> None:
        deadline = time.monotonic() + self.options.health_timeout_seconds
        while True:
            left = pending()
            if not left:
                return
            if time.monotonic() > deadline:
                raise HygieneError(f"health gate: {what} not reached after "
                                   f"{self.options.health_timeout_seconds:.0f}s: "
                                   f"{'; '.join(left[:5])}")
            time.sleep(self.options.poll_seconds)

    def drop_caches(self) -> None:
        files = HostFiles(self.host_for)

        def drop(name: str) -> None:
            host = self.host_for(name)
            try:
                host.run(["sync"], timeout=120)
                host.run(["tee", "/proc/sys/vm/drop_caches"], input=b"3", timeout=60)
            except HostExecError as exc:
                raise HygieneError(f"cache drop on {name}: {exc}") from exc

        work: dict[str, Callable[[], None]] = {}
        seen: set[str] = set()
        for name in [*sorted(self.devices.by_host()), *self.client_hosts]:
            if files.identity(name) not in seen:
                seen.add(files.identity(name))
                work[name] = lambda name=name: drop(name)
        on_each_host(work)
