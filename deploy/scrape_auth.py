"""The local stack's exporter behind TLS, client certificates and basic auth.

Two files, checked against each other before anything starts:

- the exporter's web config (`--exporter-web-config`, exporter-toolkit format, see
  cephscope.exporter.webconfig), given to the exporter as `--web.config.file`;
- how the stack's Prometheus scrapes it (`--exporter-scrape-config`), in Prometheus's own
  scrape-config keys::

      tls_config: {ca_file: ca.pem, cert_file: client.pem, key_file: client.key}
      basic_auth: {username: prometheus, password_file: prometheus.pass}

  Relative paths are relative to that file. `scheme` is `https` when the web config has TLS.

The same settings make the stack's own readiness request to the exporter, so a password the
exporter refuses is a clear error at `stack up`, not a target that stays down.
"""

from __future__ import annotations

import base64
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cephscope.exporter.webconfig import (
    WebConfig,
    WebConfigError,
    load_web_config,
    load_yaml_mapping,
)

_SCRAPE_KEYS = frozenset({"scheme", "tls_config", "basic_auth"})
_TLS_KEYS = frozenset({"ca_file", "cert_file", "key_file", "server_name", "min_version",
                       "max_version"})
_BASIC_AUTH_KEYS = frozenset({"username", "password", "password_file"})
_FILE_KEYS = ("ca_file", "cert_file", "key_file")


class ScrapeAuthError(ValueError):
    """A web config or scrape config problem; the message names the file and key."""


@dataclass
class ExporterScrapeAuth:
    web_config_path: Path
    web_config: WebConfig
    # the exporter job's Prometheus settings, paths absolute
    scrape: dict[str, Any] = field(default_factory=dict)

    @property
    def scheme(self) -> str:
        return str(self.scrape.get("scheme", "https" if self.web_config.tls else "http"))

    def job_settings(self) -> dict[str, Any]:
        return {**self.scrape, "scheme": self.scheme}

    def ssl_context(self) -> ssl.SSLContext | None:
        """A client context with the scrape's CA and client certificate (None: plain HTTP)."""
        if self.scheme != "https":
            return None
        tls = self.scrape.get("tls_config", {})
        ctx = ssl.create_default_context(cafile=tls.get("ca_file"))
        if tls.get("cert_file"):
            ctx.load_cert_chain(tls["cert_file"], tls["key_file"])
        return ctx

    def headers(self) -> dict[str, str]:
        auth = self.scrape.get("basic_auth")
        if not auth:
            return {}
        password = auth.get("password")
        if password is None:
            password = Path(auth["password_file"]).read_text().strip()
        token = base64.b64encode(f"{auth['username']}:{password}".encode()).decode()
        return {"Authorization": f"Basic {token}"}


def load_scrape_auth(web_config: Path, scrape_config: Path | None) -> ExporterScrapeAuth:
    try:
        web = load_web_config(str(web_config))
    except WebConfigError as exc:
        raise ScrapeAuthError(f"--exporter-web-config: {exc}") from None
    scrape: dict[str, Any] = {}
    where = str(scrape_config)
    if scrape_config is not None:
        try:
            raw = load_yaml_mapping(where, "scrape config")
        except WebConfigError as exc:
            raise ScrapeAuthError(str(exc)) from None
        scrape = _checked(where, scrape_config.parent, raw)
    _check_against_web_config(where, web, scrape)
    return ExporterScrapeAuth(web_config, web, scrape)


def _checked(where: str, base: Path, raw: dict[str, Any]) -> dict[str, Any]:
    unknown = set(raw) - _SCRAPE_KEYS
    if unknown:
        raise ScrapeAuthError(f"{where}: unknown key(s) {', '.join(sorted(map(str, unknown)))} "
                              f"(expected {', '.join(sorted(_SCRAPE_KEYS))})")
    if raw.get("scheme", "https") not in ("http", "https"):
        raise ScrapeAuthError(f"{where}: scheme {raw['scheme']!r}: http or https")
    scrape: dict[str, Any] = {k: v for k, v in raw.items() if k == "scheme"}
    for section, keys in (("tls_config", _TLS_KEYS), ("basic_auth", _BASIC_AUTH_KEYS)):
        if section not in raw:
            continue
        value = raw[section]
        if not isinstance(value, dict):
            raise ScrapeAuthError(f"{where}: {section} must be a mapping")
        bad = set(value) - keys
        if bad:
            raise ScrapeAuthError(f"{where}: unknown {section} key(s) "
                                  f"{', '.join(sorted(map(str, bad)))}")
        resolved = dict(value)
        for key in (*_FILE_KEYS, "password_file"):
            if key in resolved:
                path = Path(str(resolved[key]))
                path = path if path.is_absolute() else (base / path).resolve()
                if not path.is_file():
                    raise ScrapeAuthError(f"{where}: {section}.{key}: {path} does not exist")
                resolved[key] = str(path)
        scrape[section] = resolved
    tls = scrape.get("tls_config", {})
    if ("cert_file" in tls) != ("key_file" in tls):
        raise ScrapeAuthError(f"{where}: tls_config needs both cert_file and key_file")
    auth = scrape.get("basic_auth")
    if auth is not None:
        if not auth.get("username"):
            raise ScrapeAuthError(f"{where}: basic_auth.username is required")
        if ("password" in auth) == ("password_file" in auth):
            raise ScrapeAuthError(f"{where}: basic_auth needs one of password, password_file")
    return scrape


def _check_against_web_config(where: str, web: WebConfig, scrape: dict[str, Any]) -> None:
    """What the exporter demands, the scrape must bring (else the target never comes up)."""
    tls = scrape.get("tls_config", {})
    if web.tls:
        if scrape.get("scheme") == "http":
            raise ScrapeAuthError(f"{where}: scheme http, but the exporter's web config "
                                  f"{web.path} serves TLS only")
        if "ca_file" not in tls:
            raise ScrapeAuthError(f"{where}: tls_config.ca_file is needed to verify the "
                                  f"exporter's certificate ({web.path} serves TLS)")
        if web.client_auth_type == "RequireAndVerifyClientCert" and "cert_file" not in tls:
            raise ScrapeAuthError(f"{where}: tls_config.cert_file/key_file are needed: "
                                  f"{web.path} requires client certificates")
    elif tls:
        raise ScrapeAuthError(f"{where}: tls_config given, but the exporter's web config "
                              f"{web.path} has no tls_server_config")
    auth = scrape.get("basic_auth")
    if web.auth_required:
        if auth is None:
            raise ScrapeAuthError(f"{where}: basic_auth is needed: {web.path} has "
                                  f"basic_auth_users")
        if str(auth["username"]) not in web.users:
            raise ScrapeAuthError(f"{where}: basic_auth.username {auth['username']!r} is not "
                                  f"one of {web.path}'s basic_auth_users")
    elif auth is not None:
        raise ScrapeAuthError(f"{where}: basic_auth given, but {web.path} has no "
                              f"basic_auth_users")
