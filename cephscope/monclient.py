"""Talking to the mons, shared by the exporter, the runner and the dev cluster.

Two pieces every part needs and none may import from another part: a librados connection with
one `mon_command` call (JSON in, JSON out, Ceph's own error text), and the wait for every PG to
be active+clean that does not trust the mgr's stale pre-restart report. Standard library only
(librados is imported when a connection is opened), so the exporter still installs alone.

Every call is bounded, and this module is the one place the bounds are set (`client_conf`):
the Python binding's `mon_command(timeout=...)` is ignored ("the C API doesn't provide a
timeout argument", rados.pyx), so an unanswerable call only ends through the handle's own
`rados_mon_op_timeout`. And because the main thread inside a librados C call runs no Python
signal handler, every blocking call runs in a worker thread while the caller waits in short
slices (`bounded_call`): SIGINT/SIGTERM are taken at once, whatever the cluster does.
"""

from __future__ import annotations

import errno
import json
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

T = TypeVar("T")

# How long one call may wait for the cluster by default (a mon op, the mount, an OSD op). Long
# enough for a mon election or a mon restart (~10-30 s), short enough that a lost cluster is
# said within a minute (`cephscope sweep --cluster-timeout` changes it).
DEFAULT_CLUSTER_TIMEOUT_SECONDS = 60.0
# Beyond its timeout, how long a call is given before the caller stops waiting for it:
# librados' own timeout normally ends it first, with Ceph's ETIMEDOUT.
CALL_GRACE_SECONDS = 5.0
# The slice the waiting thread sleeps in: Python runs signal handlers between slices.
WAIT_SLICE_SECONDS = 0.2


class MonCommandError(RuntimeError):
    """A mon command failed, timed out or answered something that is not JSON."""


class MonCallError(MonCommandError):
    """The call itself failed (not the command): the connection may be broken."""


class MonTimeout(MonCallError):
    """No mon answered within the bound: the cluster is lost (or partitioned from us)."""


def whole_seconds(timeout_seconds: float) -> str:
    """Ceph's "secs" options reject "3.0"."""
    return str(max(int(timeout_seconds), 1))


def client_conf(timeout_seconds: float, io: bool = False) -> dict[str, str]:
    """The options that bound every librados call of a handle: the mount (connect), each mon
    command and, for a handle that does I/O (`io`), each OSD op. Given to every handle that
    talks to a mon (runner, dev cluster tools, mon relay, exporter, benchmarks)."""
    secs = whole_seconds(timeout_seconds)
    conf = {"client_mount_timeout": secs, "rados_mon_op_timeout": secs}
    if io:
        conf["rados_osd_op_timeout"] = secs
    return conf


def bounded_env(env: Mapping[str, str], timeout_seconds: float,
                io: bool = False) -> dict[str, str]:
    """`env` with `client_conf` added to CEPH_ARGS, which librados reads in every client tool
    (rados, ceph, fio's rbd engine), so a tool started with it is bounded the same way. The
    caller's own CEPH_ARGS come after ours: an explicit user setting wins."""
    ours = " ".join(f"--{k}={v}" for k, v in client_conf(timeout_seconds, io).items())
    theirs = env.get("CEPH_ARGS", "").strip()
    return {**env, "CEPH_ARGS": f"{ours} {theirs}".strip()}


def bounded_call(fn: Callable[[], T], timeout_seconds: float, what: str) -> T:
    """`fn()` in a daemon thread, waited for in short slices so the calling (main) thread
    still takes signals; MonTimeout naming `what` when it has not returned after
    `timeout_seconds`. An abandoned call is left to its own librados timeout."""
    outcome: dict[str, Any] = {}
    done = threading.Event()

    def call() -> None:
        try:
            outcome["value"] = fn()
        except BaseException as exc:  # handed to the caller as it was raised
            outcome["error"] = exc
        finally:
            done.set()

    threading.Thread(target=call, name=f"bounded: {what}"[:60], daemon=True).start()
    deadline = time.monotonic() + timeout_seconds
    while not done.wait(max(0.0, min(WAIT_SLICE_SECONDS, deadline - time.monotonic()))):
        if time.monotonic() >= deadline:
            raise MonTimeout(f"{what} timed out after {timeout_seconds:.0f} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def mon_address(cluster: Any) -> str:
    """Where the handle looks for its mons (`mon_host`), for an error that names them."""
    try:
        return str(cluster.conf_get("mon_host") or "") or "the mons in its ceph.conf"
    except Exception:  # a fake or broken handle: say what we can
        return "the mons in its ceph.conf"


def connect(conffile: str, name: str = "client.admin", keyring: str | None = None,
            timeout_seconds: float = 15.0, quiet: bool = False) -> Any:
    """A connected `rados.Rados` handle whose every call gives up after `timeout_seconds`
    (`client_conf`). `quiet`: no log to stderr, no admin socket (for a long-running process
    on a storage host)."""
    try:
        import rados  # python3-rados; absent on hosts without the Ceph client libraries
    except ImportError as exc:
        raise MonCommandError("python3-rados is not importable (Debian: apt-get install "
                              "python3-rados; use a venv with --system-site-packages)") from exc
    conf = client_conf(timeout_seconds)
    if quiet:
        conf.update({"log_to_stderr": "false", "err_to_stderr": "false", "admin_socket": ""})
    if keyring:
        conf["keyring"] = str(keyring)
    cluster = rados.Rados(conffile=str(conffile), name=name, conf=conf)
    what = f"connecting to the cluster of {conffile} ({mon_address(cluster)}) as {name}"

    def call() -> None:
        try:
            cluster.connect(timeout=int(whole_seconds(timeout_seconds)))
        except Exception as exc:  # rados raises its own hierarchy (and OSError/TypeError)
            if type(exc).__name__ == "TimedOut":  # rados.TimedOut: no mon answered the mount
                raise MonTimeout(f"{what} timed out after {whole_seconds(timeout_seconds)} s: "
                                 f"no mon answered") from exc
            raise MonCommandError(f"cannot connect to the cluster of {conffile} as {name}: "
                                  f"{exc}") from exc

    bounded_call(call, timeout_seconds + CALL_GRACE_SECONDS, what)
    return cluster


def decode_json(command: str, out: str | bytes) -> Any:
    """A ceph command's JSON reply; None when it printed nothing."""
    if not out.strip():
        return None
    try:
        return json.loads(out)
    except ValueError as exc:
        raise MonCommandError(f"`ceph {command}` returned invalid JSON: {out[:80]!r}") from exc


def mon_command(cluster: Any, prefix: str, timeout_seconds: float,
                grace_seconds: float = CALL_GRACE_SECONDS, **args: Any) -> Any:
    """One mon command through a connected handle; the JSON reply (None when empty). Bounded:
    the handle's `rados_mon_op_timeout` ends it with ETIMEDOUT, and the caller stops waiting
    `grace_seconds` after `timeout_seconds` whatever the handle does; both raise
    MonTimeout naming the command and the mons."""
    cmd = {"prefix": prefix, "format": "json", **args}

    def call() -> tuple[int, bytes, str]:
        try:
            return cluster.mon_command(json.dumps(cmd), b"",
                                       timeout=int(whole_seconds(timeout_seconds)))
        except MonCommandError:
            raise
        except Exception as exc:  # rados.Error and friends: one message naming the command
            raise MonCallError(f"`ceph {prefix}` failed: {exc}") from exc

    try:
        ret, outb, outs = bounded_call(call, timeout_seconds + grace_seconds,
                                       f"`ceph {prefix}`")
    except MonTimeout as exc:  # ours, or the relay's: say which mons did not answer
        raise MonTimeout(f"{exc}: no mon answered at {mon_address(cluster)}") from exc
    if ret == -errno.ETIMEDOUT:
        raise MonTimeout(f"`ceph {prefix}` timed out after {whole_seconds(timeout_seconds)} s: "
                         f"no mon answered at {mon_address(cluster)}")
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
    Errors of the `transient` types count as "not yet", except a lost cluster (an error whose
    cause is MonTimeout: no mon answered within its bound), which is raised at once: waiting
    longer for PGs on a cluster no mon speaks for cannot help. Raises PgWaitTimeout."""
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
            if is_cluster_lost(exc):
                raise
            last = str(exc)
        if time.monotonic() > deadline:
            raise PgWaitTimeout(f"PGs not active+clean after {timeout_seconds:.0f}s ({last})")
        time.sleep(poll_seconds)


def raised_from(exc: BaseException, types: type[BaseException] | tuple[type[BaseException], ...]) -> bool:
    """`exc` is one of `types`, or was raised from one (through any chain of `raise … from`)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, types):
            return True
        seen = seen.__cause__
    return False


def is_cluster_lost(exc: BaseException) -> bool:
    """`exc` is, or was raised from, a MonTimeout (whatever type a layer above wrapped it in)."""
    return raised_from(exc, MonTimeout)
