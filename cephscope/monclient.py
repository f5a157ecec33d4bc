"""Talking to the mons, shared by the exporter, the runner and the dev cluster.

Two pieces every part needs and none may import from another part: a librados connection with
one `mon_command` call (JSON in, JSON out, Ceph's own error text), and the wait for every PG to
be active+clean that does not trust the mgr's stale pre-restart report. Standard library only
(librados is imported when a connection is opened), so the exporter still installs alone.
"""

from __future__ import annotations

import errno
import json
import time
from collections.abc import Callable, Mapping
from typing import Any


class MonCommandError(RuntimeError):
    """A mon command failed, timed out or answered something that is not JSON."""


class MonCallError(MonCommandError):
    """The call itself failed (not the command): the connection may be broken."""


def connect(conffile: str, name: str = "client.admin", keyring: str | None = None,
            timeout_seconds: float = 15.0, quiet: bool = False) -> Any:
    """A connected `rados.Rados` handle. `quiet`: no log to stderr, no admin socket (for a
    long-running process on a storage host)."""
    try:
        import rados  # python3-rados; absent on hosts without the Ceph client libraries
    except ImportError as exc:
        raise MonCommandError("python3-rados is not importable (Debian: apt-get install "
                              "python3-rados; use a venv with --system-site-packages)") from exc
    whole_seconds = str(max(int(timeout_seconds), 1))  # "secs" options reject "3.0"
    conf: dict[str, str] = {}
    if quiet:
        conf.update({"client_mount_timeout": whole_seconds, "rados_mon_op_timeout": whole_seconds,
                     "log_to_stderr": "false", "err_to_stderr": "false", "admin_socket": ""})
    if keyring:
        conf["keyring"] = str(keyring)
    cluster = rados.Rados(conffile=str(conffile), name=name, conf=conf)
    try:
        cluster.connect(timeout=int(max(timeout_seconds, 1)))
    except Exception as exc:  # rados raises its own hierarchy (and OSError/TypeError)
        raise MonCommandError(f"cannot connect to the cluster of {conffile} as {name}: "
                              f"{exc}") from exc
    return cluster


def decode_json(command: str, out: str | bytes) -> Any:
    """A ceph command's JSON reply; None when it printed nothing."""
    if not out.strip():
        return None
    try:
        return json.loads(out)
    except ValueError as exc:
        raise MonCommandError(f"`ceph {command}` returned invalid JSON: {out[:80]!r}") from exc


def mon_command(cluster: Any, prefix: str, timeout_seconds: float, **args: Any) -> Any:
    """One mon command through a connected handle; the JSON reply (None when empty)."""
    cmd = {"prefix": prefix, "format": "json", **args}
    try:
        ret, outb, outs = cluster.mon_command(json.dumps(cmd), b"",
                                              timeout=int(max(timeout_seconds, 1)))
    except Exception as exc:  # rados.Error and friends: one message naming the command
        raise MonCallError(f"`ceph {prefix}` failed: {exc}") from exc
    if ret != 0:
        name = errno.errorcode.get(-ret, str(ret))
        raise MonCommandError(f"`ceph {prefix}` failed: {name} {str(outs).strip()}".rstrip())
    return decode_json(prefix, outb)


# --------------------------------------------------------------------------- PG wait


class PgWaitTimeout(RuntimeError):
    """PGs did not all become active+clean in time; the message says how far they got."""


def pg_stats_of(dump: Any) -> list[dict[str, Any]]:
    """The per-PG list of `pg dump pgs` (Pacific wraps it in {"pg_stats": …}, later a list)."""
    if isinstance(dump, dict):
        dump = dump.get("pg_stats", dump.get("pg_map", {}).get("pg_stats", []))
    return [pg for pg in dump or [] if isinstance(pg, dict)]


def pgs_not_clean(stats: list[dict[str, Any]],
                  fresh_since: Mapping[int, int] | None = None) -> list[str]:
    """`pgid:state` of every PG not active+clean. With `fresh_since` (osd -> epoch it came up
    in), a PG served by one of those OSDs counts only once its stats were reported at or after
    that epoch, so the mgr's stale pre-restart "active+clean" is not taken for the truth."""
    fresh_since = dict(fresh_since or {})
    waiting = []
    for pg in stats:
        osds = set(pg.get("acting", [])) | set(pg.get("up", []))
        need_epoch = max((fresh_since[o] for o in osds if o in fresh_since), default=0)
        if pg.get("state") != "active+clean" or int(pg.get("reported_epoch", 0)) < need_epoch:
            waiting.append(f"{pg.get('pgid')}:{pg.get('state')}")
    return waiting


def wait_pgs_active_clean(pg_dump: Callable[[], Any], timeout_seconds: float,
                          fresh_since: Mapping[int, int] | None = None,
                          poll_seconds: float = 0.5,
                          transient: tuple[type[BaseException], ...] = (MonCommandError,)) -> None:
    """Poll `pg_dump()` (the reply of `pg dump pgs`) until every PG is active+clean.
    Errors of the `transient` types count as "not yet"; raises PgWaitTimeout."""
    deadline = time.monotonic() + timeout_seconds
    last = ""
    while True:
        try:
            stats = pg_stats_of(pg_dump())
            waiting = pgs_not_clean(stats, fresh_since)
            last = f"{len(stats) - len(waiting)}/{len(stats)} active+clean"
            if stats and not waiting:
                return
            if waiting:
                last += f" (e.g. {', '.join(waiting[:3])})"
        except (*transient, AttributeError, TypeError, ValueError) as exc:
            last = str(exc)
        if time.monotonic() > deadline:
            raise PgWaitTimeout(f"PGs not active+clean after {timeout_seconds:.0f}s ({last})")
        time.sleep(poll_seconds)
