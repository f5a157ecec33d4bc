"""Metric families and the Prometheus text format (0.0.4), rendered directly.

prometheus_client's registry builds one object per sample and is several times slower
than formatting strings for the ~1000 samples per OSD a scrape produces, so collectors
append (sample name, rendered labels, value) tuples to :class:`MetricFamily` objects and
:func:`render` joins them once.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

COUNTER = "counter"
GAUGE = "gauge"
HISTOGRAM = "histogram"
UNTYPED = "untyped"
_TYPES = frozenset({COUNTER, GAUGE, HISTOGRAM, UNTYPED})

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def escape_label_value(value: str) -> str:
    if "\\" in value or '"' in value or "\n" in value:
        value = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return value


def render_labels(labels: Mapping[str, str] | None) -> str:
    """``{a="x",b="y"}`` body without braces, for :meth:`MetricFamily.add_rendered`."""
    if not labels:
        return ""
    return ",".join(f'{key}="{escape_label_value(str(val))}"' for key, val in labels.items())


def format_value(value: float) -> str:
    if type(value) is int:
        return str(value)
    if type(value) is bool:
        return "1" if value else "0"
    if value != value:  # NaN
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


class MetricFamily:
    """One metric name with its TYPE/HELP and samples (``name`` + suffix, labels, value)."""

    __slots__ = ("help", "name", "samples", "type")

    def __init__(self, name: str, mtype: str, help_text: str) -> None:
        if mtype not in _TYPES:
            raise ValueError(f"metric {name}: unknown type {mtype!r}")
        self.name = name
        self.type = mtype
        self.help = help_text
        # (sample name, rendered labels, value); labels None: the name is a whole line
        # prefix from :func:`line_prefix` (see :meth:`add_line`).
        self.samples: list[tuple[str, str | None, float]] = []

    def add(self, value: float, labels: Mapping[str, str] | None = None, suffix: str = "") -> None:
        self.samples.append((self.name + suffix, render_labels(labels), value))

    def add_rendered(self, label_text: str, value: float, suffix: str = "") -> None:
        """Fast path: ``label_text`` is already ``k="v",...`` (see :func:`render_labels`)."""
        self.samples.append((self.name + suffix, label_text, value))


    def add_line(self, prefix: str, value: float) -> None:
        """Fastest path: ``prefix`` is :func:`line_prefix` of the sample, cached by the
        collector (e.g. per daemon and counter) so a scrape only formats the value."""
        self.samples.append((prefix, None, value))


class MetricSink:
    """Families produced by one collector for one daemon (or one host collector run)."""

    __slots__ = ("families",)

    def __init__(self) -> None:
        self.families: dict[str, MetricFamily] = {}

    def family(self, name: str, mtype: str, help_text: str) -> MetricFamily:
        fam = self.families.get(name)
        if fam is None:
            fam = self.families[name] = MetricFamily(name, mtype, help_text)
        elif fam.type != mtype:
            raise ValueError(f"metric {name} emitted as {mtype} and as {fam.type}")
        return fam

    def gauge(self, name: str, help_text: str) -> MetricFamily:
        return self.family(name, GAUGE, help_text)

    def counter(self, name: str, help_text: str) -> MetricFamily:
        return self.family(name, COUNTER, help_text)

    def histogram(self, name: str, help_text: str) -> MetricFamily:
        return self.family(name, HISTOGRAM, help_text)

    def extend(self, families: Iterable[MetricFamily]) -> None:
        for fam in families:
            self.merge_family(fam)

    def merge_family(self, fam: MetricFamily) -> None:
        mine = self.families.get(fam.name)
        if mine is None:
            mine = self.families[fam.name] = MetricFamily(fam.name, fam.type, fam.help)
        elif mine.type != fam.type:
            # Two daemons disagreeing on a counter's type (mixed versions): keep the first.
            return
        mine.samples.extend(fam.samples)


def render(families: Iterable[MetricFamily]) -> bytes:
    """Text exposition of the families; families without samples are left out.

    Families with the same name (one per daemon) are written as one group under one
    HELP/TYPE header, in order of first appearance; a later family whose type disagrees
    with the first (daemons of mixed versions) is dropped.
    """
    groups: dict[str, list[MetricFamily]] = {}
    for fam in families:
        if not fam.samples:
            continue
        group = groups.get(fam.name)
        if group is None:
            groups[fam.name] = [fam]
        elif group[0].type == fam.type:
            group.append(fam)
    parts: list[str] = []
    append = parts.append
    for name, group in groups.items():
        first = group[0]
        append(f"# HELP {name} {_escape_help(first.help)}\n# TYPE {name} {first.type}\n")
        for fam in group:
            # Fast path, one comprehension per family: repr is the text format for ints
            # and finite floats (v - v == 0 rules out inf and NaN; bool is not int here).
            try:
                append(
                    "".join(
                        [
                            f"{sample}{value!r}\n"
                            if labels is None
                            and (type(value) is int or (type(value) is float and value - value == 0))
                            else _sample_line(sample, labels, value)
                            for sample, labels, value in fam.samples
                        ]
                    )
                )
            except TypeError as err:
                raise ValueError(f"metric {name}: non-numeric sample value ({err})") from None
    return "".join(parts).encode()


def _sample_line(sample_name: str, label_text: str | None, value: float) -> str:
    text = repr(value)
    if not text[-1].isdigit():  # inf, nan, True
        text = format_value(value)
    if label_text is None:  # add_line: sample_name is the whole line prefix
        return f"{sample_name}{text}\n"
    if label_text:
        return f"{sample_name}{{{label_text}}} {text}\n"
    return f"{sample_name} {text}\n"


def line_prefix(sample_name: str, label_text: str) -> str:
    """``name{labels} `` for :meth:`MetricFamily.add_line` (cache it per daemon)."""
    return f"{sample_name}{{{label_text}}} " if label_text else f"{sample_name} "
