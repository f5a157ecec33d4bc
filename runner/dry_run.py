"""What `cephscope sweep --dry-run` shows besides the steps: every change the sweep will make
and every command it will run, on every host, so the operator reads a spec's effects before
they happen (a spec is code: docs/security.md).

Before-values come from the cluster and the hosts when the dry run can read them (reads only:
`config dump`, the OSDs' running config, `cat` of the knob files); otherwise they are shown as
unknown. Nothing here changes anything.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cephscope.runner.cephclient import CephError
from cephscope.runner.endpoints.settings import DRIVER_ACTIONS
from cephscope.runner.hostexec import HostExec, LocalHost, SshHost
from cephscope.runner.hygiene import SCRUB_FLAGS, HygieneOptions
from cephscope.runner.knobs.base import KnobError, kind_of
from cephscope.runner.knobs.ceph_config import ConfigManager
from cephscope.runner.knobs.host import HostKnobs
from cephscope.runner.restart import ArgvRestart, RestartMethod
from cephscope.runner.spec import Spec
from cephscope.runner.steps import Step, format_value

UNKNOWN = "unknown (dry run does not contact the cluster)"
UNREAD = "unknown (could not read it: {})"


@dataclass
class DryRunInputs:
    """What the sweep knows at the end of its read-only planning."""

    spec: Spec
    steps: Sequence[Step]
    restart_options: set[str]
    config: ConfigManager | None  # None: no cluster to read
    host_knobs: HostKnobs | None
    restart: RestartMethod | None
    hygiene: HygieneOptions
    clients: Sequence[HostExec]
    host_for: Callable[[str], HostExec]
    pools: Sequence[str] = field(default_factory=tuple)  # pools the steps use (may be created)


def _values(steps: Sequence[Step], get: Callable[[Step], Mapping[str, Any]]) -> dict[str, list[Any]]:
    found: dict[str, list[Any]] = {}
    for step in steps:
        for key, value in get(step).items():
            if value not in found.setdefault(key, []):
                found[key].append(value)
    return found


def _after(values: Sequence[Any]) -> str:
    return ", ".join(format_value(v) for v in values)


def _where(host: HostExec) -> str:
    return "this machine" if isinstance(host, LocalHost) else host.name


def ceph_config_lines(inputs: DryRunInputs) -> list[str]:
    wanted = _values(inputs.steps, lambda s: s.ceph_config)
    if not wanted:
        return []
    lines = ["ceph config (mon config db, section osd; `ceph config set`, restored at the end):"]
    db: Mapping[str, str | None] = {}
    running: Mapping[str, Mapping[str, str]] = {}
    problem = UNKNOWN
    if inputs.config is not None:
        try:
            db = inputs.config.db_values(wanted)
            running = inputs.config.running_values(wanted)
            problem = ""
        except CephError as exc:
            problem = UNREAD.format(exc)
    for option, values in sorted(wanted.items()):
        if problem:
            before = problem
        else:
            now = sorted(set((running.get(option) or {}).values()))
            before = (f"config db {db.get(option) if db.get(option) is not None else 'not set'}"
                      f", running {'/'.join(now) if now else 'unknown'}")
        restart = " (OSD restart)" if option in inputs.restart_options else ""
        lines.append(f"  {option}: {before} → {_after(values)}{restart}")
    return lines


def host_knob_lines(inputs: DryRunInputs) -> list[str]:
    wanted = _values(inputs.steps, lambda s: s.knobs)
    if not wanted:
        return []
    lines = ["host settings (written with `tee`, read back with `cat`, restored at the end):"]
    for setting, values in sorted(wanted.items()):
        if inputs.host_knobs is None:
            lines.append(f"  {setting}: {UNKNOWN} → {_after(values)}")
            continue
        knob = inputs.host_knobs.kinds[kind_of(setting)]
        try:
            targets = knob.targets(setting)
        except (KnobError, CephError) as exc:
            lines.append(f"  {setting}: {UNREAD.format(exc)} → {_after(values)}")
            continue
        for target in targets:
            try:
                before = knob.shown(knob.files.read(target))
            except KnobError as exc:
                before = UNREAD.format(exc)
            lines.append(f"  {setting} on {target.what} ({target.path}): {before} → "
                         f"{_after(values)}")
    return lines


def command_lines(inputs: DryRunInputs) -> list[str]:
    lines = ["commands:"]
    restarting = bool(inputs.restart_options & set(_values(inputs.steps,
                                                           lambda s: s.ceph_config)))
    if restarting:
        method = inputs.restart
        if isinstance(method, ArgvRestart):
            lines.append(f"  OSD restart on this machine, per OSD: {shlex.join(method.template)}")
        elif method is not None:
            lines.append(f"  OSD restart: {method.name}")
        elif inputs.config is None:
            named = inputs.spec.restart.method or "the cluster's own"
            command = (f" ({shlex.join(inputs.spec.restart.command)})"
                       if inputs.spec.restart.command else "")
            lines.append(f"  OSD restart: {named}{command}; {UNKNOWN}")
        else:
            lines.append("  OSD restart: no restart method (the run will refuse restart options)")
    h = inputs.hygiene
    if h.scrub_guard:
        lines.append(f"  ceph osd set {' / '.join(SCRUB_FLAGS)} for the run (unset at the end)")
    if inputs.pools:
        lines.append(f"  pools the steps use, created if missing (those created are removed at the end): "
                     f"{', '.join(inputs.pools)}")
    hosts, unread = _hosts(inputs)
    if unread:
        lines.append(f"  OSD hosts: {unread}")
    for name, host in hosts.items():
        on_host = []
        if h.drop_caches:
            on_host.append("sync; tee /proc/sys/vm/drop_caches (3) before each step")
        on_host.append("environment capture (cat /proc/cpuinfo /proc/meminfo, uname -r, nproc, "
                       "sysctl -a, grep -rH . /sys/block/<dev>/queue, ip -j link show)")
        if isinstance(host, SshHost):
            on_host.append(f"over `{shlex.join(host.ssh_argv())} <command>`")
        lines.append(f"  on {name}: " + "; ".join(on_host))
    endpoints = {s.params["endpoint"]["name"]: s.params["endpoint"] for s in inputs.steps
                 if isinstance(s.params.get("endpoint"), dict)}
    for name, endpoint in endpoints.items():
        lines.append(f"  client endpoints {name} ({endpoint['driver']}, "
                     f"{endpoint['endpoints_per_client']} per client): "
                     f"{DRIVER_ACTIONS.get(endpoint['driver'], 'paths of the spec')} for each "
                     f"step, removed after it")
    for client in inputs.clients:
        lines.append(f"  benchmark tools ({', '.join(sorted({s.benchmark for s in inputs.steps}))})"
                     f" on client {client.name}")
    if not inputs.clients:
        lines.append(f"  benchmark tools ({', '.join(sorted({s.benchmark for s in inputs.steps}))})"
                     f" on this machine")
    return lines


def _hosts(inputs: DryRunInputs) -> tuple[dict[str, HostExec], str]:
    """Every host the run reaches: the OSD hosts (from osd metadata) and the clients; and
    why the OSD hosts are unknown, if they are."""
    names: list[str] = []
    unread = UNKNOWN
    if inputs.host_knobs is not None:
        try:
            names += sorted(inputs.host_knobs.devices.by_host())
            unread = ""
        except (CephError, KnobError) as exc:
            unread = UNREAD.format(exc)
    names += [c.name for c in inputs.clients] or ["local"]
    hosts: dict[str, HostExec] = {}
    for name in names:
        host = inputs.host_for(name)
        label = _where(host)
        hosts.setdefault(label, host)
    return hosts, unread


def change_lines(inputs: DryRunInputs) -> list[str]:
    """Every change and command, grouped: ceph config, host settings, commands per host."""
    return [*ceph_config_lines(inputs), *host_knob_lines(inputs), *command_lines(inputs)]
