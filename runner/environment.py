"""What explains a difference between two runs: the cluster's and every host's settings,
captured once at the start of a run (`environment.json`), and the diff of two captures.

Cluster: `ceph versions`, `config dump`, every OSD's `config diff` (admin socket, else
`ceph tell`), `osd df`, `osd pool ls detail`, `osd tree`, `osd metadata`. Each OSD host and
the client: kernel, CPU model and count, memory, `sysctl -a`, the OSD devices' queue settings,
NIC speed and MTU — read through the host's HostExec. A piece that cannot be read is recorded
as `{"error": …}` (a capture never stops a run).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from cephscope.exporter.asok import AsokClient, AsokError
from cephscope.runner.cephclient import CephCli, CephError, cluster_lost
from cephscope.runner.hostexec import HostExec, HostExecError, on_each_host
from cephscope.runner.knobs.base import KnobError
from cephscope.runner.knobs.host import CLIENT_HOST, HostFiles, OsdDevices
from cephscope.runner.metadata_names import device_name_ok
from cephscope.runner.redaction import redact

CLUSTER_COMMANDS = ("versions", "config dump", "osd df", "osd pool ls detail", "osd tree",
                    "osd metadata")
# Values that change by themselves between two captures: never a reason runs differ.
VOLATILE = re.compile(
    r"(^|/)(kb|kb_used\w*|kb_avail|utilization|var|pgs|read_balance\w*|stats_sum\w*)$"
    r"|^hosts/[^/]+/sysctl/(fs\.(dentry-state|inode-nr|inode-state|file-nr|aio-nr)"
    r"|kernel\.(random\.\w+|ns_last_pid|pty\.nr)|net\.netfilter\.nf_conntrack_count"
    r"|vm\.stat_refresh|fs\.quota\..*)$|/last_change$|/(up_from|up_thru|down_at|heartbeat\w*)$"
    r"|^cluster/osd df/summary/")
TIMEOUT = 30.0


def _tryit(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except (CephError, HostExecError, KnobError, AsokError, OSError, ValueError) as exc:
        if cluster_lost(exc):  # every later item would wait its own cluster timeout too
            raise
        return {"error": str(exc)}


def _text(host: HostExec, argv: list[str]) -> str:
    return host.run(argv, timeout=TIMEOUT).stdout.decode(errors="replace")


def capture_host(host: HostExec, devices: list[str]) -> dict[str, Any]:
    cpuinfo = _tryit(lambda: _text(host, ["cat", "/proc/cpuinfo"]))
    meminfo = _tryit(lambda: _text(host, ["cat", "/proc/meminfo"]))
    found: dict[str, Any] = {
        "kernel": _tryit(lambda: _text(host, ["uname", "-r"]).strip()),
        "cpu_model": (sorted({line.split(":", 1)[1].strip() for line in cpuinfo.splitlines()
                              if line.startswith("model name")}) if isinstance(cpuinfo, str)
                      else cpuinfo),
        "cpu_count": _tryit(lambda: int(_text(host, ["nproc", "--all"]).strip())),
        "memory_kib": (next((int(line.split()[1]) for line in meminfo.splitlines()
                             if line.startswith("MemTotal:")), None)
                       if isinstance(meminfo, str) else meminfo),
    }
    sysctl = _tryit(lambda: host.run(["sysctl", "-a"], timeout=TIMEOUT, check=False)
                    .stdout.decode(errors="replace"))
    found["sysctl"] = (dict(line.split(" = ", 1) for line in sysctl.splitlines() if " = " in line)
                       if isinstance(sysctl, str) else sysctl)
    queues: dict[str, Any] = {}
    for dev in devices:
        if not device_name_ok(dev):
            # `grep -r` as root would copy whatever that path reaches into environment.json
            queues[dev] = {"error": f"{dev!r} is not a kernel device name; not read"}
            continue
        out = _tryit(lambda dev=dev: host.run(["grep", "-rH", ".", f"/sys/block/{dev}/queue"],
                                              timeout=TIMEOUT, check=False)
                     .stdout.decode(errors="replace"))
        prefix = f"/sys/block/{dev}/queue/"
        queues[dev] = ({line.split(":", 1)[0].removeprefix(prefix): line.split(":", 1)[1]
                        for line in out.splitlines() if ":" in line}
                       if isinstance(out, str) else out)
    found["block_queues"] = queues
    links = _tryit(lambda: json.loads(_text(host, ["ip", "-j", "link", "show"])))
    nics: dict[str, Any] = {}
    for link in links if isinstance(links, list) else []:
        name = str(link.get("ifname"))
        if name.startswith("veth") or "master" in link:
            continue  # bridge ports come and go with namespaces; their bridge is kept
        speed = host.run(["cat", f"/sys/class/net/{name}/speed"], timeout=TIMEOUT,
                         check=False).stdout.decode().strip()
        nics[name] = {"mtu": link.get("mtu"), "speed_mbps": speed or "unknown"}
    found["nics"] = nics if isinstance(links, list) else links
    return found


def capture(cli: CephCli, host_for: Callable[[str], HostExec],
            osd_asok: Callable[[int], Path | None],
            devices: OsdDevices | None = None,
            client_hosts: Sequence[str] = (CLIENT_HOST,)) -> dict[str, Any]:
    cluster = {prefix: _tryit(lambda p=prefix: cli.command(p)) for prefix in CLUSTER_COMMANDS}
    osd_ids = [int(m["id"]) for m in cluster.get("osd metadata") or []
               if isinstance(m, dict) and "id" in m] \
        if isinstance(cluster.get("osd metadata"), list) else []

    def config_diff(osd_id: int) -> Any:
        path = osd_asok(osd_id)
        if path is not None and Path(path).exists():
            return AsokClient(path, timeout=10.0).command("config diff")
        return cli.json("tell", f"osd.{osd_id}", "config", "diff", timeout=30)

    cluster["osd config diff"] = {f"osd.{i}": _tryit(lambda i=i: config_diff(i))
                                  for i in osd_ids}
    devices = devices or OsdDevices(cli, host_for)
    by_host = _tryit(devices.by_host)
    by_host = by_host if isinstance(by_host, dict) and "error" not in by_host else {}
    files = HostFiles(host_for)
    work: dict[str, Callable[[], dict[str, Any]]] = {}
    seen: set[str] = set()
    for name in [*sorted(by_host), *client_hosts]:
        identity = files.identity(name)
        if identity in seen:
            continue
        seen.add(identity)
        work[name] = lambda name=name: capture_host(host_for(name), by_host.get(name, []))
    # the client the runner drives the cluster with (a release's own, from its root filesystem)
    found = {"cluster": cluster, "hosts": on_each_host(work), "client": _tryit(cli.client_info)}
    # the config store can hold passwords and keys; results dirs are shared (redaction.py)
    return redact(found)


# --------------------------------------------------------------------------- diff


def flatten(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """path -> leaf value; lists of named items are keyed by their name."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from flatten(v, f"{prefix}/{k}" if prefix else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            name = v.get("name", v.get("pool_name", v.get("id", i))) if isinstance(v, dict) \
                else i
            if isinstance(v, dict) and "section" in v and "name" in v:
                name = f"{v['section']}:{v['name']}"  # config dump entries
            yield from flatten(v, f"{prefix}/{name}")
    else:
        yield prefix, value


# host facts first: they are what a spec does not show; then what Ceph says
ORDER = ("hosts/", "cluster/versions", "cluster/config dump", "cluster/osd config diff",
         "cluster/osd pool ls detail", "cluster/osd tree", "cluster/osd metadata",
         "cluster/osd df")


HOST_ORDER = ("sysctl", "kernel", "block_queues", "cpu_model", "cpu_count", "memory_kib", "nics")


def _rank(path: str) -> tuple[int, int]:
    major = next((i for i, p in enumerate(ORDER) if path.startswith(p)), len(ORDER))
    parts = path.split("/")
    minor = HOST_ORDER.index(parts[2]) if major == 0 and len(parts) > 2 and \
        parts[2] in HOST_ORDER else len(HOST_ORDER)
    return major, minor


_IFACE_SYSCTL = re.compile(r"^hosts/([^/]+)/sysctl/net\.ipv[46]\.(?:conf|neigh)\.([^.]+)\.")


def _interfaces(env: Mapping[str, Any], host: str) -> set[str]:
    nics = (env.get("hosts") or {}).get(host, {}).get("nics")
    return set(nics) if isinstance(nics, dict) else set()


def diff(env_a: Mapping[str, Any], env_b: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every setting that differs, host settings first: {"path", "a", "b"} (None = absent).
    Per-interface sysctls count only for interfaces both captures list (others come and go
    with namespaces; the interface itself shows under nics)."""
    # captures written before redaction existed are redacted here too: compare never prints
    # a secret, and still says that it changed
    a, b = dict(flatten(redact(env_a))), dict(flatten(redact(env_b)))

    def relevant(path: str) -> bool:
        if VOLATILE.search(path):
            return False
        m = _IFACE_SYSCTL.match(path)
        return not m or m.group(2) in ("all", "default") or \
            m.group(2) in _interfaces(env_a, m.group(1)) & _interfaces(env_b, m.group(1))

    changed = [{"path": p, "a": a.get(p), "b": b.get(p)} for p in sorted(set(a) | set(b))
               if a.get(p) != b.get(p) and relevant(p)]
    return sorted(changed, key=lambda d: (*_rank(d["path"]), d["path"]))


def render_md(changes: list[dict[str, Any]], limit: int = 50) -> str:
    if not changes:
        return "## Environment\n\nno difference in the captured environment\n"
    lines = ["## Environment", "", f"{len(changes)} setting(s) differ (host settings first):",
             "", "| setting | A | B |", "|---|---|---|"]
    for c in changes[:limit]:
        lines.append(f"| `{c['path']}` | {c['a']} | {c['b']} |")
    if len(changes) > limit:
        lines.append(f"| … {len(changes) - limit} more (see --format json) | | |")
    return "\n".join(lines) + "\n"
