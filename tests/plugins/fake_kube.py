"""The fake kube-apiserver (tests/fake_kube) as a real process, with a kubeconfig pointing at it."""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from app.embedded_redis import free_port
from tests.fake_kube.client import FakeKubeClient

REPO = Path(__file__).resolve().parents[2]


class FakeKube:
    """One fake API server process: `url`, `token`, `client`, `kubeconfig_path` and admin helpers."""

    def __init__(
        self,
        directory: Path,
        podgroups: bool = True,
        token: str | None = None,
        bookmark_interval: float = 1.0,
        history: int = 1000,
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
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
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            args,
            cwd=REPO,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self.client = FakeKubeClient(self.url, self.token or None)
        self._wait_healthy()

    def _kubeconfig(self) -> dict[str, Any]:
        user: dict[str, Any] = {"token": self.token} if self.token else {}
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "fake", "user": user}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake", "namespace": "default"}}],
            "current-context": "fake",
        }

    def _wait_healthy(self, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"fake kube-apiserver exited with {self.proc.returncode}:\n{self.log()}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=0.5).status_code == 200:
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
