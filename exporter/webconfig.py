"""``--web.config.file``: the Prometheus exporter-toolkit web configuration (subset).

Supported keys (same YAML as every Go exporter)::

    tls_server_config:
      cert_file: /path/server.crt
      key_file: /path/server.key
      client_ca_file: /path/ca.crt          # with it, client_auth_type defaults to
      client_auth_type: RequireAndVerifyClientCert   # RequireAndVerifyClientCert
      client_allowed_sans: [prometheus.example]      # optional, needs verified client certs
      min_version: TLS12                    # TLS10..TLS13 (default TLS12)
      max_version: TLS13
      cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]   # Go names; TLS 1.2 only
      prefer_server_cipher_suites: true
    basic_auth_users:
      alice: $2y$10$...                     # bcrypt hash (htpasswd -nBC 10 "" | tr -d ':')
    http_server_config:
      headers: {X-Frame-Options: deny}      # extra response headers
      http2: false                          # accepted; this server speaks HTTP/1.1

Validation is strict: an unknown key anywhere names the key and the file (a typo must never
silently drop authentication or headers), and inconsistent settings are refused at start:
``client_ca_file`` with ``NoClientCert``, a verifying ``client_auth_type`` without
``client_ca_file``, ``min_version`` above ``max_version``, an unknown cipher suite.
``RequestClientCert`` and ``RequireAnyClientCert`` (accept unverified client certificates)
cannot be done with Python's TLS and are refused with that reason, as is
``curve_preferences``.

Basic auth gives nothing away by its timing or its failures: a user name that is not
configured costs the same bcrypt check as a wrong password (a dummy hash at the highest
configured cost), a password over bcrypt's 72-byte limit is refused with 401 (bcrypt
before 5.0 would compare its first 72 bytes only, 5.0 raises), every hash is checked to be
a well-formed bcrypt hash at start, and ``basic_auth_users`` present but empty or null is
refused (in exporter-toolkit it silently means "no authentication"). Every key's value
must have the expected type: ``min_version: [TLS12]`` is a config error naming the key.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import ssl
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import bcrypt
import yaml

_TLS_KEYS = frozenset({
    "cert_file", "key_file", "client_ca_file", "client_auth_type", "client_allowed_sans",
    "min_version", "max_version", "cipher_suites", "prefer_server_cipher_suites",
    "curve_preferences",
})
_HTTP_KEYS = frozenset({"headers", "http2"})
# tls_server_config keys whose value is one string (a path or a name).
_TLS_STRING_KEYS = ("cert_file", "key_file", "client_ca_file", "client_auth_type",
                    "min_version", "max_version")
# $2a$/$2b$/$2y$, a two-digit cost, 22 characters of salt and 31 of hash (bcrypt's base64).
_BCRYPT_HASH = re.compile(r"\$2[aby]\$(?P<cost>\d\d)\$[./A-Za-z0-9]{53}")
_BCRYPT_MIN_COST, _BCRYPT_MAX_COST = 4, 31
# bcrypt reads at most this many bytes of a password.
BCRYPT_MAX_PASSWORD_BYTES = 72
# Go's crypto/tls names (what exporter-toolkit configs contain) -> OpenSSL names.
_CIPHER_SUITES = {
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
}
_TLS_VERSIONS = {
    "TLS10": ssl.TLSVersion.TLSv1,
    "TLS11": ssl.TLSVersion.TLSv1_1,
    "TLS12": ssl.TLSVersion.TLSv1_2,
    "TLS13": ssl.TLSVersion.TLSv1_3,
}
_CLIENT_AUTH = {
    "NoClientCert": ssl.CERT_NONE,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
_UNVERIFIED_CLIENT_AUTH = frozenset({"RequestClientCert", "RequireAnyClientCert"})


class WebConfigError(ValueError):
    """The web config file is unreadable or invalid; the message names the problem."""


@dataclass
class WebConfig:
    path: str = ""
    tls: dict[str, Any] | None = None
    users: dict[str, bytes] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    # Checked instead of a user's hash when the user is unknown or the password too long,
    # so the answer takes as long as a wrong password (set by load_web_config).
    dummy_hash: bytes = b""
    # bcrypt costs ~0.1 s per check: remember digests of credentials already verified.
    _verified: set[bytes] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def auth_required(self) -> bool:
        return bool(self.users)

    def ssl_context(self) -> ssl.SSLContext | None:
        if not self.tls:
            return None
        base = Path(self.path).parent

        def resolve(p: str) -> str:
            return str(base / p) if not Path(p).is_absolute() else p
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = _TLS_VERSIONS[self.tls.get("min_version", "TLS12")]
        ctx.maximum_version = _TLS_VERSIONS[self.tls.get("max_version", "TLS13")]
        if self.tls.get("cipher_suites"):
            ctx.set_ciphers(":".join(_CIPHER_SUITES[name] for name in self.tls["cipher_suites"]))
        if self.tls.get("prefer_server_cipher_suites", True):
            ctx.options |= ssl.OP_CIPHER_SERVER_PREFERENCE
        try:
            ctx.load_cert_chain(resolve(self.tls["cert_file"]), resolve(self.tls["key_file"]))
        except (OSError, ssl.SSLError) as err:
            raise WebConfigError(f"{self.path}: cannot load cert_file/key_file: {err}") from None
        ctx.verify_mode = _CLIENT_AUTH[self.client_auth_type]
        if self.tls.get("client_ca_file"):
            try:
                ctx.load_verify_locations(resolve(self.tls["client_ca_file"]))
            except (OSError, ssl.SSLError) as err:
                raise WebConfigError(f"{self.path}: cannot load client_ca_file: {err}") from None
        return ctx

    @property
    def client_auth_type(self) -> str:
        default = "RequireAndVerifyClientCert" if (self.tls or {}).get("client_ca_file") else (
            "NoClientCert")
        return (self.tls or {}).get("client_auth_type") or default

    @property
    def allowed_sans(self) -> frozenset[str]:
        return frozenset(str(s) for s in (self.tls or {}).get("client_allowed_sans") or ())

    def client_allowed(self, peer_cert: dict[str, Any] | None) -> bool:
        """``client_allowed_sans``: the verified client certificate names one of them."""
        if not self.allowed_sans:
            return True
        if not peer_cert:
            return False
        return any(value in self.allowed_sans for _, value in peer_cert.get("subjectAltName", ()))

    def check_authorization(self, header: str | None) -> bool:
        """True if no users are configured or the Basic credentials match a user."""
        if not self.users:
            return True
        if not header or not header.startswith("Basic "):
            return False
        try:
            user, _, password = base64.b64decode(header[6:], validate=True).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            return False
        secret = password.encode()
        hashed = self.users.get(user)
        if hashed is None or len(secret) > BCRYPT_MAX_PASSWORD_BYTES:
            # Same cost as a wrong password: timing must not tell which users exist.
            bcrypt.checkpw(secret[:BCRYPT_MAX_PASSWORD_BYTES], self.dummy_hash or _dummy_hash(4))
            return False
        digest = hashlib.sha256(f"{user}\0{password}".encode()).digest()
        with self._lock:
            if any(hmac.compare_digest(digest, seen) for seen in self._verified):
                return True
        if not bcrypt.checkpw(secret, hashed):
            return False
        with self._lock:
            self._verified.add(digest)
        return True


def load_yaml_mapping(path: str, what: str) -> dict[str, Any]:
    """A YAML file whose top level is a mapping (empty file: {}); errors name the file."""
    try:
        raw = yaml.safe_load(Path(path).read_text()) or {}
    except OSError as err:
        raise WebConfigError(f"{path}: cannot read {what}: {err.strerror}") from None
    except yaml.YAMLError as err:
        raise WebConfigError(f"{path}: not valid YAML: {err}") from None
    if not isinstance(raw, dict):
        raise WebConfigError(f"{path}: top level must be a mapping")
    return raw


def load_web_config(path: str | None) -> WebConfig:
    if not path:
        return WebConfig()
    raw = load_yaml_mapping(path, "web config")
    unknown = set(raw) - {"tls_server_config", "basic_auth_users", "http_server_config"}
    if unknown:
        raise WebConfigError(f"{path}: unknown key(s) {', '.join(sorted(unknown))}")
    config = WebConfig(path=path)
    tls = raw.get("tls_server_config")
    if tls is not None:
        if not isinstance(tls, dict):
            raise WebConfigError(f"{path}: tls_server_config must be a mapping")
        bad = set(tls) - _TLS_KEYS
        if bad:
            names = ", ".join(sorted(bad))
            raise WebConfigError(f"{path}: unknown tls_server_config key(s) {names}")
        for key in ("cert_file", "key_file"):
            if not tls.get(key):
                raise WebConfigError(f"{path}: tls_server_config.{key} is required")
        _check_tls(path, tls)
        config.tls = tls
    if "basic_auth_users" in raw:
        config.users = _load_users(path, raw["basic_auth_users"])
        config.dummy_hash = _dummy_hash(max(_cost(h) for h in config.users.values()))
    server = raw.get("http_server_config") or {}
    if not isinstance(server, dict):
        raise WebConfigError(f"{path}: http_server_config must be a mapping")
    bad = set(server) - _HTTP_KEYS
    if bad:
        raise WebConfigError(f"{path}: unknown http_server_config key(s) {', '.join(sorted(bad))}")
    if not isinstance(server.get("http2", True), bool):
        raise WebConfigError(f"{path}: http_server_config.http2 must be true or false")
    headers = server.get("headers") or {}
    if not isinstance(headers, dict) or not all(
        isinstance(v, (str, int, float)) for v in headers.values()
    ):
        raise WebConfigError(f"{path}: http_server_config.headers must be a mapping "
                             "Header-Name: value")
    config.headers = {str(k): str(v) for k, v in headers.items()}
    if config.tls:
        config.ssl_context()  # fail at startup, not at the first connection
    return config


def _load_users(path: str, users: Any) -> dict[str, bytes]:
    """``basic_auth_users`` -> user: bcrypt hash ($2b$), every hash well formed."""
    if not isinstance(users, dict) or not users:
        # Empty or null would switch authentication off without a word: refuse it.
        raise WebConfigError(
            f"{path}: basic_auth_users must be a non-empty mapping user: bcrypt-hash"
            " (remove the key to serve without authentication)")
    loaded = {}
    for user, hashed in users.items():
        match = _BCRYPT_HASH.fullmatch(hashed) if isinstance(hashed, str) else None
        if match is None:
            raise WebConfigError(f"{path}: basic_auth_users.{user} is not a bcrypt hash "
                                 "($2y$COST$ and 53 characters, as htpasswd -B writes)")
        if not _BCRYPT_MIN_COST <= int(match["cost"]) <= _BCRYPT_MAX_COST:
            raise WebConfigError(f"{path}: basic_auth_users.{user}: bcrypt cost "
                                 f"{match['cost']} outside {_BCRYPT_MIN_COST}..{_BCRYPT_MAX_COST}")
        # Go's bcrypt writes $2y$; Python's bcrypt checks $2b$ (same algorithm).
        loaded[str(user)] = ("$2b$" + hashed[4:]).encode()
    return loaded


def _cost(hashed: bytes) -> int:
    return int(hashed[4:6])


def _dummy_hash(cost: int) -> bytes:
    """A well-formed hash no password matches in practice; checking it costs ``cost``."""
    return f"$2b${cost:02d}${'.' * 53}".encode()


def _check_tls(path: str, tls: dict[str, Any]) -> None:
    """Refuse inconsistent or unsupported TLS settings, naming the key."""
    where = f"{path}: tls_server_config"
    for key in _TLS_STRING_KEYS:
        if key in tls and tls[key] is not None and not isinstance(tls[key], str):
            raise WebConfigError(f"{where}.{key} must be a string, not "
                                 f"{type(tls[key]).__name__} {tls[key]!r}")
    versions = list(_TLS_VERSIONS)
    for key, default in (("min_version", "TLS12"), ("max_version", "TLS13")):
        if tls.get(key, default) not in _TLS_VERSIONS:
            raise WebConfigError(
                f"{where}.{key} {tls[key]!r}: expected one of {', '.join(versions)}"
            )
    if versions.index(tls.get("min_version", "TLS12")) > versions.index(
        tls.get("max_version", "TLS13")
    ):
        raise WebConfigError(f"{where}: min_version {tls['min_version']} is above max_version "
                             f"{tls.get('max_version', 'TLS13')}")
    auth = tls.get("client_auth_type")
    if auth in _UNVERIFIED_CLIENT_AUTH:
        raise WebConfigError(
            f"{where}.client_auth_type {auth}: accepting unverified client certificates is not"
            " supported (Python's TLS verifies every client certificate it asks for); use"
            " RequireAndVerifyClientCert or VerifyClientCertIfGiven with client_ca_file"
        )
    if auth is not None and auth not in _CLIENT_AUTH:
        raise WebConfigError(f"{where}.client_auth_type {auth!r}: expected one of "
                             f"{', '.join(sorted(_CLIENT_AUTH | dict.fromkeys(_UNVERIFIED_CLIENT_AUTH)))}")
    if tls.get("client_ca_file") and auth == "NoClientCert":
        raise WebConfigError(f"{where}: client_ca_file is set but client_auth_type is "
                             "NoClientCert (client certificates would never be checked)")
    if auth in ("RequireAndVerifyClientCert", "VerifyClientCertIfGiven") and not tls.get(
        "client_ca_file"
    ):
        raise WebConfigError(f"{where}.client_auth_type {auth} needs client_ca_file "
                             "(the CA that signs client certificates)")
    sans = tls.get("client_allowed_sans")
    if sans is not None:
        if not isinstance(sans, list) or not all(isinstance(x, str) for x in sans):
            raise WebConfigError(f"{where}.client_allowed_sans must be a list of names")
        if not tls.get("client_ca_file"):
            raise WebConfigError(f"{where}.client_allowed_sans needs verified client "
                                 "certificates (client_ca_file)")
    suites = tls.get("cipher_suites")
    if suites is not None:
        if not isinstance(suites, list):
            raise WebConfigError(f"{where}.cipher_suites must be a list")
        unknown = [s for s in suites if not isinstance(s, str) or s not in _CIPHER_SUITES]
        if unknown:
            raise WebConfigError(f"{where}.cipher_suites: unknown or insecure suite(s) "
                                 f"{', '.join(map(str, unknown))}")
    if not isinstance(tls.get("prefer_server_cipher_suites", True), bool):
        raise WebConfigError(f"{where}.prefer_server_cipher_suites must be true or false")
    if "curve_preferences" in tls:
        raise WebConfigError(f"{where}.curve_preferences is not supported by this exporter "
                             "(OpenSSL picks the curves); remove it")
