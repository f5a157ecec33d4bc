"""Mon commands sent together (deploy/mon_batch.py): the program handed to `python3 -c` run for
real against a stand-in `rados` module (every command of a wave in flight at once, waves in
order, nothing after a failure), and what its answers are taken to mean."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cephscope.deploy.mon_batch import MonBatchError, batch_argv, batch_input, read_answers

# A `rados` whose mon answers each command after 0.3 s and logs when it started and ended;
# "osd pool create bad" fails with EINVAL as the mon would; "connect" fails when asked to.
STAND_IN_RADOS = '''
import json, os, threading, time
LOG = os.environ["BATCH_LOG"]
lock = threading.Lock()

class Rados:
    def __init__(self, conffile, name, conf):
        self.args = (conffile, name, conf)

    def connect(self, timeout):
        if os.environ.get("BATCH_REFUSE"):
            raise OSError("no mon answered")

    def mon_command(self, cmd, inbuf, timeout):
        started = time.monotonic()
        time.sleep(0.3)
        command = json.loads(cmd)
        with lock, open(LOG, "a") as log:
            log.write(json.dumps([command, started, time.monotonic(), self.args[1]]) + "\\n")
        if command.get("pool") == "bad":
            return -22, b"", "Error EINVAL: pool 'bad' is bad"
        return 0, json.dumps({"echo": command["prefix"]}).encode(), ""

    def shutdown(self):
        pass
'''


def run_batch(tmp_path: Path, waves: list[list[dict[str, Any]]],
              refuse: bool = False) -> tuple[bytes, list[list[Any]]]:
    (tmp_path / "rados.py").write_text(STAND_IN_RADOS)
    log = tmp_path / "log.jsonl"
    argv = batch_argv(str(tmp_path / "ceph.conf"))
    argv[0] = sys.executable  # this interpreter, with the stand-in first on its path
    env = {"PYTHONPATH": str(tmp_path), "BATCH_LOG": str(log), **({"BATCH_REFUSE": "1"} if refuse else {})}
    proc = subprocess.run(argv, input=batch_input(waves), capture_output=True, timeout=30, env=env,
                          check=False)
    entries = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return proc.stdout, entries


def test_a_waves_commands_are_in_flight_together_and_waves_follow_each_other(tmp_path: Path) -> None:
    waves = [[{"prefix": "osd pool create", "pool": f"p{i}"} for i in range(4)],
             [{"prefix": "fs new", "fs_name": "cephfs"}]]
    stdout, log = run_batch(tmp_path, waves)
    assert read_answers(waves, stdout) == [[{"echo": "osd pool create"}] * 4, [{"echo": "fs new"}]]
    first, second = log[:4], log[4:]
    assert sorted(e[0]["pool"] for e in first) == ["p0", "p1", "p2", "p3"]
    # all four started before any ended (0.3 s each): they were sent at once
    assert max(e[1] for e in first) < min(e[2] for e in first)
    assert second[0][0]["prefix"] == "fs new" and second[0][1] >= max(e[2] for e in first)
    assert {e[3] for e in log} == {"client.admin"}


def test_nothing_is_sent_after_a_wave_with_a_failure(tmp_path: Path) -> None:
    waves = [[{"prefix": "osd pool create", "pool": "good"}, {"prefix": "osd pool create", "pool": "bad"}],
             [{"prefix": "fs new", "fs_name": "cephfs"}]]
    stdout, log = run_batch(tmp_path, waves)
    assert sorted(e[0]["pool"] for e in log) == ["bad", "good"]
    said = r"^`ceph osd pool create` failed: Error EINVAL: pool 'bad' is bad$"
    with pytest.raises(MonBatchError, match=said):
        read_answers(waves, stdout)


def test_a_batch_that_cannot_connect_says_so(tmp_path: Path) -> None:
    waves = [[{"prefix": "osd pool create", "pool": "p"}]]
    stdout, log = run_batch(tmp_path, waves, refuse=True)
    assert log == []
    with pytest.raises(MonBatchError, match="could not connect: OSError: no mon answered"):
        read_answers(waves, stdout)


@pytest.mark.parametrize(("stdout", "problem"), [
    (b"Traceback (most recent call last):", "answered no JSON"),
    (b"[]", "no JSON object"),
    (b'{"answers": "many"}', "without answers"),
    (b'{"answers": [[], [], []]}', "without answers"),  # more waves than were sent
    (b'{"answers": [[{"ret": 0, "outb": ""}]]}', r"no wave for `fs new`"),  # a wave missing
    (b'{"answers": [[{"ret": 0, "outb": ""}], ["garbage"]]}', r"`ceph fs new` failed: garbage"),
])
def test_answers_that_are_not_the_batchs_are_refused(stdout: bytes, problem: str) -> None:
    waves = [[{"prefix": "osd pool create"}], [{"prefix": "fs new"}]]
    with pytest.raises(MonBatchError, match=problem):
        read_answers(waves, stdout)


def test_a_reply_that_is_not_json_is_kept_as_text() -> None:
    waves = [[{"prefix": "auth get-or-create"}, {"prefix": "fs new"}]]
    stdout = json.dumps({"answers": [[{"ret": 0, "outb": "[client.x]\n\tkey = K\n", "outs": ""},
                                      {"ret": 0, "outb": "", "outs": "new fs"}]]}).encode()
    assert read_answers(waves, stdout) == [["[client.x]\n\tkey = K\n", None]]
