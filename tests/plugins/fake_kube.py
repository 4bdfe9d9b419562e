"""The fake kube-apiserver (tests/fake_kube) as a real process, with a kubeconfig pointing at it."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import secrets
import ssl
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import trustme
import yaml

from app.serving.embedded_redis import free_port
from devstack import http_client
from extenders.kube.client import KubeClient
from extenders.kube.config import build_http_client
from tests.fake_kube.client import FakeKubeClient

REPO = Path(__file__).resolve().parents[2]


def _b64(pem: bytes) -> str:
    return base64.b64encode(pem).decode("ascii")


def _pem_chain(leaf: trustme.LeafCert) -> bytes:
    return b"".join(blob.bytes() for blob in leaf.cert_chain_pems)


@dataclass(frozen=True)
class FakeKubeTLS:
    """TLS material for an https fake: the cluster CA clients trust, the server's certificate for
    127.0.0.1, and -- for client-certificate auth -- the CA the server requires client certificates
    from plus one client certificate it signed (what a kubeconfig's client-certificate-data carries)."""

    ca: trustme.CA
    server_cert: Path  # PEM chain, issued for IP 127.0.0.1
    server_key: Path
    client_ca_file: Path | None = None  # set: the server requires a client certificate signed by it
    client_cert: trustme.LeafCert | None = None

    @classmethod
    def create(cls, directory: Path, client_auth: bool = False) -> FakeKubeTLS:
        """Fresh CAs and certificates, written under ``directory``; ``client_auth`` makes the server
        require a client certificate (issued by a CA of its own, as a real cluster may do)."""
        directory.mkdir(parents=True, exist_ok=True)
        stem = directory / f"fake-kube-{secrets.token_hex(4)}"
        ca = trustme.CA()
        leaf = ca.issue_cert("127.0.0.1")
        server_cert, server_key = stem.with_suffix(".crt"), stem.with_suffix(".key")
        server_cert.write_bytes(_pem_chain(leaf))
        server_key.write_bytes(leaf.private_key_pem.bytes())
        if not client_auth:
            return cls(ca, server_cert, server_key)
        client_ca = trustme.CA()
        client_ca_file = stem.with_name(f"{stem.name}-client-ca.crt")
        client_ca_file.write_bytes(client_ca.cert_pem.bytes())
        client_cert = client_ca.issue_cert(common_name="gang-extender", organization_name="system:masters")
        return cls(ca, server_cert, server_key, client_ca_file, client_cert)

    def server_args(self) -> list[str]:
        args = ["--tls-cert", str(self.server_cert), "--tls-key", str(self.server_key)]
        if self.client_ca_file is not None:
            args += ["--client-ca", str(self.client_ca_file)]
        return args

    def ssl_context(self) -> ssl.SSLContext:
        """What the tests' own clients use: trust the CA, present the client certificate if any."""
        ctx = ssl.create_default_context()
        self.ca.configure_trust(ctx)
        if self.client_cert is not None:
            self.client_cert.configure_cert(ctx)
        return ctx

    def kubeconfig_cluster(self) -> dict[str, Any]:
        return {"certificate-authority-data": _b64(self.ca.cert_pem.bytes())}

    def kubeconfig_user(self) -> dict[str, Any]:
        if self.client_cert is None:
            return {}
        return {
            "client-certificate-data": _b64(_pem_chain(self.client_cert)),
            "client-key-data": _b64(self.client_cert.private_key_pem.bytes()),
        }


class FakeKube:
    """One fake API server process: `url`, `token`, `client`, `kubeconfig_path` and admin helpers."""

    def __init__(
        self,
        directory: Path,
        podgroups: bool = True,
        token: str | None = None,
        bookmark_interval: float = 1.0,
        history: int = 1000,
        tls: FakeKubeTLS | None = None,
    ) -> None:
        """``tls``: serve https (see FakeKubeTLS); ``token=""`` turns bearer-token auth off."""
        self.port = free_port()
        self.tls = tls
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        self._verify: ssl.SSLContext | bool = tls.ssl_context() if tls else http_client.trust()
        self.token = token if token is not None else f"fake-{secrets.token_hex(8)}"
        self.kubeconfig_path = directory / f"kubeconfig-{self.port}.yaml"
        self.kubeconfig_path.write_text(yaml.safe_dump(self._kubeconfig()))
        self.log_path = directory / f"fake-kube-{self.port}.log"
        args = [
            sys.executable,
            "-m",
            "tests.fake_kube",
            "--port",
            str(self.port),
            "--bookmark-interval",
            str(bookmark_interval),
            "--history",
            str(history),
        ]
        if self.token:
            args += ["--token", self.token]
        if not podgroups:
            args.append("--no-podgroups")
        if tls:
            args += tls.server_args()
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            args,
            cwd=REPO,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self.client = FakeKubeClient(self.url, self.token or None, verify=self._verify)
        self._wait_healthy()

    def _kubeconfig(self) -> dict[str, Any]:
        user: dict[str, Any] = {"token": self.token} if self.token else {}
        cluster: dict[str, Any] = {"server": self.url}
        if self.tls:
            cluster.update(self.tls.kubeconfig_cluster())
            user.update(self.tls.kubeconfig_user())
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": cluster}],
            "users": [{"name": "fake", "user": user}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake", "namespace": "default"}}],
            "current-context": "fake",
        }

    def edited_kubeconfig(self, path: Path, edit: Callable[[dict[str, Any]], None]) -> str:
        """A copy of this server's kubeconfig, with ``edit`` applied to it, written to ``path``."""
        config = yaml.safe_load(self.kubeconfig_path.read_text())
        edit(config)
        path.write_text(yaml.safe_dump(config))
        return str(path)

    def _wait_healthy(self, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"fake kube-apiserver exited with {self.proc.returncode}:\n{self.log()}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=0.5, verify=self._verify).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"fake kube-apiserver not up within {timeout}s:\n{self.log()}")

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")[-8000:]

    # admin helpers (see tests/fake_kube/__init__.py)

    def compact(self) -> int:
        return self.client.compact()

    def break_watches(self, resource: str | None = None) -> int:
        return self.client.break_watches(resource)

    def stats(self) -> dict[str, Any]:
        return self.client.stats()

    def requests(self, verb: str, resource: str) -> int:
        """How many `verb` requests (list, watch, get, create, bind, ...) `resource` has received."""
        return int(self.stats()["requests"].get(verb, {}).get(resource, 0))

    def wait_for_watches(self, resource: str, count: int = 1, timeout: float = 10.0) -> None:
        """Block until at least `count` watches on `resource` are open (e.g. a watcher is running)."""
        deadline = time.monotonic() + timeout
        while self.stats()["openWatches"].get(resource, 0) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"fewer than {count} open watches on {resource}: {self.stats()}")
            time.sleep(0.02)

    async def watching(self, resource: str, count: int = 1, timeout: float = 10.0) -> None:
        """``wait_for_watches`` for async tests: it yields to the event loop between polls, so a
        watcher running in the test's own loop can open the watch being waited for (the blocking
        wait would hold that loop, and with it the watch, until it timed out)."""
        deadline = time.monotonic() + timeout
        while self.stats()["openWatches"].get(resource, 0) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"fewer than {count} open watches on {resource}: {self.stats()}")
            await asyncio.sleep(0.02)

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(httpx.HTTPError):
                self.client.break_watches()  # lets uvicorn stop without waiting on open streams
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.client.close()
        self._log.close()


StartFakeKube = Callable[..., FakeKube]


@pytest.fixture
def fake_kube_factory(tmp_path: Path) -> Iterator[StartFakeKube]:
    """Factory for servers with other flags: ``fake_kube_factory(podgroups=False, bookmark_interval=0.2)``."""
    started: list[FakeKube] = []

    def _start(**kwargs: Any) -> FakeKube:
        server = FakeKube(tmp_path, **kwargs)
        started.append(server)
        return server

    yield _start
    for server in started:
        server.stop()


@pytest.fixture
def fake_kube(fake_kube_factory: StartFakeKube) -> FakeKube:
    """A fresh fake kube-apiserver per test: PodGroup CRD installed, token auth, 1 s bookmarks."""
    return fake_kube_factory()


MakeKube = Callable[..., KubeClient]


@pytest.fixture
async def kube_clients() -> AsyncIterator[MakeKube]:
    """Factory: ``kube_clients(transport="aiohttp", page_size=500, url=..., token=... | kubeconfig=...)``, a
    KubeClient as a replica builds it from its settings, closed at the end of the test."""
    made: list[KubeClient] = []

    def _make(transport: str = "aiohttp", page_size: int = 500, **kwargs: Any) -> KubeClient:
        http = build_http_client("on", transport=transport, **kwargs)
        assert http is not None
        made.append(KubeClient(http, page_size=page_size))
        return made[-1]

    yield _make
    for kube in made:
        await kube.aclose()
