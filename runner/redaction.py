"""Secrets in what a run stores: config values whose name says they hold a password, key or
token are replaced by a digest before `environment.json` is written and before `compare`
shows a difference.

The config store can hold credentials (`rgw_keystone_admin_password`, the dashboard's
`mgr/dashboard/*PASSWORD*`, `rgw_crypt_s3_kms_encryption_keys`, `mgr/restful/keys/<user>`);
results dirs are copied around and attached to tickets. A redacted value still shows whether
it changed between two runs: the digest is the same for the same value. The digest is a slow
salted hash (PBKDF2), so a guessable password is not cheap to test against it, and is short,
so it is no use as a fingerprint beyond "same or not".

Which names: split on anything but letters and digits (`rgw_keystone_admin_password` ->
rgw, keystone, admin, password); a name is secret when one of its words is a secret word
(password, passwd, secret, token, key, keys, credential(s), passphrase, …) unless its last word
says the value only describes or points at the secret (`…_password_path`, `…_token_file`,
`…_key_threshold`, `…_token_ttl`). `keyring` and `keyfile` are single words, not `key`: their
values are paths, kept so a run shows which keyring it used.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

SECRET_WORDS = frozenset({
    "password", "passwords", "passwd", "passphrase", "secret", "secrets", "token", "tokens",
    "key", "keys", "credential", "credentials", "privkey", "apikey", "accesskey", "secretkey",
})
# a last word that makes the value a description of a secret, not the secret itself
NOT_THE_SECRET = frozenset({
    "path", "file", "dir", "url", "uri", "ttl", "threshold", "engine", "type", "size", "bits",
    "len", "length", "max", "min", "count", "interval", "timeout", "enabled", "name", "mode",
    "prefix", "format", "algorithm", "rotation", "expiry", "lifetime", "hashes",
    "maxkeys", "maxbytes", "delay",  # kernel.keys.* sysctls: limits of the kernel keyring
})
# the fields of a `{"name": …}` config entry that describe it, not hold its value
ENTRY_FIELDS = frozenset({"name", "section", "level", "mask", "can_update_at_runtime",
                          "location_type", "location_value"})
REDACTED_PREFIX = "<redacted "
_WORDS = re.compile(r"[^a-z0-9]+")
_SALT = b"cephscope-redaction-v1"
_ROUNDS = 50_000


def is_secret_name(name: str) -> bool:
    words = [w for w in _WORDS.split(name.lower()) if w]
    if not words or words[-1] in NOT_THE_SECRET:
        return False
    return any(w in SECRET_WORDS for w in words)


def redact_value(value: Any) -> Any:
    """`<redacted 0123456789ab>`: the same for the same value; None and "" stay as they are
    (nothing to hide, and "not set" is worth seeing); an already redacted value is kept."""
    if value is None or value == "":
        return value
    text = str(value)
    if text.startswith(REDACTED_PREFIX):
        return text
    digest = hashlib.pbkdf2_hmac("sha256", text.encode(), _SALT, _ROUNDS).hex()[:12]
    return f"{REDACTED_PREFIX}{digest}>"


def _redact_all(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _redact_all(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact_all(v) for v in value]
    return redact_value(value)


def redact(value: Any) -> Any:
    """A copy of a JSON-like value with every secret redacted: the value under a secret-named
    key (`{"rgw_keystone_admin_password": …}`, a `config diff` entry), and the values of a
    `{"name": …, "value": …}` entry with a secret name (`config dump`), whose describing
    fields (section, level, mask) stay."""
    if isinstance(value, list):
        return [redact(v) for v in value]
    if not isinstance(value, Mapping):
        return value
    named_secret = isinstance(value.get("name"), str) and is_secret_name(value["name"])
    out: dict[Any, Any] = {}
    for key, item in value.items():
        secret_key = isinstance(key, str) and is_secret_name(key)
        if (named_secret and key not in ENTRY_FIELDS) or secret_key:
            out[key] = _redact_all(item)
        else:
            out[key] = redact(item)
    return out
