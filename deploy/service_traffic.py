"""A little CephFS and RGW traffic: Swift requests to a gateway, file I/O through ceph-fuse.

For the fixture captures (deploy/capture_fixtures.py) and the live checks that need an MDS's
and a gateway's counters (the exporter's ``ceph_mds_*``, ``ceph_rgw_*``) to move: seconds of
work, not a benchmark. Swift needs no signing (a token from the v1 auth URL), so the standard
library's HTTP client is enough; every request counts in the gateway's ``rgw`` counters (and,
on Tentacle, its ``rgw_op`` ones) as an S3 request would.
"""

from __future__ import annotations

import http.client
import os
import subprocess
import threading
import time
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

HTTP_TIMEOUT_SECONDS = 10.0
MOUNT_TIMEOUT_SECONDS = 20.0


class TrafficError(RuntimeError):
    """A request or mount failed; the message names what and where."""


@dataclass(frozen=True)
class SwiftAccount:
    """A gateway user's Swift credentials: v1 auth URL (``http://HOST:PORT/auth/1.0``),
    ``user:subuser`` and key."""

    auth_url: str
    user: str
    key: str


@dataclass
class Counts:
    """What a round did, to check the counters against."""

    puts: int = 0
    gets: int = 0
    deletes: int = 0
    other: int = 0
    bytes_put: int = 0
    bytes_got: int = 0

    def add(self, other: Counts) -> None:
        for name in ("puts", "gets", "deletes", "other", "bytes_put", "bytes_got"):
            setattr(self, name, getattr(self, name) + getattr(other, name))


def _request(url: str, method: str, headers: dict[str, str], body: bytes | None = None,
             ok: Sequence[int] = (200, 201, 202, 204)) -> tuple[int, dict[str, str], bytes]:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise TrafficError(f"{url}: only http:// URLs are supported")
    conn = http.client.HTTPConnection(parts.hostname, parts.port or 80,
                                      timeout=HTTP_TIMEOUT_SECONDS)
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    try:
        conn.request(method, path or "/", body=body, headers=headers)
        response = conn.getresponse()
        payload = response.read()
        reply_headers = {k.lower(): v for k, v in response.getheaders()}
    except (OSError, http.client.HTTPException) as err:
        raise TrafficError(f"{method} {url}: {err}") from None
    finally:
        conn.close()
    if response.status not in ok:
        raise TrafficError(f"{method} {url}: HTTP {response.status} {payload[:200]!r}")
    return response.status, reply_headers, payload


def swift_login(account: SwiftAccount) -> tuple[str, str]:
    """(storage URL, token) from the v1 auth endpoint."""
    _, headers, _ = _request(account.auth_url, "GET",
                             {"X-Auth-User": account.user, "X-Auth-Key": account.key})
    storage, token = headers.get("x-storage-url"), headers.get("x-auth-token")
    if not storage or not token:
        raise TrafficError(f"{account.auth_url}: no X-Storage-Url / X-Auth-Token in the reply")
    return storage, token


def swift_round(account: SwiftAccount, container: str, objects: int = 8,
                size: int = 64 * 1024) -> Counts:
    """Create ``container``, PUT ``objects`` objects of ``size`` bytes, GET each back (checking
    its length), list the container, DELETE the objects and the container."""
    storage, token = swift_login(account)
    auth = {"X-Auth-Token": token}
    counts = Counts(other=1)  # the auth request
    base = f"{storage}/{urllib.parse.quote(container)}"
    _request(base, "PUT", auth)
    counts.other += 1
    payload = os.urandom(size)
    names = [f"obj-{i}" for i in range(objects)]
    for name in names:
        _request(f"{base}/{name}", "PUT", {**auth, "Content-Type": "application/octet-stream"},
                 payload)
        counts.puts += 1
        counts.bytes_put += size
    for name in names:
        _, _, body = _request(f"{base}/{name}", "GET", auth, ok=(200,))
        if len(body) != size:
            raise TrafficError(f"GET {base}/{name}: {len(body)} bytes, {size} were written")
        counts.gets += 1
        counts.bytes_got += len(body)
    _request(base, "GET", auth, ok=(200, 204))
    counts.other += 1
    for name in names:
        _request(f"{base}/{name}", "DELETE", auth)
        counts.deletes += 1
    _request(base, "DELETE", auth)
    counts.other += 1
    return counts


def file_round(directory: Path, files: int = 8, size: int = 64 * 1024) -> int:
    """Metadata and data operations in ``directory`` (a CephFS mount): mkdir, create and write
    with fsync, stat, read back, rename, unlink, rmdir. Returns how many files went through."""
    work = directory / f"round-{os.getpid()}-{time.monotonic_ns()}"
    work.mkdir()
    payload = os.urandom(size)
    for i in range(files):
        path = work / f"f{i}"
        with open(path, "wb") as out:
            out.write(payload)
            out.flush()
            os.fsync(out.fileno())
        if path.stat().st_size != size or path.read_bytes() != payload:
            raise TrafficError(f"{path}: read back differs from what was written")
        path.rename(work / f"g{i}")
    for entry in list(work.iterdir()):
        entry.unlink()
    work.rmdir()
    return files


class CephFuseMount:
    """A CephFS mounted with ceph-fuse for the duration of a ``with`` block, unmounted after
    (also on error). ``argv_prefix`` runs ceph-fuse (``["ceph-fuse"]`` here, or a release's
    through its root filesystem); the mount point must be an empty directory."""

    def __init__(self, conf: Path, mountpoint: Path, client_id: str = "admin",
                 argv_prefix: Sequence[str] = ("ceph-fuse",)) -> None:
        self.conf = conf
        self.mountpoint = mountpoint
        self.client_id = client_id
        self.argv_prefix = list(argv_prefix)

    def argv(self) -> list[str]:
        return [*self.argv_prefix, "-c", str(self.conf), "--id", self.client_id,
                str(self.mountpoint)]

    def __enter__(self) -> Path:
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        if os.path.ismount(self.mountpoint):
            raise TrafficError(f"{self.mountpoint} is already a mount point")
        # ceph-fuse forks into the background once the mount is up, and exits when unmounted.
        result = subprocess.run(self.argv(), capture_output=True, text=True,
                                timeout=MOUNT_TIMEOUT_SECONDS, check=False)
        if result.returncode != 0:
            raise TrafficError(f"{' '.join(self.argv())} exited {result.returncode}: "
                               f"{(result.stderr or result.stdout).strip()[-400:]}")
        deadline = time.monotonic() + MOUNT_TIMEOUT_SECONDS
        while not os.path.ismount(self.mountpoint):
            if time.monotonic() > deadline:
                raise TrafficError(f"ceph-fuse: {self.mountpoint} not mounted after "
                                   f"{MOUNT_TIMEOUT_SECONDS:.0f}s")
            time.sleep(0.1)
        return self.mountpoint

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.unmount()

    def unmount(self) -> None:
        if not os.path.ismount(self.mountpoint):
            return
        result = subprocess.run(["umount", str(self.mountpoint)], capture_output=True,
                                text=True, timeout=MOUNT_TIMEOUT_SECONDS, check=False)
        if result.returncode != 0:
            # Busy (a reader still in it): detach now, the kernel finishes when it is free.
            subprocess.run(["umount", "-l", str(self.mountpoint)], capture_output=True,
                           timeout=MOUNT_TIMEOUT_SECONDS, check=False)
        if os.path.ismount(self.mountpoint):
            raise TrafficError(f"cannot unmount {self.mountpoint}: {result.stderr.strip()}")


@dataclass
class BackgroundTraffic:
    """Repeats a Swift round and, with a mounted ``directory``, a file round, every
    ``interval`` seconds in a thread until stopped; keeps the totals and the first error."""

    swift: SwiftAccount | None
    directory: Path | None
    interval: float = 1.0
    objects: int = 4
    files: int = 4
    counts: Counts = field(default_factory=Counts)
    files_done: int = 0
    rounds: int = 0
    error: BaseException | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> BackgroundTraffic:
        self._thread = threading.Thread(target=self._run, name="service-traffic", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                if self.swift is not None:
                    self.counts.add(swift_round(self.swift, f"traffic-{self.rounds}",
                                                objects=self.objects))
                if self.directory is not None:
                    self.files_done += file_round(self.directory, files=self.files)
            except (TrafficError, OSError) as err:
                self.error = err
                return
            self.rounds += 1
            self._stop.wait(self.interval)

    def stop(self) -> None:
        """Stop and wait for the round in progress; raises the error a round met, if any."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=HTTP_TIMEOUT_SECONDS * 4)
        if self.error is not None:
            raise TrafficError(f"traffic round {self.rounds} failed: {self.error}")
