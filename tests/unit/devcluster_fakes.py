"""Recording fakes of the dev cluster's parts (deploy/cluster_parts.py), for unit tests of
what happens in which order without a cluster. Every fake writes into one shared `Journal`."""

from __future__ import annotations

import itertools
import json
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cephscope.deploy.cluster_bootstrap import ClusterBootstrap
from cephscope.deploy.cluster_commands import ClusterCommands
from cephscope.deploy.cluster_health import ClusterHealth
from cephscope.deploy.cluster_layout import ClusterLayout, DevClusterError, OsdBacking
from cephscope.deploy.cluster_parts import ClusterParts, PartsFactory
from cephscope.deploy.cluster_preflight import ClusterPreflight
from cephscope.deploy.cluster_services import ClusterServices
from cephscope.deploy.mon_batch import PYTHON as MON_BATCH_PYTHON
from cephscope.deploy.placement import DevHost, Placement, Release


@dataclass
class Journal:
    """What the fakes were asked to do, in order (thread-safe: OSDs start in parallel)."""

    events: list[tuple[Any, ...]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, *event: Any) -> None:
        with self.lock:
            self.events.append(event)

    def kinds(self, *kinds: str) -> list[tuple[Any, ...]]:
        return [e for e in self.events if e[0] in kinds]

    def index(self, *event: Any) -> int:
        return self.events.index(event)

    def indices(self, kind: str, predicate: Callable[[tuple[Any, ...]], bool] = lambda e: True) -> list[int]:
        return [i for i, e in enumerate(self.events) if e[0] == kind and predicate(e)]

    def mon_waves(self) -> list[tuple[int, list[list[dict[str, Any]]]]]:
        """Every mon batch run (deploy/mon_batch.py): its index in `events` and its waves."""
        return [(i, json.loads(e[3])["waves"]) for i, e in enumerate(self.events)
                if e[0] == "run" and e[2][:2] == (MON_BATCH_PYTHON, "-c")]

    def mon_commands(self, prefix: str) -> list[tuple[int, int, dict[str, Any]]]:
        """(event index, wave number, command) of every batched mon command with `prefix`."""
        return [(i, n, command) for i, waves in self.mon_waves() for n, wave in enumerate(waves)
                for command in wave if command["prefix"] == prefix]


class FakeRunner(Placement):
    """Commands as the real tools would answer them, without running any: `ceph-authtool
    --gen-print-key` prints a key, `ceph osd new` the next OSD id, `ceph health` HEALTH_OK,
    `radosgw-admin user create` and `subuser create` a user with fresh keys (as radosgw-admin's
    JSON has them; `rgw_answer` replaces that answer), a mon batch (deploy/mon_batch.py) success
    with new keys for `auth get-or-create`, everything else nothing."""

    def __init__(self, state_dir: Path, journal: Journal, rgw_answer: bytes | None = None) -> None:
        super().__init__(state_dir)
        self.journal = journal
        self.rgw_answer = rgw_answer
        self._osd_ids = itertools.count()
        self._keys = itertools.count(1)
        self._mon_keys = itertools.count(1)

    def run(self, host: DevHost, release: Release, argv: Sequence[str], timeout: float = 60,
            input_bytes: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
        self.journal.add("run", host.name, tuple(argv), input_bytes)
        out = b""
        if "--gen-print-key" in argv:
            out = b"AQBfakefakefakefakefakefakefakefakefake==\n"
        elif list(argv[:1]) == ["ceph"] and "osd" in argv and "new" in argv:
            out = f"{next(self._osd_ids)}\n".encode()
        elif list(argv[:1]) == ["ceph"] and "health" in argv and "json" in argv:
            out = b'{"status": "HEALTH_OK", "checks": {}}'
        elif list(argv[:1]) == ["radosgw-admin"]:
            out = self.rgw_answer if self.rgw_answer is not None else self._rgw_user(argv)
        elif list(argv[:2]) == [MON_BATCH_PYTHON, "-c"]:
            out = self._mon_batch(json.loads(input_bytes or b"{}")["waves"])
        return subprocess.CompletedProcess(list(argv), 0, out, b"")

    def _mon_batch(self, waves: list[list[dict[str, Any]]]) -> bytes:
        """Every command succeeds; `auth get-or-create` answers the entity's new key."""
        answers = []
        for wave in waves:
            replies = []
            for command in wave:
                outb = ""
                if command["prefix"] == "auth get-or-create":
                    outb = json.dumps([{"entity": command["entity"], "caps": {},
                                        "key": f"AQBkey{next(self._mon_keys)}fakefakefake=="}])
                replies.append({"ret": 0, "outs": "", "outb": outb})
            answers.append(replies)
        return json.dumps({"answers": answers}).encode()

    def _rgw_user(self, argv: Sequence[str]) -> bytes:
        uid = argv[argv.index("--uid") + 1]
        answer: dict[str, Any] = {"user_id": uid, "keys": [], "swift_keys": []}
        if "user" in argv:
            answer["keys"] = [{"user": uid, "access_key": f"ACCESS{next(self._keys)}",
                               "secret_key": f"secret{next(self._keys)}"}]
        if "subuser" in argv:
            answer["keys"] = [{"user": uid, "access_key": "ACCESS0", "secret_key": "secret0"}]
            answer["swift_keys"] = [{"user": argv[argv.index("--subuser") + 1],
                                     "secret_key": f"swift{next(self._keys)}"}]
        return json.dumps(answer).encode()


class RecordingDaemons:
    """A `DaemonPlacement` that starts nothing: it records each start (with whether the
    cluster's record existed then and which loop devices it named) and stop, and answers `pid`
    for what it "runs". Daemons in `fail` do not start."""

    def __init__(self, layout: ClusterLayout, journal: Journal, fail: frozenset[str] = frozenset()) -> None:
        self.layout = layout
        self.journal = journal
        self.fail = fail
        self.running: dict[str, int] = {}
        self._pids = itertools.count(1000)

    def host_of(self, daemon: str) -> DevHost:
        return self.layout.host_of(daemon)

    def start(self, daemon: str, env: Mapping[str, str] | None = None) -> None:
        recorded = self.layout.state_file.exists()
        loops = tuple(o.loop_device for o in self.layout.load_state().osds) if recorded else ()
        self.journal.add("start", daemon, dict(env or {}), recorded, loops)
        if daemon in self.fail:
            raise DevClusterError(f"{daemon} did not start")
        self.running[daemon] = next(self._pids)

    def stop(self, daemon: str, timeout: float = 30) -> bool:
        was_running = self.running.pop(daemon, None) is not None
        self.journal.add("stop", daemon, was_running, timeout)
        return was_running

    def pid(self, daemon: str) -> int | None:
        return self.running.get(daemon)


class RecordingLoops:
    """Loop devices that are numbers in the journal."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal
        self._numbers = itertools.count(40)

    def unavailable(self) -> str | None:
        return None

    def attach(self, image: Path) -> str:
        device = f"/dev/loop{next(self._numbers)}"
        self.journal.add("attach", Path(image).name, device)
        return device

    def detach(self, backing: OsdBacking) -> None:
        self.journal.add("detach", backing.loop_device)

    def detach_under(self, directory: Path) -> list[str]:
        self.journal.add("detach_under", directory)
        return []


class RecordingHealth(ClusterHealth):
    """Every wait returns at once, recorded."""

    def __init__(self, layout: ClusterLayout, commands: ClusterCommands, journal: Journal) -> None:
        super().__init__(layout, commands, log=lambda msg: None)
        self.journal = journal

    def wait_osds_up(self, ids: Any, timeout: float) -> None:
        self.journal.add("wait_osds_up", tuple(ids))

    def wait_asok(self, ids: Any, timeout: float) -> None:
        self.journal.add("wait_asok", tuple(ids))

    def wait_mds_active(self, fs_name: str, mds_name: str, timeout: float) -> None:
        self.journal.add("wait_mds_active", fs_name, mds_name)

    def wait_http(self, url: str, what: str, timeout: float) -> None:
        self.journal.add("wait_http", url, what)

    def wait_health_ok(self, timeout: float = 120) -> None:
        self.journal.add("wait_health_ok")

    def wait_pgs_active_clean(self, timeout: float = 120) -> None:
        self.journal.add("wait_pgs_active_clean")


class QuietPreflight(ClusterPreflight):
    """The real preflight minus what depends on this machine (installed programs, free ports,
    kernel AIO contexts)."""

    def __init__(self, layout: ClusterLayout, journal: Journal) -> None:
        super().__init__(layout, lambda: None, log=lambda msg: None)
        self.journal = journal

    def check_binaries(self) -> None:
        self.journal.add("check_binaries")

    def check_ports(self) -> None:
        self.journal.add("check_ports")

    def check_aio_headroom(self) -> None:
        self.journal.add("check_aio_headroom")


def recording_parts(journal: Journal, fail: frozenset[str] = frozenset(),
                    rgw_answer: bytes | None = None) -> PartsFactory:
    """A parts factory for `DevCluster(..., parts=…)` whose parts all write into `journal`
    (`rgw_answer`: what radosgw-admin answers instead of a user with keys)."""

    def make(layout: ClusterLayout, log: Callable[[str], None]) -> ClusterParts:
        commands = ClusterCommands(layout, FakeRunner(layout.state_dir, journal, rgw_answer))
        daemons = RecordingDaemons(layout, journal, fail)
        loops = RecordingLoops(journal)
        health = RecordingHealth(layout, commands, journal)
        return ClusterParts(
            commands=commands, daemons=daemons, loops=loops, health=health,
            preflight=QuietPreflight(layout, journal),
            bootstrap=ClusterBootstrap(layout, commands, daemons, loops, health, log),
            services=ClusterServices(layout, commands, daemons, health, log),
            hosts=None,
        )

    return make
