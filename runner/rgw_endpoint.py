"""Where the RADOS Gateway benchmarks (swiftbench, hsbench, getput) find the gateway and its
keys, and how those keys are kept out of everything a run stores or prints.

An `RgwEndpoint` holds the S3 endpoint and keys and the Swift auth URL, user and key. It is
built in layers, each set field of a later layer winning:

1. the spec: cephscope's `rgw:` section (`endpoint`, `swift_auth_url`, `swift_user`,
   `keys_file`, and the keys themselves if one must), CBT's `client_endpoints.<name>` of
   driver `s3` that an hsbench names (`urls`, `access_key`, `secret_key`), CBT getput's own
   `auth`, `user` (the Swift user is `<user>:swift`, CBT's subuser) and `key`;
2. `--devcluster DIR`: the dev cluster's gateway and test user (the `cephscope` command reads
   them and hands them in: the runner never imports the dev cluster);
3. the environment: `CEPHSCOPE_RGW_ACCESS_KEY`, `CEPHSCOPE_RGW_SECRET_KEY`,
   `CEPHSCOPE_RGW_SWIFT_KEY`;
4. the flags: `--rgw-endpoint`, `--rgw-swift-auth-url`, `--rgw-swift-user`,
   `--rgw-keys-file` (a JSON or YAML mapping with any of `endpoint`, `access_key`,
   `secret_key`, `swift_auth_url`, `swift_user`, `swift_key`: the dev cluster's `rgw.json`
   is one).

Keys are never printed nor stored: `repr` leaves them out, `describe()` gives them redacted
(runner/redaction.py: the same digest for the same key, so two runs show whether they used
the same one), the resolved spec and `environment.json` hold only that, and the copy of the
spec a run keeps (`spec.yaml`) has every key value the spec held replaced by its redaction (a
`--resume` then takes them from the dev cluster, the environment, a keys file or the flags).
Keys reach the tools through files of mode 0600 or the tool's environment, never argv.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from cephscope.runner.redaction import REDACTED_PREFIX, redact_value
from cephscope.runner.spec_checker import Checker

ENV_ACCESS_KEY = "CEPHSCOPE_RGW_ACCESS_KEY"
ENV_SECRET_KEY = "CEPHSCOPE_RGW_SECRET_KEY"
ENV_SWIFT_KEY = "CEPHSCOPE_RGW_SWIFT_KEY"
# The keys of the spec's `rgw:` section.
RGW_SECTION_KEYS = frozenset({"endpoint", "swift_auth_url", "swift_user", "keys_file",
                              "access_key", "secret_key", "swift_key"})
SECRET_FIELDS = ("access_key", "secret_key", "swift_key")
# What a keys file may hold: RgwEndpoint's fields by the dev cluster's names.
KEYS_FILE_FIELDS = {"endpoint": "s3_url", "access_key": "access_key",
                    "secret_key": "secret_key", "swift_auth_url": "swift_auth_url",
                    "swift_user": "swift_user", "swift_key": "swift_key"}
# A key as S3 and Swift use them: printable ASCII, no blank. It ends up in a tool's
# config or credentials file, so nothing that would end a line or a value there.
KEY_PATTERN = re.compile(r"[\x21-\x7e]{1,256}")
# A Swift user (`account:subuser`) or S3 user name.
USER_PATTERN = re.compile(r"[A-Za-z0-9_.@-]+(:[A-Za-z0-9_.@-]+)?")
# A keys file is a few lines; anything bigger is not one.
KEYS_FILE_MAX_BYTES = 65536


class RgwEndpointError(ValueError):
    """The gateway's endpoint or keys cannot be had as asked (said before any change)."""


@dataclass(frozen=True)
class RgwEndpoint:
    """A gateway's S3 endpoint and Swift auth, with the keys of one user. The keys are kept
    out of repr(); `describe()` is what may be stored or shown."""

    s3_url: str | None = None
    access_key: str | None = field(default=None, repr=False)
    secret_key: str | None = field(default=None, repr=False)
    swift_auth_url: str | None = None
    swift_user: str | None = None
    swift_key: str | None = field(default=None, repr=False)
    # where each field came from: field -> "spec rgw section", "--devcluster", ...
    sources: tuple[tuple[str, str], ...] = ()

    @property
    def has_s3(self) -> bool:
        return bool(self.s3_url and self.access_key and self.secret_key)

    @property
    def has_swift(self) -> bool:
        return bool(self.swift_auth_url and self.swift_user and self.swift_key)

    def over(self, below: RgwEndpoint) -> RgwEndpoint:
        """This endpoint's set fields over `below`'s."""
        values: dict[str, Any] = {}
        sources = dict(below.sources)
        for f in dataclasses.fields(self):
            if f.name == "sources":
                continue
            mine = getattr(self, f.name)
            values[f.name] = mine if mine else getattr(below, f.name)
            if mine:
                sources[f.name] = dict(self.sources).get(f.name, "")
        return RgwEndpoint(**values, sources=tuple(sorted(sources.items())))

    def describe(self) -> dict[str, Any]:
        """For the results dir and the console: URLs and users as they are, keys redacted."""
        return {
            "endpoint": self.s3_url, "access_key": redact_value(self.access_key),
            "secret_key": redact_value(self.secret_key), "swift_auth_url": self.swift_auth_url,
            "swift_user": self.swift_user, "swift_key": redact_value(self.swift_key),
            "from": {("endpoint" if name == "s3_url" else name): source
                     for name, source in self.sources},
        }

    def missing(self, api: str) -> list[str]:
        """What an `api` ("s3" or "swift") benchmark lacks, by the names the spec and the
        flags use."""
        if api == "s3":
            wanted = (("endpoint", self.s3_url), ("access_key", self.access_key),
                      ("secret_key", self.secret_key))
        else:
            wanted = (("swift_auth_url", self.swift_auth_url), ("swift_user", self.swift_user),
                      ("swift_key", self.swift_key))
        return [name for name, value in wanted if not value]


def endpoint(source: str, **values: Any) -> RgwEndpoint:
    """An RgwEndpoint whose set fields all came from `source`."""
    kept = {k: v for k, v in values.items() if v}
    return RgwEndpoint(**kept, sources=tuple(sorted((k, source) for k in kept)))


# --------------------------------------------------------------------------- checks


def url_problem(value: Any) -> str | None:
    """Why `value` is no http(s) URL of a gateway (None: it is one)."""
    if not isinstance(value, str) or not value:
        return "must be an http:// or https:// URL"
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "must be an http:// or https:// URL with a host"
    if parts.username or parts.password:
        return "must not hold credentials (give keys through keys_file or the environment)"
    if any(c.isspace() for c in value):
        return "must not hold blanks"
    try:
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError:
        return "has a bad port"
    return None


def key_problem(value: Any) -> str | None:
    if not isinstance(value, str) or not KEY_PATTERN.fullmatch(value):
        return "must be a key of printable characters without blanks"
    return None


# --------------------------------------------------------------------------- the spec


@dataclass(frozen=True)
class RgwSettings:
    """What the spec says about the gateway (no file read yet): its endpoint, and a keys file
    to read when the run starts."""

    endpoint: RgwEndpoint = field(default_factory=RgwEndpoint)
    keys_file: str | None = None
    # every key value the spec held (also those a later place overrode): taken out of the
    # copy of the spec a run keeps
    spec_keys: tuple[str, ...] = field(default=(), repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {**self.endpoint.describe(), "keys_file": self.keys_file}


def parse_rgw(c: Checker, key_path: tuple[Any, ...], value: Any) -> RgwSettings | None:
    """The spec's `rgw:` section. A key given literally is accepted (CBT files carry them) and
    redacted in what the run stores; `keys_file` keeps it out of the spec altogether."""
    section = c.mapping(key_path, value)
    if not section:
        return None
    for key in section:
        if key not in RGW_SECTION_KEYS:
            c.error((*key_path, key), section[key],
                    f"unknown key (known: {', '.join(sorted(RGW_SECTION_KEYS))})")
    values: dict[str, Any] = {}
    for name, attr in (("endpoint", "s3_url"), ("swift_auth_url", "swift_auth_url")):
        if name in section:
            problem = url_problem(section[name])
            if problem:
                c.error((*key_path, name), section[name], problem)
            else:
                values[attr] = section[name]
    if "swift_user" in section:
        user = section["swift_user"]
        if not isinstance(user, str) or not USER_PATTERN.fullmatch(user):
            c.error((*key_path, "swift_user"), user, "must be a Swift user (account:subuser)")
        else:
            values["swift_user"] = user
    for name in SECRET_FIELDS:
        if name in section:
            _take_key(c, (*key_path, name), section[name], name, values)
    keys_file = section.get("keys_file")
    if keys_file is not None and (not isinstance(keys_file, str) or not keys_file):
        c.error((*key_path, "keys_file"), keys_file, "must be the path of a keys file")
        keys_file = None
    return RgwSettings(endpoint("spec rgw section", **values), keys_file)


def cbt_s3_endpoint(c: Checker, key_path: tuple[Any, ...], section: Any) -> RgwEndpoint:
    """CBT's `client_endpoints.<name>` of driver `s3` (client_endpoints/rgws3): `urls` (the
    first is used), `access_key`, `secret_key`; CBT's `user` names the user it would create
    (cephscope never creates one: the keys must be given)."""
    if not isinstance(section, Mapping):
        c.error(key_path, section, "must be a mapping")
        return RgwEndpoint()
    driver = section.get("driver")
    if driver != "s3":
        c.error((*key_path, "driver"), driver, "an S3 benchmark needs an endpoint of driver 's3'")
        return RgwEndpoint()
    values: dict[str, Any] = {}
    urls = section.get("urls")
    if urls is not None:
        first = urls[0] if isinstance(urls, list) and urls else urls
        problem = url_problem(first)
        if problem:
            c.error((*key_path, "urls"), first, problem)
        else:
            values["s3_url"] = first
            if isinstance(urls, list) and len(urls) > 1:
                c.warn((*key_path, "urls"), "several gateways: cephscope uses the first")
    for name in ("access_key", "secret_key"):
        if name in section:
            _take_key(c, (*key_path, name), section[name], name, values)
    return endpoint(f"spec {'.'.join(map(str, key_path))}", **values)


def cbt_getput_endpoint(c: Checker, key_path: tuple[Any, ...],
                        params: Mapping[str, Any]) -> RgwEndpoint:
    """CBT getput's `auth` (an auth URL or a list: the first is used), `user` (the Swift
    user is `<user>:swift`, the subuser CBT creates) and `key`."""
    values: dict[str, Any] = {}
    auth = params.get("auth")
    if auth is not None:
        first = auth[0] if isinstance(auth, list) and auth else auth
        problem = url_problem(first)
        if problem:
            c.error((*key_path, "auth"), first, problem)
        else:
            values["swift_auth_url"] = first
    user = params.get("user")
    if user is not None:
        if not isinstance(user, str) or not USER_PATTERN.fullmatch(user) or ":" in user:
            c.error((*key_path, "user"), user, "must be a user name (its Swift subuser is "
                                                "<user>:swift)")
        else:
            values["swift_user"] = f"{user}:swift"
    if "key" in params:
        _take_key(c, (*key_path, "key"), params["key"], "swift_key", values)
    return endpoint(f"spec {'.'.join(map(str, key_path))}", **values)


def _take_key(c: Checker, key_path: tuple[Any, ...], value: Any, name: str,
              values: dict[str, Any]) -> None:
    """A key from the spec into `values[name]`; a redacted one (a run's kept copy of its
    spec) is no key: the run takes it from another layer. The value is never shown."""
    if isinstance(value, str) and is_redacted(value):
        c.warn(key_path, "redacted in this copy of the spec: the key comes from --devcluster, "
                         "the environment, a keys file or the flags")
        return
    problem = key_problem(value)
    if problem:
        c.problem(key_path, f"{key_path[-1]}: {problem}")
    else:
        values[name] = value


def spec_secrets(endpoint_: RgwEndpoint) -> list[str]:
    """The key values a spec held (to take out of the copy a run keeps)."""
    return [v for v in (endpoint_.access_key, endpoint_.secret_key, endpoint_.swift_key) if v]


def redact_text(text: str, secrets: list[str]) -> str:
    """`text` with every occurrence of each secret replaced by its redaction."""
    for secret in sorted(set(secrets), key=len, reverse=True):
        text = text.replace(secret, redact_value(secret))
    return text


def is_redacted(value: str | None) -> bool:
    return bool(value) and str(value).startswith(REDACTED_PREFIX)


# --------------------------------------------------------------------------- the run's layers


def read_keys_file(path: Path, source: str) -> RgwEndpoint:
    """A keys file (JSON or YAML mapping; see the module docstring)."""
    try:
        if path.stat().st_size > KEYS_FILE_MAX_BYTES:
            raise RgwEndpointError(f"keys file {path}: larger than {KEYS_FILE_MAX_BYTES} bytes;"
                                   f" not a keys file")
        text = path.read_text()
    except OSError as exc:
        raise RgwEndpointError(f"keys file {path}: cannot read it: {exc.strerror}") from exc
    try:
        data = json.loads(text)
    except ValueError:
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError:
            data = None
    if not isinstance(data, Mapping):
        raise RgwEndpointError(f"keys file {path}: not a JSON or YAML mapping")
    values: dict[str, Any] = {}
    for name, attr in KEYS_FILE_FIELDS.items():
        value = data.get(name)
        if value is None:
            continue
        problem = (key_problem(value) if name in SECRET_FIELDS
                   else url_problem(value) if name in ("endpoint", "swift_auth_url")
                   else None if isinstance(value, str) and USER_PATTERN.fullmatch(value)
                   else "must be a user name")
        if problem:  # the value itself is not shown: it may be a key
            raise RgwEndpointError(f"keys file {path}: {name} {problem}")
        values[attr] = value
    return endpoint(source, **values)


def from_environment(environ: Mapping[str, str]) -> RgwEndpoint:
    values = {"access_key": environ.get(ENV_ACCESS_KEY),
              "secret_key": environ.get(ENV_SECRET_KEY),
              "swift_key": environ.get(ENV_SWIFT_KEY)}
    for name, env_name in (("access_key", ENV_ACCESS_KEY), ("secret_key", ENV_SECRET_KEY),
                           ("swift_key", ENV_SWIFT_KEY)):
        if values[name] and key_problem(values[name]):
            raise RgwEndpointError(f"${env_name}: {key_problem(values[name])}")
    return endpoint("environment", **values)


@dataclass(frozen=True)
class RgwFlags:
    """The command line's `--rgw-*` flags."""

    endpoint: str | None = None
    swift_auth_url: str | None = None
    swift_user: str | None = None
    keys_file: Path | None = None

    def problems(self) -> list[str]:
        found = []
        for flag, value in (("--rgw-endpoint", self.endpoint),
                            ("--rgw-swift-auth-url", self.swift_auth_url)):
            if value is not None and url_problem(value):
                found.append(f"{flag} {value!r}: {url_problem(value)}")
        if self.swift_user is not None and not USER_PATTERN.fullmatch(self.swift_user):
            found.append(f"--rgw-swift-user {self.swift_user!r}: not a Swift user "
                         f"(account:subuser)")
        return found


def resolve(spec: RgwSettings | None, devcluster: RgwEndpoint | None, flags: RgwFlags,
            environ: Mapping[str, str] | None = None) -> RgwEndpoint:
    """The endpoint a run uses: spec < dev cluster < environment < flags (module docstring).
    Raises RgwEndpointError for a keys file that cannot be read or a bad flag."""
    problems = flags.problems()
    if problems:
        raise RgwEndpointError("; ".join(problems))
    layers: list[RgwEndpoint] = []
    if spec is not None:
        layers.append(spec.endpoint)
        if spec.keys_file:
            layers.append(read_keys_file(Path(spec.keys_file).expanduser(),
                                         "spec rgw.keys_file"))
    if devcluster is not None:
        layers.append(devcluster)
    layers.append(from_environment(os.environ if environ is None else environ))
    if flags.keys_file is not None:
        layers.append(read_keys_file(flags.keys_file, "--rgw-keys-file"))
    layers.append(endpoint("flags", s3_url=flags.endpoint, swift_auth_url=flags.swift_auth_url,
                           swift_user=flags.swift_user))
    result = RgwEndpoint()
    for layer in layers:
        result = layer.over(result)
    return result
