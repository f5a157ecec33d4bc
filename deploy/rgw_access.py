"""How a client reaches a dev cluster's RADOS gateway: its S3 endpoint and keys, its Swift auth
URL, user and key. The dev cluster writes them to `<state dir>/rgw.json` (mode 0600: the keys
are secrets) when it makes the gateway's user; benchmarks read them from there."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from cephscope.deploy.cluster_layout import DevClusterError

SWIFT_AUTH_PATH = "/auth/1.0"


@dataclass(frozen=True)
class RgwAccess:
    """One gateway user's access. Keys are left out of repr (they would end up in logs)."""

    endpoint: str  # http://ADDR:PORT
    access_key: str = field(repr=False)
    secret_key: str = field(repr=False)
    swift_auth_url: str  # http://ADDR:PORT/auth/1.0
    swift_user: str  # user:subuser
    swift_key: str = field(repr=False)

    def save(self, path: Path) -> None:
        """Write atomically, readable by the owner only from the moment it exists."""
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.unlink(missing_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            os.fchmod(out.fileno(), 0o600)  # whatever the umask
            out.write(json.dumps(asdict(self), indent=2) + "\n")
        tmp.replace(path)

    @classmethod
    def load(cls, path: Path) -> RgwAccess:
        try:
            raw = json.loads(path.read_text())
        except FileNotFoundError:
            raise DevClusterError(f"{path} is missing: the gateway's user was never made "
                                  f"(purge the cluster and make it again)") from None
        except (OSError, ValueError) as exc:
            raise DevClusterError(f"{path} is damaged ({exc})") from exc
        names = [f.name for f in fields(cls)]
        if not isinstance(raw, dict):
            raise DevClusterError(f"{path} is damaged (not a JSON object)")
        bad = [n for n in names if not isinstance(raw.get(n), str) or not raw[n]]
        if bad:
            raise DevClusterError(f"{path} is damaged (no {', '.join(bad)})")
        return cls(**{n: raw[n] for n in names})
