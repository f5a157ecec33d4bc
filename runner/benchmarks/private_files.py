"""Files that hold a tool's keys (swift-bench's config, getput's credentials, hsbench's
environment), mode 0600, on the host the tool runs on.

A key never goes on a command line: argv is visible to every user of a host (`ps`), and an
SSH command line on two of them. On this machine the file is written straight into the step
dir; on a client it goes through the client's `HostExec` on stdin into a private directory of
its own (`mkdtemp`, mode 0700), whose path comes back on stdout. `remove` deletes it after the
step (a runner killed before that leaves it, still 0600; a `--resume` clears the step dir
here, a client's temporary directory is the client's to clean).

hsbench reads its keys only from its environment or argv. On a client the environment of a
command would travel on the SSH command line, so `ENV_LAUNCHER` (python3 on the client, as the
tool guard) reads `NAME=VALUE` lines from such a file, removes the file, and execs the tool
with them in its environment.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from cephscope.runner.benchmarks.base import BenchmarkError
from cephscope.runner.hostexec import HostExec, HostExecError

TEMP_PREFIX = "cephscope-keys-"
REMOTE_TIMEOUT_SECONDS = 60.0
# `python3 -c REMOTE_WRITE NAME` with the content on stdin: prints the file's path.
REMOTE_WRITE = """\
import os, sys, tempfile
directory = tempfile.mkdtemp(prefix=PREFIX)
path = os.path.join(directory, os.path.basename(sys.argv[1]))
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
with os.fdopen(fd, "wb") as out:
    out.write(sys.stdin.buffer.read())
print(path)
""".replace("PREFIX", repr(TEMP_PREFIX))
# `python3 -c REMOTE_REMOVE PATH`: removes the file and its directory, only if they are one
# REMOTE_WRITE made (a private directory of that prefix under the temporary directory).
REMOTE_REMOVE = """\
import os, shutil, sys, tempfile
path = os.path.realpath(sys.argv[1])
directory = os.path.dirname(path)
if (os.path.dirname(directory) != os.path.realpath(tempfile.gettempdir())
        or not os.path.basename(directory).startswith(PREFIX)):
    sys.exit("not a cephscope key file: " + sys.argv[1])
shutil.rmtree(directory, ignore_errors=True)
""".replace("PREFIX", repr(TEMP_PREFIX))
# `python3 -c ENV_LAUNCHER FILE TOOL ARGS…`: FILE's NAME=VALUE lines into the environment,
# FILE removed (its directory too), then TOOL exec'd in place of this process.
ENV_LAUNCHER = """\
import os, shutil, sys
path = sys.argv[1]
with open(path) as keys:
    for line in keys.read().splitlines():
        name, sep, value = line.partition("=")
        if sep:
            os.environ[name] = value
shutil.rmtree(os.path.dirname(os.path.realpath(path)), ignore_errors=True)
os.execvp(sys.argv[2], sys.argv[2:])
"""


@dataclass(frozen=True)
class PrivateFile:
    """A key file: its path on `host` (None: this machine)."""

    host: HostExec | None
    path: str


def write_local(path: Path, content: str) -> PrivateFile:
    """`path` with `content`, mode 0600 from its creation (an old file is replaced)."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(content)
    return PrivateFile(None, str(path))


def place(host: HostExec | None, name: str, content: str, local_dir: Path) -> PrivateFile:
    """The file `name` with `content` on `host` (in `local_dir` on this machine)."""
    if host is None:
        return write_local(local_dir / name, content)
    try:
        done = host.run(["python3", "-c", REMOTE_WRITE, name], timeout=REMOTE_TIMEOUT_SECONDS,
                        input=content.encode())
    except HostExecError as exc:
        raise BenchmarkError(f"cannot write the tool's key file on {host.name}: {exc}") from exc
    path = done.stdout.decode(errors="replace").strip()
    if not path.startswith("/") or "\n" in path:
        raise BenchmarkError(f"cannot write the tool's key file on {host.name}: got {path!r}")
    return PrivateFile(host, path)


def remove(private: PrivateFile) -> None:
    """Delete it (and its private directory on a client); an error names the host."""
    if private.host is None:
        Path(private.path).unlink(missing_ok=True)
        return
    try:
        private.host.run(["python3", "-c", REMOTE_REMOVE, private.path],
                         timeout=REMOTE_TIMEOUT_SECONDS)
    except HostExecError as exc:
        raise BenchmarkError(f"cannot remove the tool's key file {private.path} on "
                             f"{private.host.name}: {exc}") from exc


def env_file_content(env: dict[str, str]) -> str:
    """NAME=VALUE lines for ENV_LAUNCHER (the values were checked to hold no line break)."""
    return "".join(f"{name}={value}\n" for name, value in env.items())
