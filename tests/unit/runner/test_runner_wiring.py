"""The sweep's wiring (runner/wiring.py): built from the spec and the options before any
command is sent; a missing ceph conf is a dry run without a cluster, else an error."""

from __future__ import annotations

from pathlib import Path

import pytest

from cephscope.runner.knobs.host import CLIENT_HOST
from cephscope.runner.options import SweepOptions
from cephscope.runner.restart import NoRestartJournal
from cephscope.runner.spec import load_spec
from cephscope.runner.wiring import WiringError, wire
from tests.unit.runner_fakes import BENCHES

SPEC = "benchmarks:\n  radosbench: {op_size: 4096}\n"


def spec(tmp_path: Path):
    return load_spec(tmp_path / "s.yaml", text=SPEC, benchmarks=BENCHES)


def test_a_dry_run_without_a_conf_plans_without_a_cluster(tmp_path: Path) -> None:
    opts = SweepOptions(dry_run=True, conf=tmp_path / "missing.conf")
    parts = wire(opts, spec(tmp_path), None, NoRestartJournal(), lambda m: None)
    assert parts.cluster is None and parts.clients == []
    assert parts.target.conf_path == tmp_path / "missing.conf"
    assert parts.client_hosts == [CLIENT_HOST]


def test_a_run_without_a_conf_is_refused_naming_it(tmp_path: Path) -> None:
    opts = SweepOptions(conf=tmp_path / "missing.conf")
    with pytest.raises(WiringError, match=r"ceph conf .*missing\.conf does not exist"):
        wire(opts, spec(tmp_path), None, NoRestartJournal(), lambda m: None)


def test_with_a_conf_the_cluster_parts_are_built_and_nothing_is_sent(tmp_path: Path) -> None:
    conf = tmp_path / "ceph.conf"
    conf.write_text("[global]\nmon_host = 127.0.0.1:1\n")  # nothing listens: nothing asked
    journal = NoRestartJournal()
    parts = wire(SweepOptions(conf=conf, cluster_timeout_seconds=7), spec(tmp_path), None,
                 journal, lambda m: None)
    assert parts.cluster is not None
    assert parts.cluster.cli.conf_path == conf and parts.cluster.cli.timeout_seconds == 7
    assert parts.cluster.config.restarter.method is None  # no restart method asked for
    assert parts.cluster.host_knobs is not None and parts.cluster.hygiene is not None
