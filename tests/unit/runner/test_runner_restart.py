"""Restart methods for cephadm-deployed OSDs without `ceph orch`: the argv they run, the fsid
they take from the spec (checked, never from cluster metadata), and the spec's validation."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from cephscope.runner.cephclient import CephCli, CephError
from cephscope.runner.restart import ArgvRestart, make_restart_method
from cephscope.runner.spec import SpecError, load_spec
from tests.unit.runner_fakes import BENCHES

FSID = "0b5e3a2c-6f0e-4c61-9d2b-3b8f7e0a1c55"


def cli() -> CephCli:
    return CephCli(Path("/nonexistent/ceph.conf"))


def test_podman_method_restarts_cephadms_container_names() -> None:
    method = make_restart_method("podman", cli(), fsid=FSID)
    assert isinstance(method, ArgvRestart)
    assert method.argv_for(3) == ["podman", "restart", "--time", "10", f"ceph-{FSID}-osd-3"]


def test_cephadm_systemd_method_restarts_cephadms_unit() -> None:
    method = make_restart_method("cephadm-systemd", cli(), fsid=FSID)
    assert isinstance(method, ArgvRestart)
    assert method.argv_for(12) == ["systemctl", "restart", f"ceph-{FSID}@osd.12"]


@pytest.mark.parametrize("method", ["podman", "cephadm-systemd"])
@pytest.mark.parametrize("fsid,why", [(None, r"needs restart\.fsid"),
                                      ("osd-0; rm -rf /", "is not a UUID"),
                                      (FSID.replace("-", ""), "usual form")])
def test_fsid_methods_refuse_a_missing_or_odd_fsid(method: str, fsid: str | None, why: str) -> None:
    with pytest.raises(CephError, match=why):
        make_restart_method(method, cli(), fsid=fsid)


def load(text: str):
    return load_spec(Path("sweep.yaml"), text=textwrap.dedent(text), benchmarks=BENCHES)


SPEC = """\
ceph_config:
  osd_op_num_shards: [2, 4]
restart:
  method: {method}
{fsid_line}
benchmarks:
  radosbench:
    op_size: 4096
    time: 5
    write_only: true
"""


def test_spec_takes_the_fsid_for_the_podman_method() -> None:
    spec = load(SPEC.format(method="podman", fsid_line=f"  fsid: {FSID.upper()}"))
    assert spec.restart.method == "podman"
    assert spec.restart.fsid == FSID
    assert spec.resolved()["restart"]["fsid"] == FSID


@pytest.mark.parametrize("method", ["podman", "cephadm-systemd"])
def test_spec_without_fsid_is_refused_for_fsid_methods(method: str) -> None:
    with pytest.raises(SpecError, match=r"needs restart\.fsid"):
        load(SPEC.format(method=method, fsid_line=""))


def test_spec_with_a_bad_fsid_names_key_and_line() -> None:
    with pytest.raises(SpecError) as info:
        load(SPEC.format(method="podman", fsid_line="  fsid: ../../etc"))
    assert str(info.value).startswith("sweep.yaml:5: restart.fsid: ")
