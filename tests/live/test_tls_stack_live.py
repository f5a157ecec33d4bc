"""The stack's real Prometheus scrapes the exporter through TLS 1.3, a client certificate and
basic auth together (`--exporter-web-config` + `--exporter-scrape-config`), on the session dev
cluster; curl and Python's TLS client check what is refused: a wrong password (401), no
client certificate or one from another CA (no HTTP answer at all), and a TLS 1.2-only client
against `min_version: TLS13`."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import time
from pathlib import Path
from typing import Any

import bcrypt
import pytest

from cephscope.deploy.stack import EXPORTER_JOB, Stack
from tests.unit.tls_pki import Pki, make_pki

from .conftest import free_port_base

PASSWORD = "scrape-me-gently"


def curl(url: str, pki: Pki, user: str, cert: tuple[Path, Path] | None) -> tuple[int, str, str]:
    """(exit code, HTTP status, stderr) of one GET through curl."""
    curl_bin = shutil.which("curl")
    assert curl_bin, "curl is needed (Debian: curl)"
    argv = [curl_bin, "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "10",
            "--cacert", str(pki.ca), "-u", user]
    if cert is not None:
        argv += ["--cert", str(cert[0]), "--key", str(cert[1])]
    done = subprocess.run([*argv, url], capture_output=True, text=True, timeout=30)
    return done.returncode, done.stdout, done.stderr


def tls_version(port: int, pki: Pki, max_version: ssl.TLSVersion) -> str:
    """The version a handshake with the client certificate negotiates (raises if refused)."""
    ctx = ssl.create_default_context(cafile=str(pki.ca))
    ctx.load_cert_chain(str(pki.client_cert), str(pki.client_key))
    ctx.maximum_version = max_version
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
            ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        return str(tls.version())


@pytest.fixture
def tls_stack(devcluster: Any, tmp_path: Path) -> Any:
    pki = make_pki(tmp_path / "pki")
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=6)).decode()
    web = tmp_path / "web.yml"
    web.write_text(
        "tls_server_config:\n"
        f"  cert_file: {pki.server_cert}\n  key_file: {pki.server_key}\n"
        f"  client_ca_file: {pki.ca}\n  client_auth_type: RequireAndVerifyClientCert\n"
        "  min_version: TLS13\n"
        f"basic_auth_users:\n  prometheus: '$2y${hashed[4:]}'\n")
    (tmp_path / "prometheus.pass").write_text(PASSWORD + "\n")
    scrape = tmp_path / "scrape.yml"
    scrape.write_text(  # relative paths: relative to this file
        "tls_config: {ca_file: pki/ca.pem, cert_file: pki/client.pem, key_file: pki/client.key}\n"
        "basic_auth: {username: prometheus, password_file: prometheus.pass}\n")
    stack = Stack(tmp_path / "stack", port_base=free_port_base(8, avoid={devcluster.port_base}),
                  asok_dir=devcluster.asok_dir, ceph_conf=devcluster.conf_path,
                  exporter_web_config=web, exporter_scrape_config=scrape)
    try:
        stack.up()
        yield stack, pki
    finally:
        stack.purge()


def test_prometheus_scrapes_through_tls_client_cert_and_basic_auth(devcluster, tls_stack):
    stack, pki = tls_stack
    started = time.monotonic()
    # Prometheus as the client: the target is up over https, and the OSDs' series arrive.
    stack.wait_for_series(f'up{{job="{EXPORTER_JOB}"}} == 1', timeout=60)
    osds = len(devcluster.osd_ids())
    stack.wait_for_series(
        f'count(cephscope_daemon_up{{job="{EXPORTER_JOB}",ceph_daemon=~"osd.*"}} == 1) == {osds}',
        timeout=30)
    assert stack.query(f'ceph_osd_op_w{{job="{EXPORTER_JOB}"}}')
    (target,) = [t for t in stack.prometheus.active_targets()
                 if t["labels"]["job"] == EXPORTER_JOB]
    assert target["scrapeUrl"] == f"{stack.exporter_url}/metrics"
    assert target["scrapeUrl"].startswith("https://127.0.0.1:")
    assert target["health"] == "up" and target["lastError"] == ""

    url = f"{stack.exporter_url}/metrics"
    client = (pki.client_cert, pki.client_key)
    assert curl(url, pki, f"prometheus:{PASSWORD}", client)[:2] == (0, "200")
    assert curl(url, pki, "prometheus:wrong", client)[:2] == (0, "401")
    assert curl(url, pki, f"nobody:{PASSWORD}", client)[:2] == (0, "401")
    # no client certificate, or one another CA signed: no HTTP answer, the TLS layer refuses
    for cert in (None, (pki.other_client_cert, pki.other_client_key)):
        code, status, err = curl(url, pki, f"prometheus:{PASSWORD}", cert)
        # the server ends the handshake (an alert, or the connection closed): curl has no reply
        assert code != 0 and status == "000", (cert, code, status, err)
        assert curl(url, pki, f"prometheus:{PASSWORD}", client)[:2] == (0, "200")

    # min_version TLS13: a client that speaks at most TLS 1.2 is refused in the handshake
    port = int(stack.exporter_url.rsplit(":", 1)[1])
    with pytest.raises(ssl.SSLError):
        tls_version(port, pki, ssl.TLSVersion.TLSv1_2)
    assert tls_version(port, pki, ssl.TLSVersion.TLSv1_3) == "TLSv1.3"

    # all of that cost Prometheus nothing: the target stayed up, scrapes kept landing
    time.sleep(stack.scrape_interval_seconds + 1)
    assert stack.query(f'up{{job="{EXPORTER_JOB}"}} == 1')
    fresh = stack.query(f'time() - timestamp(up{{job="{EXPORTER_JOB}"}}) < '
                        f'{2 * stack.scrape_interval_seconds}')
    assert fresh, "the exporter target is not being scraped any more"
    print(f"\nlive tls stack: checks in {time.monotonic() - started:.1f}s")
