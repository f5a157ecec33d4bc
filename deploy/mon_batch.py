"""Mon commands sent together, from the dev cluster's own release: one process, waves of
commands, every command of a wave in flight at once.

Why: the mon commits changes at most once per `paxos_propose_interval` (1 s), so commands sent
one after another each wait for their own commit while commands in flight together share one;
and each `ceph` CLI costs ~0.3 s of CPU to start, which on a loaded 2-core machine turned two
rounds of 11 CLIs into 25 s. Here one `python3` with the release's python3-rados (this
machine's /usr/bin/python3, or the release root's, through the same `Placement` as every other
command) connects once and sends each wave's commands from threads; a wave starts when the one
before has been answered, and none starts after a failure.

`batch_main` uses the standard library and `rados` only: its source is handed to `python3 -c`.
Commands travel as JSON on stdin, answers as JSON on stdout; keys made by `auth get-or-create`
come back on that pipe, never on a command line.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Sequence
from typing import Any

# Debian's interpreter, the one python3-rados is built for (the default python3 on PATH here
# may be another); a release root has its own at the same path.
PYTHON = "/usr/bin/python3"
MON_OP_TIMEOUT_SECONDS = 60


class MonBatchError(RuntimeError):
    """A command of the batch failed, or the batch answered something unreadable."""


def batch_main() -> int:
    """Runs on the other side: argv = conf, mon op timeout; stdin = {"waves": [[cmd, ...], ...]};
    stdout = {"answers": [[{"ret", "outs", "outb"}, ...], ...]} or {"error": ...}."""
    import json as json_
    import sys as sys_
    import threading

    conffile, timeout = sys_.argv[1], sys_.argv[2]
    waves = json_.load(sys_.stdin)["waves"]
    try:
        import rados

        cluster = rados.Rados(conffile=conffile, name="client.admin",
                              conf={"client_mount_timeout": timeout, "rados_mon_op_timeout": timeout})
        cluster.connect(timeout=int(timeout))
    except Exception as exc:
        sys_.stdout.write(json_.dumps({"error": f"{type(exc).__name__}: {exc}"}))
        return 1
    answers = []
    for wave in waves:
        replies = [None] * len(wave)

        def send(index, command, replies=replies):
            try:
                ret, outb, outs = cluster.mon_command(json_.dumps(command), b"", timeout=int(timeout))
                replies[index] = {"ret": ret, "outs": outs, "outb": outb.decode("utf-8", "replace")}
            except Exception as exc:
                replies[index] = {"ret": -1, "outs": f"{type(exc).__name__}: {exc}", "outb": ""}

        threads = [threading.Thread(target=send, args=(i, c)) for i, c in enumerate(wave)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        answers.append(replies)
        if any(r["ret"] != 0 for r in replies):
            break
    cluster.shutdown()
    sys_.stdout.write(json_.dumps({"answers": answers}))
    return 0


def batch_argv(conf_path: str) -> list[str]:
    source = inspect.getsource(batch_main) + "\nimport sys\nsys.exit(batch_main())\n"
    return [PYTHON, "-c", source, conf_path, str(MON_OP_TIMEOUT_SECONDS)]


def batch_input(waves: Sequence[Sequence[dict[str, Any]]]) -> bytes:
    return json.dumps({"waves": [list(w) for w in waves]}).encode()


def read_answers(waves: Sequence[Sequence[dict[str, Any]]], stdout: bytes) -> list[list[Any]]:
    """Each command's reply (its JSON, or its text when it is not JSON), wave by wave; the first
    failure (or an answer that is not the batch's) as MonBatchError naming the command."""
    try:
        reply = json.loads(stdout)
    except ValueError as exc:
        raise MonBatchError(f"mon batch answered no JSON: {stdout[:80]!r}") from exc
    if not isinstance(reply, dict):
        raise MonBatchError("mon batch answered no JSON object")
    if "error" in reply:
        raise MonBatchError(f"mon batch could not connect: {reply['error']}")
    answers = reply.get("answers")
    if not isinstance(answers, list) or len(answers) > len(waves):
        raise MonBatchError("mon batch answered without answers")
    results: list[list[Any]] = []
    for wave, replies in zip(waves, [*answers, *[None] * (len(waves) - len(answers))], strict=True):
        if not isinstance(replies, list) or len(replies) != len(wave):
            raise MonBatchError(f"mon batch answered no wave for `{wave[0].get('prefix')}` …")
        wave_results = []
        for command, answer in zip(wave, replies, strict=True):
            if not isinstance(answer, dict) or answer.get("ret") != 0:
                outs = str(answer.get("outs") if isinstance(answer, dict) else answer).strip()
                raise MonBatchError(f"`ceph {command.get('prefix')}` failed: {outs}")
            outb = str(answer.get("outb") or "")
            try:
                wave_results.append(json.loads(outb) if outb.strip() else None)
            except ValueError:
                wave_results.append(outb)
        results.append(wave_results)
    return results
