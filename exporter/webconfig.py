"""``--web.config.file``: the Prometheus exporter-toolkit web configuration (subset).

Supported keys (same YAML as every Go exporter)::

    tls_server_config:
      cert_file: /path/server.crt
      key_file: /path/server.key
      client_ca_file: /path/ca.crt          # optional: require client certificates
      client_auth_type: RequireAndVerifyClientCert   # or NoClientCert (default)
      min_version: TLS12                    # optional: TLS10..TLS13
    basic_auth_users:
      alice: $2y$10$...                     # bcrypt hash (htpasswd -nBC 10 "" | tr -d ':')
    http_server_config:
      headers: {X-Frame-Options: deny}      # extra response headers

Anything else is rejected with a message naming the key, so a typo never silently disables
authentication.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ssl
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import bcrypt
import yaml

_TLS_KEYS = frozenset(
    {"cert_file", "key_file", "client_ca_file", "client_auth_type", "min_version"}
)
_TLS_VERSIONS = {
    "TLS10": ssl.TLSVersion.TLSv1,
    "TLS11": ssl.TLSVersion.TLSv1_1,
    "TLS12": ssl.TLSVersion.TLSv1_2,
    "TLS13": ssl.TLSVersion.TLSv1_3,
}
_CLIENT_AUTH = {
    "NoClientCert": ssl.CERT_NONE,
    "RequestClientCert": ssl.CERT_OPTIONAL,
    "RequireAnyClientCert": ssl.CERT_REQUIRED,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}


class WebConfigError(ValueError):
    """The web config file is unreadable or invalid; the message names the problem."""


@dataclass
class WebConfig:
    path: str = ""
    tls: dict[str, Any] | None = None
    users: dict[str, bytes] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
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
        try:
            ctx.load_cert_chain(resolve(self.tls["cert_file"]), resolve(self.tls["key_file"]))
        except (OSError, ssl.SSLError) as err:
            raise WebConfigError(f"{self.path}: cannot load cert_file/key_file: {err}") from None
        ctx.verify_mode = _CLIENT_AUTH[self.tls.get("client_auth_type", "NoClientCert")]
        if self.tls.get("client_ca_file"):
            try:
                ctx.load_verify_locations(resolve(self.tls["client_ca_file"]))
            except (OSError, ssl.SSLError) as err:
                raise WebConfigError(f"{self.path}: cannot load client_ca_file: {err}") from None
        return ctx

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
        hashed = self.users.get(user)
        if hashed is None:
            return False
        digest = hashlib.sha256(f"{user}\0{password}".encode()).digest()
        with self._lock:
            if any(hmac.compare_digest(digest, seen) for seen in self._verified):
                return True
        if not bcrypt.checkpw(password.encode(), hashed):
            return False
        with self._lock:
            self._verified.add(digest)
        return True


def load_web_config(path: str | None) -> WebConfig:
    if not path:
        return WebConfig()
    try:
        raw = yaml.safe_load(Path(path).read_text()) or {}
    except OSError as err:
        raise WebConfigError(f"{path}: cannot read web config: {err.strerror}") from None
    except yaml.YAMLError as err:
        raise WebConfigError(f"{path}: not valid YAML: {err}") from None
    if not isinstance(raw, dict):
        raise WebConfigError(f"{path}: top level must be a mapping")
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
        if tls.get("min_version", "TLS12") not in _TLS_VERSIONS:
            raise WebConfigError(f"{path}: tls_server_config.min_version {tls['min_version']!r}")
        if tls.get("client_auth_type", "NoClientCert") not in _CLIENT_AUTH:
            raise WebConfigError(
                f"{path}: tls_server_config.client_auth_type {tls['client_auth_type']!r}"
            )
        config.tls = tls
    users = raw.get("basic_auth_users")
    if users is not None:
        if not isinstance(users, dict):
            raise WebConfigError(f"{path}: basic_auth_users must be a mapping user: bcrypt-hash")
        for user, hashed in users.items():
            if not isinstance(hashed, str) or not hashed.startswith(("$2a$", "$2b$", "$2y$")):
                raise WebConfigError(f"{path}: basic_auth_users.{user} is not a bcrypt hash")
            # Go's bcrypt writes $2y$; Python's bcrypt checks $2b$ (same algorithm).
            config.users[str(user)] = ("$2b$" + hashed[4:]).encode()
    server = raw.get("http_server_config") or {}
    if not isinstance(server, dict):
        raise WebConfigError(f"{path}: http_server_config must be a mapping")
    headers = server.get("headers") or {}
    if not isinstance(headers, dict):
        raise WebConfigError(f"{path}: http_server_config.headers must be a mapping")
    config.headers = {str(k): str(v) for k, v in headers.items()}
    if config.tls:
        config.ssl_context()  # fail at startup, not at the first connection
    return config
