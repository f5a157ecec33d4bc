"""TLS + basic auth + client certificates together, through curl (a real TLS client), and
strict web-config validation."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import bcrypt
import pytest

from cephscope.exporter.webconfig import WebConfigError, load_web_config
from tests.unit.exporter_fakes import serve, stop
from tests.unit.fake_asok import FakeCluster
from tests.unit.tls_pki import Pki, make_pki


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def web_config(pki: Pki, path: Path, extra_tls: str = "") -> Path:
    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=4)).decode()
    path.write_text(
        "tls_server_config:\n"
        f"  cert_file: {pki.server_cert}\n  key_file: {pki.server_key}\n"
        f"  client_ca_file: {pki.ca}\n  client_auth_type: RequireAndVerifyClientCert\n"
        f"{extra_tls}"
        f"basic_auth_users:\n  prom: '$2y${hashed[4:]}'\n"
    )
    return path


def curl(port: int, pki: Pki, *extra: str, user: str = "prom:s3cret",
         cert: tuple[Path, Path] | None = None) -> tuple[int, str]:
    """(curl exit code, HTTP status) of one scrape."""
    curl_bin = shutil.which("curl")
    assert curl_bin, "curl is needed (Debian: curl)"
    client = cert or (pki.client_cert, pki.client_key)
    argv = [curl_bin, "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "10",
            "--cacert", str(pki.ca), "-u", user, *extra]
    if client[0] is not None:
        argv += ["--cert", str(client[0]), "--key", str(client[1])]
    done = subprocess.run([*argv, f"https://127.0.0.1:{port}/metrics"],
                          capture_output=True, text=True, timeout=30)
    return done.returncode, done.stdout


def test_tls_basic_auth_and_client_certs_together(
    one_osd: FakeCluster, pki: Pki, tmp_path: Path
) -> None:
    config = web_config(
        pki, tmp_path / "web.yml",
        "  min_version: TLS12\n  max_version: TLS12\n"
        "  cipher_suites: [TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256]\n",
    )
    server = serve(one_osd.dir, "--web.config.file", str(config))
    port = server.server_address[1]
    try:
        assert curl(port, pki) == (0, "200")
        assert curl(port, pki, user="prom:wrong") == (0, "401")
        # No client certificate / one from another CA: refused in the handshake.
        assert curl(port, pki, cert=(None, None))[0] != 0  # type: ignore[arg-type]
        assert curl(port, pki, cert=(pki.other_client_cert, pki.other_client_key))[0] != 0
        # max_version TLS12: a TLS 1.3-only client fails; cipher suites: another one fails.
        assert curl(port, pki, "--tlsv1.3")[0] != 0
        assert curl(port, pki, "--tls-max", "1.2",
                    "--ciphers", "ECDHE-ECDSA-AES256-GCM-SHA384")[0] != 0
        assert curl(port, pki, "--tls-max", "1.2",
                    "--ciphers", "ECDHE-ECDSA-AES128-GCM-SHA256") == (0, "200")
        assert curl(port, pki) == (0, "200")  # still serving after the failures
    finally:
        stop(server)


def test_client_allowed_sans(one_osd: FakeCluster, pki: Pki, tmp_path: Path) -> None:
    config = web_config(pki, tmp_path / "web.yml", "  client_allowed_sans: [grafana]\n")
    server = serve(one_osd.dir, "--web.config.file", str(config))
    try:
        assert curl(server.server_address[1], pki)[0] != 0  # cert names prometheus only
    finally:
        stop(server)
    config = web_config(pki, tmp_path / "web.yml", "  client_allowed_sans: [prometheus]\n")
    server = serve(one_osd.dir, "--web.config.file", str(config))
    try:
        assert curl(server.server_address[1], pki) == (0, "200")
    finally:
        stop(server)


@pytest.mark.parametrize(
    ("tls_extra", "http_extra", "message"),
    [
        ("", "http_server_config:\n  headrs: {X-A: b}\n", "unknown http_server_config key.*headrs"),
        ("  max_vresion: TLS13\n", "", "unknown tls_server_config key.*max_vresion"),
        ("  min_version: TLS13\n  max_version: TLS12\n", "", "min_version TLS13 is above"),
        ("  max_version: TLS14\n", "", "max_version 'TLS14'"),
        ("  cipher_suites: [TLS_FOO]\n", "", "unknown or insecure suite.*TLS_FOO"),
        ("  curve_preferences: [X25519]\n", "", "curve_preferences is not supported"),
        ("  min_version: [TLS12]\n", "", "min_version must be a string, not list"),
        ("  max_version: {TLS13: 1}\n", "", "max_version must be a string, not dict"),
        ("  client_auth_type: [RequireAndVerifyClientCert]\n", "",
         "client_auth_type must be a string"),
        ("  client_ca_file: [ca.pem]\n", "", "client_ca_file must be a string"),
        ("  cipher_suites: [[TLS_AES_128_GCM_SHA256]]\n", "", "unknown or insecure suite"),
        ("  client_auth_type: RequireAnyClientCert\n", "", "unverified client certificates"),
        ("  client_auth_type: NoClientCert\n  client_ca_file: ca.pem\n", "",
         "client_ca_file is set but client_auth_type is NoClientCert"),
        ("  client_auth_type: RequireAndVerifyClientCert\n", "", "needs client_ca_file"),
        ("  client_allowed_sans: [a]\n", "", "client_allowed_sans needs verified"),
    ],
)
def test_web_config_is_strict(
    pki: Pki, tmp_path: Path, tls_extra: str, http_extra: str, message: str
) -> None:
    path = tmp_path / "web.yml"
    path.write_text(
        f"tls_server_config:\n  cert_file: {pki.server_cert}\n  key_file: {pki.server_key}\n"
        f"{tls_extra}{http_extra}"
    )
    with pytest.raises(WebConfigError, match=message) as raised:
        load_web_config(str(path))
    assert str(path) in str(raised.value)


def test_client_ca_file_defaults_to_require_and_verify(pki: Pki, tmp_path: Path) -> None:
    path = tmp_path / "web.yml"
    path.write_text(f"tls_server_config:\n  cert_file: {pki.server_cert}\n"
                    f"  key_file: {pki.server_key}\n  client_ca_file: {pki.ca}\n"
                    "http_server_config:\n  http2: false\n  headers: {X-Frame-Options: deny}\n")
    config = load_web_config(str(path))
    assert config.client_auth_type == "RequireAndVerifyClientCert"
    assert config.headers == {"X-Frame-Options": "deny"}
