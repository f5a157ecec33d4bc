"""CBT's own example specs (tests/fixtures/cbt, copied from ceph/cbt with their origin noted):
keys cephscope acts on are honoured, CBT keys it does not act on are warned about and ignored
(never rejected, never shell-checked), CBT benchmarks it does not have are refused naming the
ones it has."""

from __future__ import annotations

from pathlib import Path

import pytest

from cephscope.runner.spec import SpecError, load_spec
from cephscope.runner.steps import generate_steps
from cephscope.runner.sweep import benchmark_registry

CBT = Path(__file__).resolve().parents[2] / "fixtures" / "cbt"


def _load(name: str, text: str | None = None):
    return load_spec(CBT / name, text, benchmark_registry())


def _problems(name: str, text: str | None = None) -> list[str]:
    with pytest.raises(SpecError) as info:
        _load(name, text)
    return info.value.problems


def test_radosbench_examples_load_with_their_axes_and_iterations() -> None:
    for name in ("example-3x-radosbench.yaml", "example-3x-radosbench-crimson.yaml"):
        spec = _load(name)
        bench = spec.benchmarks["radosbench"]
        assert spec.iterations == 3
        assert bench["pool_profile"] == "replicated"
        assert spec.pool_profiles["replicated"].replication == 3
        assert "use_existing" not in bench and "acceptable" not in bench
        steps = generate_steps(spec)
        assert len(steps) == 3 * len(bench["op_size"])  # op_size axis x 3 iterations
        warned = "\n".join(spec.warnings)
        # cluster.head/clients/osds/mons are used (where benchmarks run), not warned about
        assert spec.hosts.clients and spec.hosts.head, name
        for key in ("cluster.tmp_dir", "benchmarks.radosbench.use_existing",
                    "replication 'replicated'"):
            assert key in warned, (name, key)
    assert "cluster.ceph.conf" in "\n".join(_load("example-3x-radosbench.yaml").warnings)
    crimson = _load("example-3x-radosbench-crimson.yaml")
    assert "cluster.pid_dir" in "\n".join(crimson.warnings)
    assert "benchmarks.radosbench.acceptable" in "\n".join(crimson.warnings)


def test_librbdfio_examples_honour_or_warn_every_key() -> None:
    spec = _load("runtests.bluestore_example.yaml")
    fio = spec.benchmarks["librbdfio"]
    assert fio["mode"] == ["read", "write", "randread", "randwrite", "rw", "randrw"]
    assert fio["volumes_per_client"] == [2] and fio["iodepth"] == [32]
    assert fio["rbdname"] == "img01" and fio["use_existing_volumes"] is True
    warned = "\n".join(spec.warnings)
    for key in ("log_avg_msec", "log_iops", "cluster.ceph-osd_cmd"):
        assert key in warned, key
    # CBT's read-ahead is acted on: a host knob of every librbdfio step
    assert "osd_ra" not in warned
    assert "osd_ra" in spec.benchmark_knobs["librbdfio"]
    spec = _load("rbd_fio_test.yaml")
    fio = spec.benchmarks["librbdfio"]
    assert spec.idle_baseline_seconds == 5.0  # CBT's idle_monitor_sleep: the idle window
    assert "idle_monitor_sleep" not in "\n".join(spec.warnings)
    # CBT's prefill mapping (its fio job options) means: prefill
    assert fio["prefill"] is True
    assert fio["iodepth"] == [1, 4, 16] and fio["numjobs"] == [1, 4, 8]
    warned = "\n".join(spec.warnings)
    for key in ("prefill options ['blocksize', 'numjobs'] are not used", "workloads",
                "wait_pgautoscaler_timeout", "fio_cpu_set", "procs_per_client",
                "cluster.rbd-nbd_cmd", "cluster.radosgw-admin_cmd", "monitoring_profiles",
                "no replication"):
        assert key in warned, key


def test_ignored_keys_are_not_shell_checked_but_used_ones_are() -> None:
    text = (CBT / "rbd_fio_test.yaml").read_text()
    # the top monitoring profile redirects with `>`: ignored, so loaded
    assert "> {top_dir}" in text
    _load("rbd_fio_test.yaml")
    problems = _problems("rbd_fio_test.yaml",
                         text.replace("mode: 'randwrite'\n    iodepth",
                                      "mode: 'randwrite; reboot'\n    iodepth"))
    assert any("benchmarks.librbdfio.mode: 'randwrite; reboot': holds shell metacharacter"
               in p for p in problems), problems


def test_cbt_documented_keys_are_never_rejected() -> None:
    base = (CBT / "runtests.bluestore_example.yaml").read_text()
    extra = ("    vol_order: 22\n    pgs: 2048\n    rate_iops: 500\n    prefill: true\n"
             "    rbdadd_options: noshare\n")
    spec = _load("runtests.bluestore_example.yaml", base + extra)
    fio = spec.benchmarks["librbdfio"]
    assert fio["rate_iops"] == 500 and fio["prefill"] is True
    warned = "\n".join(spec.warnings)
    assert "benchmarks.librbdfio.vol_order" in warned and "benchmarks.librbdfio.pgs" in warned
    rados = (CBT / "example-3x-radosbench.yaml").read_text() + "    pgs_per_pool: 1024\n"
    assert "pgs_per_pool" in "\n".join(_load("example-3x-radosbench.yaml", rados).warnings)


def test_hsbench_example_loads_as_it_is() -> None:
    spec = _load("example-hsbench.yaml")
    hsbench = spec.benchmarks["hsbench"]
    # its endpoint section is the run's gateway endpoint, not a step parameter
    assert "client_endpoints" not in hsbench
    assert hsbench["duration"] == -1 and hsbench["objects"] == 10000  # -1: unlimited
    assert hsbench["cmd_path"].endswith("/hsbench")  # a placeholder path: looked up at run
    assert spec.rgw is not None and not spec.rgw.endpoint.has_s3  # CBT's file gives no keys
    warned = "\n".join(spec.warnings)
    assert "cluster.rgws" in warned and "cluster.rgw_pools" in warned
    assert "client_endpoints: CBT section" not in warned  # it is read, not ignored
    (step,) = generate_steps(spec)
    assert step.params["report_interval"] == 10


@pytest.mark.parametrize(("name", "benchmark"), [
    ("example-kvmrbdfio.yaml", "kvmrbdfio"), ("runtests.xfs.yaml", "rbdfio"),
])
def test_benchmarks_cephscope_does_not_have_are_refused(name: str, benchmark: str) -> None:
    problems = _problems(name)
    (refusal,) = [p for p in problems if f"benchmarks.{benchmark}:" in p]
    has = ", ".join(sorted(benchmark_registry()))
    assert f"CBT benchmark cephscope does not have (it has: {has})" in refusal
    # and nothing else of the file is a problem
    assert problems == [refusal]


def test_undefined_erasure_profile_is_the_clusters() -> None:
    """CBT's EC example names `myec` without defining it (CBT expects it on the cluster): it
    loads, and the run looks the profile up on the cluster at start."""
    spec = _load("example-ec-radosbench.yaml")
    assert spec.pool_profiles["erasure"].cluster_erasure_profile == "myec"
    assert any("cluster.pool_profiles.erasure.erasure_profile: 'myec' is not defined under "
               "erasure_profiles" in w for w in spec.warnings)
    assert {s.pool_profile for s in generate_steps(spec)} == {"erasure"}


def test_client_endpoints_example_loads_with_its_endpoint_and_cephfs_pools() -> None:
    spec = _load("example-client_endpoints.yaml")
    (endpoint,) = spec.client_endpoints.values()
    assert (endpoint.name, endpoint.driver, endpoint.endpoints_per_client,
            endpoint.endpoint_size_mib, endpoint.pool_profile) == (
        "fiotest", "librbd", 1, 524288, "replication")
    assert spec.cephfs_pools is not None and spec.cephfs_pools.data_profile == "replication"
    fio = spec.benchmarks["fio"]
    assert fio["op_size"] == [4194304, 131072, 4096] and fio["log_avg_msec"] == 100
    steps = generate_steps(spec)
    assert len(steps) == 4 * 3  # mode x op_size
    first = steps[0]
    # the endpoint section travels with the step, and its pool profile is the step's pool
    assert first.params["endpoint"]["driver"] == "librbd"
    assert first.pool_profile == "replication"
    assert spec.benchmark_knobs["fio"] == {"osd_ra": [4096]}
    warned = "\n".join(spec.warnings)
    assert ": client_endpoints" not in warned and "cephfs_pools" not in warned
    assert "cluster.mdss" in warned


def test_raw_example_loads_with_cbt_keys_it_does_not_act_on_warned() -> None:
    spec = _load("example-raw.yaml")
    raw = spec.benchmarks["rawfio"]
    assert raw["block_devices"] == ["/dev/vdb"] and raw["concurrent_procs"] == 1
    assert raw["ramp"] == "0" and raw["vol_size"] == 1024
    warned = "\n".join(spec.warnings)
    for key in ("client_mkfs", "use_dir", "client_ra", "benchmarks.rawfio.iterations"):
        assert key in warned, key
    (step,) = generate_steps(spec)[:1]
    assert step.params["block_devices"] == "/dev/vdb" and step.pool_profile is None
