"""The spec's client_endpoints sections and cluster.cephfs_pools: parsed as CBT reads them,
resolved into each step (the section, its pools), bad ones refused naming key and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from cephscope.runner.spec import SpecError, load_spec
from cephscope.runner.steps import generate_steps

BASE = """\
pool_profiles:
  rep1: {replication: 1, pg_size: 8}
  ec21: {replication: erasure, erasure_k: 2, erasure_m: 1, pg_size: 8}
cluster:
  cephfs_pools: {cephfs_data: rep1, cephfs_metadata: rep1}
client_endpoints:
  rbd:
    driver: librbd
    endpoints_per_client: 2
    endpoint_size: '512'
    pool_profile: rep1
    data_pool_profile: ec21
    disabled_features: deep-flatten,fast-diff
    order: 20
  fs:
    driver: cephfs-fuse
    filesystem: cephfs
benchmarks:
  fio:
    client_endpoints: [rbd, fs]
    time: 5
    size: 64
"""


def _load(tmp_path: Path, text: str):
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return load_spec(path)


def _problems(tmp_path: Path, text: str) -> str:
    with pytest.raises(SpecError) as info:
        _load(tmp_path, text)
    return str(info.value)


def test_sections_parsed_as_cbt_reads_them(tmp_path: Path) -> None:
    spec = _load(tmp_path, BASE)
    rbd, fs = spec.client_endpoints["rbd"], spec.client_endpoints["fs"]
    assert (rbd.driver, rbd.endpoints_per_client, rbd.endpoint_size_mib, rbd.order) == (
        "librbd", 2, 512, 20)
    assert rbd.disabled_features == ("deep-flatten", "fast-diff")
    assert (fs.driver, fs.endpoints_per_client, fs.endpoint_size_mib, fs.filesystem) == (
        "cephfs-fuse", 1, 4096, "cephfs")
    assert spec.cephfs_pools is not None and spec.cephfs_pools.to_dict() == {
        "cephfs_data": "rep1", "cephfs_metadata": "rep1"}
    assert spec.resolved()["client_endpoints"]["rbd"]["driver"] == "librbd"


def test_each_step_carries_its_section_and_the_pools_it_implies(tmp_path: Path) -> None:
    rbd_step, fs_step = generate_steps(_load(tmp_path, BASE))
    assert rbd_step.axes == {"fio.client_endpoints": "rbd"}
    assert rbd_step.params["endpoint"]["name"] == "rbd"
    # the section's pools are the step's: the image pool and the EC data pool
    assert rbd_step.pool_profile == "rep1" and rbd_step.params["data_pool_profile"] == "ec21"
    # CephFS: the filesystem's pools (its driver makes them), the step knows both profiles
    assert fs_step.pool_profile is None
    assert fs_step.params["cephfs_pools"] == {"cephfs_data": "rep1", "cephfs_metadata": "rep1"}
    assert "data_pool_profile" not in fs_step.params


def test_cephfs_without_cephfs_pools_has_no_pool_of_its_own(tmp_path: Path) -> None:
    text = BASE.replace("  cephfs_pools: {cephfs_data: rep1, cephfs_metadata: rep1}\n", "")
    _rbd, fs_step = generate_steps(_load(tmp_path, text))
    assert fs_step.pool_profile is None and "cephfs_pools" not in fs_step.params


@pytest.mark.parametrize(("old", "new", "fragment"), [
    ("driver: librbd", "driver: s3", "CBT's s3 endpoints are for hsbench"),
    ("driver: librbd", "driver: krbd", "unknown driver (one of librbd, rbd-fuse"),
    ("    driver: librbd\n", "", "client_endpoints.rbd.driver: None: missing"),
    ("endpoints_per_client: 2", "endpoints_per_client: [1, 2]", "read once per run"),
    ("endpoints_per_client: 2", "endpoints_per_client: 0", "must be an integer, at least 1"),
    ("order: 20", "order: 30", "must be an integer, 12..25"),
    ("pool_profile: rep1\n", "pool_profile: rep9\n", "client_endpoints.rbd.pool_profile: "
                                                    "'rep9': no such pool profile"),
    ("disabled_features: deep-flatten,fast-diff",
     "disabled_features: 'deep-flatten;reboot'", "RBD feature names"),
    ("filesystem: cephfs", "filesystem: ../etc", "not a CephFS name"),
    ("    order: 20\n", "    order: 20\n    sparkle: 1\n", "client_endpoints.rbd.sparkle"),
    ("cephfs_metadata: rep1}", "cephfs_metadata: rep7}", "cluster.cephfs_pools.cephfs_metadata"),
    ("cephfs_metadata: rep1}", "cephfs_meta: rep1}", "unknown key (cephfs_data, "
                                                    "cephfs_metadata)"),
    ("client_endpoints: [rbd, fs]", "client_endpoints: [rbd, nfs]",
     "benchmarks.fio.client_endpoints[1]: 'nfs': no such client_endpoints section"),
    ("    time: 5\n", "    time: 5\n    endpoint: {driver: librbd}\n", "set by cephscope itself"),
    ("    size: 64\n", "    size: 1024\n", "exceeds endpoint_size 512 MiB of client_endpoints.rbd"),
])
def test_bad_sections_are_refused_naming_the_key(tmp_path: Path, old: str, new: str,
                                                 fragment: str) -> None:
    assert old in BASE
    assert fragment in _problems(tmp_path, BASE.replace(old, new, 1))


def test_sections_of_cephfs_drivers_warn_about_rbd_keys(tmp_path: Path) -> None:
    text = BASE.replace("    filesystem: cephfs\n",
                        "    filesystem: cephfs\n    disabled_features: fast-diff\n"
                        "    pool_profile: rep1\n")
    spec = _load(tmp_path, text)
    warned = "\n".join(spec.warnings)
    assert "client_endpoints.fs.disabled_features: has no meaning for cephfs-fuse" in warned
    assert "client_endpoints.fs.pool_profile" in warned
    assert spec.client_endpoints["fs"].pool_profile is None


def test_fio_without_client_endpoints_is_refused(tmp_path: Path) -> None:
    text = BASE.replace("    client_endpoints: [rbd, fs]\n", "")
    assert "client_endpoints missing" in _problems(tmp_path, text)


def test_rbd_fuse_takes_one_job_per_endpoint(tmp_path: Path) -> None:
    text = BASE.replace("driver: librbd", "driver: rbd-fuse").replace(
        "    size: 64\n", "    size: 64\n    numjobs: [1, 2]\n")
    problems = _problems(tmp_path, text)
    assert "rbd-fuse endpoints take one fio job each (numjobs x procs_per_endpoint = 2)" in problems
    assert "'numjobs': 2" in problems  # the combination it is about
