"""SIGTERM and SIGINT during a sweep: they raise `Interrupted`, so the run's `finally` puts
the cluster back."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any


class Interrupted(BaseException):
    """SIGTERM/SIGINT received: stop after restoring the cluster."""


@contextlib.contextmanager
def signals_handled(handler: Callable[[int, Any], None]) -> Iterator[None]:
    """SIGTERM and SIGINT go to `handler` inside the block (main thread only: elsewhere Python
    cannot install handlers, and the defaults stay)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def raise_interrupted(signum: int, frame: Any) -> None:
    """Make Ctrl-C/SIGTERM raise Interrupted (so `finally` restores the cluster)."""
    raise Interrupted(signal.Signals(signum).name)


def interrupts_raised() -> contextlib.AbstractContextManager[None]:
    """Inside the block SIGTERM and SIGINT raise `Interrupted`."""
    return signals_handled(raise_interrupted)
