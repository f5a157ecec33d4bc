"""HTTP side: routes, timeout header, exporter-toolkit web config (basic auth, TLS)."""

from __future__ import annotations

import base64
import shutil
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import bcrypt
import pytest

from cephscope.exporter.http import parse_listen_address
from cephscope.exporter.main import main
from cephscope.exporter.webconfig import WebConfigError, load_web_config
from tests.unit.exporter_fakes import serve, stop
from tests.unit.fake_asok import FakeCluster, parse_samples


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


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def _users_config(tmp_path: Path, password: bytes, rounds: int) -> Path:
    hashed = bcrypt.hashpw(password, bcrypt.gensalt(rounds=rounds)).decode()
    config = tmp_path / "web.yml"
    config.write_text(f"basic_auth_users:\n  prom: '$2y${hashed[4:]}'\n")
    return config


def test_unknown_user_costs_the_same_bcrypt_check_as_a_wrong_password(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = load_web_config(str(_users_config(tmp_path, b"s3cret", rounds=10)))
    costs: list[int] = []
    real_checkpw = bcrypt.checkpw

    def spy(password: bytes, hashed: bytes) -> bool:
        costs.append(int(hashed[4:6]))
        return real_checkpw(password, hashed)

    monkeypatch.setattr(bcrypt, "checkpw", spy)

    def best_of_three(header: str) -> float:
        times = []
        for _ in range(3):
            started = time.perf_counter()
            assert not config.check_authorization(header)
            times.append(time.perf_counter() - started)
        return min(times)

    wrong = best_of_three(_basic("prom", "wrong"))
    unknown = best_of_three(_basic("mallory", "wrong"))
    assert costs == [10] * 6, "every refusal is one bcrypt check at the configured cost"
    assert unknown > wrong / 3, f"unknown user {unknown * 1e3:.1f} ms, wrong password {wrong * 1e3:.1f} ms"


def test_password_over_72_bytes_is_401_not_a_truncated_match_or_a_crash(
    one_osd: FakeCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    password = "p" * 72  # bcrypt's limit: bcrypt < 5 compares only these 72 bytes
    server = serve(one_osd.dir, "--web.config.file",
                   str(_users_config(tmp_path, password.encode(), rounds=4)))
    url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
    try:
        assert get(url, {"Authorization": _basic("prom", password)})[0] == 200
        assert get(url, {"Authorization": _basic("prom", password + "extra")})[0] == 401
        # bcrypt >= 5 raises on such a password: never called with one, so no dropped
        # connection and no traceback either.
        real_checkpw = bcrypt.checkpw

        def bcrypt5(secret: bytes, hashed: bytes) -> bool:
            if len(secret) > 72:
                raise ValueError("password cannot be longer than 72 bytes")
            return real_checkpw(secret, hashed)

        monkeypatch.setattr(bcrypt, "checkpw", bcrypt5)
        assert get(url, {"Authorization": _basic("prom", password + "x" * 100)})[0] == 401
        assert get(url, {"Authorization": _basic("nobody", "x" * 100)})[0] == 401
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
        ("basic_auth_users:\n  a: '$2y$10$tooshort'\n", "not a bcrypt hash"),
        ("basic_auth_users:\n  a: '$2y$10$" + "!" * 53 + "'\n", "not a bcrypt hash"),
        ("basic_auth_users:\n  a: '$2y$99$" + "a" * 53 + "'\n", "cost 99 outside"),
        ("basic_auth_users:\n", "non-empty mapping"),
        ("basic_auth_users: {}\n", "non-empty mapping"),
        ("basic_auth_users: []\n", "non-empty mapping"),
        ("http_server_config:\n  headers: {X-A: [1]}\n", "headers must be a mapping"),
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
