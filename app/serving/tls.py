"""HTTPS for ``python -m app``: the serving pair and the client CA checked at start, and the pair
reloaded into the live SSL context when its files change.

uvicorn builds the SSL context from its own options (``ssl_certfile``, ``ssl_keyfile``,
``ssl_ca_certs``, ``ssl_cert_reqs``); this module only checks the files first, so that a missing,
unreadable or mismatched one stops the start with one line naming its setting, and keeps the
context's certificate current afterwards. Reloading loads the new pair into the same context:
OpenSSL copies a context's certificate into each connection when the connection is created, so new
handshakes use the new pair and open connections keep theirs. A pair is loaded only after it loaded
cleanly into a scratch context, from the very bytes that were checked (an in-memory file), so a
rotation caught half-way (the certificate written, the key not yet) leaves the previous pair
serving. No cryptography is done here: the ssl module (OpenSSL) parses and checks everything.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import ssl
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from app.settings import Settings, SettingsError, env_name

log = logging.getLogger(__name__)

_CERT, _KEY, _CA = env_name("tls_cert_file"), env_name("tls_key_file"), env_name("tls_client_ca_file")


@dataclass(frozen=True)
class TLSFiles:
    """The checked files: the serving pair and, for mutual TLS, the CA client certificates must chain to."""

    cert_file: str
    key_file: str
    client_ca_file: str | None = None

    @property
    def mutual(self) -> bool:
        return self.client_ca_file is not None


def _no_password() -> bytes:
    # Without a callback OpenSSL would prompt on the terminal for an encrypted key; an empty
    # password makes such a key fail to load instead, with an error naming the setting.
    return b""


def _read(path: str, variable: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise SettingsError(f"{variable}={path!r}: cannot read it: {exc.strerror or exc}") from None


@contextlib.contextmanager
def _as_file(data: bytes) -> Iterator[str]:
    """``data`` behind a path OpenSSL can open: an anonymous in-memory file where Linux has them."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("extender-tls", os.MFD_CLOEXEC)
        try:
            os.write(fd, data)
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    with tempfile.TemporaryDirectory(prefix="extender-tls-") as directory:  # created 0700
        path = Path(directory) / "pem"
        path.write_bytes(data)
        yield str(path)


def _check_certificates(pem: bytes, path: str, variable: str) -> None:
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(cadata=pem.decode("ascii"))
    except (ssl.SSLError, ValueError) as exc:  # ValueError: not text at all
        raise SettingsError(f"{variable}={path!r}: no PEM certificate in it ({exc})") from None


def load_pair(context: ssl.SSLContext, cert_pem: bytes, key_pem: bytes, cert_file: str, key_file: str) -> None:
    """Load the pair into ``context``, or SettingsError naming the setting at fault."""
    _check_certificates(cert_pem, cert_file, _CERT)
    try:
        with _as_file(cert_pem) as cert_path, _as_file(key_pem) as key_path:
            context.load_cert_chain(cert_path, key_path, password=_no_password)
    except ssl.SSLError as exc:
        if exc.reason == "KEY_VALUES_MISMATCH":
            raise SettingsError(
                f"{_KEY}={key_file!r}: does not match the certificate in {_CERT}={cert_file!r}"
            ) from None
        raise SettingsError(
            f"{_KEY}={key_file!r}: not a usable PEM private key (an encrypted key is not supported): {exc}"
        ) from None


def check_pair(cert_file: str, key_file: str) -> tuple[bytes, bytes]:
    """Read the pair and load it into a scratch context; its bytes, or SettingsError naming the setting."""
    cert_pem, key_pem = _read(cert_file, _CERT), _read(key_file, _KEY)
    load_pair(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER), cert_pem, key_pem, cert_file, key_file)
    return cert_pem, key_pem


def tls_files(settings: Settings) -> TLSFiles | None:
    """The TLS files to serve with (None: plain HTTP), each checked; SettingsError names what is wrong."""
    cert, key, ca = settings.tls_cert_file or None, settings.tls_key_file or None, settings.tls_client_ca_file or None
    if not cert and not key:
        if ca:
            raise SettingsError(f"{_CA}={ca!r}: client certificates need HTTPS: set {_CERT} and {_KEY} too")
        return None
    if not cert:
        raise SettingsError(f"{_CERT} is not set but {_KEY} is: HTTPS needs both")
    if not key:
        raise SettingsError(f"{_KEY} is not set but {_CERT} is: HTTPS needs both")
    check_pair(cert, key)
    if ca:
        _check_certificates(_read(ca, _CA), ca, _CA)
    return TLSFiles(cert, key, ca)


def harden(context: ssl.SSLContext) -> None:
    """What uvicorn leaves at its defaults: TLS 1.2 at least."""
    context.minimum_version = ssl.TLSVersion.TLSv1_2


_Stamp = tuple[tuple[int, int, int, int] | None, ...]


class CertificateReloader:
    """Polls the pair's files; when either changed, loads the pair into the live context."""

    def __init__(self, context: ssl.SSLContext, files: TLSFiles, interval: float) -> None:
        self.context = context
        self.files = files
        self.interval = interval
        self.reloads = 0
        self._stamp = self._stat()

    def _stat(self) -> _Stamp:
        stamps: list[tuple[int, int, int, int] | None] = []
        for path in (self.files.cert_file, self.files.key_file):
            try:
                st = os.stat(path)  # follows symlinks: a Secret volume swaps its ..data link
            except OSError:
                stamps.append(None)
            else:
                stamps.append((st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size))
        return tuple(stamps)

    def check(self) -> bool:
        """Reload when the files changed since the last look; True when a new pair is now served."""
        stamp = self._stat()
        if stamp == self._stamp:
            return False
        # Remembered even when the load fails: the next change (the rest of a rotation) retries.
        self._stamp = stamp
        cert_file, key_file = self.files.cert_file, self.files.key_file
        try:
            cert_pem, key_pem = check_pair(cert_file, key_file)
            load_pair(self.context, cert_pem, key_pem, cert_file, key_file)
        except SettingsError as exc:
            log.warning("TLS certificate not reloaded, the previous one is still served: %s", exc)
            return False
        self.reloads += 1
        log.info("TLS certificate reloaded from %s and %s: new connections use it", cert_file, key_file)
        return True

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            self.check()
