"""The `ceph_config` knob: options in the mon's config database, applied per step.

Options are set for the `osd` section (`ceph config set osd K V`). Whether an option needs an
OSD restart is Ceph's answer, not ours: `ceph config help OPTION --format json` carries
`can_update_at_runtime` (and the `startup` flag) in Pacific. The running value is verified on
every OSD through its admin socket (`config get`), falling back to `ceph tell osd.N config get`
when the socket is not on this host. Restarts go through `cephscope.runner.restart`.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cephscope.exporter.asok import AsokClient, AsokError, decode_response
from cephscope.runner.cephclient import CephCli, CephError
from cephscope.runner.crashpoints import Checkpoint, no_checkpoint
from cephscope.runner.restart import OsdRestarter, RestartJournal, RestartMethod

CONFIG_SECTION = "osd"
Log = Callable[[str], None]


class ConfigVerifyError(CephError):
    """A step's config value did not take on some OSD."""


# --------------------------------------------------------------------------- values


def values_equal(expected: Any, running: str, option_type: str | None = None) -> bool:
    """Compare a spec value with the string a daemon reports for it."""
    running = str(running).strip()
    if isinstance(expected, bool) or option_type == "bool":
        want = str(expected).strip().lower() in ("true", "1", "yes", "on")
        return running.lower() in (("true", "1", "yes", "on") if want
                                   else ("false", "0", "no", "off"))
    if isinstance(expected, int | float):
        try:
            got = float(running)
        except ValueError:
            return False
        return math.isclose(got, float(expected), rel_tol=1e-9, abs_tol=1e-12)
    if str(expected) == running:
        return True
    try:  # "4" vs "4.0", "0.5" vs ".5" for a string-typed spec value
        return math.isclose(float(str(expected)), float(running), rel_tol=1e-9)
    except ValueError:
        return False


def format_config_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# --------------------------------------------------------------------------- config manager


@dataclass
class ApplyReport:
    """What applying one step's config took (seconds) and whether OSDs were restarted."""

    restarted: bool = False
    set_seconds: float = 0.0
    restart_seconds: float = 0.0
    wait_seconds: float = 0.0
    verify_seconds: float = 0.0
    verified: dict[str, dict[str, str]] = field(default_factory=dict)  # osd -> option -> value

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class ConfigSnapshot:
    """Pre-sweep state of the touched options: mon config db (osd section) and running values."""

    db: dict[str, str | None]  # option -> value set in section osd, None = not set
    running: dict[str, dict[str, str]]  # option -> {"osd.N": running value}
    # option -> {"osd.N": {"value": what the OSD really uses, "from": the option it came
    # from}}: a 0 that stands for the _hdd/_ssd variant resolved (see effective_values)
    effective: dict[str, dict[str, dict[str, str]]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"db": self.db, "running": self.running, "effective": self.effective}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ConfigSnapshot:
        return cls(db=dict(d.get("db", {})), running={k: dict(v) for k, v in
                                                       d.get("running", {}).items()},
                   effective={k: {o: dict(e) for o, e in v.items()}
                              for k, v in (d.get("effective") or {}).items()})


class ConfigManager:
    """Applies ceph_config per step, restarting OSDs for options that need it."""

    def __init__(self, cli: CephCli, restart_method: RestartMethod | None,
                 osd_asok: Callable[[int], Path | None], *, rolling: bool = False,
                 timeout_seconds: float = 600.0, log: Log = print,
                 poll_seconds: float = 0.5, checkpoint: Checkpoint = no_checkpoint,
                 restart_journal: RestartJournal | None = None) -> None:
        self.cli = cli
        self.osd_asok = osd_asok
        self.restarter = OsdRestarter(cli, restart_method, osd_asok, rolling=rolling,
                                      timeout_seconds=timeout_seconds, poll_seconds=poll_seconds,
                                      checkpoint=checkpoint, journal=restart_journal)
        self.checkpoint = checkpoint
        self.log = log
        self.poll_seconds = poll_seconds
        self._option_info: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._osd_ids: list[int] | None = None
        # osd -> (pid, option -> value the process started with); see remember_started_values
        self._started_with: dict[int, tuple[int | None, dict[str, str]]] = {}

    # ---- reads (safe before any change) ------------------------------------------------------

    def option_info(self, option: str) -> dict[str, Any]:
        with self._lock:
            if option in self._option_info:
                return self._option_info[option]
        try:
            info = self.cli.command("config help", key=option)
        except CephError as exc:
            if "ENOENT" in str(exc) or "not recognized" in str(exc):
                raise CephError(f"unknown ceph option {option!r}") from exc
            raise
        if not isinstance(info, dict) or info.get("name") != option:
            raise CephError(f"unknown ceph option {option!r} (config help said {info!r:.80})")
        with self._lock:
            self._option_info[option] = info
        return info

    def unknown_options(self, options: Iterable[str]) -> list[str]:
        """Options the cluster does not know (a read; nothing is changed)."""
        unknown = []
        for option in options:
            try:
                self.option_info(option)
            except CephError as exc:
                if "unknown ceph option" not in str(exc):
                    raise
                unknown.append(option)
        return unknown

    def needs_restart(self, option: str) -> bool:
        info = self.option_info(option)
        if "can_update_at_runtime" in info:
            return not bool(info["can_update_at_runtime"])
        return "startup" in (info.get("flags") or [])

    def osd_ids(self) -> list[int]:
        """OSDs that are `in` (the ones a benchmark uses); cached for the sweep."""
        if self._osd_ids is None:
            dump = self.cli.command("osd dump")
            ids = sorted(o["osd"] for o in dump.get("osds", []) if o.get("in") == 1)
            if not ids:
                raise CephError("the cluster has no OSD that is in")
            self._osd_ids = ids
        return list(self._osd_ids)

    def read_running(self, osd_id: int, option: str) -> tuple[str, int | None]:
        """(value from `config get`, pid of the OSD answering; None when not on this host)."""
        path = self.osd_asok(osd_id)
        if path is not None and Path(path).exists():
            client = AsokClient(path, timeout=10.0)
            try:
                raw = client.command_raw("config get", var=option)
                result = decode_response(client.path, "config get", raw.payload)
            except AsokError as exc:
                raise CephError(f"osd.{osd_id}: config get {option} via {path}: {exc}") from exc
            if not isinstance(result, dict) or option not in result:
                raise CephError(f"osd.{osd_id}: config get {option} returned {result!r:.80}")
            return str(result[option]), raw.peer_pid
        # Not on this host: ask through the cluster.
        out = self.cli.json("tell", f"osd.{osd_id}", "config", "get", option, timeout=30)
        if not isinstance(out, dict) or option not in out:
            raise CephError(f"osd.{osd_id}: config get {option} returned {out!r:.80}")
        return str(out[option]), None

    def running_value(self, osd_id: int, option: str) -> str:
        return self.read_running(osd_id, option)[0]

    def running_values(self, options: Iterable[str]) -> dict[str, dict[str, str]]:
        """option -> {"osd.N": value} for every OSD (in parallel)."""
        return self._running_with_pids(options)[0]

    def _running_with_pids(self, options: Iterable[str]
                           ) -> tuple[dict[str, dict[str, str]], dict[int, int | None]]:
        options = list(options)
        ids = self.osd_ids()
        pairs = [(i, o) for i in ids for o in options]
        with ThreadPoolExecutor(max_workers=max(1, min(8, len(pairs)))) as pool:
            answers = list(pool.map(lambda p: self.read_running(*p), pairs))
        result: dict[str, dict[str, str]] = {o: {} for o in options}
        pids: dict[int, int | None] = {}
        for (i, o), (v, pid) in zip(pairs, answers, strict=True):
            result[o][f"osd.{i}"] = v
            pids[i] = pid
        return result, pids

    # ---- what a running OSD really uses ----------------------------------------------------------
    # `config get` reports the config value, and the mon pushes a changed value to running OSDs
    # even for startup options: an OSD started with 3 op shards says 4 after `config set`. So
    # for options that need a restart, "running" means the value the OSD process was started
    # with, known (a) from what config get said right after we restarted it (same pid since), or
    # (b) measured where Ceph shows the effect (op shards: dump_op_pq_state). Unknown = restart.

    def remember_started_values(self, options: Iterable[str]) -> None:
        """Record the current values as what each OSD process started with (call right after a
        restart, or before the sweep changes anything)."""
        options = list(options)
        if not options:
            return
        values, pids = self._running_with_pids(options)
        for osd_id, pid in pids.items():
            known = self._started_with.get(osd_id)
            merged = dict(known[1]) if known and known[0] == pid else {}
            merged.update({o: values[o][f"osd.{osd_id}"] for o in options})
            self._started_with[osd_id] = (pid, merged)

    def measured_value(self, osd_id: int, option: str, want: Any) -> str | None:
        """The value the OSD visibly runs with, when Ceph shows it (None: cannot tell)."""
        if option != "osd_op_num_shards":
            return None
        try:
            if int(str(want)) <= 0:  # 0 = take the _hdd/_ssd variant: not comparable
                return None
        except ValueError:
            return None
        path = self.osd_asok(osd_id)
        if path is None or not Path(path).exists():
            return None
        try:
            state = AsokClient(path, timeout=10.0).command("dump_op_pq_state")
        except AsokError:
            return None
        if not isinstance(state, dict):
            return None
        return str(sum(1 for k in state if str(k).startswith("OSD:ShardedOpWQ:")))

    def osds_needing_restart(self, wanted: Mapping[str, Mapping[str, Any]]) -> list[int]:
        """OSDs whose process does not (provably) run wanted[option][osd]."""
        if not wanted:
            return []
        _values, pids = self._running_with_pids(wanted)
        stale = []
        for osd_id, pid in sorted(pids.items()):
            record = self._started_with.get(osd_id)
            for option, per_osd in wanted.items():
                want = per_osd.get(f"osd.{osd_id}")
                if want is None:
                    continue
                measured = self.measured_value(osd_id, option, want)
                if measured is not None:
                    ok = values_equal(want, measured, self._type(option))
                elif record is not None and record[0] == pid and option in record[1]:
                    ok = values_equal(want, record[1][option], self._type(option))
                else:
                    ok = False  # cannot know what this process started with
                if not ok:
                    stale.append(osd_id)
                    break
        return stale

    def db_values(self, options: Iterable[str]) -> dict[str, str | None]:
        """Values set in the mon config db for section `osd` (None = not set there)."""
        dump = self.cli.command("config dump")
        wanted = set(options)
        found: dict[str, str | None] = dict.fromkeys(wanted)
        for entry in dump or []:
            if entry.get("section") == CONFIG_SECTION and entry.get("name") in wanted \
                    and not entry.get("mask"):
                found[entry["name"]] = str(entry.get("value"))
        return found

    def snapshot(self, options: Iterable[str]) -> ConfigSnapshot:
        """Before any change: the values now are what the OSD processes started with."""
        options = sorted(set(options))
        snap = ConfigSnapshot(db=self.db_values(options), running=self.running_values(options))
        self.remember_started_values([o for o in options if self.needs_restart(o)])
        try:
            snap.effective = self.effective_values(snap.running)
        except CephError as exc:
            # a report without the resolved baseline is still a report: never fail the sweep
            self.log(f"effective pre-sweep values unknown: {exc}")
        return snap

    def effective_values(self, running: Mapping[str, Mapping[str, str]]
                         ) -> dict[str, dict[str, dict[str, str]]]:
        """What every OSD really runs with: an option at 0 whose `_hdd`/`_ssd` variants exist
        (osd_op_num_shards, osd_op_num_threads_per_shard, ...) means the variant for the OSD's
        store (`rotational` in its metadata: what the OSD itself decides by), read from the
        OSD; any other value is its own effective value."""
        rotational: dict[str, bool] | None = None
        out: dict[str, dict[str, dict[str, str]]] = {}
        for option, per_osd in running.items():
            for daemon, value in per_osd.items():
                entry = {"value": str(value), "from": option}
                if str(value) == "0" and self._has_variants(option):
                    if rotational is None:
                        rotational = self._rotational()
                    kind = "hdd" if rotational.get(daemon, True) else "ssd"
                    variant = f"{option}_{kind}"
                    entry = {"value": self.running_value(int(daemon.split(".", 1)[1]), variant),
                             "from": variant}
                out.setdefault(option, {})[daemon] = entry
        return out

    def _has_variants(self, option: str) -> bool:
        try:
            self.option_info(f"{option}_hdd")
            self.option_info(f"{option}_ssd")
        except CephError:
            return False
        return True

    def _rotational(self) -> dict[str, bool]:
        """osd.N -> whether its object store is on a rotational device (OSD metadata)."""
        found = {}
        for meta in self.cli.command("osd metadata") or []:
            if isinstance(meta, dict) and "id" in meta:
                found[f"osd.{meta['id']}"] = str(meta.get("rotational", "1")) == "1"
        return found

    # ---- changes -------------------------------------------------------------------------------

    def set_option(self, option: str, value: Any) -> None:
        self.cli.command("config set", who=CONFIG_SECTION, name=option,
                         value=format_config_value(value))

    def rm_option(self, option: str) -> None:
        self.cli.command("config rm", who=CONFIG_SECTION, name=option)

    def apply(self, config: Mapping[str, Any]) -> ApplyReport:
        """Make every OSD run with `config`; restart only OSDs not (provably) running the
        values of options that need a restart."""
        report = ApplyReport()
        if not config:
            return report
        t0 = time.monotonic()
        restart_opts = [o for o in config if self.needs_restart(o)]
        db = self.db_values(config)
        for option, value in config.items():
            if db.get(option) is None or not values_equal(value, db[option] or ""):
                self.set_option(option, value)
        report.set_seconds = time.monotonic() - t0
        self.checkpoint("config_apply")
        if restart_opts:
            ids = self.osd_ids()
            wanted = {o: {f"osd.{i}": config[o] for i in ids} for o in restart_opts}
            stale = self.osds_needing_restart(wanted)
            if stale:
                self.log(f"restarting osd.{',osd.'.join(map(str, stale))} for "
                         f"{', '.join(restart_opts)} ({'rolling' if self.restarter.rolling else 'parallel'})")
                report.restart_seconds, report.wait_seconds = self.restarter.restart_osds(stale)
                report.restarted = True
        t_verify = time.monotonic()
        # Values propagate from the mon asynchronously: poll until every OSD shows them.
        report.verified = self.verify(config, wait_seconds=30.0)
        if report.restarted:
            self.remember_started_values(restart_opts)
        report.verify_seconds = time.monotonic() - t_verify
        return report

    def _type(self, option: str) -> str | None:
        try:
            return self.option_info(option).get("type")
        except CephError:
            return None

    def verify(self, config: Mapping[str, Any], wait_seconds: float = 0.0) -> dict[str, dict]:
        """Check every OSD runs every value; raise ConfigVerifyError naming what did not take."""
        deadline = time.monotonic() + wait_seconds
        while True:
            try:
                running = self.running_values(config)
            except CephError:
                # an OSD that crashed or is starting does not answer yet: ask again
                if time.monotonic() >= deadline:
                    raise
                time.sleep(self.poll_seconds)
                continue
            wrong = [
                f"{osd}: {o}={v} (wanted {format_config_value(config[o])})"
                for o in config for osd, v in sorted(running[o].items())
                if not values_equal(config[o], v, self._type(o))
            ]
            for o in config:
                for osd in sorted(running[o]):
                    measured = self.measured_value(int(osd.split(".")[1]), o, config[o])
                    if measured is not None and not values_equal(config[o], measured):
                        wrong.append(f"{osd}: {o} runs {measured} (wanted "
                                     f"{format_config_value(config[o])}; config says "
                                     f"{running[o][osd]})")
                    elif measured is not None:
                        running[o][osd] = measured
            if not wrong:
                by_osd: dict[str, dict[str, str]] = {}
                for o, per_osd in running.items():
                    for osd, v in per_osd.items():
                        by_osd.setdefault(osd, {})[o] = v
                return by_osd
            if time.monotonic() >= deadline:
                raise ConfigVerifyError("config did not take: " + "; ".join(wrong))
            time.sleep(self.poll_seconds)

    # ---- restore -------------------------------------------------------------------------------

    def restore(self, snapshot: ConfigSnapshot) -> list[str]:
        """Put back the pre-sweep config db and running values; return problems (never raise)."""
        problems: list[str] = []
        for option, value in snapshot.db.items():
            try:
                if value is None:
                    self.rm_option(option)
                else:
                    self.set_option(option, value)
            except CephError as exc:
                problems.append(f"restore {option}: {exc}")
        self.checkpoint("restore")
        try:
            restart_opts = [o for o in snapshot.running if self.needs_restart(o)]
            stale = self.osds_needing_restart({o: snapshot.running[o] for o in restart_opts})
            if stale:
                self.log(f"restore: restarting osd.{',osd.'.join(map(str, stale))} for "
                         f"{', '.join(restart_opts)}")
                self.restarter.restart_osds(stale)
            deadline = time.monotonic() + 30.0
            while True:
                try:
                    running = self.running_values(snapshot.running)
                except CephError:
                    # an OSD that crashed or is starting does not answer yet: ask again
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(self.poll_seconds)
                    continue
                wrong = [f"{osd}: {o}={v} (pre-sweep {snapshot.running[o][osd]})"
                         for o in snapshot.running for osd, v in sorted(running[o].items())
                         if osd in snapshot.running[o]
                         and not values_equal(snapshot.running[o][osd], v, self._type(o))]
                if not wrong or time.monotonic() > deadline:
                    break
                time.sleep(self.poll_seconds)
            if wrong:
                problems.append("restore did not take: " + "; ".join(wrong))
            elif stale:
                self.remember_started_values(restart_opts)
        except CephError as exc:
            problems.append(f"restore: {exc}")
        return problems
