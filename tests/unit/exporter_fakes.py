"""Shared pieces of the exporter's unit tests: an in-process server, a fake mon, golden normalising."""

from __future__ import annotations

import copy
import json
import os
import re
import threading
from pathlib import Path
from typing import Any

from cephscope.exporter.collectors.ops import FINE_PHASE_BUCKETS
from cephscope.exporter.exposition import format_value
from cephscope.exporter.main import build_parser, make_server
from cephscope.exporter.netinfo import InterfaceAddress, parse_if_inet6, parse_ip_json
from cephscope.exporter.osdmeta import MonClient
from tests.unit.fake_asok import (
    capture_dir,
    only_collectors,
)


def normalise(text: str) -> str:
    """Timings and the interpreter's version are the only things that vary between runs."""
    text = re.sub(r"^((?:cephscope_scrape_collector_duration_seconds|"
                  r"cephscope_osd_op_queue_dump_age_seconds)\{[^}]*\}) .*$", r"\1 0", text,
                  flags=re.M)
    return re.sub(r'pythonversion="[^"]*"', 'pythonversion="X"', text)


# Each flag that brings back what the default exposition leaves out (docs/metrics.md,
# *Series per OSD*), with the finer phase buckets of the phase histogram.
EVERY_SERIES_FLAGS: tuple[str, ...] = (
    "--collector.perf.exclude-collections=",
    "--collector.histogram.ops=r,w,rw",
    "--collector.histogram.latency-max-seconds=0",
    "--collector.histogram.size",
    "--collector.opqueue.strict-queues",
    "--collector.opqueue.priorities",
    "--collector.ops.phases=all",
    "--collector.ops.phase-buckets=" + ",".join(format_value(b) for b in FINE_PHASE_BUCKETS),
    "--collector.ops.flag-points",
    "--collector.threads.groups=.*",
    "--collector.topology.device-gauges",
)


# promtool lint findings that ceph-exporter's own names cause (names kept for compatibility).
CEPH_COMPAT_LINT = re.compile(
    r'^ceph_\S+ (counter metrics should have "_total" suffix'
    r'|non-histogram and non-summary metrics should not have "_(sum|count)" suffix'
    # ceph-exporter keeps the ':' of collections like bluestore-pricache:kv
    r"|metric names should not contain ':'"
    # and Ceph's own counter names: rgw get_b / put_b, AsyncMessenger::Worker
    r"|metric names should not contain abbreviated units"
    r"|metric names should be written in 'snake_case' not 'camelCase')$"
)


class FakeMon(MonClient):
    """MonClient whose connection is a FakeRados, or fails like an unreachable mon."""

    def __init__(self, metadata: Any = None, *, down: bool = False) -> None:
        super().__init__(conffile="/nonexistent/ceph.conf", name="client.admin")
        self.rados = FakeRados(METADATA if metadata is None else metadata)
        self.down = down
        self.connects = 0

    @property
    def calls(self) -> list[str]:
        return self.rados.calls

    def _open(self) -> Any:
        self.connects += 1
        if self.down:
            raise OSError(110, "RADOS timed out (error connecting to the cluster)")
        return self.rados


def addresses() -> list[InterfaceAddress]:
    ip_json = (FIXTURES / "topology" / "ip_addr_show.json").read_text()
    inet6 = (FIXTURES / "sysfs" / "host1" / "proc" / "net" / "if_inet6").read_text()
    return parse_ip_json(ip_json) + parse_if_inet6(inet6)


def edited_metadata(root: Path) -> list[dict[str, Any]]:
    """The real capture, re-pointed at fixture hardware: osd.0 on NVMe, osd.1 on LVM over a
    SAS HDD with its DB on an NVMe partition, osd.2 a file on sdc1's filesystem, with its
    cluster network on ens1f0 (IPv6)."""
    meta = copy.deepcopy(METADATA)
    by_id = {m["id"]: m for m in meta}
    by_id[0].update(bluestore_bdev_partition_path="/dev/nvme0n1",
                    bluestore_bdev_dev_node="/dev/nvme0n1")
    by_id[1].update(bluestore_bdev_partition_path="/dev/dm-0",
                    bluestore_bdev_dev_node="/dev/dm-0",
                    bluefs_dedicated_db="1",
                    bluefs_db_access_mode="blk",
                    bluefs_db_partition_path="/dev/nvme0n1p1",
                    bluefs_db_dev_node="/dev/nvme0n1p1")
    image = root / "host" / "var" / "lib" / "ceph-images" / "osd0.img"
    st = os.stat(image)
    link = root / "sys" / "dev" / "block" / f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    if link.is_symlink():
        link.unlink()
    link.symlink_to(os.path.relpath(root / "sys" / "block" / "sdc" / "sdc1", link.parent))
    for key in ("bluestore_bdev_partition_path", "bluestore_bdev_dev_node"):
        by_id[2].pop(key)
    by_id[2].update(bluestore_bdev_access_mode="file",
                    bluestore_bdev_path="/var/lib/ceph-images/osd0.img",
                    back_addr="[v2:[2001:db8::11]:6800/0,v1:[2001:db8::11]:6801/0]")
    return meta


def serve(run_dir: Path, *flags: str):
    args = build_parser().parse_args(
        ["--ceph.asok-dir", str(run_dir), "--web.listen-address", "127.0.0.1:0",
         *only_collectors("perf", "histogram"), *flags]
    )
    server = make_server(args)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server


def stop(server) -> None:
    server.shutdown()
    server.server_close()
    server.scraper.close()


FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


METADATA = json.loads((FIXTURES / "topology" / "osd_metadata.json").read_text())


TREE = json.loads((FIXTURES / "topology" / "osd_tree.json").read_text())


CAPTURED_FSID = json.loads((capture_dir("idle", "osd.0") / "config_show.json").read_text())["fsid"]


class FakeRados:
    """Stands in for a connected rados.Rados: answers mon commands from captures."""

    def __init__(self, metadata: Any, fsid: str = CAPTURED_FSID) -> None:
        self.metadata = metadata
        self.fsid = fsid
        self.calls: list[str] = []

    def get_fsid(self) -> str:
        return self.fsid

    def mon_command(self, cmd: str, inbuf: bytes, timeout: int = 0) -> tuple[int, bytes, str]:
        prefix = json.loads(cmd)["prefix"]
        self.calls.append(prefix)
        answer = {"osd metadata": self.metadata, "osd tree": TREE}[prefix]
        return 0, json.dumps(answer).encode(), ""

    def shutdown(self) -> None:
        pass


