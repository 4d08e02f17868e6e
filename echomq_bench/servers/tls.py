"""TLS for a test or a trial run: a throwaway certificate authority and a
server certificate for 127.0.0.1, made by `openssl`, and the server settings
and URL that use them.

    files = throwaway_certificate(tmp_dir)
    spec = f"tls=redis-server {' '.join(server_args(files, tls_port))}"
    url = tls_url(files, tls_port)          # rediss://127.0.0.1:PORT/0?ssl_ca_certs=...

The embedded launcher keeps its plain loopback port for the readiness check;
the TLS port listens beside it, on loopback too (the launcher's --bind).
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from echomq_bench.servers.errors import ServerError

__all__ = ["TlsFiles", "TlsError", "throwaway_certificate", "server_args", "tls_url"]

DAYS = "1"


class TlsError(ServerError):
    """openssl is missing or refused to make the certificate."""


@dataclass(frozen=True)
class TlsFiles:
    ca_cert: Path
    cert: Path
    key: Path


def _openssl(*args: str, cwd: Path) -> None:
    binary = shutil.which("openssl")
    if binary is None:
        raise TlsError("openssl is not on PATH; install it with: apt-get install openssl")
    done = subprocess.run([binary, *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise TlsError(f"openssl {args[0]} failed: {done.stderr.strip()[-500:]}")


def throwaway_certificate(folder: Path | str) -> TlsFiles:
    """A CA and a server certificate for 127.0.0.1 and localhost, valid one day."""
    d = Path(folder)
    d.mkdir(parents=True, exist_ok=True)
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    _openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", DAYS,
             "-subj", "/CN=echomq throwaway CA", cwd=d)
    _openssl("req", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1", cwd=d)
    (d / "server.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", "server.crt", "-days", DAYS, "-extfile", "server.ext", cwd=d)
    for private in ("ca.key", "server.key"):
        (d / private).chmod(0o600)
    return TlsFiles(d / "ca.crt", d / "server.crt", d / "server.key")


def server_args(files: TlsFiles, tls_port: int) -> tuple[str, ...]:
    """redis-server / valkey-server settings for a TLS port; clients need no certificate."""
    return ("--tls-port", str(tls_port), "--tls-cert-file", str(files.cert), "--tls-key-file", str(files.key),
            "--tls-ca-cert-file", str(files.ca_cert), "--tls-auth-clients", "no")


def tls_url(files: TlsFiles, tls_port: int, password: str | None = None) -> str:
    auth = f":{quote(password, safe='')}@" if password else ""
    return f"rediss://{auth}127.0.0.1:{tls_port}/0?ssl_ca_certs={quote(str(files.ca_cert))}"
