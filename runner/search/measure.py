"""Objective figures from a step's parsed results (the live search and the replay agree)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cephscope.runner.search.settings import METRICS


def result_metrics(results: Sequence[Mapping[str, Any]], warmup: int = 0) -> dict[str, float]:
    """`metric@mode` for every mode of a step, and plain `metric` for its first mode.

    With a warm-up, IOPS and bandwidth come from the per-second figures after the first
    `warmup` seconds where the benchmark gives them (rados bench does); latencies stay the
    whole run's (the tools report them only in total)."""
    out: dict[str, float] = {}
    for i, r in enumerate(results):
        r = _after_warmup(r, warmup)
        mode = str(r.get("mode"))
        pct = r.get("latency_percentiles_seconds") or {}
        for name, key in METRICS.items():
            if key == "latency_p99_seconds":
                value = pct.get("99", pct.get("99.0"))
            elif key == "latency_p50_seconds":
                value = pct.get("50", pct.get("50.0"))
            else:
                value = r.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool):
                out[f"{name}@{mode}"] = float(value)
                if i == 0:
                    out[name] = float(value)
    return out


def _after_warmup(r: Mapping[str, Any], warmup: int) -> Mapping[str, Any]:
    per_second = (r.get("extra") or {}).get("per_second_ops")
    if warmup <= 0 or not isinstance(per_second, list) or len(per_second) <= warmup:
        return r
    kept = [float(v) for v in per_second[warmup:]]
    iops = sum(kept) / len(kept)
    scaled = dict(r)
    if r.get("iops"):
        scaled["bandwidth_bytes_per_second"] = (float(r.get("bandwidth_bytes_per_second") or 0.0)
                                                * iops / float(r["iops"]))
    scaled["iops"] = iops
    return scaled
