"""Prometheus 3.5's promtool (Debian sid's), run from the Tentacle root filesystem that
deploy/rootfs.py builds once (about a minute from Debian's archive) and caches."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from cephscope.deploy import rootfs

REPO = Path(__file__).resolve().parents[2]


def promtool3(*args: str, binds: tuple[Path, ...] = ()) -> subprocess.CompletedProcess[str]:
    """`promtool ARGS` of Prometheus 3.5, seeing the repository and `binds` at their paths."""
    root = rootfs.build("tentacle")
    argv = [sys.executable, "-m", "cephscope.deploy.rootexec", "--root", str(root),
            *(f"--bind={p}" for p in (REPO, *binds)), "--", "promtool", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=REPO, check=False)
