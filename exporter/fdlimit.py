"""File descriptors: the exporter's open-files limit and how many client connections fit in it.

Every client connection costs one descriptor; a scrape also opens one admin-socket
connection per daemon being read (``--scrape.max-parallel`` at once) and a few /proc and
/sys files. Linux starts most services with a soft ``RLIMIT_NOFILE`` of 1024 under a much
higher hard limit, so, like Go programs (which raise it at start since Go 1.19), the
exporter raises the soft limit to the hard one, then keeps its connection limit below it
with room for the scrape's own descriptors. Running out anyway (EMFILE) is handled by the
HTTP server pausing its listener, never by a busy loop.
"""

from __future__ import annotations

import os
import resource

# Descriptors kept free for the scrape besides two per parallel daemon read (its admin
# socket plus a /proc or /sys file): the mon connection, log files, a TLS context's reads.
SPARE_DESCRIPTORS = 64
# Below this many client connections the exporter would be unusable; a limit that small is
# a configuration error the operator sees in the log, not a reason to refuse to start.
MIN_CONNECTIONS = 16


def raise_open_files_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit; return the soft limit in force after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard
    if hard == resource.RLIM_INFINITY:
        # An unlimited hard limit cannot be the soft one: the kernel caps it at fs.nr_open.
        target = _nr_open()
    if soft != resource.RLIM_INFINITY and soft >= target:
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError):
        return soft
    return target


def open_files_limit() -> int:
    """The soft RLIMIT_NOFILE in force now (unlimited counts as fs.nr_open)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return _nr_open() if soft == resource.RLIM_INFINITY else soft


def open_descriptors() -> int:
    """Descriptors this process has open now (16 if /proc/self/fd cannot be read)."""
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return 16


def connection_limit(requested: int, fd_limit: int, in_use: int, max_parallel: int) -> int:
    """Client connections allowed: ``requested``, but never more than fit beside the scrape.

    ``in_use`` descriptors are already open (listener, selector, stdio, libraries),
    ``max_parallel`` daemons are read at once (an admin socket and a file each).
    """
    room = fd_limit - in_use - 2 * max_parallel - SPARE_DESCRIPTORS
    return max(min(requested, room), MIN_CONNECTIONS)


def _nr_open() -> int:
    try:
        with open("/proc/sys/fs/nr_open") as f:
            return int(f.read())
    except (OSError, ValueError):
        return 1 << 20
