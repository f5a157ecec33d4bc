"""Text exposition: value formats, label escaping, grouping of per-daemon families."""

from __future__ import annotations

import pytest

from cephscope.exporter.exposition import MetricFamily, MetricSink, line_prefix, render


def test_values_and_escaping() -> None:
    fam = MetricFamily("cephscope_x", "gauge", "help with \\ and\nnewline")
    for value in (1, 1.5, float("nan"), float("inf"), -float("inf"), True, 1e-7, 10**20):
        fam.add(value, {"path": 'a"b\\c\nd'})
    lines = render([fam]).decode().splitlines()
    assert lines[0] == "# HELP cephscope_x help with \\\\ and\\nnewline"
    assert lines[1] == "# TYPE cephscope_x gauge"
    values = [line.rsplit(" ", 1)[1] for line in lines[2:]]
    assert values == ["1", "1.5", "NaN", "+Inf", "-Inf", "1", "1e-07", "100000000000000000000"]
    assert lines[2].startswith('cephscope_x{path="a\\"b\\\\c\\nd"} ')


def test_families_of_many_daemons_render_as_one_group() -> None:
    sinks = []
    for daemon in ("osd.0", "osd.1"):
        sink = MetricSink()
        sink.counter("ceph_osd_op_w", "writes").add_line(
            line_prefix("ceph_osd_op_w", f'ceph_daemon="{daemon}"'), 7
        )
        sink.gauge("ceph_osd_numpg", "pgs").add(3, {"ceph_daemon": daemon})
        sinks.append(sink)
    # A daemon of another version typing the counter differently is dropped, not mixed in.
    odd = MetricSink()
    odd.gauge("ceph_osd_op_w", "writes").add(1, {"ceph_daemon": "osd.9"})
    text = render([f for s in [*sinks, odd] for f in s.families.values()]).decode()
    assert text.count("# TYPE ceph_osd_op_w counter") == 1
    assert text.count("# TYPE ceph_osd_numpg gauge") == 1
    assert text.index('ceph_osd_op_w{ceph_daemon="osd.1"} 7') < text.index("# HELP ceph_osd_numpg")
    assert "osd.9" not in text


def test_sink_refuses_one_name_with_two_types() -> None:
    sink = MetricSink()
    sink.gauge("x", "h")
    with pytest.raises(ValueError, match="x emitted as counter and as gauge"):
        sink.counter("x", "h")
