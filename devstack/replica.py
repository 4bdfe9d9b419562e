"""One extender replica as a process: ``python -m app`` on a free loopback port, its log kept."""

from __future__ import annotations

import os
import signal
import ssl
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from app.serving.embedded_redis import die_with_parent, free_port, stop_process
from devstack import http_client

REPO = Path(__file__).resolve().parents[1]


class ServerProcess:
    """One replica: a uvicorn process serving the app, with its log kept for failures.

    With ``EXTENDER_TLS_CERT_FILE`` in ``env`` it serves HTTPS (``url`` says so) and ``client_tls``
    is what this side's requests use (the CA to trust, and the client certificate under mutual
    TLS); ``health_port`` starts the plain-HTTP health port, which the waits then probe."""

    def __init__(
        self,
        env: dict[str, str],
        name: str,
        port: int | None = None,
        *,
        health_port: int | None = None,
        client_tls: ssl.SSLContext | None = None,
        tree: Path = REPO,
    ) -> None:
        """``tree``: the checkout whose code the replica runs (another one: benchmarks comparing two trees)."""
        self.port = port or free_port()
        self.name = name
        self.url = f"{'https' if env.get('EXTENDER_TLS_CERT_FILE') else 'http'}://127.0.0.1:{self.port}"
        self.health_port = health_port
        self.client_tls = client_tls
        self.probe_url = f"http://127.0.0.1:{health_port}" if health_port else self.url
        if health_port:
            env = {**env, "EXTENDER_HEALTH_PORT": str(health_port)}
        self.log_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"extender-{name}-{self.port}.log"
        full_env = {**os.environ, **env, "EXTENDER_REPLICA_ID": name, "PYTHONUNBUFFERED": "1"}
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "app", "--host", "127.0.0.1", "--port", str(self.port)],
            cwd=tree,
            env=full_env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            preexec_fn=die_with_parent,  # no replica outlives a killed test run
        )

    def wait_healthy(self, timeout: float = 60.0) -> ServerProcess:
        # Generous: a healthy start returns at once and an exit fails at once; only a start-up starved
        # by control planes beside it (a warm whole-suite run on two cores) needs the margin.
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server {self.name} exited with {self.proc.returncode}:\n{self.log()}")
            try:
                if httpx.get(f"{self.probe_url}/healthz", timeout=0.5, verify=self.verify).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"server {self.name} not healthy within {timeout}s:\n{self.log()}")

    def wait_ready(self, timeout: float = 30.0) -> ServerProcess:
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server {self.name} exited with {self.proc.returncode}:\n{self.log()}")
            try:
                last = httpx.get(f"{self.probe_url}/readyz", timeout=1.0, verify=self.verify)
                if last.status_code == 200:
                    return self
            except httpx.HTTPError as exc:
                last = exc
            time.sleep(0.1)
        raise RuntimeError(f"server {self.name} not ready within {timeout}s (last: {last}):\n{self.log()}")

    @property
    def verify(self) -> ssl.SSLContext | bool:
        return self.client_tls if self.client_tls is not None else http_client.trust()

    def client(self, timeout: float = 10.0) -> httpx.Client:
        """A client for the replica's main port, with its TLS settings."""
        return httpx.Client(base_url=self.url, verify=self.verify, timeout=timeout)

    def get(self, path: str, timeout: float = 5.0) -> httpx.Response:
        return httpx.get(f"{self.url}{path}", verify=self.verify, timeout=timeout)

    def readiness(self) -> dict[str, object]:
        """The replica's /readyz document (``is_leader``, ``synced`` and the rest)."""
        answer: dict[str, object] = httpx.get(f"{self.probe_url}/readyz", timeout=2, verify=self.verify).json()
        return answer

    def log(self, tail: int | None = 8000) -> str:
        """The log's last ``tail`` characters (None: all of it)."""
        self._log.flush()
        text = self.log_path.read_text(errors="replace")
        return text if tail is None else text[-tail:]

    def kill(self) -> None:
        """SIGKILL: the replica dies without any clean-up, as in a node crash."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        stop_process(self.proc)
        self._log.close()
