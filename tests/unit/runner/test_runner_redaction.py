"""Secrets in environment.json and `compare` (issue 23, finding 6): values of secret-named
config keys are replaced by a digest that still shows whether they changed."""

from __future__ import annotations

import json

import pytest

from cephscope.runner.environment import diff, render_md
from cephscope.runner.redaction import is_secret_name, redact, redact_value


@pytest.mark.parametrize("name", [
    "rgw_keystone_admin_password", "mgr/dashboard/GRAFANA_API_PASSWORD",
    "mgr/dashboard/RGW_API_SECRET_KEY", "rgw_crypt_s3_kms_encryption_keys",
    "rgw_crypt_default_encryption_key", "key", "mgr/restful/keys/admin",
    "rgw_keystone_admin_token", "rgw_ldap_secret", "net.ipv4.tcp_fastopen_key",
])
def test_secret_names(name):
    assert is_secret_name(name)


@pytest.mark.parametrize("name", [
    "osd_op_num_shards", "keyring", "keyfile", "rgw_keystone_admin_password_path",
    "rgw_crypt_vault_token_file", "osd_deep_scrub_large_omap_object_key_threshold",
    "mgr/dashboard/jwt_token_ttl", "rgw_s3_auth_use_keystone", "kernel.keys.maxkeys",
    "bluestore_cache_size", "osd_memory_target",
])
def test_not_secret_names(name):
    assert not is_secret_name(name)


def capture(password: str) -> dict:
    return {"cluster": {
        "config dump": [
            {"section": "client.rgw", "name": "rgw_keystone_admin_password", "value": password,
             "level": "advanced", "mask": ""},
            {"section": "osd", "name": "osd_op_num_shards", "value": "8", "mask": ""},
            {"section": "global", "name": "keyring", "value": "/etc/ceph/keyring", "mask": ""},
        ],
        "osd config diff": {"osd.0": {"diff": {"rgw_keystone_admin_password": {
            "default": "", "mon": password, "final": password}}}},
    }}


def test_a_capture_keeps_no_secret_but_the_settings_around_it():
    env = redact(capture("hunter2-very-secret"))
    text = json.dumps(env)
    assert "hunter2-very-secret" not in text
    dump = env["cluster"]["config dump"]
    assert dump[0]["value"].startswith("<redacted ") and dump[0]["section"] == "client.rgw"
    assert dump[1]["value"] == "8" and dump[2]["value"] == "/etc/ceph/keyring"
    diff_entry = env["cluster"]["osd config diff"]["osd.0"]["diff"]["rgw_keystone_admin_password"]
    assert diff_entry["default"] == "" and diff_entry["final"].startswith("<redacted ")
    assert redact(env) == env  # a second pass (compare of a redacted capture) changes nothing


def test_compare_says_a_secret_changed_without_printing_it():
    # captures written before redaction existed are redacted by the diff itself
    changes = diff(capture("old-pass-1"), capture("new-pass-2"))
    assert {c["path"] for c in changes} == {
        "cluster/config dump/client.rgw:rgw_keystone_admin_password/value",
        "cluster/osd config diff/osd.0/diff/rgw_keystone_admin_password/mon",
        "cluster/osd config diff/osd.0/diff/rgw_keystone_admin_password/final"}
    shown = render_md(changes) + json.dumps(changes)
    assert "old-pass-1" not in shown and "new-pass-2" not in shown
    assert diff(capture("same"), redact(capture("same"))) == []
    assert redact_value("same") == redact_value("same") != redact_value("other")


def test_environment_capture_is_written_redacted():
    from cephscope.runner.cephclient import CephError
    from cephscope.runner.environment import capture as capture_environment
    from cephscope.runner.hostexec import LocalHost

    class Cli:
        def command(self, prefix: str, **args):  # type: ignore[no-untyped-def]
            if prefix == "config dump":
                return capture("s3cr3t-value")["cluster"]["config dump"]
            raise CephError(f"{prefix}: not in this fake")

        def json(self, *args, **kw):  # type: ignore[no-untyped-def]
            raise CephError("no tell here")

        def client_info(self) -> dict:
            return {}

    env = capture_environment(Cli(), lambda name: LocalHost(), lambda i: None)  # type: ignore[arg-type]
    assert "s3cr3t-value" not in json.dumps(env)
    assert env["cluster"]["config dump"][1]["value"] == "8"
