"""The cluster's configuration before a sweep, as the OSDs really ran it: the sweep stores the
touched options' running values and, per OSD, the effective value (a 0 for
osd_op_num_shards / osd_op_num_threads_per_shard means the `_hdd` / `_ssd` variant; see
`ConfigManager.effective_values`). The recommendation compares against it and the report
names it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PreSweepValue:
    option: str
    configured: str  # what `config get` said ("0")
    effective: str  # what the OSDs ran with ("8")
    source: str  # the option the effective value came from ("osd_op_num_shards_ssd")

    def text(self) -> str:
        if self.source != self.option:
            return f"{self.option}={self.effective} ({self.configured} = {self.source})"
        return f"{self.option}={self.effective}"


def pre_sweep_values(pre: Mapping[str, Any] | None) -> dict[str, PreSweepValue]:
    """option -> its pre-sweep value where every OSD agreed (effective when recorded, else the
    running value as given)."""
    out: dict[str, PreSweepValue] = {}
    pre = pre or {}
    effective = pre.get("effective") or {}
    for option, per_osd in (pre.get("running") or {}).items():
        configured = set(per_osd.values())
        if len(configured) != 1:
            continue
        (value,) = configured
        resolved = {(str(e.get("value")), str(e.get("from", option)))
                    for e in (effective.get(option) or {}).values() if isinstance(e, Mapping)}
        if len(resolved) == 1:
            (eff, source), = resolved
            out[option] = PreSweepValue(option, str(value), eff, source)
        else:
            out[option] = PreSweepValue(option, str(value), str(value), option)
    return out
