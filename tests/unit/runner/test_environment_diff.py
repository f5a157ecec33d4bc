"""The environment diff: what differs, host settings first, volatile figures left out."""

from __future__ import annotations

import copy

from cephscope.runner.environment import diff, render_md

ENV = {
    "cluster": {
        "versions": {"osd": {"ceph version 16.2.15 pacific (stable)": 3}},
        "config dump": [{"section": "osd", "name": "osd_op_num_shards", "value": "8"}],
        "osd df": {"nodes": [{"id": 0, "name": "osd.0", "kb_used": 1000, "utilization": 1.5,
                              "crush_weight": 0.01}],
                   "summary": {"total_kb_used": 900884, "average_utilization": 2.86,
                               "min_var": 0.99, "max_var": 1.0, "dev": 0.018}},
        "osd pool ls detail": [{"pool_name": "rbd", "size": 3, "pg_num": 32}],
    },
    "hosts": {"vm": {"kernel": "6.1.0-18-amd64", "cpu_count": 2,
                     "sysctl": {"vm.swappiness": "60", "fs.file-nr": "1 0 100",
                                "kernel.random.uuid": "a"},
                     "block_queues": {"loop0": {"scheduler": "[none] mq-deadline",
                                                "read_ahead_kb": "128"}},
                     "nics": {"lo": {"mtu": 65536, "speed_mbps": "unknown"}}}},
}


def test_identical_environments_have_no_difference():
    assert diff(ENV, copy.deepcopy(ENV)) == []
    assert "no difference" in render_md([])


def test_a_sysctl_change_is_named_first_and_volatile_figures_are_not():
    other = copy.deepcopy(ENV)
    other["hosts"]["vm"]["sysctl"].update({"vm.swappiness": "10", "fs.file-nr": "2 0 100",
                                           "kernel.random.uuid": "b"})
    other["cluster"]["osd df"]["nodes"][0].update(kb_used=2000, utilization=3.0)
    # the cluster's usage totals move with every write (seen between two runs a minute apart)
    other["cluster"]["osd df"]["summary"].update(total_kb_used=933888, average_utilization=2.97,
                                                 min_var=0.995, max_var=1.008, dev=0.017)
    other["cluster"]["config dump"][0]["value"] = "4"
    other["cluster"]["osd pool ls detail"][0]["size"] = 2
    changes = diff(ENV, other)
    assert [c["path"] for c in changes] == [
        "hosts/vm/sysctl/vm.swappiness",
        "cluster/config dump/osd:osd_op_num_shards/value",
        "cluster/osd pool ls detail/rbd/size",
    ]
    assert changes[0] == {"path": "hosts/vm/sysctl/vm.swappiness", "a": "60", "b": "10"}
    md = render_md(changes)
    assert md.splitlines()[6] == "| `hosts/vm/sysctl/vm.swappiness` | 60 | 10 |"


def test_a_setting_present_on_one_side_only():
    other = copy.deepcopy(ENV)
    other["hosts"]["vm"]["block_queues"]["loop0"]["iosched/read_expire"] = "500"
    assert diff(ENV, other) == [{"path": "hosts/vm/block_queues/loop0/iosched/read_expire",
                                 "a": None, "b": "500"}]


def test_sysctls_of_interfaces_that_came_and_went_are_not_differences():
    other = copy.deepcopy(ENV)
    other["hosts"]["vm"]["sysctl"]["net.ipv4.conf.br7.forwarding"] = "1"
    other["hosts"]["vm"]["nics"]["br7"] = {"mtu": 1500, "speed_mbps": "unknown"}
    other["hosts"]["vm"]["sysctl"]["net.ipv4.conf.all.forwarding"] = "1"
    assert [c["path"] for c in diff(ENV, other)] == [
        "hosts/vm/sysctl/net.ipv4.conf.all.forwarding", "hosts/vm/nics/br7/mtu",
        "hosts/vm/nics/br7/speed_mbps"]


def test_capture_never_reads_a_device_path_that_is_not_a_device_name(tmp_path):
    """A `devices` entry like ../../../root would make root's `grep -r` copy whatever it
    reaches into environment.json: it is recorded as an error and never read."""
    from cephscope.runner.environment import capture_host
    from cephscope.runner.hostexec import LocalHost

    ran: list[list[str]] = []

    class Recording(LocalHost):
        def run(self, argv, **kw):  # type: ignore[no-untyped-def]
            ran.append(list(argv))
            return super().run(argv, **kw)

    found = capture_host(Recording(), ["../../../root", "loop0"])
    queues = found["block_queues"]
    assert "not a kernel device name" in queues["../../../root"]["error"]
    assert not [a for a in ran if any(".." in x for x in a)]
    assert ["grep", "-rH", ".", "/sys/block/loop0/queue"] in ran
