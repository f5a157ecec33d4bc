"""A throw-away PKI made with the openssl CLI: a CA, a server certificate for 127.0.0.1 and
a client certificate, all signed by the CA (for TLS + client-certificate tests)."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_client_cert: Path  # signed by another CA
    other_client_key: Path


def _openssl(*argv: str) -> None:
    openssl = shutil.which("openssl")
    assert openssl, "openssl is needed to make test certificates"
    subprocess.run([openssl, *argv], check=True, capture_output=True, timeout=60)


def _ca(directory: Path, name: str) -> tuple[Path, Path]:
    cert, key = directory / f"{name}.pem", directory / f"{name}.key"
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
             "-nodes", "-days", "2", "-subj", f"/CN={name}", "-keyout", str(key),
             "-out", str(cert))
    return cert, key


def _leaf(directory: Path, name: str, ca: tuple[Path, Path], san: str) -> tuple[Path, Path]:
    cert, key, csr = (directory / f"{name}.pem", directory / f"{name}.key",
                      directory / f"{name}.csr")
    ext = directory / f"{name}.ext"
    ext.write_text(f"subjectAltName={san}\n")
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-subj", f"/CN={name}", "-keyout", str(key), "-out", str(csr))
    _openssl("x509", "-req", "-in", str(csr), "-CA", str(ca[0]), "-CAkey", str(ca[1]),
             "-CAcreateserial", "-days", "2", "-extfile", str(ext), "-out", str(cert))
    return cert, key


def make_pki(directory: Path) -> Pki:
    directory.mkdir(parents=True, exist_ok=True)
    ca = _ca(directory, "ca")
    other_ca = _ca(directory, "other-ca")
    server = _leaf(directory, "server", ca, "IP:127.0.0.1,DNS:localhost")
    client = _leaf(directory, "client", ca, "DNS:prometheus")
    other = _leaf(directory, "intruder", other_ca, "DNS:prometheus")
    return Pki(ca[0], server[0], server[1], client[0], client[1], other[0], other[1])
