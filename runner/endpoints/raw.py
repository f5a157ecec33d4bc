"""Raw targets of CBT's `rawfio`: block devices or files the spec names, the same paths on
every client; a process per target slot (`concurrent_procs`, round robin over the paths).

Before anything changes every path is probed on every client (reads only) and refused when it
is in exclusive use (an exclusive open fails with EBUSY: mounted, held by the kernel, or open
exclusively by a process, as a BlueStore OSD opens its device), locked by a process (BlueStore
also holds an exclusive flock on its device or block file: any OSD on the host, of any
cluster), named in the `osd metadata` of an OSD on the same host, or neither a block
device nor a regular file. A file that does not exist is made by the benchmark (its prefill)
and removed after the step; one that exists is written over, as CBT does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from cephscope.runner.benchmarks.base import PreflightAccess
from cephscope.runner.endpoints.base import Client, Driver, Endpoint, EndpointSite
from cephscope.runner.hostexec import HostExec, HostExecError, LocalHost

PROBE_SECONDS = 60.0
# Reads what the runner needs to know about a path on a client: argv `path`; one JSON line.
PROBE = r"""
import errno, fcntl, json, os, socket, stat, sys
path = sys.argv[1]
out = {"host": socket.gethostname(), "path": path}
try:
    st = os.stat(path)
except FileNotFoundError:
    out["kind"] = "absent"
    print(json.dumps(out))
    sys.exit(0)
real = os.path.realpath(path)
out["real"] = real
if stat.S_ISBLK(st.st_mode):
    out["kind"] = "block"
    out["name"] = os.path.basename(real)
    try:
        os.close(os.open(real, os.O_RDONLY | os.O_EXCL))
        out["busy"] = False
    except OSError as e:
        out["busy"] = e.errno == errno.EBUSY
        out["error"] = "" if out["busy"] else str(e)
elif stat.S_ISREG(st.st_mode):
    out["kind"] = "file"
else:
    out["kind"] = "other"
if out["kind"] in ("block", "file"):
    try:
        fd = os.open(real, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(fd, fcntl.LOCK_UN)
            out["locked"] = False
        except OSError:
            out["locked"] = True
        finally:
            os.close(fd)
    except OSError as e:
        out["error"] = str(e)
print(json.dumps(out))
"""
OSD_PATH_KEYS = ("bluestore_bdev_dev_node", "bluestore_bdev_partition_path", "osd_data")


def probe(host: HostExec, path: str) -> dict[str, Any]:
    done = host.run(["python3", "-c", PROBE, path], timeout=PROBE_SECONDS)
    found = json.loads(done.stdout.decode(errors="replace").strip().splitlines()[-1])
    if not isinstance(found, dict):
        raise ValueError(f"probe of {path} on {host.name}: {found!r}")
    return found


def osd_places(metadata: Any) -> dict[str, set[str]]:
    """host name -> the device names and absolute paths its OSDs use (`osd metadata`)."""
    places: dict[str, set[str]] = {}
    for osd in metadata if isinstance(metadata, list) else []:
        if not isinstance(osd, Mapping) or not isinstance(osd.get("hostname"), str):
            continue
        used = places.setdefault(osd["hostname"], set())
        for key in ("devices", "bluestore_bdev_devices"):
            used.update(d for d in str(osd.get(key) or "").split(",") if d)
        used.update(str(osd[k]) for k in OSD_PATH_KEYS if isinstance(osd.get(k), str))
    return places


def path_problem(found: Mapping[str, Any], places: Mapping[str, set[str]]) -> str | None:
    """Why the probed path may not be written, or None."""
    where = f"{found.get('path')} on {found.get('host')}"
    kind = found.get("kind")
    if kind == "absent":
        return None
    if kind not in ("block", "file"):
        return f"{where}: neither a block device nor a regular file"
    if found.get("error"):
        return f"{where}: cannot be probed: {found['error']}"
    if found.get("busy"):
        return (f"{where}: in exclusive use (an exclusive open is refused: mounted, held by "
                "the kernel, or open by a process such as a BlueStore OSD)")
    if found.get("locked"):
        return f"{where}: locked by a process (a BlueStore OSD locks its device and block file)"
    used = places.get(str(found.get("host")), set())
    if found.get("name") in used or found.get("real") in used:
        return f"{where}: an OSD of this cluster uses it (osd metadata)"
    return None


def target_problems(paths: Sequence[str], access: PreflightAccess) -> list[str]:
    clients: list[HostExec] = list(access.clients) or [LocalHost()]
    places = osd_places(access.ceph("osd metadata")) if access.ceph is not None else {}
    problems = []
    for host in clients:
        for path in dict.fromkeys(paths):
            try:
                problem = path_problem(probe(host, path), places)
            except (HostExecError, ValueError) as exc:
                problem = f"{path} on {host.name}: cannot be probed: {exc}"
            if problem is not None:
                problems.append(f"rawfio target {problem}")
    return problems


class RawTargets(Driver):
    """The spec's paths as endpoints: `endpoints_per_client` slots, round robin over them."""

    name: ClassVar[str] = "raw"
    pool_application: ClassVar[str | None] = None

    def __init__(self, site: EndpointSite, paths: Sequence[str]) -> None:
        super().__init__(site)
        self.paths = list(paths)
        self.made: list[tuple[Client, str]] = []

    def create(self) -> None:
        for client in self.site.clients:
            for path in self.paths:
                absent = client.exec().run(["test", "-e", path], timeout=PROBE_SECONDS,
                                           check=False).returncode != 0
                if absent:  # made by the prefill, removed after the step
                    self.made.append((client, path))

    def endpoints(self, client: Client) -> list[Endpoint]:
        return [Endpoint(client, i, "file", path=self.paths[i % len(self.paths)])
                for i in range(self.site.spec.endpoints_per_client)]

    def remove(self) -> list[str]:
        problems = []
        for client, path in list(self.made):
            try:
                client.exec().run(["rm", "-f", path], timeout=PROBE_SECONDS)
                self.made.remove((client, path))
            except HostExecError as exc:
                problems.append(f"rm {path} on {client.name}: {exc}")
        return problems
