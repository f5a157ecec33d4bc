"""Run one command from another root filesystem: `python -m cephscope.deploy.rootexec --root R
[--bind=PATH …] -- argv…`.

The process enters a private mount namespace (unshare(CLONE_NEWNS); Python 3.11 has no
os.unshare), makes every mount in it private so nothing propagates back to the host, binds
/proc, /sys, /dev and each --bind at the same path inside R, chroots into R and execs argv.
The mounts belong to the namespace alone: they vanish when its last process (a daemon that
forked into the background included) exits, so nothing ever needs unmounting.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import os
import sys
from collections.abc import Sequence
from pathlib import Path

CLONE_NEWNS = 0x00020000
MS_REC = 0x4000
MS_BIND = 0x1000
MS_PRIVATE = 1 << 18
SYSTEM_BINDS = ("/proc", "/sys", "/dev")
# The command runs on the root's own interpreter and libraries: nothing of the caller's
# Python environment or library path may leak in.
DROPPED_ENV_PREFIXES = ("PYTHON", "VIRTUAL_ENV", "LD_")
ROOT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class RootExecError(RuntimeError):
    pass


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise RootExecError(f"{what}: {os.strerror(err)}")


def enter(root: Path, binds: Sequence[str]) -> None:
    """Private mount namespace, binds, chroot; the calling process is then inside `root`."""
    libc = _libc()
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
    _check(libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    _check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "make / private")
    for source in (*SYSTEM_BINDS, *binds):
        src = Path(source)
        if not src.exists():
            raise RootExecError(f"bind source {src} does not exist")
        target = root / str(src).lstrip("/")
        if src.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        elif not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.touch()
        _check(
            libc.mount(str(src).encode(), str(target).encode(), None, MS_BIND | MS_REC, None),
            f"bind {src} into {root}",
        )
    os.chroot(root)


def clean_environment(env: dict[str, str]) -> dict[str, str]:
    kept = {k: v for k, v in env.items() if not k.startswith(DROPPED_ENV_PREFIXES)}
    kept["PATH"] = ROOT_PATH
    return kept


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rootexec", description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--bind", action="append", default=[], help="a path visible inside at the same path")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command after --")
    if not (args.root / "usr").is_dir():
        print(f"rootexec: {args.root} is not a root filesystem (no usr/)", file=sys.stderr)
        return 2
    cwd = os.getcwd()
    try:
        enter(args.root.resolve(), args.bind)
    except (RootExecError, OSError) as exc:
        print(f"rootexec: {exc}", file=sys.stderr)
        return 2
    # Keep the caller's directory when the root has it (a bound state dir), else /.
    try:
        os.chdir(cwd)
    except OSError:
        os.chdir("/")
    env = clean_environment(dict(os.environ))
    try:
        os.execvpe(command[0], command, env)
    except OSError as exc:
        print(f"rootexec: cannot run {command[0]} in {args.root}: {exc.strerror}", file=sys.stderr)
        return 127
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
