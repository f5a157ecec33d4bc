"""HTTP side: routes, timeout header, exporter-toolkit web config (basic auth, TLS)."""

from __future__ import annotations

import base64
import shutil
import ssl
import subprocess
import threading
import urllib.error
import urllib.request
from pathlib import Path

import bcrypt
import pytest

from cephscope.exporter.http import parse_listen_address
from cephscope.exporter.main import build_parser, main, make_server
from cephscope.exporter.webconfig import WebConfigError, load_web_config
from tests.unit.fake_asok import FakeCluster, only_collectors, parse_samples


def serve(run_dir: Path, *flags: str):
    args = build_parser().parse_args(
        ["--ceph.asok-dir", str(run_dir), "--web.listen-address", "127.0.0.1:0",
         *only_collectors("perf", "histogram"), *flags]
    )
    server = make_server(args)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server


def stop(server) -> None:
    server.shutdown()
    server.server_close()
    server.scraper.close()


def get(url: str, headers: dict[str, str] | None = None, context=None) -> tuple[int, str, str]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as resp:
            return resp.status, resp.headers.get("Content-Type", ""), resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.headers.get("Content-Type", ""), err.read().decode()


def test_routes(one_osd: FakeCluster) -> None:
    server = serve(one_osd.dir, "--web.telemetry-path", "/ceph-metrics")
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        status, ctype, body = get(base + "/ceph-metrics",
                                  {"X-Prometheus-Scrape-Timeout-Seconds": "5"})
        assert status == 200 and ctype.startswith("text/plain; version=0.0.4")
        samples = parse_samples(body)
        assert samples['cephscope_daemon_up{ceph_daemon="osd.0"}'] == 1
        assert 'ceph_osd_op_w{ceph_daemon="osd.0"}' in samples
        status, ctype, body = get(base + "/")
        assert status == 200 and "/ceph-metrics" in body and "histogram" in body
        assert get(base + "/metrics")[0] == 404
    finally:
        stop(server)


def test_basic_auth_with_bcrypt(one_osd: FakeCluster, tmp_path: Path) -> None:
    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=4)).decode()
    go_style = "$2y$" + hashed[4:]  # what htpasswd -B writes
    config = tmp_path / "web.yml"
    config.write_text(f"basic_auth_users:\n  prom: '{go_style}'\n")
    server = serve(one_osd.dir, "--web.config.file", str(config))
    url = f"http://127.0.0.1:{server.server_address[1]}/metrics"

    def auth(user: str, password: str) -> dict[str, str]:
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        return {"Authorization": f"Basic {token}"}

    try:
        assert get(url)[0] == 401
        assert get(url, auth("prom", "wrong"))[0] == 401
        assert get(url, auth("other", "s3cret"))[0] == 401
        assert get(url, auth("prom", "s3cret"))[0] == 200
        assert get(url, auth("prom", "s3cret"))[0] == 200  # cached verification path
    finally:
        stop(server)


def test_tls(one_osd: FakeCluster, tmp_path: Path) -> None:
    openssl = shutil.which("openssl")
    assert openssl, "openssl is needed to make a test certificate"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(tmp_path / "key.pem"), "-out", str(tmp_path / "cert.pem")],
        check=True, capture_output=True, timeout=60,
    )
    config = tmp_path / "web.yml"
    config.write_text("tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n")
    server = serve(one_osd.dir, "--web.config.file", str(config))
    port = server.server_address[1]
    try:
        context = ssl.create_default_context(cafile=str(tmp_path / "cert.pem"))
        status, _, body = get(f"https://127.0.0.1:{port}/metrics", context=context)
        assert status == 200 and "cephscope_daemon_up" in body
        with pytest.raises(OSError):  # plain HTTP to a TLS port
            urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
    finally:
        stop(server)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("basic_auth_user:\n  a: b\n", "unknown key"),
        ("basic_auth_users:\n  a: plain\n", "not a bcrypt hash"),
        ("tls_server_config:\n  cert_file: x.pem\n", "key_file is required"),
        ("tls_server_config:\n  cert_file: x.pem\n  key_file: y.pem\n", "cannot load"),
        ("tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: TLS9\n",
         "min_version"),
        ("- a\n", "must be a mapping"),
        ("a: [\n", "not valid YAML"),
    ],
)
def test_web_config_errors_name_the_problem(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "web.yml"
    path.write_text(text)
    with pytest.raises(WebConfigError, match=message):
        load_web_config(str(path))


def test_listen_address_parsing() -> None:
    assert parse_listen_address("127.0.0.1:9967") == ("127.0.0.1", 9967)
    assert parse_listen_address("[::1]:80") == ("::1", 80)
    assert parse_listen_address(":9967") == ("", 9967)  # every interface
    assert parse_listen_address("[::]:9967") == ("::", 9967)
    assert parse_listen_address("ceph-host1:9967") == ("ceph-host1", 9967)
    with pytest.raises(ValueError, match="HOST:PORT"):
        parse_listen_address("localhost")
    with pytest.raises(ValueError, match=r"\[ADDR\]:PORT"):
        parse_listen_address("::1:9967")
    with pytest.raises(ValueError, match="brackets"):
        parse_listen_address("[::1:9967")


def test_main_rejects_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--web.listen-address", "nonsense"]) == 2
    assert "HOST:PORT" in capsys.readouterr().err
    assert main(["--web.listen-address", "127.0.0.1:0",
                 "--web.config.file", str(tmp_path / "missing.yml")]) == 2
    assert "cannot read web config" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert "cephscope-exporter" in capsys.readouterr().out
