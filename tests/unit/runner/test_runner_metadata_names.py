"""Host and device names from `osd metadata` are untrusted: only plain names are accepted."""

from __future__ import annotations

import pytest

from cephscope.runner.metadata_names import (
    device_name_ok,
    host_name_ok,
    metadata_problems,
)


@pytest.mark.parametrize("name", ["osd-host-1", "node1.example.com", "host1", "a", "x_y",
                                  "ceph-node-07.lab.", "127.0.0.1", "A" * 63])
def test_real_host_names_pass(name):
    assert host_name_ok(name)


@pytest.mark.parametrize("name", ["-oProxyCommand=touch /tmp/x", "-x", "a b", "a;b", "a/b",
                                  "user@host", "host%h", "a..b", "host.-x", "A" * 64,
                                  "a." * 130, "$(id)", "h\nost", ""])
def test_option_like_or_odd_host_names_are_refused(name):
    assert not host_name_ok(name)


@pytest.mark.parametrize("name", ["sda", "nvme0n1", "dm-3", "loop7", "md127", "sr0", "vda"])
def test_kernel_device_names_pass(name):
    assert device_name_ok(name)


@pytest.mark.parametrize("name", ["../../../home/ceph/x", "..", ".", "sda/../x", "a b",
                                  "/etc/shadow", "-r", "sd*", ""])
def test_paths_and_odd_device_names_are_refused(name):
    assert not device_name_ok(name)


def test_problems_name_the_osd_and_the_name():
    metadata = [{"id": 0, "hostname": "good-host", "devices": "sda,nvme0n1"},
                {"id": 1, "hostname": "-oProxyCommand=touch /tmp/x", "devices": "sdb"},
                {"id": 2, "hostname": "good-host", "devices": "sdc,../../etc"}]
    problems = metadata_problems(metadata)
    assert len(problems) == 2
    assert problems[0].startswith("osd.1: osd metadata reports hostname "
                                  "'-oProxyCommand=touch /tmp/x'")
    assert problems[1].startswith("osd.2: osd metadata lists device '../../etc'")
