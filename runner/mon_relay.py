"""Mon commands through another release's own librados, for a cluster whose client tools live
in a root filesystem (a dev cluster of another Ceph release).

The release's python3-rados is built for the release's own Python (Debian trixie/sid: 3.13),
which this machine's Python cannot load. So the runner starts this file's `relay_main` under
the release's python3, through the same argv prefix that runs its rados bench and fio
(`CephTarget.tool_prefix`), and talks to it over stdin/stdout, one JSON line per request and
per reply. `RelayedRados` is the runner's side: it quacks like a connected `rados.Rados`
(`mon_command`, `shutdown`), so `cephscope.monclient.mon_command` uses it unchanged and every
mon command keeps librados' speed (~1 ms, not the CLI's ~1 s).

`relay_main` uses the standard library and `rados` only: its source is handed to
`python3 -c`, with nothing of cephscope installed on the other side.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import select
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from typing import IO, Any

from cephscope.monclient import MonCallError, MonCommandError, MonTimeout, client_conf

# Seconds the relay is given beyond a command's own timeout before it is taken for hung.
REPLY_GRACE_SECONDS = 15.0


def relay_main() -> int:
    """Runs on the other side: argv = conf, client name, keyring ('' = the conf's), timeout,
    the handle's bounding options as JSON (`cephscope.monclient.client_conf`)."""
    import json as json_
    import sys as sys_

    def reply(message: dict) -> None:
        sys_.stdout.write(json_.dumps(message) + "\n")
        sys_.stdout.flush()

    conffile, name, keyring, timeout, options = sys_.argv[1:6]
    try:
        import rados

        conf = json_.loads(options)
        if keyring:
            conf["keyring"] = keyring
        cluster = rados.Rados(conffile=conffile, name=name, conf=conf)
        cluster.connect(timeout=int(timeout))
    except Exception as exc:  # the reason goes to the runner, which names the cluster
        reply({"error": f"{type(exc).__name__}: {exc}"})
        return 1
    try:  # named in the runner's errors ("no mon answered at ...")
        mon_host = cluster.conf_get("mon_host")
    except Exception:
        mon_host = ""
    reply({"ready": True, "python": sys_.version.split()[0], "rados_module": rados.__file__,
           "executable": sys_.executable, "mon_host": mon_host})
    for line in sys_.stdin:
        try:
            request = json_.loads(line)
            ret, outb, outs = cluster.mon_command(request["cmd"], b"",
                                                  timeout=int(request["timeout"]))
            # latin-1 maps every byte to one character: outb comes back byte for byte
            reply({"ret": ret, "outb": outb.decode("latin-1"), "outs": outs})
        except Exception as exc:
            reply({"error": f"{type(exc).__name__}: {exc}"})
    cluster.shutdown()
    return 0


def relay_source() -> str:
    """The program handed to the other side's `python3 -c`."""
    return (inspect.getsource(relay_main)
            + "\nimport sys\nsys.exit(relay_main())\n")


class RelayedRados:
    """A mon connection held by `relay_main` running under `prefix` (e.g. the rootexec argv of
    a release's root filesystem). Thread-safe: one request at a time."""

    def __init__(self, prefix: Sequence[str], conffile: str, name: str, keyring: str | None,
                 timeout_seconds: float = 15.0, python: str = "python3",
                 reply_grace_seconds: float = REPLY_GRACE_SECONDS) -> None:
        self.prefix = tuple(prefix)
        # the relay's handle is bounded like the runner's own: its mon ops end with ETIMEDOUT
        self.argv = [*self.prefix, python, "-c", relay_source(), conffile, name, keyring or "",
                     str(max(int(timeout_seconds), 1)), json.dumps(client_conf(timeout_seconds))]
        self.reply_grace_seconds = reply_grace_seconds
        self._lock = threading.Lock()
        # stderr to a file, not a pipe: librados may log a lot, and nobody drains a pipe
        self._stderr: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 (closed in shutdown)
        try:
            self._proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, stderr=self._stderr)
        except OSError as exc:
            self._stderr.close()
            raise MonCommandError(f"cannot start the mon relay ({self.argv[0]}): "
                                  f"{exc.strerror}") from exc
        try:
            ready = self._read(timeout_seconds + reply_grace_seconds)
        except MonCommandError as exc:
            self.shutdown()
            # a relay that never answered keeps its type: no mon answered the mount
            error = MonTimeout if isinstance(exc, MonTimeout) else MonCommandError
            raise error(f"cannot connect to the cluster of {conffile} as {name} "
                        f"through {' '.join(self.prefix[-3:]) or 'python3'}: {exc}") from exc
        if "error" in ready:
            self.shutdown()
            raise MonCommandError(f"cannot connect to the cluster of {conffile} as {name}: "
                                  f"{ready['error']}")
        # where the client library came from (recorded in the run's environment)
        self.mon_host = str(ready.get("mon_host") or "")
        self.client_info: dict[str, Any] = {k: v for k, v in ready.items()
                                            if k not in ("ready", "mon_host")}

    def conf_get(self, option: str) -> str | None:
        """`rados.Rados.conf_get`, for the one option errors name (`mon_host`)."""
        return self.mon_host if option == "mon_host" else None

    def _stderr_tail(self) -> str:
        with contextlib.suppress(OSError, ValueError):
            self._stderr.seek(0)
            lines = self._stderr.read().decode(errors="replace").strip().splitlines()
            return " | ".join(lines[-3:])
        return ""

    def _read(self, timeout: float) -> dict[str, Any]:
        stdout = self._proc.stdout
        if stdout is None:  # started with a pipe: never; says so if that changes
            raise MonCallError("the mon relay has no output pipe")
        ready, _, _ = select.select([stdout], [], [], timeout)
        if not ready:
            raise MonTimeout(f"the mon relay gave no answer within {timeout:.0f} s")
        line = stdout.readline()
        if not line:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(5)
            raise MonCallError(f"the mon relay ended (exit status {self._proc.returncode}): "
                               f"{self._stderr_tail() or 'no message'}")
        try:
            message = json.loads(line)
        except ValueError as exc:
            raise MonCallError(f"the mon relay answered something that is not JSON: "
                               f"{line[:80]!r}") from exc
        if not isinstance(message, dict):
            raise MonCallError(f"the mon relay answered {message!r}")
        return message

    def mon_command(self, cmd: str, inbuf: bytes, timeout: int = 0) -> tuple[int, bytes, str]:
        """`rados.Rados.mon_command`'s contract; raises on a broken relay."""
        with self._lock:
            if self._proc.poll() is not None:
                raise MonCallError(f"the mon relay is gone (exit status {self._proc.returncode}): "
                                   f"{self._stderr_tail() or 'no message'}")
            stdin = self._proc.stdin
            if stdin is None:  # started with a pipe: never; says so if that changes
                raise MonCallError("the mon relay has no input pipe")
            try:
                stdin.write((json.dumps({"cmd": cmd, "timeout": timeout}) + "\n")
                                       .encode())
                stdin.flush()
            except OSError as exc:
                raise MonCallError(f"the mon relay is gone: {exc}") from exc
            reply = self._read(timeout + self.reply_grace_seconds)
        if "error" in reply:
            raise MonCallError(str(reply["error"]))
        return int(reply["ret"]), str(reply["outb"]).encode("latin-1"), str(reply["outs"])

    def shutdown(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            if self._proc.stdin is not None:
                self._proc.stdin.close()
        try:
            self._proc.wait(10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(10)
        if self._proc.stdout is not None:
            self._proc.stdout.close()
        self._stderr.close()
