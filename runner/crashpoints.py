"""Test hook: make the runner die by SIGKILL at a chosen stage, to prove `--resume`.

Off unless the environment variable `CEPHSCOPE_TEST_CRASH_AT` is set when `cephscope sweep`
starts (it is read once, there). Its value is `STAGE` or `STAGE:N` (the N-th time this
process reaches the stage, default the first):

- `config_apply`: a step's ceph config is set in the mon's config db, no OSD restarted yet;
- `osd_stopped`: inside the restart method, the OSDs being restarted are stopped and none is
  started yet (the dev cluster's restart; a restart by one command per OSD, such as
  `systemctl restart`, has no such moment and never reaches it);
- `osd_restart`: the restart method has restarted OSDs, the runner waits for them to serve
  (up with a newer epoch, admin socket answering, PGs active+clean);
- `benchmark`: a step's benchmark tool runs (its first live figure arrived);
- `result_write`: a step's benchmark finished, its result not yet written;
- `restore`: the pre-sweep config db values are back, the OSDs not yet restarted for them.

The runner kills itself with SIGKILL (no `finally`, no handler runs): the same as a power cut
of the runner alone, or the OOM killer.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

CRASH_ENV = "CEPHSCOPE_TEST_CRASH_AT"
STAGES = ("config_apply", "osd_stopped", "osd_restart", "benchmark", "result_write", "restore")

# What the runner calls at each stage: a no-op unless a crash point is armed.
Checkpoint = Callable[[str], None]


def no_checkpoint(stage: str) -> None:
    """The default: stages pass unnoticed."""


class CrashPointError(ValueError):
    pass


@dataclass
class CrashPoint:
    stage: str
    occurrence: int = 1
    _seen: int = field(default=0, init=False)

    @classmethod
    def parse(cls, value: str) -> CrashPoint:
        stage, _, count = value.strip().partition(":")
        if stage not in STAGES:
            raise CrashPointError(f"{CRASH_ENV}={value!r}: unknown stage {stage!r} "
                                  f"(one of {', '.join(STAGES)})")
        try:
            occurrence = int(count) if count else 1
        except ValueError:
            occurrence = 0
        if occurrence < 1:
            raise CrashPointError(f"{CRASH_ENV}={value!r}: {count!r} is not a count >= 1")
        return cls(stage, occurrence)

    def reached(self, stage: str) -> None:
        if stage != self.stage:
            return
        self._seen += 1
        if self._seen == self.occurrence:
            os.kill(os.getpid(), signal.SIGKILL)


def checkpoint_from_environ(environ: Mapping[str, str]) -> Checkpoint:
    """The checkpoint the runner calls at each stage: a crash point when the test hook is
    set, else a no-op."""
    value = environ.get(CRASH_ENV, "")
    if not value:
        return no_checkpoint
    return CrashPoint.parse(value).reached
