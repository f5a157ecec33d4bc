"""The stack's exporter behind TLS + client certificates + basic auth: the two files are
checked against each other before anything starts, and the Prometheus config passes promtool."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import bcrypt
import pytest
import yaml

from cephscope.deploy.stack import EXPORTER_JOB, Stack, StackError
from tests.unit.tls_pki import Pki, make_pki


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def write_web(path: Path, pki: Pki, users: bool = True, client_ca: bool = True) -> Path:
    hashed = bcrypt.hashpw(b"pw", bcrypt.gensalt(rounds=4)).decode()
    text = f"tls_server_config:\n  cert_file: {pki.server_cert}\n  key_file: {pki.server_key}\n"
    if client_ca:
        text += f"  client_ca_file: {pki.ca}\n"
    if users:
        text += f"basic_auth_users:\n  prometheus: '{hashed}'\n"
    path.write_text(text)
    return path


def write_scrape(path: Path, pki: Pki, **drop: bool) -> Path:
    (path.parent / "prom.pass").write_text("pw\n")
    tls: dict[str, str] = {"ca_file": str(pki.ca), "cert_file": str(pki.client_cert),
                           "key_file": str(pki.client_key)}
    data: dict[str, object] = {"tls_config": tls,
                               "basic_auth": {"username": "prometheus",
                                              "password_file": "prom.pass"}}
    for key in drop:
        if key in tls:
            del tls[key]
        else:
            del data[key]
    path.write_text(yaml.safe_dump(data))
    return path


def test_exporter_job_scrapes_https_with_client_cert_and_basic_auth(pki: Pki,
                                                                    tmp_path: Path) -> None:
    stack = Stack(tmp_path / "s", port_base=23000, asok_dir=tmp_path,
                  exporter_web_config=write_web(tmp_path / "web.yml", pki),
                  exporter_scrape_config=write_scrape(tmp_path / "scrape.yml", pki))
    config = stack.prometheus_config()
    (job,) = [j for j in config["scrape_configs"] if j["job_name"] == EXPORTER_JOB]
    assert job["scheme"] == "https"
    assert job["tls_config"]["cert_file"] == str(pki.client_cert)
    # relative to the scrape file, made absolute for Prometheus
    assert job["basic_auth"] == {"username": "prometheus",
                                 "password_file": str(tmp_path / "prom.pass")}
    assert stack.exporter_url == "https://127.0.0.1:23004"
    exporter = next(c for c in stack._components() if c.name == "exporter")
    assert f"--web.config.file={tmp_path / 'web.yml'}" in stack._argv(exporter)
    assert stack.exporter_auth is not None
    assert stack.exporter_auth.headers() == {"Authorization": "Basic cHJvbWV0aGV1czpwdw=="}
    path = tmp_path / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    promtool = shutil.which("promtool")
    assert promtool, "promtool missing (prometheus package)"
    proc = subprocess.run([promtool, "check", "config", str(path)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("web_kw, drop, message", [
    ({}, {"basic_auth": True}, "basic_auth is needed: .*web.yml has basic_auth_users"),
    ({}, {"cert_file": True, "key_file": True}, "cert_file/key_file are needed: .*requires "
                                                "client certificates"),
    ({}, {"ca_file": True}, "tls_config.ca_file is needed"),
    ({"users": False}, {}, "basic_auth given, but .*web.yml has no basic_auth_users"),
])
def test_mismatched_files_are_refused_naming_them(pki: Pki, tmp_path: Path, web_kw, drop,
                                                  message) -> None:
    with pytest.raises(StackError, match=message):
        Stack(tmp_path / "s", exporter_web_config=write_web(tmp_path / "web.yml", pki, **web_kw),
              exporter_scrape_config=write_scrape(tmp_path / "scrape.yml", pki, **drop))


def test_bad_scrape_files_name_the_key(pki: Pki, tmp_path: Path) -> None:
    web = write_web(tmp_path / "web.yml", pki)
    scrape = tmp_path / "scrape.yml"
    cases = {
        "tls_confg: {}\n": "scrape.yml: unknown key.*tls_confg",
        "tls_config: {ca_fil: x}\n": "unknown tls_config key.*ca_fil",
        "tls_config: {ca_file: nowhere.pem}\n": "tls_config.ca_file: .*nowhere.pem does not exist",
    }
    for text, message in cases.items():
        scrape.write_text(text)
        with pytest.raises(StackError, match=message):
            Stack(tmp_path / "s", exporter_web_config=web, exporter_scrape_config=scrape)
    web.write_text("tls_server_config: {cert_file: a}\n")
    with pytest.raises(StackError, match=r"--exporter-web-config: .*key_file is required"):
        Stack(tmp_path / "s", exporter_web_config=web)
    with pytest.raises(StackError, match="--exporter-scrape-config needs --exporter-web-config"):
        Stack(tmp_path / "s", exporter_scrape_config=scrape)


def test_prometheus_config_with_an_inline_password_is_written_0600(
    pki: Pki, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scrape = write_scrape(tmp_path / "scrape.yml", pki)
    data = yaml.safe_load(scrape.read_text())
    data["basic_auth"] = {"username": "prometheus", "password": "inline-secret"}
    scrape.write_text(yaml.safe_dump(data))
    stack = Stack(tmp_path / "s", port_base=23000, asok_dir=tmp_path,
                  exporter_web_config=write_web(tmp_path / "web.yml", pki),
                  exporter_scrape_config=scrape)
    state = tmp_path / "s"
    state.mkdir()
    (state / "prometheus.yml").write_text("old\n")
    (state / "prometheus.yml").chmod(0o644)  # left by an earlier run: must not stay 0644

    def stop_before_starting(_self: Stack, _component: object) -> None:
        raise RuntimeError("configs written; no daemon started in a unit test")

    monkeypatch.setattr(Stack, "_preflight", lambda _self: None)
    monkeypatch.setattr(Stack, "_start", stop_before_starting)
    old_umask = os.umask(0o022)
    try:
        with pytest.raises(RuntimeError, match="configs written"):
            stack.up()
    finally:
        os.umask(old_umask)
    written = state / "prometheus.yml"
    assert "inline-secret" in written.read_text()
    assert stat.S_IMODE(written.stat().st_mode) == 0o600
    assert stat.S_IMODE((state / "alertmanager.yml").stat().st_mode) == 0o600
