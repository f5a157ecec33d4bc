"""Series per OSD of an exposition: the budget of the exporter's default, and the count by
collector and metric family that holds it (docs/metrics.md, *Series per OSD*).

A series is one sample line. It belongs to an OSD when its ``ceph_daemon`` label is
``osd.N``; series of other daemons (``mon.a``, ``mds.x``) are counted per daemon, and the
series without ``ceph_daemon`` (scrape health, build info) per host. The collector of a
family is known from its name (``ceph_*`` is ``perf``, or ``labeled`` when the series has
labels beside ``ceph_daemon``); a family no rule names is ``unknown``. Read by the golden
test that holds the budget, a live test and ``benchmarks/series_per_osd.py``; the exporter
itself never imports this.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

# The default exposition's ceiling, series per OSD (issue: a Prometheus holding 1,000 OSDs).
BUDGET_SERIES_PER_OSD = 200

# (family name, collector), first match wins; names are whole-name regexes.
FAMILY_COLLECTORS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), collector) for pattern, collector in (
        (r"cephscope_osd_op_(latency_seconds|size_bytes)", "histogram"),
        (r"cephscope_osd_op_(shards|queue_.+)", "opqueue"),
        (r"cephscope_osd_(ops_.+|op_oldest_.+|op_complaint_time_seconds|op_history_.+"
         r"|op_phase_duration_.+)", "ops"),
        (r"cephscope_osd_(thread_.+|cpu_seconds_total|resident_memory_bytes|threads)", "threads"),
        (r"cephscope_(osd_info|osd_device_.+|osd_network_.+|topology_.+)", "topology"),
        (r"cephscope_(daemon_up|daemons_found|scrape_.+|exporter_.+)", "scrape"),
        (r"ceph_.+", "perf"),
    ))

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+\S+")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
_OSD = re.compile(r"osd\.\d+")
_HISTOGRAM_SUFFIX = re.compile(r"_(bucket|sum|count)$")


def collector_of(family: str, labels: dict[str, str]) -> str:
    for pattern, collector in FAMILY_COLLECTORS:
        if pattern.fullmatch(family):
            if collector == "perf" and set(labels) - {"ceph_daemon"}:
                return "labeled"
            return collector
    return "unknown"


@dataclass
class SeriesCount:
    """Series of one exposition: per OSD by (collector, family), per other daemon, per host."""

    per_osd: dict[str, Counter[tuple[str, str]]] = field(default_factory=dict)
    other_daemons: Counter[str] = field(default_factory=Counter)
    per_host: Counter[tuple[str, str]] = field(default_factory=Counter)

    @property
    def osds(self) -> list[str]:
        return sorted(self.per_osd, key=lambda d: int(d.split(".")[1]))

    def osd_totals(self) -> dict[str, int]:
        return {osd: sum(c.values()) for osd, c in self.per_osd.items()}

    def max_per_osd(self) -> int:
        return max(self.osd_totals().values(), default=0)

    def mean_per_osd(self, key: tuple[str, str] | None = None, collector: str | None = None
                     ) -> float:
        """Mean over the OSDs of the series of one (collector, family), one collector, or all."""
        if not self.per_osd:
            return 0.0
        total = 0
        for counts in self.per_osd.values():
            if key is not None:
                total += counts.get(key, 0)
            elif collector is not None:
                total += sum(v for (c, _f), v in counts.items() if c == collector)
            else:
                total += sum(counts.values())
        return total / len(self.per_osd)

    def families(self) -> list[tuple[str, str]]:
        """Every (collector, family) seen on an OSD."""
        return sorted({k for c in self.per_osd.values() for k in c})


def count_series(text: str) -> SeriesCount:
    """Count the sample lines of a text exposition (Prometheus' text format 0.0.4)."""
    out = SeriesCount()
    typed: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            parts = line.split()
            if len(parts) >= 4:
                typed[parts[2]] = parts[3]
            continue
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if match is None:
            raise ValueError(f"not a sample line: {line[:80]!r}")
        name = match[1]
        labels = {k: v for k, v in _LABEL.findall(match[2] or "")}
        family = name
        base = _HISTOGRAM_SUFFIX.sub("", name)
        if base != name and typed.get(base) in ("histogram", "summary"):
            family = base
        key = (collector_of(family, labels), family)
        daemon = labels.get("ceph_daemon")
        if daemon is None:
            out.per_host[key] += 1
        elif _OSD.fullmatch(daemon):
            out.per_osd.setdefault(daemon, Counter())[key] += 1
        else:
            out.other_daemons[daemon] += 1
    return out
