"""Logging of cephscope-exporter: logfmt (default) or JSON lines, repeats folded.

logfmt as go-kit/promslog write it: ``ts=2026-11-23T03:33:00.123Z level=warn
caller=scrape.py:160 msg="collector failed" ceph_daemon=osd.3 err="..."`` — RFC 3339 UTC
time, values quoted when they contain spaces, quotes, ``=`` or are empty.

Structured fields: pass ``extra={"fields": {...}}``; a ``ceph_daemon`` field also keys the
repeat filter. A message that repeats (same logger, level, message template and daemon) is
written once per ``interval`` seconds; the next one written after a quiet spell carries
``repeated=N``, the number suppressed since the previous one. So a dead OSD scraped every
5 s costs one line a minute, not twelve.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

LEVEL_NAMES = {
    logging.DEBUG: "debug", logging.INFO: "info", logging.WARNING: "warn",
    logging.ERROR: "error", logging.CRITICAL: "error",
}
REPEAT_INTERVAL_SECONDS = 60.0
# Keys of suppressed messages kept at most (a flood of distinct daemons must not grow memory).
MAX_REPEAT_KEYS = 4096


def fields_of(record: logging.LogRecord) -> Mapping[str, Any]:
    fields = getattr(record, "fields", None)
    return fields if isinstance(fields, Mapping) else {}


def _rfc3339(created: float) -> str:
    return datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z"
    )


def logfmt_value(value: object) -> str:
    text = str(value)
    if text and not any(c in text for c in ' ="\\\n\t') and text.isprintable():
        return text
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    escaped = escaped.replace("\t", "\\t")
    return f'"{escaped}"'


def _pairs(record: logging.LogRecord) -> list[tuple[str, object]]:
    pairs: list[tuple[str, object]] = [
        ("ts", _rfc3339(record.created)),
        ("level", LEVEL_NAMES.get(record.levelno, record.levelname.lower())),
        ("caller", f"{record.filename}:{record.lineno}"),
        ("msg", record.getMessage()),
    ]
    pairs.extend((str(k), v) for k, v in fields_of(record).items())
    repeated = getattr(record, "repeated", 0)
    if repeated:
        pairs.append(("repeated", repeated))
    return pairs


class LogfmtFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = " ".join(f"{k}={logfmt_value(v)}" for k, v in _pairs(record))
        if record.exc_info:
            line += " err=" + logfmt_value(self.formatException(record.exc_info))
        return line


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        data = {k: v if isinstance(v, int | float | bool) else str(v) for k, v in _pairs(record)}
        if record.exc_info:
            data["err"] = self.formatException(record.exc_info)
        return json.dumps(data, ensure_ascii=False)


class RepeatFilter(logging.Filter):
    """Passes a given (logger, level, template, daemon) at most once per ``interval``."""

    def __init__(self, interval: float = REPEAT_INTERVAL_SECONDS) -> None:
        super().__init__()
        self.interval = interval
        self._lock = threading.Lock()
        # key -> (monotonic time last written, suppressed since)
        self._seen: dict[tuple[str, int, str, str], tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.INFO:
            return True
        daemon = str(fields_of(record).get("ceph_daemon", ""))
        key = (record.name, record.levelno, str(record.msg), daemon)
        now = time.monotonic()
        with self._lock:
            last = self._seen.get(key)
            if last is not None and now - last[0] < self.interval:
                self._seen[key] = (last[0], last[1] + 1)
                return False
            if len(self._seen) >= MAX_REPEAT_KEYS:
                stale = [k for k, (t, _) in self._seen.items() if now - t >= self.interval]
                for k in stale or list(self._seen)[: MAX_REPEAT_KEYS // 2]:
                    del self._seen[k]
            self._seen[key] = (now, 0)
        record.repeated = last[1] if last is not None else 0
        return True


def configure_logging(level: str, fmt: str, stream: Any = None) -> logging.Handler:
    """Install the exporter's handler on the ``cephscope`` logger (returns it)."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else LogfmtFormatter())
    handler.addFilter(RepeatFilter())
    logger = logging.getLogger("cephscope")
    for old in list(logger.handlers):
        logger.removeHandler(old)
    logger.addHandler(handler)
    logger.setLevel({"warn": logging.WARNING}.get(level, getattr(logging, level.upper())))
    logger.propagate = False
    return handler
