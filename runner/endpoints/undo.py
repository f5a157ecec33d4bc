"""What client endpoints changed and have not put back, kept in the run's journal (state.json,
`endpoints`) before each change and dropped once undone, so a run killed mid-step leaves its
successor (`--resume`) or the restore the list of what to undo:

    {"kind": "mount", "host": "client1", "path": "/…/client-work/client1/mnt/<step>-0"}
    {"kind": "cephfs_data_pool", "fs": "cephfs", "pool": "cephscope-data"}
    {"kind": "filesystem", "fs": "cephscope"}

Mounts are undone first (unmounted on their host, the mountpoint removed), then data pools
taken out of their filesystem, then filesystems the run made (failed and removed); the pools
themselves are the run's pools (removed by the pool manager after this).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cephscope.runner.hostexec import HostExec, HostExecError

Entry = dict[str, str]
KINDS = ("mount", "cephfs_data_pool", "filesystem")
UMOUNT_SECONDS = 60.0
# a mon command: (prefix, **arguments) -> its JSON result
MonCommand = Callable[..., Any]


def valid_entries(value: Any) -> bool:
    """Whether a journal's `endpoints` value is a list of entries this module knows."""
    return isinstance(value, list) and all(
        isinstance(e, dict) and e.get("kind") in KINDS
        and all(isinstance(k, str) and isinstance(v, str) for k, v in e.items())
        for e in value)


@dataclass
class UndoLog:
    """The run's endpoint changes, written through `store` (the run journal) on every change;
    `load` reads what a previous attempt left."""

    load: Callable[[], list[Entry]] = list
    store: Callable[[list[Entry]], None] = lambda entries: None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def entries(self) -> list[Entry]:
        return [dict(e) for e in self.load()]

    def add(self, entry: Mapping[str, str]) -> None:
        """Record a change before it is made."""
        with self._lock:
            entries = self.load()
            if dict(entry) not in entries:
                self.store([*entries, dict(entry)])

    def remove(self, entry: Mapping[str, str]) -> None:
        """Forget a change once it is undone."""
        with self._lock:
            self.store([e for e in self.load() if e != dict(entry)])


def unmount(host: HostExec, path: str) -> str | None:
    """Unmount a FUSE mount on its host (its daemon then exits) and remove the mountpoint;
    lazily when busy; None when done or nothing was mounted there, else the problem."""
    try:
        if host.run(["mountpoint", "-q", path], timeout=UMOUNT_SECONDS, check=False
                    ).returncode == 0:
            done = host.run(["umount", path], timeout=UMOUNT_SECONDS, check=False)
            if done.returncode != 0:
                host.run(["umount", "-l", path], timeout=UMOUNT_SECONDS)
        host.run(["rmdir", "--ignore-fail-on-non-empty", path], timeout=UMOUNT_SECONDS,
                 check=False)
    except HostExecError as exc:
        return f"unmount {path} on {host.name}: {exc}"
    return None


def undo_all(log: UndoLog, host_for: Callable[[str], HostExec], ceph: MonCommand | None,
             ceph_errors: tuple[type[BaseException], ...], kinds: Sequence[str] = KINDS
             ) -> list[str]:
    """Undo every recorded change of `kinds` (mounts first); the problems, one per change
    left in the journal. `ceph_errors`: what a failed mon command raises (said, not raised)."""
    problems: list[str] = []
    for kind in KINDS:
        if kind not in kinds:
            continue
        for entry in [e for e in log.entries() if e.get("kind") == kind]:
            try:
                problem = _undo(entry, host_for, ceph)
            except ceph_errors as exc:  # the cluster's own words; the rest goes on
                problem = f"undo {entry['kind']} {entry.get('fs')}: {exc}"
            if problem is None:
                log.remove(entry)
            else:
                problems.append(problem)
    return problems


def _undo(entry: Entry, host_for: Callable[[str], HostExec], ceph: MonCommand | None
          ) -> str | None:
    kind = entry["kind"]
    if kind == "mount":
        return unmount(host_for(entry["host"]), entry["path"])
    if ceph is None:
        return f"{kind} {entry}: no cluster connection to undo it"
    if kind == "cephfs_data_pool":
        fs_pools = {f.get("name"): f.get("data_pools", []) for f in ceph("fs ls") or []}
        if entry["pool"] in fs_pools.get(entry["fs"], []):
            ceph("fs rm_data_pool", fs_name=entry["fs"], pool=entry["pool"])
    elif entry["fs"] in {f.get("name") for f in ceph("fs ls") or []}:  # a filesystem
        ceph("fs fail", fs_name=entry["fs"])
        ceph("fs rm", fs_name=entry["fs"], yes_i_really_mean_it=True)
    return None
