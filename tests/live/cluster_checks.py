"""What a live test reads back from the dev cluster: op shards really running, the OSD config db."""

from __future__ import annotations

from typing import Any

from cephscope.exporter.asok import AsokClient


def shard_counts(devcluster: Any) -> dict[int, int]:
    """Op shards each OSD process really runs (dump_op_pq_state), not the config value."""
    counts = {}
    for osd in devcluster.osd_ids():
        state = AsokClient(devcluster.osd_asok(osd), timeout=10).command("dump_op_pq_state")
        counts[osd] = sum(1 for k in state if k.startswith("OSD:ShardedOpWQ:"))
    return counts


def osd_db_entries(devcluster: Any) -> list[dict[str, Any]]:
    return [e for e in devcluster.ceph_json("config", "dump") if e["section"].startswith("osd")]
