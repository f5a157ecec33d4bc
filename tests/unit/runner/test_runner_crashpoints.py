"""The runner's crash-point test hook: parsing, the N-th occurrence, a real SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cephscope.deploy.procs import pid_alive, proc_cmdline
from cephscope.runner.crashpoints import (
    CRASH_ENV,
    CrashPoint,
    CrashPointError,
    checkpoint_from_environ,
    no_checkpoint,
)


def test_off_unless_set() -> None:
    assert checkpoint_from_environ({}) is no_checkpoint
    assert checkpoint_from_environ({CRASH_ENV: ""}) is no_checkpoint


@pytest.mark.parametrize("value, expected", [("restore", ("restore", 1)),
                                             ("benchmark:3", ("benchmark", 3))])
def test_parse(value: str, expected: tuple[str, int]) -> None:
    point = CrashPoint.parse(value)
    assert (point.stage, point.occurrence) == expected


@pytest.mark.parametrize("value, message", [
    ("benchmarks", "unknown stage 'benchmarks'"),
    ("restore:0", "'0' is not a count >= 1"),
    ("restore:x", "'x' is not a count >= 1"),
])
def test_bad_values_are_named(value: str, message: str) -> None:
    with pytest.raises(CrashPointError, match=message) as info:
        CrashPoint.parse(value)
    assert CRASH_ENV in str(info.value)


def test_kills_the_process_at_the_nth_occurrence_only() -> None:
    code = (
        "import sys\n"
        "from cephscope.runner.crashpoints import CrashPoint\n"
        "point = CrashPoint.parse('osd_restart:2')\n"
        "point.reached('config_apply'); point.reached('osd_restart')\n"
        "print('first passed', flush=True)\n"
        "point.reached('osd_restart')\n"
        "print('second passed', flush=True)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == -signal.SIGKILL
    assert proc.stdout == "first passed\n"


def test_sweep_refuses_a_bad_hook_value(tmp_path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text("benchmarks:\n  radosbench:\n    time: 1\n")
    proc = subprocess.run([sys.executable, "-m", "cephscope.cli", "sweep", str(spec),
                           "--dry-run"], env={"PATH": "/usr/bin:/bin", CRASH_ENV: "nowhere"},
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"{CRASH_ENV}='nowhere': unknown stage 'nowhere'" in proc.stderr


def test_a_local_benchmark_tool_dies_with_a_killed_runner(tmp_path) -> None:
    """run_tools' children get SIGKILL from the kernel when the runner is SIGKILLed."""
    code = (
        "import os, signal, sys, threading, time\n"
        "from pathlib import Path\n"
        "from cephscope.runner.benchmarks.toolproc import ToolCommand, run_tools\n"
        f"out = Path({str(tmp_path)!r})\n"
        "cmd = ToolCommand(['sleep', '60'], out / 'o', out / 'e')\n"
        "threading.Thread(target=run_tools, args=([cmd], 120, 'test'), daemon=True).start()\n"
        "time.sleep(1.0)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    runner = subprocess.Popen([sys.executable, "-c", code])
    deadline = time.monotonic() + 30
    tool = None
    while tool is None and time.monotonic() < deadline:  # find the sleep while it runs
        for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
            try:
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                continue
            if f"PPid:\t{runner.pid}\n" in status and proc_cmdline(pid)[:1] == ["sleep"]:
                tool = pid
        time.sleep(0.05)
    assert tool is not None, "the tool never started"
    assert runner.wait(30) == -signal.SIGKILL
    deadline = time.monotonic() + 5
    while pid_alive(tool):
        assert time.monotonic() < deadline, f"sleep {tool} outlived the killed runner"
        time.sleep(0.05)
