"""Running the real `cephscope` CLI from unit tests, and reading its one-line errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def cephscope(*args: str, env: dict[str, str] | None = None, user: str | None = None,
              ) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "cephscope.cli", *args]
    if user:
        argv = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *argv]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env,
                          cwd=Path(__file__).resolve().parents[3])


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode != 0, proc.stdout
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    return lines[0]
