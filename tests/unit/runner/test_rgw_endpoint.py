"""Where the gateway's endpoint and keys come from (spec < target < environment < flags), and
that no key is ever printed or stored: repr, describe(), spec errors, the resolved spec, the
kept copy of the spec (and that copy still loads, its keys then coming from elsewhere)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cephscope.runner.benchmarks import BENCHMARKS
from cephscope.runner.rgw_endpoint import (
    ENV_SWIFT_KEY,
    RgwEndpointError,
    RgwFlags,
    endpoint,
    read_keys_file,
    redact_text,
    resolve,
)
from cephscope.runner.spec import SpecError, load_spec

KEYS = {"access_key": "AKIAEXAMPLE0001", "secret_key": "wJalrXUtnFEMI/K7MDENG+bPxRfiCY",
        "swift_key": "SwIfTkEy0123456789"}


def _spec(tmp_path: Path, text: str):
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return load_spec(path, benchmarks=BENCHMARKS)


def test_keys_never_show_in_repr_or_description() -> None:
    rgw = endpoint("--devcluster", s3_url="http://127.0.0.1:17099", **KEYS,
                   swift_auth_url="http://127.0.0.1:17099/auth/1.0", swift_user="cephscope:swift")
    shown = repr(rgw) + json.dumps(rgw.describe())
    assert not any(key in shown for key in KEYS.values())
    described = rgw.describe()
    assert described["endpoint"] == "http://127.0.0.1:17099"
    assert described["secret_key"].startswith("<redacted ")
    assert described["from"]["endpoint"] == "--devcluster"
    assert rgw.has_s3 and rgw.has_swift


def test_layers_spec_then_target_then_environment_then_flags(tmp_path: Path) -> None:
    spec = _spec(tmp_path, """\
rgw:
  endpoint: http://spec-gw:8080
  swift_auth_url: http://spec-gw:8080/auth/1.0
  swift_user: spec:swift
  swift_key: fromSpec
benchmarks:
  swiftbench: {put_count: 10}
""")
    assert spec.rgw is not None
    target = endpoint("--devcluster", s3_url="http://127.0.0.1:17099", **KEYS)
    keys_file = tmp_path / "keys.yaml"
    keys_file.write_text("swift_user: file:swift\nswift_key: fromFile\n")
    rgw = resolve(spec.rgw, target, RgwFlags(endpoint="http://flag-gw:80",
                                              keys_file=keys_file),
                  environ={ENV_SWIFT_KEY: "fromEnv"})
    assert rgw.s3_url == "http://flag-gw:80"  # flags over everything
    assert rgw.swift_key == "fromFile" and rgw.swift_user == "file:swift"  # keys file > env
    assert rgw.access_key == KEYS["access_key"]  # the target over the spec
    assert rgw.swift_auth_url == "http://spec-gw:8080/auth/1.0"  # only the spec had it
    sources = dict(rgw.sources)
    assert sources["swift_key"] == "--rgw-keys-file" and sources["s3_url"] == "flags"
    without_file = resolve(spec.rgw, target, RgwFlags(), environ={ENV_SWIFT_KEY: "fromEnv"})
    assert without_file.swift_key == "fromEnv"


def test_a_bad_keys_file_or_flag_is_said_without_the_value(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"swift_key": "has blank inside"}))
    with pytest.raises(RgwEndpointError) as info:
        read_keys_file(bad, "x")
    assert "swift_key must be a key" in str(info.value) and "blank inside" not in str(info.value)
    with pytest.raises(RgwEndpointError, match="not a JSON or YAML mapping"):
        (tmp_path / "list.yaml").write_text("- a\n- b\n")
        read_keys_file(tmp_path / "list.yaml", "x")
    with pytest.raises(RgwEndpointError, match="cannot read it"):
        read_keys_file(tmp_path / "absent.json", "x")
    with pytest.raises(RgwEndpointError, match="--rgw-endpoint 'ftp://x': must be an http"):
        resolve(None, None, RgwFlags(endpoint="ftp://x"), environ={})
    with pytest.raises(RgwEndpointError, match="must not hold credentials"):
        resolve(None, None, RgwFlags(swift_auth_url="http://u:p@gw/auth"), environ={})


def test_the_dev_clusters_rgw_json_is_a_keys_file(tmp_path: Path) -> None:
    path = tmp_path / "rgw.json"
    path.write_text(json.dumps({"endpoint": "http://127.0.0.1:17099", **KEYS,
                                "swift_auth_url": "http://127.0.0.1:17099/auth/1.0",
                                "swift_user": "cephscope:swift"}))
    rgw = read_keys_file(path, "--rgw-keys-file")
    assert rgw.has_s3 and rgw.has_swift and rgw.secret_key == KEYS["secret_key"]


def test_cbt_places_give_the_endpoint_and_never_become_step_parameters(tmp_path: Path) -> None:
    spec = _spec(tmp_path, f"""\
client_endpoints:
  s3ep:
    driver: 's3'
    endpoints_per_client: 1
    urls: ['http://gw1:7480', 'http://gw2:7480']
    access_key: '{KEYS["access_key"]}'
    secret_key: '{KEYS["secret_key"]}'
benchmarks:
  hsbench:
    client_endpoints: 's3ep'
    objects: 100
    duration: -1
  getput:
    runtime: 10
    auth: ['http://gw1:7480/auth/1.0']
    user: cbt
    key: '{KEYS["swift_key"]}'
""")
    assert "client_endpoints" not in spec.benchmarks["hsbench"]
    assert not {"auth", "user", "key"} & set(spec.benchmarks["getput"])
    assert spec.rgw is not None
    rgw = spec.rgw.endpoint
    assert rgw.s3_url == "http://gw1:7480" and rgw.secret_key == KEYS["secret_key"]
    assert rgw.swift_user == "cbt:swift" and rgw.swift_key == KEYS["swift_key"]
    resolved = json.dumps(spec.resolved())
    assert not any(key in resolved for key in KEYS.values())
    assert "several gateways" in "\n".join(spec.warnings)
    with pytest.raises(SpecError, match="no such client endpoint"):
        _spec(tmp_path, "benchmarks:\n  hsbench: {client_endpoints: nope, objects: 5}\n")


def test_spec_errors_about_keys_never_show_them(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as info:
        _spec(tmp_path, """\
rgw:
  endpoint: 'http://gw:80'
  secret_key: "ab;cd$ef"
  swift_key: "has blank"
benchmarks:
  swiftbench: {put_count: 10}
""")
    text = "\n".join(info.value.problems)
    assert "ab;cd$ef" not in text and "has blank" not in text
    assert "rgw.secret_key: '<redacted " in text  # the metacharacter check, redacted
    assert "swift_key: must be a key" in text


def test_the_kept_copy_of_a_spec_has_its_keys_redacted_and_still_loads(tmp_path: Path) -> None:
    text = f"""\
rgw:
  swift_auth_url: http://gw:80/auth/1.0
  swift_user: u:swift
  swift_key: '{KEYS["swift_key"]}'
benchmarks:
  swiftbench: {{put_count: 10}}
"""
    spec = _spec(tmp_path, text)
    assert spec.rgw is not None
    kept = redact_text(text, list(spec.rgw.spec_keys))
    assert KEYS["swift_key"] not in kept and "<redacted " in kept
    again = _spec(tmp_path, kept)  # --resume reloads it: the key must come from elsewhere
    assert again.rgw is not None and again.rgw.endpoint.swift_key is None
    assert "redacted in this copy of the spec" in "\n".join(again.warnings)
    rgw = resolve(again.rgw, None, RgwFlags(), environ={ENV_SWIFT_KEY: KEYS["swift_key"]})
    assert rgw.has_swift


def test_keys_file_permissions_are_the_users_business_but_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    path.write_text(json.dumps({"swift_key": "k"}))
    os.chmod(path, 0o600)
    spec = _spec(tmp_path, f"rgw:\n  keys_file: {path}\nbenchmarks:\n  swiftbench: {{}}\n")
    assert resolve(spec.rgw, None, RgwFlags(), environ={}).swift_key == "k"
