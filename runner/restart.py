"""Restarting OSDs: the strategies (a function the cluster provides, systemd, cephadm, an argv
template) and the restart itself (parallel or rolling, then up again with a newer epoch, admin
socket answering, every PG active+clean), with an intent journal: the OSDs a restart is under
way for are recorded before it starts and cleared once they serve again, so a runner killed in
between knows on `--resume` which OSDs may have been left stopped."""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Protocol

from cephscope.exporter.asok import AsokClient, AsokError
from cephscope.monclient import PgWaitTimeout, wait_pgs_active_clean
from cephscope.runner.cephclient import CephCli, CephError, cluster_lost
from cephscope.runner.crashpoints import Checkpoint, no_checkpoint

# One parallel restart of a host's OSDs until every PG is active+clean, as the plans and the
# search's budget count it: 5-9 s measured on the dev cluster (3 OSDs, 2 cores).
TYPICAL_RESTART_SECONDS = 9.0


# Called by a restart method once the OSDs it restarts are all stopped, none started yet.
StoppedHook = Callable[[], None]


def nothing_stopped() -> None:
    """The default stopped hook: nothing to do."""


class RestartMethod(Protocol):
    name: str

    def restart(self, osd_ids: Sequence[int], timeout_seconds: float,
                on_stopped: StoppedHook = nothing_stopped) -> None:
        """Restart these OSDs (all at once); return when the restart has been issued/done.
        A method that stops and starts them as two moves calls `on_stopped` in between; one
        that cannot tell (a single command does both) never calls it. A restart of an OSD
        that is not running must start it."""


class RestartJournal(Protocol):
    """Where the OSDs a restart is under way for are recorded (the run dir's state)."""

    def begin(self, osd_ids: Sequence[int]) -> None:
        """Record these OSDs as being restarted (before the restart method is called)."""

    def end(self, osd_ids: Sequence[int]) -> None:
        """These OSDs serve again: drop them from the record."""

    def pending(self) -> list[int]:
        """OSDs recorded as being restarted (a killed runner's unfinished restart)."""


class NoRestartJournal:
    """The default: nothing recorded (a restart outside a run dir)."""

    def begin(self, osd_ids: Sequence[int]) -> None:
        pass

    def end(self, osd_ids: Sequence[int]) -> None:
        pass

    def pending(self) -> list[int]:
        return []


class StateRestartJournal:
    """A journal kept in a list of OSD ids that `read` returns and `write` stores (the run
    dir's `state.json`). Ids are added and removed, so a record of an earlier unfinished
    restart survives a rolling one that covers it OSD by OSD."""

    def __init__(self, read: Callable[[], Sequence[int]],
                 write: Callable[[list[int]], None]) -> None:
        self.read = read
        self.write = write

    def pending(self) -> list[int]:
        return sorted({int(i) for i in self.read()})

    def begin(self, osd_ids: Sequence[int]) -> None:
        self.write(sorted(set(self.pending()) | {int(i) for i in osd_ids}))

    def end(self, osd_ids: Sequence[int]) -> None:
        done = {int(i) for i in osd_ids}
        self.write([i for i in self.pending() if i not in done])


class FunctionRestart:
    """A restart the cluster's owner provides as a function (the dev cluster restarts its own
    daemons): called with the OSD ids, the timeout and the stopped hook; it raises on
    failure."""

    def __init__(self, name: str,
                 restart_osds: Callable[[list[int], float, StoppedHook], object],
                 retries: int = 1, retry_pause_seconds: float = 3.0) -> None:
        self.name = name
        self.restart_osds = restart_osds
        self.retries = retries
        self.retry_pause_seconds = retry_pause_seconds

    def restart(self, osd_ids: Sequence[int], timeout_seconds: float,
                on_stopped: StoppedHook = nothing_stopped) -> None:
        # One retry by default: seen on the 2-core machine, a start racing the pid-file lock of
        # the previous process ("failed to lock pidfile"); a second restart a moment later works.
        for attempt in range(self.retries + 1):
            try:
                self.restart_osds(list(osd_ids), timeout_seconds, on_stopped)
                return
            except Exception as exc:  # the owner's own error types: one clear message
                if attempt == self.retries:
                    raise CephError(f"{self.name} could not restart OSDs {list(osd_ids)}: "
                                    f"{exc}") from exc
                time.sleep(self.retry_pause_seconds)


class ArgvRestart:
    """Restart by running an argv template per OSD, `{id}` substituted in each element. One
    command stops and starts the OSD, so there is no moment to call the stopped hook at; the
    command must start an OSD that is not running (`systemctl restart` and `ceph orch daemon
    restart` do)."""

    def __init__(self, name: str, template: Sequence[str]) -> None:
        self.name = name
        self.template = list(template)

    def argv_for(self, osd_id: int) -> list[str]:
        return [a.replace("{id}", str(osd_id)) for a in self.template]

    def restart(self, osd_ids: Sequence[int], timeout_seconds: float,
                on_stopped: StoppedHook = nothing_stopped) -> None:
        def one(osd_id: int) -> str | None:
            argv = self.argv_for(osd_id)
            try:
                proc = subprocess.run(argv, capture_output=True, text=True, check=False,
                                      timeout=timeout_seconds)
            except subprocess.TimeoutExpired:
                return f"osd.{osd_id}: {' '.join(argv)} timed out after {timeout_seconds:.0f}s"
            except OSError as exc:
                return f"osd.{osd_id}: cannot run {argv[0]}: {exc.strerror}"
            if proc.returncode != 0:
                tail = " | ".join(proc.stderr.strip().splitlines()[-2:])
                return f"osd.{osd_id}: {' '.join(argv)} failed ({proc.returncode}): {tail}"
            return None

        with ThreadPoolExecutor(max_workers=max(1, len(osd_ids))) as pool:
            errors = [e for e in pool.map(one, osd_ids) if e]
        if errors:
            raise CephError(f"{self.name} restart failed: " + "; ".join(errors))


# cephadm's names for an OSD's container and its systemd unit; the fsid comes from the spec
# (`restart.fsid`), never from cluster metadata.
FSID_METHODS = ("podman", "cephadm-systemd")


def checked_fsid(fsid: str | None, method: str) -> str:
    """A cluster fsid in canonical form (it becomes part of a container or unit name)."""
    if not fsid:
        raise CephError(f"restart method {method!r} needs restart.fsid (the cluster's fsid)")
    try:
        canonical = str(uuid.UUID(fsid))
    except ValueError:
        raise CephError(f"restart.fsid {fsid!r} is not a UUID") from None
    if canonical != fsid.lower():
        raise CephError(f"restart.fsid {fsid!r} is not a UUID in its usual form")
    return canonical


def make_restart_method(method: str, cli: CephCli, provided: RestartMethod | None = None,
                        command: Sequence[str] = (), fsid: str | None = None) -> RestartMethod:
    """`devcluster` is the restart the cluster handle provides (`provided`). `podman` and
    `cephadm-systemd` restart a cephadm-deployed OSD without `ceph orch`: its container
    `ceph-<fsid>-osd-N`, or its unit `ceph-<fsid>@osd.N`."""
    if method == "podman":
        return ArgvRestart("podman", ["podman", "restart", "--time", "10",
                                      f"ceph-{checked_fsid(fsid, method)}-osd-{{id}}"])
    if method == "cephadm-systemd":
        return ArgvRestart("cephadm-systemd", ["systemctl", "restart",
                                               f"ceph-{checked_fsid(fsid, method)}@osd.{{id}}"])
    if method == "devcluster":
        if provided is None:
            raise CephError("restart method 'devcluster' needs --devcluster STATE_DIR")
        return provided
    if method == "systemd":
        return ArgvRestart("systemd", ["systemctl", "restart", "ceph-osd@{id}"])
    if method == "cephadm":
        return ArgvRestart("cephadm", cli.argv("orch", "daemon", "restart", "osd.{id}"))
    if method == "command":
        if not command:
            raise CephError("restart method 'command' needs restart.command in the spec")
        return ArgvRestart("command", command)
    raise CephError(f"unknown restart method {method!r}")


class OsdRestarter:
    """Restarts OSDs with a method and waits until they serve again (up with a newer epoch,
    admin socket answering, every PG active+clean). The journal records each batch's OSDs
    from before the method is called until they serve again."""

    def __init__(self, cli: CephCli, method: RestartMethod | None,
                 osd_asok: Callable[[int], Path | None], *, rolling: bool = False,
                 timeout_seconds: float = 600.0, poll_seconds: float = 0.5,
                 checkpoint: Checkpoint = no_checkpoint,
                 journal: RestartJournal | None = None) -> None:
        self.cli = cli
        self.method = method
        self.checkpoint = checkpoint
        self.journal: RestartJournal = journal or NoRestartJournal()
        self.osd_asok = osd_asok
        self.rolling = rolling
        self.timeout_seconds = timeout_seconds
        self.poll_seconds = poll_seconds

    def restart_osds(self, osd_ids: Sequence[int]) -> tuple[float, float]:
        """Restart (parallel, or one by one when rolling); wait for up + active+clean.
        Returns (restart seconds, wait seconds)."""
        if self.method is None:
            raise CephError("an option needs an OSD restart but no restart method is configured "
                            "(spec restart.method, or --devcluster)")
        restart_total = wait_total = 0.0
        batches = [[i] for i in osd_ids] if self.rolling else [list(osd_ids)]
        for batch in batches:
            before = self.up_from(batch)
            self.journal.begin(batch)
            t0 = time.monotonic()
            self.method.restart(batch, self.timeout_seconds,
                                on_stopped=lambda: self.checkpoint("osd_stopped"))
            t1 = time.monotonic()
            self.checkpoint("osd_restart")
            up_since = self.wait_osds_restarted(batch, before)
            self.wait_pgs_active_clean(up_since)
            self.journal.end(batch)
            restart_total += t1 - t0
            wait_total += time.monotonic() - t1
        return restart_total, wait_total

    def up_from(self, osd_ids: Iterable[int]) -> dict[int, int]:
        dump = self.cli.command("osd dump")
        wanted = set(osd_ids)
        return {o["osd"]: int(o.get("up_from", 0)) for o in dump.get("osds", [])
                if o["osd"] in wanted}

    def wait_osds_restarted(self, osd_ids: Sequence[int],
                            before: Mapping[int, int]) -> dict[int, int]:
        """Up again with a newer up_from epoch than before the restart (not the stale 'up').
        Returns osd -> the epoch it came up in."""
        deadline = time.monotonic() + self.timeout_seconds
        while True:
            try:
                dump = self.cli.command("osd dump", timeout=20)
                state = {o["osd"]: o for o in dump.get("osds", [])}
                pending = [i for i in osd_ids
                           if not (state.get(i, {}).get("up") == 1
                                   and int(state[i].get("up_from", 0)) > before.get(i, -1))]
            except CephError as exc:
                if cluster_lost(exc):  # no mon answered: waiting on cannot help
                    raise
                pending = list(osd_ids)
            # up, and their admin sockets answer (they are needed for verification)
            if not pending and all(self._asok_ready(i) for i in osd_ids):
                return {i: int(state[i]["up_from"]) for i in osd_ids}
            if time.monotonic() > deadline:
                raise CephError(f"OSDs {pending or list(osd_ids)} not back up after "
                                f"{self.timeout_seconds:.0f}s")
            time.sleep(self.poll_seconds)

    def _asok_ready(self, osd_id: int) -> bool:
        path = self.osd_asok(osd_id)
        if path is None or not Path(path).exists():
            return True  # verified through `ceph tell` instead
        try:
            AsokClient(path, timeout=2.0).command("version")
            return True
        except AsokError:
            return False

    def wait_pgs_active_clean(self, fresh_since: Mapping[int, int] | None = None) -> None:
        """All PGs active+clean (see `cephscope.monclient.pgs_not_clean` for `fresh_since`)."""
        try:
            wait_pgs_active_clean(
                lambda: self.cli.command("pg dump", dumpcontents=["pgs"], timeout=20),
                self.timeout_seconds, fresh_since, self.poll_seconds, transient=(CephError,))
        except PgWaitTimeout as exc:
            raise CephError(str(exc)) from exc
