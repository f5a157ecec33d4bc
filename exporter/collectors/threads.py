"""Collector ``threads``: CPU seconds per OSD thread group, RSS and thread count, from /proc.

Shard and thread tuning (``osd_op_num_shards`` x ``osd_op_num_threads_per_shard``) is about
the OSD's own threads: ``tp_osd_tp`` (op workers), ``msgr-worker-N`` (messenger),
``bstore_kv_sync`` / ``bstore_aio`` (BlueStore), ``rocksdb:low0`` ... (compaction). The
kernel names each thread (``/proc/<pid>/task/<tid>/stat``, comm field, at most 15
characters); trailing indices are stripped (``msgr-worker-0`` → ``msgr-worker``,
``rocksdb:low1`` → ``rocksdb:low``) so the ``thread_group`` label stays bounded, and at most
``MAX_THREAD_GROUPS`` groups are kept per OSD (the rest go to ``other``). By default only the
groups shard/thread tuning moves are kept by name (``--collector.threads.groups``, a regex;
``.*`` keeps every group): the rest of the OSD's ~27 groups are summed as ``other``, so a sum
over groups is still the OSD's thread CPU (docs/metrics.md, *Series per OSD*).

The OSD's pid comes from the admin socket itself (SO_PEERCRED of the connection, see
:meth:`DaemonSession.pid`); it is checked to be a ``ceph-osd`` under ``--collector.threads.
proc-root``. When the exporter cannot see the OSD's pid (another pid namespace) it falls back
to the one ``ceph-osd`` process under the proc root whose command line has ``--id N`` /
``-i N`` and whose effective uid owns the admin socket (any local user can start a process
whose argv looks like an OSD's; only the daemon's own user can own its socket); several
matches (several clusters on one host) are an error, never a guess.

``cephscope_osd_thread_cpu_seconds_total`` is a counter: threads come and go, so the CPU
time of threads that exited since the last scrape is kept per group (as last seen), and
a group's value never goes down while the OSD process lives. A restarted OSD (new pid or
start time) starts from zero, which ``rate()`` handles as a counter reset.

Reading /proc costs one ``stat`` per thread (~70 per OSD, 4000+ on a 60-OSD host), so the
collector reads an OSD at most every ``--collector.threads.min-interval`` seconds (default
5, like ``--collector.opqueue.min-interval``) and serves the series of the last read in
between: they are counters and gauges of a process, so a scrape between two reads sees the
values of the last read, never wrong ones. A new pid behind the socket is read at once.
"""

from __future__ import annotations

import os
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cephscope.exporter.collector import DaemonCollector, DaemonSession
from cephscope.exporter.exposition import MetricSink, escape_label_value
from cephscope.exporter.settings import HostSettings, option

# A scrape arriving this much before min-interval has passed still reads: scrapes every
# min-interval seconds, jittered, must not read only every other time.
INTERVAL_SLACK_SECONDS = 0.5


# The groups shard/thread tuning moves (op workers, messenger, BlueStore's kv commit path
# and aio) by name; the ~20 others of an OSD (timers, admin socket, finishers, rocksdb, ...)
# together as `other`.
DEFAULT_GROUPS = "tp_osd_tp|msgr-worker|bstore_kv_sync|bstore_kv_final|bstore_aio"


@dataclass(frozen=True)
class ThreadsSettings:
    min_interval: float = option(
        5.0, "read each OSD's /proc (one stat per thread) at most once in this many seconds; "
        "scrapes in between serve the last values", metavar="SECONDS")
    groups: str = option(
        DEFAULT_GROUPS, "thread groups exported by name, a regex matching the whole group "
        "name; the other threads are summed as thread_group=\"other\" ('.*': every group)",
        metavar="REGEX")

MAX_THREAD_GROUPS = 64
OTHER_GROUP = "other"
OSD_COMM = "ceph-osd"
_TRAILING_INDEX = re.compile(r"[-_:.]?\d+$")


def thread_group(comm: str) -> str:
    """Bounded label for a thread name: trailing digits (and one separator) removed."""
    group = _TRAILING_INDEX.sub("", comm.strip())
    return group or comm.strip() or "unnamed"


@dataclass(frozen=True)
class StatFields:
    comm: str
    utime: int  # clock ticks
    stime: int
    starttime: int


def parse_stat(text: str) -> StatFields:
    """Fields of a /proc/<pid>/stat (or task/<tid>/stat) line (proc(5))."""
    # comm may contain spaces and parentheses: it ends at the *last* ")".
    open_paren, close_paren = text.find("("), text.rfind(")")
    if open_paren < 0 or close_paren < open_paren:
        raise ValueError(f"stat line without (comm): {text[:60]!r}")
    rest = text[close_paren + 1 :].split()
    # rest[0] is field 3 (state): utime = field 14, stime = 15, starttime = 22.
    if len(rest) < 20:
        raise ValueError(f"stat line has {len(rest) + 2} fields, expected at least 22")
    try:
        return StatFields(
            text[open_paren + 1 : close_paren], int(rest[11]), int(rest[12]), int(rest[19])
        )
    except ValueError:
        raise ValueError(f"stat line has non-numeric times: {text[:80]!r}") from None


@dataclass
class ProcessSnapshot:
    pid: int
    starttime: int
    cpu_ticks: int  # utime + stime of the whole process (exited threads included)
    rss_bytes: int
    # tid -> (comm, utime + stime ticks)
    threads: dict[int, tuple[str, int]] = field(default_factory=dict)


def _read(path: str) -> str:
    # Plain os calls: pathlib costs ~10x more, and an OSD has ~60 threads to read per scrape.
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.read(fd, 65536).decode(errors="replace")
    finally:
        os.close(fd)


def read_process(proc_root: str | os.PathLike[str], pid: int, page_size: int) -> ProcessSnapshot:
    """Read one process and its threads under ``proc_root`` (raises OSError/ValueError)."""
    base = f"{os.fspath(proc_root)}/{pid}"
    stat = parse_stat(_read(f"{base}/stat"))
    statm = _read(f"{base}/statm").split()
    if len(statm) < 2 or not statm[1].isdigit():
        raise ValueError(f"{base}/statm: unexpected content {' '.join(statm)[:60]!r}")
    snap = ProcessSnapshot(
        pid, stat.starttime, stat.utime + stat.stime, int(statm[1]) * page_size
    )
    try:
        tids = [name for name in os.listdir(f"{base}/task") if name.isdigit()]
    except OSError as err:
        raise ValueError(f"{base}/task: cannot list threads: {err}") from None
    for tid in tids:
        try:
            task = parse_stat(_read(f"{base}/task/{tid}/stat"))
        except (OSError, ValueError):
            # The thread exited between the listing and the read.
            continue
        snap.threads[int(tid)] = (task.comm, task.utime + task.stime)
    return snap


def _cmdline(proc_root: Path, pid: str) -> list[str]:
    try:
        raw = (proc_root / pid / "cmdline").read_bytes()
    except OSError:
        return []
    return [arg.decode(errors="replace") for arg in raw.split(b"\0") if arg]


def _osd_id_of(argv: list[str]) -> str | None:
    for i, arg in enumerate(argv):
        if arg in ("--id", "-i") and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--id="):
            return arg.split("=", 1)[1]
    return None


def is_osd_process(proc_root: str | os.PathLike[str], pid: int) -> bool:
    try:
        comm = _read(f"{os.fspath(proc_root)}/{pid}/comm").strip()
    except OSError:
        return False
    return comm == OSD_COMM


def effective_uid(proc_root: str | os.PathLike[str], pid: int | str) -> int | None:
    """The process's effective uid from ``status`` (None if it cannot be read).

    Not the owner of /proc/<pid>: that is root for a process that changed its uid and is
    not dumpable.
    """
    try:
        status = _read(f"{os.fspath(proc_root)}/{pid}/status")
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("Uid:"):
            fields = line.split()
            return int(fields[2]) if len(fields) > 2 and fields[2].isdigit() else None
    return None


def socket_owner(asok_path: str) -> int:
    """The uid owning an admin socket (raises ValueError if it cannot be read)."""
    try:
        return os.lstat(asok_path).st_uid
    except OSError as err:
        raise ValueError(f"{asok_path}: cannot read the socket's owner: {err.strerror}") from None


def find_osd_pid(proc_root: str | os.PathLike[str], osd_id: str, owner_uid: int) -> int:
    """The pid of the one ``ceph-osd --id <osd_id>`` under ``proc_root`` run by ``owner_uid``."""
    root = Path(proc_root)
    matches = []
    try:
        entries = [e.name for e in root.iterdir() if e.name.isdigit()]
    except OSError as err:
        raise ValueError(f"{root}: cannot list processes: {err}") from None
    for pid in entries:
        argv = _cmdline(root, pid)
        if (argv and os.path.basename(argv[0]) == OSD_COMM and _osd_id_of(argv) == osd_id
                and effective_uid(root, pid) == owner_uid):
            matches.append(int(pid))
    if len(matches) != 1:
        found = "no" if not matches else f"{len(matches)} ({sorted(matches)})"
        raise ValueError(f"{found} ceph-osd processes with --id {osd_id} of uid {owner_uid} "
                         f"(the admin socket's owner) under {root}")
    return matches[0]


def group_pattern(text: str) -> re.Pattern[str]:
    try:
        return re.compile(text)
    except re.error as err:
        raise ValueError(f"--collector.threads.groups {text!r}: not a regular expression: "
                         f"{err}") from None


class ThreadCpuAccount:
    """Monotonic CPU ticks per thread group for one OSD process."""

    def __init__(self, pid: int, starttime: int, named: re.Pattern[str] | None = None) -> None:
        self.pid = pid
        self.starttime = starttime
        self.named = named  # groups kept by name (None: all, up to MAX_THREAD_GROUPS)
        self.last: dict[int, tuple[str, int]] = {}
        self.exited: dict[str, int] = {}  # group -> ticks of its threads gone since
        self.groups: dict[str, None] = {}  # insertion-ordered, capped
        self.lock = threading.Lock()
        # The series of the last read, served again until min-interval has passed.
        self.served: MetricSink | None = None
        self.read_at = float("-inf")

    def group_of(self, comm: str) -> str:
        group = thread_group(comm)
        if group in self.groups:
            return group
        if (self.named is not None and not self.named.fullmatch(group)) \
                or len(self.groups) >= MAX_THREAD_GROUPS:
            return OTHER_GROUP
        self.groups[group] = None
        return group

    def update(self, snap: ProcessSnapshot) -> tuple[dict[str, int], dict[str, int]]:
        """(ticks per group, live threads per group) after this snapshot."""
        for tid, (comm, ticks) in self.last.items():
            now = snap.threads.get(tid)
            # Gone, or a reused tid that restarted from fewer ticks: bank what it had.
            if now is None or now[1] < ticks or now[0] != comm:
                group = self.group_of(comm)
                self.exited[group] = self.exited.get(group, 0) + ticks
        totals = dict(self.exited)
        live: dict[str, int] = {}
        for comm, ticks in snap.threads.values():
            group = self.group_of(comm)
            totals[group] = totals.get(group, 0) + ticks
            live[group] = live.get(group, 0) + 1
        self.last = dict(snap.threads)
        return totals, live


def emit(
    snap: ProcessSnapshot,
    totals: dict[str, int],
    live: dict[str, int],
    clk_tck: int,
    daemon_label: str,
    sink: MetricSink,
) -> None:
    cpu = sink.counter(
        "cephscope_osd_thread_cpu_seconds_total",
        "CPU time (user+system) of the OSD's threads by thread group, from "
        "/proc/<pid>/task/*/stat.",
    )
    count = sink.gauge(
        "cephscope_osd_thread_group_threads", "Live threads of the OSD in each thread group."
    )
    for group in sorted(totals):
        labels = f'{daemon_label},thread_group="{escape_label_value(group)}"'
        cpu.add_rendered(labels, round(totals[group] / clk_tck, 2))
        count.add_rendered(labels, live.get(group, 0))
    sink.counter(
        "cephscope_osd_cpu_seconds_total",
        "CPU time (user+system) of the whole OSD process, from /proc/<pid>/stat.",
    ).add_rendered(daemon_label, round(snap.cpu_ticks / clk_tck, 2))
    sink.gauge(
        "cephscope_osd_resident_memory_bytes", "Resident set size of the OSD process."
    ).add_rendered(daemon_label, snap.rss_bytes)
    sink.gauge("cephscope_osd_threads", "Threads of the OSD process.").add_rendered(
        daemon_label, len(snap.threads)
    )


class ThreadsCollector(DaemonCollector):
    name = "threads"
    help = "OSD CPU seconds per thread group, RSS and thread count from /proc"
    default_enabled = True
    daemon_types = frozenset({"osd"})
    settings_type = ThreadsSettings

    def __init__(self, settings: ThreadsSettings | None = None,
                 host: HostSettings | None = None, *,
                 clk_tck: int | None = None, page_size: int | None = None) -> None:
        super().__init__(settings, host)
        self.min_interval = max(self.settings.min_interval, 0.0)
        self.named_groups = group_pattern(self.settings.groups)
        self.proc_root = self.host.paths.procfs
        # clk_tck/page_size: the host's unless a test replays another machine's /proc
        self.clk_tck = clk_tck or os.sysconf("SC_CLK_TCK")
        self.page_size = page_size or os.sysconf("SC_PAGE_SIZE")
        self._accounts: dict[str, ThreadCpuAccount] = {}
        self._lock = threading.Lock()

    def forget_daemon(self, daemon_name: str) -> None:
        with self._lock:
            self._accounts.pop(daemon_name, None)

    def osd_pid(self, session: Any) -> int:
        pid = session.pid()
        if pid and is_osd_process(self.proc_root, pid):
            return int(pid)
        # Fallback: scanning every process's command line is costly, so the pid found is
        # kept for as long as it is still that OSD, run by the socket's owner.
        owner = socket_owner(session.daemon.asok_path)
        with self._lock:
            account = self._accounts.get(session.daemon.name)
        if (account is not None and is_osd_process(self.proc_root, account.pid)
                and _osd_id_of(_cmdline(Path(self.proc_root), str(account.pid)))
                == session.daemon.id
                and effective_uid(self.proc_root, account.pid) == owner):
            return account.pid
        return find_osd_pid(self.proc_root, session.daemon.id, owner)

    def collect_daemon(self, session: DaemonSession, sink: MetricSink) -> None:
        pid = self.osd_pid(session)
        with self._lock:
            account = self._accounts.get(session.daemon.name)
        if account is not None and account.pid == pid:
            with account.lock:
                served = account.served
                if (served is not None and time.monotonic() - account.read_at
                        < self.min_interval - INTERVAL_SLACK_SECONDS):
                    sink.extend(served.families.values())
                    return
        try:
            snap = read_process(self.proc_root, pid, self.page_size)
        except OSError as err:
            raise ValueError(f"{session.daemon.name}: cannot read pid {pid}: {err}") from None
        name = session.daemon.name
        with self._lock:
            account = self._accounts.get(name)
            if account is None or (account.pid, account.starttime) != (pid, snap.starttime):
                account = self._accounts[name] = ThreadCpuAccount(pid, snap.starttime,
                                                                  self.named_groups)
        fresh = MetricSink()
        with account.lock:
            totals, live = account.update(snap)
            emit(snap, totals, live, self.clk_tck, session.daemon_label, fresh)
            account.served, account.read_at = fresh, time.monotonic()
        sink.extend(fresh.families.values())


COLLECTOR = ThreadsCollector
