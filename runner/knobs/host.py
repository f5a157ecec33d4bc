"""Host knobs: `osd_ra`, `block_queue` and `sysctl` — files on the OSD hosts (and clients).

Each is a file a value is written to and read back from: `/sys/block/<dev>/queue/<attr>` of
exactly the devices each OSD uses, or `/proc/sys/<key>`. Devices come from `osd metadata`
(BlueStore block, block.db, block.wal) resolved with the exporter's device resolver on this
machine (partition -> its disk, device-mapper/LVM -> the devices under it, NVMe names as the
kernel has them, a loop device itself); on another host, from the metadata's `devices` (Ceph's
own resolution on that host). Every read and write goes through the host's `HostExec`
(`cat`, `tee`: argv only), so a remote OSD host is reached like a remote client. None of
these needs an OSD restart.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from cephscope.exporter.devices import DeviceResolver
from cephscope.exporter.osdmeta import facts_from_metadata
from cephscope.runner.cephclient import CephCli, CephError
from cephscope.runner.hostexec import HostExec, HostExecError, LocalHost, on_each_host
from cephscope.runner.knobs.base import (
    KIND_BLOCK_QUEUE,
    KIND_OSD_RA,
    KIND_SYSCTL,
    KnobError,
    key_of,
    kind_of,
)
from cephscope.runner.metadata_names import (
    device_name_problem,
    devices_of,
    host_name_problem,
)
from cephscope.runner.spec import QUEUE_ATTRIBUTE, SYSCTL_NAME

CLIENT_HOST = "local"  # benchmarks run on this machine unless the sweep has clients
SYSCTL_ON = ("osds", "clients", "all")
_BRACKETED = re.compile(r"\[([^\]]+)\]")
T = TypeVar("T")


@dataclass(frozen=True)
class HostFile:
    """One file on one host a knob writes; `what` names it in messages."""

    host: str
    path: str
    what: str


class HostFiles:
    """Reads and writes small files on hosts through their HostExec."""

    def __init__(self, host_for: Callable[[str], HostExec], timeout_seconds: float = 30.0) -> None:
        self.host_for = host_for
        self.timeout_seconds = timeout_seconds

    def identity(self, host: str) -> str:
        """Hosts that are this machine are one host (an OSD host named `vm` and the client)."""
        return "this machine" if isinstance(self.host_for(host), LocalHost) else host

    def each(self, targets: Sequence[HostFile], work: Callable[[HostFile], T]) -> list[T]:
        """`work(t)` for every target, in the targets' order: hosts at once, one host's
        targets one after the other (in order: a scheduler before its iosched/ attributes)."""
        by_host: dict[str, list[int]] = {}
        for i, t in enumerate(targets):
            by_host.setdefault(self.identity(t.host), []).append(i)

        def run(indices: list[int]) -> list[tuple[int, T]]:
            return [(i, work(targets[i])) for i in indices]

        done = on_each_host({h: lambda ix=ix: run(ix) for h, ix in by_host.items()})
        found = dict(pair for pairs in done.values() for pair in pairs)
        return [found[i] for i in range(len(targets))]

    def read(self, f: HostFile) -> str:
        try:
            out = self.host_for(f.host).run(["cat", f.path], timeout=self.timeout_seconds)
        except HostExecError as exc:
            raise KnobError(f"{f.what}: cannot read {f.path}: {exc}") from exc
        return out.stdout.decode(errors="replace").strip()

    def writable(self, f: HostFile) -> bool:
        try:
            out = self.host_for(f.host).run(["stat", "-c", "%a", f.path],
                                            timeout=self.timeout_seconds)
        except HostExecError as exc:
            raise KnobError(f"{f.what}: {f.path} does not exist: {exc}") from exc
        mode = out.stdout.decode().strip()
        return len(mode) >= 3 and int(mode[-3]) & 2 == 2

    def write(self, f: HostFile, value: str) -> None:
        try:
            self.host_for(f.host).run(["tee", f.path], input=value.encode(),
                                      timeout=self.timeout_seconds)
        except HostExecError as exc:
            raise KnobError(f"{f.what}: the kernel refused {value!r} for {f.path}: {exc}") from exc


class OsdDevices:
    """hostname -> the block devices whose queues serve that host's OSDs (from `osd metadata`)."""

    def __init__(self, cli: CephCli, host_for: Callable[[str], HostExec],
                 resolver: DeviceResolver | None = None) -> None:
        self.cli = cli
        self.host_for = host_for
        self.resolver = resolver or DeviceResolver()
        self._by_host: dict[str, list[str]] | None = None
        self.problems: list[str] = []

    def by_host(self) -> dict[str, list[str]]:
        if self._by_host is None:
            metadata = self.cli.command("osd metadata")
            if not isinstance(metadata, list):
                raise CephError(f"osd metadata returned {type(metadata).__name__}, not a list")
            found: dict[str, list[str]] = {}
            for entry in metadata:
                if not isinstance(entry, dict):
                    continue
                osd = f"osd.{entry.get('id')}"
                host = str(entry.get("hostname") or "")
                # the metadata is the OSD host's word: a name that is not a host name never
                # becomes an ssh destination (the sweep refuses such a cluster at start; this
                # holds for every other user of the device map too)
                refused = host_name_problem(osd, host) if host else None
                if refused:
                    raise CephError(refused)
                devices = self._devices(osd, host, entry)
                found.setdefault(host, [])
                found[host] += [d for d in devices if d not in found[host]]
            self._by_host = {h: sorted(d) for h, d in found.items() if d}
        return dict(self._by_host)

    def _devices(self, osd: str, host: str, entry: Mapping[str, Any]) -> list[str]:
        if not isinstance(self.host_for(host), LocalHost):
            devices = devices_of(entry)
            refused = [p for p in (device_name_problem(osd, d) for d in devices) if p]
            if refused:
                # becomes /sys/block/<name>/queue/…, written by root: no path of the host's choosing
                raise CephError("; ".join(refused))
            if not devices:
                self.problems.append(f"{osd} on {host}: osd metadata lists no devices")
            return devices
        facts = facts_from_metadata(str(entry.get("id")), entry)
        devices: list[str] = []
        for role, paths in facts.device_paths.items():
            for path in paths:
                res = self.resolver.resolve(path)
                if res.device is not None and res.access == "blk":
                    devices += [d for d in self.resolver.queue_devices(res.device.name)
                                if d not in devices]
                    break
            else:
                self.problems.append(f"{osd} on {host}: its {role} device is not a block "
                                     f"device here ({', '.join(paths) or 'no path'})")
        return devices


class HostFileKnob:
    """A knob whose value lives in a file per target; subclasses say which files and how a
    value reads back."""

    kind = ""

    def __init__(self, files: HostFiles) -> None:
        self.files = files

    def targets(self, setting: str) -> list[HostFile]:
        raise NotImplementedError

    def shown(self, raw: str) -> str:
        """The value as read from the file, as a spec would write it."""
        return " ".join(raw.split())

    def value_problems(self, setting: str, value: Any, target: HostFile, raw: str) -> list[str]:
        return []

    def needs_restart(self, setting: str) -> bool:
        return False

    def _unique(self, targets: Iterable[HostFile]) -> list[HostFile]:
        seen: set[tuple[str, str]] = set()
        unique = []
        for t in targets:
            key = (self.files.identity(t.host), t.path)
            if key not in seen:
                seen.add(key)
                unique.append(t)
        return unique

    def validate(self, values: Mapping[str, list[Any]]) -> list[str]:
        problems: list[str] = []
        for setting, vals in values.items():
            try:
                targets = self.targets(setting)
                if not targets:
                    problems.append(f"{setting}: nothing to set it on")

                def check(t: HostFile, setting: str = setting, vals: list[Any] = vals) -> list[str]:
                    raw = self.files.read(t)
                    if not self.files.writable(t):
                        return [f"{setting}: {t.what}: {t.path} is read-only"]
                    return [f"{setting}: {v!r}: {p}" for v in vals
                            for p in self.value_problems(setting, v, t, raw)]

                for found in self.files.each(targets, check):
                    problems += found
            except (KnobError, CephError) as exc:
                problems.append(f"{setting}: {exc}")
        return list(dict.fromkeys(problems))

    def snapshot(self, settings: Sequence[str]) -> list[dict[str, Any]]:
        entries = []
        for s in settings:
            targets = self.targets(s)
            values = self.files.each(targets, lambda t, s=s: self.snapshot_value(s, t))
            entries += [{"setting": s, "host": t.host, "path": t.path, "what": t.what,
                         "value": value} for t, value in zip(targets, values, strict=True)]
        return entries

    def snapshot_value(self, setting: str, t: HostFile) -> str | None:
        """The value to put back at the end; None: there is nothing to put back."""
        return self.shown(self.files.read(t))

    def _set(self, setting: str, t: HostFile, value: Any) -> str:
        want = format_knob_value(value)
        self.files.write(t, want)
        got = self.shown(self.files.read(t))
        if not same_value(want, got):
            raise KnobError(f"{setting}: {t.what}: wrote {want!r}, {t.path} reads {got!r}")
        return got

    def apply(self, settings: Mapping[str, Any]) -> dict[str, str]:
        verified: dict[str, str] = {}
        for setting in self.order(settings):
            targets = self.targets(setting)
            got = self.files.each(targets, lambda t, s=setting: self._set(s, t, settings[s]))
            verified.update({f"{setting} {t.what}": value
                             for t, value in zip(targets, got, strict=True)})
        return verified

    def order(self, settings: Iterable[str]) -> list[str]:
        return list(settings)

    def restore(self, snapshot: list[dict[str, Any]]) -> list[str]:
        order = {s: i for i, s in enumerate(self.order(dict.fromkeys(e["setting"]
                                                                       for e in snapshot)))}
        entries = sorted(snapshot, key=lambda e: order.get(e["setting"], 0))

        def put_back(t: HostFile, e: dict[str, Any]) -> list[str]:
            if e["value"] is None:
                return []
            try:
                self._set(e["setting"], t, e["value"])
            except KnobError as exc:
                return [f"restore {exc}"]
            return []

        targets = [HostFile(e["host"], e["path"], e.get("what", e["path"])) for e in entries]
        entry_of = dict(zip(targets, entries, strict=True))
        return [p for found in self.files.each(targets, lambda t: put_back(t, entry_of[t]))
                for p in found]


class OsdDeviceKnob(HostFileKnob):
    def __init__(self, files: HostFiles, devices: OsdDevices) -> None:
        super().__init__(files)
        self.devices = devices

    def attribute(self, setting: str) -> str:
        raise NotImplementedError

    def targets(self, setting: str) -> list[HostFile]:
        attr = self.attribute(setting)
        by_host = self.devices.by_host()
        if not by_host:
            raise KnobError("no OSD block device found: "
                            + ("; ".join(self.devices.problems) or "no OSD in osd metadata"))
        return self._unique(HostFile(h, f"/sys/block/{d}/queue/{attr}", f"{h}:{d}")
                            for h, devs in sorted(by_host.items()) for d in devs)


class OsdReadAhead(OsdDeviceKnob):
    """`osd_ra` (CBT's key, KiB): read_ahead_kb of the OSDs' devices."""

    kind = KIND_OSD_RA

    def attribute(self, setting: str) -> str:
        return "read_ahead_kb"

    def value_problems(self, setting: str, value: Any, target: HostFile, raw: str) -> list[str]:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            return ["read-ahead must be a whole number of KiB (0 or more)"]
        return []


class BlockQueue(OsdDeviceKnob):
    """`block_queue.<attr>`: any queue/ or queue/iosched/ attribute of the OSDs' devices."""

    kind = KIND_BLOCK_QUEUE

    def attribute(self, setting: str) -> str:
        attr = key_of(setting)
        if not QUEUE_ATTRIBUTE.match(attr):
            raise KnobError(f"{attr!r} is not a queue attribute name (e.g. scheduler, "
                            f"nr_requests, iosched/read_expire)")
        return attr

    def shown(self, raw: str) -> str:
        chosen = _BRACKETED.search(raw)  # scheduler: "none [mq-deadline] kyber"
        return chosen.group(1) if chosen else super().shown(raw)

    def snapshot_value(self, setting: str, t: HostFile) -> str | None:
        try:
            return super().snapshot_value(setting, t)
        except KnobError:
            if key_of(setting).startswith("iosched/"):
                # the scheduler in use before the sweep has no such attribute: putting that
                # scheduler back takes the attribute away again, nothing else to restore
                return None
            raise

    def order(self, settings: Iterable[str]) -> list[str]:
        # the scheduler first: its iosched/ attributes exist only once it is chosen (and on
        # restore, the pre-sweep scheduler's own attributes only once it is back)
        return sorted(settings, key=lambda s: (key_of(s) != "scheduler", s))

    def validate(self, values: Mapping[str, list[Any]]) -> list[str]:
        sets_scheduler = f"{KIND_BLOCK_QUEUE}.scheduler" in values
        problems = []
        for setting, vals in values.items():
            if key_of(setting).startswith("iosched/") and sets_scheduler:
                # exists only under the chosen scheduler: checked when applied
                try:
                    self.targets(setting)
                except KnobError as exc:
                    problems.append(f"{setting}: {exc}")
                continue
            problems += super().validate({setting: vals})
        return problems

    def value_problems(self, setting: str, value: Any, target: HostFile, raw: str) -> list[str]:
        if key_of(setting) == "scheduler":
            choices = raw.replace("[", "").replace("]", "").split()
            if str(value) not in choices:
                return [f"{target.what} offers the schedulers {', '.join(choices)}"]
        elif isinstance(value, bool) or not isinstance(value, int | str):
            return ["must be a number or a word"]
        return []


class Sysctl(HostFileKnob):
    """`sysctl.<key>`: /proc/sys/<key> on OSD hosts, clients or both (`on:`)."""

    kind = KIND_SYSCTL

    def __init__(self, files: HostFiles, devices: OsdDevices,
                 on: Mapping[str, str] | None = None,
                 client_hosts: Sequence[str] = (CLIENT_HOST,)) -> None:
        super().__init__(files)
        self.devices = devices
        self.on = dict(on or {})
        self.client_hosts = list(client_hosts)

    def targets(self, setting: str) -> list[HostFile]:
        key = key_of(setting)
        if not SYSCTL_NAME.match(key) or ".." in key:
            raise KnobError(f"{key!r} is not a sysctl name (e.g. vm.swappiness)")
        where = self.on.get(setting, "osds")
        hosts: list[str] = []
        if where in ("osds", "all"):
            hosts += sorted(self.devices.by_host())
            if not hosts:
                raise KnobError("no OSD host found in osd metadata")
        if where in ("clients", "all"):
            hosts += self.client_hosts
        path = "/proc/sys/" + key.replace(".", "/")
        return self._unique(HostFile(h, path, h) for h in hosts)


def format_knob_value(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def same_value(want: str, got: str) -> bool:
    return " ".join(want.split()) == " ".join(got.split())


class HostKnobs:
    """The host knob kinds together, as the sweep uses them."""

    def __init__(self, cli: CephCli, host_for: Callable[[str], HostExec],
                 sysctl_on: Mapping[str, str] | None = None,
                 resolver: DeviceResolver | None = None,
                 client_hosts: Sequence[str] = (CLIENT_HOST,)) -> None:
        files = HostFiles(host_for)
        self.devices = devices = OsdDevices(cli, host_for, resolver)
        self.kinds: dict[str, HostFileKnob] = {
            KIND_OSD_RA: OsdReadAhead(files, devices),
            KIND_BLOCK_QUEUE: BlockQueue(files, devices),
            KIND_SYSCTL: Sysctl(files, devices, sysctl_on, client_hosts),
        }

    def _by_kind(self, settings: Iterable[str]) -> dict[str, list[str]]:
        grouped: dict[str, list[str]] = {}
        for s in settings:
            grouped.setdefault(kind_of(s), []).append(s)
        return grouped

    def validate(self, values: Mapping[str, list[Any]]) -> list[str]:
        problems = []
        for kind, settings in self._by_kind(values).items():
            problems += self.kinds[kind].validate({s: values[s] for s in settings})
        return problems

    def snapshot(self, settings: Iterable[str]) -> list[dict[str, Any]]:
        return [e for kind, ss in self._by_kind(settings).items()
                for e in self.kinds[kind].snapshot(ss)]

    def apply(self, settings: Mapping[str, Any]) -> dict[str, str]:
        verified: dict[str, str] = {}
        for kind, ss in self._by_kind(settings).items():
            verified.update(self.kinds[kind].apply({s: settings[s] for s in ss}))
        return verified

    def restore(self, snapshot: list[dict[str, Any]]) -> list[str]:
        problems = []
        for kind, _ in self._by_kind(e["setting"] for e in snapshot).items():
            problems += self.kinds[kind].restore([e for e in snapshot
                                                  if kind_of(e["setting"]) == kind])
        return problems
